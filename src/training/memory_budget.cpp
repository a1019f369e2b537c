// Does it fit (training/memory.hpp): the --memory-budget and --reserve parsers, byte sizes as
// text, and the search for the largest batch whose training step fits a budget.
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "neuralcost/core/checked_math.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/training/memory.hpp"

namespace neuralcost {
namespace {

std::string trimmed(const std::string& text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t") - first + 1);
}

[[noreturn]] void bad_size(const std::string& text, const std::string& why) {
  throw Error(ErrorCode::kInvalidArgument, fmt::format("--memory-budget '{}' {}", text, why));
}

std::string breakdown(const MemoryLedger& l, MemoryBound bound) {
  std::string out =
      fmt::format("parameters {}, gradients {}, optimizer state {}", memory_size_string(l.parameter_bytes),
                  memory_size_string(l.gradient_bytes), memory_size_string(l.optimizer_state_bytes));
  if (l.master_weight_bytes > 0) out += fmt::format(", master weights {}", memory_size_string(l.master_weight_bytes));
  if (l.buffer_bytes > 0) out += fmt::format(", buffers {}", memory_size_string(l.buffer_bytes));
  const std::uint64_t activations =
      bound == MemoryBound::kLower ? l.activations.lower_bound_bytes : l.activations.upper_bound_bytes;
  out += fmt::format(", activations {} ({} bound)", memory_size_string(activations), memory_bound_name(bound));
  if (l.optimizer_transient_bytes > 0) {
    out += fmt::format(", optimizer temporaries {}", memory_size_string(l.optimizer_transient_bytes));
  }
  return out;
}

}  // namespace

std::uint64_t parse_memory_size(const std::string& raw) {
  const std::string text = trimmed(raw);
  const char* hint =
      "is not a size: write a number and a unit, e.g. 24GB, 1.5GiB or 512MB (units B, KB, MB, GB, TB, "
      "KiB, MiB, GiB, TiB)";
  if (!text.empty() && text[0] == '-') bad_size(raw, "must be positive");
  std::size_t i = 0;
  Wide whole = 0;
  std::size_t whole_digits = 0;
  for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i, ++whole_digits) {
    if (whole_digits >= 20) bad_size(raw, "is too large (at most 2^64 - 1 bytes)");
    whole = whole * 10 + (text[i] - '0');
  }
  Wide fraction = 0, scale = 1;
  std::size_t fraction_digits = 0;
  if (i < text.size() && text[i] == '.') {
    for (++i; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i, ++fraction_digits) {
      if (fraction_digits < 12) {  // finer than a picobyte-unit changes nothing
        fraction = fraction * 10 + (text[i] - '0');
        scale *= 10;
      }
    }
  }
  if (whole_digits + fraction_digits == 0) bad_size(raw, hint);
  std::string unit;
  for (std::size_t k = text.find_first_not_of(" \t", i); k != std::string::npos && k < text.size(); ++k) {
    unit += static_cast<char>(std::tolower(static_cast<unsigned char>(text[k])));
  }
  static const std::map<std::string, Wide> kUnits = {{"b", 1},
                                                     {"kb", 1000},
                                                     {"mb", 1000 * 1000},
                                                     {"gb", Wide{1000} * 1000 * 1000},
                                                     {"tb", Wide{1000} * 1000 * 1000 * 1000},
                                                     {"kib", Wide{1} << 10},
                                                     {"mib", Wide{1} << 20},
                                                     {"gib", Wide{1} << 30},
                                                     {"tib", Wide{1} << 40}};
  const auto unit_it = kUnits.find(unit);
  if (unit.empty()) bad_size(raw, "needs a unit (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), e.g. 24GB");
  if (unit_it == kUnits.end()) bad_size(raw, hint);
  const Wide bytes = whole * unit_it->second + fraction * unit_it->second / scale;
  if (bytes > static_cast<Wide>(UINT64_MAX)) bad_size(raw, "is too large (at most 2^64 - 1 bytes)");
  if (bytes == 0) bad_size(raw, "must be positive (at least 1 byte)");
  return static_cast<std::uint64_t>(bytes);
}

