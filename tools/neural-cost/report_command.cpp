// `neural-cost report`, `cost` and `compare`: views over results files (a `profile --format
// json` document, or the JSON Lines a study appends). Parsing and wiring only: reading, pricing,
// comparing and the findings are the library's (include/neuralcost/report/).
#include <memory>

#include <fmt/format.h>

#include "commands.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/measure/to_target.hpp"
#include "neuralcost/report/report_views.hpp"
#include "neuralcost/report/to_target_views.hpp"

namespace neuralcost::cli {
namespace {

constexpr const char* kResultsHelp =
    "Results file: `profile --format json` output, or JSON Lines (one run per line, optionally after a "
    "{\"hardware\": ...} header line; docs/json-schema.md#results-lines)";

/// Reads a results file, printing what was skipped; an error when no run is left.
ResultsFile read_for_report(const std::string& path) {
  ResultsFile results = read_results(path);
  for (const std::string& w : results.warnings) fmt::print(stderr, "warning: {}\n", terminal_text(w));
  require_runs(results);
  return results;
}

struct PriceArgs {
  std::string per_hour;  // text: parsed by the library, which names what is wrong with it
  std::string file;
  std::string currency;
};

void add_price_options(CLI::App& cmd, PriceArgs& args) {
  cmd.add_option("--price-per-hour", args.per_hour,
                 "Price of the hardware per hour (e.g. 2.10): cost per sample and per million samples (tokens for "
                 "sequence models), and per layer the money above its roofline lower bound");
  cmd.add_option("--price-file", args.file,
                 "JSON file of prices per hardware id: {\"currency\": \"USD\", \"price_per_hour\": {\"host\": 0.05, "
                 "\"h100-sxm\": 2.10}}; --price-per-hour then prices the hardware it does not list");
  cmd.add_option("--currency", args.currency, "Currency label of the prices (default USD, or the price file's)");
}

/// The prices given, or none.
std::optional<PriceList> prices_of(const PriceArgs& args) {
  if (args.per_hour.empty() && args.file.empty()) return std::nullopt;
  PriceList prices;
  if (!args.file.empty()) prices = load_price_file(args.file);
  if (!args.per_hour.empty()) {
    prices.per_hour = parse_price_per_hour(args.per_hour, "--price-per-hour");
    if (args.file.empty()) prices.origin = "--price-per-hour";
  }
  if (!args.currency.empty()) prices.currency = args.currency;
  return prices;
}

/// --format when given; else the output's extension; else `fallback`.
std::string format_name(const CLI::App& cmd, const std::string& format, const std::string& output,
                        const std::string& fallback) {
  if (cmd.count("--format") > 0) return format;
  auto ends = [&](const char* ext) {
    const std::string e(ext);
    return output.size() >= e.size() && output.compare(output.size() - e.size(), e.size(), e) == 0;
  };
  if (ends(".html") || ends(".htm")) return "html";
  if (ends(".md") || ends(".markdown")) return "md";
  if (ends(".json")) return "json";
  if (ends(".csv")) return "csv";
  return fallback;
}

/// The table/JSON/CSV/Markdown format named by `name`; HTML is the report's.
Format view_format(const std::string& name, const char* command) {
  const std::optional<Format> format = parse_format(name);
  if (!format) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{} writes table, json, csv or md, not '{}' (the HTML page is `neural-cost report`)",
                            command, name));
  }
  return *format;
}

struct ReportArgs {
  std::string results;
  std::string output;
  std::string format = "html";
  PriceArgs price;
  std::string baseline;
  double alpha = 0.05;
  double min_effect = 5;  // percent
};

