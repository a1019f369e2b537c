// The LibTorch backend: runs the reference networks (torch::nn, eager) and TorchScript
// (compiled: scripted, frozen, optimized for inference), and loads users' TorchScript files.
// This header is free of torch includes so the registry can list the backend.
#pragma once

#include "neuralcost/backend.hpp"

namespace neuralcost {

const Backend& libtorch_backend();

}  // namespace neuralcost
