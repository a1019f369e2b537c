// GEMM ceilings (see gemm_ceiling.hpp). OpenBLAS chooses its kernels from the CPU unless
// OPENBLAS_CORETYPE forces a core type (preset on the reference VM, where it halves sgemm):
// the core name it chose is recorded with the result. Both libraries are loaded when a
// calibration first needs them (OpenBLAS starts its thread pool when loaded; no other command
// should have it); their headers give the signatures.
#include "calibrate/gemm_ceiling.hpp"
#include "calibrate/rates.hpp"

#include <cblas.h>
#include <dlfcn.h>
#include <dnnl.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include <fmt/format.h>

namespace neuralcost {
namespace {

using Clock = std::chrono::steady_clock;

template <typename F>
F* symbol(void* library, const char* name) {
  return library ? reinterpret_cast<F*>(::dlsym(library, name)) : nullptr;
}

struct OpenBlas {
  void* library = ::dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
  decltype(cblas_sgemm)* sgemm = symbol<decltype(cblas_sgemm)>(library, "cblas_sgemm");
  decltype(cblas_dgemm)* dgemm = symbol<decltype(cblas_dgemm)>(library, "cblas_dgemm");
  decltype(openblas_set_num_threads)* set_threads =
      symbol<decltype(openblas_set_num_threads)>(library, "openblas_set_num_threads");
  decltype(openblas_get_corename)* corename = symbol<decltype(openblas_get_corename)>(library, "openblas_get_corename");
  decltype(openblas_get_config)* config = symbol<decltype(openblas_get_config)>(library, "openblas_get_config");
  bool ok() const { return sgemm && dgemm && set_threads && corename && config; }
};

struct OneDnn {
  void* library = ::dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL);
  decltype(dnnl_sgemm)* sgemm = symbol<decltype(dnnl_sgemm)>(library, "dnnl_sgemm");
  decltype(dnnl_version)* version = symbol<decltype(dnnl_version)>(library, "dnnl_version");
  bool ok() const { return sgemm && version; }
};

// loaded once, never unloaded
const OpenBlas& openblas() {
  static const OpenBlas lib;
  return lib;
}
const OneDnn& onednn() {
  static const OneDnn lib;
  return lib;
}

template <typename Run>
RateMeasurement time_gemm(int n, int runs, const Run& run) {
  run();  // warm-up: threads started, pages touched, kernels chosen
  std::vector<double> seconds;
  for (int r = 0; r < runs; ++r) {
    const auto t0 = Clock::now();
    run();
    seconds.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return rate_measurement(2.0 * n * n * static_cast<double>(n), seconds);
}

std::string openblas_name() {
  const char* core = openblas().ok() ? openblas().corename() : nullptr;
  return fmt::format("OpenBLAS ({})", core ? core : "unknown core");
}

std::string onednn_name() {
  if (!onednn().ok()) return "oneDNN";
  const dnnl_version_t* v = onednn().version();
  return fmt::format("oneDNN {}.{}.{}", v->major, v->minor, v->patch);
}

}  // namespace

std::vector<GemmCeiling> measure_gemm(int threads, bool quick) {
  const int n = quick ? 1536 : 2048;
  const int runs = quick ? 2 : 5;
  const auto elements = static_cast<std::size_t>(n) * n;
  std::vector<GemmCeiling> out;
  // oneDNN first: loading OpenBLAS starts its thread pool, which would compete with oneDNN's
  const OneDnn& dnn = onednn();
  omp_set_num_threads(threads);
  // each library's idle threads spin for a while after a call (OpenBLAS about 0.1 s): a pause
  // keeps them from stealing cycles from the next library's run
  const auto settle = [] { std::this_thread::sleep_for(std::chrono::milliseconds(200)); };
  {
    std::vector<float> a(elements, 0.5f), b(elements, 0.25f), c(elements, 0.f);
    if (dnn.ok()) {
      out.push_back({onednn_name(), "fp32", n, time_gemm(n, runs, [&] {
                       dnn.sgemm('N', 'N', n, n, n, 1.f, a.data(), n, b.data(), n, 0.f, c.data(), n);
                     })});
      settle();
    }
    const OpenBlas& ob = openblas();
    if (ob.ok()) ob.set_threads(threads);
    if (ob.ok()) {
      out.push_back({openblas_name(), "fp32", n, time_gemm(n, runs, [&] {
                       ob.sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.f, a.data(), n, b.data(), n, 0.f,
                                c.data(), n);
                     })});
    }
  }
  const OpenBlas& ob = openblas();
  if (ob.ok()) {
    std::vector<double> a(elements, 0.5), b(elements, 0.25), c(elements, 0.);
    out.push_back({openblas_name(), "fp64", n, time_gemm(n, runs, [&] {
                     ob.dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1., a.data(), n, b.data(), n, 0.,
                              c.data(), n);
                   })});
  }
  return out;
}

std::map<std::string, std::string> gemm_environment() {
  const char* config = openblas().ok() ? openblas().config() : nullptr;
  return {{"openblas", openblas().ok() ? fmt::format("{}; {}", openblas_name(), config ? config : "")
                                       : "not loadable (libopenblas.so.0): no OpenBLAS GEMM ceiling"},
          {"onednn", onednn().ok() ? onednn_name() : "not loadable (libdnnl.so.2): no oneDNN GEMM ceiling"}};
}

}  // namespace neuralcost