void run_report(const ReportArgs& args, const CLI::App& cmd) {
  refuse_output_over_inputs(args.output, {args.results, args.baseline, args.price.file});
  if (args.baseline.empty()) {
    refuse_given(cmd, {"--alpha", "--min-effect"}, " applies only with --baseline (the comparison's test)");
  }
  if (args.price.per_hour.empty() && args.price.file.empty()) {
    refuse_given(cmd, {"--currency"}, " applies only with --price-per-hour or --price-file");
  }
  const std::string format = format_name(cmd, args.format, args.output, "html");
  // Vega first: a missing package should not cost the reading of a large file
  const std::string vega = format == "html" ? load_vega_script(vega_directory()) : std::string();
  const std::optional<PriceList> prices = prices_of(args.price);
  // a train-to-target study (its JSON file) has a page of its own
  if (const auto study = read_to_target_file(args.results, prices ? prices->per_hour : std::nullopt)) {
    if (!args.baseline.empty() || (prices && !prices->per_hour_by_hardware.empty())) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{} is a train-to-target study: --baseline and --price-file apply to results files "
                              "(--price-per-hour prices the study)",
                              args.results));
    }
    emit(format == "html" ? render_to_target_html(*study, args.results, vega)
                          : render_to_target(*study, Format::kMarkdown),
         args.output);
    return;
  }
  const ResultsFile results = read_for_report(args.results);
  ReportInput input;
  input.results = &results;
  input.findings = find_findings(results);
  if (prices) {
    input.cost = cost_of(results, *prices);
    for (const std::string& w : input.cost->warnings) fmt::print(stderr, "warning: {}\n", terminal_text(w));
  }
  ResultsFile before;
  if (!args.baseline.empty()) {
    before = read_for_report(args.baseline);
    input.comparison = compare_results(before, results, args.alpha, args.min_effect / 100);
  }
  emit(format == "html" ? render_report_html(input, vega) : render_report_markdown(input), args.output);
  if (!args.output.empty()) {
    fmt::print(stderr, "note: wrote {} ({} runs: {} ok, {} mistrusted, {} failed)\n", terminal_text(args.output),
               input.findings.runs, input.findings.ok, input.findings.mistrusted, input.findings.failed);
  }
}

struct CostArgs {
  std::string results;
  std::string output;
  std::string format = "table";
  PriceArgs price;
};

void run_cost(const CostArgs& args, const CLI::App& cmd) {
  refuse_output_over_inputs(args.output, {args.results, args.price.file});
  const std::optional<PriceList> prices = prices_of(args.price);
  if (!prices) {
    throw Error(ErrorCode::kInvalidArgument, "cost needs a price: --price-per-hour P or --price-file FILE");
  }
  const ResultsFile results = read_for_report(args.results);
  const CostReport cost = cost_of(results, *prices);
  const Format format = view_format(format_name(cmd, args.format, args.output, "table"), "cost");
  if (format == Format::kJson || format == Format::kCsv) {
    // the JSON carries them; the table and Markdown print them below the table
    for (const std::string& w : cost.warnings) fmt::print(stderr, "warning: {}\n", terminal_text(w));
  }
  emit(render_cost(results, cost, format), args.output);
}

struct CompareArgs {
  std::string before, after;
  std::string output;
  std::string format = "table";
  double alpha = 0.05;
  double min_effect = 5;       // percent
  double fail_if_slower = -1;  // percent; negative: no gate
};

/// "5%" or "5" -> 5; kInvalidArgument naming the option otherwise.
double percent_option(const std::string& text, const char* option) {
  std::string t = text;
  if (!t.empty() && t.back() == '%') t.pop_back();
  try {
    std::size_t used = 0;
    const double v = std::stod(t, &used);
    if (used == t.size() && v >= 0 && v < 100) return v;
  } catch (const std::exception&) {
  }
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("{} '{}' must be a percentage from 0 to below 100 (e.g. 5%)", option, text));
}

