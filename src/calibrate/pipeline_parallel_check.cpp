// Measured pipeline-parallel steps against their prediction
// (include/neuralcost/calibrate/pipeline_parallel_check.hpp).
#include "neuralcost/calibrate/pipeline_parallel_check.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "calibrate/decoder_steps.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/hardware/host.hpp"
#include "neuralcost/parallel/model_parallel.hpp"

namespace neuralcost {
namespace {

using nlohmann::json;

void refuse(const std::string& message) { throw Error(ErrorCode::kInvalidArgument, message); }

}  // namespace

void check_pipeline_parallel_request(const PipelineParallelCheckRequest& r) {
  const DecoderConfig& c = r.config;
  const std::string model = r.model.empty() ? "the built-in decoder" : r.model;
  if (r.ranks < 2) refuse(fmt::format("--pipeline-parallel {}: a pipeline needs at least 2 stages", r.ranks));
  if (r.batch < 1 || r.tokens < 1) refuse("--batch and --prompt (tokens a sequence) must be at least 1");
  if (r.micro_batches < 1) refuse(fmt::format("--micro-batches {}: at least 1", r.micro_batches));
  if (r.batch >= (std::int64_t{1} << 31) / r.micro_batches) {
    refuse(fmt::format("--micro-batches {} of --batch {}: the sequences a step must stay below 2^31", r.micro_batches,
                       r.batch));
  }
  if (r.rounds < 1 || r.steps < 1) refuse("--rounds and the steps a round must be at least 1");
  if (r.tokens > c.max_positions && c.max_positions > 0) {
    refuse(fmt::format("--prompt {}: {} has {} positions", r.tokens, model, c.max_positions));
  }
  if (const std::string why = decoder_steps::unbuilt_feature(c, r.tokens); !why.empty()) {
    refuse(fmt::format("--pipeline-parallel runs Llama-family decoders; {} has {}", model, why));
  }
  if (c.layers % r.ranks != 0) {
    refuse(fmt::format("--pipeline-parallel {}: {} has {} layers, which {} stages do not share evenly", r.ranks, model,
                       c.layers, r.ranks));
  }
  if (r.link.measured.empty()) {
    refuse(
        fmt::format("--link {} was not calibrated on this machine (it has no measured collectives): "
                    "`neural-cost hardware calibrate --collectives --spec-output FILE`",
                    r.link.origin.empty() || r.link.origin == "built-in" ? r.link.id : r.link.origin));
  }
  // the model's own refusals, and whether the stages fit this machine, before anything runs
  const ModelParallelStep step = decoder_steps::predicted_step(
      c, decoder_steps::layout(1, r.ranks, r.batch, r.tokens, r.micro_batches, r.optimizer, r.link));
  // the worker makes every micro-batch's token ids and targets (8 B each) up front
  decoder_steps::check_fits_this_machine(
      step, 1, 16.0 * static_cast<double>(r.micro_batches) * static_cast<double>(r.batch * r.tokens) * r.ranks, model);
}

void predict_pipeline_parallel(PipelineParallelCheck& out) {
  const PipelineParallelCheckRequest& r = out.request;
  const ModelParallelStep step = decoder_steps::predicted_step(
      r.config, decoder_steps::layout(1, r.ranks, r.batch, r.tokens, r.micro_batches, r.optimizer, r.link));
  out.predicted_parameters.clear();
  for (const PipelineStage& st : step.stages) out.predicted_parameters.push_back(st.parameters);
  out.predicted_transfers = static_cast<int>(step.transfers);
  out.predicted_transfer_bytes = step.transfer_bytes;
  std::vector<double> busy;
  double optimizer = 0;
  for (std::size_t d = 0; d < out.stage_passes.size(); ++d) {
    busy.push_back(out.stage_passes[d].median / static_cast<double>(r.micro_batches));
    if (d < out.stage_optimizer.size()) optimizer = std::max(optimizer, out.stage_optimizer[d].median);
  }
  const PipelineSchedule schedule = one_f_one_b(busy, r.micro_batches, 1, step.p2p_each_seconds);
  out.predicted_bubble_seconds = schedule.bubble_seconds;
  out.predicted_p2p_seconds = schedule.p2p_seconds;
  out.predicted_tied_seconds = step.tied_seconds;
  out.predicted_step_seconds = schedule.pipeline_seconds + optimizer + step.tied_seconds;
  // the step less its busiest stage's work alone, as the measured overhead is taken
  double busiest = 0;
  for (std::size_t d = 0; d < out.stage_passes.size(); ++d) {
    busiest = std::max(
        busiest, out.stage_passes[d].median + (d < out.stage_optimizer.size() ? out.stage_optimizer[d].median : 0.0));
  }
  out.predicted_overhead_seconds = out.predicted_step_seconds - busiest;
  if (out.overhead.median <= 0 && !out.overhead.rounds.empty()) {
    out.notes.push_back(
        "the step through the pipeline took no longer than its busiest stage's work alone: the stages' work alone "
        "was slowed by something else on this machine (every stage runs it at once), so the bubble cannot be read "
        "from this run; its error is not given");
  }
  if (const int cpus = describe_host().logical_cpus; cpus < r.ranks) {
    out.notes.push_back(fmt::format(
        "{} stages share {} CPU(s): the stages' work alone runs beside each other's, as in the schedule's steady "
        "state, but its fill and drain run with CPUs to spare",
        r.ranks, cpus));
  }
  if (!out.parameters.empty() && out.parameters != out.predicted_parameters) {
    out.notes.push_back(fmt::format("the stages ran {} parameters, their graphs have {}: they are not the same model",
                                    fmt::join(out.parameters, ", "), fmt::join(out.predicted_parameters, ", ")));
  }
  std::string basis;
  out.notes.push_back(fmt::format(
      "predicted: the 1F1B schedule of the model (m × the busiest stage + the others' fill and drain + "
      "2(pp − 1) + 2(m − 1) transfers on the critical path, {} each on the link{}) on each stage's forward and "
      "backward passes measured alone, plus the slowest optimizer step{}",
      step.p2p_each_seconds * 1e3 >= 1 ? fmt::format("{:.3g} ms", step.p2p_each_seconds * 1e3)
                                       : fmt::format("{:.3g} µs", step.p2p_each_seconds * 1e6),
      r.link.measured_for(Collective::kSendRecv, 2) == nullptr
          ? ": its step latency and bus bandwidth, send/recv is not among the calibrated collectives"
          : "",
      step.tied_seconds > 0 ? " and the tied embedding's all-reduce between the first and the last stage" : ""));
}

PipelineParallelCheck check_pipeline_parallel(const PipelineParallelCheckRequest& request) {
  check_pipeline_parallel_request(request);
  PipelineParallelCheck out;
  out.request = request;
  const json reply =
      decoder_steps::run_worker({{"cmd", "pp_steps"},
                                 {"ranks", request.ranks},
                                 {"config", decoder_steps::worker_config(request.config)},
                                 {"batch", request.batch},
                                 {"tokens", request.tokens},
                                 {"micro_batches", request.micro_batches},
                                 {"optimizer", request.optimizer},
                                 {"rounds", request.rounds},
                                 {"steps", request.steps},
                                 {"deadline_seconds", request.deadline_seconds}},
                                request.deadline_seconds, "--pipeline-parallel",
                                fmt::format("the pipeline-parallel steps over {} stages", request.ranks), out.notes);
  out.torch_version = reply.value("torch", std::string("?"));
  out.parameters = reply.at("stage_parameters").get<std::vector<std::uint64_t>>();
  out.transfers_per_step = reply.at("transfers_per_step").get<int>();
  const auto sizes = reply.at("transfer_sizes").get<std::vector<double>>();
  out.transfer_bytes = sizes.size() == 1 ? sizes.front() : 0;  // one size, or none to compare
  if (sizes.size() > 1)
    out.notes.push_back(fmt::format("transfers of {} sizes: {}", sizes.size(), fmt::join(sizes, ", ")));
  const json& rounds = reply.at("rounds");
  out.step = decoder_steps::figure(rounds, "step_seconds");
  std::vector<double> overhead;
  std::vector<std::vector<double>> passes(static_cast<std::size_t>(request.ranks)),
      optimizer(static_cast<std::size_t>(request.ranks));
  for (const json& round : rounds) {
    const auto steps = round.at("step_seconds").get<std::vector<double>>();
    const auto pass = round.at("stage_pass_seconds").get<std::vector<std::vector<double>>>();
    const auto opt = round.at("stage_optimizer_seconds").get<std::vector<std::vector<double>>>();
    std::vector<double> over;
    std::vector<std::vector<double>> stage_pass(passes.size()), stage_opt(passes.size());
    for (std::size_t i = 0; i < steps.size(); ++i) {
      double busiest = 0;
      for (std::size_t d = 0; d < passes.size(); ++d) {
        busiest = std::max(busiest, pass[i][d] + opt[i][d]);
        stage_pass[d].push_back(pass[i][d]);
        stage_opt[d].push_back(opt[i][d]);
      }
      over.push_back(steps[i] - busiest);
    }
    overhead.push_back(median(over));
    for (std::size_t d = 0; d < passes.size(); ++d) {
      passes[d].push_back(median(stage_pass[d]));
      optimizer[d].push_back(median(stage_opt[d]));
    }
  }
  out.overhead = round_figure(std::move(overhead));
  for (std::size_t d = 0; d < passes.size(); ++d) {
    out.stage_passes.push_back(round_figure(std::move(passes[d])));
    out.stage_optimizer.push_back(round_figure(std::move(optimizer[d])));
  }
  predict_pipeline_parallel(out);
  return out;
}

}  // namespace neuralcost
