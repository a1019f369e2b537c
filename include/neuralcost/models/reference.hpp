// The five reference networks of docs/reference-networks.md (ff, cnn, rnn, lstm, transformer)
// as op graphs, with width, depth, sequence length and batch as parameters. Every framework
// backend builds the same networks, so their parameter counts and FLOPs must match these.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "neuralcost/core/graph.hpp"

namespace neuralcost {

struct ReferenceOptions {
  std::string model = "transformer";  ///< ff, cnn, rnn, lstm or transformer
  std::int64_t batch = 1;
  std::int64_t seq = 32;     ///< time steps (rnn, lstm, transformer)
  std::int64_t width = 128;  ///< hidden width d (cnn: channels of the last conv stage)
  std::int64_t depth = 2;    ///< hidden blocks (ff), conv stages (cnn), layers (rnn, lstm, transformer)
  std::int64_t heads = 4;    ///< transformer attention heads
  std::int64_t classes = 10;
  DType dtype = DType::kFp32;
};

/// The names accepted by build_reference_model, in the document's order.
const std::vector<std::string>& reference_model_names();

/// Whether a reference network reads a sequence of `seq` steps per sample (rnn, lstm,
/// transformer): its samples are then seq tokens each.
bool reference_model_takes_sequence(const std::string& name);

/// Builds a reference network. Throws kNotFound for an unknown name and kInvalidArgument for
/// options that cannot build it (batch < 1, width not divisible by heads, ...), naming the
/// option; counts that would overflow 64 bits throw kOutOfRange.
OpGraph build_reference_model(const ReferenceOptions& options);

}  // namespace neuralcost
