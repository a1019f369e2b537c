"""Exports PyTorch networks to ONNX (Debian's python3-torch and python3-torchvision, random
weights, no downloads) with independent expectations, for the importer's validation test and
its benchmark.

Usage: /usr/bin/python3 export_torch_fixtures.py OUT_DIR            # validation fixtures
       /usr/bin/python3 export_torch_fixtures.py OUT_DIR --bench    # benchmark fixtures

Validation writes, per network, NAME.onnx (batch dimension symbolic: "batch") and one entry of
expected.json: multiply-accumulates per sample counted by forward hooks on the PyTorch modules
(Conv2d, Linear, MultiheadAttention: a count that never sees the ONNX graph), PyTorch's own
parameter count, the multiply-accumulates per sample of one training step as autograd executes
them (forward, loss, backward: every matrix product and convolution PyTorch dispatches, counted by
a dispatch mode from the operands' shapes, never seeing the ONNX graph), and, for the one export
that lets the exporter fold batch norms into the convolutions before them, the channels folded (each
BatchNorm2d's 2*C parameters become a C-element convolution bias).
Benchmark writes resnet50 and a ~1,000-node transformer, each once with embedded weights and
once with the weights in an external file.
"""

import json
import os
import sys
import warnings

import torch
import torchvision
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from neuralcost_worker.torch import reference as reference_torch  # noqa: E402

warnings.filterwarnings("ignore")
out = sys.argv[1]
os.makedirs(out, exist_ok=True)


def distinct_weights(net):
    """Gives every parameter its own random values. PyTorch's exporter stores parameters with
    equal values once (fresh LayerNorm weights are all ones; nn.TransformerEncoder deep-copies
    one layer), and the ONNX file then really holds fewer parameters than the module."""
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.randn(p.shape, generator=generator) * 0.05)
    return net


def hooked_macs(net, example):
    """Multiply-accumulates of one forward pass per sample, from module shapes."""
    total = [0]

    def conv(m, inputs, output):
        total[0] += output.numel() * (m.in_channels // m.groups) * m.kernel_size[0] * m.kernel_size[1]

    def linear(m, inputs, output):
        total[0] += output.numel() * m.in_features

    def recurrent(m, inputs, output):
        b, t, _ = inputs[0].shape  # batch_first; every layer: gates x (input + hidden) products per step
        gates = {"LSTM": 4, "GRU": 3}.get(type(m).__name__, 1)
        for layer in range(m.num_layers):
            width = m.input_size if layer == 0 else m.hidden_size
            total[0] += b * t * gates * (width + m.hidden_size) * m.hidden_size

    def attention(m, inputs, output):
        b, t, d = inputs[0].shape  # batch_first; projections, scores, weighted values, out-projection
        total[0] += b * (t * d * 3 * d + 2 * t * t * d + t * d * d)

    handles = []
    for m in net.modules():
        if isinstance(m, nn.Conv2d):
            handles.append(m.register_forward_hook(conv))
        elif isinstance(m, nn.RNNBase):
            handles.append(m.register_forward_hook(recurrent))
        elif isinstance(m, nn.MultiheadAttention):
            handles.append(m.register_forward_hook(attention))
        elif isinstance(m, nn.Linear) and not isinstance(m, nn.modules.linear.NonDynamicallyQuantizableLinear):
            handles.append(m.register_forward_hook(linear))
    with torch.enable_grad():  # keeps the encoder off its fused fast path, so the hooks see every layer
        net(example)
    for h in handles:
        h.remove()
    return total[0] // example.shape[0]


class _ExecutedMacs(TorchDispatchMode):
    """Multiply-accumulates of the matrix products and convolutions PyTorch dispatches: mm, addmm,
    bmm, baddbmm, convolution and convolution_backward (which computes the input and weight
    gradients its output mask asks for, each as many as the forward)."""

    def __init__(self):
        super().__init__()
        self.macs = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = func.overloadpacket.__name__
        if name in ("mm", "addmm"):
            a, b = args[-2:] if name == "addmm" else args[:2]
            self.macs += a.shape[0] * a.shape[1] * b.shape[1]
        elif name in ("bmm", "baddbmm"):
            a, b = args[1:3] if name == "baddbmm" else args[:2]
            self.macs += a.shape[0] * a.shape[1] * a.shape[2] * b.shape[2]
        elif name in ("convolution", "_convolution"):
            self.macs += out.numel() * args[1][0].numel()
        elif name == "convolution_backward":
            grad, weight, mask = args[0], args[2], args[-1]
            self.macs += grad.numel() * weight[0].numel() * (int(mask[0]) + int(mask[1]))
        elif name in ("matmul", "linear", "lstm", "gru", "rnn_tanh", "mkldnn_rnn", "mkldnn_convolution"):
            raise RuntimeError(f"aten::{name} reached the dispatch mode undecomposed: its products are not counted")
        return out


def autograd_macs(net, example):
    """Multiply-accumulates per sample of forward + loss + backward as autograd runs them: cross
    entropy on [batch, classes] outputs, mean squared error otherwise (the step neural-cost counts)."""
    net.zero_grad(set_to_none=True)
    counter = _ExecutedMacs()
    with torch.enable_grad(), counter:
        y = net(example)
        if y.dim() == 2 and y.shape[1] > 1:
            loss = nn.functional.cross_entropy(y, torch.zeros(y.shape[0], dtype=torch.long))
        else:
            loss = nn.functional.mse_loss(y, torch.zeros_like(y))
        loss.backward()
    net.zero_grad(set_to_none=True)
    return counter.macs // example.shape[0]


def batchnorm_channels(net):
    return sum(m.num_features for m in net.modules() if isinstance(m, nn.BatchNorm2d))


def export(net, example, name, opset, external=False, fold=True):
    """fold=False keeps batch norms as BatchNormalization nodes (by default the exporter folds
    a batch norm that follows a convolution into it: its 2*C parameters become a C-element bias)."""
    path = os.path.join(out, name + ".onnx")
    options = {} if fold else {"training": torch.onnx.TrainingMode.PRESERVE, "do_constant_folding": False}
    torch.onnx.export(
        net,
        example,
        path,
        opset_version=opset,
        input_names=["x"],
        output_names=["y"],
        dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}},
        **options,
    )
    if external:
        import onnx

        model = onnx.load(path)
        onnx.save(
            model,
            path,
            save_as_external_data=True,
            all_tensors_to_one_file=True,
            location=name + ".weights",
            size_threshold=1024,
        )
    return path


