// Calibration's own kernels against the best independent kernels writable for this CPU, measured
// interleaved in one run (issue 12: ours must reach at least 0.97x the best of them):
//   - FP32 FMA peak: calibration::fma_burst against AVX-512 (or AVX2) FMA loops with 8, 16 and
//     24 accumulators, unrolled twice, and an inline-assembly loop of 16 independent FMAs;
//   - triad a[i] = b[i] + s*c[i] (STREAM's byte counting: 12 bytes per float element) at a DRAM
//     size and at an L2 size: the best of calibration::triad_pass over its variants against
//     plain C++, AVX-512/AVX2/SSE with regular and non-temporal stores, unrolled 4x, and the
//     STREAM triad over doubles.
// Every variant runs on one pinned OpenMP thread per CPU, all at once, timed between barriers
// (as calibration times its kernels); the runs cycle through the variants one run at a time (the
// order rotating), so a busy moment of the machine falls on every variant alike. The figure
// compared is the 90th percentile of a variant's runs, with the best run and the median beside
// it: on a shared VM the single best DRAM run is a rare quiet moment of the neighbours (the best
// of 48 runs of one kernel ranged from 38 to 57 GB/s between variants with identical machine
// code), while the 90th percentile is stable.
// Usage: calibration_kernels_bench [ROUNDS] (default 8). Prints one line per variant and the ratios.
#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "calibrate/calibration_kernels.hpp"
#include "neuralcost/measure/load.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace {

using Clock = std::chrono::steady_clock;
namespace cal = neuralcost::calibration;

std::vector<int> allowed_cpus() {
  std::vector<int> cpus = neuralcost::affinity_cpus();  // the library's reading of the affinity mask
  if (cpus.empty()) cpus.push_back(0);
  return cpus;
}

/// Runs body(thread) on every thread at once, `runs` times (after one untimed run when `warm`);
/// returns each run's seconds (start barrier to end barrier).
std::vector<double> timed(int threads, int runs, const std::function<void(int)>& body, bool warm = true) {
  static const std::vector<int> cpus = allowed_cpus();
  std::vector<double> seconds(static_cast<std::size_t>(runs));
  Clock::time_point start;
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num();
    cpu_set_t pinned;
    CPU_ZERO(&pinned);
    CPU_SET(cpus[static_cast<std::size_t>(t) % cpus.size()], &pinned);
    sched_setaffinity(0, sizeof(pinned), &pinned);
    if (warm) body(t);
    for (int r = 0; r < runs; ++r) {
#pragma omp barrier
#pragma omp master
      start = Clock::now();
#pragma omp barrier
      body(t);
#pragma omp barrier
#pragma omp master
      seconds[static_cast<std::size_t>(r)] = std::chrono::duration<double>(Clock::now() - start).count();
    }
  }
  return seconds;
}

// ---- independent FMA kernels -----------------------------------------------------------------

volatile float sink;

#if defined(__x86_64__)
bool has_avx512() { return __builtin_cpu_supports("avx512f"); }

/// `acc` independent AVX-512 FMA chains, unrolled twice; returns FLOPs.
template <int acc>
__attribute__((target("avx512f"))) double fma512(std::uint64_t iterations) {
  __m512 a[acc];
  for (int k = 0; k < acc; ++k) a[k] = _mm512_set1_ps(0.01f * static_cast<float>(k));
  const __m512 x = _mm512_set1_ps(0.999f), y = _mm512_set1_ps(1e-7f);
  for (std::uint64_t i = 0; i < iterations; i += 2) {
#pragma GCC unroll 64
    for (int k = 0; k < acc; ++k) a[k] = _mm512_fmadd_ps(a[k], x, y);
#pragma GCC unroll 64
    for (int k = 0; k < acc; ++k) a[k] = _mm512_fmadd_ps(a[k], x, y);
  }
  __m512 s = a[0];
  for (int k = 1; k < acc; ++k) s = _mm512_add_ps(s, a[k]);
  sink = _mm512_reduce_add_ps(s);
  return static_cast<double>(iterations) * acc * 16 * 2;
}

