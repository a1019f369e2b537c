"""A decoder's training memory ledger against what autograd keeps in the model transformers builds
from the same config: small Llama (dense, grouped-query attention), Mixtral (eight experts, top-2),
Qwen2-MoE (top-2 of eight, a gated shared expert, a dense first layer) and DeepSeek-V3 (latent
attention, a grouped sigmoid router, a shared expert), random weights, in fp32 and in bf16 (the
model cast to bf16, as a bf16 training stack with fp32 master weights runs it), one forward pass
and its cross entropy under torch.autograd.graph.saved_tensors_hooks. Every storage a saved tensor
occupies is counted once, parameters excluded.

The ledger (`neural-cost analyze CONFIG --train --precision fp32` or `bf16-mixed`,
activations.saved_bytes) counts the kernels a training stack fuses; transformers' eager modules
keep more, and each difference is counted here from the run itself, not assumed:
- the cross entropy's log-probabilities (log_softmax's output, rows x vocabulary) and nll_loss's
  4-byte total weight: the ledger holds the log-probabilities at the loss, not among the saves;
- LlamaRMSNorm and its kin written out in Python keep x * rsqrt(mean(x^2)) beside 1/rms: in fp32
  beside x, one more tensor the norm's input size per norm (a fused RMSNorm keeps x and 1/rms); in
  bf16 they keep x's fp32 copy and the normalised tensor in bf16 instead of x (whose storage, a
  latent attention's kv_a output of which the norm reads a slice, may be larger than the copy);
- in bf16, transformers keeps an expert layer's routing weights in fp32 for the weighting, where
  the ledger's graph casts them to the model's dtype (Megatron-Core's router does);
- transformers' grouped experts keep two int64 permutations of the (token, expert) pairs beyond
  the gather's row index (the routing weights' and the inverse order's) and int32 offsets per
  expert.
What is left must be equal to the byte. Every saved tensor is held to the end of the pass, so that
no storage's address is reused by another and counted once for both.

Usage: python decoder_memory_vs_transformers.py NEURAL_COST OUT_DIR (the project's .venv python)."""

import json
import os
import subprocess
import sys

import torch
import transformers as T

TOOL, OUT = sys.argv[1], sys.argv[2]
os.makedirs(OUT, exist_ok=True)
torch.manual_seed(0)
failures = []

ATTENTION = {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256}
COMMON = {"max_position_embeddings": 512, "rope_theta": 10000.0, "tie_word_embeddings": False, "hidden_act": "silu"}
CONFIGS = {
    "llama": {"model_type": "llama", "intermediate_size": 128, "num_hidden_layers": 2, "rms_norm_eps": 1e-5},
    "mixtral": {
        "model_type": "mixtral",
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_local_experts": 4,
        "num_experts_per_tok": 2,
        "rms_norm_eps": 1e-5,
    },
    "qwen2_moe": {
        "model_type": "qwen2_moe",
        "intermediate_size": 128,
        "moe_intermediate_size": 32,
        "shared_expert_intermediate_size": 96,
        "num_hidden_layers": 3,
        "num_experts": 8,
        "num_experts_per_tok": 2,
        "norm_topk_prob": False,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [0],
        "qkv_bias": True,
        "use_sliding_window": False,
        "rms_norm_eps": 1e-6,
    },
    # latent attention (a rank-48 query, a latent of 32 + 8 rotary dims), a grouped sigmoid router
    # (8 experts in 4 groups, 2 kept), a shared expert, the first layer dense
    "deepseek_v3": {
        "model_type": "deepseek_v3",
        "num_key_value_heads": 4,
        "intermediate_size": 96,
        "moe_intermediate_size": 32,
        "num_hidden_layers": 3,
        "n_routed_experts": 8,
        "n_shared_experts": 1,
        "num_experts_per_tok": 2,
        "n_group": 4,
        "topk_group": 2,
        "first_k_dense_replace": 1,
        "q_lora_rank": 48,
        "kv_lora_rank": 32,
        "qk_rope_head_dim": 8,
        "qk_nope_head_dim": 16,
        "v_head_dim": 24,
        "rms_norm_eps": 1e-6,
    },
}


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what, flush=True)
    if not ok:
        failures.append(what)


