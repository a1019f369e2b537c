// The calibration kernels (see calibration_kernels.hpp). Each x86 variant is compiled for its
// instruction set with a target attribute and called only when the CPU reports it.
#include "calibrate/calibration_kernels.hpp"

// GCC 12 reports its own AVX-512 headers (_mm512_undefined_*) as using uninitialised values
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

namespace neuralcost::calibration {
namespace {

#if defined(__x86_64__)
bool avx512() { return __builtin_cpu_supports("avx512f"); }
bool avx2() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }
bool avx512bf16() {
  // GCC 12's __builtin_cpu_supports has no avx512bf16: CPUID leaf 7, sub-leaf 1, EAX bit 5
  unsigned a = 0, b = 0, c = 0, d = 0;
  __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(1));
  return avx512() && (a & (1u << 5)) != 0;
}

// reads use 8 accumulators: enough independent adds (3-cycle latency) for two loads a cycle
__attribute__((target("avx512f"))) float read512(const float* a, std::size_t n) {
  __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;
  for (std::size_t i = 0; i < n; i += 128) {
    s0 = _mm512_add_ps(s0, _mm512_load_ps(a + i));
    s1 = _mm512_add_ps(s1, _mm512_load_ps(a + i + 16));
    s2 = _mm512_add_ps(s2, _mm512_load_ps(a + i + 32));
    s3 = _mm512_add_ps(s3, _mm512_load_ps(a + i + 48));
    s4 = _mm512_add_ps(s4, _mm512_load_ps(a + i + 64));
    s5 = _mm512_add_ps(s5, _mm512_load_ps(a + i + 80));
    s6 = _mm512_add_ps(s6, _mm512_load_ps(a + i + 96));
    s7 = _mm512_add_ps(s7, _mm512_load_ps(a + i + 112));
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)),
                                            _mm512_add_ps(_mm512_add_ps(s4, s5), _mm512_add_ps(s6, s7))));
}
__attribute__((target("avx512f"))) void copy512(float* d, const float* s, std::size_t n) {
  for (std::size_t i = 0; i < n; i += 64) {
    _mm512_store_ps(d + i, _mm512_load_ps(s + i));
    _mm512_store_ps(d + i + 16, _mm512_load_ps(s + i + 16));
    _mm512_store_ps(d + i + 32, _mm512_load_ps(s + i + 32));
    _mm512_store_ps(d + i + 48, _mm512_load_ps(s + i + 48));
  }
}
// triads are unrolled four times (four independent load-FMA-store streams per iteration); the
// non-temporal variants write with streaming stores and fence once at the end of the pass
#define NC_TRIAD4(STORE, LOAD, FMA, k, width)                                                 \
  for (std::size_t i = 0; i < n; i += 4 * (width)) {                                          \
    STORE(a + i, FMA(k, LOAD(c + i), LOAD(b + i)));                                           \
    STORE(a + i + (width), FMA(k, LOAD(c + i + (width)), LOAD(b + i + (width))));             \
    STORE(a + i + 2 * (width), FMA(k, LOAD(c + i + 2 * (width)), LOAD(b + i + 2 * (width)))); \
    STORE(a + i + 3 * (width), FMA(k, LOAD(c + i + 3 * (width)), LOAD(b + i + 3 * (width)))); \
  }
