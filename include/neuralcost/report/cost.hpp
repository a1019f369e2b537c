// Cost: a run's measured time priced at what its hardware costs per hour (the cost chapter:
// "cost per sample or per million tokens using the actual accelerator price"). Per run: cost per
// sample and per million samples, per million tokens for sequence models (tokens = batch x
// sequence length, from the run's contract), each with the interval carried over from the
// timing's 95% CI of the median; per layer, the money spent above its roofline lower bound
// ((measured - bound) x price), so a report can say which layer costs most to leave as it is.
//
// A training run (profile --train: its contract's workload is train) is priced the same way: per
// sample is one training sample's share of a step (price x step time / batch). Training cost to a
// quality target (x steps to reach it) needs the steps to the target, which only a training run
// to the target measures: `train-to-target` (measure/to_target.hpp) prices that, not this
// (kTrainingCostNote says so in every view).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "neuralcost/analyze_models.hpp"
#include "neuralcost/report/results.hpp"

namespace neuralcost {

/// The prices the user gives: one for every run (--price-per-hour), or per hardware id (a price
/// file the user owns, docs/json-schema.md#price-file).
struct PriceList {
  std::optional<double> per_hour;                      ///< for any hardware
  std::map<std::string, double> per_hour_by_hardware;  ///< by hardware id
  std::string currency = "USD";                        ///< a label only: no conversion
  std::string origin;                                  ///< "--price-per-hour" or the file's path

  /// The hourly price of `hardware_id`: its own entry, else per_hour, else none.
  std::optional<double> price_for(const std::string& hardware_id) const;
};

/// A price per hour written by a user: a finite number >= 0. kInvalidArgument naming `what`
/// otherwise ("--price-per-hour 'abc' is not a number").
double parse_price_per_hour(std::string_view text, const std::string& what);
/// A price file: {"schema_version": 1, "currency": "USD", "price_per_hour": {"host": 0.05,
/// "h100-sxm": 2.10}}. kNotFound when it cannot be opened; kInvalidArgument naming the field.
PriceList load_price_file(const std::string& path);
PriceList parse_price_file(std::string_view text, const std::string& origin);

/// A generation's price per million tokens from its lower bounds, so at least what it costs:
/// prompt tokens at the prefill's time (B·P of them), generated tokens at the decode steps' time
/// (B·(G − 1): the first generated token comes with the prefill). Empty when G = 1.
struct TokenCost {
  double per_million_prompt_tokens = 0;
  std::optional<double> per_million_generated_tokens;
};
/// kInvalidArgument for a negative price.
TokenCost generation_token_cost(const GenerationEstimate& generation, double price_per_hour);

/// An amount with the interval of the time it prices.
struct Money {
  double value = 0;
  double low = 0;   ///< at the timing's ci95_low_seconds
  double high = 0;  ///< at ci95_high_seconds
};

struct LayerCost {
  std::size_t layer = 0;  ///< index into the run's layers
  /// measured - lower bound (its waste_seconds) x price, per million samples
  double above_bound_per_million_samples = 0;
};

struct RunCost {
  double price_per_hour = 0;
  Money per_sample;           ///< price x median / batch
  Money per_million_samples;  ///< 1e6 x per_sample
  /// Tokens per sample: the sequence length of a sequence model (rnn, lstm, transformer, from the
  /// contract's model_sizes); 0 when the run has no sequence (then no per-token cost).
  std::int64_t tokens_per_sample = 0;
  std::optional<Money> per_million_tokens;  ///< price x median / (batch x seq) x 1e6
  /// The whole pass above its lower bound: (median - lower bound, at least 0) x price, per million samples.
  double above_bound_per_million_samples = 0;
  std::vector<LayerCost> layers;  ///< layers with time above their bound, most money first
};

/// What the cost views say about training runs and the cost to a quality target.
inline constexpr const char* kTrainingCostNote =
    "A training run (profile --train) is priced per training sample: price x step time / batch. Training cost to a "
    "quality target needs the steps to reach it, which only training to it measures: `neural-cost train-to-target "
    "--price-per-hour P` prices time to the target over seeded runs, and `neural-cost report to-target.json` draws "
    "it.";

/// The cost of one measured run at `price_per_hour`; nullopt for a failed run.
std::optional<RunCost> run_cost(const ResultRun& run, double price_per_hour);

struct CostReport {
  std::string currency;
  std::vector<std::optional<RunCost>> runs;  ///< one per run of the results, in order
  std::vector<std::string> warnings;         ///< hardware without a price
};

/// Prices every run of `results` at the price of the hardware it was measured against.
CostReport cost_of(const ResultsFile& results, const PriceList& prices);

}  // namespace neuralcost