def encoder(width, heads, layers, seq):
    torch.manual_seed(0)
    net = nn.TransformerEncoder(
        nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.0, batch_first=True),
        layers,
        enable_nested_tensor=False,
    ).eval()
    return distinct_weights(net), torch.randn(1, seq, width)


if "--bench" in sys.argv:
    torch.manual_seed(0)
    resnet50 = distinct_weights(torchvision.models.resnet50(weights=None).eval())
    big_encoder, big_example = encoder(256, 8, 8, 128)
    for suffix, external in (("", False), ("_external", True)):
        export(resnet50, torch.randn(1, 3, 224, 224), "resnet50" + suffix, 13, external)
        export(big_encoder, big_example, "transformer_1k" + suffix, 13, external)
    print(f"benchmark fixtures written to {out}")
    sys.exit(0)

expected = {}


def record(name, net, example, opset, extra=None, fold=False):
    distinct_weights(net)
    export(net, example, name, opset, fold=fold)
    expected[name] = {
        "input": "x",
        "input_shape": list(example.shape[1:]),
        "macs_per_sample": hooked_macs(net, example),
        "training_macs_per_sample": autograd_macs(net, example),
        "torch_parameters": sum(p.numel() for p in net.parameters()),
        "folded_batchnorm_channels": batchnorm_channels(net) if fold else 0,
        "opset": opset,
        **(extra or {}),
    }


# the five reference networks, at opset 17 (LayerNormalization is one op there)
for model in reference_torch.NAMES:
    net, example = reference_torch.build(model, batch=2)
    record("reference_" + model, net, example, 17, {"builtin": model})

# torchvision's networks with their published multiply-accumulate counts (GMACs, 3 decimals,
# the "_ops" entries of torchvision's weight metadata, documented from torchvision 0.15)
torch.manual_seed(0)
resnet18 = torchvision.models.resnet18(weights=None).eval()
record(
    "resnet18", resnet18, torch.randn(1, 3, 224, 224), 13, {"published_gmacs": 1.814, "published_parameters": 11689512}
)
# the exporter's default folds every batch norm of ResNet-18 (each follows a convolution)
record(
    "resnet18_folded",
    resnet18,
    torch.randn(1, 3, 224, 224),
    13,
    {"published_gmacs": 1.814, "published_parameters": 11689512},
    fold=True,
)
record(
    "mobilenet_v2",
    torchvision.models.mobilenet_v2(weights=None).eval(),
    torch.randn(1, 3, 224, 224),
    13,
    {"published_gmacs": 0.301, "published_parameters": 3504872},
)
# a transformer encoder at opset 13, where layer norm is decomposed into elementwise ops
net, example = encoder(256, 8, 3, 64)
record("transformer_encoder", net, example, 13)

with open(os.path.join(out, "expected.json.tmp"), "w") as f:
    json.dump(expected, f, indent=1)
os.replace(os.path.join(out, "expected.json.tmp"), os.path.join(out, "expected.json"))
print(f"torch fixtures written to {out}")
