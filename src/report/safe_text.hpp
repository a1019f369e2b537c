// Text from outside (model and node names, paths, worker output) made safe for each output:
// valid UTF-8 for JSON, no control characters on a terminal, no formulas in CSV, no stray pipes
// in Markdown. (The public terminal_text is in views.hpp.)
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace neuralcost::report {

/// `text` with every invalid UTF-8 sequence replaced by U+FFFD.
std::string valid_utf8(std::string_view text);
/// A CSV cell that a spreadsheet would run as a formula (=, +, -, @, tab or CR first, longer than
/// one character, and not a number) gets a leading apostrophe.
std::string csv_safe(std::string_view cell);
/// Markdown: a '|' inside a cell is escaped.
std::string markdown_safe(std::string_view cell);
/// The JSON document as text: indent 2, invalid UTF-8 in strings replaced by U+FFFD (a name
/// with one bad byte must not lose a whole report).
std::string json_text(const nlohmann::json& document);

}  // namespace neuralcost::report
