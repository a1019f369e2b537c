// The GPU calibration kernels of `hardware calibrate --device cuda:N`: HBM copy and triad, L2
// read bandwidth, FP32 and FP64 FMA peaks, and the launch floor (back-to-back empty kernels).
// Each is timed with CUDA events, best of several rounds. Compiled by nvcc into the CUDA plugin.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <string>
#include <vector>

#include "backends/cuda/calibration_kernels.hpp"

namespace neuralcost::cuda {
namespace {

// four independent 16-byte loads in flight per thread before their stores: with one, the copy
// reached 82 % of an H200's datasheet bandwidth, below PyTorch's copy (87 %) on the same part
constexpr int kCopyUnroll = 4;

__global__ void copy_kernel(const float4* __restrict__ in, float4* __restrict__ out, size_t n) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  for (; i + (kCopyUnroll - 1) * stride < n; i += kCopyUnroll * stride) {
    float4 v[kCopyUnroll];
#pragma unroll
    for (int u = 0; u < kCopyUnroll; ++u) v[u] = in[i + u * stride];
#pragma unroll
    for (int u = 0; u < kCopyUnroll; ++u) out[i + u * stride] = v[u];
  }
  for (; i < n; i += stride) out[i] = in[i];
}

// uniform values in [-1, 1) from a hash of (seed, index), converted to the GEMM's input type:
// measured on an H200, cuBLASLt's bf16 GEMM ran 13 % faster on a constant byte pattern than on
// such values (892 against 788 TFLOP/s), because bits that never toggle draw less power
template <typename T>
__global__ void fill_uniform_kernel(T* p, size_t n, unsigned long long seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    unsigned long long z = seed + (i + 1) * 0x9E3779B97F4A7C15ULL;  // splitmix64
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    p[i] = T(float(z >> 40) * (2.0f / 16777216.0f) - 1.0f);
  }
}

__global__ void triad_kernel(float4* __restrict__ a, const float4* __restrict__ b, const float4* __restrict__ c,
                             float s, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const float4 x = b[i], y = c[i];
    a[i] = make_float4(x.x + s * y.x, x.y + s * y.y, x.z + s * y.z, x.w + s * y.w);
  }
}

// reads the same working set `passes` times; the sum is written only if it equals a value it
// never takes, so the reads cannot be optimised away
__global__ void l2_read_kernel(const float4* __restrict__ in, size_t n, int passes, float* sink) {
  float acc = 0;
  for (int p = 0; p < passes; ++p) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
      const float4 v = __ldcg(in + i);  // cache at L2, not L1
      acc += v.x + v.y + v.z + v.w;
    }
  }
  if (acc == -1.2345f) *sink = acc;
}

constexpr int kChains = 8;  // independent FMA chains per thread, enough to hide the FMA latency

template <typename T>
__global__ void fma_kernel(int iterations, T seed, T* sink) {
  T x[kChains];
#pragma unroll
  for (int c = 0; c < kChains; ++c) x[c] = seed + T(threadIdx.x + c);
  const T a = T(0.999), b = T(0.001);
  for (int i = 0; i < iterations; ++i) {
#pragma unroll
    for (int c = 0; c < kChains; ++c) x[c] = fma(x[c], a, b);
  }
  T sum = 0;
#pragma unroll
  for (int c = 0; c < kChains; ++c) sum += x[c];
  if (sum == T(-1.2345)) *sink = sum;
}

__global__ void empty_kernel() {}

}  // namespace

