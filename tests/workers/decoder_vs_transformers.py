"""A decoder config analysed by `neural-cost analyze CONFIG.json` against the model transformers
builds from the same config (issue 25): small Llama, Qwen2, Gemma (GeGLU, scaled embeddings, head_dim
apart from hidden/heads) and Phi-3 (fused qkv_proj and gate_up_proj) models with grouped-query attention,
random weights (and GPT-2: learned positions, Conv1D, LayerNorm, a GELU MLP; GPT-NeoX: partial rotary,
parallel residual; Qwen2-MoE: experts, a shared expert, dense and sparse layers; Gemma2: a sliding
window on every other layer, four norms a layer, soft-capped scores and logits; DeepSeek-V3: latent
attention, a grouped sigmoid router, shared experts, first dense layers; DeepSeek-V2: complex rotary
pairs, a softmax router, greedy or within groups), run eagerly in
prefill (P tokens) and in one decode step over the KV cache of that prefill, counted independently:
every nn.Linear by forward hooks (2 per multiply-accumulate; Qwen2-MoE's experts and router, which
call F.linear on their own weights, by hooks on their modules: k rows per token), every attention
from the arguments transformers passes to scaled_dot_product_attention (2·B·H·pairs·(D + Dv);
causal: the top-left triangle; gemma2's eager attention by its kept pairs), the rotary
frequencies' product inv_freq @ positions (2·B·(D/2)·T) by a hook on the rotary module. Parameters: module.parameters().

Usage: python decoder_vs_transformers.py NEURAL_COST OUT_DIR (the project's .venv python)."""

import json
import os
import subprocess
import sys

import torch
import transformers as T
import transformers.models.gemma2.modeling_gemma2 as gemma2_modeling

TOOL, OUT = sys.argv[1], sys.argv[2]
os.makedirs(OUT, exist_ok=True)
torch.manual_seed(0)
failures = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what, flush=True)
    if not ok:
        failures.append(what)


def counted(model, run):
    """Contraction FLOPs of run() on model, counted by hooks and by the SDPA call's arguments."""
    total = [0]

    def linear(module, _inputs, out):
        total[0] += 2 * out.numel() * module.weight.shape[1]

    def rotary(module, args, kwargs, _out):
        # forward(x, position_ids): inv_freq [B, D/2, 1] @ positions [B, 1, T]
        positions = args[1] if len(args) > 1 else kwargs["position_ids"]
        total[0] += 2 * positions.shape[0] * module.inv_freq.shape[0] * positions.shape[-1]

    def conv1d(module, _inputs, out):  # GPT-2's Conv1D: weight [in, out]
        total[0] += 2 * out.numel() * module.weight.shape[0]

    def experts(module, args, _out):  # Qwen2MoeExperts: F.linear on slices of 3-D weights, k rows a token
        n, k = args[0].shape[0], args[1].shape[1]
        total[0] += 2 * n * k * 3 * module.hidden_dim * module.intermediate_dim

    def router(module, args, _out):  # Qwen2MoeTopKRouter: F.linear(x, weight)
        total[0] += 2 * args[0].reshape(-1, module.hidden_dim).shape[0] * module.weight.numel()

    handles = [m.register_forward_hook(linear) for m in model.modules() if isinstance(m, torch.nn.Linear)]
    handles += [
        m.register_forward_hook(experts)
        for m in model.modules()
        if type(m).__name__ in ("Qwen2MoeExperts", "Qwen3MoeExperts", "DeepseekV3Experts", "DeepseekV2Experts")
    ]
    handles += [
        m.register_forward_hook(router)
        for m in model.modules()
        if type(m).__name__
        in ("Qwen2MoeTopKRouter", "Qwen3MoeTopKRouter", "DeepseekV3TopkRouter", "DeepseekV2TopkRouter")
    ]
    handles += [m.register_forward_hook(conv1d) for m in model.modules() if type(m).__name__ == "Conv1D"]
    handles += [
        m.register_forward_hook(rotary, with_kwargs=True)
        for m in model.modules()
        # DeepSeek-V2's frequencies are an elementwise product (positions[..., None] * inv_freq), no matmul
        if type(m).__name__.endswith("RotaryEmbedding") and type(m).__name__ != "DeepseekV2RotaryEmbedding"
    ]
    original = torch.nn.functional.scaled_dot_product_attention

    def sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
        b, h, lq, d = q.shape
        lk = k.shape[2]
        pairs = sum(min(i + 1, lk) for i in range(lq)) if is_causal else lq * lk
        if attn_mask is not None and not is_causal:
            pairs = lq * lk  # an explicit mask: every pair is computed
        total[0] += 2 * b * h * pairs * (d + v.shape[3])
        return original(
            q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale, enable_gqa=enable_gqa
        )

    torch.nn.functional.scaled_dot_product_attention = sdpa
    # gemma2 runs eagerly (SDPA has no soft-capping): its two matmuls over every key, the masked ones
    # too; counted here as the analysis counts attention, the pairs a fused kernel computes (causal,
    # bottom right, each query's sliding_window most recent keys)
    original_eager = gemma2_modeling.eager_attention_forward

    def eager(module, query, key, value, attention_mask, **kwargs):
        b, h, lq, d = query.shape
        lk = key.shape[2]
        window = kwargs.get("sliding_window") or lk
        pairs = sum(min(lk - lq + i + 1, window) for i in range(lq))
        total[0] += 2 * b * h * pairs * (d + value.shape[3])
        return original_eager(module, query, key, value, attention_mask, **kwargs)

    gemma2_modeling.eager_attention_forward = eager
    try:
        with torch.no_grad():
            result = run()
    finally:
        gemma2_modeling.eager_attention_forward = original_eager
        torch.nn.functional.scaled_dot_product_attention = original
        for h in handles:
            h.remove()
    return total[0], result


