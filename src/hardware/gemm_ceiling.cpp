// GEMM ceilings (see gemm_ceiling.hpp). OpenBLAS chooses its kernels from the CPU unless
// OPENBLAS_CORETYPE forces a core type (preset on the reference VM, where it halves sgemm):
// the core name it chose is recorded with the result.
#include "hardware/gemm_ceiling.hpp"

#include <cblas.h>
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

template <typename Run>
RateMeasurement time_gemm(int n, int runs, const Run& run) {
  run();  // warm-up: threads started, pages touched, kernels chosen
  std::vector<double> rates;
  for (int r = 0; r < runs; ++r) {
    const auto t0 = Clock::now();
    run();
    rates.push_back(2.0 * n * n * static_cast<double>(n) /
                    std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::sort(rates.begin(), rates.end());
  return {rates.back(), rates[rates.size() / 2], (rates.back() - rates.front()) / rates.back(), runs};
}

std::string openblas_name() {
  const char* core = openblas_get_corename();
  return fmt::format("OpenBLAS ({})", core ? core : "unknown core");
}

std::string onednn_name() {
  const dnnl_version_t* v = dnnl_version();
  return fmt::format("oneDNN {}.{}.{}", v->major, v->minor, v->patch);
}

}  // namespace

std::vector<GemmCeiling> measure_gemm(int threads, bool quick) {
  const int n = quick ? 1024 : 2048;
  const int runs = quick ? 2 : 5;
  const auto elements = static_cast<std::size_t>(n) * n;
  std::vector<GemmCeiling> out;
  openblas_set_num_threads(threads);
  omp_set_num_threads(threads);
  // each library's idle threads spin for a while after a call (OpenBLAS about 0.1 s): a pause
  // keeps them from stealing cycles from the next library's run
  const auto settle = [] { std::this_thread::sleep_for(std::chrono::milliseconds(200)); };
  {
    std::vector<float> a(elements, 0.5f), b(elements, 0.25f), c(elements, 0.f);
    out.push_back({onednn_name(), "fp32", n, time_gemm(n, runs, [&] {
                     dnnl_sgemm('N', 'N', n, n, n, 1.f, a.data(), n, b.data(), n, 0.f, c.data(), n);
                   })});
    settle();
    out.push_back({openblas_name(), "fp32", n, time_gemm(n, runs, [&] {
                     cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.f, a.data(), n, b.data(), n,
                                 0.f, c.data(), n);
                   })});
  }
  {
    std::vector<double> a(elements, 0.5), b(elements, 0.25), c(elements, 0.);
    out.push_back({openblas_name(), "fp64", n, time_gemm(n, runs, [&] {
                     cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1., a.data(), n, b.data(), n, 0.,
                                 c.data(), n);
                   })});
  }
  return out;
}

std::map<std::string, std::string> gemm_environment() {
  const char* config = openblas_get_config();
  return {{"openblas", fmt::format("{}; {}", openblas_name(), config ? config : "")}, {"onednn", onednn_name()}};
}

}  // namespace neuralcost
