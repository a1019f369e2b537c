// A decoder's mixture-of-experts block (decoder_builder.hpp, mixture_of_experts), op by op as
// transformers' sparse MoE blocks compute it, and what routing makes of it: the experts a step's
// tokens reach (uniform or a measured histogram, routing.cpp) and each expert-parallel device's
// load (models/decoder.hpp).
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "models/decoder_builder.hpp"
#include "models/latent_attention.hpp"
#include "neuralcost/core/checked_math.hpp"
#include "neuralcost/cost/op_kinds.hpp"
#include "neuralcost/models/decoder.hpp"

namespace neuralcost {
namespace {

/// Σ_e 1 − (1 − count_e / histogram_tokens)^tokens: the distinct experts of `counts` that `tokens`
/// tokens reach under a measured routing (an expectation).
double experts_reached_by(const std::vector<std::int64_t>& counts, std::int64_t histogram_tokens, double tokens) {
  double reached = 0;
  for (const std::int64_t n : counts) {
    reached += 1 - std::pow(1 - static_cast<double>(n) / static_cast<double>(histogram_tokens), tokens);
  }
  return reached;
}

}  // namespace

namespace detail {

/// How the experts reached are expected, for the graph's note.
std::string routing_said(const DecoderConfig& c, std::uint64_t tokens) {
  if (!c.routing) return "expected under uniform routing";
  double low = static_cast<double>(c.experts), high = 0;
  for (std::int64_t l = 0; l < c.layers; ++l) {
    if (!c.moe_layer(l)) continue;
    low = std::min(low, expected_experts_reached(c, tokens, l));
    high = std::max(high, expected_experts_reached(c, tokens, l));
  }
  // every layer alike (to the printed digits): one figure, not a range
  const std::string spread = fmt::format("{:.2f}", low) == fmt::format("{:.2f}", high)
                                 ? std::string("the same in every layer,")
                                 : fmt::format("the mean over the layers, {:.2f} to {:.2f},", low, high);
  return fmt::format("{} expected under the routing of {}{}, {} tokens", spread, c.routing->file,
                     c.routing->description.empty() ? "" : " (" + c.routing->description + ")", c.routing->tokens);
}

/// A sparse MoE block on m [B, T, E] (transformers' MixtralSparseMoeBlock, Qwen2MoeSparseMoeBlock):
/// the router (a linear to the experts' logits, softmax in fp32, top-k, the k weights renormalised
/// where the model does), then each token through its k SwiGLU experts (gate, up, down:
/// kExpertLinear), their outputs weighted and summed; qwen2_moe adds a shared expert every token
/// goes through, scaled by the sigmoid of a one-output linear.
TensorDesc mixture_of_experts(Builder& b, const DecoderConfig& c, const std::string& name, const TensorDesc& m,
                              std::int64_t layer) {
  const std::int64_t batch = m.shape[0], t = m.shape[1], e = c.hidden, n = c.experts, k = c.experts_per_token;
  const std::int64_t tokens = batch * t;
  const auto typed = [&](OpKind kind, const std::string& op, const std::string& function, std::vector<TensorDesc> in,
                         DType dtype) {
    const Shape shape = in.front().shape;
    return b.op(kind, name + op, std::move(in), shape, {}, dtype,
                [&](OpRecord& r) { r.attributes.set("function", function); });
  };
  // Under sequence parallelism the router and the weighted sum of the experts' outputs run on
  // each device's 1/tp of the tokens (the residual stream's share, Megatron-Core's token
  // dispatcher): the experts' GEMMs and a shared expert take every token, gathered
  const auto router = [&] {
    TensorDesc chosen;
    if (c.grouped_sigmoid_router) {
      chosen = detail::grouped_sigmoid_router(b, c, name + ".gate", m);
    } else if (c.softmax_group_router) {
      chosen = detail::softmax_group_router(b, c, name + ".gate", m);
    } else {
      const TensorDesc logits = typed(OpKind::kUnary, "#logits_to_fp32", "cast",
                                      {b.linear(name + ".gate", m, n, false, "", true)}, DType::kFp32);
      const TensorDesc probs = b.op(OpKind::kSoftmax, name + "#softmax", {logits}, {batch, t, n}, {}, DType::kFp32,
                                    [](OpRecord& r) { r.attributes.set("axis", std::int64_t{-1}); });
      // top-k of E per token: k passes of E − 1 comparisons (torch.topk's work is not specified)
      const TensorDesc top =
          b.op(OpKind::kCustom, name + "#topk", {probs}, {batch, t, k}, {}, DType::kFp32, [&](OpRecord& r) {
            r.attributes.set("function", std::string("topk"));
            r.attributes.set("flops", static_cast<std::int64_t>(tokens * k * (n - 1)));
            r.attributes.set("approximation", fmt::format("top-{} of {} experts counted as {} passes of {} comparisons",
                                                          k, n, k, n - 1));
          });
      chosen = top;
      if (c.normalize_top_k) {  // mixtral; qwen2_moe with norm_topk_prob
        const TensorDesc sum = b.op(OpKind::kReduction, name + "#weights_sum", {top}, {batch, t, 1}, {}, DType::kFp32,
                                    [](OpRecord& r) { r.attributes.set("function", std::string("sum")); });
        chosen = b.op(OpKind::kBinary, name + "#weights_normalised", {top, sum}, {batch, t, k}, {}, DType::kFp32,
                      [](OpRecord& r) { r.attributes.set("function", std::string("div")); });
      }
    }
    return typed(OpKind::kUnary, "#weights_to_dtype", "cast", {chosen}, b.dtype());
  };
  const TensorDesc weights = b.on_residual_stream(router);
  // expert parallelism: the device's n / ep experts take the rows the tokens of ep devices route
  // to them: as many as its own tokens make, on average (uniform routing)
  // Under a measured routing the devices' loads differ: the graph is the busiest device's (the
  // others wait for it), its experts' counts and the rows they take (busiest_expert_device).
  const std::int64_t ep = std::max<std::int64_t>(1, c.expert_parallel), local = n / ep, routed_tokens = tokens * ep;
  const ExpertDeviceLoad busiest = busiest_expert_device(c, layer, static_cast<int>(ep));
  std::vector<std::int64_t> held;  // the routing counts of the experts this device holds
  if (c.routing) {
    const std::vector<std::int64_t>& counts = c.routing->counts[static_cast<std::size_t>(layer)];
    held.assign(counts.begin() + busiest.device * local, counts.begin() + (busiest.device + 1) * local);
  }
  const double reached = c.routing ? experts_reached_by(held, c.routing->tokens, static_cast<double>(routed_tokens))
                                   : expected_experts_reached(c, static_cast<std::uint64_t>(routed_tokens), layer) /
                                         static_cast<double>(ep);
  const auto expert_linear = [&](const std::string& w, const TensorDesc& x, Shape out, std::int64_t rows_out) {
    const std::int64_t in = x.shape.back();
    return b.op(OpKind::kExpertLinear, name + ".experts." + w, {b.w8a8() ? b.quantized(x) : x}, std::move(out),
                {{name + ".experts." + w + ".weight", {local, rows_out, in}, b.dtype(), true, b.quantization()}},
                std::nullopt, [&](OpRecord& r) {
                  if (b.w8a8()) b.w8a8_product(r);
                  // the gate and up projections read the tokens' rows through the routing index:
                  // a training step keeps that gathered copy (the memory ledger)
                  if (x.name == m.name) r.attributes.set("gathers_rows", true);
                  r.attributes.set("top_k", k);
                  r.attributes.set("tokens", routed_tokens);
                  if (ep > 1) r.attributes.set("routed_experts", n);
                  if (c.routing && ep > 1) {
                    r.attributes.set("routing_counts", held);
                    r.attributes.set("routing_tokens", c.routing->tokens);
                    r.attributes.set(
                        "approximation",
                        fmt::format("the busiest of {} expert-parallel devices under the routing of {} (its experts "
                                    "{} to {} of {}): it takes N·Σ n_e/T rows, {:.2f}× an average device's, and reads "
                                    "the weights of Σ 1 − (1 − n_e/T)^N = {:.2f} of them, for the N = {} tokens of "
                                    "the {} devices (n_e of its T = {} tokens to expert e)",
                                    ep, c.routing->file, busiest.device * local, (busiest.device + 1) * local - 1, n,
                                    busiest.load, reached, routed_tokens, ep, c.routing->tokens));
                    return;
                  }
                  if (c.routing) {
                    r.attributes.set("routing_counts", c.routing->counts[static_cast<std::size_t>(layer)]);
                    r.attributes.set("routing_tokens", c.routing->tokens);
                    r.attributes.set("approximation",
                                     fmt::format("the weights of Σ 1 − (1 − n_e/T)^N = {:.2f} of {} experts read for "
                                                 "{} tokens: the expectation under the routing of {} (n_e of its T = "
                                                 "{} tokens to expert e)",
                                                 reached, n, tokens, c.routing->file, c.routing->tokens));
                    return;
                  }
                  r.attributes.set(
                      "approximation",
                      ep > 1
                          ? fmt::format("the weights of {:.2f} of this device's {} experts (of {}) read for the {} "
                                        "tokens of {} expert-parallel devices: the expectation under uniform routing",
                                        reached, local, n, routed_tokens, ep)
                          : fmt::format("the weights of E·(1 − (1 − k/E)^N) = {:.2f} of {} experts read for {} "
                                        "tokens: the expectation under uniform routing",
                                        reached, n, tokens));
                });
  };
  // mixtral's w1 (gate), w3 (up), w2 (down); qwen2_moe's gate_proj, up_proj, down_proj
  const bool mixtral = c.architecture == "mixtral";
  const std::int64_t x = c.expert_size();
  // the SiLU and gate · up between the GEMMs run on the same rows: the busiest device's λ
  // times an average device's under a measured routing (the cost rule's rows_load)
  const Tweak busiest_rows = [&](OpRecord& r) {
    if (!c.routing || ep <= 1 || busiest.load == 1) return;
    r.attributes.set("rows_load", busiest.load);
    r.attributes.set(
        "approximation",
        fmt::format("the busiest of {} expert-parallel devices under the routing of {} (its experts {} "
                    "to {} of {}): {:.2f}× an average device's rows, an expectation",
                    ep, c.routing->file, busiest.device * local, (busiest.device + 1) * local - 1, n, busiest.load));
  };
  const TensorDesc down = b.on_routed_rows([&] {
    const TensorDesc gate =
        b.elementwise(OpKind::kActivation, name + ".experts.act_fn", "silu",
                      {expert_linear(mixtral ? "w1" : "gate_proj", m, {batch, t, k, x}, x)}, false, busiest_rows);
    const TensorDesc up = expert_linear(mixtral ? "w3" : "up_proj", m, {batch, t, k, x}, x);
    const TensorDesc hidden =
        b.elementwise(OpKind::kBinary, name + ".experts#gate_up", "mul", {gate, up}, false, busiest_rows);
    return expert_linear(mixtral ? "w2" : "down_proj", hidden, {batch, t, k, e}, e);
  });
  const TensorDesc routed = b.on_residual_stream([&] {
    const TensorDesc weighted = b.elementwise(OpKind::kBinary, name + "#weighted", "mul",
                                              {down, b.view(name + "#weights_unsqueeze", weights, {batch, t, k, 1})});
    return b.op(OpKind::kReduction, name + "#sum_experts", {weighted}, {batch, t, e}, {}, std::nullopt,
                [](OpRecord& r) { r.attributes.set("function", std::string("sum")); });
  });
  if (c.shared_expert_intermediate == 0) return routed;
  // qwen2_moe's shared expert, every token through it, scaled by sigmoid(shared_expert_gate(m))
  const std::int64_t s = c.shared_expert_intermediate;
  const std::string se = name + (c.shared_expert_gate ? ".shared_expert" : ".shared_experts");
  const TensorDesc s_gate =
      b.elementwise(OpKind::kActivation, se + ".act_fn", "silu", {b.linear(se + ".gate_proj", m, s, false)});
  const TensorDesc s_hidden =
      b.elementwise(OpKind::kBinary, se + "#gate_up", "mul", {s_gate, b.linear(se + ".up_proj", m, s, false)});
  const TensorDesc s_down = b.linear(se + ".down_proj", s_hidden, e, false);
  return b.on_residual_stream([&] {
    if (!c.shared_expert_gate) {  // deepseek_v3's shared experts: added as they are
      return b.elementwise(OpKind::kBinary, name + "#routed_and_shared", "add", {routed, s_down});
    }
    const TensorDesc s_scale = b.elementwise(OpKind::kActivation, name + ".shared_expert_gate#sigmoid", "sigmoid",
                                             {b.linear(name + ".shared_expert_gate", m, 1, false)});
    const TensorDesc shared = b.elementwise(OpKind::kBinary, se + "#scaled", "mul", {s_down, s_scale});
    return b.elementwise(OpKind::kBinary, name + "#routed_and_shared", "add", {routed, shared});
  });
}

}  // namespace detail

double expected_experts_reached(const DecoderConfig& c, std::uint64_t tokens, std::int64_t layer) {
  if (c.experts == 0) return 0;
  const double e = static_cast<double>(c.experts);
  if (!c.routing)
    return e * (1 - std::pow(1 - static_cast<double>(c.experts_per_token) / e, static_cast<double>(tokens)));
  const auto of_layer = [&](const std::vector<std::int64_t>& counts) {
    return experts_reached_by(counts, c.routing->tokens, static_cast<double>(tokens));
  };
  if (layer >= 0) {
    return layer < c.layers ? of_layer(c.routing->counts[static_cast<std::size_t>(layer)]) : 0;
  }
  double sum = 0;
  std::int64_t layers = 0;
  for (const std::vector<std::int64_t>& counts : c.routing->counts) {
    if (counts.empty()) continue;
    sum += of_layer(counts);
    ++layers;
  }
  return layers > 0 ? sum / static_cast<double>(layers) : 0;
}

std::vector<double> expert_device_loads(const DecoderConfig& c, std::int64_t layer, int ep) {
  std::vector<double> loads(static_cast<std::size_t>(std::max(1, ep)), 1.0);
  if (!c.routing || ep <= 1 || layer < 0 || layer >= c.layers) return loads;
  const std::vector<std::int64_t>& counts = c.routing->counts[static_cast<std::size_t>(layer)];
  if (counts.empty() || static_cast<std::int64_t>(counts.size()) % ep != 0) return loads;
  const std::size_t local = counts.size() / static_cast<std::size_t>(ep);
  std::int64_t all = 0;
  std::vector<std::int64_t> rows(loads.size(), 0);
  for (std::size_t d = 0; d < rows.size(); ++d) {
    for (std::size_t e = 0; e < local; ++e) rows[d] += counts[d * local + e];
    all += rows[d];
  }
  if (all == 0) return loads;
  for (std::size_t d = 0; d < rows.size(); ++d) {
    loads[d] = static_cast<double>(ep) * static_cast<double>(rows[d]) / static_cast<double>(all);
  }
  return loads;
}

ExpertDeviceLoad busiest_expert_device(const DecoderConfig& c, std::int64_t layer, int ep) {
  ExpertDeviceLoad out;
  const std::vector<double> loads = expert_device_loads(c, layer, ep);
  for (std::size_t d = 0; d < loads.size(); ++d) {
    if (loads[d] > loads[static_cast<std::size_t>(out.device)]) out.device = static_cast<std::int64_t>(d);
  }
  out.load = loads[static_cast<std::size_t>(out.device)];
  return out;
}

}  // namespace neuralcost
