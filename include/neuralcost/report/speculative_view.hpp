// Views of speculative decoding estimates (`analyze TARGET --draft DRAFT`): per batch the target's
// step, the draft's steps, the verify step, the expected tokens per round, the time per token,
// the speedup of the bounds and the break-even acceptance.
#pragma once

#include <string>
#include <vector>

#include "neuralcost/analyze_models.hpp"
#include "neuralcost/report/views.hpp"

namespace neuralcost {

///   batch  target step  draft steps  verify step  tokens/round  per token  speedup  break-even α
///   1      19.9 ms      4x 4.93 ms   20.0 ms      2.77          14.3 ms    1.39x    0.37
std::string render_speculative(const std::vector<SpeculativeEstimate>& estimates, Format format);

}  // namespace neuralcost
