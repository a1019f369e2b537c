// The analyze pipeline (analyze_models.hpp).
#include "neuralcost/analyze_models.hpp"

#include <fmt/format.h>

#include "neuralcost/core/error.hpp"
#include "neuralcost/registry.hpp"

namespace neuralcost {
namespace {

/// The largest batch of `request` whose training step fits: every probed batch is a real graph of
/// the model at that batch.
BatchFit fit_budget(const Importer& importer, const ModelRequest& request, const AnalyzeRequest& asked) {
  return largest_batch(
      [&](std::int64_t batch) {
        ModelRequest at = request;
        at.batch = batch;
        at.given.insert("batch");
        OpGraph g = importer.import(at);
        if (g.batch() != 0 && g.batch() != batch) {
          throw Error(ErrorCode::kInvalidArgument,
                      fmt::format("{} fixes its batch at {}: --memory-budget cannot change it", request.model,
                                  g.batch()));
        }
        return g;
      },
      *asked.train, *asked.memory_budget, asked.reserve);
}

}  // namespace

AnalyzeResults analyze_models(const AnalyzeRequest& request) {
  if (request.memory_budget && !request.train) {
    throw Error(ErrorCode::kInvalidArgument, "--memory-budget applies only with --train");
  }
  AnalyzeResults out;
  for (const ModelRequest& model : request.models) {
    const Importer& importer = importer_for(model);
    const OpGraph graph = importer.import(model);
    try {
      if (!request.train) {
        out.analyses.push_back(analyze(graph, request.hardware));
        continue;
      }
      out.reports.push_back(training_report(graph, request.hardware, *request.train));
      if (request.memory_budget) out.reports.back().fit = fit_budget(importer, model, request);
      out.analyses.push_back(out.reports.back().step);
    } catch (const Error& e) {
      // importers name the file in their own errors; the analysis names the op, so add the file
      if (importer.name() == "reference") throw;
      throw Error(e.code(), fmt::format("{}: {}", model.model, e.what()));
    }
  }
  return out;
}

DType training_model_dtype(Precision precision, DType asked, bool asked_explicitly) {
  if (precision == Precision::kFp32) return asked;
  const DType low = precision == Precision::kBf16Mixed ? DType::kBf16 : DType::kFp16;
  if (asked_explicitly && asked != low) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--dtype {} contradicts --precision {} (which computes in {})", dtype_name(asked),
                            precision_name(precision), dtype_name(low)));
  }
  return low;
}

void refuse_mostly_unmodeled(const std::vector<Analysis>& analyses) {
  for (const Analysis& a : analyses) {
    if (a.mostly_unmodeled()) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: {} of {} ops are not modeled, so its totals mean nothing; {}", a.model,
                              a.unmodeled.size(), a.ops.size(), a.first_fix()));
    }
  }
}

}  // namespace neuralcost
