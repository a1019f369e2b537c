// The importer interface: a model (a built-in network, a file) in, an op graph out. The one
// list of importers is in registry.hpp.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "neuralcost/core/graph.hpp"
#include "neuralcost/models/decoder_variant.hpp"

namespace neuralcost {

/// The values an input is filled with: [low, high), high excluded (integers: low .. high - 1).
struct ValueRange {
  double low = 0;
  double high = 1;
};

/// One input of a model file as the user gives it (profile --input NAME=SHAPE[:DTYPE[:LOW..HIGH]],
/// model_inputs.hpp). Values are random with a fixed seed: floats standard normal, or uniform in
/// the range when one is given; integers uniform in their range, which they must have (token ids
/// are 0..vocabulary size); bools 0 or 1.
struct InputSpec {
  std::string name;  ///< the model's name for the input; empty: by position
  Shape shape;
  std::optional<DType> dtype;  ///< empty: the model's own where the file declares it, else ModelRequest::dtype
  std::optional<ValueRange> range;
};

/// The model options: what the user asked for, a model name or file and the sizes to build it
/// at. How a backend runs it (device, threads, deadlines) is in RunOptions (backend.hpp).
struct ModelRequest {
  std::string model;  ///< "transformer", "model.onnx", ...
  std::int64_t batch = 1;
  std::int64_t seq = 32;
  std::int64_t width = 128;
  std::int64_t depth = 2;
  DType dtype = DType::kFp32;
  std::vector<Shape> input_shapes;            ///< for model files: one shape per input
  std::map<std::string, Shape> named_inputs;  ///< for model files: input name -> shape
  std::map<std::string, std::int64_t> dims;   ///< symbolic dimension name -> value
  bool structure_only = false;                ///< do not touch weight payloads (external data files)
  /// for model files run by a backend: the inputs by name or by position, with dtypes and value
  /// ranges (empty: one fp input per input_shapes); inputs_of() (model_inputs.hpp) reads both
  std::vector<InputSpec> inputs;
  /// decoder LLMs (models/decoder.hpp): the phase ("prefill" or "decode"), the prompt's tokens
  /// (prefill) and the tokens already cached (decode)
  std::string phase = "prefill";
  std::int64_t prompt = 512;
  std::int64_t context = 1024;
  /// the graph is a training step's forward pass (analyze --train): a decoder computes every
  /// position's logits for the loss and writes no KV cache
  bool training = false;
  /// decoder LLMs: --weights, --kv-cache, --mla and --routing (models/decoder_variant.hpp)
  DecoderVariant variant;
  /// The options among batch, seq, width, depth, dtype, phase, prompt, context, weights, kv-cache, mla and routing the
  /// user set (the others hold defaults). An importer that cannot apply a set option refuses it (ONNX: seq, width,
  /// depth); one that reads a value from the model uses a default only where the model leaves it open (ONNX: the batch
  /// of a symbolic leading dimension).
  std::set<std::string> given;
};

class Importer {
 public:
  virtual ~Importer() = default;
  virtual std::string_view name() const = 0;         ///< "reference", "onnx", ...
  virtual std::string_view description() const = 0;  ///< one line for --help and listings
  /// True when this importer is the one for `request.model` (a name it knows, a file type).
  virtual bool accepts(const ModelRequest& request) const = 0;
  /// Builds the op graph. Throws neuralcost::Error naming file, node and field on bad input,
  /// and refuses a set option (request.given, or --input/--dim) that does not apply to the model.
  virtual OpGraph import(const ModelRequest& request) const = 0;
  /// Whether `option` (batch, seq, width, depth, dtype, input, dim, structure-only) means
  /// something for `request.model`.
  virtual bool applies(const ModelRequest& request, std::string_view option) const = 0;
};

/// One request per model and batch (batches empty: the base's batch), for `models` analysed or
/// profiled together. An option the user set that applies to none of the models is an error
/// ("--seq does not apply to ff or cnn"); one that applies to some is set only on those, so
/// `--seq 64` with ff and lstm shapes the lstm. Unknown models are left to importer_for.
std::vector<ModelRequest> model_requests(const ModelRequest& base, const std::vector<std::string>& models,
                                         const std::vector<std::int64_t>& batches);
/// The options set on `request` as the user would type them: --batch, --seq, ..., --input,
/// --dim, --structure-only.
std::vector<std::string> options_set(const ModelRequest& request);

}  // namespace neuralcost
