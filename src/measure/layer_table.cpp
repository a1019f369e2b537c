// Grouping, sorting and cutting a run's layers (see layer_table.hpp).
#include "neuralcost/measure/layer_table.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "neuralcost/core/error.hpp"

namespace neuralcost {
namespace {

LayerRow row_of(const LayerMeasurement& l) {
  LayerRow r;
  r.name = layer_name(l);
  r.kind = l.kind;
  r.op = l.name;
  r.output_shape = l.output_shape;
  r.layers = 1;
  r.flops = l.flops;
  r.bytes = l.bytes;
  r.lower_bound_seconds = l.lower_bound_seconds;
  r.measured_seconds = l.measured_seconds;
  r.share = l.share;
  r.waste_seconds = l.waste_seconds;
  r.efficiency = l.efficiency;
  r.has_work = l.flops > 0 || l.bytes > 0;
  r.bound = l.bound;
  r.modeled = l.modeled;
  return r;
}

/// Adds `l`'s row to `sum`: times, counts and waste add; the efficiency is recomputed from the
/// sums; the bound is that of the part with the largest lower bound.
void add(LayerRow& sum, const LayerRow& l, double& largest_bound) {
  if (sum.layers == 0) {
    sum.kind = l.kind;
    sum.op = l.op;
    sum.output_shape = l.output_shape;
  } else {
    if (sum.kind != l.kind) sum.kind = "mixed";
    if (sum.op != l.op) sum.op = "";
    if (sum.output_shape != l.output_shape) sum.output_shape = "";
  }
  sum.layers += l.layers;
  sum.flops += l.flops;
  sum.bytes += l.bytes;
  sum.lower_bound_seconds += l.lower_bound_seconds;
  sum.measured_seconds += l.measured_seconds;
  sum.share += l.share;
  sum.waste_seconds += l.waste_seconds;
  sum.has_work = sum.has_work || l.has_work;
  sum.modeled = sum.modeled && l.modeled;
  if (l.bound && l.lower_bound_seconds > largest_bound) largest_bound = l.lower_bound_seconds, sum.bound = l.bound;
  sum.efficiency = sum.measured_seconds > 0 ? sum.lower_bound_seconds / sum.measured_seconds : 0;
}

std::vector<LayerRow> grouped(const std::vector<LayerRow>& rows, LayerGroup group) {
  std::vector<LayerRow> out;
  std::vector<double> largest;
  std::map<std::string, std::size_t> index;  // key -> position in out (first appearance order)
  for (const LayerRow& r : rows) {
    const std::string key = group == LayerGroup::kKind ? r.kind : r.name;
    auto [it, fresh] = index.emplace(key, out.size());
    if (fresh) {
      out.push_back({});
      out.back().name = key;
      largest.push_back(-1);
    }
    add(out[it->second], r, largest[it->second]);
  }
  if (group == LayerGroup::kKind) {
    for (LayerRow& r : out) r.kind = r.name;
  }
  return out;
}

}  // namespace

LayerSort parse_layer_sort(std::string_view text) {
  if (text == "time") return LayerSort::kTime;
  if (text == "waste") return LayerSort::kWaste;
  if (text == "efficiency") return LayerSort::kEfficiency;
  throw Error(ErrorCode::kInvalidArgument, fmt::format("--sort must be time, waste or efficiency (got '{}')", text));
}

LayerGroup parse_layer_group(std::string_view text) {
  if (text == "kind") return LayerGroup::kKind;
  if (text == "module") return LayerGroup::kModule;
  throw Error(ErrorCode::kInvalidArgument, fmt::format("--group-by must be kind or module (got '{}')", text));
}

LayerTableOptions layer_table_options(std::optional<long long> top, std::string_view sort, std::string_view group,
                                      int layer_runs) {
  LayerTableOptions o;
  if (top) {
    if (*top < 1) throw Error(ErrorCode::kInvalidArgument, fmt::format("--top must be at least 1 (got {})", *top));
    o.top = static_cast<std::size_t>(*top);
  }
  if (!sort.empty()) o.sort = parse_layer_sort(sort);
  if (!group.empty()) o.group = parse_layer_group(group);
  if (o.any() && layer_runs == 0) {
    const char* option = top ? "--top" : !sort.empty() ? "--sort" : "--group-by";
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{} shapes the per-layer tables, but --layer-runs 0 measures no per-layer times", option));
  }
  return o;
}

std::string layer_name(const LayerMeasurement& l) {
  if (!l.pass.empty()) return l.module.empty() ? l.pass : fmt::format("{}: {}", l.pass, l.module);
  return l.module.empty() ? fmt::format("{}:{}", l.event, l.name) : l.module;
}

LayerTableRows layer_rows(const ProfileRun& run, const LayerTableOptions& options) {
  LayerTableRows table;
  for (const LayerMeasurement& l : run.layers) {
    table.rows.push_back(row_of(l));
    // a training step's rows of one module (its forward and its backward) are that module's
    if (options.group == LayerGroup::kModule && !l.pass.empty() && !l.module.empty()) table.rows.back().name = l.module;
  }
  if (options.group != LayerGroup::kNone) table.rows = grouped(table.rows, options.group);
  auto& rows = table.rows;
  switch (options.sort) {
    case LayerSort::kExecution: break;
    case LayerSort::kTime:
      std::stable_sort(rows.begin(), rows.end(),
                       [](const LayerRow& a, const LayerRow& b) { return a.measured_seconds > b.measured_seconds; });
      break;
    case LayerSort::kWaste:
      std::stable_sort(rows.begin(), rows.end(),
                       [](const LayerRow& a, const LayerRow& b) { return a.waste_seconds > b.waste_seconds; });
      break;
    case LayerSort::kEfficiency:
      // the least efficient first; rows without work or time have no efficiency: last
      std::stable_sort(rows.begin(), rows.end(), [](const LayerRow& a, const LayerRow& b) {
        const bool ea = a.has_work && a.measured_seconds > 0, eb = b.has_work && b.measured_seconds > 0;
        if (ea != eb) return ea;
        return ea && a.efficiency < b.efficiency;
      });
      break;
  }
  if (options.top > 0 && rows.size() > options.top) {
    LayerRow rest;
    double largest = -1;
    for (std::size_t i = options.top; i < rows.size(); ++i) add(rest, rows[i], largest);
    rest.name = fmt::format("the other {} row(s) ({} layer(s))", rows.size() - options.top, rest.layers);
    rest.kind = "";
    rest.op = "";
    rest.output_shape = "";
    rows.resize(options.top);
    table.rest = std::move(rest);
  }
  return table;
}

std::vector<UnmodeledShare> unmodeled_shares(const ProfileRun& run) {
  std::vector<UnmodeledShare> out;
  for (const UnmodeledOp& u : run.analysis.unmodeled) {
    UnmodeledShare s;
    s.name = run.analysis.graph.op(u.op_index).name;
    s.module = run.analysis.graph.op(u.op_index).attributes.get_string("module", "");
    s.reason = u.reason;
    s.byte_share = u.byte_share;
    for (const LayerMeasurement& layer : run.layers) {
      for (std::size_t r : layer.records) {
        if (r < run.analysis.ops.size() && run.analysis.ops[r].op_index == u.op_index) s.time_share = layer.share;
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace neuralcost
