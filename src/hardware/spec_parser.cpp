// Reads hardware spec JSON. Every value is checked before use and every error names the
// file and the field ("spec.json: field 'peak_flops_per_second.fp32' must be a positive number").
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "neuralcost/core/error.hpp"
#include "neuralcost/core/json_input.hpp"
#include "neuralcost/hardware/spec.hpp"

namespace neuralcost {
namespace {

using nlohmann::json;

// Plausible ranges: from a microcontroller to far beyond any chip of this decade.
constexpr double kMinRate = 1e6, kMaxRate = 1e20;            // FLOP/s
constexpr double kMinBandwidth = 1e6, kMaxBandwidth = 1e16;  // bytes/s
constexpr double kMinSize = 1, kMaxSize = 1e16;              // bytes

class Reader {
 public:
  explicit Reader(const std::string& origin) : origin_(origin) {}

  [[noreturn]] void fail(const std::string& field, const std::string& problem) const {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: field '{}' {}", origin_, field, problem));
  }

  std::string text(const json& obj, const std::string& key, bool required) const {
    auto it = obj.find(key);
    if (it == obj.end()) {
      if (required) fail(key, "is missing");
      return {};
    }
    if (!it->is_string() || it->get<std::string>().empty()) fail(key, "must be a non-empty string");
    return it->get<std::string>();
  }

  /// A number within [low, high]: the plausible range of the quantity, so that a typo of
  /// a few orders of magnitude cannot turn into infinities in the analysis.
  double in_range(const json& value, const std::string& field, double low, double high) const {
    if (!value.is_number()) fail(field, fmt::format("must be a positive number (got {})", describe(value)));
    const double v = value.get<double>();
    if (!std::isfinite(v) || v <= 0) fail(field, fmt::format("must be a positive number (got {})", describe(value)));
    if (v < low || v > high)
      fail(field, fmt::format("is {:g}, outside the plausible range {:g} to {:g}", v, low, high));
    return v;
  }

  /// A short description of a JSON value for a message (never dumps a whole nested tree).
  static std::string describe(const json& value) {
    if (value.is_number() || value.is_boolean() || value.is_null()) return value.dump();
    if (value.is_string()) {
      const std::string s = value.get<std::string>();
      return "\"" + (s.size() > 40 ? s.substr(0, 40) + "..." : s) + "\"";
    }
    return value.is_array() ? "a list" : "an object";
  }

  std::map<DType, double> rates(const json& obj, const std::string& field) const {
    if (!obj.is_object()) fail(field, "must be an object keyed by dtype (fp64, fp32, tf32, fp16, bf16, int8, fp8)");
    std::map<DType, double> out;
    for (const auto& [key, value] : obj.items()) {
      const auto dtype = parse_dtype(key);
      const auto& known = compute_dtypes();
      if (!dtype || std::find(known.begin(), known.end(), *dtype) == known.end() || dtype_name(*dtype) != key) {
        fail(field + "." + key, "is not a dtype (use fp64, fp32, tf32, fp16, bf16, int8, fp8)");
      }
      out[*dtype] = in_range(value, field + "." + key, kMinRate, kMaxRate);
    }
    return out;
  }

