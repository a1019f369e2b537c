// What a framework's op observer records of one executed op, in plain C++ (no framework
// headers), and the mapping of those records to op records. The LibTorch observer and the
// Python workers (JAX, TensorFlow, PyTorch 2; docs/worker-protocol.md) both produce them; the
// mapping tables are per framework, keyed by the op's name prefix ("aten::", "jax::", "tf::").
// Keeping all of this free of frameworks makes it cheap to compile and to test with hand-written
// records, and keeps counting in the C++ core.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "neuralcost/core/graph.hpp"

namespace neuralcost::capture {

struct CapturedTensor {
  std::string name;  ///< edge name ("%12", "input0") or parameter id ("fc1.weight")
  Shape shape;
  DType dtype = DType::kFp32;
  bool parameter = false;  ///< a weight or constant (not produced by an op, not a model input)
  bool contiguous = true;
  bool buffer = false;  ///< a parameter that is state, not trained (a registered buffer, a constant)
  /// complex values, described as (real, imaginary) pairs: the shape ends in a dim of 2 and the
  /// dtype is the parts' (complex64: fp32)
  bool complex = false;
};

struct CapturedValue {
  enum class Kind { kTensor, kTensorList, kInt, kDouble, kBool, kInts, kString, kNone, kOther };
  Kind kind = Kind::kOther;
  std::vector<CapturedTensor> tensors;  ///< one for kTensor, any number for kTensorList
  std::int64_t i = 0;
  double d = 0;
  bool b = false;
  std::vector<std::int64_t> ints;
  std::string s;
};

struct CapturedOp {
  std::string name;  ///< "aten::linear", "jax::dot_general", "tf::MatMul"
  std::vector<CapturedValue> inputs;
  std::vector<CapturedValue> outputs;
  std::map<std::string, CapturedValue> attributes;  ///< named parameters (JAX params, TF attrs)
  /// The profiler event (compiled kernel) that ran the op, when the worker mapped its ops to the
  /// kernels of a compiled program (docs/worker-protocol.md, "Kernel traces"); -1: no kernel ran
  /// it (folded into a constant, a layout change). Empty: the op is its own event (op by op).
  std::optional<std::int64_t> event;
  /// the module path the op ran in, as the user's model names it ("stage0.conv"); "" unknown
  std::string module;
};

/// Turns the ops of one forward pass into an op graph. Each record carries attribute "event" =
/// the index of the op it came from (one op may become several records, e.g. a fused
/// transformer layer), or the op's own `event` when the worker gave one (-1: none); and, when the
/// op's module is known, attribute "module": the module path, followed by the record's own name
/// when the op became several ("encoder0.self_attn.in_proj"). Ops no table knows become kUnknown records: listed as
/// unmodeled, never zero.
OpGraph graph_from_captured(const std::vector<CapturedOp>& calls, const std::string& graph_name);

}  // namespace neuralcost::capture
