// Internal to the ONNX importer: the model after loading and shape inference, as plain C++
// (value shapes and initializers by name), and the node-to-record mapping.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
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

/// A value known before the model runs: an initializer, or computed only from initializers
/// and Constant nodes (PyTorch's exporter feeds weights through Identity, Unsqueeze, Slice...).
/// Runtimes fold these at load time, so ops read them as weights.
struct ConstantValue {
  std::string id;  ///< parameter identity: the initializer it views (same elements), else itself
  bool trainable;  ///< derived from an initializer (not only from Constant nodes)
};

struct ModelContext {
  std::string file;                         ///< for messages
  std::int64_t opset = 0;                   ///< default-domain opset
  std::map<std::string, ValueInfo> values;  ///< every value with a known type
  std::map<std::string, ConstantValue> constants;
  std::map<std::string, std::vector<std::int64_t>> int_values;  ///< small integer values known statically
  std::set<std::string> graph_outputs;
  int depth = 0;  ///< subgraph nesting (Loop and Scan bodies)

  const ConstantValue* constant(const std::string& name) const {
    const auto it = constants.find(name);
    return it == constants.end() ? nullptr : &it->second;
  }
  /// A node all of whose outputs are constants is folded away (unless it makes a graph output).
  bool folded(const onnx::NodeProto& node) const;
};

/// Runs `work` in a forked child process, so that a crash inside the ONNX library cannot take
/// the caller down; returns what `work` returned, rethrows its Error, and otherwise throws
/// kInvalidArgument with on_crash(the last `progress` the work reported, "crashed (Segmentation fault)").
/// Where fork fails (a sandbox, a process limit), `work` runs in this process instead.
std::string run_isolated(const std::function<std::string(std::int64_t& progress)>& work,
                         const std::function<std::string(std::int64_t progress, const std::string& how)>& on_crash);

/// Reads an .onnx file. With structure_only, initializers over 64 KiB keep their name, type
/// and dims but not their data (never read from the file), and external data is not opened.
/// Throws kNotFound / kDataLoss naming the file.
onnx::ModelProto read_model(const std::string& path, bool structure_only);

/// The values of a graph (initializers, inputs, value_info, outputs) with their types, and the
/// small integer initializers' contents.
void add_values(const onnx::GraphProto& graph, ModelContext& context);
ValueInfo info_of(const onnx::TypeProto& type);
/// The contents of a small (<= 1,024 elements) integer tensor stored in the file.
std::optional<std::vector<std::int64_t>> small_int_values(const onnx::TensorProto& tensor);

/// Notes naming each initializer that is a transposed copy of another (a tied weight an exporter
/// wrote twice: both are counted). Initializers without their data in the file are not compared.
std::vector<std::string> tied_copy_notes(const onnx::GraphProto& graph);
/// Marks the initializers, the `shape_values` (known once the input shapes are bound) and
/// every value computed only from these.
void find_constants(const onnx::GraphProto& graph, const std::set<std::string>& shape_values, ModelContext& context);

/// ONNX shape inference, completed by folding the integer shape arithmetic exporters write
/// (see onnx_shape_folding.cpp); subgraphs (Loop, Scan, If bodies) get their shapes too.
/// Returns the values it folded, by name (shape arithmetic a runtime evaluates once, at load
/// time). Throws with the file named when ONNX rejects the model.
std::map<std::string, std::vector<std::int64_t>> infer_shapes(onnx::ModelProto& model, std::int64_t opset,
                                                              const std::string& path);

/// Maps one node to its records (usually one). Records it cannot cost are kUnknown with an
/// attribute "reason".
std::vector<OpRecord> map_node(const onnx::NodeProto& node, std::size_t index, const ModelContext& context);

std::optional<DType> dtype_of(int onnx_elem_type);

}  // namespace neuralcost::onnx_import
