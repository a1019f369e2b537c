// The analyze pipeline (`neural-cost analyze`): each requested model imported, analysed on a
// hardware spec, and, for a training step, its ledger and the largest batch that fits a memory
// budget. The CLI parses options into an AnalyzeRequest and prints what this returns.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "neuralcost/analysis/roofline.hpp"
#include "neuralcost/hardware/spec.hpp"
#include "neuralcost/importer.hpp"
#include "neuralcost/training/training_report.hpp"

namespace neuralcost {

struct AnalyzeRequest {
  std::vector<ModelRequest> models;  ///< model_requests() of the models and batches asked for
  HardwareSpec hardware;
  std::optional<TrainingOptions> train;  ///< analyse a training step instead of a forward pass
  /// training only: find the largest batch whose step fits this many bytes, less `reserve`
  std::optional<std::uint64_t> memory_budget;
  double reserve = 0;
};

struct AnalyzeResults {
  /// per model, in request order: the forward pass, or the training step (= reports[i].step)
  std::vector<Analysis> analyses;
  std::vector<TrainingReport> reports;  ///< per model, for a training request; empty otherwise
};

/// Imports (registry.hpp, importer_for) and analyses every model of `request`. An analysis error
/// of a model file names the file ("m.onnx: ..."); a budget search of a model that fixes its batch
/// is kInvalidArgument. kInvalidArgument for a memory budget without training.
AnalyzeResults analyze_models(const AnalyzeRequest& request);

/// The model's dtype for a training precision: the low-precision type of mixed precision (its
/// fp32 master weights and optimizer state are the optimizer step's), `asked` for fp32.
/// kInvalidArgument when `asked_explicitly` names another one ("--dtype fp32 contradicts
/// --precision bf16-mixed (which computes in bf16)").
DType training_model_dtype(Precision precision, DType asked, bool asked_explicitly);

/// kInvalidArgument for the first analysis that is mostly unmodeled (Analysis::mostly_unmodeled):
/// its totals mean nothing, so it is not a result. Partly unmodeled ones pass (their views say so).
void refuse_mostly_unmodeled(const std::vector<Analysis>& analyses);

}  // namespace neuralcost
