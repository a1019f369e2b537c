// The profiling pipeline (see profile.hpp). Backend-neutral: everything framework-specific
// comes through PreparedModel, everything device-specific through RunEnvironment.
#include "neuralcost/measure/profile.hpp"

#include <sched.h>

#include <algorithm>
#include <new>
#include <variant>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "measure/cell_session.hpp"
#include "measure/layer_attribution.hpp"
#include "measure/step_layers.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/core/interrupt.hpp"
#include "neuralcost/core/statistics.hpp"
#include "neuralcost/cost/op_kinds.hpp"
#include "neuralcost/measure/device.hpp"
#include "neuralcost/measure/load.hpp"
#include "neuralcost/measure/model_files.hpp"
#include "neuralcost/measure/schedule.hpp"
#include "neuralcost/model_inputs.hpp"
#include "neuralcost/models/reference.hpp"
#include "neuralcost/registry.hpp"
#include "neuralcost/training/memory.hpp"
#include "neuralcost/version.hpp"

namespace neuralcost {

namespace {

/// Runs that record why `backend` could not run at all, one per batch and mode.
std::vector<ProfileRun> failed_runs(const Backend& backend, const ModelRequest& base, const ProfileOptions& options,
                                    const std::string& error) {
  std::vector<ProfileRun> failed;
  for (std::int64_t batch : options.batches) {
    for (const std::string& mode : options.modes.empty() ? backend.modes() : options.modes) {
      ProfileRun r;
      r.backend = std::string(backend.name());
      r.mode = mode;
      r.model = base.model;
      r.batch = batch;
      r.device = options.run.device.name();
      r.outcome = Outcome::failure(error);
      failed.push_back(std::move(r));
      if (options.modes.empty()) break;
    }
  }
  return failed;
}

}  // namespace

void validate(const TrainHyperparameters& h) {
  const auto check = [](bool ok, const char* option, double value, const char* range) {
    if (!ok) throw Error(ErrorCode::kInvalidArgument, fmt::format("{} must be {} (got {})", option, range, value));
  };
  check(h.learning_rate > 0 && h.learning_rate <= 10, "--learning-rate", h.learning_rate, "more than 0 and at most 10");
  check(h.momentum >= 0 && h.momentum < 1, "--momentum", h.momentum, "at least 0 and less than 1");
  check(h.beta1 >= 0 && h.beta1 < 1, "--betas' first", h.beta1, "at least 0 and less than 1");
  check(h.beta2 >= 0 && h.beta2 < 1, "--betas' second", h.beta2, "at least 0 and less than 1");
  check(h.eps > 0 && h.eps <= 1, "--eps", h.eps, "more than 0 and at most 1");
  if (h.weight_decay)
    check(*h.weight_decay >= 0 && *h.weight_decay <= 1, "--weight-decay", *h.weight_decay, "from 0 to 1");
}

void validate(const ProfileOptions& options) {
  const RunOptions& run = options.run;
  if (run.threads < 0 || run.threads > 4096) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--threads must be 0 (library default) to 4096 (got {})", run.threads));
  }
  // more threads than CPUs: they take turns on the cores (a 1000-thread run on 2 CPUs took 30 s
  // to start and loaded the machine to 580); the timing would be of the scheduler
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  const int usable = sched_getaffinity(0, sizeof(cpus), &cpus) == 0 ? CPU_COUNT(&cpus) : 0;
  if (usable > 0 && run.threads > usable) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--threads {} is more than the {} CPUs this process may run on", run.threads, usable));
  }
  const double budget = options.timing.budget_seconds;
  if (!(budget > 0 && budget <= 3600)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--budget must be more than 0 and at most 3600 seconds (got {})", budget));
  }
  if (options.layer_runs > 100000) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--layer-runs must be at most 100000 (got {})", options.layer_runs));
  }
  if (!(run.worker_timeout_seconds > 0 && run.worker_timeout_seconds <= 86400)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--worker-timeout must be more than 0 and at most 86400 seconds "
                            "(got {})",
                            run.worker_timeout_seconds));
  }
  if (run.train) {
    validate(run.train->hyper);
    // what the backends run today; analyze --train counts the others
    if (run.train->options.precision == Precision::kFp16Mixed) {
      throw Error(ErrorCode::kUnimplemented,
                  "--precision fp16-mixed: measured training steps run fp32 or bf16-mixed (fp16 needs loss scaling, "
                  "which is not measured; analyze --train counts it)");
    }
    if (run.train->options.checkpoint.kind != CheckpointKind::kNone) {
      throw Error(ErrorCode::kUnimplemented,
                  fmt::format("--checkpoint {}: measured training steps run without checkpointing only (analyze "
                              "--train counts it)",
                              checkpoint_name(run.train->options.checkpoint)));
    }
  }
  validate(options.timing);
  const RoundOptions& r = options.rounds;
  if (r.rounds < 1 || r.rounds > 1000) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("--rounds must be 1 to 1000 (got {})", r.rounds));
  }
  if (r.max_rounds < r.rounds || r.max_rounds > 1000) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--max-rounds must be from --rounds ({}) to 1000 (got {})", r.rounds, r.max_rounds));
  }
  if (r.processes < 1 || r.processes > r.rounds) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("--preparations must be 1 to --rounds ({}) (got {}): each "
                                                         "preparation takes at least one round",
                                                         r.rounds, r.processes));
  }
  if (!(r.ok_half_width > 0 && r.ok_half_width < 1)) {
    throw Error(
        ErrorCode::kInvalidArgument,
        fmt::format("--ok-within must be more than 0 and less than 100 percent (got {})", 100 * r.ok_half_width));
  }
  if (options.layer_runs < 0) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("--layer-runs must be >= 0 (got {})", options.layer_runs));
  }
  if (options.batches.empty()) throw Error(ErrorCode::kInvalidArgument, "no batch sizes to profile");
  for (std::int64_t b : options.batches) {
    if (b < 1) throw Error(ErrorCode::kInvalidArgument, fmt::format("--batch must be at least 1 (got {})", b));
  }
}

