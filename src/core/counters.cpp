// Counters of a run (see counters.hpp).
#include "neuralcost/core/counters.hpp"

namespace neuralcost {

std::string counter_kind_name(Counter::Kind kind) {
  switch (kind) {
    case Counter::Kind::kPerIteration: return "per_iteration";
    case Counter::Kind::kTotal: return "total";
    case Counter::Kind::kRate: return "rate";
  }
  return "?";
}

const Counter* find_counter(const Counters& counters, const std::string& name) {
  for (const Counter& c : counters) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

}  // namespace neuralcost
