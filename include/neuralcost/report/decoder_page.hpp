// A decoder's LLM page (`analyze DECODER --format html`, docs/llm.md "The LLM page"): the
// decoder_overview's figures as one HTML page that works offline: a table per batch, prefill and
// decode points on the device's roofline, time per output token and tokens/s against the batch
// with the batch at which decode turns compute-bound, and weights plus KV cache against the
// context beside the device's memory.
#pragma once

#include <string>

#include "neuralcost/decoder_overview.hpp"

namespace neuralcost {

/// The page; `vega_script` is inlined (load_vega_script).
std::string render_decoder_page(const DecoderOverview& overview, const std::string& vega_script);

}  // namespace neuralcost