std::vector<Ceiling> measure_kernel_ceilings(int device, bool quick) {
  check(cudaSetDevice(device), "cudaSetDevice");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  const int rounds = quick ? 3 : 7;
  const int sms = prop.multiProcessorCount;
  std::vector<Ceiling> out;

  // HBM: three arrays, each far larger than L2 (1 GiB; 256 MiB quick), and never above a third of memory
  size_t bytes = size_t(quick ? 256 : 1024) << 20;
  bytes = std::min(bytes, static_cast<size_t>(prop.totalGlobalMem / 8));
  bytes = std::max<size_t>(bytes, 16 * static_cast<size_t>(prop.l2CacheSize));
  const size_t n4 = bytes / sizeof(float4);
  float4 *a = nullptr, *b = nullptr, *c = nullptr;
  float* sink = nullptr;
  check(cudaMalloc(&a, n4 * sizeof(float4)), "cudaMalloc");
  check(cudaMalloc(&b, n4 * sizeof(float4)), "cudaMalloc");
  check(cudaMalloc(&c, n4 * sizeof(float4)), "cudaMalloc");
  check(cudaMalloc(&sink, sizeof(double)), "cudaMalloc");
  check(cudaMemsetAsync(b, 0, n4 * sizeof(float4), stream), "cudaMemset");
  check(cudaMemsetAsync(c, 0, n4 * sizeof(float4), stream), "cudaMemset");
  const int blocks = sms * 8, threads = 256;
  const double copy_s =
      best_seconds_per_call(stream, rounds, 5, [&] { copy_kernel<<<blocks, threads, 0, stream>>>(b, a, n4); });
  out.push_back(
      {"hbm_copy", 2.0 * n4 * sizeof(float4) / copy_s, "B/s",
       "copy kernel, 2 arrays of " + std::to_string(n4 * sizeof(float4) >> 20) + " MiB, bytes read + written"});
  // the driver's device-to-device copy (what PyTorch's copy_ of a contiguous tensor calls): on an
  // H200 it moved 4.17 TB/s where the copy kernel above moved 3.93
  const double memcpy_s = best_seconds_per_call(stream, rounds, 5, [&] {
    check(cudaMemcpyAsync(a, b, n4 * sizeof(float4), cudaMemcpyDeviceToDevice, stream), "cudaMemcpyAsync");
  });
  out.push_back({"hbm_memcpy", 2.0 * n4 * sizeof(float4) / memcpy_s, "B/s",
                 "cudaMemcpyAsync device to device, " + std::to_string(n4 * sizeof(float4) >> 20) +
                     " MiB, bytes read + written"});
  const double triad_s = best_seconds_per_call(
      stream, rounds, 5, [&] { triad_kernel<<<blocks, threads, 0, stream>>>(a, b, c, 3.0f, n4); });
  out.push_back(
      {"hbm_triad", 3.0 * n4 * sizeof(float4) / triad_s, "B/s",
       "triad a = b + s c, 3 arrays of " + std::to_string(n4 * sizeof(float4) >> 20) + " MiB, bytes read + written"});

  // L2: a working set of half the L2, read many times
  const size_t l2_n4 = static_cast<size_t>(prop.l2CacheSize) / 2 / sizeof(float4);
  const int passes = quick ? 20 : 50;
  const double l2_s = best_seconds_per_call(
      stream, rounds, 3, [&] { l2_read_kernel<<<blocks, threads, 0, stream>>>(b, l2_n4, passes, sink); });
  out.push_back({"l2_read", double(passes) * l2_n4 * sizeof(float4) / l2_s, "B/s",
                 "read of " + std::to_string((l2_n4 * sizeof(float4)) >> 20) + " MiB (half the " +
                     std::to_string(prop.l2CacheSize >> 20) + " MiB L2) " + std::to_string(passes) + " times, ld.cg"});
  check(cudaFree(a), "cudaFree");
  check(cudaFree(b), "cudaFree");
  check(cudaFree(c), "cudaFree");

  // FMA peaks: every SM full of threads, 8 independent chains each
  const int fma_blocks = sms * 16, fma_threads = 256;
  const int iterations = quick ? 4096 : 16384;
  const double flops = 2.0 * kChains * double(iterations) * fma_blocks * fma_threads;
  const double fp32_s = best_seconds_per_call(
      stream, rounds, 3, [&] { fma_kernel<float><<<fma_blocks, fma_threads, 0, stream>>>(iterations, 1.0f, sink); });
  out.push_back({"fp32_fma", flops / fp32_s, "FLOP/s",
                 std::to_string(kChains) + " chains of dependent FMAs per thread, " + std::to_string(fma_blocks) +
                     " x " + std::to_string(fma_threads) + " threads"});
  const int fp64_iterations = iterations / 4;
  const double fp64_flops = flops / 4;
  const double fp64_s = best_seconds_per_call(stream, rounds, 3, [&] {
    fma_kernel<double><<<fma_blocks, fma_threads, 0, stream>>>(fp64_iterations, 1.0, reinterpret_cast<double*>(sink));
  });
  out.push_back({"fp64_fma", fp64_flops / fp64_s, "FLOP/s",
                 std::to_string(kChains) + " chains of dependent FMAs per thread, " + std::to_string(fma_blocks) +
                     " x " + std::to_string(fma_threads) + " threads"});

  // launch floor: back-to-back launches of an empty kernel, per launch
  const int launches = quick ? 2000 : 10000;
  const double launch_s =
      best_seconds_per_call(stream, rounds, launches, [&] { empty_kernel<<<1, 32, 0, stream>>>(); });
  out.push_back(
      {"launch_floor", launch_s, "s",
       std::to_string(launches) + " back-to-back launches of an empty kernel on one stream, time per launch"});
  check(cudaGetLastError(), "kernel launch");
  check(cudaFree(sink), "cudaFree");
  check(cudaStreamDestroy(stream), "cudaStreamDestroy");
  return out;
}