const float kX = 0.999f, kY = 1e-7f;

/// 16 vfmadd231ps on zmm0..zmm15 per iteration, written out in assembly: nothing but the FMAs,
/// a decrement and a branch. Returns FLOPs.
__attribute__((target("avx512f"))) double fma512_asm(std::uint64_t iterations) {
  __asm__ volatile(
      "vbroadcastss %[x], %%zmm16\n\t"
      "vbroadcastss %[y], %%zmm17\n\t"
      "vxorps %%zmm0, %%zmm0, %%zmm0\n\t vmovaps %%zmm0, %%zmm1\n\t vmovaps %%zmm0, %%zmm2\n\t"
      "vmovaps %%zmm0, %%zmm3\n\t vmovaps %%zmm0, %%zmm4\n\t vmovaps %%zmm0, %%zmm5\n\t"
      "vmovaps %%zmm0, %%zmm6\n\t vmovaps %%zmm0, %%zmm7\n\t vmovaps %%zmm0, %%zmm8\n\t"
      "vmovaps %%zmm0, %%zmm9\n\t vmovaps %%zmm0, %%zmm10\n\t vmovaps %%zmm0, %%zmm11\n\t"
      "vmovaps %%zmm0, %%zmm12\n\t vmovaps %%zmm0, %%zmm13\n\t vmovaps %%zmm0, %%zmm14\n\t"
      "vmovaps %%zmm0, %%zmm15\n\t"
      "1:\n\t"
      "vfmadd231ps %%zmm16, %%zmm17, %%zmm0\n\t vfmadd231ps %%zmm16, %%zmm17, %%zmm1\n\t"
      "vfmadd231ps %%zmm16, %%zmm17, %%zmm2\n\t vfmadd231ps %%zmm16, %%zmm17, %%zmm3\n\t"
      "vfmadd231ps %%zmm16, %%zmm17, %%zmm4\n\t vfmadd231ps %%zmm16, %%zmm17, %%zmm5\n\t"
      "vfmadd231ps %%zmm16, %%zmm17, %%zmm6\n\t vfmadd231ps %%zmm16, %%zmm17, %%zmm7\n\t"
      "vfmadd231ps %%zmm16, %%zmm17, %%zmm8\n\t vfmadd231ps %%zmm16, %%zmm17, %%zmm9\n\t"
      "vfmadd231ps %%zmm16, %%zmm17, %%zmm10\n\t vfmadd231ps %%zmm16, %%zmm17, %%zmm11\n\t"
      "vfmadd231ps %%zmm16, %%zmm17, %%zmm12\n\t vfmadd231ps %%zmm16, %%zmm17, %%zmm13\n\t"
      "vfmadd231ps %%zmm16, %%zmm17, %%zmm14\n\t vfmadd231ps %%zmm16, %%zmm17, %%zmm15\n\t"
      "dec %[n]\n\t"
      "jnz 1b\n\t"
      : [n] "+r"(iterations)
      : [x] "m"(kX), [y] "m"(kY)
      : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12",
        "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "cc");
  return 0;  // the caller counts: iterations x 16 x 16 x 2
}

template <int acc>
__attribute__((target("avx2,fma"))) double fma256(std::uint64_t iterations) {
  __m256 a[acc];
  for (int k = 0; k < acc; ++k) a[k] = _mm256_set1_ps(0.01f * static_cast<float>(k));
  const __m256 x = _mm256_set1_ps(0.999f), y = _mm256_set1_ps(1e-7f);
  for (std::uint64_t i = 0; i < iterations; i += 2) {
#pragma GCC unroll 64
    for (int k = 0; k < acc; ++k) a[k] = _mm256_fmadd_ps(a[k], x, y);
#pragma GCC unroll 64
    for (int k = 0; k < acc; ++k) a[k] = _mm256_fmadd_ps(a[k], x, y);
  }
  __m256 s = a[0];
  for (int k = 1; k < acc; ++k) s = _mm256_add_ps(s, a[k]);
  sink = _mm256_cvtss_f32(s);
  return static_cast<double>(iterations) * acc * 8 * 2;
}

// ---- independent triad kernels ---------------------------------------------------------------

__attribute__((target("avx512f"))) void triad512_nt(float* a, const float* b, const float* c, float s, std::size_t n) {
  const __m512 k = _mm512_set1_ps(s);
  for (std::size_t i = 0; i < n; i += 64) {
    _mm512_stream_ps(a + i, _mm512_fmadd_ps(k, _mm512_load_ps(c + i), _mm512_load_ps(b + i)));
    _mm512_stream_ps(a + i + 16, _mm512_fmadd_ps(k, _mm512_load_ps(c + i + 16), _mm512_load_ps(b + i + 16)));
    _mm512_stream_ps(a + i + 32, _mm512_fmadd_ps(k, _mm512_load_ps(c + i + 32), _mm512_load_ps(b + i + 32)));
    _mm512_stream_ps(a + i + 48, _mm512_fmadd_ps(k, _mm512_load_ps(c + i + 48), _mm512_load_ps(b + i + 48)));
  }
  _mm_sfence();
}
__attribute__((target("avx512f"))) void triad512_unrolled(float* a, const float* b, const float* c, float s,
                                                          std::size_t n) {
  const __m512 k = _mm512_set1_ps(s);
  for (std::size_t i = 0; i < n; i += 64) {
    _mm512_store_ps(a + i, _mm512_fmadd_ps(k, _mm512_load_ps(c + i), _mm512_load_ps(b + i)));
    _mm512_store_ps(a + i + 16, _mm512_fmadd_ps(k, _mm512_load_ps(c + i + 16), _mm512_load_ps(b + i + 16)));
    _mm512_store_ps(a + i + 32, _mm512_fmadd_ps(k, _mm512_load_ps(c + i + 32), _mm512_load_ps(b + i + 32)));
    _mm512_store_ps(a + i + 48, _mm512_fmadd_ps(k, _mm512_load_ps(c + i + 48), _mm512_load_ps(b + i + 48)));
  }
}
__attribute__((target("avx2,fma"))) void triad256_nt(float* a, const float* b, const float* c, float s, std::size_t n) {
  const __m256 k = _mm256_set1_ps(s);
  for (std::size_t i = 0; i < n; i += 32) {
    _mm256_stream_ps(a + i, _mm256_fmadd_ps(k, _mm256_load_ps(c + i), _mm256_load_ps(b + i)));
    _mm256_stream_ps(a + i + 8, _mm256_fmadd_ps(k, _mm256_load_ps(c + i + 8), _mm256_load_ps(b + i + 8)));
    _mm256_stream_ps(a + i + 16, _mm256_fmadd_ps(k, _mm256_load_ps(c + i + 16), _mm256_load_ps(b + i + 16)));
    _mm256_stream_ps(a + i + 24, _mm256_fmadd_ps(k, _mm256_load_ps(c + i + 24), _mm256_load_ps(b + i + 24)));
  }
  _mm_sfence();
}
void triad128_nt(float* a, const float* b, const float* c, float s, std::size_t n) {
  const __m128 k = _mm_set1_ps(s);
  for (std::size_t i = 0; i < n; i += 16) {
    _mm_stream_ps(a + i, _mm_add_ps(_mm_mul_ps(k, _mm_load_ps(c + i)), _mm_load_ps(b + i)));
    _mm_stream_ps(a + i + 4, _mm_add_ps(_mm_mul_ps(k, _mm_load_ps(c + i + 4)), _mm_load_ps(b + i + 4)));
    _mm_stream_ps(a + i + 8, _mm_add_ps(_mm_mul_ps(k, _mm_load_ps(c + i + 8)), _mm_load_ps(b + i + 8)));
    _mm_stream_ps(a + i + 12, _mm_add_ps(_mm_mul_ps(k, _mm_load_ps(c + i + 12)), _mm_load_ps(b + i + 12)));
  }
  _mm_sfence();
}
#else
bool has_avx512() { return false; }
#endif

/// The compiler's own loop (vectorised at -O2/-O3 for the baseline ISA).
void triad_plain(float* a, const float* b, const float* c, float s, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
}

struct Variant {
  std::string group;  ///< "fma", "triad DRAM", "triad L2"
  std::string name;
  bool ours = false;
  std::function<double(int)> run;  ///< one run on thread t; returns the work it did (FLOPs or bytes)
  std::vector<double> rates;
};

double best(const std::vector<double>& v) { return v.empty() ? 0 : *std::max_element(v.begin(), v.end()); }
/// The `q`-quantile of `v` (nearest rank).
double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(q * static_cast<double>(v.size())))];
}
double median(const std::vector<double>& v) { return quantile(v, 0.5); }
double p90(const std::vector<double>& v) { return quantile(v, 0.9); }

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 8;
  const int threads = static_cast<int>(allowed_cpus().size());
  const int runs_per_round = 3;  // cycles through the variants per round
  std::vector<Variant> variants;

  // FMA: about 40 ms per run at 500 GFLOP/s over 2 threads
  const std::uint64_t fma_iterations = 400'000;
  variants.push_back({"fma",
                      "ours: calibration::fma_burst fp32",
                      true,
                      [=](int) { return cal::fma_burst("fp32", fma_iterations); },
                      {}});
