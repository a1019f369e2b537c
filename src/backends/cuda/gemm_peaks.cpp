// Matrix-unit peaks through cuBLASLt: square GEMMs in tf32, bf16, fp16 and fp8 (e4m3, TN, as
// cuBLASLt requires for fp8), timed with CUDA events. FLOPs = 2 M N K. Inputs are uniform values in
// [-1, 1) (fill_uniform): constant or all-zero inputs draw less power and clock higher (measured:
// 13 % faster on an H200), a ceiling no model's data reaches.
#include <cublasLt.h>

#include <cstdint>
#include <memory>

#include "backends/cuda/calibration_kernels.hpp"

namespace neuralcost::cuda {
namespace {

void check_lt(cublasStatus_t rc, const char* what) {
  if (rc != CUBLAS_STATUS_SUCCESS) throw CudaFailure(std::string(what) + ": " + cublasLtGetStatusString(rc));
}

struct GemmCase {
  const char* name;
  cudaDataType_t ab, cd;
  cublasComputeType_t compute;
  int ab_bytes, cd_bytes;
  bool transpose_a;  // fp8 needs A transposed (TN)
  int min_compute;   // major x 10 + minor
};

constexpr GemmCase kCases[] = {
    {"gemm_tf32", CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, 4, 4, false, 80},
    {"gemm_bf16", CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F, 2, 2, false, 80},
    {"gemm_fp16", CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_32F, 2, 2, false, 70},
    {"gemm_fp8", CUDA_R_8F_E4M3, CUDA_R_16BF, CUBLAS_COMPUTE_32F, 1, 2, true, 89},
};

template <typename T, auto Destroy>
struct Owned {
  T value{};
  ~Owned() {
    if (value) Destroy(value);
  }
};

struct DeviceBuffer {
  void* p = nullptr;
  explicit DeviceBuffer(size_t bytes) { check(cudaMalloc(&p, bytes), "cudaMalloc"); }
  ~DeviceBuffer() { cudaFree(p); }
};

}  // namespace

std::vector<Ceiling> measure_gemm_ceilings(int device, bool quick,
                                           std::vector<std::pair<std::string, std::string>>& skipped) {
  check(cudaSetDevice(device), "cudaSetDevice");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  const int cc = prop.major * 10 + prop.minor;
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  Owned<cublasLtHandle_t, cublasLtDestroy> lt;
  check_lt(cublasLtCreate(&lt.value), "cublasLtCreate");
  const int64_t n = quick ? 4096 : 8192;
  const size_t workspace_bytes = size_t(64) << 20;
  DeviceBuffer workspace(workspace_bytes);
  std::vector<Ceiling> out;
  for (const GemmCase& g : kCases) {
    if (cc < g.min_compute) {
      skipped.emplace_back(g.name, "needs compute capability " + std::to_string(g.min_compute / 10) + "." +
                                       std::to_string(g.min_compute % 10) + ", the part has " +
                                       std::to_string(prop.major) + "." + std::to_string(prop.minor));
      continue;
    }
    Owned<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy> op;
    check_lt(cublasLtMatmulDescCreate(&op.value, g.compute, CUDA_R_32F), "cublasLtMatmulDescCreate");
    const cublasOperation_t ta = g.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = CUBLAS_OP_N;
    check_lt(cublasLtMatmulDescSetAttribute(op.value, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "TRANSA");
    check_lt(cublasLtMatmulDescSetAttribute(op.value, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "TRANSB");
    Owned<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy> la, lb, lc;
    // column-major; square, so A's layout is n x n either way
    check_lt(cublasLtMatrixLayoutCreate(&la.value, g.ab, n, n, n), "cublasLtMatrixLayoutCreate");
    check_lt(cublasLtMatrixLayoutCreate(&lb.value, g.ab, n, n, n), "cublasLtMatrixLayoutCreate");
    check_lt(cublasLtMatrixLayoutCreate(&lc.value, g.cd, n, n, n), "cublasLtMatrixLayoutCreate");
    Owned<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy> pref;
    check_lt(cublasLtMatmulPreferenceCreate(&pref.value), "cublasLtMatmulPreferenceCreate");
    const uint64_t ws = workspace_bytes;
    check_lt(cublasLtMatmulPreferenceSetAttribute(pref.value, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws),
             "MAX_WORKSPACE_BYTES");
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t h = cublasLtMatmulAlgoGetHeuristic(lt.value, op.value, la.value, lb.value, lc.value, lc.value,
                                                            pref.value, 1, &result, &found);
    if (h != CUBLAS_STATUS_SUCCESS || found == 0) {
      skipped.emplace_back(g.name, std::string("cuBLASLt offers no algorithm for it (") +
                                       (h != CUBLAS_STATUS_SUCCESS ? cublasLtGetStatusString(h) : "none found") + ")");
      continue;
    }
    const size_t ab = size_t(n) * n * g.ab_bytes, cd = size_t(n) * n * g.cd_bytes;
    DeviceBuffer a(ab), b(ab), c(cd);
    fill_uniform(a.p, size_t(n) * n, g.ab, 1, stream);
    fill_uniform(b.p, size_t(n) * n, g.ab, 2, stream);
    check(cudaMemsetAsync(c.p, 0, cd, stream), "cudaMemset");
    const float alpha = 1, beta = 0;
    const double s = best_seconds_per_call(stream, quick ? 3 : 5, quick ? 5 : 10, [&] {
      check_lt(cublasLtMatmul(lt.value, op.value, &alpha, a.p, la.value, b.p, lb.value, &beta, c.p, lc.value, c.p,
                              lc.value, &result.algo, workspace.p, workspace_bytes, stream),
               "cublasLtMatmul");
    });
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    const std::string size = std::to_string(n);
    out.push_back({g.name, 2.0 * n * n * n / s, "FLOP/s",
                   "cuBLASLt GEMM " + size + "x" + size + "x" + size + (g.transpose_a ? " (TN)" : " (NN)") +
                       ", fp32 accumulation, best of the rounds"});
  }
  check(cudaStreamDestroy(stream), "cudaStreamDestroy");
  return out;
}

}  // namespace neuralcost::cuda
