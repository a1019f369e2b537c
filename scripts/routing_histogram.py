"""A routing histogram for `neural-cost analyze MODEL --routing FILE` (docs/llm.md, "A measured
routing"): the tokens each expert of each layer took while a transformers MoE model ran a forward
pass, read from its routers' own choices (the top-k indices every TopKRouter module returns:
mixtral, qwen2_moe, qwen3_moe, deepseek_v3 and the like).

    python scripts/routing_histogram.py MODEL -o routing.json [--tokens N] [--batch B] [--seed S]
                                                              [--text FILE]

MODEL is a local model directory (config.json and weights, loaded with local files only) or a
config.json alone (random weights, seeded: a routing that exercises the tool, not one that tells
anything about a trained model). The model is built in memory: its weights must fit (DeepSeek-V2-Lite
takes 63 GB in float32, 31 GB with --dtype bfloat16). Inputs: the tokens of --text (the directory's tokenizer), else N
random token ids per sequence. Nothing is downloaded. Run it with the workers' Python
(build/src/neuralcost/python-env/bin/python3), which has torch and transformers."""

import argparse
import json
import os
import sys


def fail(message):
    print(f"error: {message}", file=sys.stderr)
    sys.exit(1)


def load(model_path, seed):
    import torch
    import transformers

    torch.manual_seed(seed)
    if os.path.isdir(model_path):
        try:
            model = transformers.AutoModelForCausalLM.from_pretrained(model_path, local_files_only=True)
        except (OSError, ValueError) as e:
            fail(f"{model_path}: transformers cannot load it from local files ({e})")
        return model, model_path
    try:
        with open(model_path) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{model_path}: not a readable config.json ({e})")
    if not isinstance(data, dict) or "model_type" not in data:
        fail(f"{model_path}: no model_type: not a transformers config.json")
    try:
        config = transformers.AutoConfig.for_model(**data)
        model = transformers.AutoModelForCausalLM.from_config(config)
    except (ValueError, KeyError, TypeError) as e:
        fail(f"{model_path}: transformers cannot build model_type {data['model_type']!r}: {e}")
    return model, None


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model", help="a local model directory or a config.json")
    p.add_argument("-o", "--output", required=True, help="the histogram's JSON file")
    p.add_argument("--tokens", type=int, default=512, help="random token ids per sequence (without --text)")
    p.add_argument("--batch", type=int, default=4, help="sequences (without --text)")
    p.add_argument("--seed", type=int, default=0, help="of the random weights and ids")
    p.add_argument("--text", help="a text file whose tokens are the input (needs the directory's tokenizer)")
    p.add_argument(
        "--dtype",
        choices=("float32", "bfloat16"),
        default="float32",
        help="the model's dtype (bfloat16: half the memory)",
    )
    a = p.parse_args()
    if a.tokens < 1 or a.batch < 1:
        fail("--tokens and --batch must be positive")
    import torch

    model, directory = load(a.model, a.seed)
    model = model.to(getattr(torch, a.dtype)).eval()
    config = model.config
    vocab = config.vocab_size
    if a.text:
        if directory is None:
            fail("--text needs a model directory with a tokenizer (a config.json alone has none)")
        import transformers

        tokenizer = transformers.AutoTokenizer.from_pretrained(directory, local_files_only=True)
        with open(a.text) as f:
            ids = tokenizer(f.read(), return_tensors="pt")["input_ids"]
        source = f"{a.model}, the {ids.numel()} tokens of {a.text}"
    else:
        ids = torch.randint(0, vocab, (a.batch, a.tokens), generator=torch.Generator().manual_seed(a.seed))
        weights = "its weights" if directory else f"random weights (seed {a.seed})"
        source = f"{a.model} with {weights}, {a.batch} x {a.tokens} random token ids"
    counts = {}

    def hook(name):
        def record(module, _inputs, output):
            indices = output[-1] if isinstance(output, tuple) else None
            if indices is None or indices.dtype not in (torch.int64, torch.int32):
                fail(f"{name}: the router's output does not end with its top-k indices")
            experts = getattr(module, "num_experts", None) or getattr(module, "n_routed_experts", None)
            counts[name] = torch.bincount(indices.reshape(-1).long(), minlength=experts).tolist()

        return record

    routers = 0
    for name, module in model.named_modules():
        if type(module).__name__.lower().endswith("topkrouter"):
            module.register_forward_hook(hook(name))
            routers += 1
    if routers == 0:
        fail(f"{a.model}: no TopKRouter module: a model without experts (or a router this script does not know)")
    with torch.no_grad():
        model(input_ids=ids, use_cache=False)
    layers = {}
    for name, c in counts.items():
        # model.layers.L.mlp.gate -> L
        parts = name.split(".")
        layer = next((parts[i + 1] for i, part in enumerate(parts[:-1]) if part == "layers"), None)
        if layer is None or not layer.isdigit():
            fail(f"{name}: cannot tell the router's layer from its name")
        layers[layer] = c
    histogram = {"tokens": int(ids.numel()), "layers": layers, "source": source}
    tmp = a.output + ".tmp"
    with open(tmp, "w") as f:
        json.dump(histogram, f)
    os.replace(tmp, a.output)
    print(f"{a.output}: {len(layers)} layers, {ids.numel()} tokens ({source})")


if __name__ == "__main__":
    main()
