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

enum class Side { kBefore, kLayer, kAfter };

/// The decoder with one layer, of the kind of `layer`.
DecoderConfig one_layer(const DecoderConfig& c, std::int64_t layer) {
  DecoderConfig d = c;
  d.layers = 1;
  if (!c.sliding_layers.empty()) d.sliding_layers = {c.sliding_layers[static_cast<std::size_t>(layer)]};
  if (c.experts > 0) {
    d.sparse_step = 1;
    d.dense_layers.clear();
    if (!c.moe_layer(layer)) d.dense_layers = {0};
  }
  return d;
}

/// Which side of the one-layer graph each forward op is on, and which op owns each parameter (the
/// first that reads it).
class Owners {
 public:
  Owners(const OpGraph& forward, const std::string& layer) {
    std::size_t first_layer = forward.ops().size();
    for (std::size_t i = 0; i < forward.ops().size(); ++i) {
      const std::string& n = forward.op(i).name;
      const bool in_layer = n.size() > layer.size() && n.compare(0, layer.size(), layer) == 0 &&
                            (n[layer.size()] == '.' || n[layer.size()] == '#');
      if (in_layer) first_layer = std::min(first_layer, i);
      side_[n] = in_layer ? Side::kLayer : i < first_layer ? Side::kBefore : Side::kAfter;
      for (const ParameterDesc& p : forward.op(i).parameters) {
        if (!parameter_owner_.count(p.id)) parameter_owner_[p.id] = n;
      }
      for (const TensorDesc& t : forward.op(i).inputs) {
        if (!consumer_.count(t.name)) consumer_[t.name] = n;
      }
    }
    forward_ = &forward;
  }

  Side of_forward(const std::string& name) const {
    const auto it = side_.find(name);
    return it == side_.end() ? Side::kAfter : it->second;  // the loss, added by the step
  }
  Side of_parameter(const std::string& id) const {
    const auto it = parameter_owner_.find(id);
    if (it == parameter_owner_.end()) {
      throw Error(ErrorCode::kInternal, fmt::format("model parallel: parameter '{}' has no owner", id));
    }
    return of_forward(it->second);
  }
  /// The side of the forward op that produces `tensor`; a graph input's first consumer's.
  Side of_tensor(const std::string& tensor) const {
    if (const auto producer = forward_->producer(tensor)) return of_forward(forward_->op(*producer).name);
    const auto it = consumer_.find(tensor);
    return it == consumer_.end() ? Side::kBefore : of_forward(it->second);
  }
  /// The side of a step-graph op: its own forward op, the forward op it differentiates, the
  /// owner of the parameter an optimizer step updates, or the first consumer of the tensor whose
  /// gradients a sum accumulates (a layer's input sums the gradients of its norm and its
  /// residual: the layer's, in a chain of layers as in the one-layer graph).
  Side of_step_op(const OpRecord& op) const {
    if (op.differentiates) return of_forward(op.differentiates->name);
    const Pass pass = pass_of(op);
    if (pass == Pass::kOptimizer) return of_parameter(op.name.substr(op.name.find(':') + 1));
    if (pass == Pass::kForward) return of_forward(op.name);
    const std::string prefix = "grad:";
    if (op.name.rfind(prefix, 0) == 0) {
      const std::string tensor = op.name.substr(prefix.size(), op.name.rfind('/') - prefix.size());
      if (tensor.rfind("param:", 0) == 0) return of_parameter(tensor.substr(6));
      const auto it = consumer_.find(tensor);
      if (it != consumer_.end()) return of_forward(it->second);
    }
    throw Error(ErrorCode::kInternal, fmt::format("model parallel: cannot place the step's op '{}'", op.name));
  }

 private:
  std::map<std::string, Side> side_;
  std::map<std::string, std::string> parameter_owner_;
  std::map<std::string, std::string> consumer_;  // tensor → its first consumer
  const OpGraph* forward_ = nullptr;
};

