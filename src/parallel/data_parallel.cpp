// A data-parallel step on a timeline (include/neuralcost/parallel/data_parallel.hpp): compute in
// the step graph's order, collectives on their own stream.
#include "neuralcost/parallel/data_parallel.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "neuralcost/core/error.hpp"
#include "neuralcost/parallel/link_time.hpp"

namespace neuralcost {
namespace {

/// The link time of one collective over the step's devices.
class Links {
 public:
  Links(const DataParallelRequest& r, int per_node, int nodes) : r_(r), per_node_(per_node), nodes_(nodes) {}

  /// The cost of one collective over the step's devices; `basis` says where its time comes from.
  CollectiveCost cost(Collective c, double bytes, double element_bytes, std::string& basis) const {
    return group_cost(r_.system, r_.intra, r_.inter, c, per_node_, nodes_, bytes, element_bytes, basis);
  }

 private:
  const DataParallelRequest& r_;
  int per_node_, nodes_;
};

/// "grad:param:<id>/<k>" → id
std::string parameter_of_gradient(const std::string& tensor) {
  const std::string prefix = "grad:param:";
  if (tensor.rfind(prefix, 0) != 0) return {};
  const std::string rest = tensor.substr(prefix.size());
  const auto slash = rest.rfind('/');
  return slash == std::string::npos ? rest : rest.substr(0, slash);
}

struct Bucket {
  double bytes = 0;
  double ready = 0;  ///< when its last gradient is written
};

}  // namespace

ParallelLayout parse_parallel_layout(const std::string& text) {
  ParallelLayout layout;
  bool any = false;
  std::string seen;  // the keys given so far, each followed by a comma
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    const std::string part = text.substr(at, comma - at);
    const std::size_t eq = part.find('=');
    const std::string key = part.substr(0, eq);
    int value = 0;
    try {
      std::size_t used = 0;
      value = eq == std::string::npos ? 0 : std::stoi(part.substr(eq + 1), &used);
      if (eq == std::string::npos || used != part.size() - eq - 1 || value < 1) value = 0;
    } catch (const std::exception&) {
      value = 0;
    }
    if (value < 1 || (key != "dp" && key != "tp" && key != "pp" && key != "ep")) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("--parallel '{}': expected dp=N[,tp=N,pp=N,ep=N] with positive integers", text));
    }
    if (seen.find(key + ",") != std::string::npos) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("--parallel '{}': {} is given twice", text, key));
    }
    seen += key + ",";
    any = true;
    if (key == "dp") {
      layout.dp = value;
    } else if (key == "tp") {
      layout.tp = value;
    } else if (key == "pp") {
      layout.pp = value;
    } else {
      layout.ep = value;
    }
    at = comma + 1;
  }
  if (!any) throw Error(ErrorCode::kInvalidArgument, fmt::format("--parallel '{}': give dp=N or tp=N", text));
  return layout;
}