__attribute__((target("avx512f"))) void triad512(float* a, const float* b, const float* c, float s, std::size_t n) {
  const __m512 k = _mm512_set1_ps(s);
  NC_TRIAD4(_mm512_store_ps, _mm512_load_ps, _mm512_fmadd_ps, k, 16)
}
__attribute__((target("avx512f"))) void triad512_nt(float* a, const float* b, const float* c, float s, std::size_t n) {
  const __m512 k = _mm512_set1_ps(s);
  NC_TRIAD4(_mm512_stream_ps, _mm512_load_ps, _mm512_fmadd_ps, k, 16)
  _mm_sfence();
}
__attribute__((target("avx512f"))) void copy512_nt(float* d, const float* s, std::size_t n) {
  for (std::size_t i = 0; i < n; i += 64) {
    _mm512_stream_ps(d + i, _mm512_load_ps(s + i));
    _mm512_stream_ps(d + i + 16, _mm512_load_ps(s + i + 16));
    _mm512_stream_ps(d + i + 32, _mm512_load_ps(s + i + 32));
    _mm512_stream_ps(d + i + 48, _mm512_load_ps(s + i + 48));
  }
  _mm_sfence();
}
__attribute__((target("avx2,fma"))) float read256(const float* a, std::size_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;
  for (std::size_t i = 0; i < n; i += 64) {
    s0 = _mm256_add_ps(s0, _mm256_load_ps(a + i));
    s1 = _mm256_add_ps(s1, _mm256_load_ps(a + i + 8));
    s2 = _mm256_add_ps(s2, _mm256_load_ps(a + i + 16));
    s3 = _mm256_add_ps(s3, _mm256_load_ps(a + i + 24));
    s4 = _mm256_add_ps(s4, _mm256_load_ps(a + i + 32));
    s5 = _mm256_add_ps(s5, _mm256_load_ps(a + i + 40));
    s6 = _mm256_add_ps(s6, _mm256_load_ps(a + i + 48));
    s7 = _mm256_add_ps(s7, _mm256_load_ps(a + i + 56));
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)),
                                       _mm256_add_ps(_mm256_add_ps(s4, s5), _mm256_add_ps(s6, s7))));
  float sum = 0;
  for (float v : lanes) sum += v;
  return sum;
}
__attribute__((target("avx2,fma"))) void copy256(float* d, const float* s, std::size_t n) {
  for (std::size_t i = 0; i < n; i += 32) {
    _mm256_store_ps(d + i, _mm256_load_ps(s + i));
    _mm256_store_ps(d + i + 8, _mm256_load_ps(s + i + 8));
    _mm256_store_ps(d + i + 16, _mm256_load_ps(s + i + 16));
    _mm256_store_ps(d + i + 24, _mm256_load_ps(s + i + 24));
  }
}
__attribute__((target("avx2,fma"))) void triad256(float* a, const float* b, const float* c, float s, std::size_t n) {
  const __m256 k = _mm256_set1_ps(s);
  NC_TRIAD4(_mm256_store_ps, _mm256_load_ps, _mm256_fmadd_ps, k, 8)
}
__attribute__((target("avx2,fma"))) void triad256_nt(float* a, const float* b, const float* c, float s, std::size_t n) {
  const __m256 k = _mm256_set1_ps(s);
  NC_TRIAD4(_mm256_stream_ps, _mm256_load_ps, _mm256_fmadd_ps, k, 8)
  _mm_sfence();
}
__attribute__((target("avx2,fma"))) void copy256_nt(float* d, const float* s, std::size_t n) {
  for (std::size_t i = 0; i < n; i += 32) {
    _mm256_stream_ps(d + i, _mm256_load_ps(s + i));
    _mm256_stream_ps(d + i + 8, _mm256_load_ps(s + i + 8));
    _mm256_stream_ps(d + i + 16, _mm256_load_ps(s + i + 16));
    _mm256_stream_ps(d + i + 24, _mm256_load_ps(s + i + 24));
  }
  _mm_sfence();
}

// SSE (128-bit, in every x86-64): on the reference VM the fastest width from DRAM
float read128(const float* a, std::size_t n) {
  __m128 s0 = _mm_setzero_ps(), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;
  for (std::size_t i = 0; i < n; i += 32) {
    s0 = _mm_add_ps(s0, _mm_load_ps(a + i));
    s1 = _mm_add_ps(s1, _mm_load_ps(a + i + 4));
    s2 = _mm_add_ps(s2, _mm_load_ps(a + i + 8));
    s3 = _mm_add_ps(s3, _mm_load_ps(a + i + 12));
    s4 = _mm_add_ps(s4, _mm_load_ps(a + i + 16));
    s5 = _mm_add_ps(s5, _mm_load_ps(a + i + 20));
    s6 = _mm_add_ps(s6, _mm_load_ps(a + i + 24));
    s7 = _mm_add_ps(s7, _mm_load_ps(a + i + 28));
  }
  alignas(16) float lanes[4];
  _mm_store_ps(lanes, _mm_add_ps(_mm_add_ps(_mm_add_ps(s0, s1), _mm_add_ps(s2, s3)),
                                 _mm_add_ps(_mm_add_ps(s4, s5), _mm_add_ps(s6, s7))));
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}
void copy128(float* d, const float* s, std::size_t n) {
  for (std::size_t i = 0; i < n; i += 16) {
    _mm_store_ps(d + i, _mm_load_ps(s + i));
    _mm_store_ps(d + i + 4, _mm_load_ps(s + i + 4));
    _mm_store_ps(d + i + 8, _mm_load_ps(s + i + 8));
    _mm_store_ps(d + i + 12, _mm_load_ps(s + i + 12));
  }
}
__m128 fma128(__m128 k, __m128 c, __m128 b) { return _mm_add_ps(_mm_mul_ps(k, c), b); }
void triad128(float* a, const float* b, const float* c, float s, std::size_t n) {
  const __m128 k = _mm_set1_ps(s);
  NC_TRIAD4(_mm_store_ps, _mm_load_ps, fma128, k, 4)
}
void triad128_nt(float* a, const float* b, const float* c, float s, std::size_t n) {
  const __m128 k = _mm_set1_ps(s);
  NC_TRIAD4(_mm_stream_ps, _mm_load_ps, fma128, k, 4)
  _mm_sfence();
}
void copy128_nt(float* d, const float* s, std::size_t n) {
  for (std::size_t i = 0; i < n; i += 16) {
    _mm_stream_ps(d + i, _mm_load_ps(s + i));
    _mm_stream_ps(d + i + 4, _mm_load_ps(s + i + 4));
    _mm_stream_ps(d + i + 8, _mm_load_ps(s + i + 8));
    _mm_stream_ps(d + i + 12, _mm_load_ps(s + i + 12));
  }
  _mm_sfence();
}

