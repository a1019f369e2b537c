// Views of decoder LLM estimates: whole generations (`analyze MODEL --phase generate`) and
// speculative decoding (`analyze TARGET --draft DRAFT`), one row per batch.
#pragma once

#include <string>
#include <vector>

#include "neuralcost/analyze_models.hpp"
#include "neuralcost/report/cost.hpp"
#include "neuralcost/report/views.hpp"

namespace neuralcost {

///   batch  target step  draft steps  verify step  tokens/round  per token  speedup  break-even α
///   1      19.9 ms      4x 4.93 ms   20.0 ms      2.77          14.3 ms    1.39x    0.37
std::string render_speculative(const std::vector<SpeculativeEstimate>& estimates, Format format);

///   batch  first token  per token  first step  last step  whole     tokens/s  FLOPs    bytes
///   1      1.52 s       27.3 ms    27.1 ms     27.5 ms    29.4 s    34.8      1.0 P    1.0 PB
/// With `prices`: the cost per million prompt and generated tokens at the hardware's price
/// (generation_token_cost: at least, from the bounds).
std::string render_generation(const std::vector<GenerationEstimate>& estimates, Format format,
                              const std::optional<PriceList>& prices = std::nullopt);

}  // namespace neuralcost
