// A GPU's measured ceilings (`hardware calibrate --device cuda:N`): HBM copy and triad, L2 read,
// FP32 and FP64 FMA from our own kernels, cuBLASLt GEMM peaks for tf32, bf16, fp16 and fp8, and
// the launch floor, each beside the datasheet figure of the built-in spec with the ratio. The
// measurements run in the CUDA plugin (neuralcost_cuda.so, built when nvcc was found), loaded
// only when the machine has the device; this side checks, reads and compares.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "neuralcost/core/device.hpp"
#include "neuralcost/hardware/spec.hpp"

namespace neuralcost {

struct GpuCeiling {
  std::string name;  ///< hbm_copy, hbm_triad, l2_read, fp32_fma, fp64_fma, gemm_tf32, gemm_bf16, gemm_fp16, gemm_fp8,
                     ///< launch_floor
  double measured = 0;
  std::string unit;                 ///< B/s, FLOP/s, s
  std::string how;                  ///< the kernel and its size
  std::optional<double> datasheet;  ///< the spec's figure it is compared with
  std::string datasheet_field;      ///< which field ("memory_bandwidth_bytes_per_second", "peak_flops_per_second.bf16")
  std::optional<double> ratio;      ///< measured / datasheet
  /// A rate above its datasheet ceiling: the measurement is wrong (or the spec is), never believed.
  bool above_datasheet = false;
};

/// A hardware counter checked on a kernel of ours whose work is known by construction (CUPTI's
/// range profiler around copy, triad and FP32 FMA kernels): FLOPs as fadd + fmul + 2 ffma, and
/// DRAM bytes read + written, beside what the kernel must do.
struct CounterCheck {
  std::string kernel;    ///< copy, triad, fp32_fma
  std::string quantity;  ///< "fp32 FLOPs", "DRAM bytes"
  double expected = 0;
  double measured = 0;
  std::optional<double> ratio;  ///< measured / expected (empty when nothing is expected)
};

struct GpuCalibration {
  std::string device;  ///< cuda:N
  std::string gpu_name;
  std::string compute_capability;
  std::string spec_id;  ///< the built-in spec compared against; empty when none names this GPU
  bool quick = false;
  std::vector<GpuCeiling> ceilings;
  std::vector<CounterCheck> counter_checks;  ///< with --counters
  std::vector<std::string> skipped;          ///< "gemm_fp8: needs compute capability 8.9, ..."
  std::vector<std::string> warnings;         ///< a ceiling above its datasheet, and the like
};

/// The datasheet spec with what `calibration` measured in its place: memory bandwidth (the better
/// of HBM copy and triad), the GEMM peaks per dtype, the FMA peaks, the L2 bandwidth and the launch
/// floor, each with "measured: ..." as its source. A figure above its datasheet ceiling is not
/// believed and the datasheet's stays (a note says so); what was not measured keeps the datasheet
/// figure. A spec file of it (`hardware calibrate --device cuda:N --spec-output FILE`) is what
/// `--hardware FILE` takes: the roofline of what this GPU did, not of its datasheet.
HardwareSpec measured_gpu_spec(const HardwareSpec& datasheet, const GpuCalibration& calibration);

/// True when this build has the CUDA plugin (nvcc was found at build time).
bool cuda_plugin_built();

/// Reads the plugin's answer (docs/gpu.md §3) and sets each ceiling beside `datasheet` (may be
/// null). kDataLoss naming `origin` and the field when the text is not what the plugin writes.
GpuCalibration parse_gpu_calibration(std::string_view plugin_json, const HardwareSpec* datasheet,
                                     const std::string& origin);

/// Reads the plugin's counter check (docs/gpu.md §4): per kernel the counter study's metric values
/// and the expected figures; kDataLoss naming `origin` and the field when malformed.
std::vector<CounterCheck> parse_counter_check(std::string_view plugin_json, const std::string& origin);

/// Measures `device` ("cuda:N"); with `counters`, also checks the hardware counters on kernels of
/// known work (CUPTI). Counters that cannot be read (not permitted to this user: the driver's
/// ERR_NVGPUCTRPERM, named) are kNotFound "hardware counters not available here". One named error when it cannot:
/// kInvalidArgument for a malformed name or "cpu"; kNotFound when CUDA is unavailable here (with the reason) or there
/// is no such device; kUnimplemented when this build has no CUDA plugin ("CUDA toolkit not found at build time");
/// kInternal with CUDA's message when a measurement fails.
GpuCalibration calibrate_gpu(const Device& device, bool quick, bool counters = false);

}  // namespace neuralcost
