// Table, Markdown, CSV and JSON views of two results files compared (see report_views.hpp).
#include <fmt/format.h>

#include <tuple>

#include "neuralcost/core/statistics.hpp"
#include "neuralcost/report/report_views.hpp"
#include "neuralcost/version.hpp"
#include "report/findings_text.hpp"
#include "report/safe_text.hpp"
#include "report/si_format.hpp"
#include "report/tabular.hpp"

namespace neuralcost {
namespace {

using nlohmann::json;
using report::Cell;

json side_json(const ResultRun& r) {
  json j{{"source", r.source}, {"verdict", r.verdict}};
  if (r.failed()) {
    j["error"] = r.error;
    return j;
  }
  j["median_seconds"] = r.median_seconds;
  j["ci95_low_seconds"] = r.ci95_low_seconds;
  j["ci95_high_seconds"] = r.ci95_high_seconds;
  j["samples"] = r.samples;
  j["has_samples_seconds"] = !r.samples_seconds.empty();
  j["rounds"] = r.rounds.size();
  return j;
}

json cell_json(const CellKey& c) {
  return {{"model", c.model}, {"backend", c.backend}, {"mode", c.mode}, {"batch", c.batch}, {"device", c.device}};
}

}  // namespace

json results_comparison_json(const ResultsComparison& c) {
  json j{{"schema_version", 1},
         {"tool", {{"name", "neural-cost"}, {"version", std::string(kVersion)}}},
         {"before", c.before_path},
         {"after", c.after_path},
         {"alpha", c.alpha},
         {"min_effect", c.min_effect},
         {"test",
          "two-sided Mann-Whitney U on the round medians (timing.rounds; timing.samples_seconds for files "
          "without rounds), exact for 8 or fewer values without ties, else the normal approximation with tie "
          "and continuity corrections; significant when p < alpha and |change| >= min_effect"},
         {"warnings", c.warnings}};
  if (c.before_pace || c.after_pace) {
    json pace{{"description",
               "the machine's pace within each file: per tick, the median over its rounds of round median / the "
               "cell's estimate; low and high are the 10th and 90th percentiles over the ticks"}};
    for (const auto& [p, name] : {std::pair{c.before_pace, "before"}, std::pair{c.after_pace, "after"}}) {
      if (p) pace[name] = {{"ticks", p->ticks}, {"low", p->low}, {"high", p->high}, {"spread", p->spread()}};
    }
    j["pace"] = pace;
  }
  for (const auto& [m, key, canary] :
       {std::tuple{c.machine, "machine", "a 64 MiB stream read before every round (docs/profiling.md 2a)"},
        std::tuple{c.cpu, "cpu", "a chain of multiply-adds in registers before every round (docs/profiling.md 2a)"}}) {
    if (!m) continue;
    j[key] = {{"canary", canary},
              {"before_seconds", m->before_seconds},
              {"after_seconds", m->after_seconds},
              {"before_rounds", m->before_rounds},
              {"after_rounds", m->after_rounds},
              {"change", m->change}};
  }
  if (c.studies) {
    j["between_studies"] = {
        {"cells", c.studies->cells},
        {"shift", c.studies->shift},
        {"spread", c.studies->spread},
        {"within", c.studies->within},
        {"between", c.studies->between},
        {"level_before", c.studies->level_before},
        {"level_after", c.studies->level_after},
        {"shift_sd", c.studies->shift_sd},
        {"shift_p_value", c.studies->shift_p_value},
        {"shift_ci95", {{"low", c.studies->shift_ci95.low - 1}, {"high", c.studies->shift_ci95.high - 1}}},
        {"description",
         "the cells' log ratios: their median (shift), their spread around it (1.4826 MAD), the cells' own standard "
         "error (median) and the between-study spread the cells' intervals leave out, sqrt(spread^2 - within^2), "
         "counted in every cell's test (study_p_value) and interval (docs/profiling.md 2a); the shift's own test: "
         "the two files' machine levels (level_before, level_after: the standard error of each study's mean pace) "
         "and the median's standard error, in quadrature (shift_sd, log units), shift_p_value and shift_ci95"}};
  }
  j["cells"] = json::array();
  for (const CellChange& x : c.cells) {
    json cell = cell_json(x.cell);
    cell["before"] = side_json(x.before);
    cell["after"] = side_json(x.after);
    cell["result"] = std::string(change_name(x.change));
    if (x.change != Change::kNotComparable) {
      cell["ratio"] = x.ratio;
      cell["change"] = x.ratio - 1;
      cell["change_ci95"] = {{"low", x.ratio_ci95.low - 1},
                             {"high", x.ratio_ci95.high - 1},
                             {"from", !x.ratio_ci_from_samples  ? "the two runs' CIs"
                                      : x.tested_on == "rounds" ? "bootstrap of both runs' round medians"
                                                                : "bootstrap of both runs' samples"}};
    }
    cell["u_test"] =
        x.test ? json{{"u", x.test->u}, {"p_value", x.test->p_value}, {"exact", x.test->exact}, {"on", x.tested_on}}
               : json(nullptr);
    if (x.study_p_value > 0) {
      cell["study_p_value"] = x.study_p_value;
      cell["relative_change"] = x.relative - 1;
    }
    cell["p_value"] = x.test ? json(x.p_value()) : json(nullptr);
    cell["notes"] = x.notes;
    j["cells"].push_back(cell);
  }
  j["groups"] = json::array();
  for (const GroupChange& g : c.groups) {
    json group{{g.dimension, g.name}, {"dimension", g.dimension},     {"name", g.name},
               {"cells", g.cells},    {"other_cells", g.other_cells}, {"result", std::string(change_name(g.change))}};
    if (g.test) {
      group["ratio"] = g.ratio;
      group["change"] = g.ratio - 1;
      group["change_ci95"] = {
          {"low", g.ratio_ci95.low - 1},
          {"high", g.ratio_ci95.high - 1},
          {"from", fmt::format("bootstrap of the {0}'s and the other {0}s' cell ratios", g.dimension)}};
      group["u_test"] = {{"u", g.test->u},
                         {"p_value", g.test->p_value},
                         {"exact", g.test->exact},
                         {"on", "cell ratios, the backend's against the other backends'"}};
    }
    j["groups"].push_back(group);
  }
  j["only_before"] = json::array();
  for (const CellKey& k : c.only_before) j["only_before"].push_back(cell_json(k));
  j["only_after"] = json::array();
  for (const CellKey& k : c.only_after) j["only_after"].push_back(cell_json(k));
  return j;
}

static std::string results_comparison_view(const ResultsComparison& c, Format format) {
  if (format == Format::kJson) return report::json_text(results_comparison_json(c));
  report::Table t;
  t.headers = {"cell", "before", "after", "change", "95% CI", "p", "result", "notes"};
  t.raw_headers = {"cell",
                   "before_median_seconds",
                   "after_median_seconds",
                   "change",
                   "change_ci95_low",
                   "change_ci95_high",
                   "p_value",
                   "result",
                   "notes"};
  t.right_align = {false, true, true, true, true, true, false, false};
  for (const CellChange& x : c.cells) {
    std::string notes;
    for (const std::string& n : x.notes) notes += (notes.empty() ? "" : "; ") + n;
    auto median = [](const ResultRun& r) {
      return r.failed() ? Cell{"failed", ""}
                        : Cell{report::si(r.median_seconds, "s"), fmt::format("{}", r.median_seconds)};
    };
    const bool compared = x.change != Change::kNotComparable;
    t.rows.push_back(
        {{cell_name(x.cell), ""},
         median(x.before),
         median(x.after),
         compared ? Cell{fmt::format("{:+.1f}%", (x.ratio - 1) * 100), fmt::format("{}", x.ratio - 1)} : Cell{"-", ""},
         compared
             ? Cell{fmt::format("{:+.1f}% .. {:+.1f}%", (x.ratio_ci95.low - 1) * 100, (x.ratio_ci95.high - 1) * 100),
                    "",
                    {fmt::format("{}", x.ratio_ci95.low - 1), fmt::format("{}", x.ratio_ci95.high - 1)}}
             : Cell{"-", "", {"", ""}},
         x.test ? Cell{fmt::format("{:.2g}", x.p_value()), fmt::format("{}", x.p_value())} : Cell{"-", ""},
         {std::string(change_name(x.change)), ""},
         {notes, ""}});
  }
  std::string out = report::render_table(t, format);
  if (format == Format::kCsv) return out;
  // lines of text quote names: no control characters on a terminal, no markup in Markdown
  auto line = [&](const std::string& text) {
    return (format == Format::kMarkdown ? report::markdown_text(text) : terminal_text(text)) + "\n";
  };
  out += "\n" + line(report::comparison_sentence(c));
  if (c.studies) {
    out += line(fmt::format(
        "between the files: every cell {:+.1f}% (the median of {} cells: a shift common to every cell, which one "
        "comparison cannot tell from the machine's drift between the studies; see the canaries), the cells apart "
        "from it by {:.1f}% (sd), {:.1f}% more than their own intervals explain. Each cell's result is relative "
        "to that shift, and its test and interval count that between-study spread, so a change no larger than "
        "two studies of this machine differ by is not significant (p is the larger of the U test's and that "
        "test's)",
        100 * c.studies->shift, c.studies->cells, 100 * c.studies->spread, 100 * c.studies->between));
    const StudyEffect& e = *c.studies;
    out += line(
        e.level_before > 0 || e.level_after > 0
            ? fmt::format("the shift itself: 95% CI {:+.1f}% .. {:+.1f}%, p {:.2g}, from the two studies' machine "
                          "levels (+-{:.1f}% and +-{:.1f}% at 95%: how far each study's mean pace may lie from the "
                          "machine's) and the cells' spread",
                          100 * (e.shift_ci95.low - 1), 100 * (e.shift_ci95.high - 1), e.shift_p_value,
                          kZ95 * 100 * e.level_before, kZ95 * 100 * e.level_after)
            : fmt::format("the shift itself: 95% CI {:+.1f}% .. {:+.1f}%, p {:.2g}, from the cells' spread alone "
                          "(the files carry no machine level: written before it, or too few cells to read it)",
                          100 * (e.shift_ci95.low - 1), 100 * (e.shift_ci95.high - 1), e.shift_p_value));
  }
  for (const GroupChange& g : c.groups) {
    if (!g.test) continue;
    out += line(fmt::format(
        "{} {}, its {} cells against the other {}s' {} (median change relative to theirs): "
        "{:+.1f}% (95% CI {:+.1f}% .. {:+.1f}%, p {:.2g}): {}",
        g.dimension, g.name, g.cells, g.dimension, g.other_cells, (g.ratio - 1) * 100, (g.ratio_ci95.low - 1) * 100,
        (g.ratio_ci95.high - 1) * 100, g.test->p_value, change_name(g.change)));
  }
  for (const CellKey& k : c.only_before) out += line("only before: " + cell_name(k));
  for (const CellKey& k : c.only_after) out += line("only after: " + cell_name(k));
  for (const std::string& w : c.warnings) out += line("warning: " + w);
  return out;
}

// the table and Markdown views say when text from outside was not UTF-8 (safe_text.hpp)
std::string render_results_comparison(const ResultsComparison& c, Format format) {
  return report::noting_invalid_utf8(format, [&] { return results_comparison_view(c, format); });
}

}  // namespace neuralcost
