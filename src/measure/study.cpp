// Studies: cells, settings, resuming (see study.hpp).
#include "neuralcost/measure/study.hpp"

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "neuralcost/core/error.hpp"
#include "neuralcost/core/interrupt.hpp"
#include "neuralcost/core/statistics.hpp"
#include "neuralcost/measure/schedule.hpp"
#include "neuralcost/model_inputs.hpp"
#include "neuralcost/training/training.hpp"

namespace neuralcost {

std::string cell_key(const std::string& model, const std::string& backend, const std::string& mode, std::int64_t batch,
                     const std::string& device) {
  return fmt::format("{}|{}|{}|{}|{}", model, backend, mode, batch, device);
}

std::vector<StudyCell> study_cells(const std::vector<ModelBackends>& plan, const ModelRequest& base,
                                   const ProfileOptions& options) {
  const std::vector<InputSpec> inputs = inputs_of(base);
  std::vector<StudyCell> cells;
  for (const ModelBackends& entry : plan) {
    std::vector<std::int64_t> batches = options.batches;
    if (!batch_is_an_option(entry.model))
      batches = {inputs.empty() || inputs[0].shape.empty() ? 1 : inputs[0].shape[0]};
    for (const Backend* backend : entry.backends) {
      const std::vector<std::string> modes =
          options.modes.empty() ? std::vector<std::string>{backend->modes().front()} : options.modes;
      for (std::int64_t batch : batches) {
        for (const std::string& mode : modes) cells.push_back({backend, entry.model, mode, batch});
      }
    }
  }
  return cells;
}

nlohmann::json study_settings(const ModelRequest& base, const ProfileOptions& options, const std::string& hardware_id) {
  const TimingOptions& t = options.timing;
  nlohmann::json settings = {{"seq", base.seq},
                             {"width", base.width},
                             {"depth", base.depth},
                             {"dtype", std::string(dtype_name(base.dtype))},
                             {"budget_seconds", t.budget_seconds},
                             {"target_relative_ci", t.target_relative_ci},
                             {"warmup_iterations", t.warmup_iterations},
                             {"warmup_seconds", t.warmup_seconds},
                             {"layer_runs", options.layer_runs},
                             {"device", options.run.device.name()},
                             {"threads", options.run.threads},
                             {"hardware_id", hardware_id},
                             {"rounds",
                              {{"rounds", options.rounds.rounds},
                               {"max_rounds", options.rounds.max_rounds},
                               {"preparations", options.rounds.processes},
                               {"ok_half_width", options.rounds.ok_half_width},
                               {"seed", options.rounds.seed}}}};
  // a decoder config's phase (when set): resuming a decode study as a prefill one is refused
  if (base.given.count("phase") || base.given.count("prompt") || base.given.count("context")) {
    settings["decoder"] = {{"phase", base.phase}, {"prompt", base.prompt}, {"context", base.context}};
  }
  // a training study's cells are steps, not forward passes: resuming one with the other's
  // settings is refused; the step's settings are the workload's (a file without it is forward)
  settings["workload"] = "forward";
  if (options.run.train) {
    const TrainRun& train = *options.run.train;
    settings["workload"] = {{"step", "train"},
                            {"optimizer", std::string(optimizer_name(train.options.optimizer))},
                            {"precision", std::string(precision_name(train.options.precision))},
                            {"checkpoint", checkpoint_name(train.options.checkpoint)},
                            {"learning_rate", train.hyper.learning_rate},
                            {"momentum", train.hyper.momentum},
                            {"betas", {train.hyper.beta1, train.hyper.beta2}},
                            {"eps", train.hyper.eps},
                            {"weight_decay", train.hyper.weight_decay_for(train.options.optimizer)},
                            {"labels_seed", train.hyper.labels_seed}};
  }
  return settings;
}

std::string settings_difference(const nlohmann::json& in_file, const nlohmann::json& now) {
  for (const auto& [key, value] : now.items()) {
    const auto it = in_file.find(key);
    if (it == in_file.end()) return fmt::format("{}: not in the file, {} now", key, value.dump());
    if (*it != value) return fmt::format("{}: {} in the file, {} now", key, it->dump(), value.dump());
  }
  for (const auto& [key, value] : in_file.items()) {
    if (!now.contains(key)) return fmt::format("{}: {} in the file, not set now", key, value.dump());
  }
  return "";
}

StudyProgress read_study_progress(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("'{}' is a directory, not a results file", path));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::kNotFound, fmt::format("cannot open results file '{}'", path));
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  StudyProgress p;
  std::size_t start = 0, number = 0;
  while (start < text.size()) {
    const std::size_t nl = text.find('\n', start);
    ++number;
    const std::string line = text.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    if (nl == std::string::npos) {
      // a last line without its newline: a write cut short, unless it is a whole JSON object (a
      // file whose final newline an editor or a join removed), which is kept and terminated
      const nlohmann::json whole = nlohmann::json::parse(line, nullptr, false);
      if (whole.is_discarded() || !whole.is_object()) {
        p.cut_bytes = text.size() - start;
        break;
      }
      p.missing_newline = true;
    }
    start = nl == std::string::npos ? text.size() : nl + 1;
    p.good_bytes = start;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      throw Error(ErrorCode::kDataLoss, fmt::format("{}:{}: not a results line (JSON object)", path, number));
    }
    if (j.contains("round") && !j.contains("model")) {
      try {
        const nlohmann::json& r = j.at("round");
        Round round;
        round.process = r.at("process").get<int>();
        round.sweep = r.at("sweep").get<int>();
        round.pass = r.at("pass").get<int>();
        round.start_seconds = r.value("start_seconds", 0.0);
        round.samples_seconds = r.at("samples_seconds").get<std::vector<double>>();
        round.reasons = r.value("reasons", std::vector<std::string>{});
        round.machine_seconds = r.value("machine_canary_seconds", 0.0);
        round.cpu_canary_seconds = r.value("cpu_canary_seconds", 0.0);
        round.summary = summarize(round.samples_seconds);
        p.rounds[r.at("cell").get<std::string>()].push_back(std::move(round));
      } catch (const std::exception& e) {
        throw Error(ErrorCode::kDataLoss,
                    fmt::format("{}:{}: a round line that cannot be read ({})", path, number, e.what()));
      }
      continue;
    }
    if (!j.contains("model")) {
      if (!p.has_header && j.contains("study")) {
        p.settings = j["study"];
        // written before training studies existed: its cells are forward passes
        if (p.settings.is_object() && !p.settings.contains("workload")) p.settings["workload"] = "forward";
      }
      p.has_header = true;
      continue;
    }
    try {
      p.done.insert(cell_key(j.at("model").get<std::string>(), j.at("backend").get<std::string>(),
                             j.at("mode").get<std::string>(), j.at("batch").get<std::int64_t>(),
                             j.value("device", std::string("cpu"))));
    } catch (const nlohmann::json::exception&) {
      throw Error(ErrorCode::kDataLoss,
                  fmt::format("{}:{}: a run line without model, backend, mode and batch", path, number));
    }
  }
  return p;
}

