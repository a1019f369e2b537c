// The small integer tensors the ONNX importer folds (onnx_shape_folding.cpp): shape arithmetic
// that exporters compute at run time (Shape -> Gather -> Div -> Concat), evaluated here so that
// the next ops see constant inputs. Private to the importer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "importers/onnx/onnx_graph.hpp"

namespace neuralcost::onnx_import {

/// A small integer tensor (bool as 0/1) with its ONNX element type.
struct IntTensor {
  std::vector<std::int64_t> dims;
  std::vector<std::int64_t> values;
  int elem_type = onnx::TensorProto::INT64;
};

/// The tensor's integer values, when it is a small integer tensor (at most 1024 elements).
std::optional<IntTensor> from_proto(const onnx::TensorProto& t);
/// The tensor as an ONNX initializer named `name`.
onnx::TensorProto to_proto(const IntTensor& t, const std::string& name);
/// The dims of a fully static tensor type.
std::optional<std::vector<std::int64_t>> static_shape(const onnx::TypeProto* type);
/// The value of a node's first output, when every input it reads is known.
std::optional<IntTensor> evaluate(const onnx::NodeProto& n, std::int64_t opset, const std::vector<const IntTensor*>& in,
                                  const std::vector<const onnx::TypeProto*>& types, const onnx::TypeProto* out_type);

}  // namespace neuralcost::onnx_import