def kept_by_autograd(model, ids):
    """Bytes of the storages the forward pass and its cross entropy save for backward (each once,
    parameters excluded), and the eager extras counted from the run."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen = {}
    held = []  # every saved tensor stays alive to the end: no address is reused by another storage
    extras = {"norm copies": 0, "expert permutations": 0, "fp32 routing weights": 0}
    norm_inputs = []  # (x's storage address, its bytes): the fused norm's keep, maybe not eager's

    def pack(t):
        held.append(t)
        s = t.untyped_storage()
        if s.data_ptr() not in params and s.nbytes() > 0:
            seen[s.data_ptr()] = s.nbytes()
        return t

    def norm(_module, args, _out):
        x = args[0]
        upcast = 0 if x.dtype == torch.float32 else x.numel() * 4  # x.to(float32)
        extras["norm copies"] += upcast + x.numel() * x.element_size()  # x * rsqrt(...), x's dtype
        norm_inputs.append((x.untyped_storage().data_ptr(), x.untyped_storage().nbytes()))
        held.append(x)  # alive to the end: its address is no later storage's

    def experts(module, args, _out):  # (hidden_states, top_k_index, top_k_weights)
        pairs = args[1].numel()
        extras["expert permutations"] += 2 * pairs * 8 + module.num_experts * 4
        weights, hidden = args[2], args[0]
        if weights.dtype == torch.float32 and hidden.dtype != torch.float32:
            extras["fp32 routing weights"] += weights.numel() * (4 - hidden.element_size())

    hooks = []
    for module in model.modules():
        name = type(module).__name__
        if name.endswith("RMSNorm"):
            hooks.append(module.register_forward_hook(norm))
        elif name.endswith("Experts") and hasattr(module, "num_experts"):
            hooks.append(module.register_forward_hook(experts))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        logits = model(ids).logits
        # transformers' loss upcasts the logits (a no-op in fp32)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), ids.reshape(-1))
    for h in hooks:
        h.remove()
    # a fused norm keeps its input's storage; an eager norm in bf16 keeps the fp32 copy instead,
    # and nothing else keeps that storage
    for address, nbytes in dict(norm_inputs).items():
        if address not in seen:
            extras["norm copies"] -= nbytes
    extras["log-probabilities"] = logits.numel() * 4 + 4
    loss.backward()  # the saves were real: the step runs
    return sum(seen.values()), extras


def ledger_saved(config_path, batch, prompt, precision):
    out = os.path.join(OUT, os.path.basename(config_path) + f".{precision}.b{batch}p{prompt}.json")
    cmd = [TOOL, "analyze", config_path, "--train", "--precision", precision, "--optimizer", "sgd"]
    cmd += ["--batch", str(batch), "--prompt", str(prompt), "--format", "json", "-o", out]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(out) as f:
        return json.load(f)["training"]["memory"]["activations"]["saved_bytes"]


for name, fields in CONFIGS.items():
    config = dict(ATTENTION, **COMMON, **fields)
    path = os.path.join(OUT, name + ".json")
    with open(path, "w") as f:
        json.dump(dict(config, architectures=[]), f)
    hf = T.AutoConfig.for_model(**config)
    for precision, dtype in (("fp32", torch.float32), ("bf16-mixed", torch.bfloat16)):
        model = T.AutoModelForCausalLM.from_config(hf, attn_implementation="sdpa").to(dtype).train()
        for batch, prompt in ((2, 32), (1, 48)):
            ids = torch.randint(0, hf.vocab_size, (batch, prompt))
            torch_bytes, extras = kept_by_autograd(model, ids)
            ledger = ledger_saved(path, batch, prompt, precision)
            explained = ledger + sum(extras.values())
            detail = ", ".join(f"{k} {v}" for k, v in extras.items())
            check(
                explained == torch_bytes,
                f"{name} {precision} batch {batch} x {prompt}: autograd keeps {torch_bytes} B; ledger {ledger} B + "
                f"{detail} = {explained} B",
            )

if failures:
    print(f"{len(failures)} failed")
    sys.exit(1)
print("all decoder training ledgers match what autograd keeps")