/// The parts of the one-layer shard `d` at the request's micro-batch.
void split_parts(const DecoderConfig& d, const DecoderRequest& r, const HardwareSpec& hardware,
                 const TrainingOptions& training, ShardCosts& out, const std::string& kind, bool ends) {
  const OpGraph forward = build_decoder(d, r, "one layer");
  const TrainingReport report = training_report(forward, hardware, training);
  const Owners owners(forward, decoder_layer_name(d, 0));
  const Analysis& step = report.step;
  const double unfused = step.totals.lower_bound_seconds;
  const double scale = unfused > 0 ? step.totals.fused_lower_bound_seconds / unfused : 1;
  PartCost parts[3];
  for (const OpRoofline& o : step.ops) {
    const OpRecord& op = step.graph.op(o.op_index);
    PartCost& part = parts[static_cast<int>(owners.of_step_op(op))];
    const double flops = static_cast<double>(o.cost.flops);
    const Pass pass = pass_of(op);
    (pass == Pass::kForward || pass == Pass::kRecompute ? part.forward_flops
     : pass == Pass::kOptimizer                         ? part.optimizer_flops
                                                        : part.backward_flops) += flops;
  }
  // times: the fused bound by pass (each fused kernel, an anchor and the elementwise and norm ops
  // after it, in its anchor's pass). A layer's is what a second layer adds to the one-layer step
  // (kernels fuse across the layers' boundary); the ends' is the rest, split by their kernels.
  const auto fused_by_pass = [&](const Analysis& a, const Owners* split, double(*into)[3]) {
    for (const FusionGroup& group : a.fusion_groups) {
      if (group.ops.empty()) continue;
      const OpRecord& anchor = a.graph.op(group.ops.front());
      const Pass pass = pass_of(anchor);
      const int p = pass == Pass::kForward || pass == Pass::kRecompute ? 0 : pass == Pass::kOptimizer ? 2 : 1;
      into[split ? static_cast<int>(split->of_step_op(anchor)) : 0][p] += group.lower_bound_seconds;
    }
  };
  double one[3][3] = {}, two[3][3] = {}, sides[3][3] = {};
  fused_by_pass(step, nullptr, one);
  fused_by_pass(step, &owners, sides);
  DecoderConfig pair = d;
  pair.layers = 2;
  if (!d.sliding_layers.empty()) pair.sliding_layers = {d.sliding_layers[0], d.sliding_layers[0]};
  if (!d.dense_layers.empty()) pair.dense_layers = {0, 1};
  fused_by_pass(analyze(training_step(build_decoder(pair, r, "two layers"), training), hardware), nullptr, two);
  for (int p = 0; p < 3; ++p) {
    const double layer = two[0][p] - one[0][p];
    const double after = one[0][p] - layer - sides[0][p];
    double* layer_seconds[3] = {&parts[1].forward_seconds, &parts[1].backward_seconds, &parts[1].optimizer_seconds};
    double* before_seconds[3] = {&parts[0].forward_seconds, &parts[0].backward_seconds, &parts[0].optimizer_seconds};
    double* after_seconds[3] = {&parts[2].forward_seconds, &parts[2].backward_seconds, &parts[2].optimizer_seconds};
    *layer_seconds[p] = layer;
    *before_seconds[p] = sides[0][p];
    *after_seconds[p] = after;
  }
  for (const ParameterDesc& p : forward.unique_parameters()) {
    if (p.trainable) parts[static_cast<int>(owners.of_parameter(p.id))].parameters += p.elements();
  }
  const MemoryLedger& ledger = report.memory;
  // a kept storage belongs to the part that produces it (a layer's output, kept by the next
  // layer's norm, is its layer's; the rotary tables the layers share are kept once, before them)
  for (const SavedStorage& saved : ledger.saved) {
    if (!saved.kept) continue;
    const bool tensor = forward.producer(saved.name).has_value() || saved.graph_input;
    const Side side = tensor ? owners.of_tensor(saved.name) : owners.of_forward(report.op_names.at(saved.first_saver));
    parts[static_cast<int>(side)].saved_bytes += saved.bytes;
  }
  out.layers[kind] = parts[1];
  if (!ends) return;
  out.before = parts[0];
  out.after = parts[2];
  out.fused_scale = scale;
  out.working_bytes = ledger.activations.upper_bound_bytes;
  const auto per = [&](std::uint64_t bytes) {
    return ledger.parameter_count > 0 ? static_cast<double>(bytes) / static_cast<double>(ledger.parameter_count) : 0;
  };
  out.parameter_bytes_per_element = per(ledger.parameter_bytes);
  out.gradient_bytes_per_element = per(ledger.gradient_bytes);
  out.optimizer_bytes_per_element = per(ledger.optimizer_state_bytes);
  out.master_bytes_per_element = per(ledger.master_weight_bytes);
}

double element_bytes(DType dtype) { return static_cast<double>(dtype_bytes(dtype)); }

}  // namespace

