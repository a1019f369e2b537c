"""Writes a two-input model that takes token ids, for the tests of model-file inputs (profile
--input NAME=SHAPE[:DTYPE[:LOW..HIGH]]):

    forward(ids, mask) = Linear(16 -> 4)(Embedding(1000, 16)(ids) * mask[..., None])

ids: [batch, 8] int64 token ids in 0..1000; mask: [batch, 8] float32. 16,068 parameters
(1000*16 + 16*4 + 4); the one contraction is 2 * batch * 8 * 16 * 4 FLOPs.

    make_token_model.py torchscript OUT.pt   torch.jit.script (Debian's /usr/bin/python3, torch 1.13)
    make_token_model.py export OUT.pt2       torch.export.save, for batch 2 (the project's .venv)
    make_token_model.py savedmodel DIR       a tf.Module SavedModel, serving signature (ids, mask), batch free
"""

import os
import sys

VOCAB, SEQ, DIM, CLASSES = 1000, 8, 16, 4


def torch_module():
    import torch

    class TokenModel(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(VOCAB, DIM)
            self.lin = torch.nn.Linear(DIM, CLASSES)

        def forward(self, ids, mask):
            return self.lin(self.emb(ids) * mask.unsqueeze(-1))

    torch.manual_seed(0)
    return TokenModel().eval()


def savedmodel(out):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf

    class TokenModel(tf.Module):
        def __init__(self):
            super().__init__()
            rng = np.random.default_rng(0)
            self.emb = tf.Variable(rng.standard_normal((VOCAB, DIM)).astype(np.float32), name="emb")
            self.w = tf.Variable(rng.standard_normal((DIM, CLASSES)).astype(np.float32), name="w")
            self.b = tf.Variable(np.zeros(CLASSES, np.float32), name="b")

        @tf.function(
            input_signature=[
                tf.TensorSpec([None, SEQ], tf.int64, name="ids"),
                tf.TensorSpec([None, SEQ], tf.float32, name="mask"),
            ]
        )
        def __call__(self, ids, mask):
            h = tf.gather(self.emb, ids) * mask[..., None]
            return tf.matmul(h, self.w) + self.b

    model = TokenModel()
    tf.saved_model.save(model, out, signatures=model.__call__)


def main(kind, out):
    if kind == "savedmodel":
        savedmodel(out)
        return
    import torch

    net = torch_module()
    if kind == "torchscript":
        torch.jit.script(net).save(out)
    elif kind == "export":
        ids, mask = torch.randint(0, VOCAB, (2, SEQ)), torch.ones(2, SEQ)
        torch.export.save(torch.export.export(net, (ids, mask)), out)
    else:
        sys.exit(f"unknown kind '{kind}' (torchscript, export, savedmodel)")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
