// What each op keeps for its backward pass (memory_saves.hpp): the op-kind table's Saves row,
// refined by function as autograd does it (docs/training-memory.md "What each op keeps").
#include "training/memory_saves.hpp"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "neuralcost/core/checked_math.hpp"
#include "neuralcost/core/error.hpp"

namespace neuralcost {

std::uint64_t activation_bytes(const TensorDesc& tensor, Precision precision) {
  const bool narrowed = precision != Precision::kFp32 && (tensor.dtype == DType::kFp32 || tensor.dtype == DType::kTf32);
  if (!narrowed) return tensor.bytes();
  return checked_mul(tensor.elements(), 2, "activation bytes of '" + tensor.name + "'");
}

namespace training {
namespace {

// Elementwise functions whose gradient is computed from their output (y' from y): relu (y > 0),
// sigmoid (y(1-y)), tanh (1-y^2), elu (y + alpha below 0), exp, sqrt, rsqrt, reciprocal.
const std::set<std::string> kKeepOutput = {"relu", "sigmoid", "tanh", "elu", "exp", "sqrt", "rsqrt", "reciprocal"};
// Functions whose gradient needs no value at all: linear in their inputs (add, sub, neg, mean of
// operands, copies, casts) or with a zero/undefined gradient (comparisons, logic, rounding).
const std::set<std::string> kKeepNothing = {
    "add", "sub", "mean",     "neg",  "identity", "copy", "cast",  "equal", "less",  "greater",  "and",       "or",
    "xor", "not", "bitshift", "sign", "floor",    "ceil", "round", "isinf", "isnan", "quantize", "dequantize"};

void keep(OpSaves& s, Saves rule) {
  s.rule = rule;
  s.inputs = rule == Saves::kInputs || rule == Saves::kInputsAndOutputs || rule == Saves::kInputsAndStats;
  s.outputs = rule == Saves::kOutputs || rule == Saves::kInputsAndOutputs;
}

/// Keeps only the op's bool and integer inputs (a mask, an index).
void keep_index_or_mask(const OpRecord& op, OpSaves& s) {
  s.operands = OpSaves::Operands::kIndexOrMask;
  for (const TensorDesc& x : op.inputs) {
    s.index_or_mask.push_back(x.dtype == DType::kBool || x.dtype == DType::kInt64 || x.dtype == DType::kInt32);
  }
}

std::uint64_t per_element(const TensorDesc& like, Precision precision) {
  return activation_bytes(TensorDesc{like.name, {}, like.dtype}, precision);
}

const TensorDesc& first(const std::vector<TensorDesc>& tensors, const OpRecord& op, const char* what) {
  if (tensors.empty()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("op '{}': a {} op needs an {}", op.name, op_kind_name(op.kind), what));
  }
  return tensors.front();
}

/// Rows of a layer or RMS norm: elements / the normalised size (attribute axes, or the trailing
/// normalized_dims dims, by default the rank of the weight or 1), as the cost rule reads them.
std::uint64_t normalised_rows(const OpRecord& op) {
  const TensorDesc& x = first(op.inputs, op, "input");
  const auto rank = static_cast<std::int64_t>(x.shape.size());
  std::vector<std::int64_t> axes;
  if (op.attributes.has("axes")) {
    axes = op.attributes.get_list("axes");
  } else {
    const std::int64_t dims = op.attributes.get_int(
        "normalized_dims", op.parameters.empty() ? 1 : static_cast<std::int64_t>(op.parameters[0].shape.size()));
    for (std::int64_t d = rank - dims; d < rank; ++d) axes.push_back(d);
  }
  std::uint64_t n = 1;
  for (std::int64_t a : axes) {
    const std::int64_t axis = a < 0 ? a + rank : a;
    if (axis < 0 || axis >= rank) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("op '{}': cannot normalise dim {} of {}", op.name, a, shape_string(x.shape)));
    }
    n = checked_mul(n, static_cast<std::uint64_t>(x.shape[static_cast<std::size_t>(axis)]), "normalised size");
  }
  return n == 0 ? 0 : x.elements() / n;
}

/// Per layer and direction, per step: the gate activations (gates x hidden), the cell state
/// (LSTM) and the hidden state of every layer but the last (the last is the op's output). A plain
/// RNN's only gate is its hidden state (tanh and relu keep their output): no gate beyond it.
std::uint64_t recurrent_workspace_elements(const OpRecord& op) {
  const TensorDesc& x = first(op.inputs, op, "input");
  if (x.shape.size() != 3) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("op '{}': a recurrent input must be [batch, steps, features], got {}", op.name,
                            shape_string(x.shape)));
  }
  const auto hidden = static_cast<std::uint64_t>(std::max<std::int64_t>(0, op.attributes.get_int("hidden_size")));
  const auto layers = static_cast<std::uint64_t>(std::max<std::int64_t>(1, op.attributes.get_int("num_layers", 1)));
  const std::uint64_t dirs = op.attributes.get_bool("bidirectional", false) ? 2 : 1;
  const std::uint64_t gates = op.kind == OpKind::kLstm ? 4 : op.kind == OpKind::kGru ? 3 : 0;
  const std::uint64_t cell = op.kind == OpKind::kLstm ? 1 : 0;
  const std::uint64_t steps_and_batch = static_cast<std::uint64_t>(x.shape[0]) * static_cast<std::uint64_t>(x.shape[1]);
  const std::uint64_t per_step =
      checked_add(checked_mul(layers, checked_mul(gates + cell, hidden, "workspace"), "workspace"),
                  checked_mul(layers - 1, hidden, "workspace"), "workspace");
  return checked_mul(checked_mul(steps_and_batch, dirs, "workspace"), per_step, "workspace elements");
}