PartCost& PartCost::operator+=(const PartCost& o) {
  forward_seconds += o.forward_seconds;
  backward_seconds += o.backward_seconds;
  optimizer_seconds += o.optimizer_seconds;
  forward_flops += o.forward_flops;
  backward_flops += o.backward_flops;
  optimizer_flops += o.optimizer_flops;
  parameters += o.parameters;
  saved_bytes += o.saved_bytes;
  return *this;
}

std::string decoder_layer_kind(const DecoderConfig& config, std::int64_t layer) {
  const bool window = config.window_of(layer) > 0, experts = config.experts > 0 && config.moe_layer(layer);
  return window && experts ? "window+experts" : window ? "window" : experts ? "experts" : "dense";
}

const ShardCosts& ShardCostCache::get(int tp, std::int64_t micro_batch, std::int64_t tokens,
                                      const TrainingOptions& training, DType dtype) {
  const std::string key = fmt::format("{}/{}/{}/{}/{}/{}", tp, micro_batch, tokens, optimizer_name(training.optimizer),
                                      precision_name(training.precision), dtype_name(dtype));
  auto& slot = cache_[key];
  if (slot) return *slot;
  auto costs = std::make_unique<ShardCosts>();
  costs->shard = shard_decoder(config_, tp, &costs->notes);
  DecoderRequest r;
  r.batch = micro_batch;
  r.prompt = tokens;
  r.dtype = dtype;
  r.training = true;
  TrainingOptions options = training;
  options.checkpoint = CheckpointPolicy{};  // recomputation is the schedule's (whole layers)
  bool ends = true;
  for (std::int64_t l = 0; l < config_.layers; ++l) {
    const std::string kind = decoder_layer_kind(config_, l);
    if (costs->layers.count(kind)) continue;
    split_parts(one_layer(costs->shard, l), r, hardware_, options, *costs, kind, ends);
    ends = false;
  }
  costs->hidden_bytes = static_cast<std::uint64_t>(micro_batch * tokens * config_.hidden) * dtype_bytes(dtype);
  slot = std::move(costs);
  return *slot;
}

