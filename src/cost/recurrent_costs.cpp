// RNN, GRU and LSTM over a whole sequence (all layers and directions in one op). Per time step,
// layer and direction with G gates, input width I and hidden size H:
//   contraction  2·G·H·(I + H)           (W_ih·x and W_hh·h)
//   biases       2·G·H                    (b_ih and b_hh, when present)
//   gate math    RNN 2H, GRU 17H, LSTM 22H (docs/counting.md itemises them)
// Parameters follow PyTorch's order: per layer and direction w_ih, w_hh[, b_ih, b_hh].
#include <fmt/format.h>

#include "cost/op_families.hpp"
#include "neuralcost/core/checked_math.hpp"
#include "neuralcost/core/error.hpp"

namespace neuralcost::cost {
namespace {

struct Cell {
  std::uint64_t gates;
  std::uint64_t gate_flops;            // per hidden unit per step, biases excluded
  std::uint64_t gate_transcendentals;  // per hidden unit per step
};

constexpr Cell kGruCell{3, 17, 3};
constexpr Cell kLstmCell{4, 22, 5};

void cost_recurrent(const OpRecord& op, OpCost& cost, const Cell cell) {
  if (op.attributes.get_int("proj_size", 0) != 0) {
    return unmodeled(cost, "LSTM with projections (proj_size) is not modeled");
  }
  const Shape& x = input(op, 0, "x").shape;
  require_rank(x, 3, 3, "input");
  // sequence-first [T, B, I] unless batch_first, as in PyTorch and ONNX
  const bool batch_first = op.attributes.get_bool("batch_first", false);
  const std::int64_t batch = batch_first ? x[0] : x[1], steps = batch_first ? x[1] : x[0];
  const std::int64_t width = x[2];
  const std::int64_t hidden = op.attributes.get_int("hidden_size");
  const std::int64_t layers = op.attributes.get_int("num_layers", 1);
  const std::uint64_t dirs = op.attributes.get_bool("bidirectional", false) ? 2 : 1;
  const bool bias = op.attributes.get_bool("bias", true);
  if (hidden < 1 || layers < 1) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("hidden_size ({}) and num_layers ({}) must be >= 1", hidden, layers));
  }
  bounded(layers, 1, "attribute 'num_layers'");
  bounded(hidden, 1, "attribute 'hidden_size'");
  const std::uint64_t h = dim(hidden), gh = product({cell.gates, h});
  // The parameter list must hold exactly the weights these attributes imply.
  // layer 0 reads the input width, the others dirs x hidden: two kinds of layer, not a loop
  // over a user-given count
  const auto layer_params = [&](std::uint64_t in) {
    return product({dirs, gh, checked_add(checked_add(in, h, "parameter count"), bias ? 2 : 0, "parameter count")});
  };
  const std::uint64_t later = static_cast<std::uint64_t>(layers - 1);
  const std::uint64_t expected =
      checked_add(layer_params(dim(width)), product({later, layer_params(product({dirs, h}))}), "parameter count");
  std::uint64_t held = 0;
  for (const ParameterDesc& p : op.parameters) held = checked_add(held, p.elements(), "parameter count");
  if (held != expected) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("parameters hold {} elements, expected {} for input width {}, "
                            "hidden_size {}, {} layer(s), {} direction(s){}",
                            held, expected, width, hidden, layers, dirs, bias ? ", biases" : ""));
  }
  const Shape& y = output(op, 0, "output sequence").shape;
  const auto d = static_cast<std::int64_t>(dirs);
  // PyTorch: [T, B, dirs*H] (or batch first); ONNX: [T, dirs, B, H] (layout 0) or [B, T, dirs, H]
  const bool onnx = op.attributes.get_string("output_layout", "") == "onnx";
  const Shape expected_y = onnx ? (batch_first ? Shape{batch, steps, d, hidden} : Shape{steps, d, batch, hidden})
                                : (batch_first ? Shape{batch, steps, d * hidden} : Shape{steps, batch, d * hidden});
  if (y != expected_y) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("output {} must be {}", shape_string(y), shape_string(expected_y)));
  }
  const std::uint64_t cells = product({dim(batch), dim(steps), dirs});  // per layer
  const std::uint64_t all = static_cast<std::uint64_t>(layers);
  add_contraction(cost, product({cells, 2, gh, checked_add(dim(width), h, "FLOP count")}));
  add_contraction(cost, product({later, cells, 2, gh, checked_add(product({dirs, h}), h, "FLOP count")}));
  if (bias) add_flops(cost, product({all, cells, 2, gh}));
  add_flops(cost, product({all, cells, cell.gate_flops, h}));
  add_transcendentals(cost, product({all, cells, cell.gate_transcendentals, h}));
}

}  // namespace

void cost_rnn(const OpRecord& op, OpCost& cost) {
  const std::string f = op.attributes.get_string("nonlinearity", "tanh");
  if (f != "tanh" && f != "relu") {
    throw Error(ErrorCode::kInvalidArgument, "attribute 'nonlinearity' must be tanh or relu, got '" + f + "'");
  }
  cost_recurrent(op, cost, {1, 2, f == "tanh" ? 1U : 0U});
}

void cost_gru(const OpRecord& op, OpCost& cost) { cost_recurrent(op, cost, kGruCell); }
void cost_lstm(const OpRecord& op, OpCost& cost) { cost_recurrent(op, cost, kLstmCell); }

}  // namespace neuralcost::cost
