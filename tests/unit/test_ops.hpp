// Small constructors for op records in tests: tensors, parameters and ops in one line each.
#pragma once

#include <string>
#include <vector>

#include "neuralcost/core/op.hpp"

namespace neuralcost::testing {

inline TensorDesc t(std::string name, Shape shape, DType dtype = DType::kFp32) {
  return {std::move(name), std::move(shape), dtype};
}
inline ParameterDesc p(std::string id, Shape shape, DType dtype = DType::kFp32, bool trainable = true) {
  return {std::move(id), std::move(shape), dtype, trainable};
}
inline OpRecord op(std::string name, OpKind kind, std::vector<TensorDesc> in, std::vector<TensorDesc> out,
                   std::vector<ParameterDesc> params = {}) {
  OpRecord r;
  r.name = std::move(name);
  r.kind = kind;
  r.inputs = std::move(in);
  r.outputs = std::move(out);
  r.parameters = std::move(params);
  return r;
}
inline OpRecord with(OpRecord r, const std::string& key, AttributeValue value) {
  r.attributes.set(key, std::move(value));
  return r;
}

}  // namespace neuralcost::testing