void check_modes(const std::vector<const Backend*>& backends, const std::vector<std::string>& modes) {
  if (backends.size() == 1) {
    // one backend: its own modes, before anything slow (a calibration) runs; a backend that cannot
    // run here has no modes, so its reason comes first (not "has no mode 'eager' (modes: )")
    if (auto why = backends.front()->unavailable_reason()) {
      throw Error(ErrorCode::kUnimplemented,
                  fmt::format("backend '{}' cannot run here: {}", backends.front()->name(), *why));
    }
    const auto known = backends.front()->modes();
    for (const std::string& m : modes) {
      if (std::find(known.begin(), known.end(), m) == known.end()) {
        throw Error(ErrorCode::kInvalidArgument, fmt::format("backend '{}' has no mode '{}' (modes: {})",
                                                             backends.front()->name(), m, fmt::join(known, ", ")));
      }
    }
    return;
  }
  if (backends.empty()) return;
  for (const std::string& m : modes) {
    const bool known = std::any_of(backends.begin(), backends.end(), [&](const Backend* b) {
      const auto own = b->modes();
      return std::find(own.begin(), own.end(), m) != own.end();
    });
    if (!known) throw Error(ErrorCode::kInvalidArgument, fmt::format("no backend of --backend has a mode '{}'", m));
  }
}

void check_training(const std::vector<ModelBackends>& plan, const ProfileOptions& options) {
  if (!options.run.train) return;
  for (const ModelBackends& entry : plan) {
    if (!is_reference_model(entry.model)) {
      throw Error(ErrorCode::kUnimplemented, fmt::format("--train runs the built-in networks only (ff, cnn, rnn, lstm, "
                                                         "transformer), not the model file '{}'",
                                                         entry.model));
    }
  }
}

bool is_reference_model(const std::string& model) {
  const auto& reference = reference_model_names();
  return std::find(reference.begin(), reference.end(), model) != reference.end();
}

bool batch_is_an_option(const std::string& model) {
  return is_reference_model(model) || model_kind(model) == ModelKind::kDecoderConfig;
}