def shown(totals, key):
    return f"{totals[key]:,}" if totals else "none"


def analyze(config_path, *args):
    p = subprocess.run(
        [TOOL, "analyze", config_path, *args, "--format", "json", "--dtype", "fp32"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if p.returncode != 0:
        return None, p.stderr.strip()
    return json.loads(p.stdout)["totals"], ""


configs = {
    "llama_gqa": T.LlamaConfig(
        vocab_size=500,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=128,
        max_position_embeddings=128,
        bos_token_id=0,
        eos_token_id=0,
    ),
    "qwen2_gqa": T.Qwen2Config(
        vocab_size=500,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=1,
        intermediate_size=96,
        max_position_embeddings=128,
        tie_word_embeddings=True,
        bos_token_id=0,
        eos_token_id=0,
    ),
    "gemma_mqa": T.GemmaConfig(
        vocab_size=500,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=1,
        head_dim=32,
        intermediate_size=96,
        max_position_embeddings=128,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
    ),
    "phi3_gqa": T.Phi3Config(
        vocab_size=500,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=96,
        max_position_embeddings=128,
        original_max_position_embeddings=128,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
    ),
    "gpt2_mha": T.GPT2Config(
        vocab_size=500,
        n_embd=64,
        n_layer=2,
        n_head=4,
        n_positions=128,
        bos_token_id=0,
        eos_token_id=0,
    ),
    "gptneox_partial": T.GPTNeoXConfig(
        vocab_size=500,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=96,
        max_position_embeddings=128,
        rotary_pct=0.25,
        use_parallel_residual=True,
        bos_token_id=0,
        eos_token_id=0,
    ),
    # experts of their own size, a shared expert with a sigmoid gate; layer 1 sparse, 0 and 2 dense
    # by decoder_sparse_step, 3 dense by mlp_only_layers
    "qwen2moe_shared": T.Qwen2MoeConfig(
        vocab_size=500,
        hidden_size=64,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=96,
        moe_intermediate_size=32,
        shared_expert_intermediate_size=48,
        num_experts=8,
        num_experts_per_tok=2,
        norm_topk_prob=True,
        decoder_sparse_step=2,
        mlp_only_layers=[3],
        max_position_embeddings=128,
        bos_token_id=0,
        eos_token_id=0,
    ),
    # q_norm and k_norm on each head; head_dim 32 apart from hidden / heads (16)
    "qwen3_gqa": T.Qwen3Config(
        vocab_size=500,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        intermediate_size=96,
        max_position_embeddings=128,
        bos_token_id=0,
        eos_token_id=0,
    ),
    # a window of 16 on layer 0, every key on layer 1, four norms a layer, soft-capped scores and logits
    "gemma2_alternating": T.Gemma2Config(
        vocab_size=500,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        intermediate_size=128,
        sliding_window=16,
        query_pre_attn_scalar=16,
        max_position_embeddings=128,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
    ),
    # no shared expert; layer 1 dense by mlp_only_layers
    "qwen3moe_experts": T.Qwen3MoeConfig(
        vocab_size=500,
        hidden_size=64,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=96,
        moe_intermediate_size=32,
        num_experts=8,
        num_experts_per_tok=2,
        norm_topk_prob=True,
        mlp_only_layers=[1],
        max_position_embeddings=128,
        bos_token_id=0,
        eos_token_id=0,
    ),
    # latent attention (q through q_a_proj, a latent of 32 + 8 rotary dims, kv_b_proj over the cache),
    # 8 experts in 4 groups (2 kept), one shared expert, layer 0 dense; interleaved rotary pairs
    "deepseekv3_mla": T.DeepseekV3Config(
        vocab_size=500,
        hidden_size=64,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=4,
        intermediate_size=96,
        moe_intermediate_size=32,
        n_routed_experts=8,
        n_shared_experts=1,
        num_experts_per_tok=2,
        n_group=4,
        topk_group=2,
        first_k_dense_replace=1,
        q_lora_rank=48,
        kv_lora_rank=32,
        qk_rope_head_dim=8,
        qk_nope_head_dim=16,
        v_head_dim=24,
        max_position_embeddings=128,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
    ),
    # one q_proj (no q_lora_rank), two shared experts, rotate_half rotary, every layer sparse
    "deepseekv3_qproj": T.DeepseekV3Config(
        vocab_size=500,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        intermediate_size=96,
        moe_intermediate_size=16,
        n_routed_experts=4,
        n_shared_experts=2,
        num_experts_per_tok=2,
        n_group=2,
        topk_group=1,
        first_k_dense_replace=0,
        q_lora_rank=None,
        kv_lora_rank=16,
        qk_rope_head_dim=4,
        qk_nope_head_dim=8,
        v_head_dim=8,
        rope_interleave=False,
        norm_topk_prob=False,
        max_position_embeddings=128,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
    ),
    # DeepSeek-V2: complex rotary pairs, a softmax router choosing within the 2 best of 4 groups
    # (group_limited_greedy), scaled and not renormalised, two shared experts, layer 0 dense
    "deepseekv2_group": T.DeepseekV2Config(
        vocab_size=500,
        hidden_size=64,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=4,
        intermediate_size=96,
        moe_intermediate_size=32,
        n_routed_experts=8,
        n_shared_experts=2,
        num_experts_per_tok=2,
        n_group=4,
        topk_group=2,
        topk_method="group_limited_greedy",
        routed_scaling_factor=16.0,
        first_k_dense_replace=1,
        q_lora_rank=48,
        kv_lora_rank=32,
        qk_rope_head_dim=8,
        qk_nope_head_dim=16,
        v_head_dim=24,
        max_position_embeddings=128,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
    ),
    # DeepSeek-V2-Lite's shape: one q_proj, greedy top-k over every expert
    "deepseekv2_lite": T.DeepseekV2Config(
        vocab_size=500,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        intermediate_size=96,
        moe_intermediate_size=16,
        n_routed_experts=6,
        n_shared_experts=2,
        num_experts_per_tok=3,
        topk_method="greedy",
        first_k_dense_replace=1,
        q_lora_rank=None,
        kv_lora_rank=16,
        qk_rope_head_dim=4,
        qk_nope_head_dim=8,
        v_head_dim=8,
        max_position_embeddings=128,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
    ),
}
classes = {
    "gpt2": T.GPT2LMHeadModel,
    "gptneox": T.GPTNeoXForCausalLM,
    "llama": T.LlamaForCausalLM,
    "qwen2": T.Qwen2ForCausalLM,
    "gemma": T.GemmaForCausalLM,
    "gemma2": T.Gemma2ForCausalLM,
    "phi3": T.Phi3ForCausalLM,
    "qwen2moe": T.Qwen2MoeForCausalLM,
    "qwen3": T.Qwen3ForCausalLM,
    "qwen3moe": T.Qwen3MoeForCausalLM,
    "deepseekv3": T.DeepseekV3ForCausalLM,
    "deepseekv2": T.DeepseekV2ForCausalLM,
}
for name, config in configs.items():
    config._attn_implementation = "eager" if name.startswith("gemma2") else "sdpa"
    model = classes[name.split("_")[0]](config).eval()
    path = os.path.join(OUT, f"{name}.json")
    with open(path, "w") as f:
        f.write(config.to_json_string())
    for batch, prompt in ((1, 24), (3, 40)):
        ids = torch.randint(0, 500, (batch, prompt))
        want, out = counted(model, lambda: model(ids, use_cache=True, logits_to_keep=1))
        got, error = analyze(path, "--phase", "prefill", "--prompt", str(prompt), "--batch", str(batch))
        check(
            got is not None and got["contraction_flops"] == want,
            f"{name} prefill b{batch} p{prompt}: {shown(got, 'contraction_flops')} == transformers {want:,} {error}",
        )
        nxt = torch.randint(0, 500, (batch, 1))
        want, _ = counted(
            model, lambda: model(nxt, past_key_values=out.past_key_values, use_cache=True, logits_to_keep=1)
        )
        got, error = analyze(path, "--phase", "decode", "--context", str(prompt), "--batch", str(batch))
        check(
            got is not None and got["contraction_flops"] == want,
            f"{name} decode b{batch} c{prompt}: {shown(got, 'contraction_flops')} == transformers {want:,} {error}",
        )
    params = sum(p.numel() for p in model.parameters())
    got, error = analyze(path, "--batch", "1", "--prompt", "8")
    check(
        got is not None and got["parameter_count"] == params,
        f"{name} parameters {shown(got, 'parameter_count')} == module.parameters() {params:,} {error}",
    )


def profiled(config_path, *args):
    """The measured run of `neural-cost profile CONFIG --backend torch` (the torch worker builds the
    model with transformers and times one phase over a real KV cache): its JSON run, or None."""
    p = subprocess.run(
        [TOOL, "profile", config_path, "--backend", "torch", *args, "--format", "json", "--dtype", "fp32"]
        + ["--rounds", "1", "--budget", "0.05", "--warmup", "1", "--warmup-seconds", "0", "--layer-runs", "2"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if p.returncode != 0:
        return None, p.stderr.strip()
    return json.loads(p.stdout)["runs"][0], ""


# The measured half (issue 25, item 7): the graph the torch worker captures from the model it times
# has the analysis's parameters and contraction FLOPs, a dense GQA model and an MoE model, each phase.
# One term differs by construction: the rotary frequencies' product inv_freq (D/2) x positions (T),
# a matmul of inner size 1 that the analysis counts as 2 FLOPs per output (2 * D/2 * T, positions
# shared by the batch) and PyTorch dispatches as an elementwise aten::mul.
# Gemma2 decodes beyond its window of 16 (the cache of a sliding layer cropped back after each pass);
# its prefill is left out: eager attention computes every masked score, the analysis a fused kernel's.
measured = [
    (name, ("prefill", "decode"))
    for name in ("llama_gqa", "qwen2moe_shared", "qwen3moe_experts", "deepseekv3_mla", "deepseekv2_group")
]
for name, phases in measured + [("gemma2_alternating", ("decode",))]:
    path = os.path.join(OUT, f"{name}.json")
    config = configs[name]
    # the rotated dims of a head (deepseek_v3: qk_rope_head_dim)
    head_dim = getattr(config, "qk_rope_head_dim", None) or config.hidden_size // config.num_attention_heads
    for phase, size, tokens in (("prefill", ("--prompt", "24"), 24), ("decode", ("--context", "40"), 1)):
        if phase not in phases:
            continue
        args = ("--phase", phase, *size, "--batch", "2")
        want, error = analyze(path, *args)
        run, why = profiled(path, *args)
        got = run["totals"] if run else None
        # DeepSeek-V2's frequencies are an elementwise product in both (its complex tables captured as pairs)
        rotary = 0 if name.startswith("deepseekv2") else 2 * (head_dim // 2) * tokens
        check(
            got is not None and want is not None and got["contraction_flops"] + rotary == want["contraction_flops"],
            f"{name} {phase} measured by profile: contraction_flops {shown(got, 'contraction_flops')} + rotary "
            f"{rotary} == analyze {shown(want, 'contraction_flops')} {error} {why}",
        )
        check(
            got is not None and want is not None and got["parameter_count"] == want["parameter_count"],
            f"{name} {phase} measured by profile: parameter_count {shown(got, 'parameter_count')} == analyze "
            f"{shown(want, 'parameter_count')} {error} {why}",
        )
        check(
            run is not None and run["timing"]["median_seconds"] > 0 and len(run.get("layers", [])) > 0,
            f"{name} {phase}: profile timed the pass and its layers {why}",
        )
        if phase == "decode":  # the cache's crop back to C has rows of its own, named so
            check(
                run is not None and any(layer["module"] == "cache_crop" for layer in run["layers"]),
                f"{name} decode: the layer table names the cache's crop {why}",
            )

# A measured routing (--routing): scripts/routing_histogram.py records the experts each layer's
# router chose while the model ran random tokens; `analyze --routing` then reads, per expert op, the
# weights of sum_e 1 - (1 - n_e/T)^N experts for a step of N tokens (counted here independently
# from the file). qwen2moe's layers 1 and 3 are dense; deepseek_v3's layer 0 is.
ROUTING = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "routing_histogram.py")
for name in ("qwen2moe_shared", "deepseekv3_mla"):
    path, config = os.path.join(OUT, f"{name}.json"), configs[name]
    histogram_path = os.path.join(OUT, f"{name}.routing.json")
    p = subprocess.run(
        [sys.executable, ROUTING, path, "-o", histogram_path, "--tokens", "64", "--batch", "2"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    check(p.returncode == 0, f"{name}: routing_histogram.py wrote {histogram_path} {p.stderr.strip()}")
    if p.returncode != 0:
        continue
    with open(histogram_path) as f:
        histogram = json.load(f)
    experts = getattr(config, "num_experts", None) or config.n_routed_experts
    k, tokens = config.num_experts_per_tok, histogram["tokens"]
    check(
        tokens == 128 and all(len(c) == experts and sum(c) == k * tokens for c in histogram["layers"].values()),
        f"{name}: each layer's histogram holds {experts} counts adding up to k x tokens ({k} x {tokens}): "
        f"{ {layer: sum(c) for layer, c in histogram['layers'].items()} }",
    )
    p = subprocess.run(
        [TOOL, "analyze", path, "--phase", "decode", "--context", "40", "--batch", "3", "--routing", histogram_path]
        + ["--format", "json", "--dtype", "fp32"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    check(p.returncode == 0, f"{name}: analyze --routing {p.stderr.strip()}")
    if p.returncode != 0:
        continue
    ops = json.loads(p.stdout)["ops"]
    per_expert = 3 * config.hidden_size * config.moe_intermediate_size * 4  # gate, up, down in fp32
    want = 0.0
    for layer, c in histogram["layers"].items():
        want += per_expert * sum(1 - (1 - n / tokens) ** 3 for n in c)
    got = sum(op["parameter_bytes"] for op in ops if op["kind"] == "expert_linear")
    check(
        abs(got - want) <= 3 * len(histogram["layers"]),
        f"{name}: decode of 3 tokens reads {got:,} B of expert weights == {want:,.1f} from the histogram",
    )

print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
