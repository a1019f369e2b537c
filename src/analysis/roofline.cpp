// Per-op roofline and model totals (unfused). The fused bound is in fusion.cpp.
#include "neuralcost/analysis/roofline.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "analysis/fusion.hpp"
#include "neuralcost/core/checked_math.hpp"
#include "neuralcost/core/error.hpp"

namespace neuralcost {
namespace {

/// The bytes of `op` that are the model's state: its weights, and the graph inputs it reads
/// (at most what its cost says it reads).
double state_bytes(const OpRecord& op, const OpCost& cost, const OpGraph& graph) {
  std::uint64_t state = cost.parameter_bytes;
  for (const TensorDesc& t : op.inputs) {
    if (!graph.producer(t.name)) state += t.bytes();
  }
  return static_cast<double>(std::min<std::uint64_t>(state, cost.bytes_read));
}

bool has_peak_type(DType dtype) {
  const auto& all = compute_dtypes();
  return std::find(all.begin(), all.end(), dtype) != all.end();
}

OpRoofline roofline_of(std::size_t index, const OpRecord& op, const HardwareSpec& hw, const OpGraph& graph,
                       double resident_bytes, std::map<DType, std::vector<std::string>>& fp32_rate_ops,
                       std::vector<std::pair<std::string, std::vector<std::string>>>& importer_approximations) {
  OpRoofline r;
  r.op_index = index;
  r.cost = cost_of(op);
  // an importer's own approximation (e.g. a loop counted at its maximum trip count)
  // (one line for every op that makes the same one: 32 layers' experts are one approximation)
  if (op.attributes.has("approximation")) {
    const std::string text = op.attributes.get_string("approximation", "");
    auto same = std::find_if(importer_approximations.begin(), importer_approximations.end(),
                             [&](const auto& entry) { return entry.first == text; });
    if (same == importer_approximations.end()) same = importer_approximations.insert(same, {text, {}});
    same->second.push_back(op.name);
  }
  r.compute_dtype = op.effective_compute_dtype();
  r.dram_seconds = static_cast<double>(r.cost.bytes()) / hw.memory_bandwidth_bytes_per_second;
  // cache-aware: the op's operands come from the smallest level that holds them all, but the
  // model's state (weights, graph inputs) only when that level holds all of it (HardwareSpec::memory_seconds)
  const double bytes = static_cast<double>(r.cost.bytes());
  r.memory_seconds = hw.memory_seconds(bytes, state_bytes(op, r.cost, graph), resident_bytes, &r.memory_level);
  const double bw = r.memory_seconds > 0 ? bytes / r.memory_seconds : hw.memory_bandwidth_bytes_per_second;
  if (r.cost.flops > 0) {
    const bool matrix = traits_of(op.kind).unit == ComputeUnit::kMatrix;
    DType roof = r.compute_dtype;
    // TF32 is a matrix-unit mode: everything else in a tf32 model computes in fp32
    if (roof == DType::kTf32 && !matrix) roof = DType::kFp32;
    if (!has_peak_type(roof)) {
      // specs give no int32/int64/bool rates: index arithmetic is timed at the fp32 rate
      fp32_rate_ops[roof].push_back(op.name);
      roof = DType::kFp32;
    }
    r.peak_flops_per_second = hw.flops_per_second(roof, matrix);
    r.compute_seconds = static_cast<double>(r.cost.flops) / r.peak_flops_per_second;
  }
  r.lower_bound_seconds = std::max(r.compute_seconds, r.memory_seconds);
  if (r.cost.modeled) {
    r.bound = r.compute_seconds > r.memory_seconds ? Bound::kCompute : Bound::kMemory;
    r.attainable_flops_per_second =
        r.peak_flops_per_second > 0 ? std::min(r.peak_flops_per_second, r.cost.arithmetic_intensity() * bw) : 0.0;
  }
  return r;
}

}  // namespace

std::string_view bound_name(Bound bound) { return bound == Bound::kCompute ? "compute" : "memory"; }

std::string Analysis::first_fix() const {
  std::map<std::string, std::size_t> count;
  for (const UnmodeledOp& u : unmodeled) ++count[u.reason];
  const auto most =
      std::max_element(count.begin(), count.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  if (most == count.end()) return "";
  return most->second == unmodeled.size() ? fmt::format("every one: {}", most->first)
                                          : fmt::format("{} of them: {}", most->second, most->first);
}

double resident_bytes_of(const OpGraph& graph) {
  double resident = 0;
  for (const ParameterDesc& p : graph.unique_parameters()) resident += static_cast<double>(p.bytes());
  for (const TensorDesc& t : graph.inputs()) resident += static_cast<double>(t.bytes());
  return resident;
}

Analysis analyze(OpGraph input, const HardwareSpec& hardware, const AnalysisOptions& options) {
  Analysis a;
  a.graph = std::move(input);
  const OpGraph& graph = a.graph;
  a.model = graph.name();
  a.hardware = hardware;
  a.batch = options.batch > 0 ? options.batch : graph.batch();
  ModelTotals& t = a.totals;
  std::map<DType, std::uint64_t> flops_by_dtype;
  double compute_bound_time = 0;
  // the model's state: every parameter once, and the graph's inputs (or the whole model's)
  const double resident = options.resident_bytes > 0 ? options.resident_bytes : resident_bytes_of(graph);
  std::vector<std::pair<std::string, std::vector<std::string>>> importer_approximations;
  std::map<DType, std::vector<std::string>> fp32_rate_ops;  // ops in a dtype that specs give no rate for
  for (std::size_t i = 0; i < graph.size(); ++i) {
    OpRoofline r = roofline_of(i, graph.op(i), hardware, graph, resident, fp32_rate_ops, importer_approximations);
    try {
      t.flops = checked_add(t.flops, r.cost.flops, "FLOP count");
      t.contraction_flops = checked_add(t.contraction_flops, r.cost.contraction_flops, "FLOP count");
      t.transcendentals = checked_add(t.transcendentals, r.cost.transcendentals, "transcendental count");
      t.bytes_read = checked_add(t.bytes_read, r.cost.bytes_read, "bytes read");
      t.bytes_written = checked_add(t.bytes_written, r.cost.bytes_written, "bytes written");
    } catch (const Error& e) {
      throw Error(e.code(), "model '" + graph.name() + "' total up to op '" + graph.op(i).name + "': " + e.what());
    }
    t.compute_seconds += r.compute_seconds;
    t.memory_seconds += r.memory_seconds;
    t.lower_bound_seconds += r.lower_bound_seconds;
    t.dram_lower_bound_seconds += std::max(r.compute_seconds, r.dram_seconds);
    if (r.bound == Bound::kCompute) compute_bound_time += r.lower_bound_seconds;
    flops_by_dtype[r.compute_dtype] += r.cost.flops;
    if (!r.cost.modeled) a.unmodeled.push_back({i, r.cost.unmodeled_reason, 0, 0});
    a.ops.push_back(std::move(r));
  }
  // specs give no int32/int64/bool rates: index arithmetic is timed at the fp32 rate (one line a dtype)
  for (const auto& [dtype, ops] : fp32_rate_ops) {
    const std::string d(dtype_name(dtype));
    a.approximations.push_back(
        (ops.size() == 1 ? fmt::format("op '{}' computes", ops[0])
         : ops.size() == 2
             ? fmt::format("ops '{}' and '{}' compute", ops[0], ops[1])
             : fmt::format("{} ops ('{}', '{}' and {} more) compute", ops.size(), ops[0], ops[1], ops.size() - 2)) +
        fmt::format(" in {}; {} compute time uses the fp32 rate (hardware specs have no {} peak)", d,
                    ops.size() == 1 ? "its" : "their", d));
  }
  for (const auto& [text, ops] : importer_approximations) {
    a.approximations.push_back(ops.size() == 1   ? "op '" + ops[0] + "': " + text
                               : ops.size() == 2 ? fmt::format("ops '{}' and '{}': {}", ops[0], ops[1], text)
                                                 : fmt::format("{} ops ('{}', '{}' and {} more): {}", ops.size(),
                                                               ops[0], ops[1], ops.size() - 2, text));
  }
  for (const ParameterDesc& p : graph.unique_parameters()) {
    (p.trainable ? t.parameter_count : t.buffer_count) += p.elements();
    t.parameter_bytes = checked_add(t.parameter_bytes, p.bytes(), "model parameter bytes");
  }
  const std::uint64_t bytes = checked_add(t.bytes_read, t.bytes_written, "model bytes");
  t.arithmetic_intensity = bytes == 0 ? 0.0 : static_cast<double>(t.flops) / static_cast<double>(bytes);
  t.bound = compute_bound_time * 2 > t.lower_bound_seconds ? Bound::kCompute : Bound::kMemory;
  for (OpRoofline& r : a.ops) {
    r.share = t.lower_bound_seconds > 0 ? r.lower_bound_seconds / t.lower_bound_seconds : 0.0;
  }
  for (UnmodeledOp& u : a.unmodeled) {
    const OpRoofline& r = a.ops[u.op_index];
    u.byte_share = bytes == 0 ? 0.0 : static_cast<double>(r.cost.bytes()) / static_cast<double>(bytes);
    u.time_share = r.share;
  }
  // The model's dtype is the one most FLOPs run in (the first op's compute dtype if none).
  a.dtype = graph.size() ? graph.op(0).effective_compute_dtype() : DType::kFp32;
  std::uint64_t most = 0;
  for (const auto& [dtype, f] : flops_by_dtype) {
    if (f > most) most = f, a.dtype = dtype;
  }
  if (hardware.peak_flops_per_second.count(a.dtype)) a.ridge_point = hardware.ridge_point(a.dtype);
  a.fusion_groups = detail::fuse(graph, a.ops, hardware, resident);
  for (const FusionGroup& g : a.fusion_groups) {
    t.fused_bytes_read += g.bytes_read;
    t.fused_bytes_written += g.bytes_written;
    t.fused_lower_bound_seconds += g.lower_bound_seconds;
  }
  return a;
}

}  // namespace neuralcost
