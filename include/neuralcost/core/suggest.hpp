// "Did you mean ...?" for names the user mistyped.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace neuralcost {

/// The candidate closest to `name` by edit distance (case-insensitive), when it is close enough
/// to be a typo: at most 2 edits, and fewer than half of the name's length.
std::optional<std::string> closest_name(std::string_view name, const std::vector<std::string>& candidates);

}  // namespace neuralcost
