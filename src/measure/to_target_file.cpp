// A train-to-target study as JSON, written and read back (include/neuralcost/measure/to_target.hpp):
// the file `neural-cost train-to-target` writes after every run and `report` reads.
#include <cmath>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "neuralcost/core/error.hpp"
#include "neuralcost/measure/to_target.hpp"

namespace neuralcost {
namespace {

using json = nlohmann::json;

[[noreturn]] void bad(const std::string& message) { throw Error(ErrorCode::kInvalidArgument, message); }

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
    configs.push_back({{"backend", c.backend},
                       {"mode", c.mode},
                       {"precision", c.precision},
                       {"batch", c.batch},
                       {"lr", c.lr},
                       {"label", c.label()}});
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
             {"model_kind", o.model_kind.empty() ? to_target_model_kind(o.model) : o.model_kind},
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
  if (s.start) {
    out["same_start"] = {{"pairs", s.start->pairs},
                         {"largest_relative_difference", s.start->largest_relative_difference},
                         {"same", s.start->same}};
  }
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
  if (r.first_loss) j["first_loss"] = *r.first_loss;
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
  // what the model was where it ran (a SavedModel's directory may not be here); older files: derived
  if (c.contains("model_kind")) o.model_kind = r.text(c, "model_kind", "contract.");
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
    // studies from before LibTorch trained name no backend: the torch worker ran them
    if (configs[i].is_object() && configs[i].contains("backend")) k.backend = r.text(configs[i], "backend", p);
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
    if (j.contains("first_loss")) run.first_loss = r.number(j, "first_loss", p);
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
      // a non-finite loss (a diverged run) is written as null: JSON has no NaN
      point.loss = curve[k].is_object() && curve[k].contains("loss") && curve[k]["loss"].is_null()
                       ? std::nan("")
                       : r.number(curve[k], "loss", q);
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
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return std::nullopt;  // the results reader says what it is
  std::ifstream in(path);
  if (!in) return std::nullopt;
  const json document = json::parse(in, nullptr, false);
  if (document.is_discarded() || !is_to_target_study(document)) return std::nullopt;
  return read_study(document, path, price_per_hour);
}

}  // namespace neuralcost
