#!/usr/bin/env bash
# The GPU path end to end, for a machine with an NVIDIA GPU (sized for an H200: about 8 minutes).
# Builds what it needs (or, with GPU_CHECK_PREBUILT=DIR, uses what bench/gpu_pack.sh packed), then
# records into $OUT (default: ./gpu-check-out):
#   machine.txt, detect.json, backends.json   what the driver and neural-cost see
#   gpu_calibration.json                      HBM copy/triad, L2, FP32/FP64 FMA, cuBLASLt GEMM peaks
#                                              (tf32, bf16, fp16, fp8), launch floor, each beside the
#                                              datasheet; hardware counters (CUPTI) on kernels of known work
#   measured_spec.json                        the GPU's spec with those measured ceilings (--hardware FILE)
#   profile_torch_resnet18.json               ResNet-18 (batch 32) in the torch worker on cuda:0, eager and
#                                              torch.compile, with the CUDA contract and GPU power counters
#   profile_torch_reference.json              the cnn and transformer reference networks, likewise
#   torch_probe.json, ncu_probe.out          the same ceilings through PyTorch/cuBLAS, and Nsight Compute's
#                                              counters on kernels of known work (independent checks)
#   record/                                   raw plugin answers and power samples ($NEURALCOST_GPU_RECORD)
#   profile_torch_decoder_*.json              SmolLM2-135M's config (random weights) in the torch worker on
#                                              cuda:0: decode at context 512 (bf16 batch 1 and 8, fp32
#                                              batch 1) and prefill of 512 tokens, eager and torch.compile
#   bad_input.txt                             --device cuda:7 and friends: one error line, exit 1
#   steps.json, verdict.json                  each step's exit code and seconds; the issue's done-criteria
# GPU_CHECK_ONLY="ceilings probes profile decoder bad_input" (any of them) runs those groups alone,
# for a rerun of one part within a short device lease; unset, all run.
# Every step runs under its own timeout and is recorded even when it fails or is skipped (with why).
# Nothing here has run on a GPU yet: the first session with a device runs it, fixes, and commits what
# it records as fixtures (tests/inputs/gpu/).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-$PWD/gpu-check-out}
mkdir -p "$OUT"
BUILD=${GPU_CHECK_BUILD:-build-gpu}
bin=$BUILD/tools/neural-cost/neural-cost
steps=$OUT/steps.jsonl
: > "$steps"

# step NAME TIMEOUT_S COMMAND...: runs it, stdout to $OUT/NAME.out, stderr to $OUT/NAME.err
step() {
  local name=$1 limit=$2
  shift 2
  local t0 rc
  t0=$(date +%s.%N)
  timeout "$limit" "$@" > "$OUT/$name.out" 2> "$OUT/$name.err"
  rc=$?
  printf '{"step": "%s", "rc": %d, "seconds": %.1f}\n' "$name" "$rc" "$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')" >> "$steps"
  echo "[gpu_check] $name: exit $rc" >&2
  return $rc
}
# want GROUP: whether GPU_CHECK_ONLY selects GROUP (all when unset)
want() { [ -z "${GPU_CHECK_ONLY:-}" ] || [[ " $GPU_CHECK_ONLY " == *" $1 "* ]]; }
skip() { printf '{"step": "%s", "skipped": "%s"}\n' "$1" "$2" >> "$steps"; echo "[gpu_check] $1: skipped: $2" >&2; }

{ nvidia-smi -q 2>&1 || echo "nvidia-smi: not available"; } > "$OUT/machine.txt"
nvcc --version >> "$OUT/machine.txt" 2>&1 || echo "nvcc: not on PATH" >> "$OUT/machine.txt"

