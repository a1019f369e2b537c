// The parts of a decoder's one-layer tensor-parallel shard at a micro-batch: the embedding side, each
// kind of layer, the head side (include/neuralcost/parallel/model_parallel.hpp, ShardCostCache).
#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "analysis/fusion.hpp"
#include "neuralcost/analysis/roofline.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/parallel/model_parallel.hpp"
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
    if (c.routing) {
      d.routing->counts = {c.routing->counts[static_cast<std::size_t>(layer)]};
      d.routing->first_alike = {0};
    }
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
      if (forward.op(i).attributes.get_bool("residual_stream", false)) stream_.insert(n);
      if (forward.op(i).attributes.get_bool("routed_rows", false)) routed_.insert(n);
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
  /// Whether a forward or backward op of the step is on the residual stream (decoder_builder.hpp):
  /// a norm or residual add, its gradient, or the sum of the gradients of a tensor a norm reads
  /// first (a layer's input, its attention's sum).
  bool is_stream(const std::string& forward_op) const { return stream_.count(forward_op) > 0; }
  /// Whether a forward op runs on the rows routed to the experts (decoder_builder.hpp).
  bool on_routed_rows(const std::string& forward_op) const { return routed_.count(forward_op) > 0; }
  /// A tensor a residual-stream op produces, or reads before any other op does (the embedding's
  /// output, which sequence parallelism scatters).
  bool tensor_on_residual_stream(const std::string& tensor) const {
    const auto producer = forward_->producer(tensor);
    if (producer && is_stream(forward_->op(*producer).name)) return true;
    const auto it = consumer_.find(tensor);
    return it != consumer_.end() && is_stream(it->second);
  }
  bool on_residual_stream(const OpRecord& op) const {
    const Pass pass = pass_of(op);
    if (pass == Pass::kOptimizer) return false;
    if (op.differentiates) return op.differentiates->attributes.get_bool("residual_stream", false);
    if (pass == Pass::kForward) return op.attributes.get_bool("residual_stream", false);
    const std::string prefix = "grad:";
    if (op.name.rfind(prefix, 0) != 0) return false;
    const auto it = consumer_.find(op.name.substr(prefix.size(), op.name.rfind('/') - prefix.size()));
    if (it == consumer_.end()) return false;
    return stream_.count(it->second) > 0;
  }

 private:
  std::map<std::string, Side> side_;
  std::map<std::string, std::string> parameter_owner_;
  std::map<std::string, std::string> consumer_;  // tensor → its first consumer
  std::set<std::string> stream_;                 // forward ops on the residual stream
  std::set<std::string> routed_;                 // forward ops on the rows routed to the experts
  const OpGraph* forward_ = nullptr;
};

/// A step op's phase: 0 forward (and recomputation), 1 backward, 2 the optimizer step.
int phase_of(const OpRecord& op) {
  const Pass pass = pass_of(op);
  return pass == Pass::kForward || pass == Pass::kRecompute ? 0 : pass == Pass::kOptimizer ? 2 : 1;
}
double& seconds_of(PartCost& part, int phase) {
  return phase == 0 ? part.forward_seconds : phase == 2 ? part.optimizer_seconds : part.backward_seconds;
}
double& flops_of(PartCost& part, int phase) {
  return phase == 0 ? part.forward_flops : phase == 2 ? part.optimizer_flops : part.backward_flops;
}

