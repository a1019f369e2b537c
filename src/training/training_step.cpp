// The training transform (training/training.hpp): forward graph → step graph. Records keep their
// forward names; gradient records are "<op>/grad:<operand>", their tensors "grad:<tensor>".
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <set>

#include <fmt/format.h>

#include "neuralcost/core/error.hpp"
#include "neuralcost/cost/op_kinds.hpp"
#include "neuralcost/training/memory.hpp"
#include "neuralcost/training/training.hpp"
#include "training/memory_saves.hpp"

namespace neuralcost {
namespace {

bool differentiable(DType dtype) {
  switch (dtype) {
    case DType::kFp64:
    case DType::kFp32:
    case DType::kTf32:
    case DType::kFp16:
    case DType::kBf16:
    case DType::kFp8: return true;
    default: return false;
  }
}

void tag(OpRecord& op, Pass pass) { op.attributes.set(std::string(kPassAttribute), std::string(pass_name(pass))); }

/// Builds the step graph: forward records, loss, gradients, optimizer.
class StepBuilder {
 public:
  StepBuilder(const OpGraph& forward, const TrainingOptions& options)
      : forward_(forward), options_(options), step_(forward.name()) {
    step_.set_batch(forward.batch());
    for (const std::string& note : forward.notes()) step_.add_note(note);
  }

  OpGraph build() {
    find_tensors_needing_gradients();
    for (const OpRecord& op : forward_.ops()) add_forward(op);
    add_losses();
    add_recomputation();
    for (std::size_t i = forward_.size(); i-- > 0;) add_gradients(forward_.op(i));
    add_optimizer_steps();
    step_.finalize();
    return std::move(step_);
  }

 private:
  void find_tensors_needing_gradients() {
    for (const OpRecord& op : forward_.ops()) {
      bool flows = false;
      for (const ParameterDesc& p : op.parameters) flows = flows || p.trainable;
      for (const TensorDesc& t : op.inputs) flows = flows || needs_.count(t.name) != 0;
      if (!flows) continue;
      for (const TensorDesc& t : op.outputs) {
        if (differentiable(t.dtype)) needs_.insert(t.name);
      }
    }
  }

  void add_forward(const OpRecord& original) {
    OpRecord op = training_form(original);
    forward_ops_[op.name] = op;
    tag(op, Pass::kForward);
    step_.add(std::move(op));
  }

  /// The loss of each output a gradient can reach: the marked outputs when the importer marked
  /// any, else every output. Cross entropy over [rows, classes] logits (classes > 1) with
  /// integer labels, mean squared error against a target otherwise.
  void add_losses() {
    std::vector<std::string> outputs = forward_.marked_outputs();
    if (outputs.empty()) outputs = forward_.outputs();
    std::size_t count = 0;
    for (const std::string& name : outputs) {
      if (!needs_.count(name)) continue;
      const auto producer = forward_.producer(name);
      if (!producer) continue;
      const TensorDesc* out = nullptr;
      for (const TensorDesc& t : forward_.op(*producer).outputs) {
        if (t.name == name) out = &t;
      }
      if (out == nullptr) continue;
      OpRecord loss;
      loss.name = count == 0 ? "loss" : fmt::format("loss{}", count);
      loss.kind = OpKind::kLoss;
      loss.source_type = "training loss";
      const bool classes = out->shape.size() == 2 && out->shape[1] > 1;
      loss.attributes.set("function", std::string(classes ? "cross_entropy" : "mse"));
      loss.inputs.push_back(*out);
      if (classes) {
        loss.inputs.push_back({loss.name + ".labels", {out->shape[0]}, DType::kInt64});
      } else {
        loss.inputs.push_back({loss.name + ".target", out->shape, out->dtype});
      }
      loss.outputs.push_back({loss.name + ".value", {}, DType::kFp32});
      tag(loss, Pass::kForward);
      step_.add_note(fmt::format("training loss: {} of '{}' ({})", classes ? "cross entropy" : "mean squared error",
                                 name, shape_string(out->shape)));
      forward_ops_[loss.name] = loss;
      step_.add(loss);
      add_gradient_records(loss, {""});  // d loss = 1: the loss gradient reads no incoming gradient
      ++count;
    }
    if (count == 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("'{}' has no trainable parameters that reach an output: there is nothing to train",
                              forward_.name()));
    }
  }

