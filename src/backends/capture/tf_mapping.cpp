// Maps TensorFlow graph ops ("tf::<op type>", as python/neuralcost_worker/tensorflow/adapter.py
// reports them) to op records. Inputs are the op's positional inputs, with constants already
// turned into numbers or integer lists (a Reshape's shape, a Mean's axes), so they are no
// tensors and add no traffic; attributes are the node's attrs (transpose_a, data_format, ...).
//
// Two TensorFlow conventions differ from the cost model's:
//  - Convolution, pooling and fused batch norm run channels-last (NHWC) on a CPU; the cost model
//    reads channels-first shapes. A channels-last op becomes three records: a view to
//    channels-first, the op, a view back (views move no bytes), so the op keeps its kind.
//  - The worker names constants "const:<tensor>" and non-trainable variables
//    "buffer:<variable>"; both are buffers, not trainable parameters.
//
// Loops arrive unrolled (the worker reports a While's body once per iteration), branches inlined
// (an If or Case as the ops of the branch it took on the worker's input). TensorLists
// (TensorArrays: a loop's per-step inputs and outputs) arrive as tensors [length, element...].
// TensorFlow's list ops store and hand out references to element buffers, so making, filling and
// reading a list are views; only TensorListStack copies the elements into one tensor.
#include <algorithm>
#include <limits>
#include <sstream>

#include <fmt/format.h>

#include "backends/capture/captured_records.hpp"
#include "neuralcost/core/error.hpp"

