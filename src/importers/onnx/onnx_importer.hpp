// Importer for ONNX files (`neural-cost analyze model.onnx`): loads the model with the ONNX
// library, checks it, binds input shapes and symbolic dimensions, runs ONNX shape inference
// with data propagation, and maps every node to op records. Nodes that cannot be mapped, or
// whose shapes stay unknown, become unmodeled records with the reason.
#pragma once

#include "neuralcost/importer.hpp"

namespace neuralcost {

class OnnxImporter final : public Importer {
 public:
  std::string_view name() const override { return "onnx"; }
  std::string_view description() const override { return "ONNX files (*.onnx), via the ONNX library"; }
  bool accepts(const ModelRequest& request) const override;
  OpGraph import(const ModelRequest& request) const override;
  /// --batch (binds a symbolic leading dimension), --dtype, --input, --dim, --structure-only;
  /// never --seq, --width, --depth (the file fixes them) nor a decoder's --phase, --prompt, --context.
  bool applies(const ModelRequest& request, std::string_view option) const override {
    (void)request;
    return option == "batch" || option == "dtype" || option == "input" || option == "dim" || option == "structure-only";
  }
};

}  // namespace neuralcost