/// The upper bound's view of a recurrent op run as a composite of per-step ops with nothing
/// freed (LibTorch's CPU rnn_tanh and lstm): per step, layer and direction the two projections
/// (input and hidden, gates x hidden each), their sum and its activation (gates x hidden each),
/// the cell's elementwise intermediates (LSTM c, tanh c, f*c, i*g; GRU r*(W h), (1-z)*n, z*h),
/// the hidden state (a plain RNN's is its activation) and the layer's stacked output; less what
/// is counted already: the kept workspace and the output (the last layer's stack).
std::uint64_t recurrent_internal_elements(const OpRecord& op, std::uint64_t workspace_elements) {
  const TensorDesc& x = first(op.inputs, op, "input");
  const TensorDesc& y = first(op.outputs, op, "output");
  const auto hidden = static_cast<std::uint64_t>(std::max<std::int64_t>(0, op.attributes.get_int("hidden_size")));
  const auto layers = static_cast<std::uint64_t>(std::max<std::int64_t>(1, op.attributes.get_int("num_layers", 1)));
  const std::uint64_t dirs = op.attributes.get_bool("bidirectional", false) ? 2 : 1;
  const std::uint64_t gates = op.kind == OpKind::kLstm ? 4 : op.kind == OpKind::kGru ? 3 : 1;
  const std::uint64_t cell = op.kind == OpKind::kLstm ? 4 : op.kind == OpKind::kGru ? 3 : 0;
  const std::uint64_t state = op.kind == OpKind::kRnn ? 0 : 1;
  const std::uint64_t steps_and_batch = static_cast<std::uint64_t>(x.shape[0]) * static_cast<std::uint64_t>(x.shape[1]);
  const std::uint64_t per_step =
      checked_mul(layers, checked_mul(4 * gates + cell + state + 1, hidden, "internals"), "internals");
  const std::uint64_t all = checked_mul(checked_mul(steps_and_batch, dirs, "internals"), per_step, "internal elements");
  const std::uint64_t counted = checked_add(workspace_elements, y.elements(), "internal elements");
  return all > counted ? all - counted : 0;
}

}  // namespace

