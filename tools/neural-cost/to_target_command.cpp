// `neural-cost train-to-target`: seeded training runs to a validation-accuracy target on an
// offline dataset, scored as MLPerf Training scores them, each configuration against the first
// (docs/to-target.md). The results file is rewritten atomically after every run.
#include <filesystem>
#include <memory>

#include <fmt/format.h>

#include "commands.hpp"
#include "neuralcost/core/atomic_file.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/core/interrupt.hpp"
#include "neuralcost/measure/to_target.hpp"
#include "neuralcost/report/cost.hpp"
#include "neuralcost/report/to_target_views.hpp"

namespace neuralcost::cli {
namespace {

struct ToTargetArgs {
  ToTargetOptions options;
  std::vector<std::string> backends{"torch"}, modes{"eager"}, precisions{"fp32"};
  std::vector<std::int64_t> batches{32};
  std::vector<double> lrs{0.05};
  std::string price_per_hour, currency = "USD", output = "to-target.json", format = "table";
};

void run_to_target_command(const CLI::App& cmd, ToTargetArgs& a) {
  ToTargetOptions& o = a.options;
  o.configs.clear();
  for (const std::string& backend : a.backends) {
    for (const std::string& mode : a.modes) {
      for (const std::string& precision : a.precisions) {
        for (std::int64_t batch : a.batches) {
          for (double lr : a.lrs) o.configs.push_back({backend, mode, precision, batch, lr});
        }
      }
    }
  }
  o.sizes_given = cmd.count("--width") + cmd.count("--depth") > 0;
  validate(o);
  // the default file is never replaced: it may hold an earlier study's runs
  if (cmd.count("--output") == 0 && std::filesystem::exists(a.output)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{} exists (an earlier train-to-target's runs): name another file with -o, or -o {} to "
                            "replace it",
                            a.output, a.output));
  }
  const Format format = output_format(cmd, a.format, "");
  std::optional<double> price;
  if (!a.price_per_hour.empty()) price = parse_price_per_hour(a.price_per_hour, "--price-per-hour");
  install_interrupt_handlers();
  fmt::print(stderr, "train-to-target: {} configuration(s) x {} runs{}\n", o.configs.size(), o.runs,
             a.output.empty() ? "" : ", into " + a.output);
  std::vector<ToTargetRun> done;
  const auto on_run = [&](const ToTargetRun& r) {
    done.push_back(r);
    if (!a.output.empty()) {
      write_file_atomically(a.output, to_json(score_to_target(o, done, price, a.currency)).dump(2) + "\n");
    }
    const std::string what =
        !r.error.empty() ? "failed: " + r.error
        : r.reached      ? fmt::format("reached {:.3f} at step {} ({:.3g} s)", r.final_accuracy, r.steps, r.seconds)
                    : fmt::format("did not reach the target in {} steps (accuracy {:.3f})", r.steps, r.final_accuracy);
    fmt::print(stderr, "[{}/{}] {} seed {}: {}\n", done.size(), o.configs.size() * static_cast<std::size_t>(o.runs),
               o.configs[r.config].label(), r.seed, what);
  };
  try {
    run_to_target(o, on_run);
  } catch (const Interrupted&) {
    throw Interrupted(fmt::format("{} run(s) done{}", done.size(), a.output.empty() ? "" : " and in " + a.output));
  }
  fmt::print("{}", render_to_target(score_to_target(o, done, price, a.currency), format));
}

}  // namespace

void add_to_target_command(CLI::App& app) {
  auto a = std::make_shared<ToTargetArgs>();
  CLI::App* cmd = app.add_subcommand(
      "train-to-target",
      "Train a reference network on an offline dataset until its validation accuracy reaches --target, --runs\n"
      "seeded times per configuration (each in a fresh process of its backend, seed-major so a slow stretch of\n"
      "the machine touches every configuration), and score time, steps, samples and cost to the target as\n"
      "MLPerf Training does (olympic mean) with 95% bootstrap intervals; each configuration against the first.");
  ToTargetOptions& o = a->options;
  cmd->add_option("--model", o.model,
                  "ff or cnn, adapted to the data's shape and classes, or a TorchScript file (torch, libtorch), a "
                  "torch.export .pt2 (torch) or a SavedModel directory (tensorflow) with a dynamic batch that takes "
                  "the images (or them flattened) and returns [N, classes] logits (its weights redrawn by each run's "
                  "seed)")
      ->capture_default_str();
  cmd->add_option("--dataset", o.dataset, "digits: scikit-learn's 8x8 digits, inside its wheel (never downloaded)")
      ->capture_default_str();
  cmd->add_option("--target", o.target, "Validation accuracy to reach")->capture_default_str();
  cmd->add_option("--eval-every", o.eval_every, "Training steps between evaluations on the whole validation split")
      ->capture_default_str();
  cmd->add_option("--max-steps", o.max_steps, "A run that has not reached the target by then did not reach it")
      ->capture_default_str();
  cmd->add_option("--runs", o.runs, "Seeded runs per configuration (at least 3; MLPerf: 5 or 10)")
      ->capture_default_str();
  cmd->add_option("--seed", o.seed, "The first run's seed (weights and batch order); runs take seed, seed+1, ...")
      ->capture_default_str();
  cmd->add_option("--split-seed", o.split_seed, "Seed of the stratified train/validation split (the same in every run)")
      ->capture_default_str();
  cmd->add_option("--val-fraction", o.val_fraction, "Share of each class held out for validation")
      ->capture_default_str();
  cmd->add_option("--width", o.width, "The network's width")->capture_default_str();
  cmd->add_option("--depth", o.depth, "The network's depth")->capture_default_str();
  cmd->add_option("--threads", o.threads, "Intra-op threads of each run")->capture_default_str();
  cmd->add_option("--optimizer", o.optimizer, "sgd (momentum 0.9) or adam")->capture_default_str();
  cmd->add_option("--backend", a->backends,
                  "torch (the Python worker), libtorch (the C++ engine), jax (jax.numpy in the worker), tensorflow "
                  "(tf ops in the worker), or several: the same split, weights and batches per seed in each")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--mode", a->modes,
                  "eager, compiled (torch: torch.compile; libtorch: TorchScript; jax: jax.jit; tensorflow: "
                  "tf.function; before the clock starts), or both")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--precision", a->precisions, "fp32, bf16-mixed (torch.autocast), or both")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--batch", a->batches, "Batch sizes to compare")->delimiter(',')->capture_default_str();
  cmd->add_option("--lr", a->lrs, "Learning rates to compare")->delimiter(',')->capture_default_str();
  cmd->add_option("--price-per-hour", a->price_per_hour, "Price of this machine per hour, for cost to target");
  cmd->add_option("--currency", a->currency, "Currency label of the price")->capture_default_str();
  cmd->add_option("-o,--output", a->output,
                  "JSON file of the study, rewritten atomically after every run (so Ctrl-C keeps the finished runs); "
                  "the default file is never replaced")
      ->capture_default_str();
  add_format_option(*cmd, a->format);
  cmd->callback([cmd, a] { run_to_target_command(*cmd, *a); });
}

}  // namespace neuralcost::cli