namespace neuralcost::capture {
namespace {

using Ints = std::vector<std::int64_t>;

/// A kCustom record of the call with a FLOP count (all of it a contraction, or none).
OpRecord custom(const CapturedOp& call, Wide flops, bool contraction = false, Wide transcendentals = 0) {
  if (!fits_int64(flops)) return unknown(call, "its FLOP count does not fit 64 bits");
  OpRecord r = record(call, OpKind::kCustom);
  r.attributes.set("flops", static_cast<std::int64_t>(flops));
  r.attributes.set("transcendentals", static_cast<std::int64_t>(transcendentals));
  r.attributes.set("contraction", contraction);
  return r;
}

Handler counted(std::int64_t flops_per_output, std::int64_t transcendentals_per_output = 0) {
  return [=](const CapturedOp& call) {
    const Wide n = call.outputs.empty() || call.outputs[0].tensors.empty()
                       ? 0
                       : saturating_elements(call.outputs[0].tensors[0].shape);
    return one(custom(call, n * flops_per_output, false, n * transcendentals_per_output));
  };
}

/// Ops that only write their output (Fill, ZerosLike) or read only shapes (Shape, Size).
Handler writes_only(std::string function = "constant") {
  return [=](const CapturedOp& call) {
    OpRecord r = record(call, OpKind::kFill);
    r.inputs.clear();
    r.parameters.clear();
    r.attributes.set("function", function);
    return one(std::move(r));
  };
}

bool channels_last(const CapturedOp& call) {
  const std::string format = attr_string(call, "data_format", "NHWC");
  return format.empty() || format.back() == 'C';
}

/// [N, spatial..., C] -> [N, C, spatial...]
Shape channels_first(const Shape& s) {
  if (s.size() < 3) return s;
  Shape r{s.front(), s.back()};
  r.insert(r.end(), s.begin() + 1, s.end() - 1);
  return r;
}

/// The spatial entries of a per-dimension attribute in data-format order (strides [1, h, w, 1]).
Ints spatial(const Ints& per_dim, std::size_t rank, bool last, std::int64_t fallback) {
  if (per_dim.size() != rank + 2) return Ints(rank, fallback);
  return last ? Ints(per_dim.begin() + 1, per_dim.end() - 1) : Ints(per_dim.begin() + 2, per_dim.end());
}

/// Padding begins then ends, from padding = SAME | VALID | EXPLICIT (explicit_paddings holds a
/// (before, after) pair per dimension in data-format order). Nothing when it is unreadable.
std::optional<Ints> padding_of(const CapturedOp& call, const Shape& in, const Ints& kernel, const Ints& stride,
                               const Ints& dilation, bool last) {
  const std::string mode = attr_string(call, "padding", "VALID");
  const std::size_t rank = kernel.size();
  Ints begins(rank, 0), ends(rank, 0);
  if (mode == "SAME") {
    for (std::size_t d = 0; d < rank; ++d) {
      if (stride[d] < 1 || dilation[d] < 1) return std::nullopt;
      const Wide out = (in[d + 2] + stride[d] - 1) / stride[d];
      const Wide total = std::max<Wide>((out - 1) * stride[d] + Wide{dilation[d]} * (kernel[d] - 1) + 1 - in[d + 2], 0);
      begins[d] = static_cast<std::int64_t>(total / 2);
      ends[d] = static_cast<std::int64_t>(total - total / 2);
    }
  } else if (mode == "EXPLICIT") {
    const Ints pairs = attr_ints(call, "explicit_paddings");
    if (pairs.size() != 2 * (rank + 2)) return std::nullopt;
    for (std::size_t d = 0; d < rank; ++d) {
      const std::size_t dim = last ? d + 1 : d + 2;
      begins[d] = pairs[2 * dim];
      ends[d] = pairs[2 * dim + 1];
    }
  } else if (mode != "VALID") {
    return std::nullopt;
  }
  begins.insert(begins.end(), ends.begin(), ends.end());
  return begins;
}

/// `r`, built on channels-first shapes, between two views when the call is channels-last.
std::vector<OpRecord> in_layout(const CapturedOp& call, OpRecord r, bool last) {
  r.outputs.resize(1);
  if (!last) return one(std::move(r));
  const TensorDesc x = r.inputs.at(0), y = r.outputs.at(0);
  r.inputs[0] = {y.name + ".in_channels_first", channels_first(x.shape), x.dtype};
  r.outputs[0] = {y.name + ".channels_first", channels_first(y.shape), y.dtype};
  r.name = op_kind_name(r.kind);
  OpRecord to{"to_channels_first", OpKind::kTranspose, call.name, {x}, {r.inputs[0]}, {}, {}, {}};
  OpRecord back{"to_channels_last", OpKind::kTranspose, call.name, {r.outputs[0]}, {y}, {}, {}, {}};
  to.attributes.set("materializes", false);
  back.attributes.set("materializes", false);
  return {std::move(to), std::move(r), std::move(back)};
}

/// Conv2D / Conv3D (filter [k..., in, out]) and DepthwiseConv2dNative (filter [k..., in, multiplier]).
Handler conv(bool depthwise) {
  return [=](const CapturedOp& call) -> std::vector<OpRecord> {
    const CapturedTensor* x = tensor_at(call, 0);
    const CapturedTensor* w = tensor_at(call, 1);
    if (!x || !w || call.outputs.empty() || call.outputs[0].tensors.empty() || x->shape.size() < 3 ||
        w->shape.size() != x->shape.size()) {
      return one(unknown(call, "a convolution needs an input, a filter of the same rank and an output"));
    }
    const Shape& y = call.outputs[0].tensors[0].shape;
    const std::size_t rank = x->shape.size() - 2;
    const Shape kernel(w->shape.begin(), w->shape.begin() + static_cast<std::ptrdiff_t>(rank));
    const std::int64_t in = w->shape[rank], out = w->shape[rank + 1];
    // every output element is a dot product over the filter's taps and input channels
    const Wide flops = saturating_product({2, saturating_elements(y), saturating_elements(kernel), depthwise ? 1 : in});
    const bool last = channels_last(call);
    const Shape xs = last ? channels_first(x->shape) : x->shape;
    const Ints stride = spatial(attr_ints(call, "strides"), rank, last, 1);
    const Ints dilation = spatial(attr_ints(call, "dilations"), rank, last, 1);
    const auto padding = padding_of(call, xs, kernel, stride, dilation, last);
    if (x->parameter || !w->parameter || !padding || in < 1 || xs[1] % in != 0) {
      return one(custom(call, flops, true));  // a filter computed by the graph: the count alone
    }
    OpRecord r = record_of(call, OpKind::kConv, {0, 1});
    Shape oi = depthwise ? Shape{in * out, 1} : Shape{out, in};
    oi.insert(oi.end(), kernel.begin(), kernel.end());
    r.parameters[0].shape = oi;  // the cost model's [out, in / groups, k...] order
    r.attributes.set("stride", stride);
    r.attributes.set("dilation", dilation);
    r.attributes.set("padding", *padding);
    r.attributes.set("groups", depthwise ? in : xs[1] / in);
    return in_layout(call, std::move(r), last);
  };
}

/// Conv2DBackpropInput(input_sizes, filter [k..., out, in], out_backprop): a transposed
/// convolution; each input element meets the filter's taps times its output channels.
std::vector<OpRecord> conv_transpose(const CapturedOp& call) {
  const CapturedTensor* w = tensor_at(call, 1);
  const CapturedTensor* x = tensor_at(call, 2);
  if (!w || !x || w->shape.size() != x->shape.size() || w->shape.size() < 3) {
    return one(unknown(call, "a transposed convolution needs a filter and an input of the same rank"));
  }
  const std::size_t rank = w->shape.size() - 2;
  const Wide taps = saturating_elements(Shape(w->shape.begin(), w->shape.begin() + static_cast<std::ptrdiff_t>(rank)));
  return one(custom(call, saturating_product({2, saturating_elements(x->shape), taps, w->shape[rank]}), true));
}

Handler pool(OpKind kind) {
  return [=](const CapturedOp& call) -> std::vector<OpRecord> {
    const CapturedTensor* x = tensor_at(call, 0);
    if (!x || x->parameter || x->shape.size() < 3 || call.outputs.empty()) {
      return one(unknown(call, "pooling needs an activation input of rank 3 to 5"));
    }
    const bool last = channels_last(call);
    const std::size_t rank = x->shape.size() - 2;
    const Ints kernel = spatial(attr_ints(call, "ksize"), rank, last, 0);
    const Ints stride = spatial(attr_ints(call, "strides"), rank, last, 1);
    const auto padding =
        padding_of(call, last ? channels_first(x->shape) : x->shape, kernel, stride, Ints(rank, 1), last);
    if (!padding) return one(unknown(call, "its padding is not SAME, VALID or EXPLICIT"));
    OpRecord r = record_of(call, kind, {0});
    r.attributes.set("kernel", kernel);
    r.attributes.set("stride", stride);
    r.attributes.set("padding", *padding);
    return in_layout(call, std::move(r), last);
  };
}

/// FusedBatchNorm[V2|V3](x, scale, offset, mean, variance): running statistics are buffers.
std::vector<OpRecord> batch_norm(const CapturedOp& call) {
  const CapturedTensor* x = tensor_at(call, 0);
  if (!x || x->parameter || x->shape.size() < 3 || call.inputs.size() < 5) {
    return one(unknown(call, "batch norm needs an activation input and four vectors"));
  }
  OpRecord r = record(call, OpKind::kBatchNorm);
  for (std::size_t i : {3, 4}) {
    const CapturedTensor* t = tensor_at(call, i);
    for (ParameterDesc& p : r.parameters) {
      if (t && p.id == t->name) p.trainable = false;
    }
  }
  r.attributes.set("affine", true);
  r.attributes.set("training", attr_bool(call, "is_training", false));
  return in_layout(call, std::move(r), channels_last(call));
}

/// MatMul / BatchMatMul*: the transpose flags are named differently by the two.
Handler matmul(const std::string& transpose_a, const std::string& transpose_b) {
  return [=](const CapturedOp& call) {
    const CapturedTensor* a = tensor_at(call, 0);
    const CapturedTensor* b = tensor_at(call, 1);
    const bool ta = attr_bool(call, transpose_a, false), tb = attr_bool(call, transpose_b, false);
    if (a && b && a->parameter && !b->parameter) {
      // W x as (x^T W^T)^T: the same products, and the weight stays a parameter
      OpRecord r = record_of(call, OpKind::kMatMul, {1, 0});
      r.attributes.set("transpose_a", !tb);
      r.attributes.set("transpose_b", !ta);
      return one(std::move(r));
    }
    OpRecord r = record_of(call, OpKind::kMatMul, {0, 1});
    r.attributes.set("transpose_a", ta);
    r.attributes.set("transpose_b", tb);
    return one(std::move(r));
  };
}

/// Einsum: the cost model's kEinsum, its terms in the record's operand order (inputs, then weights).
std::vector<OpRecord> einsum(const CapturedOp& call) {
  OpRecord r = record(call, OpKind::kEinsum);
  std::vector<bool> is_parameter;
  for (std::size_t i = 0; i < call.inputs.size(); ++i) {
    if (const CapturedTensor* t = tensor_at(call, i)) is_parameter.push_back(t->parameter);
  }
  try {
    r.attributes.set("equation", einsum_inputs_first(attr_string(call, "equation", ""), is_parameter));
  } catch (const Error& e) {
    return one(unknown(call, e.what()));
  }
  return one(std::move(r));
}

/// GatherV2(params, indices, axis) and ResourceGather(resource, indices): a lookup in a table.
std::vector<OpRecord> gather(const CapturedOp& call) {
  const CapturedTensor* table = tensor_at(call, 0);
  const std::int64_t axis = call.inputs.size() > 2 ? int_at(call, 2, -1) : 0;
  if (!table || !tensor_at(call, 1)) return one(unknown(call, "a gather needs a table and indices"));
  if (!table->parameter) return one(record_of(call, OpKind::kEmbedding, {0, 1}));
  if (table->shape.size() == 2 && axis == 0) return one(record_of(call, OpKind::kEmbedding, {1, 0}));
  return one(record(call, OpKind::kGather));  // reads what it gathers, computes nothing
}

/// BiasAdd: a broadcast add over the channel dimension (channels-first needs it spelled out).
std::vector<OpRecord> bias_add(const CapturedOp& call) {
  const CapturedTensor* x = tensor_at(call, 0);
  if (x && x->shape.size() > 2 && !channels_last(call)) return counted(1)(call);
  return function_of(OpKind::kBinary, "add")(call);
}

Handler reduction(std::string function) {
  return [function](const CapturedOp& call) {
    OpRecord r = record_of(call, OpKind::kReduction, {0});
    r.attributes.set("function", function);
    return one(std::move(r));
  };
}

/// A record of `kind` over all the call's tensors, or over its first (the data; the others are
/// shapes or indices computed at run time).
Handler kind_of(OpKind kind, bool first_only = false) {
  return [=](const CapturedOp& call) { return one(first_only ? record_of(call, kind, {0}) : record(call, kind)); };
}

/// TensorListReserve / EmptyTensorList: a list of unset elements, no data (a view of nothing).
std::vector<OpRecord> empty_list(const CapturedOp& call) {
  OpRecord r = record(call, OpKind::kReshape);
  r.inputs.clear();
  r.parameters.clear();
  return one(std::move(r));
}

/// TensorListSetItem(list, index, item) / TensorListGetItem(list, index, shape): the list keeps,
/// or hands out, a reference to the element.
Handler list_element(OpKind kind) {
  return [=](const CapturedOp& call) {
    OpRecord r = kind == OpKind::kSlice ? record_of(call, kind, {0}) : record_of(call, kind, {0, 2});
    r.parameters.clear();
    r.attributes.set("materializes", false);
    return one(std::move(r));
  };
}

/// A While the worker could not unroll, an If or Case whose branch it could not know: its reason
/// ("not_unrolled", "not_inlined"), or the generic one.
std::vector<OpRecord> control_flow(const CapturedOp& call) {
  const std::string branch_why = attr_string(call, "not_inlined", "");
  if (!branch_why.empty())
    return one(unknown(call, fmt::format("control flow ({}) is not inlined: {}; none of its branches is counted",
                                         call.name.substr(4), branch_why)));
  const std::string why = attr_string(call, "not_unrolled", "");
  return one(unknown(
      call,
      why.empty()
          ? fmt::format("control flow ({}) is not unrolled by the worker; its body is not counted", call.name.substr(4))
          : fmt::format("control flow ({}) is not unrolled: {}; its body is not counted", call.name.substr(4), why)));
}

bool is_buffer(const std::string& id) { return id.rfind("const:", 0) == 0 || id.rfind("buffer:", 0) == 0; }

}  // namespace

const HandlerTable& tf_handlers() {
  static const HandlerTable table = [] {
    std::map<std::string, Handler> h;
    h["MatMul"] = matmul("transpose_a", "transpose_b");
    for (const char* op : {"BatchMatMul", "BatchMatMulV2", "BatchMatMulV3"}) h[op] = matmul("adj_x", "adj_y");
    h["Einsum"] = einsum;
    h["Conv2D"] = conv(false);
    h["Conv3D"] = conv(false);
    h["DepthwiseConv2dNative"] = conv(true);
    h["Conv2DBackpropInput"] = conv_transpose;
    h["MaxPool"] = h["MaxPool3D"] = pool(OpKind::kMaxPool);
    h["AvgPool"] = h["AvgPool3D"] = pool(OpKind::kAvgPool);
    for (const char* op : {"FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3"}) h[op] = batch_norm;
    h["BiasAdd"] = bias_add;
    const std::map<std::string, std::string> binaries = {
        {"Add", "add"},        {"AddV2", "add"},       {"Sub", "sub"},
        {"Mul", "mul"},        {"RealDiv", "div"},     {"Div", "div"},
        {"DivNoNan", "div"},   {"FloorDiv", "div"},    {"FloorMod", "mod"},
        {"Maximum", "max"},    {"Minimum", "min"},     {"Pow", "pow"},
        {"Equal", "equal"},    {"NotEqual", "equal"},  {"Less", "less"},
        {"LessEqual", "less"}, {"Greater", "greater"}, {"GreaterEqual", "greater"},
        {"LogicalAnd", "and"}, {"LogicalOr", "or"},    {"SelectV2", "where"}};
    for (const auto& [op, f] : binaries) h[op] = function_of(OpKind::kBinary, f);
    const std::map<std::string, std::string> unaries = {
        {"Exp", "exp"},        {"Log", "log"},         {"Sqrt", "sqrt"},     {"Rsqrt", "rsqrt"},
        {"Neg", "neg"},        {"Abs", "abs"},         {"Square", "square"}, {"Reciprocal", "reciprocal"},
        {"Inv", "reciprocal"}, {"Erf", "erf"},         {"Sin", "sin"},       {"Cos", "cos"},
        {"Floor", "floor"},    {"Ceil", "ceil"},       {"Round", "round"},   {"Sign", "sign"},
        {"LogicalNot", "not"}, {"IsNan", "isnan"},     {"IsInf", "isinf"},   {"IsFinite", "isinf"},
        {"Cast", "cast"},      {"ClipByValue", "clip"}};
    for (const auto& [op, f] : unaries) h[op] = function_of(OpKind::kUnary, f);
    const std::map<std::string, std::string> activations = {
        {"Relu", "relu"}, {"Relu6", "relu6"},       {"LeakyRelu", "leaky_relu"},
        {"Elu", "elu"},   {"Selu", "selu"},         {"Sigmoid", "sigmoid"},
        {"Tanh", "tanh"}, {"Softplus", "softplus"}, {"Softsign", "softsign"}};
    for (const auto& [op, f] : activations) h[op] = function_of(OpKind::kActivation, f);
    h["SquaredDifference"] = function_of(OpKind::kBinary, "squared_difference");
    // a custom count: its condition may be a vector over the first dimension (not numpy broadcasting)
    h["Select"] = counted(1);
    h["Log1p"] = function_of(OpKind::kUnary, "log1p");
    h["Expm1"] = function_of(OpKind::kUnary, "expm1");
    h["AddN"] = [](const CapturedOp& call) {
      std::vector<OpRecord> r = function_of(OpKind::kBinary, "add")(call);
      r[0].attributes.set("variadic", true);
      if (r[0].inputs.size() + r[0].parameters.size() < 2) r[0].attributes.set("scalar_operand", true);
      return r;
    };
    for (const char* op : {"Softmax", "LogSoftmax"}) {
      h[op] = [](const CapturedOp& call) {
        OpRecord r = record(call, OpKind::kSoftmax);
        r.attributes.set("axis", std::int64_t{-1});
        r.attributes.set("log", call.name == "tf::LogSoftmax");
        return one(std::move(r));
      };
    }
    for (const auto& [op, f] : std::map<std::string, std::string>{{"Mean", "mean"},
                                                                  {"Sum", "sum"},
                                                                  {"Max", "max"},
                                                                  {"Min", "min"},
                                                                  {"Prod", "prod"},
                                                                  {"ArgMax", "max"},
                                                                  {"ArgMin", "min"},
                                                                  {"All", "min"},
                                                                  {"Any", "max"},
                                                                  {"EuclideanNorm", "l2"}}) {
      h[op] = reduction(f);
    }
    for (const char* op : {"Reshape", "Squeeze", "ExpandDims", "Identity", "IdentityN", "StopGradient", "Snapshot",
                           "PreventGradient", "EnsureShape"}) {
      h[op] = view();
    }
    h["Transpose"] = h["ConjugateTranspose"] = kind_of(OpKind::kTranspose, true);
    for (const char* op : {"ConcatV2", "Concat", "Pack"}) h[op] = kind_of(OpKind::kConcat);
    for (const char* op : {"Unpack", "Split", "SplitV"}) h[op] = kind_of(OpKind::kSplit);
    h["StridedSlice"] = h["Slice"] = kind_of(OpKind::kSlice, true);
    h["Pad"] = h["PadV2"] = h["MirrorPad"] = kind_of(OpKind::kPad, true);
    h["GatherV2"] = h["Gather"] = h["ResourceGather"] = gather;
    for (const char* op : {"Tile", "BroadcastTo", "OneHot", "ReverseV2"})
      h[op] = kind_of(OpKind::kGather);  // copies, no arithmetic
    for (const char* op : {"Fill", "ZerosLike", "OnesLike", "Shape", "ShapeN", "Size", "Rank"}) h[op] = writes_only();
    h["Range"] = writes_only("range");
    h["TensorListReserve"] = h["EmptyTensorList"] = empty_list;
    h["TensorListFromTensor"] = view();  // the list's elements alias the tensor's rows
    h["TensorListSetItem"] = list_element(OpKind::kReshape);
    h["TensorListGetItem"] = list_element(OpKind::kSlice);
    h["TensorListStack"] = kind_of(OpKind::kConcat, true);  // copies every element
    h["TensorListLength"] = h["TensorListElementShape"] = writes_only();
    for (const char* op : {"While", "StatelessWhile", "If", "StatelessIf", "Case", "StatelessCase"})
      h[op] = control_flow;
    // keys carry the framework prefix; constants and non-trainable variables are buffers
    HandlerTable prefixed;
    for (auto& [op, handler] : h) {
      prefixed["tf::" + op] = [inner = std::move(handler)](const CapturedOp& call) {
        std::vector<OpRecord> records = inner(call);
        for (OpRecord& r : records) {
          for (ParameterDesc& p : r.parameters) p.trainable = p.trainable && !is_buffer(p.id);
          if (r.inputs.empty() && (r.kind == OpKind::kSoftmax || r.kind == OpKind::kReduction)) {
            r = unknown(call, "its data operand is a weight or constant, which this mapping does not cost");
          }
        }
        return records;
      };
    }
    return prefixed;
  }();
  return table;
}

}  // namespace neuralcost::capture