OpSaves saves_of(const OpRecord& op, Precision precision) {
  OpSaves s;
  keep(s, traits_of(op.kind).saves);
  const std::string function = op.attributes.get_string("function", op.kind == OpKind::kReduction ? "sum" : "");
  switch (op.kind) {
    case OpKind::kUnary:
    case OpKind::kBinary:
    case OpKind::kActivation:
      if (function == "dropout") {
        keep(s, Saves::kNothing);
        const TensorDesc& y = first(op.outputs, op, "output");
        s.buffers.push_back({"mask", SavedKind::kMask, y.elements(), {}});
      } else if (kKeepOutput.count(function)) {
        keep(s, Saves::kOutputs);
      } else if (kKeepNothing.count(function)) {
        keep(s, Saves::kNothing);
      } else if (op.kind == OpKind::kBinary && (function == "mul" || function == "div")) {
        s.operands = function == "mul" ? OpSaves::Operands::kMul : OpSaves::Operands::kDiv;
      } else if (function == "where") {  // torch.where and masked_fill keep the mask, not the values
        keep_index_or_mask(op, s);
      }
      break;
    case OpKind::kReduction:
      if (function == "sum" || function == "mean") keep(s, Saves::kNothing);
      break;
    case OpKind::kGather:  // torch's gather and index_select keep the index, not the source
    case OpKind::kScatter: keep_index_or_mask(op, s); break;
    case OpKind::kCustom:  // top-k keeps the indices it picked (int64, the output's shape)
      if (function == "topk") {
        const TensorDesc& y = first(op.outputs, op, "output");
        // an op that outputs the indices keeps them as its output: the same storage its
        // consumers (a gather of the scores) keep, once
        keep(s, y.dtype == DType::kInt64 ? Saves::kOutputs : Saves::kNothing);
        if (y.dtype != DType::kInt64) {
          s.buffers.push_back({"indices", SavedKind::kIndices, checked_mul(y.elements(), 8, "top-k index bytes"), {}});
        }
      }
      break;
    case OpKind::kExpertLinear:
      // An expert linear that gathers its input's rows (attribute gathers_rows: a decoder's
      // gate and up projections, one row per (token, expert) pair) keeps the gathered copy for
      // its weight gradient, not its input, and the copy's int64 row index, as transformers'
      // hidden_states[perm // k] and Megatron-Core's permute keep them. The gate and up
      // projections gather the same rows: one storage, named after the input.
      if (op.attributes.get_bool("gathers_rows", false)) {
        const TensorDesc& x = first(op.inputs, op, "input");
        const TensorDesc& y = first(op.outputs, op, "output");
        const std::uint64_t out = y.shape.empty() ? 1 : static_cast<std::uint64_t>(y.shape.back());
        const std::uint64_t in = x.shape.empty() ? 1 : static_cast<std::uint64_t>(x.shape.back());
        const std::uint64_t rows = out == 0 ? 0 : y.elements() / out;
        s.inputs = false;
        s.buffers.push_back(
            {"routed_rows", SavedKind::kWorkspace,
             checked_mul(checked_mul(rows, in, "gathered rows"), per_element(x, precision), "gathered row bytes"),
             x.name + "#routed_rows"});
        s.buffers.push_back({"routed_rows.indices", SavedKind::kIndices, checked_mul(rows, 8, "row index bytes"),
                             x.name + "#routed_rows.indices"});
      }
      break;
    case OpKind::kLayerNorm:  // mean and 1/std per row, fp32
      s.buffers.push_back(
          {"stats", SavedKind::kStatistics, checked_mul(normalised_rows(op), 8, "statistics bytes"), {}});
      break;
    case OpKind::kRmsNorm:  // 1/rms per row, fp32
      s.buffers.push_back(
          {"stats", SavedKind::kStatistics, checked_mul(normalised_rows(op), 4, "statistics bytes"), {}});
      break;
    case OpKind::kBatchNorm: {  // the batch's mean and 1/std per channel, fp32
      const TensorDesc& x = first(op.inputs, op, "input");
      const std::uint64_t channels = x.shape.size() >= 2 ? static_cast<std::uint64_t>(x.shape[1]) : 1;
      s.buffers.push_back({"stats", SavedKind::kStatistics, checked_mul(channels, 8, "statistics bytes"), {}});
      break;
    }
    case OpKind::kMaxPool:
    case OpKind::kAdaptiveMaxPool:
    case OpKind::kGlobalMaxPool: {  // the input and the argmax (int64, the output's shape), not the output
      s.outputs = false;
      const TensorDesc& y = first(op.outputs, op, "output");
      s.buffers.push_back({"indices", SavedKind::kIndices, checked_mul(y.elements(), 8, "argmax bytes"), {}});
      break;
    }
    case OpKind::kAttention: {  // q, k, v, the output and the logsumexp per query row (fp32)
      const TensorDesc& y = first(op.outputs, op, "output");
      const std::uint64_t width =
          y.shape.empty() ? 1 : static_cast<std::uint64_t>(std::max<std::int64_t>(1, y.shape.back()));
      s.buffers.push_back(
          {"logsumexp", SavedKind::kWorkspace, checked_mul(y.elements() / width, 4, "logsumexp bytes"), {}});
      break;
    }
    case OpKind::kRnn:
    case OpKind::kGru:
    case OpKind::kLstm: {
      const TensorDesc& y = first(op.outputs, op, "output");
      const std::uint64_t workspace = recurrent_workspace_elements(op);
      // the workspace a capture saw (oneDNN's, attribute workspace_bytes), else the estimate
      const std::int64_t seen = op.attributes.get_int("workspace_bytes", -1);
      s.buffers.push_back({"workspace",
                           SavedKind::kWorkspace,
                           seen >= 0 ? static_cast<std::uint64_t>(seen)
                                     : checked_mul(workspace, per_element(y, precision), "workspace bytes"),
                           {}});
      s.internal_bytes =
          checked_mul(recurrent_internal_elements(op, workspace), per_element(y, precision), "internal bytes");
      break;
    }
    default: break;
  }
  return s;
}

OpSaves saves_of(const OpRecord& op, const TrainingOptions& options) {
  const bool recurrent = op.kind == OpKind::kRnn || op.kind == OpKind::kGru || op.kind == OpKind::kLstm;
  const bool estimated = recurrent && !op.attributes.has("workspace_bytes");
  return saves_of(op, options.autocast && estimated ? options.precision : graph_precision(options));
}

bool keeps_input(const OpSaves& saves, std::size_t k, const std::vector<bool>& input_needs_grad) {
  if (!saves.inputs) return false;
  switch (saves.operands) {
    case OpSaves::Operands::kAll: return true;
    case OpSaves::Operands::kMul:
      for (std::size_t j = 0; j < input_needs_grad.size(); ++j) {
        if (j != k && input_needs_grad[j]) return true;
      }
      return false;
    case OpSaves::Operands::kIndexOrMask: return k < saves.index_or_mask.size() && saves.index_or_mask[k];
    case OpSaves::Operands::kDiv: {
      const bool denominator_needs = input_needs_grad.size() > 1 && input_needs_grad[1];
      if (k == 1) return denominator_needs || input_needs_grad[0];
      return denominator_needs;
    }
  }
  return true;
}

}  // namespace training
}  // namespace neuralcost
