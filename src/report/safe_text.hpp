// Text from outside (model and node names, paths, worker output) made safe for each output:
// valid UTF-8 for JSON, no control characters on a terminal, no formulas in CSV, no stray pipes
// in Markdown. (The public terminal_text is in views.hpp.)
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "neuralcost/report/views.hpp"

namespace neuralcost::report {

/// `text` with every invalid UTF-8 sequence replaced by U+FFFD.
std::string valid_utf8(std::string_view text);
/// A CSV cell that a spreadsheet would run as a formula (=, +, -, @, tab or CR first, longer than
/// one character, and not a number) gets a leading apostrophe.
std::string csv_safe(std::string_view cell);
/// Markdown: a '|' inside a cell is escaped, and < > & become entities (no HTML from a name).
std::string markdown_safe(std::string_view cell);
/// Markdown prose (outside a table) quoting outside text: no control characters, and the
/// characters that would start markup (HTML tags and entities, emphasis, links, code) escaped,
/// so a name renders as the text it is.
std::string markdown_text(std::string_view text);
/// HTML text or attribute value: & < > " ' as entities, invalid UTF-8 replaced, control
/// characters (other than tab and newline) dropped.
std::string html_text(std::string_view text);
/// JSON for a <script type="application/json"> block: < > & and U+2028/9 as \u escapes, so no
/// string inside can close the block or start a comment.
std::string json_for_script(const nlohmann::json& document);
/// The JSON document as text: indent 2, invalid UTF-8 in strings and keys replaced by U+FFFD (a
/// name with one bad byte must not lose a whole report), and then said so in the top-level
/// "warnings" array (created when the document has none; an array document gets no note).
std::string json_text(const nlohmann::json& document);
/// `render()` for a table or Markdown output, ending with a `warning:` line when text it showed
/// (through valid_utf8: terminal_text, the table cells) held bytes that are not UTF-8. JSON says
/// so itself (json_text); CSV cells carry the U+FFFD only. Nested calls note once, at the outside.
std::string noting_invalid_utf8(Format format, const std::function<std::string()>& render);

}  // namespace neuralcost::report
