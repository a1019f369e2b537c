// Training to a quality target (include/neuralcost/measure/to_target.hpp).
#include "neuralcost/measure/to_target.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "backends/python_worker/worker_backend.hpp"
#include "backends/python_worker/worker_process.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/core/interrupt.hpp"
#include "neuralcost/hardware/host.hpp"
#include "neuralcost/measure/environment.hpp"

namespace neuralcost {
namespace {

using json = nlohmann::json;

constexpr int kResamples = 4000;

[[noreturn]] void bad(const std::string& message) { throw Error(ErrorCode::kInvalidArgument, message); }

double mean_of(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0.0 : s / static_cast<double>(v.size());
}

double quantile_of(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double at = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(at));
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (at - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

std::vector<double> resample_means(const std::vector<double>& v, std::mt19937_64& rng) {
  std::uniform_int_distribution<std::size_t> pick(0, v.size() - 1);
  std::vector<double> means(kResamples);
  for (double& m : means) {
    double s = 0;
    for (std::size_t i = 0; i < v.size(); ++i) s += v[pick(rng)];
    m = s / static_cast<double>(v.size());
  }
  return means;
}

MeanInterval mean_interval(const std::vector<double>& v, std::uint64_t salt) {
  MeanInterval out;
  out.mean = mean_of(v);
  if (v.size() < 2) return out;
  std::mt19937_64 rng(0x5eed0000ULL + salt);
  const std::vector<double> means = resample_means(v, rng);
  out.ci95 = Interval{quantile_of(means, 0.025), quantile_of(means, 0.975)};
  return out;
}

std::optional<MeanInterval> ratio_interval(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() < 2 || b.size() < 2 || !(mean_of(a) > 0)) return std::nullopt;
  std::mt19937_64 rng(0x5eed0001ULL);
  const std::vector<double> ma = resample_means(a, rng), mb = resample_means(b, rng);
  std::vector<double> ratios(kResamples);
  for (int i = 0; i < kResamples; ++i) ratios[i] = ma[i] > 0 ? mb[i] / ma[i] : 0.0;
  MeanInterval out;
  out.mean = mean_of(b) / mean_of(a);
  out.ci95 = Interval{quantile_of(ratios, 0.025), quantile_of(ratios, 0.975)};
  return out;
}

std::vector<double> reached_values(const std::vector<ToTargetRun>& runs, double ToTargetRun::*field) {
  std::vector<double> v;
  for (const ToTargetRun& r : runs) {
    if (r.reached && r.error.empty()) v.push_back(r.*field);
  }
  return v;
}

std::vector<double> reached_counts(const std::vector<ToTargetRun>& runs, std::int64_t ToTargetRun::*field) {
  std::vector<double> v;
  for (const ToTargetRun& r : runs) {
    if (r.reached && r.error.empty()) v.push_back(static_cast<double>(r.*field));
  }
  return v;
}

}  // namespace

std::string ToTargetConfig::label() const { return fmt::format("{} {} batch {} lr {:g}", mode, precision, batch, lr); }

void validate(const ToTargetOptions& o) {
  if (o.model != "ff" && o.model != "cnn") bad(fmt::format("--model {}: train-to-target trains ff or cnn", o.model));
  if (o.dataset != "digits") bad(fmt::format("--dataset {}: the offline datasets are: digits", o.dataset));
  if (!(o.target > 0 && o.target <= 1)) bad(fmt::format("--target {}: an accuracy in (0, 1]", o.target));
  if (o.eval_every < 1) bad(fmt::format("--eval-every {}: at least 1 step", o.eval_every));
  if (o.max_steps < 1 || o.max_steps > 10000000) bad(fmt::format("--max-steps {}: 1 to 10,000,000", o.max_steps));
  if (o.runs < 3 || o.runs > 1000) {
    bad(fmt::format("--runs {}: at least 3 (the olympic mean drops the fastest and the slowest run), at most 1000",
                    o.runs));
  }
  if (!(o.val_fraction > 0 && o.val_fraction < 1)) {
    bad(fmt::format("--val-fraction {}: a fraction strictly between 0 and 1", o.val_fraction));
  }
  if (o.width < 1 || o.width > 65536 || o.depth < 1 || o.depth > 64) {
    bad(fmt::format("--width {} / --depth {}: 1 to 65536 and 1 to 64", o.width, o.depth));
  }
  if (o.model == "cnn" && (8 >> (o.depth - 1)) < 1) {
    bad(fmt::format("--depth {}: a cnn of that depth pools the 8 x 8 digits below one pixel (at most 4)", o.depth));
  }
  if (o.threads < 1 || o.threads > 1024) bad(fmt::format("--threads {}: 1 to 1024", o.threads));
  if (o.optimizer != "sgd" && o.optimizer != "adam") bad(fmt::format("--optimizer {}: sgd or adam", o.optimizer));
  if (o.configs.empty()) bad("no configuration to run");
  for (const ToTargetConfig& c : o.configs) {
    if (c.mode != "eager" && c.mode != "compiled") bad(fmt::format("--mode {}: eager or compiled", c.mode));
    if (c.precision != "fp32" && c.precision != "bf16-mixed") {
      bad(fmt::format("--precision {}: fp32 or bf16-mixed (fp16 with loss scaling needs a GPU)", c.precision));
    }
    if (c.batch < 1 || c.batch > 100000) bad(fmt::format("--batch {}: 1 to 100,000", c.batch));
    if (!(c.lr > 0 && c.lr < 100)) bad(fmt::format("--lr {}: a learning rate in (0, 100)", c.lr));
  }
}

ToTargetSummary summarize_to_target(const ToTargetConfig& config, const std::vector<ToTargetRun>& runs,
                                    std::optional<double> price_per_hour) {
  ToTargetSummary s;
  s.config = config;
  std::vector<TargetRun> scored;
  std::vector<double> finals;
  double steps = 0, train_seconds = 0;
  for (const ToTargetRun& r : runs) {
    ++s.runs;
    if (!r.error.empty()) {
      ++s.failed;
      scored.push_back({0, 0, false});  // a failed run is one that did not reach the target
      continue;
    }
    if (r.reached) ++s.reached;
    scored.push_back({r.seconds, static_cast<double>(r.samples), r.reached});
    finals.push_back(r.final_accuracy);
    steps += static_cast<double>(r.steps);
    train_seconds += r.train_seconds;
  }
  s.score = olympic_score(scored, 1);
  s.seconds = mean_interval(reached_values(runs, &ToTargetRun::seconds), 1);
  s.samples = mean_interval(reached_counts(runs, &ToTargetRun::samples), 2);
  s.steps = mean_interval(reached_counts(runs, &ToTargetRun::steps), 3);
  s.steps_per_second = train_seconds > 0 ? steps / train_seconds : 0.0;
  s.samples_per_second = s.steps_per_second * static_cast<double>(config.batch);
  std::vector<double> peaks;
  for (const ToTargetRun& r : runs) {
    if (r.error.empty() && r.peak_rss_bytes > 0) peaks.push_back(static_cast<double>(r.peak_rss_bytes));
  }
  if (!peaks.empty()) {
    std::sort(peaks.begin(), peaks.end());
    s.median_peak_rss_bytes = quantile_of(peaks, 0.5);
  }
  if (price_per_hour) {
    std::vector<double> cost = reached_values(runs, &ToTargetRun::seconds);
    for (double& c : cost) c *= *price_per_hour / 3600.0;
    s.cost = mean_interval(cost, 1);
  }
  if (!finals.empty()) {
    std::sort(finals.begin(), finals.end());
    s.median_final_accuracy = quantile_of(finals, 0.5);
  }
  return s;
}

ToTargetContrast contrast_to_target(std::size_t a, std::size_t b, const std::vector<ToTargetRun>& runs_a,
                                    const std::vector<ToTargetRun>& runs_b, double throughput_a, double throughput_b) {
  ToTargetContrast c;
  c.a = a;
  c.b = b;
  c.seconds_ratio =
      ratio_interval(reached_values(runs_a, &ToTargetRun::seconds), reached_values(runs_b, &ToTargetRun::seconds));
  c.steps_ratio =
      ratio_interval(reached_counts(runs_a, &ToTargetRun::steps), reached_counts(runs_b, &ToTargetRun::steps));
  c.throughput_ratio = throughput_a > 0 ? throughput_b / throughput_a : 0.0;
  if (!c.seconds_ratio) {
    c.verdict = "not comparable: each needs at least 2 runs that reached the target";
  } else if (c.seconds_ratio->ci95->high < 1) {
    c.verdict = "cheaper to the target";
  } else if (c.seconds_ratio->ci95->low > 1) {
    c.verdict = "dearer to the target";
  } else {
    c.verdict = "no clear difference to the target (the interval holds 1)";
  }
  if (c.seconds_ratio && c.throughput_ratio > 1 && c.seconds_ratio->ci95->low > 1) {
    c.verdict += ", though faster per step";
  } else if (c.seconds_ratio && c.throughput_ratio > 0 && c.throughput_ratio < 1 && c.seconds_ratio->ci95->high < 1) {
    c.verdict += ", though slower per step";
  }
  return c;
}

std::vector<ToTargetRun> run_to_target(const ToTargetOptions& o,
                                       const std::function<void(const ToTargetRun&)>& on_run) {
  validate(o);
  if (auto why = worker::WorkerBackend("to-target", "torch", "", {"eager"}, "eager", {}).unavailable_reason()) {
    throw Error(ErrorCode::kNotFound, "train-to-target needs the torch worker's Python: " + *why);
  }
  std::map<std::string, std::string> env{{"PYTHONPATH", worker::worker_directory()}, {"PYTHONUNBUFFERED", "1"}};
  tune_malloc_for_measurement();
  const std::string threads = std::to_string(o.threads);
  for (const char* v : {"OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"}) env[v] = threads;
  std::vector<ToTargetRun> runs;
  for (int k = 0; k < o.runs; ++k) {
    for (std::size_t c = 0; c < o.configs.size(); ++c) {
      throw_if_interrupted();
      const ToTargetConfig& config = o.configs[c];
      ToTargetRun run;
      run.config = c;
      run.seed = o.seed + static_cast<std::uint64_t>(k);
      const json req{{"cmd", "run"},
                     {"model", o.model},
                     {"dataset", o.dataset},
                     {"target", o.target},
                     {"eval_every", o.eval_every},
                     {"max_steps", o.max_steps},
                     {"seed", run.seed},
                     {"split_seed", o.split_seed},
                     {"val_fraction", o.val_fraction},
                     {"width", o.width},
                     {"depth", o.depth},
                     {"threads", o.threads},
                     {"optimizer", o.optimizer},
                     {"mode", config.mode},
                     {"precision", config.precision},
                     {"batch", config.batch},
                     {"lr", config.lr}};
      try {
        // a fresh process a run: no run inherits another's caches, compiled code or allocator
        worker::WorkerProcess process({worker::python_interpreter(), "-m", "neuralcost_worker", "to-target"}, env,
                                      "the train-to-target worker");
        const json reply = process.request(req, std::chrono::duration<double>(o.step_timeout_seconds));
        process.stop();
        run.reached = reply.at("reached").get<bool>();
        run.diverged = reply.value("diverged", false);
        run.compile_seconds = reply.value("compile_seconds", 0.0);
        run.train_images = reply.value("train_images", 0);
        run.val_images = reply.value("val_images", 0);
        run.parameters = reply.value("parameters", 0);
        run.torch_version = reply.value("torch", std::string());
        run.peak_rss_bytes = reply.value("peak_rss_bytes", std::int64_t{0});
        for (const json& p : reply.at("curve")) {
          run.curve.push_back({p.at("step").get<std::int64_t>(), p.at("samples").get<std::int64_t>(),
                               p.at("seconds").get<double>(), p.at("train_seconds").get<double>(),
                               p.at("accuracy").get<double>(), p.at("loss").get<double>()});
        }
        if (!run.curve.empty()) {
          const CurvePoint& last = run.curve.back();
          run.steps = last.step;
          run.samples = last.samples;
          run.seconds = last.seconds;
          run.train_seconds = last.train_seconds;
          run.final_accuracy = last.accuracy;
        }
      } catch (const Interrupted&) {
        throw;
      } catch (const Error& e) {
        if (interrupted()) throw Interrupted();
        std::string what = e.what();
        const std::string label = "the train-to-target worker: ";
        if (what.rfind(label, 0) == 0) what = what.substr(label.size());
        // the worker refused the request itself, or cannot load what it needs: every run would fail alike
        if (runs.empty() && (e.code() == ErrorCode::kInvalidArgument || e.code() == ErrorCode::kNotFound)) {
          throw Error(e.code(), what);
        }
        run.error = what;
      }
      runs.push_back(run);
      if (on_run) on_run(runs.back());
    }
  }
  return runs;
}

ToTargetStudy score_to_target(const ToTargetOptions& options, std::vector<ToTargetRun> runs,
                              std::optional<double> price_per_hour, std::string currency) {
  ToTargetStudy study;
  study.options = options;
  study.runs = std::move(runs);
  study.price_per_hour = price_per_hour;
  study.currency = std::move(currency);
  study.cpu = describe_host().model;
  std::vector<std::vector<ToTargetRun>> by_config(options.configs.size());
  for (const ToTargetRun& r : study.runs) {
    if (r.config < by_config.size()) by_config[r.config].push_back(r);
  }
  for (std::size_t c = 0; c < options.configs.size(); ++c) {
    study.summaries.push_back(summarize_to_target(options.configs[c], by_config[c], price_per_hour));
  }
  for (std::size_t c = 1; c < options.configs.size(); ++c) {
    study.contrasts.push_back(contrast_to_target(0, c, by_config[0], by_config[c], study.summaries[0].steps_per_second,
                                                 study.summaries[c].steps_per_second));
  }
  return study;
}

namespace {

json interval_json(const MeanInterval& m) {
  json j{{"mean", m.mean}};
  if (m.ci95) j["ci95"] = {m.ci95->low, m.ci95->high};
  return j;
}

}  // namespace

json to_json(const ToTargetStudy& s) {
  const ToTargetOptions& o = s.options;
  json configs = json::array();
  for (const ToTargetConfig& c : o.configs) {
    configs.push_back(
        {{"mode", c.mode}, {"precision", c.precision}, {"batch", c.batch}, {"lr", c.lr}, {"label", c.label()}});
  }
  json summaries = json::array();
  for (const ToTargetSummary& m : s.summaries) {
    json j{{"label", m.config.label()},
           {"runs", m.runs},
           {"reached", m.reached},
           {"failed", m.failed},
           {"olympic", {{"valid", m.score.valid}, {"mean_seconds", m.score.mean_seconds}}},
           {"seconds_to_target", interval_json(m.seconds)},
           {"samples_to_target", interval_json(m.samples)},
           {"steps_to_target", interval_json(m.steps)},
           {"steps_per_second", m.steps_per_second},
           {"samples_per_second", m.samples_per_second},
           {"median_peak_rss_bytes", m.median_peak_rss_bytes},
           {"median_final_accuracy", m.median_final_accuracy}};
    if (!m.score.valid) j["olympic"]["why_invalid"] = m.score.why_invalid;
    if (m.cost) j["cost_to_target"] = interval_json(*m.cost);
    summaries.push_back(j);
  }
  json contrasts = json::array();
  for (const ToTargetContrast& c : s.contrasts) {
    json j{{"baseline", c.a}, {"config", c.b}, {"throughput_ratio", c.throughput_ratio}, {"verdict", c.verdict}};
    if (c.seconds_ratio) j["seconds_ratio"] = interval_json(*c.seconds_ratio);
    if (c.steps_ratio) j["steps_ratio"] = interval_json(*c.steps_ratio);
    contrasts.push_back(j);
  }
  json runs = json::array();
  for (const ToTargetRun& r : s.runs) runs.push_back(to_json(r));
  json out{{"schema_version", 1},
           {"kind", "train_to_target"},
           {"cpu", s.cpu},
           {"contract",
            {{"model", o.model},
             {"width", o.width},
             {"depth", o.depth},
             {"dataset", o.dataset},
             {"metric", "validation accuracy"},
             {"target", o.target},
             {"eval_every", o.eval_every},
             {"max_steps", o.max_steps},
             {"val_fraction", o.val_fraction},
             {"split_seed", o.split_seed},
             {"seeds", {o.seed, o.seed + static_cast<std::uint64_t>(o.runs) - 1}},
             {"optimizer", o.optimizer == "sgd" ? "sgd, momentum 0.9" : "adam"},
             {"threads", o.threads},
             {"time_to_target",
              "from the first training step to the end of the evaluation that reached the target, evaluations "
              "included; compilation (compiled mode) before the clock starts, as MLPerf's initialisation"},
             {"scoring",
              "MLPerf's olympic mean (the fastest and the slowest run dropped; a run that did not reach the "
              "target counts as the slowest, two invalidate); intervals: percentile bootstrap of the mean "
              "over the runs that reached the target, 4000 resamples"}}},
           {"configs", configs},
           {"summaries", summaries},
           {"contrasts", contrasts},
           {"runs", runs}};
  if (s.price_per_hour) out["price"] = {{"per_hour", *s.price_per_hour}, {"currency", s.currency}};
  return out;
}

json to_json(const ToTargetRun& r) {
  json curve = json::array();
  for (const CurvePoint& p : r.curve) {
    curve.push_back({{"step", p.step},
                     {"samples", p.samples},
                     {"seconds", p.seconds},
                     {"train_seconds", p.train_seconds},
                     {"accuracy", p.accuracy},
                     {"loss", p.loss}});
  }
  json j{{"config", r.config},
         {"seed", r.seed},
         {"reached", r.reached},
         {"steps", r.steps},
         {"samples", r.samples},
         {"seconds", r.seconds},
         {"train_seconds", r.train_seconds},
         {"compile_seconds", r.compile_seconds},
         {"final_accuracy", r.final_accuracy},
         {"diverged", r.diverged},
         {"train_images", r.train_images},
         {"val_images", r.val_images},
         {"parameters", r.parameters},
         {"torch", r.torch_version},
         {"peak_rss_bytes", r.peak_rss_bytes},
         {"curve", curve}};
  if (!r.error.empty()) j["error"] = r.error;
  return j;
}

bool is_to_target_study(const json& document) {
  return document.is_object() && document.contains("kind") && document["kind"] == "train_to_target";
}

namespace {

/// A study file's field, type-checked: `path` names it in the error.
class StudyReader {
 public:
  explicit StudyReader(std::string where) : where_(std::move(where)) {}
  const json& at(const json& object, const std::string& key, const std::string& path) const {
    if (!object.is_object() || !object.contains(key)) fail(path + key, "is missing");
    return object[key];
  }
  double number(const json& object, const std::string& key, const std::string& path) const {
    const json& v = at(object, key, path);
    if (!v.is_number()) fail(path + key, "must be a number");
    return v.get<double>();
  }
  std::int64_t integer(const json& object, const std::string& key, const std::string& path) const {
    const json& v = at(object, key, path);
    if (!v.is_number_integer()) fail(path + key, "must be an integer");
    return v.get<std::int64_t>();
  }
  std::string text(const json& object, const std::string& key, const std::string& path) const {
    const json& v = at(object, key, path);
    if (!v.is_string()) fail(path + key, "must be a string");
    return v.get<std::string>();
  }
  bool flag(const json& object, const std::string& key, const std::string& path) const {
    const json& v = at(object, key, path);
    if (!v.is_boolean()) fail(path + key, "must be true or false");
    return v.get<bool>();
  }
  const json& list(const json& object, const std::string& key, const std::string& path) const {
    const json& v = at(object, key, path);
    if (!v.is_array()) fail(path + key, "must be a list");
    return v;
  }
  [[noreturn]] void fail(const std::string& field, const std::string& why) const {
    bad(fmt::format("{}: field '{}' {} (a train-to-target study as `neural-cost train-to-target` writes it)", where_,
                    field, why));
  }

