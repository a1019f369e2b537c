// Hand-written captured values for the mapping tests (aten, jax, tf): the values a framework's
// observer or worker would report.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backends/capture/captured_op.hpp"

namespace neuralcost::capture::testing_values {

inline CapturedValue tensor(const std::string& name, Shape shape, bool parameter = false) {
  CapturedValue v;
  v.kind = CapturedValue::Kind::kTensor;
  v.tensors.push_back({name, std::move(shape), DType::kFp32, parameter, true});
  return v;
}
/// An activation of int64 (indices, token ids).
inline CapturedValue int64_tensor(const std::string& name, Shape shape) {
  CapturedValue v = tensor(name, std::move(shape));
  v.tensors[0].dtype = DType::kInt64;
  return v;
}
/// A registered buffer (position ids, rotary frequencies): state the op reads, not trained.
inline CapturedValue buffer(const std::string& name, Shape shape, DType dtype = DType::kFp32) {
  CapturedValue v = tensor(name, std::move(shape), true);
  v.tensors[0].dtype = dtype;
  v.tensors[0].buffer = true;
  return v;
}
inline CapturedValue integer(std::int64_t i) {
  CapturedValue v;
  v.kind = CapturedValue::Kind::kInt;
  v.i = i;
  return v;
}
inline CapturedValue number(double d) {
  CapturedValue v;
  v.kind = CapturedValue::Kind::kDouble;
  v.d = d;
  return v;
}
inline CapturedValue boolean(bool b) {
  CapturedValue v;
  v.kind = CapturedValue::Kind::kBool;
  v.b = b;
  return v;
}
inline CapturedValue ints(std::vector<std::int64_t> values) {
  CapturedValue v;
  v.kind = CapturedValue::Kind::kInts;
  v.ints = std::move(values);
  return v;
}
inline CapturedValue text(std::string s) {
  CapturedValue v;
  v.kind = CapturedValue::Kind::kString;
  v.s = std::move(s);
  return v;
}
inline CapturedValue none() {
  CapturedValue v;
  v.kind = CapturedValue::Kind::kNone;
  return v;
}

}  // namespace neuralcost::capture::testing_values
