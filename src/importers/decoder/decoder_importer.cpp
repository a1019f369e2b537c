// Maps a ModelRequest onto the decoder builder (see decoder_importer.hpp).
#include "importers/decoder/decoder_importer.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "neuralcost/core/error.hpp"
#include "neuralcost/core/json_input.hpp"
#include "neuralcost/models/decoder.hpp"

namespace neuralcost {
namespace {

bool is_preset(const std::string& model) {
  const auto& names = decoder_preset_names();
  return std::find(names.begin(), names.end(), model) != names.end();
}

}  // namespace

DecoderConfig decoder_config_of(const std::string& model, const std::string& option, const DecoderVariant& variant) {
  if (is_preset(model)) return with_variant(decoder_preset(model), variant);
  const auto j = decoder_config_file(model);
  if (!j && model.size() > 5 && model.compare(model.size() - 5, 5, ".json") == 0) {
    // a config.json named: say what is wrong with the file
    const std::string text = read_input_file(model, fmt::format("{} '{}'", option, model));
    std::string repeated;
    if (parse_json_keys_once(text, repeated).is_discarded()) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("{} '{}' is not JSON", option, model));
    }
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{} '{}' is not a transformers config (no string model_type)", option, model));
  }
  if (!j) {
    throw Error(
        ErrorCode::kInvalidArgument,
        fmt::format("{} '{}' is not a decoder LLM (a preset such as llama-3-8b, or a config.json)", option, model));
  }
  return with_variant(parse_decoder_config(*j, model), variant);
}

bool DecoderImporter::accepts(const ModelRequest& request) const {
  return is_preset(request.model) || decoder_config_file(request.model).has_value();
}

bool DecoderImporter::applies(const ModelRequest& request, std::string_view option) const {
  if (option == "batch" || option == "dtype" || option == "phase" || option == "weights" || option == "routing") {
    return true;
  }
  if (option == "kv-cache" || option == "mla") return !request.training;  // a training step keeps no cache
  if (option == "activations") return !request.training;
  if (option == "prompt") return request.phase == "prefill";
  if (option == "context") return request.phase == "decode";
  return false;
}

OpGraph DecoderImporter::import(const ModelRequest& request) const {
  if (request.phase != "prefill" && request.phase != "decode") {
    throw Error(ErrorCode::kInvalidArgument,
                request.phase == "generate"
                    ? std::string("--phase generate sums a prefill and its decode steps (analyze_generation): it is "
                                  "not one graph")
                    : fmt::format("--phase '{}' is not one of prefill, decode, generate", request.phase));
  }
  for (const std::string& option : options_set(request)) {
    if (!applies(request, option)) {
      const std::string why =
          option == "prompt" || option == "context"
              ? fmt::format(" (--prompt is prefill's, --context decode's; this is --phase {})", request.phase)
          : option == "seq"                         ? " (use --prompt or --context)"
          : option == "kv-cache" || option == "mla" ? " with --train (a training step keeps no KV cache)"
          : option == "activations"                 ? " with --train (training in 8-bit is not modeled)"
                                                    : "";
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("--{} does not apply to the decoder '{}'{}", option, request.model, why));
    }
  }
  DecoderConfig config;
  if (is_preset(request.model)) {
    config = decoder_preset(request.model);
  } else {
    const auto j = decoder_config_file(request.model);  // accepts() read it as one
    if (!j) throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: not a JSON file", request.model));
    config = parse_decoder_config(*j, request.model);
  }
  config = with_variant(config, request.variant);
  DecoderRequest r;
  r.phase = request.phase == "decode" ? DecoderPhase::kDecode : DecoderPhase::kPrefill;
  r.batch = request.batch;
  r.prompt = request.prompt;
  r.context = request.context;
  r.dtype = request.given.count("dtype") ? request.dtype : DType::kBf16;  // LLM weights: bf16 unless told
  r.training = request.training;
  if (r.training && r.phase == DecoderPhase::kDecode) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--phase decode does not apply with --train: a training step of '{}' runs its --prompt "
                            "tokens at once",
                            request.model));
  }
  const std::string base = request.model.substr(request.model.find_last_of('/') + 1);
  OpGraph g =
      build_decoder(config, r,
                    r.training ? fmt::format("{} (training on {} tokens)", base, r.prompt)
                               : fmt::format("{} ({} {})", base, request.phase,
                                             r.phase == DecoderPhase::kDecode ? fmt::format("at context {}", r.context)
                                                                              : fmt::format("of {} tokens", r.prompt)));
  if (!request.given.count("dtype")) g.add_note("dtype bf16 (a decoder's default; --dtype sets another)");
  return g;
}

}  // namespace neuralcost
