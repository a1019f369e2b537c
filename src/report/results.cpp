// Reading results files back (see results.hpp): a profile document or JSON Lines, each run
// checked field by field; what cannot be read becomes a warning that names its line.
#include "neuralcost/report/results.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "neuralcost/core/error.hpp"
#include "neuralcost/report/views.hpp"

namespace neuralcost {
namespace {

using nlohmann::json;

/// A field that is missing or of the wrong type: the run (or line) it belongs to is skipped.
struct BadField {
  std::string message;
};

/// Checked access to the fields of one run object; `prefix` is the path so far ("timing.").
class Fields {
 public:
  Fields(const json& object, std::string prefix) : j_(object), prefix_(std::move(prefix)) {}

  const json& at(const char* key) const {
    const auto it = j_.find(key);
    if (it == j_.end()) throw BadField{fmt::format("field '{}{}' is missing", prefix_, key)};
    return *it;
  }
  bool has(const char* key) const { return j_.contains(key); }
  [[noreturn]] void fail(const char* key, const std::string& problem) const {
    throw BadField{fmt::format("field '{}{}' {}", prefix_, key, problem)};
  }
  std::string text(const char* key, bool non_empty = true) const {
    const json& v = at(key);
    if (!v.is_string() || (non_empty && v.get_ref<const std::string&>().empty())) {
      fail(key, non_empty ? "must be a non-empty string" : "must be a string");
    }
    return v.get<std::string>();
  }
  double number(const char* key) const {
    const json& v = at(key);
    if (!v.is_number() || !std::isfinite(v.get<double>())) fail(key, "must be a finite number");
    return v.get<double>();
  }
  double nonneg(const char* key) const {
    const double x = number(key);
    if (x < 0) fail(key, "must not be negative");
    return x;
  }
  /// A measured time: from 10^-12 s (no clock resolves less; 0 is no time at all, and ratios of
  /// smaller figures overflow) to 10^6 s (11.6 days: a larger figure is not a pass's time).
  double seconds(const char* key) const {
    const double x = number(key);
    if (!(x >= 1e-12) || x > 1e6) {
      fail(key, fmt::format("is {:g} s: a measured time is from 10^-12 s to 10^6 s", x));
    }
    return x;
  }
  std::int64_t integer(const char* key, std::int64_t min) const {
    const json& v = at(key);
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<std::uint64_t>() > INT64_MAX) ||
        v.get<std::int64_t>() < min) {
      throw BadField{fmt::format("field '{}{}' must be an integer >= {}", prefix_, key, min)};
    }
    return v.get<std::int64_t>();
  }
  /// An exact count (may exceed 2^53): an unsigned integer, or a whole non-negative double.
  std::uint64_t count(const char* key) const {
    const json& v = at(key);
    if (v.is_number_unsigned()) return v.get<std::uint64_t>();
    if (v.is_number_integer() && v.get<std::int64_t>() >= 0) return static_cast<std::uint64_t>(v.get<std::int64_t>());
    if (v.is_number_float()) {
      const double d = v.get<double>();
      if (d >= 0 && d < 1.8e19 && std::floor(d) == d) return static_cast<std::uint64_t>(d);
    }
    fail(key, "must be a non-negative integer");
  }
  bool flag(const char* key) const {
    const json& v = at(key);
    if (!v.is_boolean()) fail(key, "must be true or false");
    return v.get<bool>();
  }
  std::vector<std::string> texts(const char* key) const {
    const json& v = at(key);
    if (!v.is_array()) fail(key, "must be a list of strings");
    std::vector<std::string> out;
    for (const json& e : v) {
      if (!e.is_string()) fail(key, "must be a list of strings");
      out.push_back(e.get<std::string>());
    }
    return out;
  }
  Fields object(const char* key) const {
    const json& v = at(key);
    if (!v.is_object()) fail(key, "must be an object");
    return Fields(v, prefix_ + key + ".");
  }

 private:
  const json& j_;
  std::string prefix_;
};

