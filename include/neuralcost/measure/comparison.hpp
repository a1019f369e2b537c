// The same workload across backends: a row per model, batch and mode with each backend's run,
// and whether the backends ran the same model (the same parameters and contraction FLOPs),
// without which a comparison measures nothing. Views render it (report/profile_views.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "neuralcost/measure/profile.hpp"

namespace neuralcost {

struct ComparisonRow {
  std::string model, mode;
  std::int64_t batch = 0;
  std::vector<const ProfileRun*> runs;  ///< one per Comparison::backends; nullptr where none ran
  bool same_model = true;               ///< the runs that did not fail agree
  std::string detail;                   ///< "jax: 1000 parameters, 2000 contraction FLOPs; ..."
};

struct Comparison {
  std::vector<std::string> backends;  ///< in order of first appearance
  std::vector<ComparisonRow> rows;    ///< in order of first appearance
};

/// Whether the runs come from more than one backend (then a comparison is shown).
bool has_comparison(const std::vector<ProfileRun>& runs);

/// The comparison of `runs` (which must outlive it).
Comparison compare_backends(const std::vector<ProfileRun>& runs);

/// The model's trainable parameters as its framework counts them (the contract's
/// framework_parameters), else as the captured graph reads them. A compiler may merge
/// identical frozen weights, so the captured count can be lower for the same model.
std::uint64_t parameters_of(const ProfileRun& run);

}  // namespace neuralcost
