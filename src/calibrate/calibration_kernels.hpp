// Internal to calibration: the microbenchmark kernels, each written with intrinsics for the
// widest vectors the CPU has (AVX-512, AVX2, NEON; plain C++ otherwise) and chosen at run time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace neuralcost::calibration {

/// The widest vectors the kernels use on this CPU ("avx512", "avx2", "neon" or "scalar").
std::string kernel_isa();

/// The widths the bandwidth kernels come in on this CPU, widest first; "scalar" is always one.
/// Calibration tries each and keeps the fastest: on the reference VM (Zen 4), SSE code
/// streams a triad from DRAM at 53 GB/s where AVX-512 reaches 37.
std::vector<std::string> bandwidth_widths();

// Bandwidth kernels over float arrays of n elements (64-byte aligned; n a multiple of 128 for
// read_pass, of 64 for copy_pass and of 32 for triad_pass), in one of bandwidth_widths().
using ReadPass = float (*)(const float* a, std::size_t n);                              ///< reads n floats
using CopyPass = void (*)(float* dst, const float* src, std::size_t n);                    ///< reads n, writes n
using TriadPass = void (*)(float* a, const float* b, const float* c, float s, std::size_t n);  ///< a = b + s*c
ReadPass read_pass(const std::string& width);
CopyPass copy_pass(const std::string& width);
TriadPass triad_pass(const std::string& width);
/// The plain STREAM triad, a[i] = b[i] + s*c[i] over doubles, as the compiler makes it: the
/// reference the tuned kernels are held to.
void stream_triad(double* a, const double* b, const double* c, double s, std::size_t n);

/// Runs `iterations` x 12 independent FMAs on full vectors; returns the FLOPs done (2 per
/// multiply-add per lane). `dtype` is "fp32", "fp64" or "bf16" (BF16 dot products: 4 FLOPs
/// per FP32 lane); 0 when the CPU cannot run that dtype's kernel.
double fma_burst(const std::string& dtype, std::uint64_t iterations);

/// Runs `iterations` x 8 dependent integer adds (1 cycle each); the caller divides cycles by
/// time for the clock.
void add_chain(std::uint64_t iterations);
constexpr int kAddsPerIteration = 8;

}  // namespace neuralcost::calibration
