// The options of the commands that run models (profile, study): parsed here, turned into the
// library's requests by prepare_run.
#pragma once

#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "neuralcost/hardware/spec.hpp"
#include "neuralcost/importer.hpp"
#include "neuralcost/measure/profile.hpp"

namespace neuralcost::cli {

/// The options of the commands that run models (profile, study).
struct RunArgs {
  std::vector<std::string> models;
  std::vector<std::string> inputs;        // NAME=SHAPE[:DTYPE[:LOW..HIGH]]
  std::vector<std::string> input_shapes;  // SHAPE[:DTYPE[:LOW..HIGH]], by position
  std::vector<std::string> backends;      // empty: chosen from each model
  double worker_timeout = 300;
  std::vector<std::string> modes = {"eager"};
  std::vector<std::int64_t> batches = {1};
  std::int64_t seq = 32, width = 128, depth = 2;
  std::string phase = "prefill";              // decoder configs: the phase one pass is
  std::int64_t prompt = 512, context = 1024;  // decoder configs: prefill's tokens, decode's cached tokens
  std::set<std::string> given;                // the model options on the command line (ModelRequest::given)
  int threads = 0;
  std::string dtype = "fp32";
  std::string device = "cpu";
  std::string hardware;  // empty: the device's own (host for cpu)
  bool allow_hardware_mismatch = false;
  std::string format = "table";
  std::string output;
  double budget = 2.0;
  double target_ci = 0.02;
  int warmup = 5;
  double warmup_seconds = 0.2;
  int layer_runs = 20;
  int rounds = 6, max_rounds = 12, preparations = 1;
  bool max_rounds_given = false;  // set by the command when --max-rounds is on its line
  double ok_within = 5;
  std::uint64_t seed = 1;
  bool summary_only = false;
  // training (--train); the others are refused without it. Empty or NaN: not given
  bool train = false;
  std::string optimizer, precision, checkpoint, betas;
  double learning_rate = kNotGiven, momentum = kNotGiven, eps = kNotGiven, weight_decay = kNotGiven;
  std::int64_t labels_seed = -1;
  static constexpr double kNotGiven = std::numeric_limits<double>::quiet_NaN();
};

/// Registers the model, backend, mode, batch, size, device, hardware, timing and training options.
void add_run_options(CLI::App& cmd, RunArgs& args);

/// What a run command runs: the models with their backends, the model options, the profile
/// options and the roofline spec (checked before anything slow runs).
struct RunSetup {
  std::vector<ModelBackends> plan;
  ModelRequest base;
  ProfileOptions options;
  HardwareSpec hardware;
};
RunSetup prepare_run(const RunArgs& args);

}  // namespace neuralcost::cli
