// The fused lower bound: groups ops into kernels that keep elementwise and normalisation
// chains on chip, and recounts the compulsory bytes of each group.
#pragma once

#include <vector>

#include "neuralcost/analysis/roofline.hpp"

namespace neuralcost::detail {

/// Groups in order of their first op. `ops` are the per-op rooflines of `graph`;
/// `resident_bytes` the model's state (HardwareSpec::memory_seconds). `regions`, when given (one
/// per op): an op joins only a group of its own region (a collective between two regions
/// separates their kernels: sequence parallelism's reduce-scatter after a row-parallel GEMM).
std::vector<FusionGroup> fuse(const OpGraph& graph, const std::vector<OpRoofline>& ops, const HardwareSpec& hardware,
                              double resident_bytes, const std::vector<int>& regions = {});

}  // namespace neuralcost::detail
