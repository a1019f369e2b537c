// JSON for analyses and hardware specs: the stable machine interface of docs/json-schema.md.
// Field names carry units (bytes, seconds, flops_per_second); counts are exact integers.
#include <fmt/format.h>

#include "neuralcost/gpu/launch_floor.hpp"

#include "neuralcost/report/views.hpp"
#include "neuralcost/version.hpp"

namespace neuralcost {

using nlohmann::json;

json hardware_json(const HardwareSpec& s) {
  json j;
  j["schema_version"] = 1;
  j["id"] = s.id;
  j["name"] = s.name;
  if (!s.vendor.empty()) j["vendor"] = s.vendor;
  if (!s.device_type.empty()) j["device_type"] = s.device_type;
  j["aliases"] = s.aliases;
  if (!s.device_names.empty()) j["device_names"] = s.device_names;
  json peaks = json::object(), vector = json::object();
  for (const auto& [d, v] : s.peak_flops_per_second) peaks[std::string(dtype_name(d))] = v;
  for (const auto& [d, v] : s.vector_flops_per_second) vector[std::string(dtype_name(d))] = v;
  j["peak_flops_per_second"] = peaks;
  if (!vector.empty()) j["vector_flops_per_second"] = vector;
  j["memory_bandwidth_bytes_per_second"] = s.memory_bandwidth_bytes_per_second;
  if (s.memory_capacity_bytes) j["memory_capacity_bytes"] = *s.memory_capacity_bytes;
  if (s.kernel_launch_seconds) j["kernel_launch_seconds"] = *s.kernel_launch_seconds;
  if (!s.caches.empty()) {
    j["caches"] = json::array();
    for (const CacheLevel& c : s.caches) {
      json cj{{"name", c.name}, {"size_bytes", c.size_bytes}};
      if (c.bandwidth_bytes_per_second) cj["bandwidth_bytes_per_second"] = *c.bandwidth_bytes_per_second;
      j["caches"].push_back(cj);
    }
  }
  j["sources"] = s.sources;
  j["notes"] = s.notes;
  j["origin"] = s.origin;
  return j;
}

json analysis_json(const Analysis& a) {
  json j;
  j["schema_version"] = 1;
  j["tool"] = {{"name", "neural-cost"}, {"version", std::string(kVersion)}};
  j["model"] = {{"name", a.model}, {"batch", a.batch}, {"dtype", std::string(dtype_name(a.dtype))}};
  json hw = hardware_json(a.hardware);
  hw["ridge_point_flops_per_byte"] = a.ridge_point;
  j["hardware"] = hw;
  std::vector<std::size_t> group_of(a.ops.size(), 0);
  for (std::size_t g = 0; g < a.fusion_groups.size(); ++g) {
    for (std::size_t i : a.fusion_groups[g].ops) group_of[i] = g;
  }
  j["ops"] = json::array();
  for (const OpRoofline& r : a.ops) {
    const OpRecord& op = a.graph.op(r.op_index);
    json shapes = json::array();
    for (const TensorDesc& t : op.outputs) shapes.push_back(t.shape);
    json o{{"name", op.name},
           {"kind", std::string(op_kind_name(op.kind))},
           {"source_type", op.source_type},
           {"compute_dtype", std::string(dtype_name(r.compute_dtype))},
           {"output_shapes", shapes},
           {"modeled", r.cost.modeled},
           {"bytes_read", r.cost.bytes_read},
           {"bytes_written", r.cost.bytes_written},
           {"parameter_bytes", r.cost.parameter_bytes},
           {"memory_seconds", r.memory_seconds},
           {"memory_level", r.memory_level},
           {"dram_seconds", r.dram_seconds},
           {"lower_bound_seconds", r.lower_bound_seconds},
           {"share", r.share},
           {"fusion_group", group_of[r.op_index]}};
    if (r.cost.modeled) {
      o["flops"] = r.cost.flops;
      o["contraction_flops"] = r.cost.contraction_flops;
      o["transcendentals"] = r.cost.transcendentals;
      o["arithmetic_intensity"] = r.cost.arithmetic_intensity();
      o["peak_flops_per_second"] = r.peak_flops_per_second;
      o["compute_seconds"] = r.compute_seconds;
      o["attainable_flops_per_second"] = r.attainable_flops_per_second;
      o["bound"] = std::string(bound_name(*r.bound));
    } else {
      for (const char* k : {"flops", "contraction_flops", "transcendentals", "arithmetic_intensity",
                            "peak_flops_per_second", "compute_seconds", "attainable_flops_per_second", "bound"}) {
        o[k] = nullptr;
      }
      o["unmodeled_reason"] = r.cost.unmodeled_reason;
    }
    j["ops"].push_back(o);
  }
  j["fusion_groups"] = json::array();
  for (const FusionGroup& g : a.fusion_groups) {
    json names = json::array();
    for (std::size_t i : g.ops) names.push_back(a.graph.op(i).name);
    j["fusion_groups"].push_back({{"ops", names},
                                  {"flops", g.flops},
                                  {"bytes_read", g.bytes_read},
                                  {"bytes_written", g.bytes_written},
                                  {"lower_bound_seconds", g.lower_bound_seconds},
                                  {"bound", std::string(bound_name(g.bound))}});
  }
  const ModelTotals& t = a.totals;
  json totals{{"flops", t.flops},
              {"contraction_flops", t.contraction_flops},
              {"transcendentals", t.transcendentals},
              {"bytes_read", t.bytes_read},
              {"bytes_written", t.bytes_written},
              {"parameter_count", t.parameter_count},
              {"buffer_count", t.buffer_count},
              {"parameter_bytes", t.parameter_bytes},
              {"arithmetic_intensity", t.arithmetic_intensity},
              {"compute_seconds", t.compute_seconds},
              {"memory_seconds", t.memory_seconds},
              {"lower_bound_seconds", t.lower_bound_seconds},
              {"dram_lower_bound_seconds", t.dram_lower_bound_seconds},
              {"bound", std::string(bound_name(t.bound))},
              {"fused",
               {{"bytes_read", t.fused_bytes_read},
                {"bytes_written", t.fused_bytes_written},
                {"lower_bound_seconds", t.fused_lower_bound_seconds}}},
              {"complete", a.complete()}};
  if (a.batch > 0) {
    const double b = static_cast<double>(a.batch);
    totals["per_sample"] = {
        {"flops", static_cast<double>(t.flops) / b},
        {"bytes", static_cast<double>(t.bytes_read + t.bytes_written) / b},
        {"lower_bound_seconds", t.lower_bound_seconds / b},
        {"max_samples_per_second", t.lower_bound_seconds > 0 ? b / t.lower_bound_seconds : 0.0},
        {"fused_max_samples_per_second", t.fused_lower_bound_seconds > 0 ? b / t.fused_lower_bound_seconds : 0.0}};
  }
  if (const std::optional<LaunchFloor> f = launch_floor(a)) {
    totals["launch_floor"] = {{"seconds_per_kernel", f->seconds_per_kernel},
                              {"source", f->source},
                              {"unfused_kernels", f->unfused_kernels},
                              {"fused_kernels", f->fused_kernels},
                              {"unfused_floor_seconds", f->unfused_floor_seconds},
                              {"fused_floor_seconds", f->fused_floor_seconds},
                              {"unfused_bound_seconds", f->unfused_bound_seconds},
                              {"fused_bound_seconds", f->fused_bound_seconds},
                              {"ops_below_floor", f->ops_below_floor}};
  }
  j["totals"] = totals;
  j["approximations"] = a.approximations;
  j["notes"] = a.graph.notes();  // what the importer decided (the batch's origin, a --dtype conversion)
  j["unmodeled"] = json::array();
  for (const UnmodeledOp& u : a.unmodeled) {
    const OpRecord& op = a.graph.op(u.op_index);
    j["unmodeled"].push_back({{"name", op.name},
                              {"source_type", op.source_type},
                              {"reason", u.reason},
                              {"byte_share", u.byte_share},
                              {"time_share", u.time_share}});
  }
  return j;
}

}  // namespace neuralcost