namespace {

void refuse(const std::string& message) { throw Error(ErrorCode::kInvalidArgument, message); }

void check(const DecoderConfig& c, const ModelParallelRequest& r) {
  for (const auto& [name, value] : {std::pair<const char*, std::int64_t>{"dp", r.dp}, {"tp", r.tp}, {"pp", r.pp}}) {
    if (value < 1) refuse(fmt::format("--parallel {}={}: needs at least 1 device", name, value));
  }
  if (r.virtual_stages < 1) refuse(fmt::format("--virtual-stages {} must be at least 1", r.virtual_stages));
  if (r.virtual_stages > 1 && r.pp == 1) refuse("--virtual-stages applies only with pipeline parallelism (pp > 1)");
  if (r.micro_batch < 1) refuse(fmt::format("--batch {} (the micro-batch) must be at least 1", r.micro_batch));
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
  if (c.layers % (r.pp * r.virtual_stages) != 0) {
    refuse(fmt::format("--parallel pp={}{} does not divide the model's {} layers into equal stages", r.pp,
                       r.virtual_stages > 1 ? fmt::format(" × {} chunks", r.virtual_stages) : "", c.layers));
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
  const ShardCosts& costs = cache.get(r.tp, r.micro_batch, r.tokens, r.training, r.dtype);
  out.notes = costs.notes;
  const double elt = element_bytes(r.dtype), act = static_cast<double>(costs.hidden_bytes);
  const int per_node = r.system.devices_per_node, v = r.virtual_stages;
  const bool zero1 = r.stage == ZeroStage::kOptimizer;

  // the links: tp inside a node; dp groups of consecutive tp groups; pp stages tp × dp devices apart
  std::string basis;
  const auto tensor_call = [&](double bytes) {
    return r.tp > 1 ? in_node_cost(r.intra, Collective::kAllReduce, r.tp, bytes, elt, basis).seconds() : 0.0;
  };
  const double layer_call = tensor_call(act);
  const double loss_call = tensor_call(static_cast<double>(r.micro_batch * r.tokens) * 4);
  const int dp_per_node = std::max(1, std::min(r.dp, per_node / r.tp));
  const int dp_nodes = r.dp / dp_per_node;
  const bool stages_across = r.tp * r.dp >= per_node && out.devices > per_node;
  out.link_of_stages = stages_across ? "inter-node" : "intra-node";
  if (r.pp > 1) {
    if (stages_across) {
      // Megatron's scatter-gather: each of the tp devices sends 1/tp across, then they all-gather
      const double part = r.tp > 1 ? act / r.tp : act;
      out.p2p_each_seconds =
          group_cost(r.system, r.intra, r.inter, Collective::kSendRecv, 1, 2, part, elt, basis).seconds();
      if (r.tp > 1)
        out.p2p_each_seconds += in_node_cost(r.intra, Collective::kAllGather, r.tp, act, elt, basis).seconds();
    } else {
      out.p2p_each_seconds = in_node_cost(r.intra, Collective::kSendRecv, 2, act, elt, basis).seconds();
    }
  }

  const std::int64_t chunk = c.layers / (r.pp * v);
  double most = 0, sum = 0;
  for (int d = 0; d < r.pp; ++d) {
    PipelineStage st;
    st.index = d;
    PartCost layers;
    std::uint64_t largest_layer_saved = 0;
    for (int k = 0; k < v; ++k) {
      const std::int64_t first = (static_cast<std::int64_t>(k) * r.pp + d) * chunk;
      st.layers.emplace_back(first, first + chunk);
      for (std::int64_t l = first; l < first + chunk; ++l) {
        const PartCost& layer = costs.layers.at(decoder_layer_kind(c, l));
        layers += layer;
        largest_layer_saved = std::max(largest_layer_saved, layer.saved_bytes);
      }
    }
    const std::int64_t layer_count = chunk * v;
    const bool first = d == 0, last = d == r.pp - 1;
    PartCost all = layers;
    if (first) all += costs.before;
    if (last) all += costs.after;
    st.forward_seconds = all.forward_seconds;
    st.backward_seconds = all.backward_seconds + (r.recompute ? layers.forward_seconds : 0);
    st.flops = all.forward_flops + all.backward_flops + (r.recompute ? layers.forward_flops : 0);
    // Megatron's f and g: two all-reduces a layer forward, two backward, two more recomputing
    double calls = static_cast<double>(layer_count) * (r.recompute ? 6 : 4) + (first ? 1 : 0);
    st.tensor_seconds = calls * layer_call + (last ? 3 * loss_call : 0);
    st.parameters = all.parameters;
    if (last && r.pp > 1 && c.tied_embeddings) {
      st.parameters += static_cast<std::uint64_t>(costs.shard.vocab * c.hidden);  // the LM head's copy
    }
    st.optimizer_seconds = all.optimizer_seconds / (zero1 ? r.dp : 1);
    const double p = static_cast<double>(st.parameters);
    st.state_bytes = static_cast<std::uint64_t>(
        p * (costs.parameter_bytes_per_element + costs.gradient_bytes_per_element +
             (costs.optimizer_bytes_per_element + costs.master_bytes_per_element) / (zero1 ? r.dp : 1)));
    // 1F1B keeps pp − d micro-batches in flight on device d; interleaved, Megatron's warm-up
    const std::int64_t chunks_in_flight =
        v == 1 ? std::min<std::int64_t>(m, r.pp - d)
               : std::min<std::int64_t>(m * v, static_cast<std::int64_t>(r.pp - d - 1) * 2 + (v - 1) * r.pp + 1);
    st.in_flight = static_cast<int>(chunks_in_flight);
    const double per_chunk = r.recompute ? static_cast<double>(chunk) * static_cast<double>(costs.hidden_bytes)
                                         : static_cast<double>(layers.saved_bytes) / v;
    const std::int64_t ends_in_flight = std::min<std::int64_t>(m, r.pp - d);
    st.activation_bytes = static_cast<std::uint64_t>(
        static_cast<double>(chunks_in_flight) * per_chunk +
        static_cast<double>(ends_in_flight) *
            static_cast<double>((first ? costs.before.saved_bytes : 0) + (last ? costs.after.saved_bytes : 0)));
    st.working_bytes = costs.working_bytes + (r.recompute ? largest_layer_saved : 0);
    if (r.dp > 1) {
      const double gradients = p * costs.gradient_bytes_per_element;
      const Collective reduce = zero1 ? Collective::kReduceScatter : Collective::kAllReduce;
      const double reduced = group_cost(r.system, r.intra, r.inter, reduce, dp_per_node, dp_nodes, gradients,
                                        costs.gradient_bytes_per_element, basis)
                                 .seconds();
      const double gathered =
          zero1 ? group_cost(r.system, r.intra, r.inter, Collective::kAllGather, dp_per_node, dp_nodes,
                             p * costs.parameter_bytes_per_element, costs.parameter_bytes_per_element, basis)
                      .seconds()
                : 0.0;
      st.gradient_seconds = reduced + gathered;
      // the reduction hides behind the last micro-batch's backward pass, as DDP's buckets do;
      // the distributed optimizer's gather follows the optimizer step
      const double last_backward = st.backward_seconds + st.tensor_seconds / 2;
      st.gradient_exposed_seconds = std::max(0.0, reduced - last_backward) + gathered;
    }
    most = std::max(most, st.busy_seconds());
    sum += st.busy_seconds();
    out.tensor_seconds = std::max(out.tensor_seconds, st.tensor_seconds * static_cast<double>(m));
    out.gradient_exposed_seconds = std::max(out.gradient_exposed_seconds, st.gradient_exposed_seconds);
    out.optimizer_seconds = std::max(out.optimizer_seconds, st.optimizer_seconds);
    out.hardware_flops += (st.flops * static_cast<double>(m) + all.optimizer_flops / (zero1 ? r.dp : 1)) * r.tp * r.dp;
    out.stages.push_back(std::move(st));
  }
  // m micro-batches at the busiest device's pace, the others' fill and drain (1/v of it
  // interleaved), and the transfers between stages on the critical path
  out.bubble_seconds = (sum - most) / v;
  if (r.pp > 1) out.p2p_seconds = (2.0 * (v * r.pp - 1) + 2.0 * v * static_cast<double>(m - 1)) * out.p2p_each_seconds;
  out.pipeline_seconds = static_cast<double>(m) * most + out.bubble_seconds + out.p2p_seconds;
  double tied = 0;
  if (r.pp > 1 && c.tied_embeddings) {  // the two copies of the embedding's gradient, summed
    const double bytes = static_cast<double>(costs.shard.vocab * c.hidden) * costs.gradient_bytes_per_element;
    tied = stages_across
               ? group_cost(r.system, r.intra, r.inter, Collective::kAllReduce, 1, 2, bytes,
                            costs.gradient_bytes_per_element, basis)
                     .seconds()
               : in_node_cost(r.intra, Collective::kAllReduce, 2, bytes, costs.gradient_bytes_per_element, basis)
                     .seconds();
  }
  out.step_seconds = out.pipeline_seconds + out.gradient_exposed_seconds + tied + out.optimizer_seconds;

  // the model's own FLOPs: the unsharded one-layer parts over every layer and micro-batch
  const ShardCosts& whole = r.tp == 1 ? costs : cache.get(1, r.micro_batch, r.tokens, r.training, r.dtype);
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
        "tensor parallelism: two all-reduces of the hidden states a layer forward and two backward (two more "
        "recomputing), one after the embedding, three small ones in the vocabulary-parallel loss; none overlapped "
        "with compute; norms replicated");
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
  if (base.global_batch < 1) refuse("--search needs --global-batch (sequences a step over every device)");
  std::vector<ModelParallelStep> out;
  for (const int tp : tensor_parallel_degrees(c, base.system.devices_per_node)) {
    for (int pp = 1; pp <= c.layers && tp * pp <= devices; ++pp) {
      if (c.layers % pp != 0 || devices % (tp * pp) != 0) continue;
      const int dp = devices / (tp * pp);
      for (const std::int64_t b : micro_batches) {
        if (base.global_batch % (static_cast<std::int64_t>(dp) * b) != 0) continue;
        for (const bool recompute : {false, true}) {
          for (const ZeroStage stage : {ZeroStage::kNone, ZeroStage::kOptimizer}) {
            if (stage == ZeroStage::kOptimizer && dp == 1) continue;
            ModelParallelRequest r = base;
            r.dp = dp;
            r.tp = tp;
            r.pp = pp;
            r.virtual_stages = 1;
            r.micro_batch = b;
            r.recompute = recompute;
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
  return fmt::format("dp={},tp={},pp={},b={},m={}{},{}{}", r.dp, r.tp, r.pp, r.micro_batch, micro_batches,
                     r.virtual_stages > 1 ? fmt::format(",v={}", r.virtual_stages) : "",
                     r.stage == ZeroStage::kNone ? "ddp" : "zero1", r.recompute ? ",recompute" : "");
}

}  // namespace neuralcost