 private:
  const std::string& origin_;
};

const std::set<std::string> kKnownFields = {"schema_version",
                                            "id",
                                            "name",
                                            "vendor",
                                            "device_type",
                                            "aliases",
                                            "device_names",
                                            "peak_flops_per_second",
                                            "vector_flops_per_second",
                                            "memory_bandwidth_bytes_per_second",
                                            "memory_capacity_bytes",
                                            "kernel_launch_seconds",
                                            "caches",
                                            "sources",
                                            "notes",
                                            "origin"};

}  // namespace

HardwareSpec parse_hardware_spec(std::string_view json_text, const std::string& origin) {
  // one parse that also finds a key given twice (the parser keeps its last value silently); the
  // throwing parse runs only on a text that is not JSON, for its message
  std::string repeated;
  json doc = parse_json_keys_once(std::string(json_text), repeated);
  try {
    if (doc.is_discarded()) doc = json::parse(json_text.begin(), json_text.end());
  } catch (const json::parse_error& e) {
    throw Error(ErrorCode::kDataLoss, fmt::format("{}: malformed JSON at byte {}: {}", origin, e.byte,
                                                  std::string(e.what()).substr(std::string(e.what()).find(':') + 2)));
  } catch (const json::exception& e) {  // e.g. a number too large for a double
    throw Error(ErrorCode::kDataLoss, fmt::format("{}: unreadable JSON: {}", origin, e.what()));
  }
  Reader r(origin);
  if (!doc.is_object()) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: a hardware spec must be a JSON object", origin));
  }
  if (!repeated.empty()) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: '{}' is given twice", origin, repeated));
  }
  for (const auto& [key, value] : doc.items()) {
    if (!kKnownFields.count(key)) r.fail(key, "is not a hardware spec field (see docs/hardware.md)");
  }
  if (doc.contains("schema_version") && doc["schema_version"] != 1) {
    r.fail("schema_version", fmt::format("must be 1 (got {})", Reader::describe(doc["schema_version"])));
  }
  if (doc.contains("origin") && !doc["origin"].is_string()) r.fail("origin", "must be a string");
  HardwareSpec s;
  s.id = r.text(doc, "id", true);
  s.name = r.text(doc, "name", false);
  if (s.name.empty()) s.name = s.id;
  s.vendor = r.text(doc, "vendor", false);
  s.device_type = r.text(doc, "device_type", false);
  if (doc.contains("aliases")) {
    if (!doc["aliases"].is_array()) r.fail("aliases", "must be a list of strings");
    for (const auto& a : doc["aliases"]) {
      if (!a.is_string() || a.get<std::string>().empty()) r.fail("aliases", "must be a list of strings");
      s.aliases.push_back(a.get<std::string>());
    }
  }
  if (doc.contains("device_names")) {
    if (!doc["device_names"].is_array()) r.fail("device_names", "must be a list of strings");
    for (const auto& a : doc["device_names"]) {
      if (!a.is_string() || a.get<std::string>().empty()) r.fail("device_names", "must be a list of strings");
      s.device_names.push_back(a.get<std::string>());
    }
  }
  if (!doc.contains("peak_flops_per_second")) r.fail("peak_flops_per_second", "is missing");
  s.peak_flops_per_second = r.rates(doc["peak_flops_per_second"], "peak_flops_per_second");
  if (s.peak_flops_per_second.empty()) r.fail("peak_flops_per_second", "must give at least one dtype");
  if (doc.contains("vector_flops_per_second")) {
    s.vector_flops_per_second = r.rates(doc["vector_flops_per_second"], "vector_flops_per_second");
  }
  if (!doc.contains("memory_bandwidth_bytes_per_second")) r.fail("memory_bandwidth_bytes_per_second", "is missing");
  s.memory_bandwidth_bytes_per_second = r.in_range(doc["memory_bandwidth_bytes_per_second"],
                                                   "memory_bandwidth_bytes_per_second", kMinBandwidth, kMaxBandwidth);
  if (doc.contains("memory_capacity_bytes")) {
    s.memory_capacity_bytes = r.in_range(doc["memory_capacity_bytes"], "memory_capacity_bytes", kMinSize, kMaxSize);
  }
  if (doc.contains("kernel_launch_seconds")) {
    // a GPU's per-kernel launch floor: between 100 ns and 1 ms is plausible
    s.kernel_launch_seconds = r.in_range(doc["kernel_launch_seconds"], "kernel_launch_seconds", 1e-7, 1e-3);
  }
  if (doc.contains("caches")) {
    if (!doc["caches"].is_array()) r.fail("caches", "must be a list");
    for (std::size_t i = 0; i < doc["caches"].size(); ++i) {
      const json& c = doc["caches"][i];
      const std::string field = fmt::format("caches[{}]", i);
      if (!c.is_object()) r.fail(field, "must be an object");
      for (const auto& [key, value] : c.items()) {
        if (key != "name" && key != "size_bytes" && key != "bandwidth_bytes_per_second") {
          r.fail(field + "." + key, "is not a cache field (name, size_bytes, bandwidth_bytes_per_second)");
        }
      }
      CacheLevel level;
      level.name = r.text(c, "name", true);
      if (!c.contains("size_bytes")) r.fail(field + ".size_bytes", "is missing");
      level.size_bytes = r.in_range(c["size_bytes"], field + ".size_bytes", kMinSize, kMaxSize);
      if (c.contains("bandwidth_bytes_per_second")) {
        level.bandwidth_bytes_per_second = r.in_range(
            c["bandwidth_bytes_per_second"], field + ".bandwidth_bytes_per_second", kMinBandwidth, kMaxBandwidth);
      }
      s.caches.push_back(level);
    }
  }
  if (doc.contains("sources")) {
    if (!doc["sources"].is_object()) r.fail("sources", "must be an object of field path -> text");
    for (const auto& [key, value] : doc["sources"].items()) {
      if (!value.is_string()) r.fail("sources." + key, "must be a string");
      s.sources[key] = value.get<std::string>();
    }
  }
  if (doc.contains("notes")) {
    if (!doc["notes"].is_array()) r.fail("notes", "must be a list of strings");
    for (const auto& n : doc["notes"]) {
      if (!n.is_string()) r.fail("notes", "must be a list of strings");
      s.notes.push_back(n.get<std::string>());
    }
  }
  s.origin = origin;
  return s;
}

HardwareSpec load_hardware_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec)) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("hardware spec '{}' is not a regular file", path));
  }
  if (std::filesystem::is_regular_file(path, ec) && std::filesystem::file_size(path, ec) > (1u << 20)) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("hardware spec '{}' is larger than 1 MiB", path));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw Error(ErrorCode::kNotFound, fmt::format("cannot open hardware spec file '{}'", path));
  }
  std::ostringstream text;
  text << in.rdbuf();
  HardwareSpec spec = parse_hardware_spec(text.str(), path);
  // numbers without a stated source come from the user's file
  auto fill = [&](const std::string& field) {
    if (!spec.sources.count(field)) spec.sources[field] = "user file " + path;
  };
  for (const auto& [dtype, v] : spec.peak_flops_per_second)
    fill("peak_flops_per_second." + std::string(dtype_name(dtype)));
  for (const auto& [dtype, v] : spec.vector_flops_per_second)
    fill("vector_flops_per_second." + std::string(dtype_name(dtype)));
  fill("memory_bandwidth_bytes_per_second");
  if (spec.memory_capacity_bytes) fill("memory_capacity_bytes");
  if (spec.kernel_launch_seconds) fill("kernel_launch_seconds");
  for (const CacheLevel& c : spec.caches) {
    fill("caches." + c.name + ".size_bytes");
    if (c.bandwidth_bytes_per_second) fill("caches." + c.name + ".bandwidth_bytes_per_second");
  }
  return spec;
}

}  // namespace neuralcost
