// Cost to a quality target (docs/to-target.md): seeded training runs of a reference network on an
// offline dataset until its validation accuracy reaches a target, in the torch worker or LibTorch; scored as
// MLPerf Training scores time to train (the olympic mean, time_to_target.hpp), with bootstrap
// intervals over the runs, per-step throughput and the price, for each configuration compared.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "neuralcost/core/statistics.hpp"
#include "neuralcost/measure/time_to_target.hpp"

namespace neuralcost {

/// One configuration the runs compare.
struct ToTargetConfig {
  std::string backend = "torch";  ///< torch, jax, tensorflow (the Python worker) or libtorch (its own engine)
  std::string mode =
      "eager";  ///< eager or compiled (torch.compile, TorchScript, jax.jit, tf.function: before the clock)
  std::string precision = "fp32";  ///< fp32 or bf16-mixed (torch.autocast to bfloat16)
  std::int64_t batch = 32;
  double lr = 0.05;
  std::string label() const;  ///< "torch eager fp32 batch 32 lr 0.05"
};

struct ToTargetOptions {
  /// ff or cnn, adapted to the data's shape and classes, or the user's TorchScript file,
  /// torch.export program or SavedModel that takes the images (or them flattened) and returns
  /// [N, classes] logits
  std::string model = "ff";
  /// to_target_model_kind(model) as recorded where the study ran (read back from its file); empty:
  /// derive it from `model`
  std::string model_kind;
  std::string dataset = "digits";
  double target = 0.95;    ///< validation accuracy to reach
  int eval_every = 20;     ///< steps between evaluations on the whole validation split
  int max_steps = 2000;    ///< a run that has not reached the target by then did not converge
  int runs = 5;            ///< seeded runs per configuration (MLPerf: 5 or 10; the olympic mean drops 2)
  std::uint64_t seed = 1;  ///< runs take seeds seed, seed + 1, ...
  double val_fraction = 0.2;
  std::uint64_t split_seed = 0;  ///< of the stratified split: the same validation images in every run
  int width = 64, depth = 2;
  bool sizes_given = false;       ///< --width or --depth set (an error with a model file)
  int threads = 1;                ///< intra-op threads of each run
  std::string optimizer = "sgd";  ///< sgd (momentum 0.9) or adam
  std::vector<ToTargetConfig> configs;
  double step_timeout_seconds = 3600;  ///< a run's reply deadline
};

/// What --model names: "reference" (ff, cnn), "torch.export program" (a .pt2), "SavedModel" (a
/// directory) or "TorchScript" (any other file).
std::string to_target_model_kind(const std::string& model);

/// Throws kInvalidArgument naming the option when the options cannot work.
void validate(const ToTargetOptions& options);

/// An evaluation of a run.
struct CurvePoint {
  std::int64_t step = 0, samples = 0;
  double seconds = 0;        ///< since the run's clock started (training and evaluations)
  double train_seconds = 0;  ///< its training steps alone
  double accuracy = 0, loss = 0;
};

struct ToTargetRun {
  std::size_t config = 0;
  std::uint64_t seed = 0;
  bool reached = false;
  std::int64_t steps = 0;  ///< to the target when reached, else all it ran
  std::int64_t samples = 0;
  double seconds = 0;  ///< time to target (MLPerf's: evaluations included, compilation not)
  double train_seconds = 0;
  double compile_seconds = 0;
  double final_accuracy = 0;
  bool diverged = false;  ///< the loss went non-finite
  std::vector<CurvePoint> curve;
  std::string error;  ///< when the run failed (the others go on)
  std::int64_t train_images = 0, val_images = 0, parameters = 0;
  /// the engine's version: "2.15.0" (torch), "LibTorch 1.13.0", "JAX 0.10.2", "TensorFlow 2.21.0"
  std::string torch_version;
  /// the loss of the run's first batch before any update: the seed's initial weights on the seed's
  /// first batch, the same in every backend (they draw both alike); absent in older study files
  std::optional<double> first_loss;
  /// the run's process's peak resident memory (its Python, torch and data included: a fresh
  /// process a run); 0 when unknown (a study file from before it was recorded)
  std::int64_t peak_rss_bytes = 0;
};

/// A 95 % percentile-bootstrap interval of a mean over runs, with the mean.
struct MeanInterval {
  double mean = 0;
  std::optional<Interval> ci95;  ///< absent below 2 values
};

struct ToTargetSummary {
  ToTargetConfig config;
  std::size_t runs = 0, reached = 0, failed = 0;
  OlympicScore score;                ///< time to target, MLPerf's olympic mean
  MeanInterval seconds;              ///< time to target over the runs that reached it
  MeanInterval samples;              ///< samples to target
  MeanInterval steps;                ///< steps to target
  double steps_per_second = 0;       ///< training throughput: the reached runs' steps over their training time
  double samples_per_second = 0;     ///< steps_per_second x the configuration's batch
  double median_peak_rss_bytes = 0;  ///< over the runs that recorded it; 0 when none did
  std::optional<MeanInterval> cost;  ///< time to target x price, when priced
  double median_final_accuracy = 0;
};

/// The configuration's summary from its runs (bootstrap seeded: the same runs, the same intervals).
ToTargetSummary summarize_to_target(const ToTargetConfig& config, const std::vector<ToTargetRun>& runs,
                                    std::optional<double> price_per_hour);

/// Configuration b against a: the ratios of b's means over a's, with
/// bootstrap intervals over both sets of reached runs (resampled independently).
struct ToTargetContrast {
  std::size_t a = 0, b = 0;
  std::optional<MeanInterval> seconds_ratio, steps_ratio;  ///< absent unless both have 2+ reached runs
  double throughput_ratio = 0;                             ///< b's steps/s over a's
  std::string verdict;  ///< "cheaper to the target", "dearer to the target", "no clear difference", ...
};
ToTargetContrast contrast_to_target(std::size_t a, std::size_t b, const std::vector<ToTargetRun>& runs_a,
                                    const std::vector<ToTargetRun>& runs_b, double throughput_a, double throughput_b);

/// Runs every configuration `options.runs` times, seed-major (seed s of every configuration, then
/// s + 1) so that a slow stretch of the machine touches every configuration, each run in a fresh
/// worker process. `on_run` after each run (to save it); a failed run is recorded with its error
/// and the others go on. Throws kNotFound when the torch worker's Python cannot run, and the
/// worker's own error (kInvalidArgument) for a request it refuses before any run is kept.
std::vector<ToTargetRun> run_to_target(const ToTargetOptions& options,
                                       const std::function<void(const ToTargetRun&)>& on_run);

/// Whether the backends started a seed alike: every two runs in different backends (torch,
/// libtorch, jax, tensorflow) with the same seed, precision and batch (mode and learning rate do not change
/// the first batch's loss) compared by their first_loss. The same weights on the same images give the same loss but for
/// the kernels' rounding; `same` when every pair agrees within 1e-4 relative.
struct StartAgreement {
  std::size_t pairs = 0;
  double largest_relative_difference = 0;
  bool same = true;
};

/// A train-to-target study: its runs, each configuration's summary and each configuration against
/// the first.
struct ToTargetStudy {
  ToTargetOptions options;
  std::vector<ToTargetRun> runs;
  std::vector<ToTargetSummary> summaries;   ///< one per configuration, in order
  std::vector<ToTargetContrast> contrasts;  ///< configuration i (i >= 1) against configuration 0
  std::optional<double> price_per_hour;
  std::string currency = "USD";
  std::string cpu;                      ///< the machine the runs ran on
  std::optional<StartAgreement> start;  ///< when two backends ran a seed alike
};

/// Summaries and contrasts from the runs (those of a configuration in the order they ran).
ToTargetStudy score_to_target(const ToTargetOptions& options, std::vector<ToTargetRun> runs,
                              std::optional<double> price_per_hour, std::string currency);

nlohmann::json to_json(const ToTargetRun& run);
nlohmann::json to_json(const ToTargetStudy& study);
/// Whether `document` is a train-to-target study's JSON (its "kind").
bool is_to_target_study(const nlohmann::json& document);
/// The study a train-to-target JSON file holds (`where` names it in errors): its contract,
/// configurations and runs read back, then scored again by score_to_target (the same runs give the
/// same summaries and intervals). kInvalidArgument naming the field that is missing or of the
/// wrong type.
ToTargetStudy read_to_target_study(const nlohmann::json& document, const std::string& where);
/// The study in the file at `path` when it holds one (read_to_target_study, priced at
/// `price_per_hour` when given, else at the file's own price); nullopt for a file that is not one
/// JSON document of a train-to-target study (a results file, an unreadable path: the caller's).
std::optional<ToTargetStudy> read_to_target_file(const std::string& path, std::optional<double> price_per_hour);

}  // namespace neuralcost