DataParallelStep data_parallel_step(const TrainingReport& report, const DataParallelRequest& request) {
  const int n = request.ranks;
  const int per_node_max = request.system.devices_per_node;
  if (n < 1) throw Error(ErrorCode::kInvalidArgument, fmt::format("--parallel dp={}: needs at least 1 device", n));
  if (n > per_node_max && n % per_node_max != 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--parallel dp={} does not divide into nodes of {} devices ({}): use a multiple of {}", n,
                            per_node_max, request.system.id, per_node_max));
  }
  DataParallelStep out;
  out.ranks = n;
  out.stage = request.stage;
  out.per_node = std::min(n, per_node_max);
  out.nodes = n / out.per_node;
  out.batch_per_device = report.step.batch > 0 ? report.step.batch : report.memory.batch;
  const Analysis& step = report.step;
  const double unfused = step.totals.lower_bound_seconds;
  const double scale = (unfused > 0 ? step.totals.fused_lower_bound_seconds / unfused : 1) * request.compute_scale;
  out.approximations.push_back(fmt::format(
      "each op's time is its roofline lower bound × {:.3f} (the step's fused / unfused bound), on one stream", scale));
  // the step's own (a measured routing's experts, top-k's comparisons, ...): named here too
  for (const std::string& a : step.approximations) out.approximations.push_back(a);

  // the compute timeline, and when each parameter's gradient is complete
  std::map<std::string, double> ready;
  double t = 0;
  for (const OpRoofline& r : step.ops) {
    const OpRecord& op = step.graph.op(r.op_index);
    const double seconds = r.lower_bound_seconds * scale;
    const Pass pass = pass_of(op);
    out.hardware_flops += static_cast<double>(r.cost.flops);
    if (pass != Pass::kRecompute) out.model_flops += static_cast<double>(r.cost.flops);
    if (pass == Pass::kOptimizer) {
      out.optimizer_seconds += seconds;
      continue;
    }
    (pass == Pass::kForward || pass == Pass::kRecompute ? out.forward_seconds : out.backward_seconds) += seconds;
    t += seconds;
    if (pass == Pass::kWeightGradient) {
      for (const TensorDesc& o : op.outputs) {
        const std::string id = parameter_of_gradient(o.name);
        if (!id.empty()) ready[id] = t;
      }
    }
  }
  const double backward_end = t;
  if (request.stage != ZeroStage::kNone) out.optimizer_seconds /= n;  // each device updates its shard
  out.compute_seconds = out.forward_seconds + out.backward_seconds + out.optimizer_seconds;

  const MemoryLedger& ledger = report.memory;
  std::uint64_t largest_parameter = 0;
  std::vector<ParameterDesc> parameters;
  for (const ParameterDesc& p : report.step.graph.unique_parameters()) {
    if (p.trainable && ready.count(p.id) != 0) parameters.push_back(p);
  }
  // the step's precision, not the graph's dtype, sets the bytes of a parameter and its gradient
  // (the ledger's; an fp32 step of a bf16 graph keeps and reduces 4-byte gradients)
  const double count = static_cast<double>(std::max<std::uint64_t>(1, ledger.parameter_count));
  const double parameter_element = static_cast<double>(ledger.parameter_bytes) / count;
  const double gradient_element = static_cast<double>(ledger.gradient_bytes) / count;
  for (const ParameterDesc& p : parameters) {
    largest_parameter =
        std::max(largest_parameter,
                 static_cast<std::uint64_t>(std::llround(static_cast<double>(p.elements()) * parameter_element)));
  }
  out.states = shard_model_states(ledger, request.stage, n, largest_parameter);
  const Links links(request, out.per_node, out.nodes);

  if (n > 1) {
    // gradients in buckets, in the reverse of the parameters' order (DDP's); each bucket's
    // collective starts when its gradients are complete and the stream is free
    std::vector<Bucket> buckets(1);
    for (auto p = parameters.rbegin(); p != parameters.rend(); ++p) {
      const double cap = buckets.size() == 1 ? request.first_bucket_bytes : request.bucket_bytes;
      if (buckets.back().bytes >= cap) buckets.emplace_back();
      buckets.back().bytes += static_cast<double>(p->elements()) * gradient_element;
      buckets.back().ready = std::max(buckets.back().ready, ready[p->id]);
    }
    for (const StepCollective& c : step_collectives(ledger, request.stage, n)) {
      StepCommunication comm;
      comm.collective = c;
      if (c.what == "gradients") {
        // overlapped with the backward pass, bucket by bucket (DDP; ZeRO-1/2's reduce-scatters likewise)
        double stream = 0;
        const double share = c.bytes / std::max(1.0, static_cast<double>(ledger.gradient_bytes));
        for (const Bucket& b : buckets) {
          const CollectiveCost cost = links.cost(c.collective, b.bytes * share, c.element_bytes, comm.basis);
          stream = std::max(stream, b.ready) + cost.seconds();
          comm.seconds += cost.seconds();
          comm.wire_bytes_per_rank += cost.wire_bytes_per_rank;
          ++comm.calls;
        }
        comm.exposed_seconds = std::max(0.0, stream - backward_end);
      } else {
        comm.calls = 1;
        const CollectiveCost cost = links.cost(c.collective, c.bytes, c.element_bytes, comm.basis);
        comm.seconds = cost.seconds();
        comm.wire_bytes_per_rank = cost.wire_bytes_per_rank;
        if (c.what == "updated parameters") {
          comm.exposed_seconds = comm.seconds;  // after the optimizer step, before the next forward pass
        } else {
          // ZeRO-3's gathers run one unit ahead of the pass that needs them
          const double pass = c.what == "parameters (forward)" ? out.forward_seconds : out.backward_seconds;
          comm.exposed_seconds = std::max(0.0, comm.seconds - pass);
        }
      }
      out.communication_seconds += comm.seconds;
      out.exposed_seconds += comm.exposed_seconds;
      out.communication.push_back(comm);
    }
    if (request.stage == ZeroStage::kParameters) {
      out.approximations.push_back(
          "ZeRO-3: the parameter gathers hide behind their pass except what they exceed it by (prefetch one unit "
          "ahead); the first unit's gather is not charged");
    }
    if (request.stage == ZeroStage::kOptimizer || request.stage == ZeroStage::kGradients) {
      out.approximations.push_back(
          "ZeRO: the updated parameters are gathered after the optimizer step, not overlapped "
          "with the next forward pass");
    }
  }
  out.step_seconds = out.compute_seconds + out.exposed_seconds;
  out.peak_flops_per_second = step.hardware.flops_per_second(step.dtype, true);

  // per-device memory: the ledger's interval with the model states replaced by this device's share
  if (n > 1 && request.stage == ZeroStage::kNone) {
    out.bucket_copy_bytes = ledger.gradient_bytes;
    out.approximations.push_back(
        "DDP keeps a copy of the gradients in its buckets (gradient_as_bucket_view=False, "
        "torch's default)");
  }
  // the ledger's two moments (memory.hpp, total_bytes) with this device's shards: the
  // activations' (with the parameter gradients written so far, of which the device keeps its
  // share at ZeRO-2 and above) and the optimizer step's (its gradients and temporaries: Adam's
  // fp32 copies of the largest parameter, a shard's at ZeRO-1 and above)
  const ShardedStates& st = out.states;
  const std::uint64_t transient = request.stage == ZeroStage::kNone ? ledger.optimizer_transient_bytes
                                                                    : (ledger.optimizer_transient_bytes + n - 1) / n;
  const std::uint64_t persistent = st.parameter_bytes + st.optimizer_state_bytes + st.master_weight_bytes +
                                   st.buffer_bytes + st.gathered_parameter_bytes + out.bucket_copy_bytes;
  const std::uint64_t unsharded_gradients = ledger.gradient_bytes - st.gradient_bytes;
  const std::uint64_t activation_moment =
      std::max(ledger.activations.lower_bound_bytes,
               ledger.activations.lower_with_parameter_gradients_bytes > unsharded_gradients
                   ? ledger.activations.lower_with_parameter_gradients_bytes - unsharded_gradients
                   : 0);
  out.memory_lower_bytes = persistent + std::max(activation_moment, st.gradient_bytes + transient);
  out.memory_upper_bytes = persistent + st.gradient_bytes + ledger.activations.upper_bound_bytes + transient;
  out.device_memory_bytes = report.step.hardware.memory_capacity_bytes;
  return out;
}

