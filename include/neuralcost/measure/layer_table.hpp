// The per-layer table a user acts on, as data: a run's layers (measure/profile.hpp) grouped by
// op kind or module, sorted by time, waste or efficiency, and cut to the top N with the layers
// left out summed in one row, so that the rows, the unattributed time and the run's total
// still add up. The views (report/profile_views.hpp) only render what this returns.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "neuralcost/measure/profile.hpp"

namespace neuralcost {

enum class LayerSort { kExecution, kTime, kWaste, kEfficiency };
enum class LayerGroup { kNone, kKind, kModule };

struct LayerTableOptions {
  LayerSort sort = LayerSort::kExecution;  ///< execution order unless --sort
  LayerGroup group = LayerGroup::kNone;
  std::size_t top = 0;  ///< rows kept after grouping and sorting (0: all)
  /// Whether any option was given (they apply to per-layer tables only).
  bool any() const { return sort != LayerSort::kExecution || group != LayerGroup::kNone || top != 0; }
};

/// "time" (measured, longest first), "waste" (largest first), "efficiency" (lowest first; rows
/// without work last); anything else: kInvalidArgument naming --sort and the choices.
LayerSort parse_layer_sort(std::string_view text);
/// "kind" or "module"; anything else: kInvalidArgument naming --group-by and the choices.
LayerGroup parse_layer_group(std::string_view text);

/// The options of a profile command: `top` (at least 1 when given), `sort` and `group`
/// ("" when not given) parsed as above. They shape per-layer tables, so with `layer_runs` 0 (no
/// per-layer times) any of them is kInvalidArgument saying so.
LayerTableOptions layer_table_options(std::optional<long long> top, std::string_view sort, std::string_view group,
                                      int layer_runs);

/// An op the cost model does not know, as a profile names it: its FLOPs are unknown, so what it
/// stands for is its share of the bytes moved and, with per-layer times, of the measured time
/// (the share of the layer that ran it; a kernel that fused it with others: theirs too).
struct UnmodeledShare {
  std::string name;    ///< the op ("7:aten::foo")
  std::string module;  ///< the module that ran it, "" unknown
  std::string reason;
  double byte_share = 0;
  std::optional<double> time_share;  ///< absent without per-layer times
};

/// The unmodeled ops of `run`, in graph order.
std::vector<UnmodeledShare> unmodeled_shares(const ProfileRun& run);

/// One row of the table: a layer, a group of layers, or the layers --top left out.
struct LayerRow {
  std::string name;          ///< the module path, else "EVENT:OP" ("3:aten::t"); the group's key when grouped
  std::string kind;          ///< op kind ("linear", "fused", "none"); "" for the rest row
  std::string op;            ///< the framework op ("aten::addmm"); "" for groups of several
  std::string output_shape;  ///< "" for groups of several
  std::size_t layers = 0;    ///< how many layers the row sums
  std::uint64_t flops = 0;
  std::uint64_t bytes = 0;
  double lower_bound_seconds = 0;
  double measured_seconds = 0;
  double share = 0;            ///< measured / the run's timed median
  double waste_seconds = 0;    ///< the sum of its layers' waste (each measured - lower bound, at least 0)
  double efficiency = 0;       ///< lower bound / measured; 0 without work or time
  bool has_work = false;       ///< counted FLOPs or bytes (else efficiency and limit are "-")
  std::optional<Bound> bound;  ///< the roof of its layer with the largest lower bound
  bool modeled = true;
};

struct LayerTableRows {
  std::vector<LayerRow> rows;
  std::optional<LayerRow> rest;  ///< the layers --top left out, summed (absent when none were)
};

/// The rows of `run`'s layer table under `options` (empty when the run has no layers).
LayerTableRows layer_rows(const ProfileRun& run, const LayerTableOptions& options);

/// A layer's row name: its module path, else "EVENT:OP".
std::string layer_name(const LayerMeasurement& layer);

}  // namespace neuralcost
