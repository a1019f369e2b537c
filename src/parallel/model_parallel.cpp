// A decoder's training step over dp × tp × pp devices (include/neuralcost/parallel/model_parallel.hpp).
#include "neuralcost/parallel/model_parallel.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "neuralcost/analysis/roofline.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/parallel/link_time.hpp"
#include "neuralcost/parallel/tensor_parallel.hpp"
#include "neuralcost/training/training.hpp"
#include "neuralcost/training/training_report.hpp"

namespace neuralcost {
namespace {

double element_bytes(DType dtype) { return static_cast<double>(dtype_bytes(dtype)); }

void refuse(const std::string& message) { throw Error(ErrorCode::kInvalidArgument, message); }

/// Batches and micro-batch counts are ints downstream: they stay below 2^31.
constexpr std::int64_t kBelow = std::int64_t{1} << 31;

void check(const DecoderConfig& c, const ModelParallelRequest& r) {
  for (const auto& [name, value] :
       {std::pair<const char*, std::int64_t>{"dp", r.dp}, {"tp", r.tp}, {"pp", r.pp}, {"ep", r.ep}}) {
    if (value < 1) refuse(fmt::format("--parallel {}={}: needs at least 1 device", name, value));
  }
  if (r.ep > 1) {
    if (c.experts == 0) refuse(fmt::format("--parallel ep={}: the model has no experts (a dense model)", r.ep));
    if (c.experts % r.ep != 0) {
      refuse(fmt::format("--parallel ep={} does not divide the {} experts of a layer", r.ep, c.experts));
    }
    if (r.dp % r.ep != 0) {
      refuse(
          fmt::format("--parallel ep={} must divide dp={}: the experts are split over data-parallel replicas "
                      "(Megatron-Core's expert-model-parallel group)",
                      r.ep, r.dp));
    }
  }
  if (r.sequence_parallel) {
    if (r.tp < 2) refuse("--sequence-parallel splits the tokens over the tensor-parallel devices: it needs tp > 1");
    if (r.tokens % r.tp != 0) {
      refuse(fmt::format("--sequence-parallel: tp={} does not divide the {} tokens of a sequence (--prompt)", r.tp,
                         r.tokens));
    }
  }
  if (r.virtual_stages < 1) refuse(fmt::format("--virtual-stages {} must be at least 1", r.virtual_stages));
  if (r.virtual_stages > 1 && r.pp == 1) refuse("--virtual-stages applies only with pipeline parallelism (pp > 1)");
  if (r.micro_batch < 1 || r.micro_batch >= kBelow) {
    refuse(fmt::format("--batch {} (the micro-batch) must be a positive integer below 2^31", r.micro_batch));
  }
  if (r.global_batch < 1 || r.global_batch >= kBelow) {
    refuse(
        fmt::format("--global-batch {} must be a positive integer below 2^31 (sequences a step over every "
                    "replica)",
                    r.global_batch));
  }
  const int per_node = r.system.devices_per_node;
  if (r.tp > per_node) {
    refuse(fmt::format("--parallel tp={}: tensor parallelism stays inside a node, which has {} devices ({})", r.tp,
                       per_node, r.system.id));
  }
  const int devices = r.dp * r.tp * r.pp;
  if (devices > per_node && devices % per_node != 0) {
    refuse(fmt::format("dp × tp × pp = {} devices do not fill whole nodes of {} ({}): use a multiple of {}", devices,
                       per_node, r.system.id, per_node));
  }
  if (!r.stage_layers.empty()) {
    if (r.pp == 1) refuse("--stage-layers applies only with pipeline parallelism (pp > 1)");
    const std::size_t chunks = static_cast<std::size_t>(r.pp) * static_cast<std::size_t>(std::max(1, r.virtual_stages));
    if (r.stage_layers.size() != chunks) {
      refuse(
          r.virtual_stages > 1
              ? fmt::format("--stage-layers gives {} chunk(s), but pp={} × --virtual-stages {} makes {} (in model "
                            "order: device d holds chunks d, d + pp, ...)",
                            r.stage_layers.size(), r.pp, r.virtual_stages, chunks)
              : fmt::format("--stage-layers gives {} stage(s), but --parallel has pp={}", r.stage_layers.size(), r.pp));
    }
    std::int64_t total = 0;
    for (std::int64_t n : r.stage_layers) {
      if (n < 1) refuse(fmt::format("--stage-layers: every stage needs at least 1 layer (got {})", n));
      total += n;
    }
    if (total != c.layers) {
      refuse(fmt::format("--stage-layers adds up to {} layers, but the model has {}", total, c.layers));
    }
  } else if (c.layers % (r.pp * r.virtual_stages) != 0) {
    refuse(fmt::format("--parallel pp={}{} does not divide the model's {} layers into equal stages{}", r.pp,
                       r.virtual_stages > 1 ? fmt::format(" × {} chunks", r.virtual_stages) : "", c.layers,
                       r.virtual_stages > 1 ? "" : " (--stage-layers N1,N2,... gives each stage's layers)"));
  }
  if (r.stage != ZeroStage::kNone && r.stage != ZeroStage::kOptimizer) {
    refuse(
        fmt::format("--zero {} with tensor or pipeline parallelism is not built: ddp or zero1 (a distributed "
                    "optimizer); --parallel dp=N alone takes every stage",
                    zero_stage_name(r.stage)));
  }
  const std::int64_t replica = static_cast<std::int64_t>(r.dp) * r.micro_batch;
  if (r.global_batch % replica != 0) {
    refuse(fmt::format("--global-batch {} is not a multiple of dp × micro-batch = {} × {}", r.global_batch, r.dp,
                       r.micro_batch));
  }
  const std::int64_t m = r.global_batch / replica;
  if (r.virtual_stages > 1 && m % r.pp != 0) {
    refuse(fmt::format("the interleaved schedule needs micro-batches ({}) in multiples of pp ({})", m, r.pp));
  }
}

/// The tensor-parallel collectives of one micro-batch: calls of `bytes` each.
struct Calls {
  double calls = 0, bytes = 0;
};

}  // namespace

PipelineSchedule one_f_one_b(const std::vector<double>& busy, std::int64_t micro_batches, int virtual_stages,
                             double p2p_each_seconds) {
  PipelineSchedule out;
  if (busy.empty()) return out;
  const double most = *std::max_element(busy.begin(), busy.end());
  double sum = 0;
  for (double b : busy) sum += b;
  const double v = virtual_stages, m = static_cast<double>(micro_batches), pp = static_cast<double>(busy.size());
  out.bubble_seconds = (sum - most) / v;
  if (busy.size() > 1) out.p2p_seconds = (2.0 * (v * pp - 1) + 2.0 * v * (m - 1)) * p2p_each_seconds;
  out.pipeline_seconds = m * most + out.bubble_seconds + out.p2p_seconds;
  return out;
}

ModelParallelStep model_parallel_step(ShardCostCache& cache, const ModelParallelRequest& request) {
  const DecoderConfig& c = cache.config();
  ModelParallelRequest r = request;
  if (r.global_batch == 0) r.global_batch = static_cast<std::int64_t>(r.dp) * r.micro_batch;
  check(c, r);
  ModelParallelStep out;
  out.request = r;
  out.devices = r.dp * r.tp * r.pp;
  const std::int64_t m = r.global_batch / (static_cast<std::int64_t>(r.dp) * r.micro_batch);
  out.micro_batches = static_cast<int>(m);
  const ShardCosts& costs = cache.get(r.tp, r.micro_batch, r.tokens, r.training, r.dtype, r.ep, r.sequence_parallel);
  const bool sp = r.sequence_parallel;
  out.notes = costs.notes;
  const double elt = element_bytes(r.dtype), act = static_cast<double>(costs.hidden_bytes);
  const int per_node = r.system.devices_per_node, v = r.virtual_stages;
  const bool zero1 = r.stage == ZeroStage::kOptimizer;

  // the links: tp inside a node; dp groups of consecutive tp groups; pp stages tp × dp devices apart
  std::string basis;
  const auto tensor_call = [&](double bytes) {
    return r.tp > 1 ? in_node_cost(r.intra, Collective::kAllReduce, r.tp, bytes, elt, basis).seconds() : 0.0;
  };
  // sequence parallelism: each all-reduce of the hidden states a reduce-scatter and an all-gather
  const auto sequence_pair = [&](double bytes) {  // a reduce-scatter and an all-gather of `bytes` over tp
    return in_node_cost(r.intra, Collective::kReduceScatter, r.tp, bytes, elt, basis).seconds() +
           in_node_cost(r.intra, Collective::kAllGather, r.tp, bytes, elt, basis).seconds();
  };
  const double layer_call = sp ? sequence_pair(act) : tensor_call(act);
  // Megatron's ends: the vocabulary-parallel embedding's output all-reduced forward (sequence
  // parallel: reduce-scattered forward, its gradient all-gathered backward); the LM head, a
  // column-parallel linear, all-reduces its input's gradient backward (sequence parallel: gathers
  // its input forward, reduce-scatters the gradient backward); the vocabulary-parallel loss
  // all-reduces three floats a token (the logits' maximum, the sum of their exponentials, the
  // target's logit)
  const double embedding_call = layer_call;
  const double head_call = layer_call;
  const double loss_call = tensor_call(static_cast<double>(r.micro_batch * r.tokens) * 4);
  const int layer_pair_calls = sp ? 2 : 1;  // collectives in the place of one all-reduce
  const int dp_per_node = std::max(1, std::min(r.dp, per_node / r.tp));
  const int dp_nodes = r.dp / dp_per_node;
  // expert parallelism: ep consecutive replicas (devices tp apart) exchange tokens by all-to-all;
  // each expert's gradients are reduced over the dp / ep replicas that hold it (tp × ep apart)
  const int edp = r.dp / r.ep;
  const int ep_per_node = std::max(1, std::min(r.ep, per_node / r.tp));
  const int edp_per_node = std::max(1, std::min(edp, per_node / (r.tp * r.ep)));
  // one all-to-all: each device's share of its micro-batch's tokens (1/tp of them), k copies of a
  // hidden state each, (ep − 1)/ep of it to the other devices
  const double dispatched = static_cast<double>(r.micro_batch * r.tokens * c.experts_per_token * c.hidden) * elt / r.tp;
  const double all_to_all = r.ep > 1 ? group_cost(r.system, r.intra, r.inter, Collective::kAllToAll, ep_per_node,
                                                  r.ep / ep_per_node, dispatched, elt, basis)
                                           .seconds()
                                     : 0.0;
  const bool stages_across = r.tp * r.dp >= per_node && out.devices > per_node;
  out.link_of_stages = stages_across ? "inter-node" : "intra-node";
  // a collective between two stages' devices: across two nodes, or inside one
  const auto between_stages = [&](Collective c, double bytes, double element) {
    return group_cost(r.system, r.intra, r.inter, c, stages_across ? 1 : 2, stages_across ? 2 : 1, bytes, element,
                      basis)
        .seconds();
  };
  if (r.pp > 1) {
    // across nodes, Megatron's scatter-gather: each of the tp devices sends 1/tp, then they all-gather;
    // under sequence parallelism each device holds and sends its 1/tp of the tokens, nothing to gather
    const bool scatter = stages_across && r.tp > 1 && !sp;
    out.transfer_bytes = scatter || sp ? act / r.tp : act;
    out.p2p_each_seconds = between_stages(Collective::kSendRecv, out.transfer_bytes, elt);
    if (scatter) out.p2p_each_seconds += in_node_cost(r.intra, Collective::kAllGather, r.tp, act, elt, basis).seconds();
  }

  // the model's chunks in order (chunk k·pp + d on device d): even, or --stage-layers
  std::vector<std::int64_t> chunk_layers = r.stage_layers, chunk_first;
  if (chunk_layers.empty()) chunk_layers.assign(static_cast<std::size_t>(r.pp * v), c.layers / (r.pp * v));
  for (std::int64_t first = 0; std::int64_t n : chunk_layers) {
    chunk_first.push_back(first);
    first += n;
  }
  for (int d = 0; d < r.pp; ++d) {
    PipelineStage st;
    st.index = d;
    PartCost layers;
    std::uint64_t largest_layer_saved = 0;
    std::int64_t layer_count = 0;
    double moe_load = 0;     // the stage's layers with experts, each weighted by its busiest device's load
    double tensor_pass = 0;  // the layers' tensor-parallel collectives in one pass (forward or backward)
    int tensor_pass_calls = 0;
    double excess_flops = 0;  // what the busiest expert device runs beyond an average one
    // what each expert-parallel device's experts keep beyond an average device's, over the stage's
    // layers (a measured routing loads them unevenly; its busiest device in one layer need not be
    // the busiest in the next)
    std::vector<double> routed_excess(static_cast<std::size_t>(std::max(1, r.ep)), 0.0);
    for (int k = 0; k < v; ++k) {
      const std::size_t j = static_cast<std::size_t>(k) * static_cast<std::size_t>(r.pp) + static_cast<std::size_t>(d);
      const std::int64_t first = chunk_first[j], chunk = chunk_layers[j];
      layer_count += chunk;
      st.layers.emplace_back(first, first + chunk);
      for (std::int64_t l = first; l < first + chunk; ++l) {
        const PartCost& layer = costs.layers.at(decoder_layer_kind(c, l));
        layers += layer;
        tensor_pass += 2 * layer_call;  // the attention's and the MLP's
        tensor_pass_calls += 2 * layer_pair_calls;
        double layer_saved = static_cast<double>(layer.saved_bytes);
        if (c.experts > 0 && c.moe_layer(l)) {
          const std::vector<double> loads = expert_device_loads(c, l, r.ep);  // ep entries
          const double load = *std::max_element(loads.begin(), loads.end());  // the busiest device's
          for (std::size_t q = 0; q < loads.size(); ++q) {
            routed_excess[q] += (loads[q] - 1) * static_cast<double>(layer.routed_saved_bytes);
          }
          layer_saved += (load - 1) * static_cast<double>(layer.routed_saved_bytes);
          moe_load += load;
          // Megatron-Core's all-to-all dispatcher: in place of the MLP's pair, the k rows of each
          // token a device received, gathered over tp for the experts' split GEMMs and
          // reduce-scattered after them, λ of an average device's on the busiest
          if (sp && r.ep > 1) tensor_pass += sequence_pair(c.experts_per_token * load * act) - layer_call;
          if (sp && c.shared_expert_intermediate > 0) {  // the shared expert's own pair
            tensor_pass += layer_call;
            tensor_pass_calls += 2;
          }
          // an average device's experts take 1/λ of the busiest's rows
          excess_flops +=
              (layer.expert_forward_flops * (r.recompute ? 2 : 1) + layer.expert_backward_flops) * (1 - 1 / load);
        }
        largest_layer_saved = std::max(largest_layer_saved, static_cast<std::uint64_t>(std::llround(layer_saved)));
      }
    }
    const bool first = d == 0, last = d == r.pp - 1;
    PartCost all = layers;
    if (first) all += costs.before;
    if (last) all += costs.after;
    st.forward_seconds = all.forward_seconds;
    st.backward_seconds = all.backward_seconds + (r.recompute ? layers.forward_seconds : 0);
    st.flops = all.forward_flops + all.backward_flops + (r.recompute ? layers.forward_flops : 0);
    // Megatron's f and g: two all-reduces a layer forward, two backward, two more recomputing
    st.tensor_seconds =
        tensor_pass * (r.recompute ? 3 : 2) + (first ? embedding_call : 0) + (last ? head_call + 3 * loss_call : 0);
    if (r.tp > 1) {
      st.tensor_calls = tensor_pass_calls * (r.recompute ? 3 : 2) + (first ? layer_pair_calls : 0) +
                        (last ? layer_pair_calls + 3 : 0);
    }
    // dispatch and combine a MoE layer forward, the same two backward, two more recomputing; under
    // a measured routing the busiest device receives (dispatch) and sends back (combine) λ times an
    // average device's rows, and the all-to-all waits for it
    st.expert_seconds = moe_load * (r.recompute ? 6 : 4) * all_to_all;
    st.parameters = all.parameters;
    if (last && r.pp > 1 && c.tied_embeddings) {
      st.parameters += static_cast<std::uint64_t>(costs.shard.vocab * c.hidden);  // the LM head's copy
    }
    const double p = static_cast<double>(st.parameters);
    const double pe = static_cast<double>(all.expert_parameters), pd = p - pe;  // experts', the rest
    // a distributed optimizer shards the rest over dp, the experts' states over the dp / ep replicas holding them
    const double sharded = zero1 ? pd / r.dp + pe / edp : p;
    st.optimizer_seconds = p > 0 ? all.optimizer_seconds * sharded / p : 0.0;
    st.state_bytes =
        static_cast<std::uint64_t>(p * (costs.parameter_bytes_per_element + costs.gradient_bytes_per_element) +
                                   sharded * (costs.optimizer_bytes_per_element + costs.master_bytes_per_element));
    // 1F1B keeps pp − d micro-batches in flight on device d; interleaved, Megatron's warm-up
    const std::int64_t chunks_in_flight =
        v == 1 ? std::min<std::int64_t>(m, r.pp - d)
               : std::min<std::int64_t>(m * v, static_cast<std::int64_t>(r.pp - d - 1) * 2 + (v - 1) * r.pp + 1);
    st.in_flight = static_cast<int>(chunks_in_flight);
    const double per_chunk =
        r.recompute ? static_cast<double>(layer_count) / v * static_cast<double>(costs.hidden_bytes) / (sp ? r.tp : 1)
                    : (static_cast<double>(layers.saved_bytes) +
                       std::max(0.0, *std::max_element(routed_excess.begin(), routed_excess.end()))) /
                          v;
    const std::int64_t ends_in_flight = std::min<std::int64_t>(m, r.pp - d);
    st.activation_bytes = static_cast<std::uint64_t>(
        static_cast<double>(chunks_in_flight) * per_chunk +
        static_cast<double>(ends_in_flight) *
            static_cast<double>((first ? costs.before.saved_bytes : 0) + (last ? costs.after.saved_bytes : 0)));
    st.working_bytes = costs.working_bytes + (r.recompute ? largest_layer_saved : 0);
    if (r.dp > 1) {
      const double g = costs.gradient_bytes_per_element, w = costs.parameter_bytes_per_element;
      const Collective reduce = zero1 ? Collective::kReduceScatter : Collective::kAllReduce;
      // the experts' over their dp / ep replicas (all of dp without expert parallelism), the rest over dp
      const auto over = [&](Collective c, double elements, double element, bool experts) {
        if (elements <= 0) return 0.0;
        if (experts && r.ep > 1) {
          return edp > 1 ? group_cost(r.system, r.intra, r.inter, c, edp_per_node, edp / edp_per_node,
                                      elements * element, element, basis)
                               .seconds()
                         : 0.0;
        }
        return group_cost(r.system, r.intra, r.inter, c, dp_per_node, dp_nodes, elements * element, element, basis)
            .seconds();
      };
      const double reduced =
          r.ep > 1 ? over(reduce, pd, g, false) + over(reduce, pe, g, true) : over(reduce, p, g, false);
      const double gathered =
          !zero1     ? 0.0
          : r.ep > 1 ? over(Collective::kAllGather, pd, w, false) + over(Collective::kAllGather, pe, w, true)
                     : over(Collective::kAllGather, p, w, false);
      st.gradient_seconds = reduced + gathered;
      // the reduction hides behind the last micro-batch's backward pass, as DDP's buckets do;
      // the distributed optimizer's gather follows the optimizer step
      const double last_backward = st.backward_seconds + st.tensor_seconds / 2;
      st.gradient_exposed_seconds = std::max(0.0, reduced - last_backward) + gathered;
    }
    out.tensor_seconds = std::max(out.tensor_seconds, st.tensor_seconds * static_cast<double>(m));
    out.expert_seconds = std::max(out.expert_seconds, st.expert_seconds * static_cast<double>(m));
    out.gradient_exposed_seconds = std::max(out.gradient_exposed_seconds, st.gradient_exposed_seconds);
    out.optimizer_seconds = std::max(out.optimizer_seconds, st.optimizer_seconds);
    // every device's: the average device's (the busiest expert device's beyond it taken off)
    out.hardware_flops +=
        ((st.flops - excess_flops) * static_cast<double>(m) + (p > 0 ? all.optimizer_flops * sharded / p : 0.0)) *
        r.tp * r.dp;
    out.stages.push_back(std::move(st));
  }
  // m micro-batches at the busiest device's pace, the others' fill and drain (1/v of it
  // interleaved), and the transfers between stages on the critical path
  std::vector<double> busy;
  for (const PipelineStage& st : out.stages) busy.push_back(st.busy_seconds());
  const PipelineSchedule schedule = one_f_one_b(busy, m, v, out.p2p_each_seconds);
  out.transfers = r.pp > 1 ? 2 * (static_cast<std::int64_t>(v) * r.pp - 1) * m : 0;
  out.bubble_seconds = schedule.bubble_seconds;
  out.p2p_seconds = schedule.p2p_seconds;
  out.pipeline_seconds = schedule.pipeline_seconds;
  double tied = 0;
  if (r.pp > 1 && c.tied_embeddings) {  // the two copies of the embedding's gradient, summed
    const double bytes = static_cast<double>(costs.shard.vocab * c.hidden) * costs.gradient_bytes_per_element;
    tied = between_stages(Collective::kAllReduce, bytes, costs.gradient_bytes_per_element);
  }
  out.tied_seconds = tied;
  out.step_seconds = out.pipeline_seconds + out.gradient_exposed_seconds + tied + out.optimizer_seconds;

  // the model's own FLOPs: the unsharded one-layer parts over every layer and micro-batch
  const ShardCosts& whole = r.tp == 1 && r.ep == 1 ? costs : cache.get(1, r.micro_batch, r.tokens, r.training, r.dtype);
  PartCost model = whole.before;
  model += whole.after;
  for (std::int64_t l = 0; l < c.layers; ++l) model += whole.layers.at(decoder_layer_kind(c, l));
  out.model_flops = (model.forward_flops + model.backward_flops) * static_cast<double>(r.global_batch / r.micro_batch) +
                    model.optimizer_flops;
  out.peak_flops_per_second = cache.hardware().flops_per_second(r.dtype, true);
  out.device_memory_bytes = cache.hardware().memory_capacity_bytes;

  out.approximations.push_back(fmt::format(
      "a stage's time is its layers' and ends' fused roofline bounds, a layer's what a second layer adds to the "
      "one-layer shard's step (the one-layer step's fused / unfused: {:.3f}), on one stream",
      costs.fused_scale));
  if (r.tp > 1) {
    out.approximations.push_back(
        std::string("tensor parallelism: two all-reduces of the hidden states a layer forward and two backward (two "
                    "more recomputing), one after the embedding, one of the LM head's input gradient, three small "
                    "ones in the vocabulary-parallel loss; none overlapped with compute; ") +
        (sp ? "norms split by sequence parallelism" : "norms replicated"));
  }
  if (sp) {
    out.approximations.push_back(fmt::format(
        "sequence parallelism: the norms and residual adds, their gradients and what they keep run on 1/{} of the "
        "tokens as kernels of their own (their time the whole op's / {}); a reduce-scatter and an all-gather for "
        "each all-reduce; the backward pass's all-gather of the kept norm outputs hides behind the weight gradients' "
        "GEMMs, as Megatron overlaps it (not counted)",
        r.tp, r.tp));
    if (c.experts > 0) {
      const std::string shared = c.shared_expert_intermediate > 0
                                     ? "; the shared expert gathers its tokens and reduce-scatters its output as a "
                                       "dense MLP does"
                                     : "";
      out.approximations.push_back(fmt::format(
          "sequence parallelism with experts: the router and the weighted sum of the experts' outputs run on 1/{} of "
          "the tokens; {}{}",
          r.tp,
          r.ep > 1 ? fmt::format("Megatron-Core's all-to-all dispatcher: the k = {} rows of each token a device "
                                 "received are gathered over tp before the experts' split GEMMs and reduce-scattered "
                                 "after them; the gathered rows are kept whole for the experts' weight gradients, as "
                                 "Megatron-Core keeps them",
                                 c.experts_per_token)
                   : std::string("without expert parallelism Megatron-Core's all-gather dispatcher: the tokens "
                                 "gathered over tp before the experts and their weighted sum reduce-scattered after, "
                                 "as a dense MLP's"),
          shared));
    }
  }
  double least_load = 0, most_load = 0;
  for (std::int64_t l = 0; l < c.layers; ++l) {
    if (c.experts == 0 || !c.moe_layer(l)) continue;
    const double load = busiest_expert_device(c, l, r.ep).load;
    least_load = least_load == 0 ? load : std::min(least_load, load);
    most_load = std::max(most_load, load);
  }
  const std::string routing =
      c.routing ? fmt::format(
                      "routing measured ({}): per layer, the busiest device (its {} consecutive experts) "
                      "takes {:.2f}× to {:.2f}× an average device's rows, and the step waits for it: its "
                      "expert GEMMs and its all-to-alls scaled by that load; memory: what the experts keep on "
                      "their rows, each device's own load summed over a stage's layers, the most loaded device's",
                      c.routing->file, c.experts / r.ep, least_load, most_load)
                : std::string(
                      "routing uniform (each device's experts take as many rows as its own tokens make, no "
                      "imbalance)");
  if (r.ep > 1) {
    out.approximations.push_back(fmt::format(
        "expert parallelism: {} of the {} experts a device; {}; four all-to-alls a MoE layer (dispatch and combine, "
        "forward and backward; "
        "two more recomputing) of 1/tp of the micro-batch's tokens × {} experts' hidden states a device, over {} "
        "devices {}, not overlapped; {}",
        c.experts / r.ep, c.experts, routing, c.experts_per_token, r.ep,
        r.ep / ep_per_node > 1 ? "across nodes" : "inside a node",
        edp > 1 ? fmt::format("the experts' gradients reduced over the {} replicas holding them", edp)
                : "each expert on one replica: its gradients need no reduction"));
  }
  if (r.ep <= 1 && c.routing) {
    out.approximations.push_back(fmt::format(
        "routing measured ({}): each layer's experts read the weights of the experts its tokens reach under that "
        "routing, Σ 1 − (1 − n_e/T)^N, not under uniform routing; without expert parallelism every device holds "
        "every expert, so the routing does not unbalance the devices",
        c.routing->file));
  }
  if (r.pp > 1) {
    out.approximations.push_back(
        fmt::format("pipeline: {} schedule, m × the busiest device's micro-batch + (Σ − max) / v of fill and drain; {} "
                    "transfers of {} on the critical path, not overlapped; the first device keeps its rotary tables",
                    v > 1 ? "interleaved 1F1B" : "1F1B", 2 * (v * r.pp - 1) + 2 * v * (m - 1),
                    stages_across ? "1/tp of the hidden states across nodes, then gathered" : "the hidden states"));
  }
  if (r.dp > 1) {
    out.approximations.push_back(
        zero1 ? "distributed optimizer: the gradients' reduce-scatter hides behind the last micro-batch's backward "
                "pass but what exceeds it; the updated parameters' all-gather is exposed"
              : "data parallel: the gradients' all-reduce hides behind the last micro-batch's backward pass but what "
                "exceeds it");
  }
  if (r.recompute) {
    out.approximations.push_back(
        "full recomputation: every layer keeps its input and reruns its forward pass before its backward pass");
  }
  out.approximations.push_back(
      "memory: the model states and the activations of the micro-batches the schedule keeps in flight, then (upper "
      "bound) one more micro-batch's one-layer step wholly alive; gradients in the parameters' dtype, accumulated in "
      "place over micro-batches");
  return out;
}

std::vector<ModelParallelStep> search_model_parallel(ShardCostCache& cache, const ModelParallelRequest& base,
                                                     int devices, const std::vector<std::int64_t>& micro_batches) {
  const DecoderConfig& c = cache.config();
  if (devices < 1) refuse(fmt::format("--devices {}: needs at least 1", devices));
  if (base.global_batch == 0) refuse("--search needs --global-batch (sequences a step over every device)");
  if (base.global_batch < 1 || base.global_batch >= kBelow) {
    refuse(
        fmt::format("--global-batch {} must be a positive integer below 2^31 (sequences a step over every "
                    "replica)",
                    base.global_batch));
  }
  for (std::size_t i = 0; i < micro_batches.size(); ++i) {
    const std::int64_t b = micro_batches[i];
    if (b < 1 || b >= kBelow) {
      refuse(fmt::format("--batch {} (a micro-batch to try) must be a positive integer below 2^31", b));
    }
    if (std::find(micro_batches.begin(), micro_batches.begin() + static_cast<std::ptrdiff_t>(i), b) !=
        micro_batches.begin() + static_cast<std::ptrdiff_t>(i)) {
      refuse(fmt::format("--batch {} is given twice", b));
    }
  }
  std::vector<ModelParallelStep> out;
  for (const int tp : tensor_parallel_degrees(c, base.system.devices_per_node)) {
    for (int pp = 1; pp <= c.layers && tp * pp <= devices; ++pp) {
      if (c.layers % pp != 0 || devices % (tp * pp) != 0) continue;
      const int dp = devices / (tp * pp);
      for (const std::int64_t b : micro_batches) {
        if (base.global_batch % (static_cast<std::int64_t>(dp) * b) != 0) continue;
        // expert parallelism: 1, and each power of two dividing dp and the experts
        std::vector<int> eps{1};
        for (int ep = 2; c.experts > 0 && ep <= dp; ep *= 2) {
          if (dp % ep == 0 && c.experts % ep == 0) eps.push_back(ep);
        }
        for (const int ep : eps) {
          // sequence parallelism where it applies (tp > 1, tokens it divides)
          std::vector<bool> sps{false};
          if (tp > 1 && base.tokens % tp == 0) sps.push_back(true);
          for (const bool sequence : sps) {
            for (const bool recompute : {false, true}) {
              for (const ZeroStage stage : {ZeroStage::kNone, ZeroStage::kOptimizer}) {
                if (stage == ZeroStage::kOptimizer && dp == 1) continue;
                ModelParallelRequest r = base;
                r.dp = dp;
                r.tp = tp;
                r.pp = pp;
                r.ep = ep;
                r.virtual_stages = 1;
                r.micro_batch = b;
                r.recompute = recompute;
                r.sequence_parallel = sequence;
                r.stage = stage;
                try {
                  out.push_back(model_parallel_step(cache, r));
                } catch (const Error& e) {
                  if (e.code() != ErrorCode::kInvalidArgument) throw;  // a layout that does not divide: not a candidate
                }
              }
            }
          }
        }
      }
    }
  }
  auto rank = [](const ModelParallelStep& s) {
    const std::string f = s.fit();
    return f == "fits" ? 0 : f == "may fit" ? 1 : f == "unknown" ? 2 : 3;
  };
  std::stable_sort(out.begin(), out.end(), [&](const ModelParallelStep& a, const ModelParallelStep& b) {
    if (rank(a) != rank(b)) return rank(a) < rank(b);
    return a.step_seconds < b.step_seconds;
  });
  return out;
}

std::uint64_t ModelParallelStep::memory_lower_bytes() const {
  std::uint64_t m = 0;
  for (const PipelineStage& s : stages) m = std::max(m, s.memory_lower_bytes());
  return m;
}

std::uint64_t ModelParallelStep::memory_upper_bytes() const {
  std::uint64_t m = 0;
  for (const PipelineStage& s : stages) m = std::max(m, s.memory_upper_bytes());
  return m;
}

std::string ModelParallelStep::fit() const {
  if (!device_memory_bytes) return "unknown";
  if (static_cast<double>(memory_upper_bytes()) <= *device_memory_bytes) return "fits";
  if (static_cast<double>(memory_lower_bytes()) > *device_memory_bytes) return "does not fit";
  return "may fit";
}

std::string ModelParallelStep::layout() const {
  const ModelParallelRequest& r = request;
  return fmt::format("dp={},tp={},pp={}{}{},b={},m={}{},{}{}", r.dp, r.tp, r.pp,
                     r.ep > 1 ? fmt::format(",ep={}", r.ep) : "", r.sequence_parallel ? ",sp" : "", r.micro_batch,
                     micro_batches, r.virtual_stages > 1 ? fmt::format(",v={}", r.virtual_stages) : "",
                     r.stage == ZeroStage::kNone ? "ddp" : "zero1", r.recompute ? ",recompute" : "");
}

}  // namespace neuralcost
