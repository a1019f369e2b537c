// A decoder's LLM page (include/neuralcost/report/decoder_page.hpp).
#include "neuralcost/report/decoder_page.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "neuralcost/version.hpp"
#include "report/chart_parts.hpp"
#include "report/html_page.hpp"
#include "report/safe_text.hpp"
#include "report/si_format.hpp"

namespace neuralcost {
namespace {

using nlohmann::json;

const char* phase_name(DecoderPhase p) { return p == DecoderPhase::kPrefill ? "prefill" : "decode"; }

/// A step's point: the rate its bound allows against its fused intensity (FLOPs per byte moved
/// after fusion), so that it lies under the roofs its bound was taken from.
double fused_intensity(const ModelTotals& t) {
  const double bytes = static_cast<double>(t.fused_bytes_read + t.fused_bytes_written);
  return bytes > 0 ? static_cast<double>(t.flops) / bytes : 0;
}
double attained(const DecoderOverviewStep& s) {
  return s.seconds() > 0 ? static_cast<double>(s.totals.flops) / s.seconds() : 0;
}

json step_tooltip(const DecoderOverview& o, const DecoderOverviewStep& s) {
  const bool prefill = s.phase == DecoderPhase::kPrefill;
  return {
      {"phase", prefill ? fmt::format("prefill of {} tokens", o.request.prompt)
                        : fmt::format("decode at context {}", o.request.context)},
      {"batch", s.batch},
      {prefill ? "time to first token (bound)" : "time per output token (bound)", report::seconds(s.seconds())},
      {"tokens/s", report::si(s.tokens_per_second, "")},
      {"FLOPs", report::si(static_cast<double>(s.totals.flops), "")},
      {"bytes (fused)", report::si(static_cast<double>(s.totals.fused_bytes_read + s.totals.fused_bytes_written), "B")},
      {"limit", std::string(bound_name(s.totals.bound))}};
}

json axis(const std::string& orient, const std::string& scale, const std::string& title, const std::string& format) {
  return {{"orient", orient}, {"scale", scale}, {"title", title}, {"format", format}, {"grid", true}};
}

json log_scale(const std::string& name, double lo, double hi, const std::string& range, int base = 10) {
  return {{"name", name}, {"type", "log"}, {"base", base}, {"domain", {lo, hi}}, {"range", range}, {"nice", false}};
}

json phase_colors(bool prefill = true) {
  if (!prefill) return {{"name", "color"}, {"type", "ordinal"}, {"domain", {"decode"}}, {"range", {"#d62728"}}};
  return {{"name", "color"}, {"type", "ordinal"}, {"domain", {"prefill", "decode"}}, {"range", {"#1f77b4", "#d62728"}}};
}

/// Lines through `points` grouped by `series`, and a symbol per point (the counted mark).
json lines_and_points(const std::string& data, const std::string& series, const std::string& x, const std::string& y,
                      const std::string& color_field, const std::string& mark) {
  return json::array({{{"type", "group"},
                       {"from", {{"facet", {{"name", "series_" + mark}, {"data", data}, {"groupby", series}}}}},
                       {"marks", json::array({{{"type", "line"},
                                               {"from", {{"data", "series_" + mark}}},
                                               {"sort", {{"field", "datum." + x}}},
                                               {"encode",
                                                {{"update",
                                                  {{"x", {{"scale", "x"}, {"field", x}}},
                                                   {"y", {{"scale", "y"}, {"field", y}}},
                                                   {"stroke", {{"scale", "color"}, {"field", color_field}}},
                                                   {"strokeWidth", {{"value", 1.5}}}}}}}}})}},
                      {{"type", "symbol"},
                       {"name", mark},
                       {"from", {{"data", data}}},
                       {"encode",
                        {{"update",
                          {{"x", {{"scale", "x"}, {"field", x}}},
                           {"y", {{"scale", "y"}, {"field", y}}},
                           {"size", {{"value", 36}}},
                           {"fill", {{"scale", "color"}, {"field", color_field}}},
                           {"tooltip", {{"field", "tooltip"}}}}}}}}});
}

std::pair<double, double> span(const std::vector<double>& v) {
  double lo = 0, hi = 0;
  for (const double x : v) {
    if (x <= 0) continue;
    lo = lo == 0 ? x : std::min(lo, x);
    hi = std::max(hi, x);
  }
  if (lo == 0) return {1, 10};
  return {std::pow(10, std::floor(std::log10(lo))), std::pow(10, std::ceil(std::log10(hi) + 1e-9))};
}

/// Prefill and decode points under the roofs: the dtype's peak and the DRAM bandwidth.
report::Chart roofline(const DecoderOverview& o) {
  report::Chart c{"chart-llm-roofline", "llm_roofline_points", 0, report::chart_parts::base_spec(720, 380)};
  const HardwareSpec& hw = o.request.hardware;
  const double peak = hw.flops_per_second(o.request.dtype, true), bw = hw.memory_bandwidth_bytes_per_second;
  json points = json::array();
  std::vector<double> xs, ys{peak};
  for (const auto* steps : {&o.prefill, &o.decode}) {
    for (const DecoderOverviewStep& s : *steps) {
      const double x = fused_intensity(s.totals), y = attained(s);
      if (x <= 0 || y <= 0) continue;
      xs.push_back(x);
      ys.push_back(y);
      const bool labelled = s.phase == DecoderPhase::kDecode || &s == &steps->front() || &s == &steps->back();
      points.push_back({{"phase", phase_name(s.phase)},
                        {"batch", s.batch},
                        {"x", x},
                        {"y", y},
                        {"label", labelled ? fmt::format("b{}", s.batch) : std::string()},
                        {"tooltip", step_tooltip(o, s)}});
      ++c.expected;
    }
  }
  xs.push_back(peak / bw);
  auto [x0, x1] = span(xs);
  auto [y0, y1] = span(ys);
  y0 = std::max(y0, peak * 1e-6);
  json roof = json::array();
  for (double x = x0; x <= x1 * 1.0001; x *= std::pow(x1 / x0, 1.0 / 64)) {
    roof.push_back({{"x", x}, {"y", std::min(peak, x * bw)}});
  }
  json& spec = c.spec;
  spec["data"] = {{{"name", "points"}, {"values", points}}, {{"name", "roof"}, {"values", roof}}};
  spec["scales"] = {log_scale("x", x0, x1, "width"), log_scale("y", y0, y1, "height"), phase_colors()};
  spec["axes"] = {axis("bottom", "x", "FLOPs per byte moved (after fusion)", "~g"),
                  axis("left", "y", "FLOP/s at the bound", "~s")};
  spec["legends"] = json::array({{{"fill", "color"}, {"title", "phase"}}});
  spec["marks"] = lines_and_points("points", "phase", "x", "y", "phase", c.mark);
  spec["marks"].push_back({{"type", "line"},
                           {"from", {{"data", "roof"}}},
                           {"encode",
                            {{"update",
                              {{"x", {{"scale", "x"}, {"field", "x"}}},
                               {"y", {{"scale", "y"}, {"field", "y"}}},
                               {"stroke", {{"value", "#444"}}},
                               {"strokeWidth", {{"value", 2}}}}}}}});
  spec["marks"].push_back({{"type", "text"},
                           {"from", {{"data", "points"}}},
                           {"encode",
                            {{"update",
                              {{"x", {{"scale", "x"}, {"field", "x"}}},
                               {"y", {{"scale", "y"}, {"field", "y"}}},
                               {"dx", {{"value", 5}}},
                               {"dy", {{"value", -5}}},
                               {"text", {{"field", "label"}}},
                               {"fontSize", {{"value", 10}}},
                               {"fill", {{"value", "#555"}}}}}}}});
  return c;
}

/// Decode's time per output token (left) against the batch, and both phases' tokens/s (right).
report::Chart per_batch(const DecoderOverview& o, bool throughput) {
  report::Chart c{throughput ? "chart-llm-throughput" : "chart-llm-latency",
                  throughput ? "llm_throughput_points" : "llm_latency_points", 0,
                  report::chart_parts::base_spec(560, 300)};
  json points = json::array();
  std::vector<double> ys;
  std::vector<const std::vector<DecoderOverviewStep>*> phases{&o.decode};
  if (throughput) phases.insert(phases.begin(), &o.prefill);
  for (const auto* steps : phases) {
    for (const DecoderOverviewStep& s : *steps) {
      const double y = throughput ? s.tokens_per_second : s.seconds() * 1e3;
      if (y <= 0) continue;
      ys.push_back(y);
      points.push_back({{"phase", phase_name(s.phase)}, {"batch", s.batch}, {"y", y}, {"tooltip", step_tooltip(o, s)}});
      ++c.expected;
    }
  }
  const std::vector<std::int64_t>& b = o.request.batches;
  const double bx0 = static_cast<double>(*std::min_element(b.begin(), b.end()));
  const double bx1 = std::max(bx0 * 2, static_cast<double>(*std::max_element(b.begin(), b.end())));
  auto [y0, y1] = span(ys);
  json& spec = c.spec;
  spec["data"] = {{{"name", "points"}, {"values", points}}};
  spec["scales"] = {log_scale("x", bx0, bx1, "width", 2), log_scale("y", y0, y1, "height"), phase_colors(throughput)};
  spec["axes"] = {axis("bottom", "x", "batch (sequences)", "~g"),
                  axis("left", "y", throughput ? "tokens/s at the bound" : "ms per output token (bound)",
                       throughput ? "~s" : "~g")};
  spec["legends"] = json::array({{{"fill", "color"}, {"title", "phase"}}});
  spec["marks"] = lines_and_points("points", "phase", "batch", "y", "phase", c.mark);
  if (o.compute_bound_batch && static_cast<double>(*o.compute_bound_batch) <= bx1 &&
      static_cast<double>(*o.compute_bound_batch) >= bx0) {
    spec["data"].push_back({{"name", "turn"}, {"values", json::array({{{"x", *o.compute_bound_batch}}})}});
    spec["marks"].push_back({{"type", "rule"},
                             {"from", {{"data", "turn"}}},
                             {"encode",
                              {{"update",
                                {{"x", {{"scale", "x"}, {"field", "x"}}},
                                 {"y", {{"value", 0}}},
                                 {"y2", {{"signal", "height"}}},
                                 {"stroke", {{"value", "#2ca02c"}}},
                                 {"strokeDash", {{"value", {5, 4}}}}}}}}});
  }
  return c;
}

/// Weights + KV cache against the context, a line per batch, the device's memory as a rule.
report::Chart memory(const DecoderOverview& o) {
  report::Chart c{"chart-llm-memory", "llm_memory_points", 0, report::chart_parts::base_spec(720, 340)};
  json points = json::array();
  std::vector<double> ys;
  for (const DecoderMemoryPoint& p : o.memory) {
    const double gib = static_cast<double>(p.total()) / (1024.0 * 1024 * 1024);
    ys.push_back(gib);
    points.push_back({{"batch", fmt::format("batch {}", p.batch)},
                      {"context", p.context},
                      {"y", gib},
                      {"tooltip",
                       {{"batch", p.batch},
                        {"context", p.context},
                        {"weights", report::si(static_cast<double>(p.weight_bytes), "B")},
                        {"KV cache", report::si(static_cast<double>(p.kv_bytes), "B")},
                        {"total", report::si(static_cast<double>(p.total()), "B")}}}});
    ++c.expected;
  }
  if (o.capacity_bytes) ys.push_back(*o.capacity_bytes / (1024.0 * 1024 * 1024));
  auto [y0, y1] = span(ys);
  json& spec = c.spec;
  spec["data"] = {{{"name", "points"}, {"values", points}}};
  spec["scales"] = {log_scale("x", 128, static_cast<double>(std::max<std::int64_t>(o.max_positions, 256)), "width", 2),
                    log_scale("y", y0, y1, "height"),
                    {{"name", "color"},
                     {"type", "ordinal"},
                     {"domain", {{"data", "points"}, {"field", "batch"}}},
                     {"range", {{"scheme", "tableau10"}}}}};
  spec["axes"] = {axis("bottom", "x", "context (tokens per sequence)", "d"),
                  axis("left", "y", "GiB: weights + KV cache", "~g")};
  spec["legends"] = json::array({{{"fill", "color"}, {"title", "batch"}}});
  spec["marks"] = lines_and_points("points", "batch", "context", "y", "batch", c.mark);
  if (o.capacity_bytes) {
    spec["data"].push_back(
        {{"name", "capacity"}, {"values", json::array({{{"y", *o.capacity_bytes / (1024.0 * 1024 * 1024)}}})}});
    spec["marks"].push_back({{"type", "rule"},
                             {"from", {{"data", "capacity"}}},
                             {"encode",
                              {{"update",
                                {{"x", {{"value", 0}}},
                                 {"x2", {{"signal", "width"}}},
                                 {"y", {{"scale", "y"}, {"field", "y"}}},
                                 {"stroke", {{"value", "#444"}}},
                                 {"strokeDash", {{"value", {5, 4}}}}}}}}});
  }
  return c;
}

const auto& td = report::table_cell;

std::string batch_table(const DecoderOverview& o) {
  std::string out = fmt::format(
      "<div class=\"table\"><table>\n<tr><th>batch</th><th>prefill of {} tokens: time to first token</th>"
      "<th>prefill tokens/s</th><th>prefill limit</th><th>decode at context {}: time per output token</th>"
      "<th>decode tokens/s</th><th>decode limit</th><th>decode FLOPs per byte (fused)</th></tr>\n",
      o.request.prompt, o.request.context);
  for (std::size_t i = 0; i < o.decode.size(); ++i) {
    const DecoderOverviewStep &p = o.prefill[i], &d = o.decode[i];
    out += "<tr>" + td(std::to_string(d.batch), true) + td(report::seconds(p.seconds()), true) +
           td(report::si(p.tokens_per_second, ""), true) + td(std::string(bound_name(p.totals.bound)), false) +
           td(report::seconds(d.seconds()), true) + td(report::si(d.tokens_per_second, ""), true) +
           td(std::string(bound_name(d.totals.bound)), false) +
           td(fmt::format("{:.3g}", fused_intensity(d.totals)), true) + "</tr>\n";
  }
  return out + "</table></div>\n";
}

/// "80 GB (74.5 GiB)": the datasheet's unit and the chart's
std::string gib(double bytes) {
  return fmt::format("{} ({:.3g} GiB)", report::si(bytes, "B"), bytes / (1024.0 * 1024 * 1024));
}

}  // namespace

std::string render_decoder_page(const DecoderOverview& o, const std::string& vega_script) {
  const DecoderOverviewRequest& r = o.request;
  const HardwareSpec& hw = r.hardware;
  std::vector<report::Chart> charts{roofline(o), per_batch(o, false), per_batch(o, true), memory(o)};
  std::string body = fmt::format("<h1>neural-cost: {} on {}</h1>\n<p class=\"meta\">{} &middot; neural-cost {}</p>\n",
                                 report::html_text(r.model), report::html_text(hw.name), report::html_text(hw.id),
                                 report::html_text(std::string(kVersion)));
  const bool moe = o.active_parameters != o.parameters;
  body +=
      "<p>" +
      report::html_text(fmt::format(
          "{} parameters{}; {} in {}: weights {} as stored, KV cache {} per token{} ({} positions{}){}. {}: {} "
          "FLOP/s dense in {}, memory {}/s{}.",
          report::grouped(o.parameters),
          moe ? fmt::format(" ({} active per token)", report::grouped(o.active_parameters)) : "",
          r.variant.weights.empty() && r.variant.activations.empty() ? "weights and activations" : "activations",
          dtype_name(r.dtype), report::si(static_cast<double>(o.weight_bytes), "B"),
          report::si(static_cast<double>(o.kv_bytes_per_token), "B"),
          r.variant.kv_cache.empty() ? "" : " in " + r.variant.kv_cache,
          report::grouped(static_cast<std::uint64_t>(o.max_positions)),
          o.sliding_window > 0 ? fmt::format(", sliding window {}", o.sliding_window) : "",
          (r.variant.activations.empty() ? std::string()
                                         : fmt::format("; W8A8: the linears multiply {} activations by {} weights",
                                                       r.variant.activations, r.variant.activations)) +
              (r.variant.mla.empty() ? std::string() : fmt::format("; latent attention decoded {}", r.variant.mla)) +
              (r.variant.routing.empty()
                   ? std::string()
                   : fmt::format("; the experts reached under the routing of {}", r.variant.routing)),
          hw.name, report::si(hw.flops_per_second(r.dtype, true), ""), dtype_name(r.dtype),
          report::si(hw.memory_bandwidth_bytes_per_second, "B"),
          hw.memory_capacity_bytes ? ", " + gib(*hw.memory_capacity_bytes) + " of it" : "")) +
      "</p>\n";
  body += "<p><b>" +
          report::html_text(
              o.compute_bound_batch
                  ? fmt::format("Decode at context {} turns compute-bound at batch {}: below it, each step reads the "
                                "weights and the cache for too few tokens to keep the arithmetic busy.",
                                r.context, *o.compute_bound_batch)
                  : fmt::format("Decode at context {} stays memory-bound up to batch {}: the KV cache's reads grow "
                                "with the batch as fast as its FLOPs.",
                                r.context,
                                report::grouped(static_cast<std::uint64_t>(DecoderOverview::kMaxSearchedBatch)))) +
          "</b></p>\n";
  body += "<h2>Per batch</h2>\n" + batch_table(o);
  body += report::chart_section(
      "Prefill and decode on the roofline", charts[0],
      fmt::format("Each step at each batch (b1, b2, ...) at the rate its lower bound allows, against its FLOPs per "
                  "byte moved after fusion. The line is the roofline of {} in {}: its DRAM bandwidth and its peak. "
                  "Decode sits on the bandwidth slope until the batch makes it compute-bound; a step whose state fits "
                  "a cache level can sit above the DRAM slope.",
                  hw.name, dtype_name(r.dtype)));
  body += report::chart_section(
      "Time per output token against batch", charts[1],
      fmt::format(
          "Decode's lower bound per step at context {}: every sequence of the batch gets a token per step. "
          "{}",
          r.context,
          !o.compute_bound_batch ? std::string("It does not turn compute-bound at these batches.")
          : !o.decode.empty() && *o.compute_bound_batch > o.decode.back().batch
              ? fmt::format("It turns compute-bound at batch {}, beyond the batches charted.", *o.compute_bound_batch)
              : fmt::format("The green line marks batch {}, where it turns compute-bound.", *o.compute_bound_batch)));
  body +=
      report::chart_section("Tokens per second against batch", charts[2],
                            "Prefill's tokens/s (batch × prompt over its bound) and decode's (batch over its bound).");
  body += report::chart_section(
      "Memory against context", charts[3],
      fmt::format("Weights ({}) and the KV cache of each batch's sequences, {} per token{}; activations and the "
                  "framework's own memory are not counted. {}",
                  report::si(static_cast<double>(o.weight_bytes), "B"),
                  report::si(static_cast<double>(o.kv_bytes_per_token), "B"),
                  o.sliding_window > 0
                      ? fmt::format(" (a layer with the sliding window holds at most {} tokens of each sequence)",
                                    o.sliding_window)
                      : "",
                  hw.memory_capacity_bytes
                      ? "The dashed line is the device's memory, " + gib(*hw.memory_capacity_bytes) + "."
                      : std::string("The device's spec gives no memory capacity.")));
  body +=
      "<p class=\"note\">approximation: every time is a lower bound (the fused roofline bound `analyze` prints), not a "
      "measurement; `profile CONFIG.json --phase prefill|decode` measures a config's phases.</p>\n";
  return report::html_page("neural-cost LLM page: " + r.model, body, charts,
                           json{{"model", r.model}, {"kind", "decoder_overview"}}, vega_script);
}

}  // namespace neuralcost
