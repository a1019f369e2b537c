// The inputs of a model file run by a backend (ModelRequest::inputs): the syntax users give them
// in, their checks, how they are matched to the model's own inputs and how a run describes the
// values it used. Shared by the LibTorch backend, the Python workers' backend and the profile
// pipeline, so that every backend reads, refuses and reports inputs alike.
#pragma once

#include <string>
#include <vector>

#include "neuralcost/importer.hpp"

namespace neuralcost {

/// Parses one input: "NAME=SHAPE[:DTYPE[:LOW..HIGH]]" when `named` (profile --input), else
/// "SHAPE[:DTYPE[:LOW..HIGH]]" (profile --input-shape, the model's next input). SHAPE is
/// 8x128; DTYPE one of fp32, fp64, fp16, bf16 (and float32, ...), int64, int32, int8, bool; the
/// range [LOW, HIGH) excludes HIGH. Integer inputs need their range ("ids=8x128:int64:0..30522":
/// token ids of a 30,522-word vocabulary); a float range makes values uniform in it instead of
/// standard normal; bools take none. Throws kInvalidArgument quoting `option` and the text.
InputSpec parse_input(const std::string& text, bool named, const std::string& option);

/// The inputs of `request`: request.inputs, else one positional input (dtype unset) per
/// request.input_shapes. kInvalidArgument when inputs are given both by name and by position, or
/// a name twice.
std::vector<InputSpec> inputs_of(const ModelRequest& request);

/// Puts `given` in the order of the model's inputs `names` (the first `required` of them have no
/// default), naming positional ones. kInvalidArgument "MODEL has no input 'X'; its inputs: a, b"
/// for a name that is not an input, and errors naming the inputs for a missing input or a
/// positional count the model does not take. Trailing inputs with defaults may be left out.
std::vector<InputSpec> match_inputs(const std::vector<InputSpec>& given, const std::vector<std::string>& names,
                                    std::size_t required, const std::string& model);

/// "ids: 8x128 int64, integers uniform in [0, 30522)" ("standard normal" for floats without a
/// range): what a run filled one input with, for its contract. `dtype` is the one the input got.
std::string describe_input(const InputSpec& input, DType dtype);

/// Whether `dtype` is an integer type (int8, int32, int64; not bool).
bool is_integer(DType dtype);

}  // namespace neuralcost
