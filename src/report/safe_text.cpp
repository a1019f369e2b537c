#include "report/safe_text.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include <fmt/format.h>

#include "neuralcost/report/views.hpp"

namespace neuralcost {
namespace report {

namespace {

/// Texts valid_utf8 mended in this thread while noting_invalid_utf8 runs (null otherwise).
thread_local std::size_t* mended_texts = nullptr;

/// The length of the valid UTF-8 sequence at s[i], or 0 when the byte there starts none.
std::size_t sequence_at(std::string_view s, std::size_t i) {
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
  return ok ? n : 0;
}

bool is_valid_utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = sequence_at(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

/// Mends every string and key of `j` in place; counts the strings mended and keeps the JSON
/// pointer (RFC 6901) of the first.
void mend_json(nlohmann::json& j, const std::string& where, std::size_t& count, std::string& first) {
  auto mended = [&](const std::string& at) {
    if (count++ == 0) first = at.empty() ? "/" : at;
  };
  auto pointer_step = [](const std::string& key) {
    std::string out = "/";
    for (char c : valid_utf8(key)) out += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
    return out;
  };
  if (j.is_string()) {
    if (!is_valid_utf8(j.get_ref<const std::string&>())) {
      j = valid_utf8(j.get_ref<const std::string&>());
      mended(where);
    }
  } else if (j.is_array()) {
    for (std::size_t i = 0; i < j.size(); ++i) mend_json(j[i], where + "/" + std::to_string(i), count, first);
  } else if (j.is_object()) {
    nlohmann::json out = nlohmann::json::object();
    for (auto& [key, value] : j.items()) {
      const std::string at = where + pointer_step(key);
      if (!is_valid_utf8(key)) mended(at);
      mend_json(value, at, count, first);
      out[valid_utf8(key)] = std::move(value);
    }
    j = std::move(out);
  }
}

bool holds_invalid_utf8(const nlohmann::json& j) {
  if (j.is_string()) return !is_valid_utf8(j.get_ref<const std::string&>());
  if (j.is_array()) return std::any_of(j.begin(), j.end(), holds_invalid_utf8);
  if (!j.is_object()) return false;
  for (const auto& [key, value] : j.items()) {
    if (!is_valid_utf8(key) || holds_invalid_utf8(value)) return true;
  }
  return false;
}

}  // namespace

std::string valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool replaced = false;
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = sequence_at(s, i);
    if (n > 0) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += "\xEF\xBF\xBD";
      replaced = true;
      ++i;
    }
  }
  if (replaced && mended_texts != nullptr) ++*mended_texts;
  return out;
}

std::string csv_safe(std::string_view cell) {
  // a lone "-" (no value) or "+" is no formula
  if (cell.size() < 2 || std::string_view("=+-@\t\r").find(cell.front()) == std::string_view::npos)
    return std::string(cell);
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
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
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
      case '\\':
      case '`':
      case '*':
      case '_':
      case '[':
      case ']':
      case '|':
      case '#':
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
    if (c == '<')
      out += "\\u003c";
    else if (c == '>')
      out += "\\u003e";
    else if (c == '&')
      out += "\\u0026";
    else if (c == '\xE2' && i + 2 < text.size() && text[i + 1] == '\x80' &&
             (text[i + 2] == '\xA8' || text[i + 2] == '\xA9')) {
      out += text[i + 2] == '\xA8' ? "\\u2028" : "\\u2029";
      i += 2;
    } else {
      out += c;
    }
  }
  return out;
}

std::string json_text(const nlohmann::json& document) {
  // (the dumps' own replacement stays as a last resort: every string is valid by then)
  constexpr auto replace = nlohmann::json::error_handler_t::replace;
  if (!holds_invalid_utf8(document)) return document.dump(2, ' ', false, replace) + "\n";
  nlohmann::json mended = document;
  std::size_t count = 0;
  std::string first;
  mend_json(mended, "", count, first);
  if (mended.is_object() && (!mended.contains("warnings") || mended["warnings"].is_array())) {
    mended["warnings"].push_back(fmt::format(
        "{} string{} from outside (a name, a path, a worker's output) held bytes that are not UTF-8, replaced by "
        "U+FFFD (the first at {})",
        count, count == 1 ? "" : "s", first));
  }
  return mended.dump(2, ' ', false, replace) + "\n";
}

std::string noting_invalid_utf8(Format format, const std::function<std::string()>& render) {
  if (format == Format::kJson || format == Format::kCsv || mended_texts != nullptr) return render();
  std::size_t count = 0;
  mended_texts = &count;
  std::string out;
  try {
    out = render();
  } catch (...) {
    mended_texts = nullptr;
    throw;
  }
  mended_texts = nullptr;
  if (count == 0) return out;
  return out + (format == Format::kMarkdown ? "\n" : "") +
         "warning: text from outside (a name, a path, a worker's output) held bytes that are not UTF-8; they are "
         "shown as U+FFFD\n";
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
