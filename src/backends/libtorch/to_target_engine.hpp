// Train-to-target in LibTorch (docs/to-target.md): one seeded run of a reference network (ff or
// cnn, torch::nn eager or its TorchScript twin) on the data the request carries, until its
// validation accuracy reaches the target. Served by the neuralcost-libtorch-to-target executable
// (to_target_main.cpp), one process a run, with the torch worker's protocol: one JSON request a
// line on stdin, one JSON reply a line on stdout.
#pragma once

#include <nlohmann/json.hpp>

namespace neuralcost::libtorch {

/// {"cmd": "run", "model", "mode", "precision", "optimizer", "batch", "lr", "target",
/// "eval_every", "max_steps", "seed", "width", "depth", "threads", "data": {"train_x", "train_y",
/// "val_x", "val_y", "image", "classes"}} -> the reply to_target.py's run gives: "reached",
/// "curve", "steps", "first_loss", "compile_seconds", "peak_rss_bytes", ...
///
/// The seed draws what the torch worker's seed draws, from the same CPU generator in the same
/// order: torch::manual_seed(seed), then Kaiming-uniform (a = sqrt 5) for every parameter of two
/// or more dimensions and U(-0.05, 0.05) for the others, in the module's parameter order; the
/// batch order is torch::randperm on a generator of its own seeded alike, a fresh permutation an
/// epoch. Throws Error(kInvalidArgument) for a request that cannot run.
nlohmann::json run_to_target(const nlohmann::json& request);

}  // namespace neuralcost::libtorch