# 1. build: the CLI and the CUDA plugin only (no tests, ONNX or LibTorch: minutes matter here), or,
#    with GPU_CHECK_PREBUILT=DIR, the tool that bench/gpu_pack.sh packed on a build machine (a GPU
#    machine without this project's build dependencies or a network cannot build it)
if [ -n "${GPU_CHECK_PREBUILT:-}" ]; then
  prebuilt=$(cd "$GPU_CHECK_PREBUILT" && pwd)
  bin=$prebuilt/bin/neural-cost
  # the machine's own CUDA libraries first (they match its driver); this toolkit's runtime and CUPTI last
  cuda_libs=$(python3 - <<'PY' 2>/dev/null
import glob, os, site
dirs = ["/usr/local/cuda/lib64", "/usr/local/cuda/extras/CUPTI/lib64", "/usr/local/cuda/targets/x86_64-linux/lib"]
for sp in site.getsitepackages():
    dirs += sorted(glob.glob(os.path.join(sp, "nvidia", "*", "lib")))
print(":".join(d for d in dirs if os.path.isdir(d)))
PY
)
  export LD_LIBRARY_PATH=$prebuilt/deps:${cuda_libs}:$prebuilt/deps-cuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  { echo "prebuilt: $prebuilt"; echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"; ldd "$bin";
    ldd "$prebuilt/lib/neuralcost/neuralcost_cuda.so"; } > "$OUT/prebuilt.txt" 2>&1
  step version 30 "$bin" --version || { echo "the prebuilt tool does not start: see $OUT/prebuilt.txt" >&2; exit 1; }
else
  export CCACHE_BASEDIR=$PWD
  step configure 120 cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNEURALCOST_BUILD_TESTS=OFF \
    -DNEURALCOST_BUILD_BENCHMARKS=OFF -DNEURALCOST_WITH_ONNX=OFF -DNEURALCOST_WITH_LIBTORCH=OFF \
    -DNEURALCOST_CUDA_ARCHITECTURES=90 || { echo "configure failed: see $OUT/configure.err" >&2; exit 1; }
  step build 240 cmake --build "$BUILD" -j"$(nproc)" --target neural-cost neuralcost_cuda || {
    echo "build failed: see $OUT/build.out" >&2; exit 1; }
  cp "$OUT/configure.out" "$OUT/configure.txt" 2>/dev/null
fi
# the raw answers (the plugin's calibration and counter check, each phase's power samples) kept as
# fixtures for the tests that read them on machines without a GPU (docs/gpu.md section 8)
export NEURALCOST_GPU_RECORD=$OUT/record

# 2. what the machine is
step detect 30 "$bin" hardware detect --format json && cp "$OUT/detect.out" "$OUT/detect.json"
step backends 60 "$bin" backends --format json && cp "$OUT/backends.out" "$OUT/backends.json"

# 3. ceilings beside the datasheet, and the counters on kernels of known work
if want ceilings; then
  step calibrate 150 "$bin" hardware calibrate --device cuda:0 --counters --format json \
    --spec-output "$OUT/measured_spec.json" && cp "$OUT/calibrate.out" "$OUT/gpu_calibration.json"
  if [ ! -s "$OUT/gpu_calibration.json" ]; then
    # counters may be refused (ERR_NVGPUCTRPERM: see calibrate.err); the ceilings alone still count
    step calibrate_no_counters 120 "$bin" hardware calibrate --device cuda:0 --format json \
      --spec-output "$OUT/measured_spec.json" && cp "$OUT/calibrate_no_counters.out" "$OUT/gpu_calibration.json"
  fi
fi

# 3b. the same ceilings through PyTorch's kernels and cuBLAS, an independent check of the plugin's;
#     and Nsight Compute's counters on kernels of known work, an independent check of the range profiler
py_sys=$(command -v python3)
if want probes; then
  step torch_probe 120 "$py_sys" bench/gpu_torch_probe.py "$OUT/torch_probe.json"
  if command -v ncu > /dev/null; then
    step ncu_probe 120 ncu --clock-control none --csv --metrics \
      dram__bytes_read.sum,dram__bytes_write.sum,smsp__sass_thread_inst_executed_op_ffma_pred_on.sum,smsp__sass_thread_inst_executed_op_fadd_pred_on.sum,smsp__sass_thread_inst_executed_op_fmul_pred_on.sum,smsp__inst_executed.sum,gpc__cycles_elapsed.max \
      "$py_sys" bench/gpu_torch_probe.py "$OUT/ncu_probe_kernels.json" --ncu
  else
    skip ncu_probe "ncu is not on PATH"
  fi
