// A measured routing of a decoder's experts (--routing, models/decoder.hpp with_routing): a
// histogram of the tokens each expert took per layer, read from a JSON file and checked against
// the config; and with_variant, which applies every option of a DecoderVariant.
#include <set>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "neuralcost/core/error.hpp"
#include "neuralcost/core/json_input.hpp"
#include "neuralcost/models/decoder.hpp"

namespace neuralcost {
namespace {

using nlohmann::json;

Error bad(const std::string& path, const std::string& what) {
  return Error(ErrorCode::kInvalidArgument, fmt::format("--routing {}: {}", path, what));
}

/// One layer's counts: an array of `experts` integers from 0 to `tokens` adding up to k · tokens.
std::vector<std::int64_t> layer_counts(const json& j, const std::string& path, const std::string& where,
                                       const DecoderConfig& c, std::int64_t tokens) {
  if (!j.is_array() || j.size() != static_cast<std::size_t>(c.experts)) {
    throw bad(path, fmt::format("{} must be an array of {} counts, one per expert (got {})", where, c.experts,
                                j.is_array() ? fmt::format("{} values", j.size()) : std::string(j.type_name())));
  }
  std::vector<std::int64_t> counts;
  std::int64_t sum = 0;
  for (const json& n : j) {
    if (!n.is_number_integer() || n.get<std::int64_t>() < 0 || n.get<std::int64_t>() > tokens) {
      throw bad(path,
                fmt::format("{} holds {}: each count is an integer from 0 to the {} tokens", where, n.dump(), tokens));
    }
    counts.push_back(n.get<std::int64_t>());
    sum += counts.back();
  }
  if (sum != c.experts_per_token * tokens) {
    throw bad(path, fmt::format("{} adds up to {}, not {} (each of the {} tokens goes to {} experts, "
                                "num_experts_per_tok)",
                                where, sum, c.experts_per_token * tokens, tokens, c.experts_per_token));
  }
  return counts;
}

}  // namespace

DecoderConfig with_routing(DecoderConfig c, const std::string& path) {
  if (path.empty() || (c.routing && c.routing->file == path)) return c;
  if (c.experts == 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--routing applies to models with experts; this {} has none", c.architecture));
  }
  std::string repeated;
  const json j = parse_json_keys_once(read_input_file(path, "--routing " + path), repeated);
  if (j.is_discarded() || !j.is_object()) throw bad(path, "is not a JSON object");
  if (!repeated.empty()) throw bad(path, fmt::format("'{}' is given twice", repeated));
  for (const auto& [key, value] : j.items()) {
    if (key != "tokens" && key != "layers" && key != "all" && key != "source") {
      throw bad(path, fmt::format("unknown field '{}' (a histogram has tokens, and layers or all; source is free text)",
                                  key));
    }
  }
  if (!j.contains("tokens") || !j["tokens"].is_number_integer() || j["tokens"].get<std::int64_t>() < 1 ||
      j["tokens"].get<std::int64_t>() >= (std::int64_t{1} << 40)) {
    throw bad(path, "field 'tokens' (the tokens the histogram counted) must be a positive integer below 2^40");
  }
  const std::int64_t tokens = j["tokens"].get<std::int64_t>();
  if (j.contains("layers") == j.contains("all")) {
    throw bad(path,
              "needs exactly one of 'layers' (each layer with experts: its counts) and 'all' (one set of counts for "
              "every layer)");
  }
  DecoderConfig::RoutingHistogram h;
  h.file = path;
  if (j.contains("source")) {
    if (!j["source"].is_string()) throw bad(path, "field 'source' (what the histogram was measured on) must be text");
    h.description = j["source"].get<std::string>();
  }
  h.tokens = tokens;
  h.counts.resize(static_cast<std::size_t>(c.layers));
  if (j.contains("all")) {
    const std::vector<std::int64_t> all = layer_counts(j["all"], path, "'all'", c, tokens);
    for (std::int64_t l = 0; l < c.layers; ++l) {
      if (c.moe_layer(l)) h.counts[static_cast<std::size_t>(l)] = all;
    }
  } else {
    if (!j["layers"].is_object()) throw bad(path, "field 'layers' must map layer indices (\"3\") to counts");
    for (const auto& [key, value] : j["layers"].items()) {
      std::size_t end = 0;
      long long l = -1;
      try {
        l = std::stoll(key, &end);
      } catch (const std::exception&) {
        end = 0;
      }
      // the layer's index as written: "5", not "05", "+5" or " 5" (which would name it twice)
      if (end != key.size() || key.empty() || std::to_string(l) != key || l < 0 || l >= c.layers || !c.moe_layer(l)) {
        throw bad(path, fmt::format("layer '{}' is not a layer with experts of this model (0-based, as "
                                    "model.layers.N; {} layers)",
                                    key, c.layers));
      }
      h.counts[static_cast<std::size_t>(l)] = layer_counts(value, path, fmt::format("layer {}", key), c, tokens);
    }
    for (std::int64_t l = 0; l < c.layers; ++l) {
      if (c.moe_layer(l) && h.counts[static_cast<std::size_t>(l)].empty()) {
        throw bad(path, fmt::format("layer {} has experts and no counts (give every such layer, or 'all')", l));
      }
    }
  }
  h.first_alike.resize(h.counts.size());
  for (std::size_t l = 0; l < h.counts.size(); ++l) {
    h.first_alike[l] = static_cast<std::int64_t>(l);
    for (std::size_t e = 0; e < l; ++e) {
      if (!h.counts[l].empty() && h.counts[e] == h.counts[l]) {
        h.first_alike[l] = static_cast<std::int64_t>(e);
        break;
      }
    }
  }
  c.routing = std::move(h);
  return c;
}

DecoderConfig with_variant(DecoderConfig config, const DecoderVariant& v) {
  return with_routing(
      with_mla(with_kv_cache(with_activations(with_weights(std::move(config), v.weights), v.activations), v.kv_cache),
               v.mla),
      v.routing);
}

}  // namespace neuralcost
