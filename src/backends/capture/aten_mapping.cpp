// Maps top-level ATen calls to op records (see captured_op.hpp). Argument positions follow
// the ATen schemas of LibTorch 1.13 (native_functions.yaml); each handler names its schema.
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "backends/capture/captured_records.hpp"

namespace neuralcost::capture {
namespace {

Handler conv(std::size_t stride, std::size_t padding, std::size_t dilation, std::size_t groups,
             std::optional<std::size_t> transposed, std::optional<std::size_t> output_padding) {
  return [=](const CapturedOp& call) {
    const bool is_transposed = transposed && bool_at(call, *transposed, false);
    OpRecord r = record_of(call, is_transposed ? OpKind::kConvTranspose : OpKind::kConv, {0, 1, 2});
    if (call.inputs.size() > padding && call.inputs[padding].kind != Kind::kInts &&
        call.inputs[padding].kind != Kind::kInt) {
      OpRecord u = record(call, OpKind::kUnknown);
      u.attributes.set("reason", std::string("string padding ('same'/'valid') is not mapped"));
      return one(std::move(u));
    }
    r.attributes.set("stride", ints_at(call, stride));
    r.attributes.set("padding", ints_at(call, padding));
    r.attributes.set("dilation", ints_at(call, dilation));
    r.attributes.set("groups", int_at(call, groups, 1));
    if (output_padding) r.attributes.set("output_padding", ints_at(call, *output_padding));
    return one(std::move(r));
  };
}

Handler pool(OpKind kind, bool has_dilation) {
  // max_pool2d(self, kernel_size, stride, padding, dilation, ceil_mode)
  // avg_pool2d(self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
  return [=](const CapturedOp& call) {
    OpRecord r = record(call, kind);
    r.outputs.resize(1);  // max_pool2d_with_indices also returns indices: not part of the pool's work
    r.attributes.set("kernel", ints_at(call, 1));
    const auto stride = ints_at(call, 2);
    if (!stride.empty()) r.attributes.set("stride", stride);
    r.attributes.set("padding", ints_at(call, 3).empty() ? std::vector<std::int64_t>{0} : ints_at(call, 3));
    if (has_dilation)
      r.attributes.set("dilation", ints_at(call, 4).empty() ? std::vector<std::int64_t>{1} : ints_at(call, 4));
    r.attributes.set("ceil_mode", bool_at(call, has_dilation ? 5 : 4, false));
    return one(std::move(r));
  };
}

Handler adaptive(bool is_max) {
  return [=](const CapturedOp& call) {
    OpRecord r = record(call, is_max ? OpKind::kAdaptiveMaxPool : OpKind::kAdaptiveAvgPool);
    r.outputs.resize(1);
    bool global = true;
    for (std::int64_t s : ints_at(call, 1)) global = global && s == 1;
    if (global) r.kind = is_max ? OpKind::kGlobalMaxPool : OpKind::kGlobalAvgPool;
    return one(std::move(r));
  };
}

Handler recurrent(OpKind kind) {
  // lstm(input, hx[], params[], has_biases, num_layers, dropout, train, bidirectional, batch_first)
  // gru / rnn_tanh / rnn_relu: the same with hx a single tensor
  return [=](const CapturedOp& call) {
    OpRecord r = record(call, kind);
    r.attributes.set("bias", bool_at(call, 3, true));
    r.attributes.set("num_layers", int_at(call, 4, 1));
    r.attributes.set("bidirectional", bool_at(call, 7, false));
    r.attributes.set("batch_first", bool_at(call, 8, false));
    if (call.name == "aten::rnn_relu") r.attributes.set("nonlinearity", std::string("relu"));
    // hidden size from the state: hx is [layers * dirs, B, H]
    if (call.inputs.size() > 1 && !call.inputs[1].tensors.empty() && call.inputs[1].tensors[0].shape.size() == 3) {
      r.attributes.set("hidden_size", call.inputs[1].tensors[0].shape[2]);
    }
    // weights flow in through the params list; treat them all as parameters
    for (const CapturedTensor& t : call.inputs.size() > 2 ? call.inputs[2].tensors : std::vector<CapturedTensor>{}) {
      if (!t.parameter) {
        std::erase_if(r.inputs, [&](const TensorDesc& d) { return d.name == t.name; });
        r.parameters.push_back(param(t));
      }
    }
    return one(std::move(r));
  };
}

/// Helpers for decomposing fused transformer ops into the records they compute.
struct Decomposer {
  const CapturedOp& call;
  std::vector<OpRecord> records;
  int next = 0;

  /// A new edge, named after the call's output so that two calls of one op do not collide.
  TensorDesc fresh(const Shape& shape, DType dtype) {
    const bool named = !call.outputs.empty() && !call.outputs[0].tensors.empty();
    return {fmt::format("{}.t{}", named ? call.outputs[0].tensors[0].name : call.name, next++), shape, dtype};
  }
  const CapturedTensor* t(std::size_t i) const { return tensor_at(call, i); }