fi

# 4. measured runs: the torch worker on cuda:0 (the second framework on this GPU is not there yet:
#    LibTorch's plugin has no CUDA build, and JAX's CUDA plugin is not in .venv)
py=${NEURALCOST_PYTHON:-}
[ -n "$py" ] || { [ -x .venv/bin/python3 ] && py=$PWD/.venv/bin/python3; } || py=$(command -v python3)
if [ -n "$py" ] && "$py" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  export NEURALCOST_PYTHON=$py  # the workers' interpreter (docs/worker-protocol.md)
  if want profile; then
    step export_resnet18 120 "$py" bench/gpu_resnet18.py "$OUT/resnet18.pt2" 32
    step profile_torch_resnet18 200 "$bin" profile --model "$OUT/resnet18.pt2" --input x=32x3x224x224 --backend torch \
      --device cuda:0 --mode eager,compiled --budget 5 --format json \
      && cp "$OUT/profile_torch_resnet18.out" "$OUT/profile_torch_resnet18.json"
    step profile_torch_reference 160 "$bin" profile --model cnn,transformer --backend torch --device cuda:0 \
      --mode eager,compiled --batch 32 --budget 3 --format json \
      && cp "$OUT/profile_torch_reference.out" "$OUT/profile_torch_reference.json"
  fi
  # a small real decoder (issue 25): time per output token and time to first token on the GPU, with
  # its roofline; SmolLM2-135M's own config, random weights, transformers' model class, nothing fetched
  if want decoder; then
    cfg=data/decoders/smollm2-135m.json
    step profile_torch_decoder_decode 200 "$bin" profile "$cfg" --phase decode --context 512 --batch 1,8 \
      --dtype bf16 --backend torch --device cuda:0 --mode eager,compiled --budget 3 --format json \
      && cp "$OUT/profile_torch_decoder_decode.out" "$OUT/profile_torch_decoder_decode.json"
    step profile_torch_decoder_prefill 120 "$bin" profile "$cfg" --phase prefill --prompt 512 --batch 1 \
      --dtype bf16 --backend torch --device cuda:0 --mode eager,compiled --budget 3 --format json \
      && cp "$OUT/profile_torch_decoder_prefill.out" "$OUT/profile_torch_decoder_prefill.json"
    step profile_torch_decoder_fp32 75 "$bin" profile "$cfg" --phase decode --context 512 --batch 1 \
      --dtype fp32 --backend torch --device cuda:0 --mode eager --budget 3 --format json \
      && cp "$OUT/profile_torch_decoder_fp32.out" "$OUT/profile_torch_decoder_fp32.json"
  fi
else
  skip profile_torch "no CUDA-enabled torch in $py (set NEURALCOST_PYTHON to one)"
fi
skip profile_libtorch_cuda "the LibTorch plugin has no CUDA build yet (issue 17 item 1)"
skip profile_jax_cuda "JAX's CUDA plugin is not in .venv, and the device machine has no network to install it"

# 5. bad input: one error line and exit 1
want bad_input && {
  for args in "hardware calibrate --device cuda:7" "hardware calibrate --device cuda:x" \
              "hardware calibrate --device cuda:0 --threads 2" "profile --model ff --device cuda:7"; do
    # shellcheck disable=SC2086
    timeout 60 "$bin" $args > /dev/null 2> "$OUT/bad.err"
    echo "$args => exit $?: $(head -c 400 "$OUT/bad.err" | tr '\n' ' ')"
  done
} > "$OUT/bad_input.txt"

