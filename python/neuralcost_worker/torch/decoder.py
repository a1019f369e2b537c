"""Decoder LLMs measured in the torch worker (docs/llm.md, "Measured"): a Hugging Face style
config.json built by the PyPI transformers library's own model class with random weights (nothing
downloaded), and one phase of generation as the forward pass the tool times:

- prefill: the prompt of P tokens into an empty KV cache (transformers' DynamicCache), logits of
  the last position only (`logits_to_keep=1`, as generate() asks), so the time to first token;
- decode: one new token per sequence over a KV cache of C tokens that a prefill filled once at
  build, logits of that token; after each pass the cache is cropped back to C tokens, so every
  pass is the same step (the time per output token at context C).

The module's forward takes the token ids, so the worker's capture, per-op timer and
torch.compile see one ordinary forward pass."""

import json
import os

import torch

from neuralcost_worker.protocol import WorkerError


def _transformers():
    try:
        import transformers
    except ImportError as e:
        raise WorkerError(
            "unimplemented",
            "decoder configs run through the PyPI transformers library, which this worker's Python "
            f"environment does not have ({e}); install python/requirements.txt",
        ) from e
    return transformers


def _config(path, transformers):
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise WorkerError("invalid_argument", f"{path}: not a readable JSON config ({e})") from e
    model_type = data.get("model_type")
    if model_type is None:
        raise WorkerError("invalid_argument", f"{path}: no model_type: not a transformers config.json")
    try:
        config = transformers.AutoConfig.for_model(**data)
    except (ValueError, KeyError, TypeError) as e:
        raise WorkerError(
            "invalid_argument", f"{path}: transformers cannot build model_type {model_type!r}: {e}"
        ) from e
    # the math the analysis counts: eager softmax(QK^T)V is not what runs by default; SDPA is, where
    # the model has it (gemma2's soft-capping has none: it runs eagerly, every key's score computed)
    config._attn_implementation = "sdpa" if _supports_sdpa(config, transformers) else "eager"
    return config


def _supports_sdpa(config, transformers):
    model_class = transformers.AutoModelForCausalLM._model_mapping.get(type(config), None)
    return model_class is None or getattr(model_class, "_supports_sdpa", True)


class CacheCrop(torch.nn.Module):
    """Crops a DynamicCache back by `grown` tokens: a module of its own, so that the per-layer table
    names its slices `cache_crop` (the worker names ops by the module they run in)."""

    def forward(self, cache, grown):
        cache.crop(-grown)


class DecoderStep(torch.nn.Module):
    """One phase of generation of a causal LM (the module docstring)."""

    def __init__(self, lm, phase, tokens, context):
        super().__init__()
        self.lm = lm
        self.cache_crop = CacheCrop()
        self.phase = phase
        self.tokens = tokens
        self.context = context
        self.cache = None

    def fill(self, batch, vocab, device):
        """Decode: the KV cache of `context` tokens, filled once by a prefill of random tokens."""
        from transformers import DynamicCache

        generator = torch.Generator().manual_seed(2)
        prompt = torch.randint(0, vocab, (batch, self.context), generator=generator).to(device)
        self.cache = DynamicCache(config=self.lm.config)
        if hasattr(self.cache, "activate_past_recording"):
            # a sliding-window layer (mistral's, gemma2's) keeps a step's states until the crop, so that
            # cropping back to C undoes the step once the window is full (else transformers refuses)
            self.cache.activate_past_recording()
        with torch.inference_mode():
            self.lm(input_ids=prompt, past_key_values=self.cache, use_cache=True, logits_to_keep=1)
            # one step and its crop: the cached tensors become what every later pass finds (views of
            # C + 1 tokens), so torch.compile compiles that state once instead of again on pass 2
            self.forward(prompt[:, :1])

    def forward(self, ids):
        if self.phase == "prefill":
            from transformers import DynamicCache

            cache = DynamicCache(config=self.lm.config)
            return self.lm(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1).logits
        out = self.lm(input_ids=ids, past_key_values=self.cache, use_cache=True, logits_to_keep=1)
        grown = self.cache.get_seq_length() - self.context
        if grown > 0:  # back to C cached tokens: the next pass is the same step
            self.cache_crop(self.cache, grown)
        return out.logits


def build(request, dtype):
    """(module, input names, inputs, their description, origin) of a decoder phase."""
    path = request["model"]
    spec = request["decoder"]
    phase = spec.get("phase")
    if phase not in ("prefill", "decode"):
        raise WorkerError("invalid_argument", f"decoder phase must be prefill or decode (got {phase!r})")
    prompt, context, batch = int(spec.get("prompt", 0)), int(spec.get("context", 0)), int(request["batch"])
    tokens = prompt if phase == "prefill" else 1
    if tokens < 1 or batch < 1 or (phase == "decode" and context < 1):
        raise WorkerError("invalid_argument", f"decoder {phase}: prompt, context and batch must be at least 1")
    transformers = _transformers()
    config = _config(path, transformers)
    positions = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
    longest = tokens if phase == "prefill" else context + 1
    if positions is not None and longest > positions:
        raise WorkerError(
            "invalid_argument", f"{path}: {longest} positions, beyond the model's {positions} (max_position_embeddings)"
        )
    torch.manual_seed(1)
    try:
        lm = transformers.AutoModelForCausalLM.from_config(config, dtype=dtype)
    except (ValueError, KeyError, TypeError) as e:
        raise WorkerError("invalid_argument", f"{path}: transformers cannot build the model: {e}") from e
    lm.eval()
    step = DecoderStep(lm, phase, tokens, context)
    device = torch.device(request.get("device", "cpu"))
    lm.to(device)
    vocab = int(config.vocab_size)
    if phase == "decode":
        step.fill(batch, vocab, device)
    ids = torch.randint(0, vocab, (batch, tokens), generator=torch.Generator().manual_seed(3))
    what = (
        f"prefill of {tokens} tokens into an empty KV cache"
        if phase == "prefill"
        else f"decode of 1 token over a KV cache of {context} tokens, cropped back after each pass"
    )
    origin = (
        f"{type(lm).__name__} of transformers {transformers.__version__} from {os.path.basename(path)} "
        f"(random weights, {'SDPA' if config._attn_implementation == 'sdpa' else 'eager'} attention, "
        f"DynamicCache, logits of the last position): {what}"
    )
    described = f"ids: {batch}x{tokens} int64, integers uniform in [0, {vocab})"
    return step, ["input_ids"], [ids], described, origin
