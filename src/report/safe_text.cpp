#include "report/safe_text.hpp"

#include <cstdlib>

#include <fmt/format.h>

#include "neuralcost/report/views.hpp"

namespace neuralcost {
namespace report {

std::string valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const std::size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool ok = n > 0 && i + n <= s.size();
    for (std::size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
    if (ok && n > 1) {
      // overlong forms, surrogates and code points past U+10FFFF are invalid too
      std::uint32_t cp = c & (0x7F >> n);
      for (std::size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
      const std::uint32_t min = n == 2 ? 0x80 : n == 3 ? 0x800 : 0x10000;
      ok = cp >= min && cp <= 0x10FFFF && (cp < 0xD800 || cp > 0xDFFF);
    }
    if (ok) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

std::string csv_safe(std::string_view cell) {
  // a lone "-" (no value) or "+" is no formula
  if (cell.size() < 2 || std::string_view("=+-@\t\r").find(cell.front()) == std::string_view::npos) return std::string(cell);
  const std::string text(cell);
  char* end = nullptr;
  std::strtod(text.c_str(), &end);
  if (end != nullptr && *end == '\0') return text;  // a number such as -1.5 stays a number
  return "'" + text;
}

std::string markdown_safe(std::string_view cell) {
  std::string out;
  for (char c : cell) {
    // a pipe would end the cell; < and & would start HTML (a name holding a <script> tag)
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else {
      if (c == '|') out += '\\';
      out += c;
    }
  }
  return out;
}

std::string markdown_text(std::string_view text) {
  const std::string safe = neuralcost::terminal_text(text);
  std::string out;
  for (char c : safe) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '\\': case '`': case '*': case '_': case '[': case ']': case '|': case '#':
        out += '\\';
        out += c;
        break;
      default: out += c;
    }
  }
  return out;
}

std::string html_text(std::string_view text) {
  const std::string valid = valid_utf8(text);
  std::string out;
  out.reserve(valid.size());
  for (char c : valid) {
    const auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default:
        if ((u < 0x20 && c != '\n' && c != '\t') || u == 0x7F) break;  // never raw in a page
        out += c;
    }
  }
  return out;
}

std::string json_for_script(const nlohmann::json& document) {
  const std::string text = document.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    // these characters occur only inside strings in JSON text, where the escapes mean the same
    if (c == '<') out += "\\u003c";
    else if (c == '>') out += "\\u003e";
    else if (c == '&') out += "\\u0026";
    else if (c == '\xE2' && i + 2 < text.size() && text[i + 1] == '\x80' && (text[i + 2] == '\xA8' || text[i + 2] == '\xA9')) {
      out += text[i + 2] == '\xA8' ? "\\u2028" : "\\u2029";
      i += 2;
    } else {
      out += c;
    }
  }
  return out;
}

std::string json_text(const nlohmann::json& document) {
  return document.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace report

std::string terminal_text(std::string_view text) {
  const std::string valid = report::valid_utf8(text);
  std::string out;
  for (char c : valid) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7F) {
      out += fmt::format("\\x{:02x}", u);  // escapes, newlines: never raw on a terminal
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace neuralcost
