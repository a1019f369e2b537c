// The output formats every view renders: a terminal table, JSON (the stable machine interface,
// docs/json-schema.md), CSV (raw numbers) and Markdown.
#pragma once

#include <optional>
#include <string_view>

namespace neuralcost {

enum class Format { kTable, kJson, kCsv, kMarkdown };
/// "table", "json", "csv", "md" (or "markdown"); empty if unknown.
std::optional<Format> parse_format(std::string_view name);
/// The format a file's extension names: .json, .csv, .md / .markdown; empty for any other.
std::optional<Format> format_for_path(std::string_view path);

}  // namespace neuralcost