#if defined(__x86_64__)
  if (has_avx512()) {
    variants.push_back({"fma", "avx512, 8 accumulators x2", false, [=](int) { return fma512<8>(fma_iterations); }, {}});
    variants.push_back(
        {"fma", "avx512, 16 accumulators x2", false, [=](int) { return fma512<16>(fma_iterations); }, {}});
    variants.push_back(
        {"fma", "avx512, 24 accumulators x2", false, [=](int) { return fma512<24>(fma_iterations); }, {}});
    variants.push_back(
        {"fma",
         "avx512 asm, 16 vfmadd231ps",
         false,
         [=](int) { return fma512_asm(fma_iterations), static_cast<double>(fma_iterations) * 16 * 16 * 2; },
         {}});
  } else if (__builtin_cpu_supports("avx2")) {
    variants.push_back({"fma", "avx2, 8 accumulators x2", false, [=](int) { return fma256<8>(fma_iterations); }, {}});
    variants.push_back({"fma", "avx2, 16 accumulators x2", false, [=](int) { return fma256<16>(fma_iterations); }, {}});
  }
#endif

  // triads: per thread three arrays; DRAM: 3 x 64 MiB per thread (far beyond any L3 share);
  // L2: 3 x 128 KiB per thread (half of a 1 MiB L2 with room to spare)
  struct Arrays {
    std::size_t n = 0;
    std::vector<float*> a, b, c;
  };
  auto allocate = [&](std::size_t n) {
    Arrays arr;
    arr.n = n;
    for (int t = 0; t < threads; ++t) {
      for (auto* v : {&arr.a, &arr.b, &arr.c})
        v->push_back(static_cast<float*>(std::aligned_alloc(64, n * sizeof(float))));
    }
    timed(threads, 1, [&](int t) {
      std::fill_n(arr.a[t], n, 1.0f);
      std::fill_n(arr.b[t], n, 2.0f);
      std::fill_n(arr.c[t], n, 3.0f);
    });
    return arr;
  };
  Arrays dram = allocate((64u << 20) / sizeof(float));
  Arrays l2 = allocate((128u << 10) / sizeof(float));
  auto add_triads = [&](const std::string& group, Arrays& arr, std::size_t passes) {
    const double bytes = 12.0 * static_cast<double>(arr.n) * static_cast<double>(passes);
    auto of = [&, bytes, passes](cal::TriadPass pass) {
      return [&arr, bytes, passes, pass](int t) {
        for (std::size_t p = 0; p < passes; ++p) pass(arr.a[t], arr.b[t], arr.c[t], 0.5f, arr.n);
        return bytes;
      };
    };
    for (const std::string& w : cal::triad_variants())
      variants.push_back({group, "ours: " + w, true, of(cal::triad_pass(w)), {}});
    variants.push_back({group, "plain C++ loop", false, of(triad_plain), {}});
#if defined(__x86_64__)
    if (has_avx512()) {
      variants.push_back({group, "avx512 unrolled x4", false, of(triad512_unrolled), {}});
      variants.push_back({group, "avx512 non-temporal x4", false, of(triad512_nt), {}});
    }
    if (__builtin_cpu_supports("avx2")) variants.push_back({group, "avx2 non-temporal x4", false, of(triad256_nt), {}});
    variants.push_back({group, "sse non-temporal x4", false, of(triad128_nt), {}});
#endif
    variants.push_back({group,
                        "STREAM triad (doubles)",
                        false,
                        [&arr, passes](int t) {
                          auto* a = reinterpret_cast<double*>(arr.a[t]);
                          const auto* b = reinterpret_cast<const double*>(arr.b[t]);
                          const auto* c = reinterpret_cast<const double*>(arr.c[t]);
                          for (std::size_t p = 0; p < passes; ++p) cal::stream_triad(a, b, c, 0.5, arr.n / 2);
                          return 12.0 * static_cast<double>(arr.n) * static_cast<double>(passes);
                        },
                        {}});
  };
  add_triads("triad DRAM", dram, 1);
  add_triads("triad L2", l2, 2000);  // about 3 ms a run

  fmt::print("calibration kernels against independent ones: {} threads (one per CPU, pinned), {} rounds x {} runs\n",
             threads, rounds, runs_per_round);
  // one untimed run of each variant, then rounds: each round cycles through every variant
  // runs_per_round times, one run at a time, so that variants measured one after the other share
  // whatever the machine was doing (the order rotates every cycle)
  for (Variant& v : variants)
    timed(
        threads, 1, [&](int t) { v.run(t); }, false);
  std::size_t cycle = 0;
  for (int r = 0; r < rounds; ++r) {
    for (int k = 0; k < runs_per_round; ++k, ++cycle) {
      for (std::size_t i = 0; i < variants.size(); ++i) {
        Variant& v = variants[(i + cycle) % variants.size()];
        std::vector<double> work(static_cast<std::size_t>(threads));
        const auto seconds = timed(
            threads, 1, [&](int t) { work[static_cast<std::size_t>(t)] = v.run(t); }, false);
        double total = 0;
        for (double w : work) total += w;
        v.rates.push_back(total / seconds[0]);
      }
    }
  }

  // group -> (ours, best independent), by the 90th percentile of runs, the best run and the median
  std::map<std::string, std::pair<double, double>> by_group, by_group_best, by_group_median;
  std::string group;
  for (const Variant& v : variants) {
    if (v.group != group) {
      group = v.group;
      fmt::print("\n{}\n", group);
    }
    const bool fma = v.group == "fma";
    const double scale = fma ? 1e9 : 1e9;
    fmt::print("  {:38} best {:8.1f}  p90 {:8.1f}  median {:8.1f} {}\n", v.name, best(v.rates) / scale,
               p90(v.rates) / scale, median(v.rates) / scale, fma ? "GFLOP/s" : "GB/s");
    auto keep = [&](std::map<std::string, std::pair<double, double>>& into, double figure) {
      auto& [ours, other] = into[v.group];
      (v.ours ? ours : other) = std::max(v.ours ? ours : other, figure);
    };
    keep(by_group, p90(v.rates));
    keep(by_group_best, best(v.rates));
    keep(by_group_median, median(v.rates));
  }
  fmt::print("\n");
  bool pass = true;
  for (const auto& [g, figures] : by_group) {
    const double ratio = figures.first / figures.second;
    const auto& b = by_group_best[g];
    const auto& m = by_group_median[g];
    pass = pass && ratio >= 0.97;
    fmt::print(
        "{}  {}: ours / best independent = {:.3f} at the 90th percentile of runs (target 0.97); {:.3f} by "
        "the best run, {:.3f} by the median\n",
        ratio >= 0.97 ? "PASS" : "FAIL", g, ratio, b.first / b.second, m.first / m.second);
  }
  return pass ? 0 : 1;
}
