// "Did you mean ...?" for a mistyped model name. Private to measure/ until the library has one
// shared helper (the lead's core/suggest.hpp closest_name(), with the same contract): then this
// file goes and its callers include that one.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace neuralcost::detail {

/// The candidate closest to `name` by edit distance (case-insensitive), when it is close enough
/// to be a typo: at most 2 edits, and fewer than half of the name's length.
std::optional<std::string> closest_name(std::string_view name, const std::vector<std::string>& candidates);

}  // namespace neuralcost::detail