nlohmann::json round_line(const std::string& cell, const Round& r) {
  return {{"round",
           {{"cell", cell},
            {"process", r.process},
            {"sweep", r.sweep},
            {"pass", r.pass},
            {"start_seconds", r.start_seconds},
            {"median_seconds", r.summary.median},
            {"samples_seconds", r.samples_seconds},
            {"machine_canary_seconds", r.machine_seconds},
            {"cpu_canary_seconds", r.cpu_canary_seconds},
            {"reasons", r.reasons}}}};
}

std::size_t run_study(const std::vector<StudyCell>& cells, const ModelRequest& base, const HardwareSpec& hardware,
                      const ProfileOptions& options, const StudyProgress& progress, double time_limit,
                      const std::function<void(const Round&, const std::string& cell)>& on_round,
                      const std::function<void(const ProfileRun&, std::size_t index)>& on_run) {
  std::vector<CellPlan> plans;
  std::vector<std::size_t> index;  // of each plan in `cells`
  std::vector<std::string> keys;
  ScheduleHooks hooks;
  hooks.finish_partial_cells = false;  // the file keeps their rounds; --resume finishes them
  hooks.time_limit_seconds = time_limit;
  for (std::size_t i = 0; i < cells.size(); ++i) {
    const StudyCell& c = cells[i];
    const std::string key =
        cell_key(c.model, std::string(c.backend->name()), c.mode, c.batch, options.run.device.name());
    if (progress.done.count(key)) continue;
    ModelRequest request = base;
    request.model = c.model;
    request.batch = c.batch;
    ProfileOptions one = options;
    one.modes = {c.mode};
    one.batches = {c.batch};
    try {
      for (CellPlan& p : backend_cells(*c.backend, request, hardware, one)) plans.push_back(std::move(p));
    } catch (const Error& e) {
      // a backend that cannot run here fails its cells, and the study goes on
      ProfileRun r;
      r.backend = std::string(c.backend->name());
      r.mode = c.mode;
      r.model = c.model;
      r.batch = c.batch;
      r.device = options.run.device.name();
      r.outcome = Outcome::failure(e.what());
      on_run(r, i);
      continue;
    }
    index.push_back(i);
    keys.push_back(key);
    const auto done = progress.rounds.find(key);
    hooks.done.push_back(done == progress.rounds.end() ? std::vector<Round>{} : done->second);
  }
  std::size_t ran = 0;
  hooks.on_round = [&](const Round& r, std::size_t cell) { on_round(r, keys[cell]); };
  hooks.on_run = [&](const ProfileRun& r, std::size_t cell) {
    ++ran;
    on_run(r, index[cell]);
  };
  measure_cells(plans, hardware, options, std::move(hooks));
  return ran;
}

}  // namespace neuralcost