/// The parts of the one-layer shard `d` at the request's micro-batch. `shards` > 1: sequence
/// parallelism over that many devices (the residual stream's ops run on 1/shards of the tokens).
void split_parts(const DecoderConfig& d, const DecoderRequest& r, const HardwareSpec& hardware,
                 const TrainingOptions& training, ShardCosts& out, const std::string& kind, bool ends, int shards) {
  const OpGraph forward = build_decoder(d, r, "one layer");
  const TrainingReport report = training_report(forward, hardware, training);
  const Owners owners(forward, decoder_layer_name(d, 0));
  const Analysis& step = report.step;
  const double unfused = step.totals.lower_bound_seconds;
  const double scale = unfused > 0 ? step.totals.fused_lower_bound_seconds / unfused : 1;
  // sequence parallelism: a residual-stream op computes (and keeps) 1/shards of the tokens
  const auto share = [&](const Owners& stream, const OpRecord& op) {
    return shards > 1 && stream.on_residual_stream(op) ? 1.0 / shards : 1.0;
  };
  PartCost parts[3];
  for (const OpRoofline& o : step.ops) {
    const OpRecord& op = step.graph.op(o.op_index);
    PartCost& part = parts[static_cast<int>(owners.of_step_op(op))];
    flops_of(part, phase_of(op)) += static_cast<double>(o.cost.flops) * share(owners, op);
    // the experts' GEMMs and the ops between them that take the busiest device's rows
    const OpRecord& forward_op = op.differentiates ? *op.differentiates : op;
    if (forward_op.kind == OpKind::kExpertLinear || forward_op.attributes.has("rows_load")) {
      (phase_of(op) == 0 ? part.expert_forward_flops : part.expert_backward_flops) += static_cast<double>(o.cost.flops);
    }
  }
  // times: the fused bound by pass (each fused kernel, an anchor and the elementwise and norm ops
  // after it, in its anchor's pass). A layer's is what a second layer adds to the one-layer step
  // (kernels fuse across the layers' boundary); the ends' is the rest, split by their kernels.
  // Under sequence parallelism a reduce-scatter or all-gather separates the residual stream's
  // kernels from the GEMMs beside them, and each runs on 1/shards of the tokens.
  const auto fused_by_pass = [&](const Analysis& a, const Owners& stream, const Owners* split, double(*into)[3]) {
    std::vector<FusionGroup> apart;
    if (shards > 1) {
      std::vector<int> regions(a.graph.size());
      for (std::size_t i = 0; i < regions.size(); ++i) regions[i] = stream.on_residual_stream(a.graph.op(i)) ? 1 : 0;
      apart = detail::fuse(a.graph, a.ops, hardware, resident_bytes_of(a.graph), regions);
    }
    for (const FusionGroup& group : shards > 1 ? apart : a.fusion_groups) {
      if (group.ops.empty()) continue;
      const OpRecord& anchor = a.graph.op(group.ops.front());
      into[split ? static_cast<int>(split->of_step_op(anchor)) : 0][phase_of(anchor)] +=
          group.lower_bound_seconds * share(stream, anchor);
    }
  };
  double one[3][3] = {}, two[3][3] = {}, sides[3][3] = {};
  fused_by_pass(step, owners, nullptr, one);
  fused_by_pass(step, owners, &owners, sides);
  DecoderConfig pair = d;
  pair.layers = 2;
  if (!d.sliding_layers.empty()) pair.sliding_layers = {d.sliding_layers[0], d.sliding_layers[0]};
  if (!d.dense_layers.empty()) pair.dense_layers = {0, 1};
  if (d.routing) {
    pair.routing->counts = {d.routing->counts[0], d.routing->counts[0]};
    pair.routing->first_alike = {0, 0};
  }
  const OpGraph pair_forward = build_decoder(pair, r, "two layers");
  fused_by_pass(analyze(training_step(pair_forward, training), hardware),
                Owners(pair_forward, decoder_layer_name(d, 0)), nullptr, two);
  for (int p = 0; p < 3; ++p) {
    const double layer = two[0][p] - one[0][p];
    seconds_of(parts[1], p) = layer;
    seconds_of(parts[0], p) = sides[0][p];
    seconds_of(parts[2], p) = one[0][p] - layer - sides[0][p];
  }
  for (const ParameterDesc& p : forward.unique_parameters()) {
    if (p.trainable) parts[static_cast<int>(owners.of_parameter(p.id))].parameters += p.elements();
  }
  for (const OpRecord& op : forward.ops()) {
    if (op.kind != OpKind::kExpertLinear) continue;
    for (const ParameterDesc& p : op.parameters) {
      if (p.trainable) parts[static_cast<int>(owners.of_forward(op.name))].expert_parameters += p.elements();
    }
  }
  const MemoryLedger& ledger = report.memory;
  // a kept storage belongs to the part that produces it (a layer's output, kept by the next
  // layer's norm, is its layer's; the rotary tables the layers share are kept once, before them)
  for (const SavedStorage& saved : ledger.saved) {
    if (!saved.kept) continue;
    const bool tensor = forward.producer(saved.name).has_value() || saved.graph_input;
    const std::string& saver = report.op_names.at(saved.first_saver);
    const Side side = tensor ? owners.of_tensor(saved.name) : owners.of_forward(saver);
    // sequence parallelism keeps the residual stream's tensors (a norm's input and output, its
    // statistics) split over the devices, and gathers them again for the backward pass
    const bool split = shards > 1 && (tensor ? owners.tensor_on_residual_stream(saved.name) : owners.is_stream(saver));
    const std::uint64_t bytes = split ? saved.bytes / static_cast<std::uint64_t>(shards) : saved.bytes;
    parts[static_cast<int>(side)].saved_bytes += bytes;
    // what the experts keep on their rows (the gathered copy, their GEMMs' and activation's
    // outputs): the rows of an average expert-parallel device
    if (owners.on_routed_rows(saver)) parts[static_cast<int>(side)].routed_saved_bytes += bytes;
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

}  // namespace

PartCost& PartCost::operator+=(const PartCost& o) {
  forward_seconds += o.forward_seconds;
  backward_seconds += o.backward_seconds;
  optimizer_seconds += o.optimizer_seconds;
  forward_flops += o.forward_flops;
  expert_forward_flops += o.expert_forward_flops;
  expert_backward_flops += o.expert_backward_flops;
  backward_flops += o.backward_flops;
  optimizer_flops += o.optimizer_flops;
  parameters += o.parameters;
  expert_parameters += o.expert_parameters;
  saved_bytes += o.saved_bytes;
  routed_saved_bytes += o.routed_saved_bytes;
  return *this;
}

std::string decoder_layer_kind(const DecoderConfig& config, std::int64_t layer) {
  const bool window = config.window_of(layer) > 0, experts = config.experts > 0 && config.moe_layer(layer);
  const std::string kind = window && experts ? "window+experts" : window ? "window" : experts ? "experts" : "dense";
  if (!experts || !config.routing) return kind;
  // under a measured routing a layer's counts are its own: its kind names the first layer routed
  // alike (and of the same window), which is analysed for both
  std::int64_t alike = layer;
  const std::vector<std::int64_t>& first = config.routing->first_alike;
  if (static_cast<std::size_t>(layer) < first.size()) {
    alike = first[static_cast<std::size_t>(layer)];
    if ((config.window_of(alike) > 0) != window) alike = layer;
  }
  return fmt::format("{}@{}", kind, alike);
}

const ShardCosts& ShardCostCache::get(int tp, std::int64_t micro_batch, std::int64_t tokens,
                                      const TrainingOptions& training, DType dtype, int ep, bool sequence_parallel) {
  const int shards = sequence_parallel ? tp : 1;
  const std::string key =
      fmt::format("{}/{}/{}/{}/{}/{}/{}/{}", tp, micro_batch, tokens, optimizer_name(training.optimizer),
                  precision_name(training.precision), dtype_name(dtype), ep, shards);
  auto& slot = cache_[key];
  if (slot) return *slot;
  auto costs = std::make_unique<ShardCosts>();
  costs->shard = shard_decoder(config_, tp, &costs->notes);
  costs->shard.expert_parallel = ep;
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
    split_parts(one_layer(costs->shard, l), r, hardware_, options, *costs, kind, ends, shards);
    ends = false;
  }
  costs->hidden_bytes = static_cast<std::uint64_t>(micro_batch * tokens * config_.hidden) * dtype_bytes(dtype);
  slot = std::move(costs);
  return *slot;
}

}  // namespace neuralcost
