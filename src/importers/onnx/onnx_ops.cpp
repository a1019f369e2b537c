// ONNX nodes to op records. Attribute names and defaults follow the ONNX operator specs
// (https://onnx.ai/onnx/operators/); shapes come from shape inference.
#include <functional>
#include <limits>
#include <numeric>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "importers/onnx/onnx_node_records.hpp"
#include "neuralcost/core/checked_math.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/cost/cost_model.hpp"

namespace neuralcost::onnx_import {
namespace {

Mapper simple(OpKind kind, std::string function = "") {
  return [kind, function](const onnx::NodeProto& n, const ModelContext& c) {
    Builder b(n, c);
    OpRecord r = b.make(kind);
    if (!function.empty() && r.kind != OpKind::kUnknown) r.attributes.set("function", function);
    return one(std::move(r));
  };
}

Mapper view(OpKind kind = OpKind::kReshape) {
  return [kind](const onnx::NodeProto& n, const ModelContext& c) {
    Builder b(n, c);
    OpRecord r = b.make(kind, {0});
    // of a weight (a class token expanded to a batch of dynamic size): the weight stays its
    // parameter, counted once at its own size
    if (r.kind != OpKind::kUnknown && !r.inputs.empty()) r.parameters.clear();
    return one(std::move(r));
  };
}

/// Spatial padding: explicit pads, or auto_pad SAME_* / VALID from the inferred output size.
void set_padding(OpRecord& r, const onnx::NodeProto& n, const Shape& x, const Shape& y, const Ints& kernel,
                 const Ints& strides, const Ints& dilations) {
  const std::size_t rank = kernel.size();
  const std::string auto_pad = attr_string(n, "auto_pad", "NOTSET");
  Ints pads = attr_ints(n, "pads");
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    pads.assign(2 * rank, 0);
    for (std::size_t d = 0; d < rank && d + 2 < x.size() && d + 2 < y.size(); ++d) {
      const Wide span = Wide{dilations[d]} * (kernel[d] - 1) + 1;
      const Wide total = std::max<Wide>(0, Wide{y[d + 2] - 1} * strides[d] + span - x[d + 2]);
      if (total > (Wide{1} << 42)) return;  // absurd attributes: the cost model names them
      pads[auto_pad == "SAME_UPPER" ? d : d + rank] = static_cast<std::int64_t>(total / 2);
      pads[auto_pad == "SAME_UPPER" ? d + rank : d] = static_cast<std::int64_t>(total - total / 2);
    }
  }
  if (pads.empty()) pads.assign(2 * rank, 0);
  r.attributes.set("padding", pads);
}

Mapper conv(bool transposed) {
  return [transposed](const onnx::NodeProto& n, const ModelContext& c) {
    Builder b(n, c);
    OpRecord r = b.make(transposed ? OpKind::kConvTranspose : OpKind::kConv, {0, 1, 2}, false, true);
    if (r.kind == OpKind::kUnknown) return one(std::move(r));
    // a weight fed as a graph input (as in ONNX's own node tests) is still the weight
    while (r.parameters.empty() && r.inputs.size() >= 2) {
      const TensorDesc w = r.inputs.back();
      r.inputs.pop_back();
      r.parameters.insert(r.parameters.begin(), {w.name, w.shape, w.dtype, true});
    }
    if (r.parameters.empty()) return one(b.unknown("a convolution without a weight operand"));
    const Shape& x = r.inputs.at(0).shape;
    const Shape& w = r.parameters.at(0).shape;
    const std::size_t rank = x.size() >= 2 ? x.size() - 2 : 0;
    Ints kernel(w.begin() + std::min<std::size_t>(2, w.size()), w.end());
    Ints strides = attr_ints(n, "strides"), dilations = attr_ints(n, "dilations");
    if (strides.empty()) strides.assign(rank, 1);
    if (dilations.empty()) dilations.assign(rank, 1);
    r.attributes.set("stride", strides);
    r.attributes.set("dilation", dilations);
    r.attributes.set("groups", attr_int(n, "group", 1));
    if (transposed) {
      const Ints op = attr_ints(n, "output_padding");
      r.attributes.set("output_padding", op.empty() ? Ints(rank, 0) : op);
    }
    if (kernel.size() == rank && strides.size() == rank && dilations.size() == rank) {
      const std::string auto_pad = attr_string(n, "auto_pad", "NOTSET");
      if (transposed && (auto_pad != "NOTSET" || attr(n, "output_shape") != nullptr)) {
        // the total padding follows from the inferred output size:
        // out = (in-1)*stride + dilation*(k-1) + 1 + output_padding - pads
        Ints op = attr_ints(n, "output_padding");
        op.resize(rank, 0);
        Ints pads(2 * rank, 0);
        const Shape& y = r.outputs[0].shape;
        for (std::size_t d = 0; d < rank && d + 2 < x.size() && d + 2 < y.size(); ++d) {
          const Wide wide =
              Wide{x[d + 2] - 1} * strides[d] + Wide{dilations[d]} * (kernel[d] - 1) + 1 + op[d] - y[d + 2];
          if (wide > (Wide{1} << 42) || wide < -(Wide{1} << 42)) return one(b.unknown("attributes out of range"));
          const auto total = static_cast<std::int64_t>(wide);
          if (total < 0) {
            op[d] -= total;  // an output_shape beyond the natural size extends the output
          } else {
            pads[d] = total / 2;
            pads[d + rank] = total - total / 2;
          }
        }
        r.attributes.set("padding", pads);
        r.attributes.set("output_padding", op);
      } else {
        set_padding(r, n, x, r.outputs[0].shape, kernel, strides, dilations);
      }
    }
    return one(std::move(r));
  };
}

/// An integer convolution (QLinearConv, ConvInteger): the plain convolution of the inputs at
/// `operands` (x, w[, bias]), computed in int8; scales and zero points are metadata.
Mapper integer_conv(std::string type, std::vector<int> operands) {
  return [type, operands](const onnx::NodeProto& n, const ModelContext& c) {
    onnx::NodeProto plain = n;
    plain.clear_input();
    for (int i : operands) plain.add_input(i < n.input_size() ? n.input(i) : "");
    auto records = conv(false)(plain, c);
    for (OpRecord& r : records) {
      r.source_type = type;
      if (r.kind != OpKind::kUnknown) r.compute_dtype = DType::kInt8;
    }
    return records;
  };
}

Mapper pool(OpKind kind) {
  return [kind](const onnx::NodeProto& n, const ModelContext& c) {
    Builder b(n, c);
    OpRecord r = b.make(kind, {0});
    if (r.kind == OpKind::kUnknown) return one(std::move(r));
    const Shape& x = r.inputs.at(0).shape;
    const std::size_t rank = x.size() >= 2 ? x.size() - 2 : 0;
    const Ints kernel = attr_ints(n, "kernel_shape");
    Ints strides = attr_ints(n, "strides"), dilations = attr_ints(n, "dilations");
    if (strides.empty()) strides.assign(rank, 1);
    if (dilations.empty()) dilations.assign(rank, 1);
    r.attributes.set("kernel", kernel);
    r.attributes.set("stride", strides);
    r.attributes.set("dilation", dilations);
    r.attributes.set("ceil_mode", attr_int(n, "ceil_mode", 0) != 0);
    if (kernel.size() == rank) set_padding(r, n, x, r.outputs[0].shape, kernel, strides, dilations);
    return one(std::move(r));
  };
}

Mapper reduce(std::string function) {
  return [function](const onnx::NodeProto& n, const ModelContext& c) {
    Builder b(n, c);
    OpRecord r = b.make(OpKind::kReduction, {0});  // input 1 (axes, opset 18) is metadata
    if (r.kind != OpKind::kUnknown) {
      r.parameters.clear();
      r.attributes.set("function", function);
    }
    return one(std::move(r));
  };
}

/// Sum, Max, Min, Mean over k inputs: one binary record, variadic (the cost model counts k - 1
/// operations per output element, and Mean's divide).
Mapper variadic(std::string function) {
  return [function](const onnx::NodeProto& n, const ModelContext& c) {
    OpRecord r = Builder(n, c).make(OpKind::kBinary);
    if (r.kind == OpKind::kUnknown) return one(std::move(r));
    r.attributes.set("function", function);
    r.attributes.set("variadic", true);
    if (r.inputs.size() + r.parameters.size() < 2) r.attributes.set("scalar_operand", true);
    return one(std::move(r));
  };
}

Mapper softmax(bool log) {
  return [log](const onnx::NodeProto& n, const ModelContext& c) {
    OpRecord r = Builder(n, c).make(OpKind::kSoftmax, {0});
    if (r.kind == OpKind::kUnknown) return one(std::move(r));
    // before opset 13, softmax flattened everything from axis (default 1) into one row
    const bool coerce = c.opset < 13;
    r.attributes.set("axis", attr_int(n, "axis", coerce ? 1 : -1));
    r.attributes.set("coerce_2d", coerce);
    r.attributes.set("log", log);
    return one(std::move(r));
  };
}

std::vector<OpRecord> gemm(const onnx::NodeProto& n, const ModelContext& c) {
  Builder b(n, c);
  const bool ta = attr_int(n, "transA", 0) != 0, tb = attr_int(n, "transB", 0) != 0;
  const bool weight = c.constant(n.input_size() > 1 ? n.input(1) : "");
  if (!ta && tb && weight) {
    OpRecord r = b.make(OpKind::kLinear, {0, 1, 2}, false, true);  // y = x W^T + C, W [out, in]
    if (r.kind != OpKind::kUnknown && r.parameters.size() == 2 && r.parameters[1].shape.size() != 1) {
      // C of another shape than [out]: the bias add still costs one FLOP per output
    }
    return one(std::move(r));
  }
  OpRecord r = b.make(OpKind::kMatMul, {0, 1, 2}, false, true);
  if (r.kind != OpKind::kUnknown) {
    r.attributes.set("transpose_a", ta);
    r.attributes.set("transpose_b", tb);
  }
  return one(std::move(r));
}

std::vector<OpRecord> recurrent(const onnx::NodeProto& n, const ModelContext& c) {
  // X [T,B,I] (layout 0) or [B,T,I] (layout 1), W, R, B, sequence_lens, initial_h[, initial_c, P]
  const std::string& type = n.op_type();
  Builder b(n, c);
  if (type == "LSTM" && n.input_size() > 7 && !n.input(7).empty()) {
    return one(b.unknown("LSTM peepholes (input P) are not modeled"));
  }
  OpRecord r = b.make(type == "LSTM" ? OpKind::kLstm : type == "GRU" ? OpKind::kGru : OpKind::kRnn, {0, 1, 2, 3});
  if (r.kind == OpKind::kUnknown) return one(std::move(r));
  const std::string direction = attr_string(n, "direction", "forward");
  r.attributes.set("hidden_size", attr_int(n, "hidden_size", 0));
  r.attributes.set("bidirectional", direction == "bidirectional");
  r.attributes.set("batch_first", attr_int(n, "layout", 0) == 1);
  r.attributes.set("bias", n.input_size() > 3 && !n.input(3).empty());
  r.attributes.set("output_layout", std::string("onnx"));
  if (type == "RNN") {
    const auto* a = attr(n, "activations");
    if (a && a->strings_size() > 0 && a->strings(0) == "Relu") r.attributes.set("nonlinearity", std::string("relu"));
  }
  // W and R may be graph inputs rather than initializers: they are still the weights
  for (auto it = r.inputs.begin() + 1; it != r.inputs.end();) {
    r.parameters.push_back({it->name, it->shape, it->dtype, true});
    it = r.inputs.erase(it);
  }
  return one(std::move(r));
}

/// Gather from an activation (or GatherElements / GatherND): reads what it gathers and the indices.
std::vector<OpRecord> gather_values(const onnx::NodeProto& n, const ModelContext& c) {
  OpRecord r = Builder(n, c).make(OpKind::kEmbedding, {0, 1}, false, true);
  if (r.kind == OpKind::kUnknown) return one(std::move(r));
  for (const ParameterDesc& p : r.parameters) r.inputs.push_back({p.id, p.shape, p.dtype});
  r.parameters.clear();
  return one(std::move(r));
}

std::vector<OpRecord> gather(const onnx::NodeProto& n, const ModelContext& c) {
  const bool table = c.constant(n.input_size() > 0 ? n.input(0) : "") && attr_int(n, "axis", 0) == 0;
  if (!table) return gather_values(n, c);
  Builder b(n, c);
  OpRecord r = b.make(OpKind::kEmbedding, {1, 0}, false, true);
  if (r.kind == OpKind::kUnknown) return one(std::move(r));
  if (r.inputs.empty() && r.parameters.size() == 2) {  // constant indices (position ids): still the indices
    const ParameterDesc ids = r.parameters.front();
    r.inputs.push_back({ids.id, ids.shape, ids.dtype});
    r.parameters.erase(r.parameters.begin());
  }
  if (r.parameters.empty() || r.parameters[0].shape.size() != 2) {
    return one(b.unknown("Gather from a weight of rank other than 2 is not mapped"));
  }
  return one(std::move(r));
}

/// A record of `kind` over the inputs at `inputs` (all when empty), every operand an input
/// (scatters and one-hot read their constants as data), with `attrs` set from the node.
Mapper data_op(OpKind kind, std::vector<int> inputs,
               std::function<void(OpRecord&, const onnx::NodeProto&)> attrs = nullptr) {
  return [kind, inputs, attrs](const onnx::NodeProto& n, const ModelContext& c) {
    Builder b(n, c);
    OpRecord r = b.make(kind, inputs);
    if (r.kind == OpKind::kUnknown) return one(std::move(r));
    for (const ParameterDesc& p : r.parameters) r.inputs.push_back({p.id, p.shape, p.dtype});
    r.parameters.clear();
    if (attrs) attrs(r, n);
    return one(std::move(r));
  };
}

/// Hardmax's count: the maximum of each row (n - 1 comparisons), then a one-hot row.
Wide hardmax_flops(const OpRecord& r, const onnx::NodeProto& n) {
  const Shape& x = r.inputs.at(0).shape;
  std::int64_t axis = attr_int(n, "axis", -1);
  if (axis < 0) axis += static_cast<std::int64_t>(x.size());
  const std::int64_t len =
      axis >= 0 && axis < static_cast<std::int64_t>(x.size()) ? x[static_cast<std::size_t>(axis)] : 1;
  return len > 0 ? elements(x) / len * (len - 1) : 0;
}

/// LRN: the cost model's local_response_norm over `size` channels.
std::vector<OpRecord> lrn(const onnx::NodeProto& n, const ModelContext& c) {
  Builder b(n, c);
  OpRecord r = b.make(OpKind::kLocalResponseNorm, {0});
  if (r.kind == OpKind::kUnknown) return one(std::move(r));
  r.parameters.clear();
  r.attributes.set("size", attr_int(n, "size", 0));
  return one(std::move(r));
}

/// Resize / Upsample: nearest copies (reads at most what it writes); linear and cubic are the
/// cost model's resize (separable interpolation, docs/counting.md).
std::vector<OpRecord> resize(const onnx::NodeProto& n, const ModelContext& c) {
  Builder b(n, c);
  const std::string mode = attr_string(n, "mode", "nearest");
  if (mode == "nearest") {
    OpRecord r = b.make(OpKind::kPad, {0});  // upsampling writes its whole output from the input
    if (r.kind == OpKind::kUnknown) return one(std::move(r));
    r.parameters.clear();
    if (elements(r.outputs.at(0).shape) < elements(r.inputs.at(0).shape))
      r.kind = OpKind::kSlice;  // downsampling reads only the elements it keeps
    return one(std::move(r));
  }
  if (mode != "linear" && mode != "cubic") return one(b.unknown("Resize mode '" + mode + "' is not modeled"));
  OpRecord r = b.make(OpKind::kResize, {0});
  if (r.kind == OpKind::kUnknown) return one(std::move(r));
  r.parameters.clear();
  if (r.inputs.at(0).shape.size() != r.outputs.at(0).shape.size())
    return one(b.unknown("Resize output rank differs from its input's"));
  r.attributes.set("mode", mode);
  return one(std::move(r));
}

/// Einsum: the cost model's kEinsum, its terms reordered to the record's operands (inputs, then
/// the initializers that became parameters).
std::vector<OpRecord> einsum(const onnx::NodeProto& n, const ModelContext& c) {
  Builder b(n, c);
  OpRecord r = b.make(OpKind::kEinsum);
  if (r.kind == OpKind::kUnknown) return one(std::move(r));
  std::vector<bool> is_parameter;
  for (const auto& name : n.input()) {
    if (!name.empty()) is_parameter.push_back(c.constant(name) != nullptr);
  }
  try {
    r.attributes.set("equation", einsum_inputs_first(attr_string(n, "equation", ""), is_parameter));
  } catch (const Error& e) {
    return one(b.unknown(e.what()));
  }
  return one(std::move(r));
}

const std::map<std::string, Mapper>& mappers() {
  static const std::map<std::string, Mapper> table = [] {
    std::map<std::string, Mapper> m;
    m["Conv"] = conv(false);
    m["ConvTranspose"] = conv(true);
    m["Gemm"] = gemm;
    m["MatMul"] = [](const onnx::NodeProto& n, const ModelContext& c) {
      return one(Builder(n, c).make(OpKind::kMatMul, {0, 1}, false, true));
    };
    m["MatMulInteger"] = [](const onnx::NodeProto& n, const ModelContext& c) {
      OpRecord r = Builder(n, c).make(OpKind::kMatMul, {0, 1}, false, true);
      if (r.kind != OpKind::kUnknown) r.compute_dtype = DType::kInt8;
      return one(std::move(r));
    };
    m["QLinearMatMul"] = [](const onnx::NodeProto& n, const ModelContext& c) {
      // a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point
      OpRecord r = Builder(n, c).make(OpKind::kMatMul, {0, 3}, false, true);
      if (r.kind != OpKind::kUnknown) r.compute_dtype = DType::kInt8;
      return one(std::move(r));
    };
    // x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B
    m["QLinearConv"] = integer_conv("QLinearConv", {0, 3, 8});
    // x, w, x_zero_point, w_zero_point
    m["ConvInteger"] = integer_conv("ConvInteger", {0, 1});
    m["BatchNormalization"] = [](const onnx::NodeProto& n, const ModelContext& c) {
      OpRecord r = Builder(n, c).make(OpKind::kBatchNorm, {0, 1, 2, 3, 4});
      if (r.kind == OpKind::kUnknown) return one(std::move(r));
      for (std::size_t i = 2; i < r.parameters.size(); ++i) r.parameters[i].trainable = false;  // mean, var
      r.attributes.set("training", attr_int(n, "training_mode", 0) != 0);
      return one(std::move(r));
    };
    m["LayerNormalization"] = [](const onnx::NodeProto& n, const ModelContext& c) {
      Builder b(n, c);
      OpRecord r = b.make(OpKind::kLayerNorm, {0, 1, 2});
      if (r.kind == OpKind::kUnknown) return one(std::move(r));
      const auto rank = static_cast<std::int64_t>(r.inputs.at(0).shape.size());
      std::int64_t axis = attr_int(n, "axis", -1);
      if (axis < 0) axis += rank;
      r.attributes.set("normalized_dims", rank - axis);
      return one(std::move(r));
    };
    m["InstanceNormalization"] = [](const onnx::NodeProto& n, const ModelContext& c) {
      // per (sample, channel) over the spatial dims: a layer norm over rank - 2 dims
      OpRecord r = Builder(n, c).make(OpKind::kLayerNorm, {0, 1, 2});
      if (r.kind != OpKind::kUnknown)
        r.attributes.set("normalized_dims", static_cast<std::int64_t>(r.inputs.at(0).shape.size()) - 2);
      return one(std::move(r));
    };
    const std::map<std::string, std::string> activations = {{"Relu", "relu"},
                                                            {"LeakyRelu", "leaky_relu"},
                                                            {"Sigmoid", "sigmoid"},
                                                            {"Tanh", "tanh"},
                                                            {"HardSwish", "hardswish"},
                                                            {"HardSigmoid", "hardsigmoid"},
                                                            {"Elu", "elu"},
                                                            {"Selu", "selu"},
                                                            {"Celu", "celu"},
                                                            {"Softplus", "softplus"},
                                                            {"Softsign", "softsign"},
                                                            {"Mish", "mish"},
                                                            {"PRelu", "prelu"},
                                                            {"ThresholdedRelu", "thresholded_relu"},
                                                            {"Shrink", "shrink"}};
    for (const auto& [op, f] : activations) m[op] = simple(OpKind::kActivation, f);
    m["Gelu"] = [](const onnx::NodeProto& n, const ModelContext& c) {
      OpRecord r = Builder(n, c).make(OpKind::kActivation);
      if (r.kind != OpKind::kUnknown) {
        r.attributes.set("function",
                         std::string(attr_string(n, "approximate", "none") == "tanh" ? "gelu_tanh" : "gelu"));
      }
      return one(std::move(r));
    };
    const std::map<std::string, std::string> unary = {
        {"Sqrt", "sqrt"},   {"Exp", "exp"},     {"Log", "log"},
        {"Neg", "neg"},     {"Abs", "abs"},     {"Reciprocal", "reciprocal"},
        {"Erf", "erf"},     {"Sin", "sin"},     {"Cos", "cos"},
        {"Tan", "tan"},     {"Floor", "floor"}, {"Ceil", "ceil"},
        {"Round", "round"}, {"Sign", "sign"},   {"Not", "not"},
        {"Cast", "cast"},   {"Clip", "clip"},   {"Asin", "asin"},
        {"Acos", "acos"},   {"Atan", "atan"},   {"Sinh", "sinh"},
        {"Cosh", "cosh"},   {"Asinh", "asinh"}, {"Acosh", "acosh"},
        {"Atanh", "atanh"}, {"IsInf", "isinf"}, {"IsNaN", "isnan"}};
    for (const auto& [op, f] : unary) m[op] = simple(OpKind::kUnary, f);
    const std::map<std::string, std::string> binary = {{"Add", "add"},
                                                       {"Sub", "sub"},
                                                       {"Mul", "mul"},
                                                       {"Div", "div"},
                                                       {"Pow", "pow"},
                                                       {"Mod", "mod"},
                                                       {"Equal", "equal"},
                                                       {"Less", "less"},
                                                       {"Greater", "greater"},
                                                       {"LessOrEqual", "less"},
                                                       {"GreaterOrEqual", "greater"},
                                                       {"And", "and"},
                                                       {"Or", "or"},
                                                       {"Xor", "xor"},
                                                       {"Where", "where"},
                                                       {"BitShift", "bitshift"}};
    for (const auto& [op, f] : binary) m[op] = simple(OpKind::kBinary, f);
    m["Sum"] = variadic("add");
    m["Max"] = variadic("max");
    m["Min"] = variadic("min");
    m["Mean"] = variadic("mean");
    m["Softmax"] = softmax(false);
    m["LogSoftmax"] = softmax(true);
    m["LSTM"] = recurrent;
    m["GRU"] = recurrent;
    m["RNN"] = recurrent;
    m["MaxPool"] = pool(OpKind::kMaxPool);
    m["AveragePool"] = pool(OpKind::kAvgPool);
    m["GlobalMaxPool"] = simple(OpKind::kGlobalMaxPool);
    m["GlobalAveragePool"] = simple(OpKind::kGlobalAvgPool);
    const std::map<std::string, std::string> reductions = {{"ReduceMean", "mean"},
                                                           {"ReduceSum", "sum"},
                                                           {"ReduceMax", "max"},
                                                           {"ReduceMin", "min"},
                                                           {"ReduceProd", "prod"},
                                                           {"ReduceL2", "l2"},
                                                           {"ReduceSumSquare", "sum_square"},
                                                           {"ReduceL1", "l1"},
                                                           {"ReduceLogSum", "log_sum"},
                                                           {"ReduceLogSumExp", "log_sum_exp"},
                                                           {"ArgMax", "max"},
                                                           {"ArgMin", "min"}};
    for (const auto& [op, f] : reductions) m[op] = reduce(f);
    for (const char* v : {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout", "Shape", "Size"}) {
      m[v] = view();
    }
    m["Transpose"] = view(OpKind::kTranspose);  // materializes (the default)
    m["Slice"] = view(OpKind::kSlice);
    m["Pad"] = view(OpKind::kPad);
    m["Expand"] = view(OpKind::kPad);  // writes its whole output from a smaller input
    m["Tile"] = view(OpKind::kPad);
    m["Concat"] = simple(OpKind::kConcat);
    m["Split"] = [](const onnx::NodeProto& n, const ModelContext& c) {
      OpRecord r = Builder(n, c).make(OpKind::kSplit, {0}, true);
      r.parameters.clear();
      return one(std::move(r));
    };
    m["Gather"] = gather;
    m["GatherElements"] = gather_values;
    m["GatherND"] = gather_values;
    m["DepthToSpace"] = view(OpKind::kTranspose);
    m["SpaceToDepth"] = view(OpKind::kTranspose);
    m["Trilu"] = view(OpKind::kPad);  // a masked copy
    for (const auto& [op, f] :
         std::map<std::string, std::string>{{"QuantizeLinear", "quantize"}, {"DequantizeLinear", "dequantize"}}) {
      m[op] = [f = f](const onnx::NodeProto& n, const ModelContext& c) {
        OpRecord r = Builder(n, c).make(OpKind::kUnary, {0});  // scale and zero point: per tensor or axis
        if (r.kind != OpKind::kUnknown) r.attributes.set("function", f);
        return one(std::move(r));
      };
    }
    m["CastLike"] = [](const onnx::NodeProto& n, const ModelContext& c) {
      OpRecord r = Builder(n, c).make(OpKind::kUnary, {0});
      if (r.kind != OpKind::kUnknown) r.attributes.set("function", std::string("cast"));
      return one(std::move(r));
    };
    // constants live in the model file: producing one reads and writes nothing at run time
    m["Constant"] = [](const onnx::NodeProto& n, const ModelContext& c) {
      OpRecord r = Builder(n, c).make(OpKind::kReshape, {});
      if (r.kind != OpKind::kUnknown) r.attributes.set("materializes", false);
      return one(std::move(r));
    };
    m["ConstantOfShape"] = data_op(OpKind::kFill, {});  // writes its output
    m["Einsum"] = einsum;
    m["LRN"] = lrn;
    // MeanVarianceNormalization: a layer norm without affine over `axes` (default N, H, W)
    m["MeanVarianceNormalization"] = [](const onnx::NodeProto& n, const ModelContext& c) {
      OpRecord r = Builder(n, c).make(OpKind::kLayerNorm, {0});
      if (r.kind == OpKind::kUnknown) return one(std::move(r));
      r.parameters.clear();
      const Ints axes = attr_ints(n, "axes");
      r.attributes.set("axes", axes.empty() ? Ints{0, 2, 3} : axes);
      return one(std::move(r));
    };
    // scatters copy the data and write the updates (the cost model's kScatter)
    for (const char* op : {"Scatter", "ScatterElements", "ScatterND"}) {
      m[op] = data_op(OpKind::kScatter, {0, 1, 2}, [](OpRecord& r, const onnx::NodeProto& n) {
        r.attributes.set("reduction", attr_string(n, "reduction", "none"));
      });
    }
    m["OneHot"] = data_op(OpKind::kGather, {0});
    m["EyeLike"] = data_op(OpKind::kFill, {});
    m["Range"] = data_op(OpKind::kFill, {}, [](OpRecord& r, const onnx::NodeProto&) {
      r.attributes.set("function", std::string("range"));
    });
    // Hardmax: a custom count (no rule of the cost model takes a row maximum written as one-hot)
    m["Hardmax"] = [](const onnx::NodeProto& n, const ModelContext& c) {
      Builder b(n, c);
      OpRecord r = b.make(OpKind::kCustom, {0});
      if (r.kind == OpKind::kUnknown) return one(std::move(r));
      for (const ParameterDesc& p : r.parameters) r.inputs.push_back({p.id, p.shape, p.dtype});
      r.parameters.clear();
      if (!set_count(r, "flops", hardmax_flops(r, n))) return one(b.unknown("its FLOP count does not fit 64 bits"));
      return one(std::move(r));
    };
    m["Resize"] = resize;
    m["Upsample"] = resize;
    // CumSum along its axis (an input, which must be known)
    m["CumSum"] = [](const onnx::NodeProto& n, const ModelContext& c) {
      Builder b(n, c);
      OpRecord r = b.make(OpKind::kCumulative, {0});
      if (r.kind == OpKind::kUnknown) return one(std::move(r));
      const auto axis = n.input_size() > 1 ? c.int_values.find(n.input(1)) : c.int_values.end();
      if (axis == c.int_values.end() || axis->second.size() != 1)
        return one(b.unknown("CumSum's axis is not known statically"));
      for (const ParameterDesc& p : r.parameters) r.inputs.push_back({p.id, p.shape, p.dtype});
      r.parameters.clear();
      r.attributes.set("axis", axis->second[0]);
      return one(std::move(r));
    };
    m["Scan"] = scan;
    m["Loop"] = loop;
    // If: counted when its condition is known before it runs (a constant, or folded from shapes)
    m["If"] = [](const onnx::NodeProto& n, const ModelContext& c) {
      const auto cond = n.input_size() > 0 ? c.int_values.find(n.input(0)) : c.int_values.end();
      if (cond == c.int_values.end() || cond->second.size() != 1) {
        return one(Builder(n, c).unknown("If: which branch runs is decided at run time; neither is counted"));
      }
      const char* branch = cond->second[0] ? "then_branch" : "else_branch";
      const auto* body = graph_attribute(n, branch);
      if (!body) return one(Builder(n, c).unknown(fmt::format("If without its {}", branch)));
      return repeated(n, c, *body, 1, "");
    };
    return m;
  }();
  return table;
}

}  // namespace

std::vector<OpRecord> map_node(const onnx::NodeProto& node, std::size_t index, const ModelContext& context) {
  std::vector<OpRecord> records;
  if (context.folded(node)) return records;
  const bool standard = node.domain().empty() || node.domain() == "ai.onnx";
  const auto it = standard ? mappers().find(node.op_type()) : mappers().end();
  if (it != mappers().end()) {
    records = it->second(node, context);
  } else {
    records = {Builder(node, context)
                   .unknown(fmt::format("op type '{}{}' is not modeled", standard ? "" : node.domain() + ".",
                                        node.op_type()))};
  }
  const std::string base = node.name().empty() ? fmt::format("{}_{}", node.op_type(), index) : node.name();
  for (std::size_t k = 0; k < records.size(); ++k) {
    records[k].name = records.size() == 1 ? base : fmt::format("{}.{}", base, k);
  }
  return records;
}

}  // namespace neuralcost::onnx_import
