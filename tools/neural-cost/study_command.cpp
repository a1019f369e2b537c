// `neural-cost study`: a sweep of models × backends × modes × batch sizes into a JSON Lines
// results file, one cell at a time, resumable (--resume) and safe to interrupt.
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>

#include <fmt/format.h>

#include "commands.hpp"
#include "neuralcost/core/atomic_file.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/core/interrupt.hpp"
#include "neuralcost/measure/study.hpp"
#include "neuralcost/report/profile_views.hpp"
#include "neuralcost/version.hpp"
#include "run_options.hpp"

namespace neuralcost::cli {
namespace {

std::string line_of(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string duration(double s) {
  const auto total = static_cast<long long>(s + 0.5);
  return total >= 3600 ? fmt::format("{}h{:02}m", total / 3600, total / 60 % 60)
                       : fmt::format("{}m{:02}s", total / 60, total % 60);
}

void run_study_command(const RunArgs& args, bool resume, double time_limit) {
  const std::string& path = args.output;
  if (!(time_limit >= 0 && time_limit <= 7 * 86400)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--time-limit must be 0 (none) to 604800 seconds (got {})", time_limit));
  }
  RunSetup setup = prepare_run(args);
  const std::vector<StudyCell> cells = study_cells(setup.plan, setup.base, setup.options);
  const nlohmann::json settings = study_settings(setup.base, setup.options, setup.hardware.id);
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("-o '{}' is a directory, not a results file", path));
  }
  if (resume && !std::filesystem::exists(path, ec)) {
    throw Error(ErrorCode::kNotFound,
                fmt::format("--resume: '{}' does not exist (nothing to resume; leave out --resume to start)", path));
  }
  const bool holds = std::filesystem::exists(path, ec) && std::filesystem::file_size(path, ec) > 0;
  StudyProgress progress;
  if (holds && !resume) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("'{}' already holds results: --resume continues that study, or choose another file", path));
  }
  if (holds) {
    progress = read_study_progress(path);
    const std::string difference = settings_difference(progress.settings, settings);
    if (!difference.empty()) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("'{}' was made with other settings ({}); studies are not mixed: use another file", path,
                              difference));
    }
    // a line cut short by an interruption is dropped before appending; a whole last line
    // without its newline gets one
    if (progress.cut_bytes > 0) {
      fmt::print(stderr, "warning: {}: its last line ({} bytes) was cut short and is dropped\n", terminal_text(path),
                 progress.cut_bytes);
      std::filesystem::resize_file(path, progress.good_bytes);
    }
    if (progress.missing_newline) {
      append_line_durably(path, "\n");
    }
  } else {
    append_line_durably(path, line_of({{"schema_version", 1},
                                       {"tool", {{"name", "neural-cost"}, {"version", std::string(kVersion)}}},
                                       {"hardware", hardware_json(setup.hardware)},
                                       {"study", settings}}));
  }
  std::size_t todo = 0;
  for (const StudyCell& c : cells) {
    todo += progress.done.count(
                cell_key(c.model, std::string(c.backend->name()), c.mode, c.batch, setup.options.run.device.name()))
                ? 0
                : 1;
  }
  install_interrupt_handlers();
  const bool terminal = ::isatty(2) != 0;
  const auto start = std::chrono::steady_clock::now();
  std::size_t done = 0, failed = 0;
  fmt::print(stderr, "study: {} cells, {} to run{}, into {}\n", cells.size(), todo,
             todo < cells.size() ? fmt::format(" ({} already in the file)", cells.size() - todo) : "", path);
  std::size_t rounds_kept = 0;
  for (const auto& [key, rounds] : progress.rounds) rounds_kept += progress.done.count(key) ? 0 : rounds.size();
  if (rounds_kept > 0) fmt::print(stderr, "study: {} finished rounds of unfinished cells are reused\n", rounds_kept);
  const auto on_round = [&](const Round& r, const std::string& cell) {
    append_line_durably(path, line_of(round_line(cell, r)));
  };
  run_study(cells, setup.base, setup.hardware, setup.options, progress, time_limit, on_round,
            [&](const ProfileRun& r, std::size_t) {
              append_line_durably(path, line_of(profile_run_json(r)));
              ++done;
              failed += r.outcome.failed() ? 1 : 0;
              const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
              const std::string cell =
                  fmt::format("{} {} {} batch {}: {}", terminal_text(r.model), r.backend, r.mode, r.batch,
                              r.outcome.failed() ? "failed" : std::string(verdict_name(r.outcome.verdict)));
              if (terminal) {
                fmt::print(
                    stderr, "\r\033[K[{}/{}] {}, {} elapsed, about {} left", done, todo, cell, duration(elapsed),
                    duration(elapsed / static_cast<double>(done) * static_cast<double>(todo - std::min(done, todo))));
              } else {
                fmt::print(stderr, "[{}/{}] {}\n", done, todo, cell);
              }
            });
  if (terminal) fmt::print(stderr, "\n");
  if (interrupted()) {
    throw Interrupted(
        fmt::format("{} of {} cells done and in {}; `neural-cost study ... --resume` continues", done, todo, path));
  }
  if (done > 0 && failed == done) {
    // nothing measured: a script must not take it for a study (the failures are in the file)
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("every one of the {} cells run failed (their errors are in {})", done, path));
  }
  fmt::print(stderr, "study: {} cells run ({} failed) into {}; `neural-cost report {} -o report.html` draws them\n",
             done, failed, path, path);
}

}  // namespace

void add_study_command(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  // the studies' defaults: every backend, eager and compiled, batches 1 to 256
  args->backends = {"libtorch", "jax", "tensorflow", "torch"};
  args->modes = {"eager", "compiled"};
  args->batches = {1, 2, 4, 8, 16, 32, 64, 128, 256};
  args->output = "study.jsonl";
  auto resume = std::make_shared<bool>(false);
  auto time_limit = std::make_shared<double>(0);
  CLI::App* cmd = app.add_subcommand(
      "study",
      "Profile every model x backend x mode x batch size (the cells) under the timing contract, in\n"
      "rounds interleaved with the other cells of the same model and batch (in a seeded random order;\n"
      "on a CPU pass by pass: the group's rounds take visits of about 2 ms in turn, so a slow stretch of\n"
      "the machine touches them alike, each visit begun by one untimed pass that warms the model again),\n"
      "appending each round and each finished cell to a JSON Lines results file. Ctrl-C keeps every\n"
      "finished round; --resume continues. `neural-cost report FILE` draws the results.");
  add_run_options(*cmd, *args);
  cmd->add_option("-o,--output", args->output, "The JSON Lines results file (docs/json-schema.md, \"Results lines\")")
      ->capture_default_str();
  cmd->add_flag("--resume", *resume,
                "Continue the study in the results file: skip its cells, refuse it if it was made with other settings");
  cmd->add_option("--time-limit", *time_limit,
                  "Seconds for the whole study (0: none): rounds beyond --rounds, for cells whose rounds disagree, "
                  "are taken only while the study keeps within it")
      ->capture_default_str();
  cmd->callback([args, resume, time_limit] { run_study_command(*args, *resume, *time_limit); });
}

}  // namespace neuralcost::cli