// 12 independent accumulators cover the FMA latency (4 cycles) of two pipes with room to spare.
// A macro, not a template: the body must be compiled inside each function's target attribute.
// Each accumulator starts from its own value (init(k)): identical chains would be merged into
// one by the compiler.
#define NC_BURST(V, init, x, y, op, iterations)                                                                     \
  V a0 = init(0), a1 = init(1), a2 = init(2), a3 = init(3), a4 = init(4), a5 = init(5), a6 = init(6), a7 = init(7), \
    a8 = init(8), a9 = init(9), a10 = init(10), a11 = init(11);                                                     \
  for (std::uint64_t i = 0; i < (iterations); ++i) {                                                                \
    a0 = op(a0, x, y);                                                                                              \
    a1 = op(a1, x, y);                                                                                              \
    a2 = op(a2, x, y);                                                                                              \
    a3 = op(a3, x, y);                                                                                              \
    a4 = op(a4, x, y);                                                                                              \
    a5 = op(a5, x, y);                                                                                              \
    a6 = op(a6, x, y);                                                                                              \
    a7 = op(a7, x, y);                                                                                              \
    a8 = op(a8, x, y);                                                                                              \
    a9 = op(a9, x, y);                                                                                              \
    a10 = op(a10, x, y);                                                                                            \
    a11 = op(a11, x, y);                                                                                            \
  }

volatile float sink_f;
volatile double sink_d;

__attribute__((target("avx512f"))) void fma512_fp32(std::uint64_t it) {
  const __m512 x = _mm512_set1_ps(0.999f), y = _mm512_set1_ps(1e-7f);
#define NC_INIT(k) _mm512_set1_ps(0.01f * (k))
  NC_BURST(__m512, NC_INIT, x, y, _mm512_fmadd_ps, it)
#undef NC_INIT
  sink_f =
      _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                                         _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)),
                                                       _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)))));
}
__attribute__((target("avx512f"))) void fma512_fp64(std::uint64_t it) {
  const __m512d x = _mm512_set1_pd(0.999), y = _mm512_set1_pd(1e-7);
#define NC_INIT(k) _mm512_set1_pd(0.01 * (k))
  NC_BURST(__m512d, NC_INIT, x, y, _mm512_fmadd_pd, it)
#undef NC_INIT
  sink_d =
      _mm512_reduce_add_pd(_mm512_add_pd(_mm512_add_pd(_mm512_add_pd(a0, a1), _mm512_add_pd(a2, a3)),
                                         _mm512_add_pd(_mm512_add_pd(_mm512_add_pd(a4, a5), _mm512_add_pd(a6, a7)),
                                                       _mm512_add_pd(_mm512_add_pd(a8, a9), _mm512_add_pd(a10, a11)))));
}
__attribute__((target("avx512f,avx512bf16"))) void dp512_bf16(std::uint64_t it) {
  const __m512bh x = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(1e-3f));
#define NC_INIT(k) _mm512_set1_ps(0.01f * (k))
  NC_BURST(__m512, NC_INIT, x, x, _mm512_dpbf16_ps, it)
