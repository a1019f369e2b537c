"""The GPU's ceilings measured a second, independent way: through PyTorch's own kernels and cuBLAS
(not neural-cost's plugin), each timed with CUDA events, best of N after warm-ups. bench/gpu_check.sh
sets these beside `hardware calibrate --device cuda:0` so that a wrong figure in either shows.

Usage: python gpu_torch_probe.py OUT.json [--ncu]
With --ncu it runs one small instance of each kernel once, for Nsight Compute to count (no timing).
"""

import json
import sys

import torch


def best_seconds(fn, reps, warm=3):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        best = min(best, a.elapsed_time(b) / 1e3)
    return best


def gemm(n, dtype, tf32=False):
    torch.backends.cuda.matmul.allow_tf32 = tf32
    x = torch.randn(n, n, device="cuda", dtype=torch.float32).to(dtype)
    y = torch.randn(n, n, device="cuda", dtype=torch.float32).to(dtype)
    out = torch.empty(n, n, device="cuda", dtype=dtype)
    return x, y, out


def main():
    out_path = sys.argv[1]
    dev = torch.cuda.get_device_properties(0)
    result = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "device": dev.name,
        "multiprocessors": dev.multi_processor_count,
        "memory_bytes": dev.total_memory,
        "how": "PyTorch kernels and cuBLAS, CUDA events, best of N after 3 warm-ups",
        "ceilings": {},
    }
    if "--ncu" in sys.argv:
        # one of each kernel of known work, for ncu: a copy of 256 MiB, a fp32 GEMM without TF32
        # (FFMA), a bf16 GEMM (tensor cores); each FLOP and byte is known by construction
        a = torch.ones(64 * 2**20, device="cuda")
        b = torch.empty_like(a)
        b.copy_(a)
        x, y, o = gemm(2048, torch.float32)
        torch.mm(x, y, out=o)
        x, y, o = gemm(4096, torch.bfloat16)
        torch.mm(x, y, out=o)
        torch.cuda.synchronize()
        result["ncu_kernels"] = {
            "copy": {"bytes_read": 2**28, "bytes_written": 2**28},
            "gemm_fp32_2048": {"flops": 2 * 2048**3},
            "gemm_bf16_4096": {"flops": 2 * 4096**3},
        }
        json.dump(result, open(out_path, "w"), indent=1)
        return
    c = result["ceilings"]
    n = 2**28  # 1 GiB of fp32 per array
    a = torch.ones(n, device="cuda")
    b = torch.empty_like(a)
    t = best_seconds(lambda a=a, b=b: b.copy_(a), 20)
    c["hbm_copy_bytes_per_second"] = 2 * 4 * n / t
    a = b = None
    for name, dtype, tf32, size in (
        ("gemm_bf16", torch.bfloat16, False, 8192),
        ("gemm_fp16", torch.float16, False, 8192),
        ("gemm_tf32", torch.float32, True, 8192),
        ("gemm_fp32", torch.float32, False, 4096),
    ):
        x, y, o = gemm(size, dtype, tf32)
        t = best_seconds(lambda x=x, y=y, o=o: torch.mm(x, y, out=o), 10)
        c[name + "_flops_per_second"] = 2 * size**3 / t
        del x, y, o
    torch.backends.cuda.matmul.allow_tf32 = False
    one = torch.zeros(1, device="cuda")
    launches = 10000

    def many():
        for _ in range(launches):
            one.add_(1)

    c["launch_seconds_from_python"] = best_seconds(many, 3, warm=1) / launches
    result["notes"] = [
        "launch_seconds_from_python includes PyTorch's dispatch from Python: an upper bound on the launch floor"
    ]
    json.dump(result, open(out_path, "w"), indent=1)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
