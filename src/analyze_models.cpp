// The analyze pipeline (analyze_models.hpp).
#include "neuralcost/analyze_models.hpp"

#include <fmt/format.h>

#include <cmath>

#include "importers/decoder/decoder_importer.hpp"
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

double expected_tokens_per_round(std::int64_t draft_tokens, double acceptance) {
  if (draft_tokens < 1 || draft_tokens > 64) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("--draft-tokens {} must be from 1 to 64", draft_tokens));
  }
  if (!(acceptance >= 0 && acceptance <= 1)) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("--acceptance {} must be from 0 to 1", acceptance));
  }
  if (acceptance == 1) return static_cast<double>(draft_tokens + 1);
  return (1 - std::pow(acceptance, static_cast<double>(draft_tokens + 1))) / (1 - acceptance);
}

SpeculativeEstimate analyze_speculative(const SpeculativeRequest& request) {
  SpeculativeEstimate out;
  out.request = request;
  out.expected_tokens = expected_tokens_per_round(request.draft_tokens, request.acceptance);
  const DecoderConfig target = decoder_config_of(request.target, "the target");
  const DecoderConfig draft = decoder_config_of(request.draft, "--draft");
  if (target.vocab != draft.vocab) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--draft {} has a vocabulary of {} tokens and {} one of {}: a draft must share the target's "
                            "tokenizer", request.draft, draft.vocab, request.target, target.vocab));
  }
  const auto step = [&](const DecoderConfig& c, const std::string& model, std::int64_t context, std::int64_t tokens) {
    DecoderRequest r;
    r.phase = DecoderPhase::kDecode;
    r.batch = request.batch;
    r.context = context;
    r.tokens = tokens;
    r.dtype = request.dtype.value_or(DType::kBf16);
    const std::string base = model.substr(model.find_last_of('/') + 1);
    try {
      return analyze(build_decoder(c, r, fmt::format("{} ({} token{} at context {})", base, tokens, tokens > 1 ? "s" : "",
                                                     context)),
                     request.hardware);
    } catch (const Error& e) {
      throw Error(e.code(), fmt::format("{}: {}", model, e.what()));
    }
  };
  out.target_step = step(target, request.target, request.context, 1);
  for (std::int64_t i = 0; i < request.draft_tokens; ++i) {
    out.draft_steps.push_back(step(draft, request.draft, request.context + i, 1));
  }
  out.verify_step = step(target, request.target, request.context, request.draft_tokens + 1);
  double drafting = 0;
  for (const Analysis& a : out.draft_steps) drafting += a.totals.fused_lower_bound_seconds;
  out.round_seconds = drafting + out.verify_step.totals.fused_lower_bound_seconds;
  const auto speedup_at = [&](double acceptance) {
    return out.target_step.totals.fused_lower_bound_seconds * expected_tokens_per_round(request.draft_tokens, acceptance) /
           out.round_seconds;
  };
  out.seconds_per_token = out.round_seconds / out.expected_tokens;
  out.speedup = speedup_at(request.acceptance);
  if (speedup_at(1) >= 1) {
    double low = 0, high = 1;  // the speedup grows with the acceptance
    for (int i = 0; i < 60; ++i) (speedup_at((low + high) / 2) < 1 ? low : high) = (low + high) / 2;
    out.break_even_acceptance = high;
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