#undef NC_INIT
  sink_f =
      _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                                         _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)),
                                                       _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)))));
}
__attribute__((target("avx2,fma"))) void fma256_fp32(std::uint64_t it) {
  const __m256 x = _mm256_set1_ps(0.999f), y = _mm256_set1_ps(1e-7f);
#define NC_INIT(k) _mm256_set1_ps(0.01f * (k))
  NC_BURST(__m256, NC_INIT, x, y, _mm256_fmadd_ps, it)
#undef NC_INIT
  const __m256 t = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                                 _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)),
                                               _mm256_add_ps(_mm256_add_ps(a8, a9), _mm256_add_ps(a10, a11))));
  sink_f = _mm256_cvtss_f32(t);
}
__attribute__((target("avx2,fma"))) void fma256_fp64(std::uint64_t it) {
  const __m256d x = _mm256_set1_pd(0.999), y = _mm256_set1_pd(1e-7);
#define NC_INIT(k) _mm256_set1_pd(0.01 * (k))
  NC_BURST(__m256d, NC_INIT, x, y, _mm256_fmadd_pd, it)
#undef NC_INIT
  const __m256d t = _mm256_add_pd(_mm256_add_pd(_mm256_add_pd(a0, a1), _mm256_add_pd(a2, a3)),
                                  _mm256_add_pd(_mm256_add_pd(_mm256_add_pd(a4, a5), _mm256_add_pd(a6, a7)),
                                                _mm256_add_pd(_mm256_add_pd(a8, a9), _mm256_add_pd(a10, a11))));
  sink_d = _mm256_cvtsd_f64(t);
}
#elif defined(__aarch64__)
#define NC_BURST(V, init, x, y, op, iterations)                                                                     \
  V a0 = init(0), a1 = init(1), a2 = init(2), a3 = init(3), a4 = init(4), a5 = init(5), a6 = init(6), a7 = init(7), \
    a8 = init(8), a9 = init(9), a10 = init(10), a11 = init(11);                                                     \
  for (std::uint64_t i = 0; i < (iterations); ++i) {                                                                \
    a0 = op(a0, x, y);                                                                                              \
    a1 = op(a1, x, y);                                                                                              \
    a2 = op(a2, x, y);                                                                                              \
    a3 = op(a3, x, y);                                                                                              \
    a4 = op(a4, x, y);                                                                                              \
    a5 = op(a5, x, y);                                                                                              \
    a6 = op(a6, x, y);                                                                                              \
    a7 = op(a7, x, y);                                                                                              \
    a8 = op(a8, x, y);                                                                                              \
    a9 = op(a9, x, y);                                                                                              \
    a10 = op(a10, x, y);                                                                                            \
    a11 = op(a11, x, y);                                                                                            \
  }
volatile float sink_f;
volatile double sink_d;
#endif

}  // namespace

std::string kernel_isa() {
#if defined(__x86_64__)
  return avx512() ? "avx512" : avx2() ? "avx2" : "scalar";
#elif defined(__aarch64__)
  return "neon";
#else
  return "scalar";
#endif
}

std::vector<std::string> bandwidth_widths() {
  std::vector<std::string> widths;
#if defined(__x86_64__)
  if (avx512()) widths.push_back("avx512");
  if (avx2()) widths.push_back("avx2");
  widths.push_back("sse");
#else
  widths.push_back("scalar");
#endif
  return widths;
}

std::vector<std::string> read_variants() { return bandwidth_widths(); }

std::vector<std::string> copy_variants() {
  std::vector<std::string> variants;
  for (const std::string& w : bandwidth_widths()) {
    variants.push_back(w);
    if (w != "scalar") variants.push_back(w + "-nt");
  }
  return variants;
}

std::vector<std::string> triad_variants() { return copy_variants(); }

// the scalar kernels are kept scalar: vectorised by the compiler they would be another width
__attribute__((optimize("no-tree-vectorize"))) float read_scalar(const float* a, std::size_t n) {
  float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (std::size_t i = 0; i < n; i += 4) {
    s0 += a[i];
    s1 += a[i + 1];
    s2 += a[i + 2];
    s3 += a[i + 3];
  }
  return s0 + s1 + s2 + s3;
}
__attribute__((optimize("no-tree-vectorize"))) void copy_scalar(float* dst, const float* src, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dst[i] = src[i];
}
__attribute__((optimize("no-tree-vectorize"))) void triad_scalar(float* a, const float* b, const float* c, float s,
                                                                 std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
}

/// The kernel of `variant` among one per variant (scalar when the variant is not built here).
template <typename Kernel>
Kernel pick(const std::string& variant, [[maybe_unused]] Kernel w512, [[maybe_unused]] Kernel w512_nt,
            [[maybe_unused]] Kernel w256, [[maybe_unused]] Kernel w256_nt, [[maybe_unused]] Kernel w128,
            [[maybe_unused]] Kernel w128_nt, Kernel scalar) {
#if defined(__x86_64__)
  if (variant == "avx512") return w512;
  if (variant == "avx512-nt") return w512_nt;
  if (variant == "avx2") return w256;
  if (variant == "avx2-nt") return w256_nt;
  if (variant == "sse") return w128;
  if (variant == "sse-nt") return w128_nt;
#endif
  return scalar;
}