std::string DataParallelStep::fit() const {
  if (!device_memory_bytes) return "unknown";
  if (static_cast<double>(memory_upper_bytes) <= *device_memory_bytes) return "fits";
  if (static_cast<double>(memory_lower_bytes) > *device_memory_bytes) return "does not fit";
  return "may fit";
}

std::vector<DataParallelCandidate> rank_data_parallel(const std::vector<TrainingReport>& reports,
                                                      const DataParallelRequest& base) {
  std::vector<DataParallelCandidate> out;
  for (std::size_t i = 0; i < reports.size(); ++i) {
    for (ZeroStage stage : {ZeroStage::kNone, ZeroStage::kOptimizer, ZeroStage::kGradients, ZeroStage::kParameters}) {
      DataParallelRequest r = base;
      r.stage = stage;
      out.push_back({i, data_parallel_step(reports[i], r)});
    }
  }
  auto rank = [](const DataParallelStep& s) {
    const std::string f = s.fit();
    return f == "fits" ? 0 : f == "may fit" ? 1 : f == "unknown" ? 2 : 3;
  };
  std::stable_sort(out.begin(), out.end(), [&](const DataParallelCandidate& a, const DataParallelCandidate& b) {
    if (rank(a.step) != rank(b.step)) return rank(a.step) < rank(b.step);
    return a.step.samples_per_second() > b.step.samples_per_second();
  });
  return out;
}

}  // namespace neuralcost