  TensorDesc linear(const std::string& part, const TensorDesc& x, const CapturedTensor* w, const CapturedTensor* b) {
    OpRecord r{part, OpKind::kLinear, call.name, {x}, {}, {}, {}, {}};
    Shape y = x.shape;
    y.back() = w->shape[0];
    r.outputs = {fresh(y, x.dtype)};
    r.parameters = {param(*w)};
    if (b) r.parameters.push_back(param(*b));
    records.push_back(r);
    return r.outputs[0];
  }
  TensorDesc attention(const TensorDesc& qkv, std::int64_t heads, bool batch_first) {
    // qkv packed [B, L, 3E] (batch first) -> q, k, v [B, H, L, E/H]
    const std::int64_t b = batch_first ? qkv.shape[0] : qkv.shape[1], l = batch_first ? qkv.shape[1] : qkv.shape[0];
    const std::int64_t e = qkv.shape[2] / 3;
    const Shape s{b, heads, l, e / heads};
    OpRecord split{"split_heads",
                   OpKind::kSplit,
                   call.name,
                   {qkv},
                   {fresh(s, qkv.dtype), fresh(s, qkv.dtype), fresh(s, qkv.dtype)},
                   {},
                   {},
                   {}};
    split.attributes.set("materializes", false);
    records.push_back(split);
    OpRecord att{"attention", OpKind::kAttention, call.name, split.outputs, {fresh(s, qkv.dtype)}, {}, {}, {}};
    records.push_back(att);
    OpRecord merge{
        "merge_heads", OpKind::kTranspose, call.name, att.outputs, {fresh(qkv.shape, qkv.dtype)}, {}, {}, {}};
    merge.outputs[0].shape.back() = e;
    merge.attributes.set("materializes", false);
    records.push_back(merge);
    return merge.outputs[0];
  }
  TensorDesc add(const TensorDesc& a, const TensorDesc& b, const std::string& part) {
    OpRecord r{part, OpKind::kBinary, call.name, {a, b}, {fresh(a.shape, a.dtype)}, {}, {}, {}};
    r.attributes.set("function", std::string("add"));
    records.push_back(r);
    return r.outputs[0];
  }
  TensorDesc norm(const TensorDesc& x, const CapturedTensor* w, const CapturedTensor* b, const std::string& part) {
    OpRecord r{part, OpKind::kLayerNorm, call.name, {x}, {fresh(x.shape, x.dtype)}, {}, {}, {}};
    if (w) r.parameters.push_back(param(*w));
    if (b) r.parameters.push_back(param(*b));
    records.push_back(r);
    return r.outputs[0];
  }
  TensorDesc act(const TensorDesc& x, const std::string& function) {
    OpRecord r{"activation", OpKind::kActivation, call.name, {x}, {fresh(x.shape, x.dtype)}, {}, {}, {}};
    r.attributes.set("function", function);
    records.push_back(r);
    return r.outputs[0];
  }
  /// Renames the last record's output to the call's real output so edges stay connected.
  void bind_output() {
    if (records.empty() || call.outputs.empty() || call.outputs[0].tensors.empty()) return;
    const std::string old = records.back().outputs[0].name;
    records.back().outputs[0] = desc(call.outputs[0].tensors[0]);
    for (OpRecord& r : records) {
      for (TensorDesc& d : r.inputs) {
        if (d.name == old) d = records.back().outputs[0];
      }
    }
  }
};

std::vector<OpRecord> transformer_encoder_layer(const CapturedOp& call) {
  // _transformer_encoder_layer_fwd(src, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight,
  //   proj_bias, use_gelu, norm_first, eps, norm_weight_1, norm_bias_1, norm_weight_2,
  //   norm_bias_2, ffn_weight_1, ffn_bias_1, ffn_weight_2, ffn_bias_2, mask, mask_type)
  Decomposer d{call, {}};
  const CapturedTensor* src = d.t(0);
  if (!src || !d.t(3) || !d.t(5) || !d.t(14) || !d.t(16)) return one(record(call, OpKind::kUnknown));
  const bool gelu = bool_at(call, 7, false), norm_first = bool_at(call, 8, false);
  const std::int64_t heads = int_at(call, 2, 1);
  TensorDesc x = desc(*src);
  TensorDesc h = norm_first ? d.norm(x, d.t(10), d.t(11), "norm1") : x;
  TensorDesc a = d.linear("self_attn.out_proj",
                          d.attention(d.linear("self_attn.in_proj", h, d.t(3), d.t(4)), heads, true), d.t(5), d.t(6));
  x = d.add(x, a, "residual1");
  if (!norm_first) x = d.norm(x, d.t(10), d.t(11), "norm1");
  h = norm_first ? d.norm(x, d.t(12), d.t(13), "norm2") : x;
  TensorDesc f =
      d.linear("linear2", d.act(d.linear("linear1", h, d.t(14), d.t(15)), gelu ? "gelu" : "relu"), d.t(16), d.t(17));
  x = d.add(x, f, "residual2");
  if (!norm_first) x = d.norm(x, d.t(12), d.t(13), "norm2");
  d.bind_output();
  return d.records;
}

std::vector<OpRecord> native_multi_head_attention(const CapturedOp& call) {
  // _native_multi_head_attention(query, key, value, embed_dim, num_head, qkv_weight, qkv_bias,
  //   proj_weight, proj_bias, mask, need_weights, average_attn_weights, mask_type)
  Decomposer d{call, {}};
  const CapturedTensor* q = d.t(0);
  if (!q || !d.t(5) || !d.t(7) || q->shape.size() != 3) return one(record(call, OpKind::kUnknown));
  TensorDesc a = d.attention(d.linear("in_proj", desc(*q), d.t(5), d.t(6)), int_at(call, 4, 1), true);
  d.linear("out_proj", a, d.t(7), d.t(8));
  d.bind_output();
  return d.records;
}

}  // namespace

const HandlerTable& aten_handlers() {
  static const HandlerTable table = [] {
    std::map<std::string, Handler> h;
    for (const char* v : {
#include "aten_view_ops.inc"
         }) {
      h[v] = view();
    }
    for (const char* v : {"aten::empty", "aten::empty_like"}) h[v] = view();  // allocations: no work
    h["aten::contiguous"] = [](const CapturedOp& call) -> std::vector<OpRecord> {
      const CapturedTensor* x = tensor_at(call, 0);
      if (x && x->contiguous) return view()(call);
      OpRecord r = record(call, OpKind::kUnary);
      r.attributes.set("function", std::string("copy"));
      return one(std::move(r));
    };
    for (const char* c : {"aten::clone", "aten::copy_", "aten::to", "aten::_to_copy", "aten::type_as"})
      h[c] = function_of(OpKind::kUnary, "copy");
    // TorchScript's autocast casts (its autocast pass inserts them): a copy when the dtype
    // changes, the tensor itself (no work) when it is already in that dtype
    for (const char* c : {"aten::_autocast_to_reduced_precision", "aten::_autocast_to_full_precision"}) {
      h[c] = [](const CapturedOp& call) -> std::vector<OpRecord> {
        const CapturedTensor* x = tensor_at(call, 0);
        const bool same = x && !call.outputs.empty() && call.outputs[0].tensors.size() == 1 &&
                          call.outputs[0].tensors[0].dtype == x->dtype;
        return same ? view()(call) : function_of(OpKind::kUnary, "copy")(call);
      };
    }
    for (const char* c : {"aten::cat", "aten::stack", "aten::concat"})
      h[c] = [](const CapturedOp& call) { return one(record(call, OpKind::kConcat)); };
    for (const char* c : {"aten::matmul", "aten::mm", "aten::bmm"}) {
      h[c] = [](const CapturedOp& call) { return one(record_of(call, OpKind::kMatMul, {0, 1})); };
    }
    // addmm(self, mat1, mat2, beta, alpha) = self + mat1 @ mat2; operands A, B, C
    for (const char* c : {"aten::addmm", "aten::baddbmm"}) {
      h[c] = [](const CapturedOp& call) { return one(record_of(call, OpKind::kMatMul, {1, 2, 0})); };
    }
    // _grouped_mm(mat_a [rows, in], mat_b [E, in, out], offs, bias [E, out]): a mixture of experts' rows, each
    // through its expert (transformers' grouped_mm experts). The worker reads offs into attr expert_rows
    // (the rows each expert took): without it, or on other shapes, the op is unmodeled rather than guessed
    h["aten::_grouped_mm"] = [](const CapturedOp& call) {
      const CapturedTensor *a = tensor_at(call, 0), *b = tensor_at(call, 1);
      const auto rows = call.attributes.find("expert_rows");
      if (!a || !b || !b->parameter || a->shape.size() != 2 || b->shape.size() != 3 || rows == call.attributes.end() ||
          rows->second.kind != CapturedValue::Kind::kInts) {
        return one(record(call, OpKind::kUnknown));
      }
      OpRecord r = record_of(call, OpKind::kExpertLinear, {0, 1, 3});
      r.attributes.set("weight_layout", std::string("in_out"));
      r.attributes.set("expert_rows", rows->second.ints);
      return one(std::move(r));
    };
    h["aten::linear"] = [](const CapturedOp& call) {  // linear(input, weight, bias)
      const CapturedTensor* w = tensor_at(call, 1);
      if (w && w->parameter) return one(record_of(call, OpKind::kLinear, {0, 1, 2}));
      OpRecord r = record_of(call, OpKind::kMatMul, {0, 1, 2});
      r.attributes.set("transpose_b", true);
      return one(std::move(r));
    };
    // conv2d(input, weight, bias, stride, padding, dilation, groups)
    for (const char* c : {"aten::conv1d", "aten::conv2d", "aten::conv3d"})
      h[c] = conv(3, 4, 5, 6, std::nullopt, std::nullopt);
    // convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    for (const char* c : {"aten::convolution", "aten::_convolution"}) h[c] = conv(3, 4, 5, 8, 6, 7);
    // mkldnn_convolution(self, weight, bias, padding, stride, dilation, groups)
    h["aten::mkldnn_convolution"] = conv(4, 3, 5, 6, std::nullopt, std::nullopt);
    // conv_transpose2d(input, weight, bias, stride, padding, output_padding, groups, dilation)
    for (const char* c : {"aten::conv_transpose1d", "aten::conv_transpose2d", "aten::conv_transpose3d"}) {
      h[c] = [](const CapturedOp& call) {
        OpRecord r = record_of(call, OpKind::kConvTranspose, {0, 1, 2});
        r.attributes.set("stride", ints_at(call, 3));
        r.attributes.set("padding", ints_at(call, 4));
        r.attributes.set("output_padding", ints_at(call, 5));
        r.attributes.set("groups", int_at(call, 6, 1));
        r.attributes.set("dilation", ints_at(call, 7));
        return one(std::move(r));
      };
    }
    const std::map<std::string, std::string> activations = {{"relu", "relu"},
                                                            {"relu_", "relu"},
                                                            {"tanh", "tanh"},
                                                            {"tanh_", "tanh"},
                                                            {"sigmoid", "sigmoid"},
                                                            {"sigmoid_", "sigmoid"},
                                                            {"silu", "silu"},
                                                            {"silu_", "silu"},
                                                            {"hardtanh", "hardtanh"},
                                                            {"hardtanh_", "hardtanh"},
                                                            {"leaky_relu", "leaky_relu"},
                                                            {"elu", "elu"},
                                                            {"hardswish", "hardswish"},
                                                            {"hardsigmoid", "hardsigmoid"},
                                                            {"softplus", "softplus"},
                                                            {"mish", "mish"},
                                                            {"relu6", "relu6"},
                                                            {"prelu", "prelu"},
                                                            {"selu", "selu"},
                                                            {"celu", "celu"}};
    // an ATen op named with a trailing underscore writes its result into its first argument
    const auto in_place_if_named = [](const std::string& op, Handler handler) -> Handler {
      if (op.empty() || op.back() != '_') return handler;
      return [handler](const CapturedOp& call) {
        std::vector<OpRecord> records = handler(call);
        for (OpRecord& r : records) r.attributes.set("in_place", true);
        return records;
      };
    };
    for (const auto& [op, f] : activations)
      h["aten::" + op] = in_place_if_named(op, function_of(OpKind::kActivation, f));
    h["aten::gelu"] = [](const CapturedOp& call) {  // gelu(self, approximate = 'none' | 'tanh')
      OpRecord r = record(call, OpKind::kActivation);
      const bool tanh = call.inputs.size() > 1 && call.inputs[1].kind == Kind::kString && call.inputs[1].s == "tanh";
      r.attributes.set("function", std::string(tanh ? "gelu_tanh" : "gelu"));
      return one(std::move(r));
    };
    for (const char* f : {"exp", "log", "sqrt", "rsqrt", "neg", "abs", "reciprocal", "erf", "sin", "cos", "square"}) {
      h[std::string("aten::") + f] = function_of(OpKind::kUnary, f);
    }
    const std::map<std::string, std::string> binaries = {
        {"add", "add"},     {"add_", "add"}, {"sub", "sub"},    {"sub_", "sub"},    {"rsub", "sub"},
        {"mul", "mul"},     {"mul_", "mul"}, {"div", "div"},    {"div_", "div"},    {"maximum", "max"},
        {"minimum", "min"}, {"pow", "pow"},  {"eq", "equal"},   {"ne", "equal"},    {"lt", "less"},
        {"gt", "greater"},  {"le", "less"},  {"ge", "greater"}, {"where", "where"}, {"masked_fill", "where"}};
    for (const auto& [op, f] : binaries) h["aten::" + op] = in_place_if_named(op, function_of(OpKind::kBinary, f));
    // complex values are (real, imaginary) pairs in a last dim of 2 (CapturedTensor::complex): a
    // product of two is complex_mul; a complex times a real tensor scales both parts (the real
    // operand gains a trailing dim of 1 to broadcast); torch.polar(abs, angle) writes pairs
    const auto complex_aware = [](const std::string& function) -> Handler {
      return [function](const CapturedOp& call) {
        std::set<std::string> complex;
        for (const CapturedValue& v : call.inputs) {
          for (const CapturedTensor& t : v.tensors) {
            if (t.complex) complex.insert(t.name);
          }
        }
        std::vector<OpRecord> records = function_of(OpKind::kBinary, function)(call);
        if (records.empty()) return records;
        OpRecord r = std::move(records.front());
        const auto pairs = [&](const std::string& name) { return complex.count(name) > 0; };
        std::size_t complex_operands = 0;
        for (const TensorDesc& t : r.inputs) complex_operands += pairs(t.name);
        for (const ParameterDesc& p : r.parameters) complex_operands += pairs(p.id);
        const std::size_t operands = r.inputs.size() + r.parameters.size();
        if (function != "polar" && complex_operands == 2) r.attributes.set("function", std::string("complex_mul"));
        if (function != "polar" && (complex_operands != 1 || operands != 2)) return one(std::move(r));
        // the real operands of polar, or of a complex times a real tensor, viewed with a trailing
        // dim of 1 (a view of their own) so that they broadcast over the pairs
        std::vector<OpRecord> out;
        const auto as_pairs = [&](OpRecord view, const Shape& shape, const std::string& name) {
          view.kind = OpKind::kReshape;
          view.source_type = r.source_type;
          view.name = r.name + "#" + name + "_as_pairs";
          view.attributes = Attributes();
          view.attributes.set("materializes", false);
          TensorDesc y{view.name, shape, r.outputs.front().dtype};
          y.shape.push_back(1);
          view.outputs = {y};
          out.push_back(std::move(view));
          return y;
        };
        std::vector<TensorDesc> inputs;
        for (const TensorDesc& t : r.inputs) {
          if (pairs(t.name)) {
            inputs.push_back(t);
            continue;
          }
          OpRecord view;
          view.inputs = {t};
          inputs.push_back(as_pairs(std::move(view), t.shape, t.name));
          inputs.back().dtype = t.dtype;
        }
        std::vector<ParameterDesc> parameters;
        for (const ParameterDesc& p : r.parameters) {
          if (pairs(p.id)) {
            parameters.push_back(p);
            continue;
          }
          OpRecord view;
          view.parameters = {p};
          inputs.push_back(as_pairs(std::move(view), p.shape, p.id));
          inputs.back().dtype = p.dtype;
        }
        r.inputs = std::move(inputs);
        r.parameters = std::move(parameters);
        out.push_back(std::move(r));
        return out;
      };
    };
    h["aten::mul"] = complex_aware("mul");
    h["aten::mul_"] = in_place_if_named("mul_", complex_aware("mul"));
    h["aten::polar"] = complex_aware("polar");
    // whole-tensor comparison returning one bool: a custom count (docs/counting.md, "custom ops")
    h["aten::equal"] = [](const CapturedOp& call) {
      OpRecord r = record(call, OpKind::kCustom);
      const CapturedTensor* a = tensor_at(call, 0);
      std::int64_t n = 1;
      for (std::int64_t d : a ? a->shape : Shape{}) n *= d;
      r.attributes.set("flops", n);
      return one(std::move(r));
    };
    for (const char* c : {"aten::zeros", "aten::ones", "aten::full", "aten::zeros_like", "aten::ones_like",
                          "aten::full_like", "aten::fill_", "aten::zero_"}) {
      h[c] = [](const CapturedOp& call) {  // writes its output from no tensor data
        OpRecord r = record(call, OpKind::kFill);
        r.inputs.clear();
        return one(std::move(r));
      };
    }
    // torch.export's checks of a tensor's metadata and of symbolic sizes: no tensor work
    for (const char* c : {"aten::_assert_tensor_metadata", "aten::_assert_async", "aten::_assert_scalar",
                          "aten::sym_constrain_range_for_size", "aten::_functional_sym_constrain_range"}) {
      h[c] = [](const CapturedOp&) { return std::vector<OpRecord>{}; };
    }
    h["aten::lift_fresh_copy"] = function_of(OpKind::kUnary, "copy");  // a program constant, copied
    for (const char* c : {"aten::new_zeros", "aten::new_ones", "aten::new_full"}) {
      h[c] = [](const CapturedOp& call) {  // (self, size, ...): self gives dtype and device only
        OpRecord r = record(call, OpKind::kFill);
        r.inputs.clear();
        r.parameters.clear();
        return one(std::move(r));
      };
    }
    h["aten::new_empty"] = [](const CapturedOp&) { return std::vector<OpRecord>{}; };  // an allocation
    h["aten::arange"] = [](const CapturedOp& call) {                                   // start + i·step
      OpRecord r = record(call, OpKind::kFill);
      r.inputs.clear();
      r.attributes.set("function", std::string("range"));
      return one(std::move(r));
    };
    // topk(self, k, dim, largest, sorted) and sort(self, dim, descending): comparisons, counted as
    // the decoder's router counts them (k passes of n - 1; n·⌈log2 n⌉ for a sort), named as such;
    // the values and the int64 indices are written
    h["aten::topk"] = [](const CapturedOp& call) {
      const CapturedTensor* x = tensor_at(call, 0);
      if (!x || x->shape.empty()) return one(unknown(call, "topk of a scalar"));
      std::int64_t axis = int_at(call, 2, -1);
      if (axis < 0) axis += static_cast<std::int64_t>(x->shape.size());
      if (axis < 0 || axis >= static_cast<std::int64_t>(x->shape.size())) return one(unknown(call, "topk's dim"));
      const std::int64_t n = x->shape[static_cast<std::size_t>(axis)], k = int_at(call, 1, 1);
      std::int64_t rows = 1;
      for (std::int64_t d : x->shape) rows *= d;
      rows = n > 0 ? rows / n : 0;
      OpRecord r = record_inputs(call, OpKind::kCustom, {0});
      r.attributes.set("function", std::string("topk"));
      r.attributes.set("flops", rows * k * std::max<std::int64_t>(n - 1, 0));
      r.attributes.set("approximation",
                       fmt::format("top-{} of {} counted as {} passes of {} comparisons", k, n, k, n - 1));
      return one(std::move(r));
    };
    for (const char* c : {"aten::sort", "aten::argsort"}) {
      h[c] = [](const CapturedOp& call) {
        const CapturedTensor* x = tensor_at(call, 0);
        if (!x || x->shape.empty()) return one(unknown(call, "a sort of a scalar"));
        // sort(self, dim, descending); sort.stable(self, stable, dim, descending): dim is the first int
        std::int64_t axis = -1;
        for (std::size_t i = 1; i < call.inputs.size(); ++i) {
          if (call.inputs[i].kind == CapturedValue::Kind::kInt) {
            axis = int_at(call, i, -1);
            break;
          }
        }
        if (axis < 0) axis += static_cast<std::int64_t>(x->shape.size());
        if (axis < 0 || axis >= static_cast<std::int64_t>(x->shape.size())) return one(unknown(call, "sort's dim"));
        const std::int64_t n = x->shape[static_cast<std::size_t>(axis)];
        std::int64_t rows = 1, log2n = 0;
        for (std::int64_t d : x->shape) rows *= d;
        rows = n > 0 ? rows / n : 0;
        while ((std::int64_t{1} << log2n) < n) ++log2n;
        OpRecord r = record_inputs(call, OpKind::kCustom, {0});
        r.attributes.set("function", std::string("sort"));
        r.attributes.set("flops", rows * n * log2n);
        r.attributes.set("approximation", fmt::format("a sort of {} counted as {}·⌈log2 {}⌉ comparisons", n, n, n));
        return one(std::move(r));
      };
    }
    // floor_divide(self, other): a divide and a floor a value
    h["aten::floor_divide"] = [](const CapturedOp& call) {
      OpRecord r = record(call, OpKind::kCustom);
      r.attributes.set("function", std::string("floor_divide"));
      r.attributes.set("flops", static_cast<std::int64_t>(2 * (r.outputs.empty() ? 0 : r.outputs[0].elements())));
      return one(std::move(r));
    };
    // histc(self, bins, min, max): each value's bin (a subtract, a multiply, a floor) and an add to it
    h["aten::histc"] = [](const CapturedOp& call) {
      OpRecord r = record_inputs(call, OpKind::kCustom, {0});
      r.attributes.set("function", std::string("histc"));
      r.attributes.set("flops", static_cast<std::int64_t>(4 * (r.inputs.empty() ? 0 : r.inputs[0].elements())));
      r.attributes.set("approximation",
                       std::string("histc counted as 4 operations a value (a subtract, a multiply, a floor and an "
                                   "add to its bin)"));
      return one(std::move(r));
    };
    // scatter(self, dim, index, src | value[, reduce]), scatter_add(self, dim, index, src): the
    // updates written into a copy of self, or into self in place (the trailing _)
    for (const char* c : {"aten::scatter", "aten::scatter_", "aten::scatter_add", "aten::scatter_add_"}) {
      h[c] = [name = std::string(c)](const CapturedOp& call) {
        const bool scalar = !tensor_at(call, 3);
        OpRecord r =
            scalar ? record_inputs(call, OpKind::kScatter, {0, 2}) : record_inputs(call, OpKind::kScatter, {0, 2, 3});
        if (r.inputs.size() < 2) return one(unknown(call, "scatter without self and index"));
        if (name.back() == '_') r.attributes.set("in_place", true);
        std::string reduction = name.find("scatter_add") != std::string::npos ? "add" : "none";
        if (call.inputs.size() > 4 && call.inputs[4].kind == Kind::kString)
          reduction = call.inputs[4].s == "multiply" ? "mul" : call.inputs[4].s;
        r.attributes.set("reduction", reduction);
        if (scalar) {  // the index stands for the updates: its count of values, at its own width
          r.attributes.set("approximation",
                           std::string("a scatter of one scalar counted as writing as many bytes as its indices"));
        }
        return one(std::move(r));
      };
    }
    // index_put(self, indices, values, accumulate): the values written at the indices (added with
    // accumulate); index_put_ in place
    for (const char* c : {"aten::index_put", "aten::index_put_", "aten::_index_put_impl_"}) {
      h[c] = [name = std::string(c)](const CapturedOp& call) {
        OpRecord r = record_inputs(call, OpKind::kScatter, {0, 1, 2});
        if (r.inputs.size() < 3) return one(unknown(call, "index_put without self, indices and values"));
        if (name.back() == '_') r.attributes.set("in_place", true);
        r.attributes.set("reduction", std::string(bool_at(call, 3, false) ? "add" : "none"));
        return one(std::move(r));
      };
    }
    h["aten::cumsum"] = [](const CapturedOp& call) {  // cumsum(self, dim, dtype)
      OpRecord r = record_inputs(call, OpKind::kCumulative, {0});
      r.attributes.set("axis", int_at(call, 1, 0));
      return one(std::move(r));
    };
    // min / max: min(self) and min.dim(self, dim, keepdim) reduce (the indices are a
    // by-product); min.other(self, other) is elementwise
    for (const char* f : {"min", "max"}) {
      h[std::string("aten::") + f] = [f = std::string(f)](const CapturedOp& call) {
        if (tensor_at(call, 1)) {
          OpRecord r = record(call, OpKind::kBinary);
          r.attributes.set("function", f);
          return one(std::move(r));
        }
        OpRecord r = record(call, OpKind::kReduction);
        r.outputs.resize(1);
        r.attributes.set("function", f);
        return one(std::move(r));
      };
    }
    for (const auto& [op, f] : std::map<std::string, std::string>{{"__and__", "and"},
                                                                  {"__or__", "or"},
                                                                  {"__xor__", "xor"},
                                                                  {"bitwise_and", "and"},
                                                                  {"bitwise_or", "or"},
                                                                  {"bitwise_xor", "xor"},
                                                                  {"logical_and", "and"},
                                                                  {"logical_or", "or"},
                                                                  {"logical_xor", "xor"}}) {
      h["aten::" + op] = function_of(OpKind::kBinary, f);
    }
    for (const char* c : {"aten::bitwise_not", "aten::logical_not"}) h[c] = function_of(OpKind::kUnary, "not");
    // gather(self, dim, index), index_select(self, dim, index): read what they gather and the indices
    for (const char* c : {"aten::gather", "aten::index_select"}) {
      h[c] = [](const CapturedOp& call) { return one(record_inputs(call, OpKind::kEmbedding, {0, 2})); };
    }
    // index(self, indices): advanced indexing with one index tensor reads the rows it gathers
    h["aten::index"] = [](const CapturedOp& call) {
      const std::size_t tensors = call.inputs.size() > 1 ? call.inputs[1].tensors.size() : 0;
      if (tensors != 1) {
        return one(unknown(call, fmt::format("index with {} index tensors is not mapped (one is)", tensors)));
      }
      return one(record_inputs(call, OpKind::kEmbedding, {0, 1}));
    };
    // diff(self, n, dim, prepend, append): n rounds of neighbour differences along dim, over
    // the input with prepend and append joined: sum over k = 1..n of (L - k) subtractions per row
    h["aten::diff"] = [](const CapturedOp& call) {
      const CapturedTensor* y =
          call.outputs.empty() || call.outputs[0].tensors.empty() ? nullptr : &call.outputs[0].tensors[0];
      const std::int64_t n = int_at(call, 1, 1);
      std::int64_t axis = int_at(call, 2, -1);
      if (!y || y->shape.empty() || n < 1) return one(unknown(call, "diff without an output or with n < 1"));
      if (axis < 0) axis += static_cast<std::int64_t>(y->shape.size());
      if (axis < 0 || axis >= static_cast<std::int64_t>(y->shape.size()))
        return one(unknown(call, "diff's dim is outside the output's rank"));
      std::int64_t rows = 1;
      for (std::size_t i = 0; i < y->shape.size(); ++i) rows *= static_cast<std::int64_t>(i) == axis ? 1 : y->shape[i];
      const std::int64_t len = y->shape[static_cast<std::size_t>(axis)] + n;  // the joined input's length
      OpRecord r = record_inputs(call, OpKind::kCustom, {0, 3, 4});
      r.attributes.set("flops", rows * (n * len - n * (n + 1) / 2));
      return one(std::move(r));
    };
    // layer_norm(input, normalized_shape, weight, bias, eps, cudnn_enable)
    for (const char* c : {"aten::layer_norm", "aten::native_layer_norm"}) {
      h[c] = [](const CapturedOp& call) {
        OpRecord r = record(call, OpKind::kLayerNorm);
        r.outputs.resize(1);  // native_layer_norm's mean and rstd are by-products
        r.attributes.set("normalized_dims", static_cast<std::int64_t>(ints_at(call, 1).size()));
        return one(std::move(r));
      };
    }
    // batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn)
    for (const char* c : {"aten::batch_norm", "aten::_batch_norm_impl_index", "aten::native_batch_norm"}) {
      h[c] = [](const CapturedOp& call) {
        OpRecord r = record(call, OpKind::kBatchNorm);
        r.outputs.resize(1);
        for (ParameterDesc& p : r.parameters) p.trainable = false;
        for (std::size_t i : {1, 2}) {  // weight and bias are parameters; running stats are buffers
          if (const CapturedTensor* t = tensor_at(call, i)) {
            for (ParameterDesc& p : r.parameters) {
              if (p.id == t->name) p.trainable = true;
            }
          }
        }
        r.attributes.set("affine", tensor_at(call, 1) != nullptr);
        r.attributes.set("training", bool_at(call, 5, false));
        return one(std::move(r));
      };
    }
    for (const char* c : {"aten::softmax", "aten::_softmax"}) {
      h[c] = [](const CapturedOp& call) {
        OpRecord r = record(call, OpKind::kSoftmax);
        r.attributes.set("axis", int_at(call, 1, -1));
        return one(std::move(r));
      };
    }
    for (const char* c :
         {"aten::max_pool1d", "aten::max_pool2d", "aten::max_pool3d", "aten::max_pool2d_with_indices"}) {
      h[c] = pool(OpKind::kMaxPool, true);
    }
    for (const char* c : {"aten::avg_pool1d", "aten::avg_pool2d", "aten::avg_pool3d"})
      h[c] = pool(OpKind::kAvgPool, false);
    for (const char* c : {"aten::adaptive_avg_pool1d", "aten::adaptive_avg_pool2d", "aten::adaptive_avg_pool3d",
                          "aten::_adaptive_avg_pool2d"}) {
      h[c] = adaptive(false);
    }
    for (const char* c : {"aten::adaptive_max_pool1d", "aten::adaptive_max_pool2d"}) h[c] = adaptive(true);
    for (const auto& [op, f] : std::map<std::string, std::string>{
             {"mean", "mean"}, {"sum", "sum"}, {"amax", "max"}, {"amin", "min"}, {"prod", "prod"}}) {
      h["aten::" + op] = [f = f](const CapturedOp& call) {
        OpRecord r = record(call, OpKind::kReduction);
        r.attributes.set("function", f);
        return one(std::move(r));
      };
    }
    h["aten::embedding"] = [](const CapturedOp& call) {  // embedding(weight, indices, ...)
      OpRecord r = record_of(call, OpKind::kEmbedding, {1, 0});
      if (r.inputs.empty() && r.parameters.size() == 2) {  // constant indices (a buffer of position ids): still indices
        const ParameterDesc ids = r.parameters.front();
        r.inputs.push_back({ids.id, ids.shape, ids.dtype});
        r.parameters.erase(r.parameters.begin());
      }
      return one(std::move(r));
    };
    h["aten::lstm"] = recurrent(OpKind::kLstm);
    h["aten::gru"] = recurrent(OpKind::kGru);
    h["aten::rnn_tanh"] = recurrent(OpKind::kRnn);
    h["aten::rnn_relu"] = recurrent(OpKind::kRnn);
    // mkldnn_rnn_layer(input, w_ih, w_hh, b_ih, b_hh, hx, cx, reverse, batch_sizes, mode, hidden_size,
    //                  num_layers, has_biases, bidirectional, batch_first, train): one layer in one
    // direction, as PyTorch 2's CPU RNNs call it per layer (with autograd on); input [T, B, I]
    h["aten::mkldnn_rnn_layer"] = [](const CapturedOp& call) {
      const std::int64_t mode = int_at(call, 9, -1);  // oneDNN's: 0 relu, 1 tanh, 2 lstm, 3 gru
      if (mode < 0 || mode > 3) {
        OpRecord u = record(call, OpKind::kUnknown);
        u.attributes.set("reason", fmt::format("mkldnn_rnn_layer mode {} is not one of 0-3", mode));
        return one(std::move(u));
      }
      OpRecord r = record(call, mode == 2 ? OpKind::kLstm : mode == 3 ? OpKind::kGru : OpKind::kRnn);
      // oneDNN's training workspace (the fourth output, bytes), kept for the backward pass: its
      // real size, which the memory ledger takes over its own estimate
      if (r.outputs.size() >= 4 && r.outputs[3].shape.size() == 1 && r.outputs[3].dtype == DType::kInt8) {
        r.attributes.set("workspace_bytes", r.outputs[3].shape[0]);
      }
      r.outputs.resize(1);  // the layer's output; hy, cy and the workspace are by-products
      if (mode == 0) r.attributes.set("nonlinearity", std::string("relu"));
      r.attributes.set("bias", bool_at(call, 12, true));
      r.attributes.set("num_layers", std::int64_t{1});
      r.attributes.set("bidirectional", false);
      // the layer runs sequence-first: its state hx is [B, H] and its input [T, B, I]
      const CapturedTensor* x = tensor_at(call, 0);
      const CapturedTensor* hx = tensor_at(call, 5);
      const bool batch_first = x && hx && x->shape.size() == 3 && hx->shape.size() == 2 &&
                               x->shape[0] == hx->shape[0] && x->shape[1] != hx->shape[0];
      r.attributes.set("batch_first", batch_first);
      r.attributes.set("hidden_size", int_at(call, 10, hx && !hx->shape.empty() ? hx->shape.back() : 0));
      return one(std::move(r));
    };
    h["aten::_transformer_encoder_layer_fwd"] = transformer_encoder_layer;
    h["aten::_native_multi_head_attention"] = native_multi_head_attention;
    // scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal, *, scale, enable_gqa),
    // as a torch.export program calls it, and the fused kernels it dispatches to in train mode:
    // one attention over q, k, v [B, H, L, D] (k and v with fewer heads under grouped-query
    // attention) and a mask; logsumexp and the like are by-products. Every operand is data: a
    // mask held in a buffer is still the mask.
    struct Sdpa {
      const char* name;
      std::size_t dropout, causal;
      std::optional<std::size_t> mask;
    };
    for (const Sdpa& f : std::vector<Sdpa>{
             {"aten::scaled_dot_product_attention", 4, 5, 3},
             {"aten::_scaled_dot_product_flash_attention_for_cpu", 3, 4,
              5},  // (q, k, v, dropout_p, is_causal, *, attn_mask, scale)
             {"aten::_scaled_dot_product_flash_attention", 3, 4, std::nullopt},  // (q, k, v, dropout_p, is_causal, ...)
             {"aten::_scaled_dot_product_efficient_attention", 5, 6,
              3}}) {  // (q, k, v, attn_bias, lse, dropout_p, is_causal, scale)
      h[f.name] = [f](const CapturedOp& call) {
        OpRecord r = f.mask && tensor_at(call, *f.mask) ? record_inputs(call, OpKind::kAttention, {0, 1, 2, *f.mask})
                                                        : record_inputs(call, OpKind::kAttention, {0, 1, 2});
        r.outputs.resize(1);
        r.attributes.set("causal", bool_at(call, f.causal, false));
        const double p = f.dropout < call.inputs.size() && call.inputs[f.dropout].kind == Kind::kDouble
                             ? call.inputs[f.dropout].d
                             : 0.0;
        if (p > 0) r.attributes.set("dropout", p);
        return one(std::move(r));
      };
    }
    return h;
  }();
  return table;
}

}  // namespace neuralcost::capture
