// Outcomes and counters (see outcome.hpp, counters.hpp).
#include "neuralcost/measure/counters.hpp"
#include "neuralcost/measure/outcome.hpp"

namespace neuralcost {

std::string_view verdict_name(Verdict verdict) {
  switch (verdict) {
    case Verdict::kOk: return "ok";
    case Verdict::kMistrusted: return "mistrusted";
    case Verdict::kFailed: return "failed";
  }
  return "?";
}

void Outcome::mistrust(std::string reason) {
  reasons.push_back(std::move(reason));
  if (verdict == Verdict::kOk) verdict = Verdict::kMistrusted;
}

Outcome Outcome::failure(std::string error) { return {Verdict::kFailed, {std::move(error)}}; }

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