  /// The checkpoint segments the memory ledger recomputes, in forward order, each as many times
  /// as it runs: each copy reads the kept tensors or what its own run produced and writes
  /// "<tensor>@recompute[N]".
  void add_recomputation() {
    if (options_.checkpoint.kind == CheckpointKind::kNone) return;
    const MemoryLedger ledger = memory_ledger(forward_, options_);
    for (const CheckpointSegment& segment : ledger.segments) {
      if (!segment.recomputed) continue;
      for (std::uint64_t run = 0; run < segment.runs; ++run) {
        const std::string suffix = run == 0 ? "recompute" : fmt::format("recompute{}", run + 1);
        std::set<std::string> produced;
        for (std::size_t i = segment.first_op; i <= segment.last_op; ++i) {
          OpRecord op = forward_ops_.at(forward_.op(i).name);
          op.name += "/" + suffix;
          for (TensorDesc& t : op.inputs) {
            if (produced.count(t.name)) t.name += "@" + suffix;
          }
          for (TensorDesc& t : op.outputs) {
            produced.insert(t.name);
            t.name += "@" + suffix;
          }
          tag(op, Pass::kRecompute);
          step_.add(std::move(op));
        }
      }
    }
  }

  /// The gradient of `tensor`: its one partial gradient, or the sum of several (autograd's
  /// accumulation); empty when no gradient reached it.
  std::string total_gradient(const std::string& tensor, const TensorDesc& desc, Pass pass) {
    auto it = partials_.find(tensor);
    if (it == partials_.end() || it->second.empty()) return "";
    if (it->second.size() == 1) return it->second.front();
    OpRecord sum;
    sum.name = "grad:" + tensor + "/sum";
    sum.kind = OpKind::kBinary;
    sum.source_type = "gradient accumulation";
    sum.attributes.set("function", std::string("add"));
    sum.attributes.set("variadic", true);
    for (const std::string& part : it->second) sum.inputs.push_back({part, desc.shape, desc.dtype});
    sum.outputs.push_back({"grad:" + tensor, desc.shape, desc.dtype});
    tag(sum, pass);
    step_.add(std::move(sum));
    return "grad:" + tensor;
  }

  void add_gradients(const OpRecord& op) {
    std::vector<std::string> incoming;
    bool any = false;
    for (const TensorDesc& out : op.outputs) {
      incoming.push_back(total_gradient(out.name, out, Pass::kInputGradient));
      any = any || !incoming.back().empty();
    }
    if (any) add_gradient_records(forward_ops_.at(op.name), incoming);
  }

  /// What a gradient record of `op` reads besides the incoming gradients: what the op saved.
  std::vector<TensorDesc> saved_reads(const OpRecord& op, const GradientPart& part) const {
    std::vector<TensorDesc> reads;
    const auto add_inputs = [&](std::size_t skip) {
      for (std::size_t i = 0; i < op.inputs.size(); ++i) {
        if (i != skip) reads.push_back(op.inputs[i]);
      }
    };
    const OpKindTraits& traits = traits_of(op.kind);
    if (traits.unit == ComputeUnit::kMatrix) {
      // a contraction's input gradient reads the other operands, a weight's the activations
      // (a bias, rank 1, only the incoming gradient)
      if (part.of == GradientPart::Of::kInput) {
        add_inputs(part.index);
      } else if (op.parameters.at(part.index).shape.size() > 1) {
        add_inputs(SIZE_MAX);
      }
      return reads;
    }
    // what the memory ledger says the op keeps (one rule, training/memory_saves.hpp): relu its
    // output, add nothing, mul the other operand...; its buffers (statistics, masks, argmax) are
    // no tensors of the graph
    const training::OpSaves saves = training::saves_of(op, options_);
    std::vector<bool> needs_grad;
    for (const TensorDesc& x : op.inputs) needs_grad.push_back(needs_.count(x.name) > 0);
    for (std::size_t k = 0; k < op.inputs.size(); ++k) {
      if (training::keeps_input(saves, k, needs_grad)) reads.push_back(op.inputs[k]);
    }
    if (saves.outputs) reads.insert(reads.end(), op.outputs.begin(), op.outputs.end());
    return reads;
  }