double parse_reserve(const std::string& raw) {
  std::string text = trimmed(raw);
  const bool percent = !text.empty() && text.back() == '%';
  if (percent) text.pop_back();
  char* end = nullptr;
  const double value = text.empty() ? NAN : std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(value)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--reserve '{}' is not a fraction: write a percentage (10%) or a fraction (0.1)", raw));
  }
  const double r = percent ? value / 100 : value;
  if (r < 0 || r >= 1) {
    const std::string hint = !percent && value >= 1 && value < 100 ? fmt::format(" (did you mean {}%?)", text) : "";
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--reserve '{}' must be at least 0 and below 1 (100%){}", raw, hint));
  }
  return r;
}

std::string memory_size_string(std::uint64_t bytes) {
  static const char* kUnits[] = {"B", "kB", "MB", "GB", "TB", "PB", "EB"};
  double value = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (unit + 1 < std::size(kUnits) && value >= 999.5) {
    value /= 1000;
    ++unit;
  }
  if (unit == 0) return fmt::format("{} B", bytes);
  return fmt::format("{:.3g} {}", value, kUnits[unit]);
}

BatchFit largest_batch(const std::function<OpGraph(std::int64_t)>& graph_at, const TrainingOptions& options,
                       std::uint64_t budget_bytes, double reserve, MemoryBound bound) {
  if (budget_bytes == 0) throw Error(ErrorCode::kInvalidArgument, "--memory-budget must be positive");
  if (!(reserve >= 0 && reserve < 1)) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("--reserve {} must be at least 0 and below 1", reserve));
  }
  BatchFit fit;
  fit.bound = bound;
  fit.budget_bytes = budget_bytes;
  fit.reserve = reserve;
  fit.usable_bytes = static_cast<std::uint64_t>(std::floor(static_cast<long double>(budget_bytes) * (1.0L - reserve)));
  std::map<std::int64_t, std::uint64_t> needed;  // by batch; UINT64_MAX: the counts overflow
  // one probe: a real graph at `batch` and its ledger
  auto fits = [&](std::int64_t batch, std::optional<MemoryLedger>* keep) {
    fit.probed.push_back(batch);
    try {
      MemoryLedger ledger = memory_ledger(graph_at(batch), options);
      ledger.batch = batch;  // the graph may not know its batch (OpGraph::batch 0)
      needed[batch] = ledger.total_bytes(bound);
      const bool ok = needed[batch] <= fit.usable_bytes;
      *keep = std::move(ledger);
      return ok;
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kOutOfRange) throw;
      needed[batch] = UINT64_MAX;
      return false;
    }
  };
  std::optional<MemoryLedger> best;
  if (!fits(1, &best)) {
    const std::string reserve_text =
        reserve > 0 ? fmt::format("; a {:g}% reserve leaves {}", reserve * 100, memory_size_string(fit.usable_bytes))
                    : "";
    if (needed[1] == UINT64_MAX) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("--memory-budget {} cannot hold batch 1: its byte counts overflow 64 bits",
                              memory_size_string(budget_bytes)));
    }
    throw Error(
        ErrorCode::kInvalidArgument,
        fmt::format("--memory-budget {} cannot hold batch 1: it needs {} ({}{})", memory_size_string(budget_bytes),
                    memory_size_string(needed[1]), breakdown(*best, bound), reserve_text));
  }
  std::int64_t lo = 1, hi = 0;  // lo fits; hi (when > 0) does not
  for (std::int64_t b = 2; b <= kMaxSearchedBatch; b *= 2) {
    std::optional<MemoryLedger> ledger;
    if (!fits(b, &ledger)) {
      hi = b;
      break;
    }
    lo = b;
    best = std::move(ledger);
  }
  if (hi == 0) {
    fit.capped = true;
  } else {
    while (hi - lo > 1) {
      const std::int64_t mid = lo + (hi - lo) / 2;
      std::optional<MemoryLedger> ledger;
      if (fits(mid, &ledger)) {
        lo = mid;
        best = std::move(ledger);
      } else {
        hi = mid;
      }
    }
  }
  fit.batch = lo;
  fit.needed_bytes = needed[lo];
  fit.next_batch_bytes = hi == lo + 1 ? needed[hi] : 0;
  fit.ledger = std::move(*best);
  return fit;
}

}  // namespace neuralcost
