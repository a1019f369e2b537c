// A hardware spec: the roofs of one device (peak FLOP/s per dtype, memory bandwidth, caches)
// and the source of every number. The built-in database and user files share one JSON format,
// documented in docs/hardware.md; `neural-cost hardware show ID --format json` prints it.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "neuralcost/core/dtype.hpp"

namespace neuralcost {

struct CacheLevel {
  std::string name;  ///< "L1", "L2", "SLC", ...
  double size_bytes = 0;
  std::optional<double> bandwidth_bytes_per_second;
};

struct HardwareSpec {
  std::string id;    ///< lowercase-hyphenated, e.g. "h100-sxm"
  std::string name;  ///< marketing name, e.g. "NVIDIA H100 SXM5 80GB"
  std::string vendor;
  std::string device_type;  ///< gpu, cpu, soc-gpu, accelerator
  std::vector<std::string> aliases;
  /// The names frameworks report for this part (CUDA's device name, e.g. "NVIDIA H100 80GB HBM3"):
  /// how a run on cuda:N finds its spec when the user names none. Exact, case-insensitive.
  std::vector<std::string> device_names;
  /// Highest dense rate per compute dtype, matrix units included (never 2:4-sparse figures).
  std::map<DType, double> peak_flops_per_second;
  /// Rate without matrix units, where it differs (used for ops that cannot use them).
  std::map<DType, double> vector_flops_per_second;
  double memory_bandwidth_bytes_per_second = 0;
  std::optional<double> memory_capacity_bytes;
  /// (optional, GPUs) The launch floor: the least time one kernel takes, however little it does
  /// (launch and scheduling overhead of back-to-back launches). A documented typical value in the
  /// database, or measured by `hardware calibrate --device cuda:N`. See gpu/launch_floor.hpp.
  std::optional<double> kernel_launch_seconds;
  std::vector<CacheLevel> caches;  ///< smallest/fastest first
  /// How far the roofs may lie from their figures, relative: a calibration's round-to-round
  /// disagreement (the best two rounds of its DRAM triad and FMA peaks, the larger); 0 for a
  /// datasheet, whose figures are the roofs by definition. Efficiency intervals carry it.
  /// Not read from or written to spec files.
  double roof_uncertainty = 0;
  /// Where each number comes from, keyed by field path ("peak_flops_per_second.fp32",
  /// "memory_bandwidth_bytes_per_second", "caches.L2.size_bytes").
  std::map<std::string, std::string> sources;
  std::vector<std::string> notes;
  std::string origin;  ///< "built-in" or the path of the user's file

  /// FLOP/s available to an op computing in `dtype`. Contractions get the peak; other ops the
  /// vector rate when the spec gives one. Throws kNotFound when the spec has no rate for it.
  double flops_per_second(DType dtype, bool contraction) const;
  /// Ridge point in FLOPs per byte: peak / bandwidth for `dtype` (kNotFound when absent).
  double ridge_point(DType dtype) const;
  /// Cache-aware roofline: the bandwidth for a working set of `bytes`, from the smallest cache
  /// level with a known bandwidth (above DRAM's) that holds it, else DRAM; `level` gets its name.
  double bandwidth_for(double bytes, std::string* level = nullptr) const;
  /// The time to move `bytes`, `state_bytes` of them the model's state that a pass reads afresh
  /// (weights, graph inputs such as a KV cache): the rest at the working set's level
  /// (bandwidth_for(bytes)), the state at the level that holds all of it, `resident_bytes` (and
  /// these bytes), where it can stay from pass to pass: DRAM when no cache holds it (a decode
  /// step's 16 GB of weights are not served by a 256 MB cache because one of them fits). `level`
  /// gets the level most of the bytes come from.
  double memory_seconds(double bytes, double state_bytes, double resident_bytes, std::string* level = nullptr) const;
};

/// Parses a spec from JSON text. `origin` names the file in every error, e.g.
/// "spec.json: field 'memory_bandwidth_bytes_per_second' must be a positive number".
HardwareSpec parse_hardware_spec(std::string_view json_text, const std::string& origin);
/// Reads and parses a spec file; kNotFound if it cannot be opened.
HardwareSpec load_hardware_file(const std::string& path);

}  // namespace neuralcost
