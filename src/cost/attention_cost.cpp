// Scaled dot-product attention as one fused op: Q·Kᵀ, scale, optional mask, softmax, ·V.
// The score matrix is never counted as memory traffic (a fused kernel keeps it on chip);
// with causal masking only the kept query-key pairs are counted, and with a sliding window
// (attribute window) only each query's most recent keys (docs/counting.md).
#include <algorithm>

#include <fmt/format.h>

#include "cost/op_families.hpp"
#include "neuralcost/core/checked_math.hpp"
#include "neuralcost/core/error.hpp"

namespace neuralcost::cost {
namespace {

/// Sum over rows i in [0, rows) of clamp(i + 1 + offset, 0, cap): the keys each query keeps.
/// Also returns how many rows keep at least one key.
std::pair<std::uint64_t, std::uint64_t> kept_pairs(std::int64_t rows, std::int64_t offset, std::int64_t cap) {
  Wide sum = 0, nonempty = 0;
  // values run from offset+1 to offset+rows
  const Wide lo = static_cast<Wide>(offset) + 1, hi = static_cast<Wide>(offset) + rows;
  const Wide a = std::max<Wide>(lo, 1), b = std::min<Wide>(hi, cap);
  if (a <= b) sum += (a + b) * (b - a + 1) / 2;
  const Wide above_from = std::max<Wide>(lo, static_cast<Wide>(cap) + 1);
  if (above_from <= hi) sum += (hi - above_from + 1) * cap;
  const Wide first_nonempty = std::max<Wide>(lo, 1);
  if (first_nonempty <= hi && cap > 0) nonempty = hi - first_nonempty + 1;
  if (sum > static_cast<Wide>(UINT64_MAX)) {
    throw Error(ErrorCode::kOutOfRange, "attention pair count overflows 64 bits");
  }
  return {static_cast<std::uint64_t>(sum), static_cast<std::uint64_t>(nonempty)};
}

}  // namespace

void cost_attention(const OpRecord& op, OpCost& cost) {
  const Shape& q = input(op, 0, "query [B,H,Lq,D]").shape;
  const Shape& k = input(op, 1, "key [B,Hkv,Lk,D]").shape;
  const Shape& v = input(op, 2, "value [B,Hkv,Lk,Dv]").shape;
  require_rank(q, 4, 4, "query");
  require_rank(k, 4, 4, "key");
  require_rank(v, 4, 4, "value");
  const std::int64_t b = q[0], h = q[1], lq = q[2], d = q[3], hkv = k[1], lk = k[2], dv = v[3];
  if (k[0] != b || v[0] != b || k[3] != d || v[1] != hkv || v[2] != lk || hkv == 0 || h % hkv != 0) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("query {}, key {} and value {} are not compatible",
                                                         shape_string(q), shape_string(k), shape_string(v)));
  }
  const Shape& y = output(op, 0, "output [B,H,Lq,Dv]").shape;
  if (y != Shape{b, h, lq, dv}) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("output {} must be {}x{}x{}x{}", shape_string(y), b, h, lq, dv));
  }
  std::uint64_t pairs = product({dim(lq), dim(lk)});
  std::uint64_t rows = lk > 0 ? dim(lq) : 0;
  if (op.attributes.get_bool("causal", false)) {
    const std::string align = op.attributes.get_string("causal_alignment", "top_left");
    if (align != "top_left" && align != "bottom_right") {
      throw Error(ErrorCode::kInvalidArgument,
                  "attribute 'causal_alignment' must be top_left or bottom_right, got '" + align + "'");
    }
    // a sliding window of W: each query keeps its W most recent keys (its own included)
    const std::int64_t window = op.attributes.get_int("window", 0);
    if (window < 0) throw Error(ErrorCode::kInvalidArgument, fmt::format("attribute 'window' {} is negative", window));
    std::tie(pairs, rows) =
        kept_pairs(lq, align == "top_left" ? 0 : lk - lq, window > 0 ? std::min<std::int64_t>(lk, window) : lk);
  } else if (op.attributes.has("window")) {
    throw Error(ErrorCode::kInvalidArgument, "attribute 'window' needs causal attention");
  }
  const std::uint64_t heads = product({dim(b), dim(h)});
  add_contraction(cost, product({2, heads, pairs, dim(d)}));           // Q·Kᵀ
  add_contraction(cost, product({2, heads, pairs, dim(dv)}));          // P·V
  add_flops(cost, product({heads, pairs}));                            // scale
  if (op.inputs.size() > 3) add_flops(cost, product({heads, pairs}));  // additive mask
  const double dropout = op.attributes.get_double("dropout", 0.0);
  if (!(dropout >= 0 && dropout < 1)) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("attribute 'dropout' must be in [0, 1), got {}", dropout));
  }
  if (dropout > 0) add_flops(cost, product({heads, pairs}));  // keep mask and 1/(1-p), one multiply per score
  // gemma2's soft-capping of the scores, cap · tanh(s / cap): a divide, a tanh and a multiply each
  const double softcap = op.attributes.get_double("softcap", 0.0);
  if (softcap < 0) throw Error(ErrorCode::kInvalidArgument, fmt::format("attribute 'softcap' {} is negative", softcap));
  if (softcap > 0) {
    add_flops(cost, product({heads, 3, pairs}));
    add_transcendentals(cost, product({heads, pairs}));
  }
  // softmax over each row's kept keys: 5n - 2 per row (max, subtract, exp, sum, divide)
  add_flops(cost, product({heads, 5, pairs}) - product({heads, 2, rows}));
  add_transcendentals(cost, product({heads, pairs}));
  // the value is the key's first Dv dims (latent attention absorbed, as FlashMLA reads its cache):
  // the kernel loads each key once, so the value's bytes are not read again
  if (op.attributes.get_bool("value_in_key", false)) {
    const TensorDesc& key = op.inputs[1];
    const TensorDesc& value = op.inputs[2];
    if (dv > d || key.dtype != value.dtype) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("attribute 'value_in_key': value {} must be the first dims of key {}, in its type",
                              shape_string(v), shape_string(k)));
    }
    if (key.name != value.name) cost.bytes_read -= value.bytes();
  }
}

}  // namespace neuralcost::cost