void read_layers(const json& run_json, ResultRun& run) {
  // kind and lower bound of each op record, to name a layer's kind (its largest record's)
  std::map<std::string, std::pair<std::string, double>> ops;
  const Fields f(run_json, "");
  const json& op_list = f.at("ops");
  if (!op_list.is_array()) f.fail("ops", "must be a list");
  for (const json& op : op_list) {
    if (!op.is_object()) f.fail("ops", "must be a list of objects");
    const Fields o(op, "ops[].");
    ops[o.text("name")] = {o.text("kind"), o.nonneg("lower_bound_seconds")};
  }
  const json& layers = f.at("layers");
  if (!layers.is_array()) f.fail("layers", "must be a list");
  for (const json& lj : layers) {
    if (!lj.is_object()) f.fail("layers", "must be a list of objects");
    const Fields l(lj, "layers[].");
    ResultLayer layer;
    layer.event = l.integer("event", 0);
    layer.name = l.text("name");
    if (l.has("module")) layer.module = l.text("module", false);
    if (l.has("pass")) layer.pass = l.text("pass", false);
    layer.flops = l.count("flops");
    layer.bytes = l.count("bytes");
    layer.lower_bound_seconds = l.nonneg("lower_bound_seconds");
    layer.measured_seconds = l.nonneg("measured_seconds");
    layer.efficiency = l.nonneg("efficiency");
    // waste_seconds and modeled came later than the other fields: derive nothing, default
    layer.waste_seconds = l.has("waste_seconds") ? l.nonneg("waste_seconds")
                                                 : std::max(0.0, layer.measured_seconds - layer.lower_bound_seconds);
    layer.modeled = l.has("modeled") ? l.flag("modeled") : true;
    const json& bound = l.at("bound");
    if (bound.is_string())
      layer.bound = bound.get<std::string>();
    else if (!bound.is_null())
      l.fail("bound", "must be a string or null");
    double largest = -1;
    for (const std::string& name : l.texts("ops")) {
      const auto it = ops.find(name);
      if (it != ops.end() && it->second.second > largest) {
        largest = it->second.second;
        layer.kind = it->second.first;
      }
    }
    run.layers.push_back(std::move(layer));
  }
}

/// One run object (a `runs[]` element or a results line); throws BadField.
ResultRun read_run(const json& j, const std::string& source) {
  const Fields f(j, "");
  ResultRun run;
  run.source = source;
  run.model = f.text("model");
  run.backend = f.text("backend");
  run.mode = f.text("mode");
  run.batch = f.integer("batch", 1);
  run.device = f.text("device");
  const bool failed = f.flag("failed");
  const Fields outcome = f.object("outcome");
  run.verdict = outcome.text("verdict");
  if (run.verdict != "ok" && run.verdict != "mistrusted" && run.verdict != "failed") {
    outcome.fail("verdict", "must be ok, mistrusted or failed");
  }
  if (failed != (run.verdict == "failed")) f.fail("failed", "disagrees with outcome.verdict");
  run.reasons = outcome.texts("reasons");
  if (failed) {
    run.error = f.text("error");
    return run;
  }
  const Fields timing = f.object("timing");
  run.median_seconds = timing.seconds("median_seconds");
  run.ci95_low_seconds = timing.nonneg("ci95_low_seconds");
  run.ci95_high_seconds = timing.nonneg("ci95_high_seconds");
  if (run.ci95_high_seconds > 1e6) timing.fail("ci95_high_seconds", "is above 10^6 s: not a measured time");
  if (run.ci95_low_seconds > run.ci95_high_seconds) {
    timing.fail("ci95_low_seconds",
                fmt::format("{:g} s is above ci95_high_seconds ({:g} s)", run.ci95_low_seconds, run.ci95_high_seconds));
  }
  run.cv = timing.nonneg("cv");
  run.samples = timing.integer("samples", 1);
  if (timing.has("samples_seconds")) {
    const json& s = timing.at("samples_seconds");
    if (!s.is_array()) timing.fail("samples_seconds", "must be a list of numbers");
    for (const json& x : s) {
      if (!x.is_number() || !std::isfinite(x.get<double>()) || x.get<double>() < 0 || x.get<double>() > 1e6) {
        timing.fail("samples_seconds", "must be a list of non-negative numbers of at most 10^6 s");
      }
      run.samples_seconds.push_back(x.get<double>());
    }
  }
  if (timing.has("rounds")) {
    const json& rounds = timing.at("rounds");
    if (!rounds.is_array()) timing.fail("rounds", "must be a list of rounds");
    for (const json& x : rounds) {
      const Fields r(x, "timing.rounds[].");
      ResultRound round;
      round.process = static_cast<int>(r.integer("process", 0));
      round.sweep = static_cast<int>(r.integer("sweep", 0));
      round.pass = static_cast<int>(r.integer("pass", 0));
      round.median_seconds = r.seconds("median_seconds");
      round.machine_seconds = r.has("machine_canary_seconds") ? r.nonneg("machine_canary_seconds") : 0.0;
      round.cpu_canary_seconds = r.has("cpu_canary_seconds") ? r.nonneg("cpu_canary_seconds") : 0.0;
      run.rounds.push_back(round);
    }
    if (timing.has("estimate")) {
      const Fields e = timing.object("estimate");
      run.interval_coverage = e.nonneg("coverage");
      if (e.has("level_spread")) run.level_spread = e.nonneg("level_spread");
    }
  }
  const Fields totals = f.object("totals");
  run.flops = totals.count("flops");
  run.bytes = totals.count("bytes_read") + totals.count("bytes_written");
  run.arithmetic_intensity = totals.nonneg("arithmetic_intensity");
  run.lower_bound_seconds = totals.nonneg("lower_bound_seconds");
  run.efficiency = f.nonneg("efficiency");
  run.fused_efficiency = f.nonneg("fused_efficiency");
  run.samples_per_second = f.nonneg("samples_per_second");
  run.achieved_flops_per_second = f.nonneg("achieved_flops_per_second");
  run.bound = f.text("bound");
  run.unattributed_seconds = f.has("unattributed_seconds") ? f.number("unattributed_seconds") : 0.0;
  read_layers(j, run);
  const json& contract = f.at("contract");
  if (!contract.is_object()) f.fail("contract", "must be an object of strings");
  for (const auto& [k, v] : contract.items()) {
    if (!v.is_string()) f.fail("contract", "must be an object of strings");
    run.contract[k] = v.get<std::string>();
  }
  run.warnings = f.texts("warnings");
  return run;
}

