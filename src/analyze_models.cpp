// The analyze pipeline (analyze_models.hpp).
#include "neuralcost/analyze_models.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include "importers/decoder/decoder_importer.hpp"
#include "neuralcost/core/checked_math.hpp"
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
          throw Error(
              ErrorCode::kInvalidArgument,
              fmt::format("{} fixes its batch at {}: --memory-budget cannot change it", request.model, g.batch()));
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
  for (ModelRequest model : request.models) {
    model.training = request.train.has_value();
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
  const DecoderConfig target = decoder_config_of(request.target, "the target", request.variant);
  DecoderVariant draft_variant = request.variant;
  draft_variant.routing.clear();  // a histogram of the target's experts
  const DecoderConfig draft = decoder_config_of(request.draft, "--draft", draft_variant);
  if (target.vocab != draft.vocab) {
    throw Error(
        ErrorCode::kInvalidArgument,
        fmt::format("--draft {} has a vocabulary of {} tokens and {} one of {}: a draft must share the target's "
                    "tokenizer",
                    request.draft, draft.vocab, request.target, target.vocab));
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
      return analyze(
          build_decoder(c, r,
                        fmt::format("{} ({} token{} at context {})", base, tokens, tokens > 1 ? "s" : "", context)),
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
    return out.target_step.totals.fused_lower_bound_seconds *
           expected_tokens_per_round(request.draft_tokens, acceptance) / out.round_seconds;
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

namespace {

/// One decode step's figures and what must stay the same between two contexts for them to be
/// affine in between: per op its roof and memory level, per fusion group its roof and rate.
/// The roof and memory level of each op and fusion group of an analysis.
std::vector<std::string> signature_of(const Analysis& a) {
  std::vector<std::string> out;
  for (const OpRoofline& op : a.ops)
    out.push_back(op.bound ? fmt::format("{} {}", bound_name(*op.bound), op.memory_level) : "-");
  for (const FusionGroup& g : a.fusion_groups) {
    const double work =
        g.bound == Bound::kMemory ? static_cast<double>(g.bytes_read + g.bytes_written) : static_cast<double>(g.flops);
    out.push_back(
        fmt::format("{} {:.9g}", bound_name(g.bound), g.lower_bound_seconds > 0 ? work / g.lower_bound_seconds : 0));
  }
  return out;
}

/// Seconds of the ops bound by compute (what decides ModelTotals::bound).
double compute_bound_seconds(const Analysis& a) {
  double s = 0;
  for (const OpRoofline& op : a.ops) {
    if (op.bound == Bound::kCompute) s += op.lower_bound_seconds;
  }
  return s;
}

/// t1 + (n − 1)(t2 − t1), exactly for counts (t2 ≥ t1: a second layer only adds).
std::uint64_t onward(std::uint64_t t1, std::uint64_t t2, std::int64_t n, const char* what) {
  if (t2 < t1) throw Error(ErrorCode::kInternal, fmt::format("a decoder's second layer took {} away", what));
  return checked_add(t1, checked_mul(t2 - t1, static_cast<std::uint64_t>(n - 1), what), what);
}
double onward(double t1, double t2, std::int64_t n) { return t1 + static_cast<double>(n - 1) * (t2 - t1); }

__extension__ typedef __int128 Wide;  // exact products of 64-bit counts and step counts

bool affine(std::uint64_t fa, std::uint64_t fm, std::uint64_t fb, std::int64_t a, std::int64_t m, std::int64_t b) {
  return (static_cast<Wide>(fm) - fa) * (b - a) == (static_cast<Wide>(fb) - fa) * (m - a);
}
bool affine(double fa, double fm, double fb, std::int64_t a, std::int64_t m, std::int64_t b) {
  const double chord = fa + (fb - fa) * static_cast<double>(m - a) / static_cast<double>(b - a);
  return std::abs(chord - fm) <= 1e-9 * std::max(std::abs(fm), 1e-30);
}
std::uint64_t series(std::uint64_t fa, std::uint64_t fb, std::int64_t n) {
  const Wide twice = (static_cast<Wide>(fa) + fb) * n;
  if (twice % 2 != 0 || twice / 2 > static_cast<Wide>(UINT64_MAX)) {
    throw Error(ErrorCode::kOutOfRange, "a generation's summed figures overflow 64 bits");
  }
  return static_cast<std::uint64_t>(twice / 2);
}
void add(StepSums& to, const StepSums& s) {
  to.flops = checked_add(to.flops, s.flops, "generation FLOPs");
  to.contraction_flops = checked_add(to.contraction_flops, s.contraction_flops, "generation FLOPs");
  to.bytes_read = checked_add(to.bytes_read, s.bytes_read, "generation bytes");
  to.bytes_written = checked_add(to.bytes_written, s.bytes_written, "generation bytes");
  to.lower_bound_seconds += s.lower_bound_seconds;
  to.fused_lower_bound_seconds += s.fused_lower_bound_seconds;
}

}  // namespace

DecoderStep analyze_decoder_step(const DecoderConfig& config, const DecoderRequest& request,
                                 const HardwareSpec& hardware, const std::string& name) {
  // layers alike: every one dense or every one with experts, and one window for all (gemma2's
  // alternate between a window and none), and one routing for all (a measured one differs by layer)
  const bool alike = (config.moe_layer_count() == 0 || config.moe_layer_count() == config.layers) &&
                     config.sliding_layers.empty() && !config.routing;
  if (!alike || config.layers < 3) {
    const Analysis a = analyze(build_decoder(config, request, name), hardware);
    return {a.totals, signature_of(a)};
  }
  // the whole model's state, from the state of graphs of one and two layers (it too is affine)
  DecoderConfig one = config, two = config;
  one.layers = 1;
  two.layers = 2;
  OpGraph g1 = build_decoder(one, request, name), g2 = build_decoder(two, request, name);
  AnalysisOptions options;
  options.resident_bytes = onward(resident_bytes_of(g1), resident_bytes_of(g2), config.layers);
  const Analysis a1 = analyze(std::move(g1), hardware, options), a2 = analyze(std::move(g2), hardware, options);
  const std::int64_t n = config.layers;
  const ModelTotals &x = a1.totals, &y = a2.totals;
  ModelTotals t;
  t.flops = onward(x.flops, y.flops, n, "FLOP count");
  t.contraction_flops = onward(x.contraction_flops, y.contraction_flops, n, "FLOP count");
  t.transcendentals = onward(x.transcendentals, y.transcendentals, n, "transcendental count");
  t.bytes_read = onward(x.bytes_read, y.bytes_read, n, "bytes read");
  t.bytes_written = onward(x.bytes_written, y.bytes_written, n, "bytes written");
  t.parameter_count = onward(x.parameter_count, y.parameter_count, n, "parameter count");
  t.buffer_count = onward(x.buffer_count, y.buffer_count, n, "buffer count");
  t.parameter_bytes = onward(x.parameter_bytes, y.parameter_bytes, n, "parameter bytes");
  t.fused_bytes_read = onward(x.fused_bytes_read, y.fused_bytes_read, n, "bytes read");
  t.fused_bytes_written = onward(x.fused_bytes_written, y.fused_bytes_written, n, "bytes written");
  t.compute_seconds = onward(x.compute_seconds, y.compute_seconds, n);
  t.memory_seconds = onward(x.memory_seconds, y.memory_seconds, n);
  t.lower_bound_seconds = onward(x.lower_bound_seconds, y.lower_bound_seconds, n);
  t.dram_lower_bound_seconds = onward(x.dram_lower_bound_seconds, y.dram_lower_bound_seconds, n);
  t.fused_lower_bound_seconds = onward(x.fused_lower_bound_seconds, y.fused_lower_bound_seconds, n);
  const std::uint64_t bytes = t.bytes_read + t.bytes_written;
  t.arithmetic_intensity = bytes == 0 ? 0.0 : static_cast<double>(t.flops) / static_cast<double>(bytes);
  t.bound = onward(compute_bound_seconds(a1), compute_bound_seconds(a2), n) * 2 > t.lower_bound_seconds
                ? Bound::kCompute
                : Bound::kMemory;
  std::vector<std::string> signature = signature_of(a1);
  for (std::string& s : signature_of(a2)) signature.push_back(std::move(s));
  return {t, std::move(signature)};
}

GenerationEstimate analyze_generation(const GenerationRequest& request) {
  if (request.generate < 1 || request.generate >= (std::int64_t{1} << 31)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--generate {} must be a positive integer below 2^31", request.generate));
  }
  const DecoderConfig config = decoder_config_of(request.model, "--phase generate: the model", request.variant);
  if (request.prompt + request.generate - 1 > config.max_positions) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("a prompt of {} and {} generated tokens are beyond the model's {} positions "
                            "(max_position_embeddings)",
                            request.prompt, request.generate, config.max_positions));
  }
  const std::string base = request.model.substr(request.model.find_last_of('/') + 1);
  const auto graph = [&](DecoderPhase phase, std::int64_t context) {
    DecoderRequest r;
    r.phase = phase;
    r.batch = request.batch;
    r.prompt = request.prompt;
    r.context = context;
    r.dtype = request.dtype.value_or(DType::kBf16);
    const std::string name = phase == DecoderPhase::kPrefill
                                 ? fmt::format("{} (prefill of {} tokens)", base, request.prompt)
                                 : fmt::format("{} (decode at context {})", base, context);
    try {
      return analyze_decoder_step(config, r, request.hardware, name);
    } catch (const Error& e) {
      throw Error(e.code(), fmt::format("{}: {}", request.model, e.what()));
    }
  };
  GenerationEstimate out;
  out.request = request;
  out.prefill = graph(DecoderPhase::kPrefill, 0).totals;
  out.decode_steps = request.generate - 1;
  if (out.decode_steps == 0) return out;
  struct StepPoint {
    StepSums sums;
    std::vector<std::string> signature;
  };
  std::map<std::int64_t, StepPoint> points;
  const auto at = [&](std::int64_t c) -> const StepPoint& {
    auto it = points.find(c);
    if (it != points.end()) return it->second;
    DecoderStep a = graph(DecoderPhase::kDecode, c);
    if (c == request.prompt) out.first_step = a.totals;
    if (c == request.prompt + out.decode_steps - 1) out.last_step = a.totals;
    const ModelTotals& t = a.totals;
    StepPoint p{{t.flops, t.contraction_flops, t.bytes_read, t.bytes_written, t.lower_bound_seconds,
                 t.fused_lower_bound_seconds},
                std::move(a.signature)};
    return points.emplace(c, std::move(p)).first->second;
  };
  // contexts a..b inclusive
  const std::function<void(std::int64_t, std::int64_t)> sum = [&](std::int64_t a, std::int64_t b) {
    if (b - a < 2) {
      for (std::int64_t c = a; c <= b; ++c) add(out.decode, at(c).sums);
      return;
    }
    const std::int64_t m = a + (b - a) / 2;
    const StepPoint &pa = at(a), &pm = at(m), &pb = at(b);
    const StepSums &x = pa.sums, &y = pm.sums, &z = pb.sums;
    if (pa.signature == pb.signature && pa.signature == pm.signature && affine(x.flops, y.flops, z.flops, a, m, b) &&
        affine(x.contraction_flops, y.contraction_flops, z.contraction_flops, a, m, b) &&
        affine(x.bytes_read, y.bytes_read, z.bytes_read, a, m, b) &&
        affine(x.bytes_written, y.bytes_written, z.bytes_written, a, m, b) &&
        affine(x.lower_bound_seconds, y.lower_bound_seconds, z.lower_bound_seconds, a, m, b) &&
        affine(x.fused_lower_bound_seconds, y.fused_lower_bound_seconds, z.fused_lower_bound_seconds, a, m, b)) {
      const std::int64_t n = b - a + 1;
      add(out.decode, {series(x.flops, z.flops, n), series(x.contraction_flops, z.contraction_flops, n),
                       series(x.bytes_read, z.bytes_read, n), series(x.bytes_written, z.bytes_written, n),
                       (x.lower_bound_seconds + z.lower_bound_seconds) * static_cast<double>(n) / 2,
                       (x.fused_lower_bound_seconds + z.fused_lower_bound_seconds) * static_cast<double>(n) / 2});
      return;
    }
    sum(a, m);
    sum(m + 1, b);
  };
  sum(request.prompt, request.prompt + out.decode_steps - 1);
  out.analysed_steps = points.size();
  return out;
}

Precision default_training_precision(const std::vector<std::string>& models) {
  if (models.empty()) return Precision::kFp32;
  const auto& presets = decoder_preset_names();
  for (const std::string& m : models) {
    const bool decoder =
        std::find(presets.begin(), presets.end(), m) != presets.end() || decoder_config_file(m).has_value();
    if (!decoder) return Precision::kFp32;
  }
  return Precision::kBf16Mixed;
}

DType training_model_dtype(Precision precision, DType asked, bool asked_explicitly) {
  if (precision == Precision::kFp32) return asked_explicitly ? asked : DType::kFp32;
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

ShardCostCache model_parallel_costs(const std::string& model, const HardwareSpec& hardware,
                                    const std::string& routing) {
  DecoderVariant variant;
  variant.routing = routing;
  return ShardCostCache(
      decoder_config_of(model, "--parallel with tp or pp (or --search --devices): the model", variant), hardware);
}

TensorParallelStep analyze_tensor_parallel(const std::string& model, const DecoderRequest& request, int tp,
                                           const HardwareSpec& hardware, const InterconnectSpec& link,
                                           int devices_per_node) {
  const DecoderConfig config = decoder_config_of(model, "--parallel tp=N: the model", request.variant);
  const std::string base = model.substr(model.find_last_of('/') + 1);
  const std::string name = request.phase == DecoderPhase::kPrefill
                               ? fmt::format("{} (prefill of {} tokens)", base, request.prompt)
                               : fmt::format("{} (decode at context {})", base, request.context);
  try {
    return tensor_parallel_step(config, request, tp, hardware, link, devices_per_node, name);
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("{}: {}", model, e.what()));
  }
}

std::vector<ServingCapacity> analyze_serving_capacity(const std::string& model, DType dtype, std::int64_t context,
                                                      std::uint64_t budget, double reserve, int max_tp,
                                                      std::int64_t concurrency, const DecoderVariant& variant) {
  const DecoderConfig config = decoder_config_of(model, "--memory-budget with --phase decode: the model", variant);
  if (context < 1 || context >= (std::int64_t{1} << 31)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--context {} must be a positive integer below 2^31", context));
  }
  if (context >= config.max_positions) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--context {} is beyond {}'s {} positions", context, model, config.max_positions));
  }
  std::vector<ServingCapacity> out;
  for (int tp : tensor_parallel_degrees(config, max_tp)) {
    out.push_back(serving_capacity(config, dtype, context + 1, tp, budget, reserve, concurrency));
  }
  return out;
}

ServingChoice analyze_serving_choice(const std::string& model, const DecoderRequest& request, double target_seconds,
                                     double reserve,
                                     const std::function<std::optional<double>(const std::string&)>& price_of) {
  const DecoderConfig config = decoder_config_of(model, "--target-ms-per-token: the model", request.variant);
  if (request.context < 1 || request.context >= (std::int64_t{1} << 31)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--context {} must be a positive integer below 2^31", request.context));
  }
  if (request.context >= config.max_positions) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--context {} is beyond {}'s {} positions", request.context, model, config.max_positions));
  }
  try {
    return choose_serving(config, request, target_seconds, reserve, price_of,
                          fmt::format("{} (decode at context {})", model, request.context));
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("{}: {}", model, e.what()));
  }
}

}  // namespace neuralcost
