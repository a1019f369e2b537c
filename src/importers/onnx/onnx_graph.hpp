// Internal to the ONNX importer: the model after loading and shape inference, as plain C++
// (value shapes and initializers by name), and the node-to-record mapping.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "neuralcost/core/graph.hpp"

namespace neuralcost::onnx_import {

/// What is known about one value (tensor) of the graph.
struct ValueInfo {
  std::optional<Shape> shape;  ///< empty when rank or a dimension is unknown
  std::string unknown_dim;     ///< the symbolic dimension that left the shape unknown
  DType dtype = DType::kFp32;
};

struct ModelContext {
  std::string file;                          ///< for messages
  std::int64_t opset = 0;                    ///< default-domain opset
  std::map<std::string, ValueInfo> values;   ///< every value with a known type
  std::map<std::string, const onnx::TensorProto*> initializers;
};

/// Maps one node to its records (usually one). Records it cannot cost are kUnknown with an
/// attribute "reason".
std::vector<OpRecord> map_node(const onnx::NodeProto& node, std::size_t index, const ModelContext& context);

std::optional<DType> dtype_of(int onnx_elem_type);

}  // namespace neuralcost::onnx_import