  void add_gradient_records(const OpRecord& op, const std::vector<std::string>& incoming) {
    std::vector<GradientPart> parts;
    std::uint64_t requested = 0;
    for (std::size_t i = 0; i < op.inputs.size(); ++i) {
      if (!needs_.count(op.inputs[i].name)) continue;
      parts.push_back({GradientPart::Of::kInput, i});
      if (i < 64) requested |= std::uint64_t{1} << i;
    }
    for (std::size_t p = 0; p < op.parameters.size(); ++p) {
      if (op.parameters[p].trainable) parts.push_back({GradientPart::Of::kParameter, p});
    }
    if (parts.empty()) return;
    const auto forward = std::make_shared<const OpRecord>(op);
    const bool contraction = traits_of(op.kind).unit == ComputeUnit::kMatrix;
    for (GradientPart& part : parts) {
      part.requested = requested;
      const bool input = part.of == GradientPart::Of::kInput;
      const std::string operand = input ? op.inputs[part.index].name : op.parameters[part.index].id;
      // an op reading one tensor twice (x·x) has a gradient part for each read
      bool repeated = false;
      for (std::size_t j = 0; input && j < part.index; ++j) repeated = repeated || op.inputs[j].name == operand;
      OpRecord g;
      g.name = repeated ? fmt::format("{}/grad:{}#{}", op.name, operand, part.index)
                        : fmt::format("{}/grad:{}", op.name, operand);
      g.kind = contraction ? OpKind::kContractionGradient : OpKind::kGradient;
      g.source_type = fmt::format("{} backward", op_kind_name(op.kind));
      g.differentiates = forward;
      g.attributes.set("part", std::string(input ? "input" : "parameter"));
      g.attributes.set("index", static_cast<std::int64_t>(part.index));
      g.attributes.set("requested", static_cast<std::int64_t>(requested));
      for (std::size_t j = 0; j < incoming.size() && j < op.outputs.size(); ++j) {
        if (!incoming[j].empty()) g.inputs.push_back({incoming[j], op.outputs[j].shape, op.outputs[j].dtype});
      }
      for (TensorDesc& t : saved_reads(op, part)) g.inputs.push_back(std::move(t));
      if (!input || traits_of(op.kind).saves == Saves::kInputsAndStats) {
        for (const ParameterDesc& p : op.parameters) {
          if (!input && &p == &op.parameters[part.index]) continue;
          if (contraction || p.trainable) g.parameters.push_back(p);
        }
      } else if (contraction) {
        g.parameters = op.parameters;  // dX reads the weights
      }
      const Shape shape = input ? op.inputs[part.index].shape : op.parameters[part.index].shape;
      const DType dtype = input ? op.inputs[part.index].dtype : op.parameters[part.index].dtype;
      const std::string target = input ? op.inputs[part.index].name : "param:" + operand;
      std::vector<std::string>& partial = partials_[target];
      const std::string name = fmt::format("grad:{}/{}", target, partial.size());
      partial.push_back(name);
      g.outputs.push_back({name, shape, dtype});
      tag(g, input ? Pass::kInputGradient : Pass::kWeightGradient);
      step_.add(std::move(g));
    }
  }

  void add_optimizer_steps() {
    const bool mixed = graph_precision(options_) != Precision::kFp32;  // master weights
    for (const ParameterDesc& p : forward_.unique_parameters()) {
      if (!p.trainable) continue;
      const std::string gradient = total_gradient("param:" + p.id, {"", p.shape, p.dtype}, Pass::kWeightGradient);
      if (gradient.empty()) continue;
      OpRecord step;
      step.name = "optimizer:" + p.id;
      step.kind = OpKind::kOptimizerStep;
      step.source_type = fmt::format("{} step", optimizer_name(options_.optimizer));
      step.attributes.set("function", std::string(optimizer_name(options_.optimizer)));
      step.attributes.set("precision", std::string(precision_name(options_.precision)));
      step.inputs.push_back({gradient, p.shape, p.dtype});
      // the weights updated in fp32: the master copy in mixed precision, the parameter otherwise
      ParameterDesc weights = p;
      if (mixed) weights = {p.id + ".master", p.shape, DType::kFp32, false};
      step.parameters.push_back(weights);
      std::uint64_t states = optimizer_state_bytes_per_element(options_.optimizer, Precision::kFp32) / 4;
      const char* state_names[] = {"exp_avg", "exp_avg_sq"};
      if (options_.optimizer == Optimizer::kMomentum) state_names[0] = "momentum_buffer";
      for (std::uint64_t s = 0; s < states; ++s) {
        step.parameters.push_back({p.id + "." + state_names[s], p.shape, DType::kFp32, false});
      }
      for (const ParameterDesc& written : step.parameters) {
        step.outputs.push_back({"updated:" + written.id, written.shape, written.dtype});
      }
      if (mixed) step.outputs.push_back({"updated:" + p.id, p.shape, p.dtype});  // the low-precision copy
      step.compute_dtype = DType::kFp32;
      tag(step, Pass::kOptimizer);
      step_.add(std::move(step));
    }
  }

  const OpGraph& forward_;
  const TrainingOptions& options_;
  OpGraph step_;
  std::set<std::string> needs_;
  std::map<std::string, OpRecord> forward_ops_;               // as added to the step (batch norm in training form)
  std::map<std::string, std::vector<std::string>> partials_;  // tensor (or "param:<id>") → partial gradients
};

}  // namespace

OpRecord training_form(OpRecord op) {
  if (op.kind == OpKind::kBatchNorm) op.attributes.set("training", true);
  return op;
}

OpGraph training_step(const OpGraph& forward, const TrainingOptions& options) {
  return StepBuilder(forward, options).build();
}

}  // namespace neuralcost