void run_compare(const CompareArgs& args, const CLI::App& cmd) {
  refuse_output_over_inputs(args.output, {args.before, args.after});
  // a gate below the minimum effect could never fail on what it asks for: it lowers the minimum
  // effect, unless both were given (then they disagree)
  double min_effect = args.min_effect;
  if (args.fail_if_slower >= 0 && args.fail_if_slower < min_effect) {
    if (cmd.count("--min-effect") > 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("--fail-if-slower {}% is below --min-effect {}%: a change below the minimum effect is "
                              "no significant change, so the gate could not fail on it",
                              args.fail_if_slower, args.min_effect));
    }
    min_effect = args.fail_if_slower;
  }
  const ResultsFile before = read_for_report(args.before);
  const ResultsFile after = read_for_report(args.after);
  const ResultsComparison comparison = compare_results(before, after, args.alpha, min_effect / 100);
  const Format format = view_format(format_name(cmd, args.format, args.output, "table"), "compare");
  if (format == Format::kJson || format == Format::kCsv) {
    for (const std::string& w : comparison.warnings) fmt::print(stderr, "warning: {}\n", terminal_text(w));
  }
  emit(render_results_comparison(comparison, format), args.output);
  if (args.fail_if_slower < 0) return;
  // the gate vouches only for what it read: lines skipped as unreadable, or cells the after file
  // lacks, might be the slow ones
  const std::size_t skipped = before.warnings.size() + after.warnings.size();
  if (skipped > 0 || comparison.cells.empty() || !comparison.only_before.empty()) {
    throw Error(
        ErrorCode::kInvalidArgument,
        fmt::format(
            "--fail-if-slower {}%: {}: the gate cannot vouch for cells it could not compare", args.fail_if_slower,
            skipped > 0 ? fmt::format("{} line(s) of the files were skipped (the warnings above)", skipped)
            : comparison.cells.empty() ? std::string("the files have no cell in common")
                                       : fmt::format("{} cell(s) of the before file are missing from the after file",
                                                     comparison.only_before.size())));
  }
  // the gate: a significant slowdown beyond the threshold fails the command (after printing)
  const std::vector<const CellChange*> slower = slower_than(comparison, args.fail_if_slower / 100);
  const std::vector<const GroupChange*> groups = groups_slower_than(comparison, args.fail_if_slower / 100);
  const bool shifted = shift_slower_than(comparison, args.fail_if_slower / 100);
  if (slower.empty() && groups.empty() && !shifted) return;
  std::vector<std::string> named;
  if (shifted) {
    named.push_back(
        fmt::format("every cell together, {:+.1f}% (95% CI {:+.1f}% .. {:+.1f}%; the median of {} cells: the files' "
                    "common shift, which the cells' tests are relative to)",
                    100 * comparison.studies->shift, 100 * (comparison.studies->shift_ci95.low - 1),
                    100 * (comparison.studies->shift_ci95.high - 1), comparison.studies->cells));
  }
  for (const GroupChange* g : groups) {
    named.push_back(fmt::format("{} {} against the others ({:+.1f}%)", g->dimension, g->name, 100 * (g->ratio - 1)));
  }
  for (const CellChange* c : slower) {
    named.push_back(fmt::format("{} ({:+.1f}%)", cell_name(c->cell), 100 * (c->ratio - 1)));
  }
  std::string list;
  for (std::size_t i = 0; i < named.size() && i < 5; ++i) list += (i ? "; " : "") + named[i];
  if (named.size() > 5) list += fmt::format("; and {} more", named.size() - 5);
  // the machine moved under the cells: say so, as the gate cannot tell its pace from the code's
  for (const auto& [m, what] : {std::pair{comparison.cpu, "CPU"}, std::pair{comparison.machine, "memory"}}) {
    if (m && m->change >= args.fail_if_slower / 100) {
      list += fmt::format(
          ". The machine itself was {:.1f}% slower in the after file by its {} canary: these may be the machine's, "
          "not the code's; rerun both on a steady machine",
          100 * m->change, what);
      break;
    }
  }
  throw Error(
      ErrorCode::kInvalidArgument,
      terminal_text(fmt::format("--fail-if-slower {}%: {}{} cell(s) and {} group(s) slower by more than that "
                                "at a family-wise alpha of {} (Holm over {} tested cells, and over {} groups of "
                                "backends and modes{}): {}",
                                args.fail_if_slower, shifted ? "the common shift, " : "", slower.size(), groups.size(),
                                args.alpha, tested_cells(comparison), comparison.groups.size(),
                                comparison.studies ? " and the common shift" : "", list)));
}

}  // namespace

