// Measured data-parallel steps against their prediction (include/neuralcost/calibrate/data_parallel_check.hpp).
#include "neuralcost/calibrate/data_parallel_check.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "calibrate/decoder_steps.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/hardware/host.hpp"
#include "neuralcost/models/reference.hpp"
#include "neuralcost/parallel/data_parallel.hpp"
#include "neuralcost/parallel/link_time.hpp"
#include "neuralcost/training/training_report.hpp"

namespace neuralcost {
namespace {

using nlohmann::json;

void refuse(const std::string& message) { throw Error(ErrorCode::kInvalidArgument, message); }

}  // namespace

void check_data_parallel_request(const DataParallelCheckRequest& r) {
  if (r.ranks < 2) {
    refuse(fmt::format("--data-parallel {}: a data-parallel step needs at least 2 ranks", r.ranks));
  }
  const auto& names = reference_model_names();
  if (std::find(names.begin(), names.end(), r.model) == names.end()) {
    refuse(fmt::format("--data-parallel runs the reference networks (ff, cnn, rnn, lstm, transformer), not '{}'",
                       r.model));
  }
  if (r.stage != ZeroStage::kNone && r.stage != ZeroStage::kParameters) {
    refuse(fmt::format("--zero {} with --data-parallel: ddp (DistributedDataParallel) or fsdp (fully_shard) run",
                       zero_stage_name(r.stage)));
  }
  if (r.rounds < 1 || r.steps < 1) refuse("--rounds and the steps a round must be at least 1");
  const std::vector<Collective> needed =
      r.stage == ZeroStage::kNone ? std::vector<Collective>{Collective::kAllReduce}
                                  : std::vector<Collective>{Collective::kAllGather, Collective::kReduceScatter};
  for (Collective c : needed) {
    if (r.link.measured_for(c, r.ranks) == nullptr) {
      refuse(
          fmt::format("--link {} has no measured {} over {} ranks: calibrate this machine's link first "
                      "(`neural-cost hardware calibrate --collectives --ranks {} --spec-output FILE`)",
                      r.link.origin.empty() || r.link.origin == "built-in" ? r.link.id : r.link.origin,
                      collective_name(c), r.ranks, r.ranks));
    }
  }
}

RoundFigure round_figure(std::vector<double> round_medians) {
  RoundFigure f;
  f.rounds = std::move(round_medians);
  f.median = median(f.rounds);
  f.ci95 = order_statistic_median_ci(f.rounds).interval;
  return f;
}

void predict_data_parallel(DataParallelCheck& out) {
  const DataParallelCheckRequest& request = out.request;
  const bool fsdp = request.stage == ZeroStage::kParameters;
  // on CPUs, gloo's work takes cores: it overlaps the ranks' compute only where each rank's
  // communication has a core of its own beside the rank's one compute thread
  const int cpus = request.cpus > 0 ? request.cpus : describe_host().logical_cpus;
  const bool overlap = cpus >= 2 * request.ranks;
  out.predicted_calls = 0;
  // the prediction: the step graph's collectives on the calibrated link, on the measured
  // compute's timeline (each op's roofline time scaled so that the step takes the measured compute)
  ReferenceOptions model;
  model.model = request.model;
  model.batch = request.batch;
  model.seq = request.seq;
  model.width = request.width;
  model.depth = request.depth;
  TrainingOptions training;
  training.optimizer = parse_optimizer(request.optimizer);
  const TrainingReport report = training_report(build_reference_model(model), request.hardware, training);
  if (report.memory.parameter_count != out.parameters) {
    out.notes.push_back(fmt::format("the run's network has {} parameters, the graph {}: they are not the same model",
                                    out.parameters, report.memory.parameter_count));
  }
  DataParallelRequest r;
  r.ranks = request.ranks;
  r.stage = request.stage;
  r.system.id = "local";
  r.system.device = request.hardware.id;
  r.system.devices_per_node = request.ranks;
  r.system.nics_per_node = 1;
  r.intra = r.inter = request.link;
  const double bound = report.step.totals.fused_lower_bound_seconds;
  r.compute_scale = bound > 0 ? out.compute.median / bound : 1;
  const DataParallelStep step = data_parallel_step(report, r);
  if (!fsdp) {
    out.predicted_link_seconds = step.communication_seconds;
    out.predicted_exposed_seconds = step.exposed_seconds;
    for (const StepCommunication& c : step.communication) out.predicted_calls += c.calls;
  } else {
    // fully_shard per unit: each unit's parameters gathered before its forward pass and again
    // before its backward pass, its gradients reduce-scattered; the first gather waits, the others
    // hide behind their pass but what exceeds it
    double gathers = 0, scatters = 0, first = 0;
    std::string basis;
    for (double elements : out.units) {
      const double bytes = elements * 4;
      const double gather =
          in_node_cost(request.link, Collective::kAllGather, request.ranks, bytes, 4, basis).seconds();
      if (first == 0) first = gather;
      gathers += gather;
      scatters += in_node_cost(request.link, Collective::kReduceScatter, request.ranks, bytes, 4, basis).seconds();
      out.predicted_calls += 3;
    }
    out.predicted_link_seconds = 2 * gathers + scatters;
    out.predicted_exposed_seconds = first + std::max(0.0, gathers - first - step.forward_seconds) +
                                    std::max(0.0, gathers + scatters - step.backward_seconds);
    out.notes.push_back(fmt::format(
        "fsdp: each unit's all-gather before its forward and its backward pass and its reduce-scatter, on the "
        "calibrated link; {}",
        overlap ? "the first gather is waited for, the rest hide behind their pass but what exceeds it"
                : "each waited for (no core to overlap them, below)"));
  }
  if (!overlap) {
    out.predicted_exposed_seconds = out.predicted_link_seconds;
    out.notes.push_back(fmt::format(
        "no overlap: the {} ranks of one thread each share {} CPU(s), and gloo's collectives run on the same cores "
        "(loopback copies, reductions, its threads' wake-ups): a collective overlaps compute only with a core of its "
        "own for every rank (at least {} CPUs), so the whole link time is exposed",
        request.ranks, cpus, 2 * request.ranks));
  }
  out.predicted_step_seconds = out.compute.median + out.predicted_exposed_seconds;
  out.notes.push_back(fmt::format(
      "predicted step = the measured step without communication ({}) + the predicted exposed communication; "
      "the ops' roofline times scaled by {:.3g} to take that long",
      fsdp ? "an unsharded copy of the network" : "DDP's no_sync()", r.compute_scale));
}

DataParallelCheck check_data_parallel(const DataParallelCheckRequest& request) {
  check_data_parallel_request(request);
  DataParallelCheck out;
  out.request = request;
  const bool fsdp = request.stage == ZeroStage::kParameters;
  const json reply =
      decoder_steps::run_worker({{"cmd", "steps"},
                                 {"ranks", request.ranks},
                                 {"mode", fsdp ? "fsdp" : "ddp"},
                                 {"model", request.model},
                                 {"batch", request.batch},
                                 {"seq", request.seq},
                                 {"width", request.width},
                                 {"depth", request.depth},
                                 {"optimizer", request.optimizer},
                                 {"rounds", request.rounds},
                                 {"steps", request.steps},
                                 {"deadline_seconds", request.deadline_seconds}},
                                request.deadline_seconds, "--data-parallel",
                                fmt::format("the data-parallel steps over {} ranks", request.ranks), out.notes);
  out.torch_version = reply.value("torch", std::string("?"));
  out.parameters = reply.at("parameters").get<std::uint64_t>();
  out.collectives_per_step = reply.at("calls_per_step").get<int>();
  out.collectives = reply.at("collectives").get<std::vector<std::string>>();
  out.measured_buckets = reply.at("buckets").get<std::vector<double>>();
  out.units = reply.at("units").get<std::vector<double>>();
  const json& rounds = reply.at("rounds");
  out.step = decoder_steps::figure(rounds, "step_seconds");
  out.compute = decoder_steps::figure(rounds, "compute_seconds");
  out.link = decoder_steps::figure(rounds, "link_seconds");
  out.wait = decoder_steps::figure(rounds, "wait_seconds");

  predict_data_parallel(out);
  return out;
}

}  // namespace neuralcost
