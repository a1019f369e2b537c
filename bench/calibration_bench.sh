#!/usr/bin/env bash
# Calibration benchmark (issues 5 and 12), in one script:
#  - calibration's kernels against the best independent ones, interleaved in one run
#    (build/bench/calibration_kernels_bench: FMA and triad at least 0.97x);
#  - two full calibrations back to back, then a quick one: each figure the roof uses (FP32 FMA,
#    every level's triad) within 5% of the repeat, and the load each calibration saw (a busy
#    machine makes the comparison meaningless, and the script says so);
#  - DRAM triad >= 0.97 x a plain STREAM triad measured in the same run;
#  - FP32 FMA against the theoretical peak at the CPU table's documented clock;
#  - the best GEMM >= 85% of the measured FP32 FMA peak;
#  - `hardware calibrate` under 60 s, `--quick` under 10 s (wall time of the whole command).
# OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE are left as the environment sets them; to see OpenBLAS
# without them, unset both for this command only:
#   env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE bench/calibration_bench.sh
# The calibrations go to a scratch cache (with --force: a busy machine's are kept for the
# comparison), never the user's. Usage: bench/calibration_bench.sh [KERNEL_ROUNDS] (default 12).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=./build/tools/neural-cost/neural-cost
kernels=./build/bench/calibration_kernels_bench
[ -x "$bin" ] && [ -x "$kernels" ] || { echo "build first: bash scripts/build.sh" >&2; exit 1; }
export NEURALCOST_CACHE_DIR=$(mktemp -d)
trap 'rm -rf "$NEURALCOST_CACHE_DIR"' EXIT
echo "== kernels, interleaved"
"$kernels" "${1:-12}" || true
echo
for mode in full repeat quick; do
  flag=$([ "$mode" = quick ] && echo --quick || true)
  start=$(date +%s.%N)
  "$bin" hardware calibrate $flag --force --format json -o "$NEURALCOST_CACHE_DIR/$mode.json" 2>/dev/null
  end=$(date +%s.%N)
  echo "$start $end" > "$NEURALCOST_CACHE_DIR/$mode.wall"
done
/usr/bin/python3 - "$NEURALCOST_CACHE_DIR" <<'PY'
import json, sys
d = sys.argv[1]
def check(name, ok, text):
    print(f"  {'PASS' if ok else 'FAIL'}  {name}: {text}")
def load(c):
    b, w = c["load"]["before"], c["load"]["during"]
    return (f"others {b['other_cpus']*100:.0f}% / {w['other_cpus']*100:.0f}% of a CPU, "
            f"steal {b['steal_fraction']*100:.1f}% / {w['steal_fraction']*100:.1f}% (before / during)")
runs = {}
for mode in ["full", "repeat", "quick"]:
    c = json.load(open(f"{d}/{mode}.json"))
    start, end = map(float, open(f"{d}/{mode}.wall").read().split())
    runs[mode] = c
    print(f"== {mode} calibration: {c['threads']} threads, {c['kernel_isa']}, {c['rounds']} rounds, clock "
          f"{c['clock_ghz']:.3f} GHz measured, peak clock {c['peak_clock']['ghz']:.2f} GHz, "
          f"OPENBLAS_CORETYPE={c['environment'].get('OPENBLAS_CORETYPE', '(unset)')}")
    print(f"  load: {load(c)}{'; BUSY' if c['load']['busy'] else ''}")
    for level in c["levels"]:
        t = level["triad"]
        print(f"  {level['name']:5} {level['working_set_bytes'] / 2**20:9.2f} MiB  read {level['read']['best'] / 1e9:7.1f}"
              f"  copy {level['copy']['best'] / 1e9:7.1f}  triad {t['best'] / 1e9:7.1f} GB/s"
              f" ({t['kernel']}, best two rounds within {t.get('round_agreement', 0) * 100:.1f}%)")
    dram, stream = c["levels"][-1]["triad"]["best"], c["stream_triad"]["best"]
    check("DRAM triad vs plain STREAM", dram / stream >= 0.97, f"{dram / 1e9:.1f} / {stream / 1e9:.1f} GB/s = {dram / stream:.3f} (target 0.97)")
    fma, theory = c["fma"]["fp32"]["best"], c["theoretical_flops_per_second"]["fp32"]
    print(f"  FP32 FMA {fma / 1e9:.1f} GFLOP/s = {fma / theory:.3f} of the theoretical {theory / 1e9:.1f} "
          f"(the cores ran at about {fma / theory * c['peak_clock']['ghz']:.2f} GHz)")
    for g in c["gemm"]:
        print(f"  GEMM {g['library']} {g['dtype']} n={g['n']}: {g['flops_per_second']['best'] / 1e9:.1f} GFLOP/s")
    best = max((g for g in c["gemm"] if g["dtype"] == "fp32"), key=lambda g: g["flops_per_second"]["best"])
    ratio = best["flops_per_second"]["best"] / fma
    check("best FP32 GEMM vs FMA peak", ratio >= 0.85, f"{best['library']}: {ratio:.3f} (target 0.85)")
    limit = 10 if mode == "quick" else 60
    check("wall time", end - start < limit, f"{end - start:.1f} s (target under {limit} s)")
a, b = runs["full"], runs["repeat"]
print("== repeat agreement (full calibration and its repeat; target within 5%)")
figures = [("FP32 FMA", a["fma"]["fp32"]["best"], b["fma"]["fp32"]["best"])]
for la, lb in zip(a["levels"], b["levels"]):
    figures.append((f"{la['name']} triad", la["triad"]["best"], lb["triad"]["best"]))
for name, x, y in figures:
    diff = abs(x - y) / max(x, y)
    check(name, diff <= 0.05, f"{x / 1e9:.1f} and {y / 1e9:.1f} differ by {diff * 100:.1f}%")
if a["load"]["busy"] or b["load"]["busy"]:
    print("  note: the machine was busy during at least one of them (load above): the agreement is not an idle machine's")
PY
