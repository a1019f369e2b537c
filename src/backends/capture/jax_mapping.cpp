// Maps jaxpr primitives ("jax::<primitive>", as python/neuralcost_worker/jax/adapter.py reports
// them) to op records. Inputs are the equation's operands (scalar literals are numbers, not
// tensors); attributes are its parameters, with dot_general's dimension numbers as four int
// lists and a convolution's layouts as strings ("NCHW", "OIHW", "NHWC", ...).
//
// JAX conventions the table handles:
//  - dot_general contracts any dims: plain (batched) matrix products become matmuls, any other
//    dimension numbers a custom record with the exact count 2 * batch * M * N * K.
//  - A convolution in another layout (NHWC, HWIO) sits between two views to channels-first,
//    as the cost model reads it; views move no bytes.
//  - The worker names the program's constants (closed-over arrays such as batch-norm running
//    statistics) "const:<name>": they are buffers, not trainable parameters.
//  - A layout op of a weight that keeps its size has the weight's own name as output: it is not
//    an op, the weight is still that weight.
//  - The worker unrolls scans and while loops into the ops they run; a `while` that still
//    arrives here is one it could not count, and its attribute "not_unrolled" says why.
//  - The worker reports a `cond` as the ops of the branch it takes (attribute "cond_branch");
//    a `cond` that still arrives here is one whose branch it could not know ("not_inlined").
#include <algorithm>
#include <limits>
#include <set>

#include <fmt/format.h>

#include "backends/capture/captured_records.hpp"