#if defined(__x86_64__)
ReadPass read_pass(const std::string& v) {
  return pick<ReadPass>(v, read512, read512, read256, read256, read128, read128, read_scalar);
}
CopyPass copy_pass(const std::string& v) {
  return pick<CopyPass>(v, copy512, copy512_nt, copy256, copy256_nt, copy128, copy128_nt, copy_scalar);
}
TriadPass triad_pass(const std::string& v) {
  return pick<TriadPass>(v, triad512, triad512_nt, triad256, triad256_nt, triad128, triad128_nt, triad_scalar);
}
#else
ReadPass read_pass(const std::string&) { return read_scalar; }
CopyPass copy_pass(const std::string&) { return copy_scalar; }
TriadPass triad_pass(const std::string&) { return triad_scalar; }
#endif

void stream_triad(double* a, const double* b, const double* c, double s, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
}

double fma_burst(const std::string& dtype, std::uint64_t iterations) {
  const double n = static_cast<double>(iterations) * 12;
#if defined(__x86_64__)
  if (avx512()) {
    if (dtype == "fp32") return fma512_fp32(iterations), n * 16 * 2;
    if (dtype == "fp64") return fma512_fp64(iterations), n * 8 * 2;
    if (dtype == "bf16" && avx512bf16()) return dp512_bf16(iterations), n * 16 * 4;
    return 0;
  }
  if (avx2()) {
    if (dtype == "fp32") return fma256_fp32(iterations), n * 8 * 2;
    if (dtype == "fp64") return fma256_fp64(iterations), n * 4 * 2;
    return 0;
  }
#elif defined(__aarch64__)
  if (dtype == "fp32") {
    const float32x4_t x = vdupq_n_f32(0.999f), y = vdupq_n_f32(1e-7f);
#define NC_INIT(k) vdupq_n_f32(0.01f * (k))
    NC_BURST(float32x4_t, NC_INIT, x, y, vfmaq_f32, iterations)
#undef NC_INIT
    sink_f = vaddvq_f32(vaddq_f32(
        vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)),
        vaddq_f32(vaddq_f32(a4, a5), vaddq_f32(vaddq_f32(a6, a7), vaddq_f32(vaddq_f32(a8, a9), vaddq_f32(a10, a11))))));
    return n * 4 * 2;
  }
  if (dtype == "fp64") {
    const float64x2_t x = vdupq_n_f64(0.999), y = vdupq_n_f64(1e-7);
#define NC_INIT(k) vdupq_n_f64(0.01 * (k))
    NC_BURST(float64x2_t, NC_INIT, x, y, vfmaq_f64, iterations)
#undef NC_INIT
    sink_d = vaddvq_f64(vaddq_f64(
        vaddq_f64(vaddq_f64(a0, a1), vaddq_f64(a2, a3)),
        vaddq_f64(vaddq_f64(a4, a5), vaddq_f64(vaddq_f64(a6, a7), vaddq_f64(vaddq_f64(a8, a9), vaddq_f64(a10, a11))))));
    return n * 2 * 2;
  }
#endif
  (void)n;
  return 0;
}

void add_chain(std::uint64_t iterations) {
  // x += x, each add waiting for the one before: one add per cycle on every core we know. Not
  // "add $1": Intel's Golden Cove and later fold dependent add-immediates at rename (this chain
  // of "add $1" ran at 19.6 "GHz" on a 4 GHz Xeon, 11.96 on another), a register operand they
  // cannot fold. The value doubles and wraps; only its dependency matters.
  std::uint64_t x = 1;
  for (std::uint64_t i = 0; i < iterations; ++i) {
#if defined(__x86_64__)
    __asm__ volatile(
        "add %0, %0\n\tadd %0, %0\n\tadd %0, %0\n\tadd %0, %0\n\t"
        "add %0, %0\n\tadd %0, %0\n\tadd %0, %0\n\tadd %0, %0"
        : "+r"(x));
#elif defined(__aarch64__)
    __asm__ volatile(
        "add %0, %0, %0\n\tadd %0, %0, %0\n\tadd %0, %0, %0\n\tadd %0, %0, %0\n\t"
        "add %0, %0, %0\n\tadd %0, %0, %0\n\tadd %0, %0, %0\n\tadd %0, %0, %0"
        : "+r"(x));
#else
    x += x + 8;
#endif
  }
  sink_d = static_cast<double>(x);
}

}  // namespace neuralcost::calibration