 private:
  std::string where_;
};

}  // namespace

namespace {

/// A study file's contents, scored by score_to_target at `price` when given, else at the file's own.
ToTargetStudy read_study(const json& document, const std::string& where, std::optional<double> price_override) {
  if (!is_to_target_study(document)) {
    bad(fmt::format("{}: not a train-to-target study (no \"kind\": \"train_to_target\")", where));
  }
  const StudyReader r(where);
  const json& c = r.at(document, "contract", "");
  ToTargetOptions o;
  o.model = r.text(c, "model", "contract.");
  o.width = static_cast<int>(r.integer(c, "width", "contract."));
  o.depth = static_cast<int>(r.integer(c, "depth", "contract."));
  o.dataset = r.text(c, "dataset", "contract.");
  o.target = r.number(c, "target", "contract.");
  o.eval_every = static_cast<int>(r.integer(c, "eval_every", "contract."));
  o.max_steps = static_cast<int>(r.integer(c, "max_steps", "contract."));
  o.val_fraction = r.number(c, "val_fraction", "contract.");
  o.split_seed = static_cast<std::uint64_t>(r.integer(c, "split_seed", "contract."));
  const json& seeds = r.list(c, "seeds", "contract.");
  if (seeds.size() != 2 || !seeds[0].is_number_integer() || !seeds[1].is_number_integer() || seeds[1] < seeds[0]) {
    r.fail("contract.seeds", "must be [first, last]");
  }
  o.seed = seeds[0].get<std::uint64_t>();
  o.runs = static_cast<int>(seeds[1].get<std::uint64_t>() - o.seed + 1);
  o.optimizer = r.text(c, "optimizer", "contract.").rfind("sgd", 0) == 0 ? "sgd" : "adam";
  o.threads = static_cast<int>(r.integer(c, "threads", "contract."));
  const json& configs = r.list(document, "configs", "");
  for (std::size_t i = 0; i < configs.size(); ++i) {
    const std::string p = fmt::format("configs[{}].", i);
    ToTargetConfig k;
    k.mode = r.text(configs[i], "mode", p);
    k.precision = r.text(configs[i], "precision", p);
    k.batch = r.integer(configs[i], "batch", p);
    k.lr = r.number(configs[i], "lr", p);
    o.configs.push_back(k);
  }
  std::vector<ToTargetRun> runs;
  const json& listed = r.list(document, "runs", "");
  for (std::size_t i = 0; i < listed.size(); ++i) {
    const json& j = listed[i];
    const std::string p = fmt::format("runs[{}].", i);
    ToTargetRun run;
    const std::int64_t config = r.integer(j, "config", p);
    if (config < 0 || static_cast<std::size_t>(config) >= o.configs.size()) {
      r.fail(p + "config", fmt::format("must name one of the {} configurations", o.configs.size()));
    }
    run.config = static_cast<std::size_t>(config);
    run.seed = static_cast<std::uint64_t>(r.integer(j, "seed", p));
    run.reached = r.flag(j, "reached", p);
    run.steps = r.integer(j, "steps", p);
    run.samples = r.integer(j, "samples", p);
    run.seconds = r.number(j, "seconds", p);
    run.train_seconds = r.number(j, "train_seconds", p);
    run.compile_seconds = r.number(j, "compile_seconds", p);
    run.final_accuracy = r.number(j, "final_accuracy", p);
    run.diverged = r.flag(j, "diverged", p);
    run.train_images = r.integer(j, "train_images", p);
    run.val_images = r.integer(j, "val_images", p);
    run.parameters = r.integer(j, "parameters", p);
    run.torch_version = r.text(j, "torch", p);
    if (j.contains("peak_rss_bytes")) run.peak_rss_bytes = r.integer(j, "peak_rss_bytes", p);
    if (j.contains("error")) run.error = r.text(j, "error", p);
    const json& curve = r.list(j, "curve", p);
    for (std::size_t k = 0; k < curve.size(); ++k) {
      const std::string q = fmt::format("{}curve[{}].", p, k);
      CurvePoint point;
      point.step = r.integer(curve[k], "step", q);
      point.samples = r.integer(curve[k], "samples", q);
      point.seconds = r.number(curve[k], "seconds", q);
      point.train_seconds = r.number(curve[k], "train_seconds", q);
      point.accuracy = r.number(curve[k], "accuracy", q);
      point.loss = r.number(curve[k], "loss", q);
      run.curve.push_back(point);
    }
    runs.push_back(std::move(run));
  }
  std::optional<double> price;
  std::string currency = "USD";
  if (document.contains("price")) {
    price = r.number(document["price"], "per_hour", "price.");
    currency = r.text(document["price"], "currency", "price.");
  }
  ToTargetStudy study = score_to_target(o, std::move(runs), price_override ? price_override : price, currency);
  study.cpu = document.contains("cpu") ? r.text(document, "cpu", "") : "";
  return study;
}

}  // namespace

ToTargetStudy read_to_target_study(const json& document, const std::string& where) {
  return read_study(document, where, std::nullopt);
}

std::optional<ToTargetStudy> read_to_target_file(const std::string& path, std::optional<double> price_per_hour) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  const json document = json::parse(in, nullptr, false);
  if (document.is_discarded() || !is_to_target_study(document)) return std::nullopt;
  return read_study(document, path, price_per_hour);
}

}  // namespace neuralcost