namespace neuralcost::capture {
namespace {

using Ints = std::vector<std::int64_t>;

const CapturedTensor* output_at(const CapturedOp& call, std::size_t i) {
  return i < call.outputs.size() && call.outputs[i].kind == Kind::kTensor ? &call.outputs[i].tensors.front() : nullptr;
}

/// A kCustom record of the call with a FLOP count (all of it a contraction, or none).
OpRecord custom(const CapturedOp& call, Wide flops, bool contraction = false) {
  if (!fits_int64(flops)) return unknown(call, "its FLOP count does not fit 64 bits");
  OpRecord r = record(call, OpKind::kCustom);
  r.attributes.set("flops", static_cast<std::int64_t>(flops));
  r.attributes.set("contraction", contraction);
  return r;
}

/// iota, a broadcast scalar: writes its output from no tensor data.
std::vector<OpRecord> writes_only(const CapturedOp& call) {
  OpRecord r = record(call, OpKind::kFill);
  r.inputs.clear();
  r.parameters.clear();
  return one(std::move(r));
}

bool is_iota(const Ints& v, std::size_t n) {
  if (v.size() != n) return false;
  for (std::size_t i = 0; i < n; ++i) {
    if (v[i] != static_cast<std::int64_t>(i)) return false;
  }
  return true;
}

/// dot_general as the cost model's einsum: batch dims share a letter, contracting dims share a
/// letter, the others are free; the output is batch, lhs free, rhs free (as XLA orders it).
OpRecord einsum_of(const CapturedOp& call, const Ints& lc, const Ints& rc, const Ints& lb, const Ints& rb) {
  const CapturedTensor* a = tensor_at(call, 0);
  const CapturedTensor* b = tensor_at(call, 1);
  std::string lhs(a->shape.size(), ' '), rhs(b->shape.size(), ' '), out;
  char next = 'a';
  for (std::size_t i = 0; i < lb.size(); ++i) lhs[lb[i]] = rhs[rb[i]] = next, out += next++;
  for (std::size_t i = 0; i < lc.size(); ++i) lhs[lc[i]] = rhs[rc[i]] = next++;
  for (char& c : lhs)
    if (c == ' ') out += c = next++;
  for (char& c : rhs)
    if (c == ' ') out += c = next++;
  if (next > 'z' + 1) return unknown(call, "dot_general over more than 26 dimensions is not mapped");
  OpRecord r = record_of(call, OpKind::kEinsum, {0, 1});
  r.outputs.resize(1);
  r.attributes.set("equation", lhs + "," + rhs + "->" + out);  // record_of keeps the operand order
  return r;
}

/// dot_general(lhs, rhs): lhs_/rhs_contracting and lhs_/rhs_batch dims.
std::vector<OpRecord> dot_general(const CapturedOp& call) {
  const CapturedTensor* a = tensor_at(call, 0);
  const CapturedTensor* b = tensor_at(call, 1);
  if (!a || !b || !output_at(call, 0)) return one(unknown(call, "dot_general needs two tensor operands and an output"));
  const Ints lc = attr_ints(call, "lhs_contracting"), rc = attr_ints(call, "rhs_contracting");
  const Ints lb = attr_ints(call, "lhs_batch"), rb = attr_ints(call, "rhs_batch");
  const auto ra = static_cast<std::int64_t>(a->shape.size()), rr = static_cast<std::int64_t>(b->shape.size());
  std::set<std::int64_t> lhs_used, rhs_used;
  Wide batch = 1, k = 1;
  bool ok = lc.size() == rc.size() && lb.size() == rb.size();
  for (std::size_t i = 0; ok && i < lc.size() + lb.size(); ++i) {
    const bool contracting = i < lc.size();
    const std::int64_t l = contracting ? lc[i] : lb[i - lc.size()], r = contracting ? rc[i] : rb[i - lc.size()];
    ok = l >= 0 && l < ra && r >= 0 && r < rr && a->shape[l] == b->shape[r] && lhs_used.insert(l).second &&
         rhs_used.insert(r).second;
    if (ok) (contracting ? k : batch) = saturating_mul(contracting ? k : batch, a->shape[l]);
  }
  if (!ok) return one(unknown(call, "dot_general's dimension numbers do not fit its operands"));
  Wide m = 1, n = 1;
  for (std::int64_t d = 0; d < ra; ++d) m = saturating_mul(m, lhs_used.count(d) ? 1 : a->shape[d]);
  for (std::int64_t d = 0; d < rr; ++d) n = saturating_mul(n, rhs_used.count(d) ? 1 : b->shape[d]);
  // the cost model's matmul: A[.., M, K] x B[.., K, N], either one transposed, shared batch
  // dims leading (or A's leading dims broadcast against a 2-D B), vectors as in numpy
  const auto nb = static_cast<std::int64_t>(lb.size());
  bool plain = lc.size() == 1 && is_iota(lb, lb.size()) && is_iota(rb, rb.size());
  bool ta = false, tb = false;
  if (plain && rr == nb + 2) {
    tb = rc[0] == nb + 1;
  } else {
    plain = plain && nb == 0 && rr == 1;
  }
  if (plain && nb == 0) {
    ta = ra == 2 && lc[0] == 0;
    plain = ta || lc[0] == ra - 1;
  } else if (plain) {
    ta = lc[0] == nb;
    plain = ra == nb + 2;
  }
  if (!plain) return one(einsum_of(call, lc, rc, lb, rb));
  OpRecord r = record_of(call, OpKind::kMatMul, {0, 1});
  if (ta) r.attributes.set("transpose_a", true);
  if (tb) r.attributes.set("transpose_b", true);
  return one(std::move(r));
}

/// Where each of `letters` sits in `layout` ("NHWC" with letters "NCHW" -> 0 3 1 2).
std::optional<std::vector<std::size_t>> positions(const std::string& layout, const std::string& letters) {
  std::vector<std::size_t> p;
  for (char c : letters) {
    const std::size_t at = layout.find(c);
    if (at == std::string::npos || layout.size() != letters.size()) return std::nullopt;
    p.push_back(at);
  }
  return p;
}

Shape permuted(const Shape& s, const std::vector<std::size_t>& p) {
  Shape r;
  for (std::size_t i : p) r.push_back(s[i]);
  return r;
}

/// conv_general_dilated(lhs, rhs): window_strides, padding (lo, hi per spatial dim),
/// lhs_dilation, rhs_dilation, feature_group_count, batch_group_count, *_layout.
std::vector<OpRecord> conv(const CapturedOp& call) {
  const CapturedTensor* x = tensor_at(call, 0);
  const CapturedTensor* w = tensor_at(call, 1);
  const CapturedTensor* y = output_at(call, 0);
  if (!x || !w || !y || x->shape.size() < 3 || x->shape.size() > 5 || w->shape.size() != x->shape.size() ||
      y->shape.size() != x->shape.size()) {
    return one(unknown(call, "a convolution needs an input, a filter and an output of one rank from 3 to 5"));
  }
  const std::size_t rank = x->shape.size() - 2;
  const std::string spatial = std::string("DHW").substr(3 - rank);
  const auto lp = positions(attr_string(call, "lhs_layout", "NC" + spatial), "NC" + spatial);
  const auto rp = positions(attr_string(call, "rhs_layout", "OI" + spatial), "OI" + spatial);
  const auto op = positions(attr_string(call, "out_layout", "NC" + spatial), "NC" + spatial);
  if (!lp || !rp || !op) return one(unknown(call, "its layouts are not readable"));
  for (std::int64_t d : attr_ints(call, "lhs_dilation")) {
    if (d != 1) return one(unknown(call, "lhs_dilation (a transposed convolution) is not mapped"));
  }
  // every output element is a dot product over the filter's taps and input channels per group
  const Wide out_channels = w->shape[(*rp)[0]];
  const Wide flops = out_channels == 0 ? 0
                                       : saturating_mul(2 * saturating_elements(y->shape),
                                                        saturating_elements(w->shape) / out_channels);
  const Ints pads = attr_ints(call, "padding");
  const bool nonnegative = std::all_of(pads.begin(), pads.end(), [](std::int64_t p) { return p >= 0; });
  if (x->parameter || !w->parameter || pads.size() != 2 * rank || !nonnegative ||
      attr_int(call, "batch_group_count", 1) != 1) {
    return one(custom(call, flops, true));  // a filter computed by the program: the count alone
  }
  OpRecord r = record_of(call, OpKind::kConv, {0, 1});
  r.outputs.resize(1);
  r.parameters[0].shape = permuted(w->shape, *rp);  // the cost model's [out, in / groups, k...]
  Ints padding;
  for (std::size_t side : {0, 1}) {
    for (std::size_t d = 0; d < rank; ++d) padding.push_back(pads[2 * d + side]);  // begins, then ends
  }
  r.attributes.set("padding", padding);
  const Ints stride = attr_ints(call, "window_strides"), dilation = attr_ints(call, "rhs_dilation");
  if (stride.size() == rank) r.attributes.set("stride", stride);
  if (dilation.size() == rank) r.attributes.set("dilation", dilation);
  r.attributes.set("groups", attr_int(call, "feature_group_count", 1));
  std::vector<OpRecord> records;
  if (!is_iota(Ints(lp->begin(), lp->end()), rank + 2)) {
    const TensorDesc in{y->name + ".in_channels_first", permuted(x->shape, *lp), x->dtype};
    OpRecord to{"to_channels_first", OpKind::kTranspose, call.name, {r.inputs[0]}, {in}, {}, {}, {}};
    to.attributes.set("materializes", false);
    records.push_back(std::move(to));
    r.inputs[0] = in;
  }
  const bool out_permuted = !is_iota(Ints(op->begin(), op->end()), rank + 2);
  const TensorDesc result = r.outputs[0];
  if (out_permuted) r.outputs[0] = {y->name + ".channels_first", permuted(y->shape, *op), y->dtype};
  r.name = "conv";
  records.push_back(r);
  if (out_permuted) {
    OpRecord back{"from_channels_first", OpKind::kTranspose, call.name, {r.outputs[0]}, {result}, {}, {}, {}};
    back.attributes.set("materializes", false);
    records.push_back(std::move(back));
  }
  return records;
}

/// reduce_window_{max,min,sum}: window_dimensions, window_strides, padding, base_dilation,
/// window_dilation, one entry per dim. Spatial max/min windows over [N, C, ...] are pools.
Handler window(bool pool) {
  return [=](const CapturedOp& call) -> std::vector<OpRecord> {
    const CapturedTensor* x = tensor_at(call, 0);
    const CapturedTensor* y = output_at(call, 0);
    const Ints dims = attr_ints(call, "window_dimensions"), strides = attr_ints(call, "window_strides");
    const Ints pads = attr_ints(call, "padding"), base = attr_ints(call, "base_dilation");
    if (!x || !y || dims.size() != x->shape.size()) return one(unknown(call, "its window does not fit its input"));
    const std::size_t rank = dims.size();
    const bool spatial = rank >= 3 && rank <= 5 && !x->parameter && dims[0] == 1 && dims[1] == 1 &&
                         strides.size() == rank && strides[0] == 1 && strides[1] == 1 && pads.size() == 2 * rank &&
                         std::all_of(pads.begin(), pads.end(), [](std::int64_t p) { return p >= 0; }) && pads[0] == 0 &&
                         pads[1] == 0 && pads[2] == 0 && pads[3] == 0 &&
                         std::all_of(base.begin(), base.end(), [](std::int64_t d) { return d == 1; });
    if (!pool || !spatial) {
      OpRecord r = record_of(call, OpKind::kWindowReduction, {0});
      r.outputs.resize(1);
      r.attributes.set("window", dims);
      return one(std::move(r));
    }
    OpRecord r = record_of(call, OpKind::kMaxPool, {0});
    r.attributes.set("kernel", Ints(dims.begin() + 2, dims.end()));
    r.attributes.set("stride", Ints(strides.begin() + 2, strides.end()));
    Ints padding;
    for (std::size_t side : {0, 1}) {
      for (std::size_t d = 2; d < rank; ++d) padding.push_back(pads[2 * d + side]);
    }
    r.attributes.set("padding", padding);
    const Ints dilation = attr_ints(call, "window_dilation");
    if (dilation.size() == rank) r.attributes.set("dilation", Ints(dilation.begin() + 2, dilation.end()));
    return one(std::move(r));
  };
}

Handler reduction(std::string function) {
  return [=](const CapturedOp& call) -> std::vector<OpRecord> {
    const CapturedTensor* x = tensor_at(call, 0);
    const CapturedTensor* y = output_at(call, 0);
    if (!x || !y) return one(unknown(call, "a reduction needs an input and an output"));
    OpRecord r = record_of(call, OpKind::kReduction, {0});
    r.outputs.resize(1);
    r.attributes.set("function", function);
    return one(std::move(r));
  };
}

/// A layout change: nothing for a weight (the output is the weight), else `kind`.
Handler layout(OpKind kind) {
  return [=](const CapturedOp& call) -> std::vector<OpRecord> {
    OpRecord r = record(call, kind);
    if (r.inputs.empty() && !r.parameters.empty() && !r.outputs.empty() && r.outputs[0].name == r.parameters[0].id) {
      return {};
    }
    if (kind == OpKind::kReshape && !r.inputs.empty()) r.parameters.clear();
    return one(std::move(r));
  };
}

/// broadcast_in_dim: a view; of a scalar, a fill; of a weight that grows, a view still
/// reading the weight (so that it is counted).
std::vector<OpRecord> broadcast(const CapturedOp& call) {
  const OpRecord r = record(call, OpKind::kReshape);
  if (r.inputs.empty() && r.parameters.empty()) return writes_only(call);
  return layout(OpKind::kReshape)(call);
}

std::vector<OpRecord> integer_pow(const CapturedOp& call) {
  // x ** y by repeated squaring: bit_length(|y|) - 1 squarings, popcount(|y|) - 1 products, 1 / for y < 0
  std::vector<OpRecord> r = function_of(OpKind::kUnary, "integer_pow")(call);
  r[0].attributes.set("exponent", attr_int(call, "y", 2));
  return r;
}

std::vector<OpRecord> cumulative(const CapturedOp& call) {  // cumsum & co along `axis`: n - 1 per row
  const CapturedTensor* x = tensor_at(call, 0);
  const std::int64_t axis = attr_int(call, "axis", 0);
  if (!x || axis < 0 || axis >= static_cast<std::int64_t>(x->shape.size()))
    return one(unknown(call, "axis out of range"));
  OpRecord r = record_of(call, OpKind::kCumulative, {0});
  r.attributes.set("axis", axis);
  return one(std::move(r));
}

std::vector<OpRecord> convert(const CapturedOp& call) {
  const CapturedTensor* x = tensor_at(call, 0);
  const CapturedTensor* y = output_at(call, 0);
  if (x && y && x->dtype == y->dtype) return layout(OpKind::kReshape)(call);
  return function_of(OpKind::kUnary, "cast")(call);
}

std::vector<OpRecord> gather(const CapturedOp& call) {
  const CapturedTensor* data = tensor_at(call, 0);
  const CapturedTensor* indices = tensor_at(call, 1);
  if (!data || !indices) return one(unknown(call, "gather needs a data and an indices tensor"));
  if (data->parameter && data->shape.size() == 2 && !indices->parameter) {
    return one(record_of(call, OpKind::kEmbedding, {1, 0}));  // rows of a table
  }
  if (data->parameter || indices->parameter) return one(record(call, OpKind::kGather));
  return one(record_of(call, OpKind::kEmbedding, {0, 1}));  // reads the gathered rows of an activation
}

std::vector<OpRecord> dynamic_update_slice(const CapturedOp& call) {  // (operand, update, *indices), in place
  const CapturedTensor* update = tensor_at(call, 1);
  const CapturedTensor* operand = tensor_at(call, 0);
  OpRecord r = record(call, OpKind::kScatter);
  if (!operand || operand->parameter || !update || update->parameter || r.inputs.size() < 2)
    return one(unknown(call, "dynamic_update_slice needs an update tensor"));
  std::rotate(r.inputs.begin() + 1, r.inputs.begin() + 2, r.inputs.end());  // the update last, as kScatter reads it
  r.attributes.set("in_place", true);
  return one(std::move(r));
}

/// A cond whose branch the worker could not know: its reason, or the generic one (a worker that does not say).
std::vector<OpRecord> cond_branch(const CapturedOp& call) {
  const std::string why = attr_string(call, "not_inlined", "");
  return one(unknown(
      call, why.empty()
                ? "which branch of a cond runs depends on data"
                : fmt::format("a cond's branch is not known to the worker: {}; neither branch is counted", why)));
}

/// A while the worker could not unroll: its reason, or the generic one (a worker that does not say).
std::vector<OpRecord> while_loop(const CapturedOp& call) {
  const std::string why = attr_string(call, "not_unrolled", "");
  return one(unknown(
      call, why.empty() ? "a while loop runs a data-dependent number of steps (not unrolled)"
                        : fmt::format("a while loop is not unrolled by the worker: {}; its body is not counted", why)));
}

bool is_constant(const std::string& id) { return id.rfind("const:", 0) == 0 || id.rfind("buffer:", 0) == 0; }

}  // namespace

const HandlerTable& jax_handlers() {
  static const HandlerTable table = [] {
    std::map<std::string, Handler> h;
    h["dot_general"] = dot_general;
    h["conv_general_dilated"] = conv;
    h["reduce_window_max"] = window(true);
    h["reduce_window_min"] = window(true);
    h["reduce_window_sum"] = window(false);
    for (const auto& [op, f] : std::map<std::string, std::string>{{"reduce_sum", "sum"},
                                                                  {"reduce_max", "max"},
                                                                  {"reduce_min", "min"},
                                                                  {"reduce_prod", "prod"},
                                                                  {"reduce_and", "min"},
                                                                  {"reduce_or", "max"},
                                                                  {"argmax", "max"},
                                                                  {"argmin", "min"}}) {
      h[op] = reduction(f);
    }
    for (const char* v : {"reshape", "squeeze", "expand_dims", "stop_gradient", "optimization_barrier"}) {
      h[v] = layout(OpKind::kReshape);
    }
    h["broadcast_in_dim"] = broadcast;
    h["convert_element_type"] = convert;
    h["transpose"] = layout(OpKind::kTranspose);
    h["rev"] = layout(OpKind::kTranspose);
    h["slice"] = [](const CapturedOp& call) { return one(record(call, OpKind::kSlice)); };
    h["dynamic_slice"] = h["slice"];
    h["concatenate"] = [](const CapturedOp& call) { return one(record(call, OpKind::kConcat)); };
    h["pad"] = [](const CapturedOp& call) { return one(record_of(call, OpKind::kPad, {0})); };
    h["split"] = [](const CapturedOp& call) {  // parts are slices the consumers read in place
      OpRecord r = record(call, OpKind::kSplit);
      r.attributes.set("materializes", false);
      return one(std::move(r));
    };
    h["gather"] = gather;
    h["dynamic_update_slice"] = dynamic_update_slice;
    h["iota"] = writes_only;
    h["integer_pow"] = integer_pow;
    for (const char* c : {"cumsum", "cumprod", "cummax", "cummin"}) h[c] = cumulative;
    for (const char* c : {"copy", "copy_p"}) h[c] = function_of(OpKind::kUnary, "copy");
    for (const auto& [op, f] : std::map<std::string, std::string>{{"neg", "neg"},
                                                                  {"abs", "abs"},
                                                                  {"sign", "sign"},
                                                                  {"floor", "floor"},
                                                                  {"ceil", "ceil"},
                                                                  {"round", "round"},
                                                                  {"square", "square"},
                                                                  {"not", "not"},
                                                                  {"is_finite", "isinf"},
                                                                  {"exp", "exp"},
                                                                  {"exp2", "exp"},
                                                                  {"expm1", "exp"},
                                                                  {"log", "log"},
                                                                  {"log1p", "log"},
                                                                  {"sqrt", "sqrt"},
                                                                  {"rsqrt", "rsqrt"},
                                                                  {"sin", "sin"},
                                                                  {"cos", "cos"},
                                                                  {"tan", "tan"},
                                                                  {"asin", "asin"},
                                                                  {"acos", "acos"},
                                                                  {"atan", "atan"},
                                                                  {"sinh", "sinh"},
                                                                  {"cosh", "cosh"},
                                                                  {"asinh", "asinh"},
                                                                  {"acosh", "acosh"},
                                                                  {"atanh", "atanh"},
                                                                  {"erf", "erf"},
                                                                  {"erfc", "erf"},
                                                                  {"clamp", "clip"},
                                                                  {"reduce_precision", "round"}}) {
      h[op] = function_of(OpKind::kUnary, f);
    }
    h["tanh"] = function_of(OpKind::kActivation, "tanh");
    h["logistic"] = function_of(OpKind::kActivation, "sigmoid");
    for (const auto& [op, f] : std::map<std::string, std::string>{{"add", "add"},
                                                                  {"add_any", "add"},
                                                                  {"sub", "sub"},
                                                                  {"mul", "mul"},
                                                                  {"div", "div"},
                                                                  {"rem", "mod"},
                                                                  {"max", "max"},
                                                                  {"min", "min"},
                                                                  {"pow", "pow"},
                                                                  {"and", "and"},
                                                                  {"or", "or"},
                                                                  {"xor", "xor"},
                                                                  {"eq", "equal"},
                                                                  {"ne", "equal"},
                                                                  {"lt", "less"},
                                                                  {"le", "less"},
                                                                  {"gt", "greater"},
                                                                  {"ge", "greater"},
                                                                  {"select_n", "where"},
                                                                  {"shift_left", "bitshift"},
                                                                  {"shift_right_logical", "bitshift"},
                                                                  {"shift_right_arithmetic", "bitshift"}}) {
      h[op] = function_of(OpKind::kBinary, f);
    }
    h["while"] = while_loop;
    h["cond"] = cond_branch;
    HandlerTable prefixed;
    for (auto& [op, handler] : h) {
      prefixed["jax::" + op] = [inner = std::move(handler)](const CapturedOp& call) {
        std::vector<OpRecord> records = inner(call);
        for (OpRecord& r : records) {
          for (ParameterDesc& p : r.parameters) p.trainable = p.trainable && !is_constant(p.id);
          const bool elementwise =
              r.kind == OpKind::kUnary || r.kind == OpKind::kBinary || r.kind == OpKind::kActivation;
          if (elementwise && r.inputs.empty() && r.parameters.empty()) {  // arithmetic on literals only
            r.attributes.set("literal_operands", true);
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
