// Roofline analysis of an op graph on one hardware spec: per-op lower-bound time
// max(FLOPs / peak, bytes / bandwidth), the roof that sets it and its share of the model;
// model totals unfused (every op reads inputs and writes outputs) and fused (chains of
// elementwise and normalisation ops keep their intermediates on chip). docs/counting.md
// states what is counted; docs/json-schema.md how the result is printed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "neuralcost/core/graph.hpp"
#include "neuralcost/cost/cost_model.hpp"
#include "neuralcost/hardware/spec.hpp"

namespace neuralcost {

enum class Bound { kCompute, kMemory };
std::string_view bound_name(Bound bound);

struct OpRoofline {
  std::size_t op_index = 0;
  OpCost cost;
  DType compute_dtype = DType::kFp32;
  double peak_flops_per_second = 0;  ///< the compute roof used for this op
  double compute_seconds = 0;        ///< flops / peak
  /// Cache-aware roofline: bytes / the bandwidth of `memory_level`, the smallest level with a
  /// measured bandwidth that holds the op's working set (its bytes read and written); "DRAM"
  /// when none does or the spec gives no cache bandwidths.
  double memory_seconds = 0;
  std::string memory_level = "DRAM";
  double dram_seconds = 0;         ///< bytes / DRAM bandwidth, whatever level was used
  double lower_bound_seconds = 0;  ///< max(compute_seconds, memory_seconds)
  /// Which roof limits the op; empty for an unmodeled op (its FLOPs are unknown).
  std::optional<Bound> bound;
  double attainable_flops_per_second = 0;  ///< min(peak, intensity x bandwidth)
  double share = 0;                        ///< lower_bound_seconds / model lower bound (unfused)
};

/// Ops executed as one kernel in the fused lower bound: a run of consecutive ops (in
/// topological order) led by at most one op that is not elementwise or a normalisation (the
/// anchor), followed by the elementwise/normalisation ops that consume it. Tensors produced
/// and consumed only inside the group never touch memory.
struct FusionGroup {
  std::vector<std::size_t> ops;
  std::uint64_t flops = 0;
  std::uint64_t bytes_read = 0;
  std::uint64_t bytes_written = 0;
  double lower_bound_seconds = 0;
  Bound bound = Bound::kMemory;
};

struct UnmodeledOp {
  std::size_t op_index = 0;
  std::string reason;
  double byte_share = 0;  ///< its bytes / all bytes moved (unfused)
  double time_share = 0;  ///< its memory-only lower bound / model lower bound
};

struct ModelTotals {
  std::uint64_t flops = 0;
  std::uint64_t contraction_flops = 0;
  std::uint64_t transcendentals = 0;
  std::uint64_t bytes_read = 0;  ///< sum over ops (each op reads its inputs and weights)
  std::uint64_t bytes_written = 0;
  std::uint64_t parameter_count = 0;    ///< unique trainable parameters (shared weights once)
  std::uint64_t buffer_count = 0;       ///< unique non-trainable parameters (e.g. running stats)
  std::uint64_t parameter_bytes = 0;    ///< unique parameters and buffers, in bytes
  double arithmetic_intensity = 0;      ///< flops / (bytes_read + bytes_written)
  double compute_seconds = 0;           ///< sum of per-op compute times
  double memory_seconds = 0;            ///< sum of per-op memory times
  double lower_bound_seconds = 0;       ///< sum of per-op lower bounds (ops run one after another)
  double dram_lower_bound_seconds = 0;  ///< the same with every byte from DRAM (equal without cache levels)
  Bound bound = Bound::kMemory;         ///< the roof behind most of lower_bound_seconds
  std::uint64_t fused_bytes_read = 0;
  std::uint64_t fused_bytes_written = 0;
  double fused_lower_bound_seconds = 0;
};

struct AnalysisOptions {
  std::int64_t batch = 0;  ///< samples per pass, for per-sample figures; 0 = the graph's own (OpGraph::batch)
  /// The model's state in bytes (every parameter once, and the inputs) when the graph is a part of
  /// the model (a decoder's first layers): what decides whether the state fits a cache level.
  /// 0: the graph's own.
  double resident_bytes = 0;
};

/// The bytes of a graph's state as analyze counts it: every unique parameter once, and the inputs.
double resident_bytes_of(const OpGraph& graph);

struct Analysis {
  std::string model;
  HardwareSpec hardware;
  std::int64_t batch = 0;
  DType dtype = DType::kFp32;  ///< compute dtype of most FLOPs
  double ridge_point = 0;      ///< FLOPs per byte for dtype
  /// The analysed graph: ops[i].op_index, fusion groups and unmodeled ops index its ops; liveness,
  /// backward passes and per-layer views walk it.
  OpGraph graph;
  std::vector<OpRoofline> ops;
  std::vector<FusionGroup> fusion_groups;
  std::vector<UnmodeledOp> unmodeled;
  /// Approximations this analysis made beyond docs/counting.md, one sentence each.
  std::vector<std::string> approximations;
  ModelTotals totals;

  bool complete() const { return unmodeled.empty(); }
  /// Half or more of the ops are not modeled: the totals describe too little of the model to be
  /// a result (the CLI fails, and no best-case throughput is printed).
  bool mostly_unmodeled() const { return !ops.empty() && 2 * unmodeled.size() >= ops.size(); }
  /// The one action most likely to fix the unmodeled ops: the reason most of them share.
  std::string first_fix() const;
};

/// Costs every op, applies the roofline and builds the fused lower bound. Throws the cost
/// model's errors (malformed op, overflow) and kNotFound when the hardware lacks a peak for a
/// dtype an op computes in.
Analysis analyze(OpGraph graph, const HardwareSpec& hardware, const AnalysisOptions& options = {});

}  // namespace neuralcost
