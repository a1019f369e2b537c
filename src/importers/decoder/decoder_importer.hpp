// Decoder LLMs (models/decoder.hpp) for analyze: a Hugging Face style config.json, recognised
// by its content, or a built-in preset name (llama-3-8b, ...), at one phase.
#pragma once

#include "neuralcost/importer.hpp"
#include "neuralcost/models/decoder.hpp"

namespace neuralcost {

/// The config of a decoder preset or config.json, with `variant` applied (with_variant);
/// kInvalidArgument naming `option` when `model` is neither.
DecoderConfig decoder_config_of(const std::string& model, const std::string& option, const DecoderVariant& variant);

class DecoderImporter final : public Importer {
 public:
  std::string_view name() const override { return "decoder"; }
  std::string_view description() const override {
    return "decoder LLMs: a transformers config.json (llama, mistral, qwen2/3, mixtral, qwen2_moe/qwen3_moe, gemma/2, "
           "phi3, deepseek_v2/v3, gpt2, gpt_neox) or a preset (llama-3-8b, mixtral-8x7b, ...: docs/llm.md lists "
           "them), prefill, decode or a training step";
  }
  bool accepts(const ModelRequest& request) const override;
  OpGraph import(const ModelRequest& request) const override;
  /// --batch, --dtype, --phase, --weights, --routing, --prompt (prefill), --context (decode); --kv-cache and --mla
  /// but with --train.
  bool applies(const ModelRequest& request, std::string_view option) const override;
};

}  // namespace neuralcost
