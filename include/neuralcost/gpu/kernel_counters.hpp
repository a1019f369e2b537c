// Hardware counters of GPU kernels, and what they say per layer. A counter record (CUPTI's range
// profiler, or Nsight Compute's export, turned into the JSON of docs/gpu.md §4) lists the
// framework's ranges (RecordFunction / NVTX, on the host thread that launched), the kernel
// launches (host time and correlation id) and per kernel its counters. From it:
//   - FLOPs of a kernel: fadd + fmul + 2 x ffma (and the same for fp64), plus each tensor-core
//     instruction times its FLOPs (the table below, one row per instruction and dtype);
//   - each kernel's layer: the range that encloses its launch on the launching thread;
//   - per layer: measured FLOPs and DRAM bytes beside the counted ones, measured arithmetic
//     intensity, and where it sits on the roofline.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "neuralcost/core/dtype.hpp"
#include "neuralcost/hardware/spec.hpp"

namespace neuralcost {

/// A tensor-core (matrix unit) instruction and the FLOPs one executed instance performs.
struct TensorInstruction {
  std::string_view name;     ///< the record's key: SASS opcode and shape, "HMMA.16816.F32.BF16"
  DType dtype;               ///< its input dtype
  double flops = 0;          ///< per executed instruction (2 x m x n x k of its shape)
  std::string_view counted;  ///< what one count is: "warp", "warpgroup"
  std::string_view source;   ///< where the shape comes from
};

/// Every tensor-core instruction whose FLOPs we know, in one table.
std::span<const TensorInstruction> tensor_instructions();
const TensorInstruction* find_tensor_instruction(std::string_view name);

/// The counters of one kernel (thread-level instruction counts are predicated-on counts:
/// smsp__sass_thread_inst_executed_op_{fadd,fmul,ffma,dadd,dmul,dfma}_pred_on.sum).
struct KernelCounters {
  std::string name;
  std::uint64_t correlation_id = 0;      ///< links the kernel to its launch
  double start_ns = 0, end_ns = 0;       ///< on the GPU
  double fadd = 0, fmul = 0, ffma = 0;   ///< fp32 thread instructions
  double dadd = 0, dmul = 0, dfma = 0;   ///< fp64 thread instructions
  std::map<std::string, double> tensor;  ///< tensor-core instructions executed, by tensor_instructions() name
  double dram_bytes_read = 0;            ///< dram__bytes_read.sum
  double dram_bytes_written = 0;         ///< dram__bytes_write.sum
  double l2_bytes = 0;                   ///< lts__t_bytes.sum
  double cycles = 0;                     ///< gpc__cycles_elapsed.max
};

struct KernelFlops {
  double fp32 = 0;    ///< fadd + fmul + 2 ffma
  double fp64 = 0;    ///< dadd + dmul + 2 dfma
  double tensor = 0;  ///< sum over tensor instructions of count x FLOPs per instruction
  double total() const { return fp32 + fp64 + tensor; }
  /// Tensor instructions the table has no FLOPs for (left out of `tensor`, so measured FLOPs are low).
  std::vector<std::string> unweighted;
};

KernelFlops kernel_flops(const KernelCounters& kernel);

/// A range of the framework's profiler on one host thread (RecordFunction or NVTX push/pop).
struct ProfilerRange {
  std::string name;
  std::uint64_t thread = 0;
  double start_ns = 0, end_ns = 0;
};

/// A kernel launch as the host saw it (the runtime API call, by CUPTI's correlation id).
struct KernelLaunch {
  std::uint64_t correlation_id = 0;
  std::uint64_t thread = 0;
  double start_ns = 0;
};

struct CounterRecord {
  std::string source;  ///< how it was made: "CUPTI range profiler on ...", or "hand-written: ..."
  std::string device;  ///< the GPU's name
  std::vector<ProfilerRange> ranges;
  std::vector<KernelLaunch> launches;
  std::vector<KernelCounters> kernels;
};

/// Reads a counter record (docs/gpu.md §4). Errors (kDataLoss) name `origin` and the field:
/// "rec.json: kernels[3].dram_bytes_read must be a non-negative number".
CounterRecord parse_counter_record(std::string_view json_text, const std::string& origin);

/// Which enclosing range a kernel belongs to: the outermost (the framework's top-level op, the
/// layer) or the innermost (the op that launched it).
enum class RangeLevel { kOutermost, kInnermost };

struct LayerCounters {
  std::string name;  ///< the range's name
  int kernels = 0;
  double flops = 0;         ///< measured: sum of kernel_flops().total()
  double tensor_flops = 0;  ///< the part from tensor-core instructions
  double dram_bytes_read = 0, dram_bytes_written = 0;
  double l2_bytes = 0;
  double kernel_seconds = 0;  ///< sum of the kernels' GPU durations
  double cycles = 0;
  std::vector<std::string> unweighted;  ///< tensor instructions without FLOPs (once each)
  double dram_bytes() const { return dram_bytes_read + dram_bytes_written; }
  /// Measured FLOPs per DRAM byte; empty when the layer moved no DRAM bytes.
  std::optional<double> arithmetic_intensity() const;
};

struct KernelAttribution {
  std::vector<LayerCounters> layers;      ///< in the order of their first kernel's launch
  std::vector<std::string> unattributed;  ///< kernels with no layer, each with why
  double unattributed_flops = 0;
};

/// Maps every kernel to the range that encloses its launch at `level` and sums per range.
/// Ranges with the same name and their kernels are summed into one row per range instance
/// ("name", then "name#2", ... for later instances).
KernelAttribution attribute_kernels(const CounterRecord& record, RangeLevel level = RangeLevel::kOutermost);

/// A layer as counted by the cost model (analysis), to set beside the measured one.
struct CountedLayer {
  std::string name;
  double flops = 0;
  double bytes = 0;  ///< compulsory bytes read + written
};

struct LayerComparison {
  std::string name;
  std::optional<double> counted_flops, measured_flops;
  std::optional<double> counted_bytes, measured_dram_bytes;
  std::optional<double> flops_ratio;                ///< measured / counted
  std::optional<double> measured_intensity;         ///< measured FLOPs / measured DRAM bytes
  std::optional<double> measured_flops_per_second;  ///< measured FLOPs / kernel seconds
  /// The roofline at the measured intensity: min(peak of `dtype`, intensity x bandwidth).
  std::optional<double> attainable_flops_per_second;
  std::optional<double> efficiency;  ///< measured FLOP/s / attainable
};

/// One row per layer in either list (counted order first, then measured-only layers); `spec`
/// (may be null) gives the measured roofline for `dtype`.
std::vector<LayerComparison> compare_layers(const KernelAttribution& measured, const std::vector<CountedLayer>& counted,
                                            const HardwareSpec* spec, DType dtype);

}  // namespace neuralcost