void add_report_commands(CLI::App& app) {
  {
    auto args = std::make_shared<ReportArgs>();
    CLI::App* cmd = app.add_subcommand(
        "report",
        "Write the report of a results file: one self-contained HTML page (works offline; Vega inlined from\n"
        "Debian's libjs-vega) with the findings in sentences, the roofline of the machine with every run and\n"
        "a chosen run's layers, latency with CIs, an efficiency heatmap, batch scaling, compiled-over-eager\n"
        "speedups, cost (with a price), a comparison (with --baseline) and every run with its verdict; or the\n"
        "same words and tables in Markdown (--format md). The report shows what the results say; it re-derives\n"
        "no verdict. A train-to-target study's JSON (train-to-target -o) gets a page of its own: every run's\n"
        "validation accuracy against time (and cost, with a price), the target as a line.");
    cmd->add_option("results", args->results, kResultsHelp)->required();
    cmd->add_option("-o,--output", args->output,
                    "Write to this file (atomically) instead of stdout; without --format, .md gives Markdown");
    cmd->add_option("--format", args->format, "html or md")
        ->check(CLI::IsMember({"html", "md"}))
        ->capture_default_str();
    add_price_options(*cmd, args->price);
    cmd->add_option("--baseline", args->baseline,
                    "An earlier results file: adds a section comparing every matching cell (see `compare`)");
    cmd->add_option("--alpha", args->alpha, "Significance level of the comparison's test")->capture_default_str();
    cmd->add_option("--min-effect", args->min_effect,
                    "With --baseline: a change smaller than this percentage is no significant change")
        ->capture_default_str();
    cmd->footer(kTrainingCostNote);
    cmd->callback([args, cmd] { run_report(*args, *cmd); });
  }
  {
    auto args = std::make_shared<CostArgs>();
    CLI::App* cmd = app.add_subcommand(
        "cost",
        "Price the runs of a results file: per run, cost per sample and per million samples (per million\n"
        "tokens for rnn, lstm and transformer: tokens = batch x sequence length), with the interval of the\n"
        "timing's 95% CI; per layer, the money spent above its roofline lower bound. Needs --price-per-hour or\n"
        "--price-file.");
    cmd->add_option("results", args->results, kResultsHelp)->required();
    add_price_options(*cmd, args->price);
    add_format_option(*cmd, args->format);
    cmd->add_option("-o,--output", args->output,
                    "Write to this file (atomically) instead of stdout; without --format, the format follows its "
                    "extension (.json, .csv, .md)");
    cmd->footer(kTrainingCostNote);
    cmd->callback([args, cmd] { run_cost(*args, *cmd); });
  }
  {
    auto args = std::make_shared<CompareArgs>();
    CLI::App* cmd = app.add_subcommand(
        "compare",
        "Compare two results files cell by cell (model, backend, mode, batch, device): the change of the\n"
        "estimate with its 95% interval and a two-sided Mann-Whitney U test on the round medians (as\n"
        "google/benchmark's compare tool tests repetitions), so a real change is told apart from noise; a\n"
        "change below --min-effect is no significant change. With two or more backends, each backend's cells\n"
        "are also compared with the other backends' cells (a drift of the whole machine cancels). The cells\n"
        "only one file has are listed. --fail-if-slower makes it a CI gate.");
    cmd->add_option("before", args->before, "The earlier results file")->required();
    cmd->add_option("after", args->after, "The later results file")->required();
    cmd->add_option("--alpha", args->alpha, "Significance level of the test")->capture_default_str();
    cmd->add_option("--min-effect", args->min_effect,
                    "A change smaller than this percentage is no significant change, whatever the test says")
        ->capture_default_str();
    auto gate = std::make_shared<std::string>();
    cmd->add_option("--fail-if-slower", *gate,
                    "Exit 1 (after printing) when a cell, a backend's or a mode's cells, or every cell together "
                    "are slower by more than this percentage (e.g. 5%) with significance over all of them "
                    "(Holm-Bonferroni at --alpha, so an A/A fails with chance at most alpha), or when a line was "
                    "unreadable or a cell is missing: a CI gate. Below the default --min-effect it lowers it");
    cmd->parse_complete_callback([args, gate, cmd] {
      // given empty (an unset variable in a CI script) is an error, not a gate switched off
      if (cmd->count("--fail-if-slower") > 0) args->fail_if_slower = percent_option(*gate, "--fail-if-slower");
    });
    add_format_option(*cmd, args->format);
    cmd->add_option("-o,--output", args->output,
                    "Write to this file (atomically) instead of stdout; without --format, the format follows its "
                    "extension (.json, .csv, .md)");
    cmd->callback([args, cmd] { run_compare(*args, *cmd); });
  }
}

}  // namespace neuralcost::cli
