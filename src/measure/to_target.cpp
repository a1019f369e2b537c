// Training to a quality target (include/neuralcost/measure/to_target.hpp).
#include "neuralcost/measure/to_target.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "backends/plugin_backend.hpp"
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

std::string ToTargetConfig::label() const {
  return fmt::format("{} {} {} batch {} lr {:g}", backend, mode, precision, batch, lr);
}

std::string to_target_model_kind(const std::string& model) {
  if (model == "ff" || model == "cnn") return "reference";
  if (std::filesystem::path(model).extension() == ".pt2") return "torch.export program";
  std::error_code ec;
  if (std::filesystem::is_directory(model, ec)) return "SavedModel";
  return "TorchScript";
}

namespace {

/// Whether `backend` trains a model of `kind` (to_target_model_kind).
bool trains(const std::string& kind, const std::string& backend) {
  if (kind == "reference") return true;
  if (kind == "SavedModel") return backend == "tensorflow";
  if (kind == "torch.export program") return backend == "torch";
  return backend == "torch" || backend == "libtorch";  // TorchScript
}

}  // namespace

void validate(const ToTargetOptions& o) {
  if (o.model.empty()) bad("--model: ff, cnn, a TorchScript file, a torch.export .pt2 or a SavedModel directory");
  const std::string kind = to_target_model_kind(o.model);
  if (kind != "reference") {
    std::error_code ec;
    if (kind == "SavedModel" &&
        !std::filesystem::is_regular_file(std::filesystem::path(o.model) / "saved_model.pb", ec)) {
      bad(fmt::format("--model {}: a directory, but not a SavedModel (it has no saved_model.pb)", o.model));
    }
    if (kind != "SavedModel" && !std::filesystem::is_regular_file(o.model, ec)) {
      bad(
          fmt::format("--model {}: train-to-target trains ff, cnn, a TorchScript file, a torch.export .pt2 or a "
                      "SavedModel directory, and there is no such file",
                      o.model));
    }
    if (o.sizes_given) bad(fmt::format("--width and --depth size ff and cnn; {} has its own sizes", o.model));
  }
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
    if (c.backend != "torch" && c.backend != "libtorch" && c.backend != "jax" && c.backend != "tensorflow") {
      bad(fmt::format("--backend {}: train-to-target trains in torch, libtorch, jax or tensorflow", c.backend));
    }
    if (c.mode != "eager" && c.mode != "compiled") bad(fmt::format("--mode {}: eager or compiled", c.mode));
    if (kind == "torch.export program" && c.backend == "libtorch") {
      bad(
          fmt::format("--backend libtorch: {} is a torch.export program, which LibTorch cannot load; train it with "
                      "--backend torch, or give LibTorch a TorchScript file",
                      o.model));
    }
    if (!trains(kind, c.backend)) {
      bad(fmt::format("--backend {}: {} is a {}; train it with --backend {} ({} trains ff and cnn{})", c.backend,
                      o.model, kind == "TorchScript" ? "TorchScript file" : kind,
                      kind == "SavedModel"             ? "tensorflow"
                      : kind == "torch.export program" ? "torch"
                                                       : "torch or libtorch",
                      c.backend, c.backend == "tensorflow" ? ", and SavedModels" : ""));
    }
    if (kind == "SavedModel" && c.precision != "fp32") {
      bad(fmt::format("--precision {}: {} is a SavedModel, whose graph has its own dtypes; give --precision fp32",
                      c.precision, o.model));
    }
    if (kind == "TorchScript" && c.mode == "compiled") {
      bad(fmt::format("--mode compiled: {} is TorchScript, which runs as it is in both modes; give --mode eager",
                      o.model));
    }
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

namespace {

/// The run's request, as both engines read it.
json run_request(const ToTargetOptions& o, const ToTargetConfig& config, std::uint64_t seed) {
  return json{{"cmd", "run"},
              {"model", o.model},
              {"dataset", o.dataset},
              {"target", o.target},
              {"eval_every", o.eval_every},
              {"max_steps", o.max_steps},
              {"seed", seed},
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
}

double loss_of(const json& v) { return v.is_null() ? std::nan("") : v.get<double>(); }

/// A run's reply read into `run`.
void read_reply(const json& reply, ToTargetRun& run) {
  run.reached = reply.at("reached").get<bool>();
  run.diverged = reply.value("diverged", false);
  run.compile_seconds = reply.value("compile_seconds", 0.0);
  run.train_images = reply.value("train_images", 0);
  run.val_images = reply.value("val_images", 0);
  run.parameters = reply.value("parameters", 0);
  run.torch_version = reply.value("torch", std::string());
  run.peak_rss_bytes = reply.value("peak_rss_bytes", std::int64_t{0});
  if (reply.contains("first_loss") && reply["first_loss"].is_number())
    run.first_loss = reply["first_loss"].get<double>();
  for (const json& p : reply.at("curve")) {
    run.curve.push_back({p.at("step").get<std::int64_t>(), p.at("samples").get<std::int64_t>(),
                         p.at("seconds").get<double>(), p.at("train_seconds").get<double>(),
                         p.at("accuracy").get<double>(), loss_of(p.at("loss"))});
  }
  if (!run.curve.empty()) {
    const CurvePoint& last = run.curve.back();
    run.steps = last.step;
    run.samples = last.samples;
    run.seconds = last.seconds;
    run.train_seconds = last.train_seconds;
    run.final_accuracy = last.accuracy;
  }
}

/// The LibTorch engine's executable, beside the LibTorch plugin; kNotFound when it is not there.
std::string libtorch_engine() {
  const std::string path =
      (std::filesystem::path(PluginBackend::plugin_directory()) / "neuralcost-libtorch-to-target").string();
  if (!std::filesystem::exists(path)) {
    throw Error(ErrorCode::kNotFound,
                fmt::format("train-to-target --backend libtorch needs its engine {}, which this build does not have "
                            "(it is built with the LibTorch backend, NEURALCOST_WITH_LIBTORCH)",
                            path));
  }
  return path;
}

std::string strip_label(std::string what, const std::string& label) {
  if (what.rfind(label + ": ", 0) == 0) what = what.substr(label.size() + 2);
  return what;
}

}  // namespace

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
  const std::vector<std::string> python{worker::python_interpreter(), "-m", "neuralcost_worker", "to-target"};
  const std::string python_label = "the train-to-target worker", engine_label = "the LibTorch train-to-target engine";
  // LibTorch trains on the split the torch worker makes (scikit-learn's data, its seeded split),
  // asked for once: both backends see the same images
  json data;
  std::string engine;
  const bool libtorch =
      std::any_of(o.configs.begin(), o.configs.end(), [](const ToTargetConfig& c) { return c.backend == "libtorch"; });
  if (libtorch) {
    engine = libtorch_engine();
    try {
      worker::WorkerProcess process(python, env, python_label);
      data = process.request(
          {{"cmd", "dataset"}, {"dataset", o.dataset}, {"val_fraction", o.val_fraction}, {"split_seed", o.split_seed}},
          std::chrono::duration<double>(o.step_timeout_seconds));
      process.stop();
    } catch (const Error& e) {
      if (interrupted()) throw Interrupted();
      throw Error(e.code(), strip_label(e.what(), python_label));
    }
    data.erase("ok");
  }
  std::vector<ToTargetRun> runs;
  for (int k = 0; k < o.runs; ++k) {
    for (std::size_t c = 0; c < o.configs.size(); ++c) {
      throw_if_interrupted();
      const ToTargetConfig& config = o.configs[c];
      ToTargetRun run;
      run.config = c;
      run.seed = o.seed + static_cast<std::uint64_t>(k);
      json req = run_request(o, config, run.seed);
      // torch, jax and tensorflow train in the Python worker; libtorch in its engine, on the worker's split
      const bool in_worker = config.backend != "libtorch";
      if (in_worker) req["backend"] = config.backend;
      if (!in_worker) req["data"] = data;
      const std::string& label = in_worker ? python_label : engine_label;
      try {
        // a fresh process a run: no run inherits another's caches, compiled code or allocator
        worker::WorkerProcess process(in_worker ? python : std::vector<std::string>{engine}, env, label);
        const json reply = process.request(req, std::chrono::duration<double>(o.step_timeout_seconds));
        process.stop();
        read_reply(reply, run);
      } catch (const Interrupted&) {
        throw;
      } catch (const Error& e) {
        if (interrupted()) throw Interrupted();
        const std::string what = strip_label(e.what(), label);
        // a configuration's first run: the engine refused the request itself, or cannot load what
        // it needs (a framework not installed): every run of it would fail alike
        if (k == 0 && (e.code() == ErrorCode::kInvalidArgument || e.code() == ErrorCode::kNotFound)) {
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

namespace {

std::optional<StartAgreement> start_agreement(const ToTargetOptions& o, const std::vector<ToTargetRun>& runs) {
  // every two runs of a seed in different backends at the same precision and batch (any mode or
  // learning rate: the first loss is before the first update)
  StartAgreement a;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const ToTargetRun& t = runs[i];
    if (t.config >= o.configs.size() || !t.first_loss) continue;
    const ToTargetConfig& tc = o.configs[t.config];
    for (std::size_t j = i + 1; j < runs.size(); ++j) {
      const ToTargetRun& l = runs[j];
      if (l.config >= o.configs.size() || l.seed != t.seed || !l.first_loss) continue;
      const ToTargetConfig& lc = o.configs[l.config];
      if (lc.backend == tc.backend || lc.precision != tc.precision || lc.batch != tc.batch) continue;
      ++a.pairs;
      const double scale = std::max(std::abs(*t.first_loss), 1e-12);
      a.largest_relative_difference =
          std::max(a.largest_relative_difference, std::abs(*l.first_loss - *t.first_loss) / scale);
    }
  }
  if (a.pairs == 0) return std::nullopt;
  a.same = a.largest_relative_difference <= 1e-4;
  return a;
}

}  // namespace

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
  study.start = start_agreement(options, study.runs);
  for (std::size_t c = 1; c < options.configs.size(); ++c) {
    study.contrasts.push_back(contrast_to_target(0, c, by_config[0], by_config[c], study.summaries[0].steps_per_second,
                                                 study.summaries[c].steps_per_second));
  }
  return study;
}

}  // namespace neuralcost