/// Checks a line's or document's schema_version (absent counts as 1).
void check_version(const json& j) {
  if (!j.contains("schema_version")) return;
  const json& v = j["schema_version"];
  if (!v.is_number_integer() || v.get<std::int64_t>() != 1) {
    throw BadField{fmt::format("schema_version {} (this neural-cost reads 1)", v.dump())};
  }
}

class Reader {
 public:
  explicit Reader(const std::string& origin) { results_.path = origin; }

  /// Adds a spec (once per id); returns its id. A spec that does not parse is a warning.
  std::string add_hardware(const json& hw, const std::string& where) {
    if (!hw.is_object()) throw BadField{"field 'hardware' must be an object"};
    HardwareSpec spec;
    try {
      json file = hw;
      file.erase("ridge_point_flops_per_byte");  // an analysis's spec carries it
      spec = parse_hardware_spec(file.dump(), where + ": hardware");
    } catch (const Error& e) {
      warn(std::string(e.what()) + "; its roofs are not drawn");
      return hw.contains("id") && hw["id"].is_string() ? hw["id"].get<std::string>() : std::string();
    }
    if (hw.contains("origin") && hw["origin"].is_string()) spec.origin = hw["origin"].get<std::string>();
    if (!find_hardware(results_, spec.id)) results_.hardware.push_back(spec);
    return spec.id;
  }

  void add_run(const json& j, const std::string& source, const std::string& hardware_id) {
    ResultRun run = read_run(j, source);
    run.hardware_id = hardware_id;
    if (run.hardware_id.empty()) {
      const auto it = run.contract.find("hardware_id");
      if (it != run.contract.end()) run.hardware_id = it->second;
    }
    results_.runs.push_back(std::move(run));
  }

  void warn(std::string message) {
    ++skipped_;
    if (results_.warnings.size() < kMaxWarnings) {
      results_.warnings.push_back(std::move(message));
    }
  }

  ResultsFile finish() {
    if (skipped_ > kMaxWarnings) {
      results_.warnings.push_back(
          fmt::format("{}: {} more problems not listed", results_.path, skipped_ - kMaxWarnings));
    }
    return std::move(results_);
  }

  const std::string& path() const { return results_.path; }

 private:
  static constexpr std::size_t kMaxWarnings = 20;
  ResultsFile results_;
  std::size_t skipped_ = 0;
};

void read_document(const json& doc, Reader& reader) {
  try {
    check_version(doc);
  } catch (const BadField& e) {
    throw Error(ErrorCode::kDataLoss, fmt::format("{}: {}", reader.path(), e.message));
  }
  std::string hardware_id;
  if (doc.contains("hardware")) {
    try {
      hardware_id = reader.add_hardware(doc["hardware"], reader.path());
    } catch (const BadField& e) {
      reader.warn(fmt::format("{}: {}", reader.path(), e.message));
    }
  }
  if (!doc["runs"].is_array()) {
    throw Error(ErrorCode::kDataLoss, fmt::format("{}: field 'runs' must be a list", reader.path()));
  }
  std::size_t i = 0;
  for (const json& run : doc["runs"]) {
    const std::string source = fmt::format("{}: runs[{}]", reader.path(), i++);
    try {
      if (!run.is_object()) throw BadField{"must be an object"};
      reader.add_run(run, source, hardware_id);
    } catch (const BadField& e) {
      reader.warn(fmt::format("{}: {}; run skipped", source, e.message));
    }
  }
}

