// Prices of runs (see cost.hpp): time x price per hour, with the timing's interval.
#include "neuralcost/report/cost.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "neuralcost/core/error.hpp"
#include "neuralcost/models/reference.hpp"

namespace neuralcost {
namespace {

constexpr double kSecondsPerHour = 3600;
constexpr double kMillion = 1e6;

/// The tokens of one sample: a decoder phase's (the contract's tokens_per_sample: its prompt in
/// prefill, 1 in decode), a sequence model's length ("seq 32, width 128, depth 2"), else 0.
std::int64_t sequence_length(const ResultRun& run) {
  if (const auto t = run.contract.find("tokens_per_sample"); t != run.contract.end()) {
    try {
      const long long n = std::stoll(t->second);
      return n > 0 ? n : 0;
    } catch (const std::exception&) {
      return 0;
    }
  }
  if (!reference_model_takes_sequence(run.model)) return 0;
  const auto it = run.contract.find("model_sizes");
  if (it == run.contract.end()) return 0;
  static const std::regex seq(R"(^seq ([0-9]{1,9})\b)");
  std::smatch m;
  if (!std::regex_search(it->second, m, seq)) return 0;
  return std::stoll(m[1].str());
}

double checked_price(double value, const std::string& what) {
  if (!std::isfinite(value)) throw Error(ErrorCode::kInvalidArgument, fmt::format("{} must be a finite number", what));
  if (value < 0) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{} must not be negative (got {})", what, value));
  }
  return value;
}

}  // namespace

std::optional<double> PriceList::price_for(const std::string& hardware_id) const {
  const auto it = per_hour_by_hardware.find(hardware_id);
  if (it != per_hour_by_hardware.end()) return it->second;
  return per_hour;
}

double parse_price_per_hour(std::string_view text, const std::string& what) {
  const std::string s(text);
  char* end = nullptr;
  errno = 0;
  const double value = s.empty() ? 0 : std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || errno == ERANGE) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{} '{}' is not a number", what, s));
  }
  return checked_price(value, fmt::format("{} '{}'", what, s));
}

PriceList parse_price_file(std::string_view text, const std::string& origin) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: malformed JSON at byte {}", origin, e.byte));
  }
  auto fail = [&](const std::string& field, const std::string& problem) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: field '{}' {}", origin, field, problem));
  };
  if (!j.is_object())
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: a price file must be a JSON object", origin));
  for (const auto& [key, value] : j.items()) {
    if (key != "schema_version" && key != "currency" && key != "price_per_hour" && key != "notes") {
      fail(key, "is not a price file field (schema_version, currency, price_per_hour, notes)");
    }
  }
  if (j.contains("schema_version") && j["schema_version"] != 1) fail("schema_version", "must be 1");
  PriceList prices;
  prices.origin = origin;
  if (j.contains("currency")) {
    if (!j["currency"].is_string() || j["currency"].get<std::string>().empty())
      fail("currency", "must be a non-empty string");
    prices.currency = j["currency"].get<std::string>();
  }
  if (!j.contains("price_per_hour") || !j["price_per_hour"].is_object() || j["price_per_hour"].empty()) {
    fail("price_per_hour", "must be an object of hardware id -> price per hour, with at least one entry");
  }
  for (const auto& [id, value] : j["price_per_hour"].items()) {
    if (!value.is_number()) fail("price_per_hour." + id, "must be a number");
    try {
      prices.per_hour_by_hardware[id] = checked_price(value.get<double>(), "price");
    } catch (const Error& e) {
      fail("price_per_hour." + id, value.get<double>() < 0 ? "must not be negative" : "must be a finite number");
    }
  }
  return prices;
}

PriceList load_price_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("price file '{}' is a directory, not a file", path));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::kNotFound, fmt::format("cannot open price file '{}'", path));
  std::stringstream text;
  text << in.rdbuf();
  return parse_price_file(text.str(), path);
}

std::optional<RunCost> run_cost(const ResultRun& run, double price_per_hour) {
  if (run.failed() || run.batch < 1) return std::nullopt;
  RunCost c;
  c.price_per_hour = price_per_hour;
  const double per_second = price_per_hour / kSecondsPerHour;
  const double batch = static_cast<double>(run.batch);
  auto per_sample = [&](double seconds) { return per_second * seconds / batch; };
  c.per_sample = {per_sample(run.median_seconds), per_sample(run.ci95_low_seconds), per_sample(run.ci95_high_seconds)};
  c.per_million_samples = {kMillion * c.per_sample.value, kMillion * c.per_sample.low, kMillion * c.per_sample.high};
  c.tokens_per_sample = sequence_length(run);
  if (c.tokens_per_sample > 0) {
    const double t = static_cast<double>(c.tokens_per_sample);
    c.per_million_tokens =
        Money{c.per_million_samples.value / t, c.per_million_samples.low / t, c.per_million_samples.high / t};
  }
  c.above_bound_per_million_samples =
      kMillion * per_sample(std::max(0.0, run.median_seconds - run.lower_bound_seconds));
  for (std::size_t i = 0; i < run.layers.size(); ++i) {
    if (run.layers[i].waste_seconds > 0) c.layers.push_back({i, kMillion * per_sample(run.layers[i].waste_seconds)});
  }
  std::stable_sort(c.layers.begin(), c.layers.end(), [](const LayerCost& a, const LayerCost& b) {
    return a.above_bound_per_million_samples > b.above_bound_per_million_samples;
  });
  return c;
}

CostReport cost_of(const ResultsFile& results, const PriceList& prices) {
  CostReport report;
  report.currency = prices.currency;
  std::vector<std::string> unpriced;
  for (const ResultRun& run : results.runs) {
    const std::optional<double> price = prices.price_for(run.hardware_id);
    if (!price) {
      if (std::find(unpriced.begin(), unpriced.end(), run.hardware_id) == unpriced.end())
        unpriced.push_back(run.hardware_id);
      report.runs.emplace_back();
      continue;
    }
    report.runs.push_back(run_cost(run, *price));
  }
  for (const std::string& id : unpriced) {
    report.warnings.push_back(fmt::format("{}: no price for hardware '{}': its runs have no cost", prices.origin,
                                          id.empty() ? "(unnamed)" : id));
  }
  return report;
}

TokenCost generation_token_cost(const GenerationEstimate& g, double price_per_hour) {
  if (!(price_per_hour >= 0)) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("a price per hour of {} must be at least 0", price_per_hour));
  }
  const double per_second = price_per_hour / 3600;
  const double batch = static_cast<double>(g.request.batch);
  TokenCost c;
  c.per_million_prompt_tokens =
      per_second * g.prefill.fused_lower_bound_seconds / (batch * static_cast<double>(g.request.prompt)) * 1e6;
  if (g.decode_steps > 0) {
    c.per_million_generated_tokens =
        per_second * g.decode.fused_lower_bound_seconds / (batch * static_cast<double>(g.decode_steps)) * 1e6;
  }
  return c;
}

}  // namespace neuralcost
