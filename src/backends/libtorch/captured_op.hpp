// What the LibTorch op observer records of one top-level ATen call, in plain C++ (no torch
// headers), and the mapping of those calls to op records. Keeping the mapping free of torch
// makes it cheap to compile and to test with hand-written calls.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "neuralcost/core/graph.hpp"

namespace neuralcost::libtorch {

struct CapturedTensor {
  std::string name;        ///< edge name ("%12", "input0") or parameter id ("fc1.weight")
  Shape shape;
  DType dtype = DType::kFp32;
  bool parameter = false;  ///< a weight or constant (not produced by an op, not a model input)
  bool contiguous = true;
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
  std::string name;  ///< "aten::linear"
  std::vector<CapturedValue> inputs;
  std::vector<CapturedValue> outputs;
};

/// Turns the top-level ATen calls of one forward pass into an op graph. Each record carries
/// attribute "event" = the index of the call it came from (one call may become several
/// records, e.g. a fused transformer layer). Calls the mapping does not know become
/// kUnknown records: listed as unmodeled, never zero.
OpGraph graph_from_captured(const std::vector<CapturedOp>& calls, const std::string& graph_name);

}  // namespace neuralcost::libtorch