void read_lines(std::string_view text, Reader& reader) {
  std::string hardware_id;  // of the last header line
  std::size_t number = 0;
  for (std::size_t start = 0; start < text.size();) {
    std::size_t end = text.find('\n', start);
    const bool last_unterminated = end == std::string_view::npos;
    if (last_unterminated) end = text.size();
    const std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const std::string where = fmt::format("{}:{}", reader.path(), number);
    json j;
    try {
      j = json::parse(line);
    } catch (const json::parse_error& e) {
      reader.warn(fmt::format(
          "{}: {} (byte {} of the line); line skipped", where,
          last_unterminated ? "truncated: the last line is not complete JSON (an interrupted write?)" : "not JSON",
          e.byte));
      continue;
    }
    try {
      if (!j.is_object()) throw BadField{"not a results line (a JSON object: a run, or a {\"hardware\": ...} header)"};
      check_version(j);
      if (j.contains("model")) {
        const std::string id = j.contains("hardware") ? reader.add_hardware(j["hardware"], where) : hardware_id;
        reader.add_run(j, where, id);
      } else if (j.contains("round")) {
        // a study's round of a cell still in progress (its run line, when written, holds it)
      } else if (j.contains("hardware")) {
        hardware_id = reader.add_hardware(j["hardware"], where);
      } else {
        throw BadField{"not a results line: neither a run (no 'model') nor a header (no 'hardware')"};
      }
    } catch (const BadField& e) {
      reader.warn(fmt::format("{}: {}; line skipped", where, e.message));
    }
  }
}

}  // namespace

CellKey cell_of(const ResultRun& run) {
  const auto workload = run.contract.find("workload");
  const bool training = workload != run.contract.end() && workload->second == "train";
  return {run.model, run.backend, run.mode, run.device, run.batch, training};
}

std::string cell_name(const CellKey& c) {
  return fmt::format("{}, {} {}, batch {}{}{}", c.model, c.backend, c.mode, c.batch,
                     c.device == "cpu" ? "" : " on " + c.device, c.training ? ", training step" : "");
}

const HardwareSpec* find_hardware(const ResultsFile& results, const std::string& id) {
  for (const HardwareSpec& h : results.hardware) {
    if (h.id == id) return &h;
  }
  return nullptr;
}

ResultsFile parse_results(std::string_view text, const std::string& origin) {
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) {
    throw Error(ErrorCode::kDataLoss, fmt::format("{}: empty: no runs to report", origin));
  }
  Reader reader(origin);
  // one JSON value for the whole text: a profile document (or a single results line)
  json whole = json::parse(text, nullptr, false);
  if (!whole.is_discarded() && whole.is_object() && whole.contains("runs")) {
    read_document(whole, reader);
    return reader.finish();
  }
  // a whole document of another kind (an analysis, a spec): one line says what it is, not a
  // warning per fragment of its pretty-printed lines
  // (one value over several lines cannot be JSON Lines of two or more runs)
  if (!whole.is_discarded() && whole.is_object() && text.find('\n', first) != std::string_view::npos &&
      text.find_first_not_of(" \t\r\n", text.find('\n', first)) != std::string_view::npos) {
    throw Error(ErrorCode::kDataLoss,
                fmt::format("{}: a JSON document without runs (an analysis or a spec?), not results: give the output "
                            "of profile or study",
                            origin));
  }
  const std::size_t line_end = text.find('\n', first);
  const std::string_view first_line =
      text.substr(first, line_end == std::string_view::npos ? text.npos : line_end - first);
  if (whole.is_discarded() && first_line.find_first_not_of("{ \t\r") == std::string_view::npos) {
    // a pretty-printed document (its first line is a lone '{') that does not parse: line by
    // line would only list its fragments
    try {
      const json again = json::parse(text);  // throws: it did not parse above
      (void)again;
    } catch (const json::parse_error& e) {
      const std::string_view before = text.substr(0, std::min<std::size_t>(e.byte, text.size()));
      const auto line = 1 + std::count(before.begin(), before.end(), '\n');
      throw Error(ErrorCode::kDataLoss, fmt::format("{}:{}: not a complete profile document (truncated?): {}", origin,
                                                    line, e.byte >= text.size() ? "it ends early" : "malformed JSON"));
    }
  }
  read_lines(text, reader);
  return reader.finish();
}

ResultsFile read_results(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("'{}' is a directory, not a results file", path));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::kNotFound, fmt::format("cannot open results file '{}'", path));
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) throw Error(ErrorCode::kDataLoss, fmt::format("{}: read error", path));
  return parse_results(text.str(), path);
}

void require_runs(const ResultsFile& results) {
  if (!results.runs.empty()) return;
  throw Error(ErrorCode::kDataLoss,
              results.warnings.empty()
                  ? fmt::format("{}: no runs to report", results.path)
                  : fmt::format("{}: no runs to report (every run line was skipped: see the warnings)", results.path));
}

}  // namespace neuralcost