void fill_uniform(void* p, size_t n, cudaDataType_t type, unsigned long long seed, cudaStream_t stream) {
  const int blocks = 1024, threads = 256;
  switch (type) {
    case CUDA_R_32F: fill_uniform_kernel<<<blocks, threads, 0, stream>>>(static_cast<float*>(p), n, seed); break;
    case CUDA_R_16BF:
      fill_uniform_kernel<<<blocks, threads, 0, stream>>>(static_cast<__nv_bfloat16*>(p), n, seed);
      break;
    case CUDA_R_16F: fill_uniform_kernel<<<blocks, threads, 0, stream>>>(static_cast<__half*>(p), n, seed); break;
    case CUDA_R_8F_E4M3:
      fill_uniform_kernel<<<blocks, threads, 0, stream>>>(static_cast<__nv_fp8_e4m3*>(p), n, seed);
      break;
    default: throw CudaFailure("fill_uniform: no fill for this data type");
  }
  check(cudaGetLastError(), "fill_uniform");
}

std::vector<KnownWork> launch_known_kernels(int device) {
  check(cudaSetDevice(device), "cudaSetDevice");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  const size_t n4 = size_t(64) << 20 >> 4;  // 64 MiB per array: larger than any L2 today
  float4 *a = nullptr, *b = nullptr, *c = nullptr;
  float* sink = nullptr;
  check(cudaMalloc(&a, n4 * sizeof(float4)), "cudaMalloc");
  check(cudaMalloc(&b, n4 * sizeof(float4)), "cudaMalloc");
  check(cudaMalloc(&c, n4 * sizeof(float4)), "cudaMalloc");
  check(cudaMalloc(&sink, sizeof(double)), "cudaMalloc");
  check(cudaMemset(b, 0, n4 * sizeof(float4)), "cudaMemset");
  check(cudaMemset(c, 0, n4 * sizeof(float4)), "cudaMemset");
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  const int blocks = prop.multiProcessorCount * 8, threads = 256;
  std::vector<KnownWork> work;
  copy_kernel<<<blocks, threads>>>(b, a, n4);
  work.push_back({"copy", 0, 2.0 * n4 * sizeof(float4)});
  triad_kernel<<<blocks, threads>>>(a, b, c, 3.0f, n4);
  work.push_back({"triad", 2.0 * 4 * n4, 3.0 * n4 * sizeof(float4)});  // one FMA (2 FLOPs) per float
  const int iterations = 1024;
  fma_kernel<float><<<blocks, threads>>>(iterations, 1.0f, sink);
  // the chains' FMAs; the start values (kChains adds) and the final sum (kChains adds) are left
  // out of the expectation: 16 of 16,400 FLOPs per thread, under 0.1%
  work.push_back({"fp32_fma", 2.0 * kChains * iterations * double(blocks) * threads, 0});
  check(cudaGetLastError(), "kernel launch");
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  cudaFree(sink);
  return work;
}

}  // namespace neuralcost::cuda
