// The words of a report, shared by its HTML and Markdown views: findings as sentences, run
// names, money. Plain text: names from outside are left as they are, each view escapes them.
#pragma once

#include <string>
#include <vector>

#include "neuralcost/report/report_views.hpp"

namespace neuralcost::report {

/// "ff, jax jit, batch 4" (plus " on cuda:0").
std::string run_name(const ResultRun& run);
/// "jax jit".
std::string config_name(const ResultRun& run);
/// An amount of money with 3 significant digits: "6.12e-09 USD", "0.0061 USD".
std::string money(double value, const std::string& currency);
/// "x (low - high)".
std::string money_interval(const Money& m, const std::string& currency);
/// The findings, one sentence each (what the studies say in their summaries).
std::vector<std::string> findings_sentences(const ReportInput& input);
/// The comparison's summary: "3 of 8 cells got faster, 1 slower, ...".
std::string comparison_sentence(const ResultsComparison& comparison);

}  // namespace neuralcost::report
