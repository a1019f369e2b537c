// A loop whose body is a sub-graph (an ONNX Loop or Scan): the body's ops are costed by their
// own rules, and the loop counts `iterations` times their FLOPs and bytes (each body op reads its
// inputs and writes its outputs on every iteration, as unfused ops do). The loop's own inputs
// and outputs are what the body reads and writes; its parameters are the body's weights.
#include <fmt/format.h>

#include "cost/op_families.hpp"
#include "neuralcost/core/checked_math.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/core/graph.hpp"

namespace neuralcost::cost {

void cost_loop(const OpRecord& op, OpCost& cost) {
  if (!op.body) throw Error(ErrorCode::kInvalidArgument, "a loop needs its body");
  const std::int64_t iterations = op.attributes.get_int("iterations");
  if (iterations < 0)
    throw Error(ErrorCode::kInvalidArgument, fmt::format("attribute 'iterations' is negative ({})", iterations));
  // a body that cannot be counted leaves the loop unmodeled (with the reason), not the model
  OpCost once;
  for (const OpRecord& body_op : op.body->ops()) {
    const std::string which = fmt::format("body op '{}' ({})", body_op.name, body_op.source_type);
    OpCost c;
    try {
      c = cost_of(body_op);
    } catch (const Error& e) {
      return unmodeled(cost, fmt::format("{}: {}", which, e.what()));
    }
    if (!c.modeled) return unmodeled(cost, fmt::format("{}: {}", which, c.unmodeled_reason));
    try {
      add_contraction(once, c.contraction_flops);
      add_flops(once, c.flops - c.contraction_flops);
      add_transcendentals(once, c.transcendentals);
      once.bytes_read = checked_add(once.bytes_read, c.bytes_read, "bytes read");
      once.bytes_written = checked_add(once.bytes_written, c.bytes_written, "bytes written");
    } catch (const Error&) {
      return unmodeled(cost, "the body's counts do not fit 64 bits");
    }
  }
  const auto n = static_cast<std::uint64_t>(iterations);
  try {
    OpCost all;
    add_contraction(all, product({n, once.contraction_flops}));
    add_flops(all, product({n, once.flops - once.contraction_flops}));
    add_transcendentals(all, product({n, once.transcendentals}));
    all.bytes_read = product({n, once.bytes_read});
    all.bytes_written = product({n, once.bytes_written});
    all.parameter_bytes = cost.parameter_bytes;
    cost = all;
  } catch (const Error&) {
    unmodeled(cost, fmt::format("{} iterations of the body overflow 64-bit counts", iterations));
  }
}

}  // namespace neuralcost::cost
