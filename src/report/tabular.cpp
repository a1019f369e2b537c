// Table, Markdown and CSV rendering of a report::Table.
#include "report/tabular.hpp"

#include "report/safe_text.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace neuralcost::report {
namespace {

/// Display width in terminal columns: counts UTF-8 code points, not bytes ("µs").
std::size_t width_of(const std::string& s) {
  return static_cast<std::size_t>(
      std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

std::string csv_escape(const std::string& text) {
  const std::string s = csv_safe(valid_utf8(text));
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string pad(const std::string& s, std::size_t width, bool right) {
  const std::string fill(width > width_of(s) ? width - width_of(s) : 0, ' ');
  return right ? fill + s : s + fill;
}

}  // namespace

std::string render_table(const Table& t, Format format) {
  std::string out;
  const std::size_t cols = t.headers.size();
  auto right = [&](std::size_t c) { return c < t.right_align.size() && t.right_align[c]; };
  if (format == Format::kCsv) {
    const auto& headers = t.raw_headers.empty() ? t.headers : t.raw_headers;
    for (std::size_t c = 0; c < headers.size(); ++c) out += (c ? "," : "") + csv_escape(headers[c]);
    out += "\n";
    for (const auto& row : t.rows) {
      std::string line;
      for (std::size_t c = 0; c < cols; ++c) {
        const Cell& cell = row[c];
        if (cell.raw_parts.empty()) {
          line += (c ? "," : "") + csv_escape(cell.raw.empty() ? cell.display : cell.raw);
          continue;
        }
        for (std::size_t k = 0; k < cell.raw_parts.size(); ++k) {
          line += (c || k ? "," : "") + csv_escape(cell.raw_parts[k]);
        }
      }
      out += line + "\n";
    }
    return out;
  }
  // display text: no control characters (a name could hold escape sequences or a newline that
  // forges a line), and in Markdown no pipe that would end a cell
  const bool markdown = format == Format::kMarkdown;
  auto shown = [&](const std::string& s) { return markdown ? markdown_safe(terminal_text(s)) : terminal_text(s); };
  std::vector<std::vector<std::string>> rows;
  for (const auto& row : t.rows) {
    rows.emplace_back();
    for (std::size_t c = 0; c < cols; ++c) rows.back().push_back(shown(row[c].display));
  }
  std::vector<std::string> headers;
  for (const std::string& h : t.headers) headers.push_back(shown(h));
  std::vector<std::size_t> width(cols, 0);
  for (std::size_t c = 0; c < cols; ++c) width[c] = width_of(headers[c]);
  for (const auto& row : rows) {
    for (std::size_t c = 0; c < cols; ++c) width[c] = std::max(width[c], width_of(row[c]));
  }
  if (format == Format::kMarkdown) {
    out += "|";
    for (std::size_t c = 0; c < cols; ++c) out += " " + pad(headers[c], width[c], false) + " |";
    out += "\n|";
    for (std::size_t c = 0; c < cols; ++c) {
      out += right(c) ? std::string(width[c] + 1, '-') + ":|" : std::string(width[c] + 2, '-') + "|";
    }
    out += "\n";
    for (const auto& row : rows) {
      out += "|";
      for (std::size_t c = 0; c < cols; ++c) out += " " + pad(row[c], width[c], right(c)) + " |";
      out += "\n";
    }
    return out;
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string l;
    for (std::size_t c = 0; c < cols; ++c) l += (c ? "  " : "") + pad(cells[c], width[c], right(c));
    while (!l.empty() && l.back() == ' ') l.pop_back();
    return l + "\n";
  };
  out += line(headers);
  std::size_t total = 0;
  for (std::size_t w : width) total += w;
  out += std::string(total + 2 * (cols - 1), '-') + "\n";
  for (const auto& row : rows) out += line(row);
  return out;
}

}  // namespace neuralcost::report
