// Checkpoint segments (training/memory.hpp): which runs of ops a checkpoint policy recomputes.
#include <algorithm>
#include <cctype>
#include <cmath>

#include <fmt/format.h>

#include "neuralcost/core/error.hpp"
#include "neuralcost/cost/op_kinds.hpp"
#include "neuralcost/training/memory.hpp"

namespace neuralcost {
namespace {

/// The top-level block of an op name: the name up to the end of its first component (split at
/// '.' and '/') that contains a digit ("encoder0.self_attn.in_proj" -> "encoder0",
/// "/bert/encoder/layer.3/attention/MatMul" -> "/bert/encoder/layer.3"), or its first component.
std::string block_of(const std::string& name) {
  std::size_t first_end = std::string::npos;
  std::size_t start = 0;
  while (start <= name.size()) {
    std::size_t end = name.find_first_of("./", start);
    if (end == std::string::npos) end = name.size();
    if (end > start) {
      if (first_end == std::string::npos) first_end = end;
      if (std::any_of(name.begin() + static_cast<std::ptrdiff_t>(start),
                      name.begin() + static_cast<std::ptrdiff_t>(end),
                      [](unsigned char c) { return std::isdigit(c) != 0; })) {
        return name.substr(0, end);
      }
    }
    start = end + 1;
  }
  return first_end == std::string::npos ? name : name.substr(0, first_end);
}

CheckpointSegment segment(const OpGraph& g, std::size_t first, std::size_t last, std::string name = {}) {
  CheckpointSegment s;
  s.first_op = first;
  s.last_op = last;
  if (name.empty()) {
    name = first == last ? g.op(first).name : fmt::format("{} .. {}", g.op(first).name, g.op(last).name);
  }
  s.name = std::move(name);
  return s;
}

}  // namespace

std::vector<CheckpointSegment> checkpoint_segments(const OpGraph& g, const CheckpointPolicy& policy) {
  std::vector<CheckpointSegment> out;
  const std::size_t n = g.size();
  switch (policy.kind) {
    case CheckpointKind::kNone: return out;
    case CheckpointKind::kFull:
      for (std::size_t i = 0; i < n;) {
        const std::string block = block_of(g.op(i).name);
        std::size_t j = i;
        while (j + 1 < n && block_of(g.op(j + 1).name) == block) ++j;
        out.push_back(segment(g, i, j, block));
        i = j + 1;
      }
      return out;
    case CheckpointKind::kEveryK: {
      if (policy.every < 0) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("--checkpoint every:{}: K must be a positive integer", policy.every));
      }
      const std::size_t k =
          policy.every > 0
              ? static_cast<std::size_t>(policy.every)
              : std::max<std::size_t>(1, static_cast<std::size_t>(std::llround(std::sqrt(static_cast<double>(n)))));
      for (std::size_t i = 0; i < n; i += k) out.push_back(segment(g, i, std::min(n, i + k) - 1));
      return out;
    }
    case CheckpointKind::kSelective:
      for (std::size_t i = 0; i < n; ++i) {
        if (!traits_of(g.op(i).kind).fusible) continue;
        std::size_t j = i;
        while (j + 1 < n && traits_of(g.op(j + 1).kind).fusible) ++j;
        out.push_back(segment(g, i, j));
        i = j;
      }
      return out;
  }
  return out;
}

}  // namespace neuralcost
