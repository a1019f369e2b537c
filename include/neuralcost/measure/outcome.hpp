// The outcome of a run, benchdnn style: ok, mistrusted (it ran, but a figure cannot be believed)
// or failed (it did not run), each with the reasons. One field says what became of a run; views
// print it and never re-derive it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace neuralcost {

enum class Verdict { kOk, kMistrusted, kFailed };
/// "ok", "mistrusted", "failed".
std::string_view verdict_name(Verdict verdict);

struct Outcome {
  Verdict verdict = Verdict::kOk;
  /// Why mistrusted or failed, one sentence each (empty when ok); a failure's first reason is
  /// its error.
  std::vector<std::string> reasons;

  bool ok() const { return verdict == Verdict::kOk; }
  bool failed() const { return verdict == Verdict::kFailed; }
  /// The failure's error ("" unless failed).
  std::string error() const { return failed() && !reasons.empty() ? reasons.front() : std::string(); }
  /// Adds a reason to mistrust (a failed outcome stays failed).
  void mistrust(std::string reason);
  /// Fails with `error` as the only reason.
  static Outcome failure(std::string error);
};

}  // namespace neuralcost