void check_model_options(const std::vector<ModelBackends>& plan, const ModelRequest& base) {
  // the built-in networks' sizes and inputs: wrong for every backend alike, so said before any
  // run (each backend failed in its own words, and a study of failed cells went on)
  for (const ModelBackends& entry : plan) {
    if (model_kind(entry.model) != ModelKind::kBuiltIn) continue;
    for (const auto& [option, value] :
         {std::pair<const char*, std::int64_t>{"seq", base.seq}, {"width", base.width}, {"depth", base.depth}}) {
      if (base.given.count(option) && (value < 1 || value >= (std::int64_t{1} << 31))) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("--{} {} must be a positive integer below 2^31", option, value));
      }
    }
  }
  // inputs for model files; a plan of built-in networks alone has none to give them to
  const bool built_in_only = std::all_of(plan.begin(), plan.end(), [](const ModelBackends& entry) {
    return model_kind(entry.model) == ModelKind::kBuiltIn;
  });
  if (!plan.empty() && built_in_only && !inputs_of(base).empty()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--input and --input-shape apply to model files, not to the built-in network {} (its "
                            "input is --batch, --seq, --width)",
                            plan.front().model));
  }
  bool any_decoder = false;
  for (const ModelBackends& entry : plan) {
    if (model_kind(entry.model) != ModelKind::kDecoderConfig) continue;
    any_decoder = true;
    if (base.phase != "prefill" && base.phase != "decode") {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("--phase '{}': profile times one phase as its pass, prefill or decode{}", base.phase,
                              base.phase == "generate" ? " (analyze --phase generate counts a whole generation)" : ""));
    }
    // which options size a decoder is its importer's to say (DecoderImporter::applies)
    ModelRequest request = base;
    request.model = entry.model;
    const Importer& importer = importer_for(request);
    for (const char* option : {"seq", "width", "depth"}) {
      if (base.given.count(option) && !importer.applies(request, option)) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("--{} does not apply to the decoder {}{}", option, entry.model,
                                std::string_view(option) == "seq" ? " (--prompt sizes a prefill, --context a decode)"
                                                                  : " (its config.json sizes it)"));
      }
    }
    if (!inputs_of(base).empty()) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("--input and --input-shape do not apply to the decoder {}: its input is the token ids "
                              "of --batch sequences (--prompt tokens each in prefill, 1 in decode)",
                              entry.model));
    }
    const bool prefill = base.phase == "prefill";
    if ((prefill ? base.prompt : base.context) < 1) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("--{} must be at least 1 (got {})", prefill ? "prompt" : "context",
                              prefill ? base.prompt : base.context));
    }
    if (const char* other = prefill ? "context" : "prompt";
        base.given.count(other) && !importer.applies(request, other)) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("--{} does not apply to --phase {} (--prompt is prefill's, --context decode's)", other,
                              base.phase));
    }
  }
  if (any_decoder) return;
  for (const char* option : {"phase", "prompt", "context"}) {
    if (base.given.count(option)) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("--{} applies to decoder LLMs (a config.json) only, not to {}", option,
                              plan.empty() ? std::string("these models") : plan.front().model));
    }
  }
}

std::vector<CellPlan> backend_cells(const Backend& backend, const ModelRequest& base, const HardwareSpec& hardware,
                                    const ProfileOptions& options, const std::string& chosen_by) {
  if (auto why = backend.unavailable_reason()) {
    throw Error(ErrorCode::kUnimplemented, fmt::format("backend '{}' cannot run here: {}", backend.name(), *why));
  }
  const auto known = backend.modes();
  std::vector<std::string> modes = options.modes.empty() ? std::vector<std::string>{known.front()} : options.modes;
  for (const std::string& m : modes) {
    if (std::find(known.begin(), known.end(), m) == known.end()) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("backend '{}' has no mode '{}' (modes: {})", backend.name(), m, fmt::join(known, ", ")));
    }
  }
  validate(options);
  check_device_offered(backend, options.run.device);
  const std::optional<std::string> mismatch =
      check_hardware_matches(hardware, options.run.device, options.allow_hardware_mismatch);
  std::vector<CellPlan> cells;
  for (std::int64_t batch : options.batches) {
    for (const std::string& mode : modes) {
      CellPlan cell{&backend, base, mode, chosen_by, mismatch};
      cell.request.batch = batch;
      cells.push_back(std::move(cell));
    }
  }
  return cells;
}