# 6. the issue's done-criteria, judged from what was recorded
python3 - "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]
verdict = {"note": "judged by bench/gpu_check.sh from this run's files; nothing is assumed"}
try:
    cal = json.load(open(os.path.join(out, "gpu_calibration.json")))
    by = {c["name"]: c for c in cal["ceilings"]}
    def ratio(name):
        return by[name]["ratio"] if name in by and by[name]["ratio"] is not None else None
    verdict["hbm_copy_ratio"] = ratio("hbm_copy")
    verdict["hbm_memcpy_ratio"] = ratio("hbm_memcpy")
    best_copy = max((r for r in (ratio("hbm_copy"), ratio("hbm_memcpy")) if r is not None), default=None)
    verdict["hbm_copy_at_least_85pct"] = best_copy is not None and best_copy >= 0.85
    verdict["gemm_bf16_ratio"] = ratio("gemm_bf16")
    verdict["gemm_bf16_at_least_70pct"] = ratio("gemm_bf16") is not None and ratio("gemm_bf16") >= 0.70
    verdict["ceilings_above_datasheet"] = [c["name"] for c in cal["ceilings"] if c["above_datasheet"]]
    verdict["counter_checks_within_2pct"] = all(abs(k["ratio"] - 1) <= 0.02 for k in cal.get("counter_checks", [])
                                                if k["ratio"] is not None) if cal.get("counter_checks") else None
except (OSError, ValueError, KeyError) as e:
    verdict["calibration"] = f"no usable gpu_calibration.json: {e}"
try:
    probe = json.load(open(os.path.join(out, "torch_probe.json")))["ceilings"]
    ours = {c["name"]: c["measured"] for c in cal["ceilings"]}
    pairs = {"hbm_copy": "hbm_copy_bytes_per_second", "gemm_bf16": "gemm_bf16_flops_per_second",
             "gemm_fp16": "gemm_fp16_flops_per_second", "gemm_tf32": "gemm_tf32_flops_per_second"}
    verdict["plugin_over_torch"] = {k: ours[k] / probe[v] for k, v in pairs.items() if k in ours and v in probe}
except (OSError, ValueError, KeyError, NameError, ZeroDivisionError) as e:
    verdict["plugin_over_torch"] = f"not compared: {e}"
effs = []
for name in ("profile_torch_resnet18.json", "profile_torch_reference.json"):
    try:
        for run in json.load(open(os.path.join(out, name)))["runs"]:
            # the issue's "no efficiency above 100 %": the fused bound is the one a run cannot beat
            if not run.get("failed") and run.get("fused_efficiency") is not None:
                effs.append(run["fused_efficiency"])
    except (OSError, ValueError, KeyError):
        pass
verdict["efficiencies_above_100pct"] = [e for e in effs if e > 1]
decoder = []
for name in ("decode", "prefill", "fp32"):
    try:
        for run in json.load(open(os.path.join(out, f"profile_torch_decoder_{name}.json")))["runs"]:
            t = run.get("timing") or {}
            decoder.append({"phase": run["contract"].get("model_sizes"), "dtype": run["contract"].get("dtype"),
                            "mode": run.get("mode"), "batch": run.get("batch"), "failed": run.get("failed"),
                            "median_seconds": t.get("median_seconds"), "bound": run.get("bound"),
                            "efficiency": run.get("efficiency"), "fused_efficiency": run.get("fused_efficiency"),
                            "verdict": t.get("verdict")})
    except (OSError, ValueError, KeyError) as e:
        decoder.append({"file": name, "not read": str(e)})
verdict["decoder"] = decoder
verdict["per_layer_counters_vs_counted"] = "not collected yet: counters per framework layer need the CUPTI profiler inside the run (docs/gpu.md)"
json.dump(verdict, open(os.path.join(out, "verdict.json"), "w"), indent=1)
print(json.dumps(verdict, indent=1))
PY
