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

/// The widths the bandwidth kernels come in on this CPU, widest first: on x86 AVX-512, AVX2 and
/// SSE (every x86-64 has it; plain C++ never beat it), elsewhere "scalar". Calibration tries
/// each and keeps the fastest: on a Zen 4 VM, SSE code streamed a triad from DRAM at 53 GB/s
/// where AVX-512 reached 37.
std::vector<std::string> bandwidth_widths();

/// The variants of each bandwidth kernel on this CPU: read_variants() are the widths; copy and
/// triad add, per x86 vector width, one with non-temporal stores ("avx512-nt", "avx2-nt",
/// "sse-nt"), which write to memory without reading the destination line first: from DRAM they
/// win (no read-for-ownership), in cache they lose (the line is evicted), and calibration keeps
/// the fastest per level.
std::vector<std::string> read_variants();
std::vector<std::string> copy_variants();
std::vector<std::string> triad_variants();

// Bandwidth kernels over float arrays of n elements (64-byte aligned; n a multiple of 128 for
// read_pass, of 64 for copy_pass and triad_pass), in one of the variants above (an unknown one:
// scalar).
using ReadPass = float (*)(const float* a, std::size_t n);                                     ///< reads n floats
using CopyPass = void (*)(float* dst, const float* src, std::size_t n);                        ///< reads n, writes n
using TriadPass = void (*)(float* a, const float* b, const float* c, float s, std::size_t n);  ///< a = b + s*c
ReadPass read_pass(const std::string& variant);
CopyPass copy_pass(const std::string& variant);
TriadPass triad_pass(const std::string& variant);
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
