// Outcomes (see outcome.hpp).
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

}  // namespace neuralcost