std::vector<ProfileRun> profile(const Backend& backend, const ModelRequest& base, const HardwareSpec& hardware,
                                const ProfileOptions& options) {
  ScheduleHooks hooks;
  if (options.on_run) hooks.on_run = [&](const ProfileRun& r, std::size_t) { options.on_run(r); };
  return measure_cells(backend_cells(backend, base, hardware, options), hardware, options, std::move(hooks));
}

std::vector<ProfileRun> profile_all(const std::vector<ModelBackends>& plan, const ModelRequest& base,
                                    const HardwareSpec& hardware, const ProfileOptions& options) {
  validate(options);
  check_modes(backends_of(plan), options.modes);
  // the same for every backend: the command's error, not a failed run each
  check_hardware_matches(hardware, options.run.device, options.allow_hardware_mismatch);
  const std::vector<InputSpec> inputs = inputs_of(base);  // mixed or repeated inputs: before anything runs
  check_training(plan, options);
  check_model_options(plan, base);
  std::vector<CellPlan> cells;
  // the runs in plan order: a failed backend's runs, or the index of a measured cell
  std::vector<std::variant<ProfileRun, std::size_t>> order;
  for (const ModelBackends& entry : plan) {
    ModelRequest request = base;
    request.model = entry.model;
    ProfileOptions these = options;
    if (!batch_is_an_option(entry.model)) {
      these.batches = {inputs.empty() || inputs[0].shape.empty() ? 1 : inputs[0].shape[0]};
    }
    for (const Backend* backend : entry.backends) {
      std::vector<CellPlan> some;
      if (entry.backends.size() == 1) {
        some = backend_cells(*backend, request, hardware, these, entry.chosen_by);
      } else {
        try {
          some = backend_cells(*backend, request, hardware, these, entry.chosen_by);
        } catch (const Error& e) {
          // a backend that cannot run (unavailable, no such mode or device) fails its cells; the others go on
          for (ProfileRun& r : failed_runs(*backend, request, these, e.what())) {
            r.contract["backend_chosen_by"] = entry.chosen_by;
            if (options.on_run) options.on_run(r);
            order.emplace_back(std::move(r));
          }
        }
      }
      for (CellPlan& c : some) {
        order.emplace_back(cells.size());
        cells.push_back(std::move(c));
      }
    }
  }
  ScheduleHooks hooks;
  if (options.on_run) hooks.on_run = [&](const ProfileRun& r, std::size_t) { options.on_run(r); };
  const std::vector<ProfileRun> measured = measure_cells(cells, hardware, options, std::move(hooks));
  // measure_cells returns the finished cells in cell order (fewer after an interruption)
  std::vector<ProfileRun> runs;
  std::size_t next = 0;
  for (auto& slot : order) {
    if (auto* r = std::get_if<ProfileRun>(&slot)) {
      runs.push_back(std::move(*r));
      continue;
    }
    const CellPlan& c = cells[std::get<std::size_t>(slot)];
    if (next < measured.size() && measured[next].backend == c.backend->name() && measured[next].mode == c.mode &&
        measured[next].model == c.request.model && measured[next].batch == c.request.batch) {
      runs.push_back(measured[next++]);
    }
  }
  return runs;
}

std::vector<ProfileRun> profile_all(const std::vector<const Backend*>& backends, const std::vector<std::string>& models,
                                    const ModelRequest& base, const HardwareSpec& hardware,
                                    const ProfileOptions& options) {
  std::vector<ModelBackends> plan;
  for (const std::string& model : models) plan.push_back({model, backends, "--backend"});
  return profile_all(plan, base, hardware, options);
}

std::vector<const Backend*> backends_of(const std::vector<ModelBackends>& plan) {
  std::vector<const Backend*> all;
  for (const ModelBackends& entry : plan) {
    for (const Backend* b : entry.backends) {
      if (std::find(all.begin(), all.end(), b) == all.end()) all.push_back(b);
    }
  }
  return all;
}

}  // namespace neuralcost
