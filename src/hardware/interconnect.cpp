// Interconnect and system specs: parsing (every field checked, errors name the file and the
// field), the built-in lists (data/interconnects, data/systems) and lookup
// (include/neuralcost/hardware/interconnect.hpp).
#include "neuralcost/hardware/interconnect.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hardware/embedded_specs.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/core/json_input.hpp"
#include "neuralcost/core/suggest.hpp"
#include "neuralcost/hardware/database.hpp"

namespace neuralcost {
namespace {

using nlohmann::json;

constexpr double kMinBandwidth = 1e5, kMaxBandwidth = 1e15;  // bytes/s, one direction
constexpr double kMaxLatency = 1.0;                          // s

class Fields {
 public:
  Fields(const json& obj, const std::string& origin, std::string prefix = "")
      : obj_(obj), origin_(origin), prefix_(std::move(prefix)) {}

  [[noreturn]] void fail(const std::string& field, const std::string& problem) const {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: field '{}{}' {}", origin_, prefix_, field, problem));
  }
  const json* find(const std::string& key) const {
    auto it = obj_.find(key);
    return it == obj_.end() ? nullptr : &*it;
  }
  std::string text(const std::string& key, bool required = true) const {
    const json* v = find(key);
    if (v == nullptr) {
      if (required) fail(key, "is missing");
      return {};
    }
    if (!v->is_string() || v->get<std::string>().empty()) fail(key, "must be a non-empty string");
    return v->get<std::string>();
  }
  double number(const std::string& key, double low, double high, bool zero_ok = false) const {
    const json* v = find(key);
    if (v == nullptr) fail(key, "is missing");
    if (!v->is_number() || !std::isfinite(v->get<double>())) fail(key, "must be a number");
    const double x = v->get<double>();
    if ((zero_ok ? x < 0 : x <= 0) || x < (zero_ok ? 0 : low) || x > high) {
      fail(key, fmt::format("is {:g}, outside the plausible range {:g} to {:g}", x, zero_ok ? 0.0 : low, high));
    }
    return x;
  }
  std::optional<double> optional_number(const std::string& key, double low, double high) const {
    if (find(key) == nullptr) return std::nullopt;
    return number(key, low, high);
  }
  int integer(const std::string& key, int low, int high) const {
    const json* v = find(key);
    if (v == nullptr) fail(key, "is missing");
    if (!v->is_number_integer() || v->get<long long>() < low || v->get<long long>() > high) {
      fail(key, fmt::format("must be an integer from {} to {}", low, high));
    }
    return v->get<int>();
  }
  std::map<std::string, std::string> sources() const {
    std::map<std::string, std::string> out;
    const json* v = find("sources");
    if (v == nullptr) return out;
    if (!v->is_object()) fail("sources", "must be an object of strings");
    for (const auto& [key, value] : v->items()) {
      if (!value.is_string()) fail("sources." + key, "must be a string");
      out[key] = value.get<std::string>();
    }
    return out;
  }
  std::vector<std::string> notes() const {
    std::vector<std::string> out;
    const json* v = find("notes");
    if (v == nullptr) return out;
    if (!v->is_array()) fail("notes", "must be a list of strings");
    for (const auto& n : *v) {
      if (!n.is_string()) fail("notes", "must be a list of strings");
      out.push_back(n.get<std::string>());
    }
    return out;
  }
  void schema() const {
    if (find("schema_version") == nullptr || !find("schema_version")->is_number_integer() ||
        find("schema_version")->get<int>() != 1) {
      fail("schema_version", "must be 1");
    }
  }

 private:
  const json& obj_;
  const std::string& origin_;
  std::string prefix_;
};

json parse_object(std::string_view text, const std::string& origin) {
  // one parse that also finds a key given twice; the throwing parse only for a text that is not JSON
  std::string repeated;
  json j = parse_json_keys_once(std::string(text), repeated);
  try {
    if (j.is_discarded()) j = json::parse(text);
  } catch (const json::parse_error& e) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: not valid JSON: {}", origin, e.what()));
  }
  if (!j.is_object()) throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: must be a JSON object", origin));
  if (!repeated.empty()) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: '{}' is given twice", origin, repeated));
  }
  return j;
}

MeasuredCollective parse_measured(const json& m, const std::string& origin, const std::string& prefix) {
  if (!m.is_object())
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: '{}' must be an object", origin, prefix));
  const Fields f(m, origin, prefix + ".");
  MeasuredCollective out;
  const std::string name = f.text("collective");
  const auto c = collective_from_name(name);
  if (!c) f.fail("collective", fmt::format("'{}' is not a collective (all_reduce, reduce_scatter, ...)", name));
  out.collective = *c;
  out.ranks = f.integer("ranks", 2, 1 << 20);
  if (const json* h = f.find("held_back_max_error"); h != nullptr)
    out.held_back_max_error = f.number("held_back_max_error", 0, 1e6, true);
  const json* segments = f.find("segments");
  if (segments == nullptr || !segments->is_array() || segments->empty()) f.fail("segments", "must be a non-empty list");
  double previous = -1;
  for (std::size_t i = 0; i < segments->size(); ++i) {
    const json& s = (*segments)[i];
    const std::string at = fmt::format("{}.segments[{}].", prefix, i);
    if (!s.is_object()) throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: '{}' must be an object", origin, at));
    const Fields g(s, origin, at);
    CollectiveSegment seg;
    seg.min_bytes = g.number("min_bytes", 0, 1e15, true);
    seg.max_bytes = g.number("max_bytes", 1, 1e15);
    seg.latency_seconds = g.number("latency_seconds", 0, kMaxLatency, true);
    // a latency-bound segment's slope is noise: any positive bandwidth is a fit
    seg.bus_bytes_per_second = g.number("bus_bytes_per_second", 1, kMaxBandwidth);
    if (seg.max_bytes < seg.min_bytes) g.fail("max_bytes", "is below min_bytes");
    if (seg.min_bytes <= previous) g.fail("min_bytes", "overlaps the segment before (segments go by size)");
    previous = seg.max_bytes;
    out.segments.push_back(seg);
  }
  return out;
}

template <typename Spec>
std::vector<Spec> parse_embedded(const std::vector<detail::EmbeddedSpec>& files,
                                 Spec (*parse)(std::string_view, const std::string&)) {
  std::vector<Spec> out;
  for (const auto& f : files) {
    Spec s = parse(f.json_text, std::string(f.file_name));
    s.origin = "built-in";
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(), [](const Spec& a, const Spec& b) { return a.id < b.id; });
  return out;
}

template <typename Spec>
std::vector<std::string> ids(const std::vector<Spec>& specs) {
  std::vector<std::string> out;
  for (const auto& s : specs) out.push_back(s.id);
  return out;
}

template <typename Spec>
[[noreturn]] void not_found(const std::string& what, const std::string& id, const std::vector<Spec>& specs,
                            const std::string& command) {
  const auto near = closest_name(id, ids(specs));
  throw Error(ErrorCode::kNotFound, fmt::format("unknown {} '{}'{}; known: {} (see `neural-cost hardware {}`)", what,
                                                id, near ? fmt::format(" (did you mean '{}'?)", *near) : "",
                                                fmt::join(ids(specs), ", "), command));
}

}  // namespace

const MeasuredCollective* InterconnectSpec::measured_for(Collective c, int ranks) const {
  for (const auto& m : measured) {
    if (m.collective == c && m.ranks == ranks) return &m;
  }
  return nullptr;
}

double collective_seconds(const InterconnectSpec& link, Collective c, int ranks, double bytes, double element_bytes,
                          std::string* basis) {
  if (const MeasuredCollective* m = link.measured_for(c, ranks)) {
    const double factor = bus_bandwidth_factor(c, ranks);
    auto at = [&](const CollectiveSegment& s, double size) {
      return s.latency_seconds + factor * size / s.bus_bytes_per_second;
    };
    const auto& segments = m->segments;
    for (std::size_t i = 0; i < segments.size(); ++i) {
      const CollectiveSegment& s = segments[i];
      if (bytes >= s.min_bytes && bytes <= s.max_bytes) {
        if (basis != nullptr) *basis = "measured";
        return at(s, bytes);
      }
      if (i + 1 < segments.size() && bytes > s.max_bytes && bytes < segments[i + 1].min_bytes) {
        // between two segments: log-log between the first one's end and the next one's start
        const CollectiveSegment& next = segments[i + 1];
        const double w = std::log(bytes / s.max_bytes) / std::log(next.min_bytes / s.max_bytes);
        if (basis != nullptr) *basis = "measured, interpolated";
        return std::exp((1 - w) * std::log(at(s, s.max_bytes)) + w * std::log(at(next, next.min_bytes)));
      }
    }
    if (basis != nullptr) *basis = "measured, extrapolated";
    return at(bytes < segments.front().min_bytes ? segments.front() : segments.back(), bytes);
  }
  if (basis != nullptr) *basis = "model";
  return collective_cost(c, CollectiveAlgorithm::kRing, ranks, bytes, element_bytes, link.roof()).seconds();
}

InterconnectSpec parse_interconnect_spec(std::string_view json_text, const std::string& origin) {
  const json j = parse_object(json_text, origin);
  const Fields f(j, origin);
  f.schema();
  InterconnectSpec s;
  s.id = f.text("id");
  s.name = f.text("name");
  s.kind = f.text("kind");
  static const std::vector<std::string> kinds = {"nvlink", "pcie", "infiniband", "roce", "loopback", "ethernet"};
  if (std::find(kinds.begin(), kinds.end(), s.kind) == kinds.end()) {
    f.fail("kind", fmt::format("'{}' is not one of {}", s.kind, fmt::join(kinds, ", ")));
  }
  s.scope = f.text("scope");
  if (s.scope != "intra-node" && s.scope != "inter-node") f.fail("scope", "must be intra-node or inter-node");
  s.line_rate_bytes_per_second = f.optional_number("line_rate_bytes_per_second", kMinBandwidth, kMaxBandwidth);
  // any positive figure: a calibrated link's comes from its fit, however slow the link
  s.bus_bandwidth_bytes_per_second = f.number("bus_bandwidth_bytes_per_second", 1, kMaxBandwidth);
  s.latency_seconds = f.number("latency_seconds", 0, kMaxLatency, true);
  if (s.line_rate_bytes_per_second && s.bus_bandwidth_bytes_per_second > *s.line_rate_bytes_per_second * 1.0001) {
    f.fail("bus_bandwidth_bytes_per_second", "is above line_rate_bytes_per_second (a ring cannot beat its link)");
  }
  if (const json* v = f.find("in_network_reduction"); v != nullptr) {
    if (!v->is_boolean()) f.fail("in_network_reduction", "must be true or false");
    s.in_network_reduction = v->get<bool>();
  }
  s.in_network_bus_bandwidth_bytes_per_second =
      f.optional_number("in_network_bus_bandwidth_bytes_per_second", kMinBandwidth, kMaxBandwidth);
  if (s.in_network_bus_bandwidth_bytes_per_second && !s.in_network_reduction) {
    f.fail("in_network_bus_bandwidth_bytes_per_second", "is given but in_network_reduction is not true");
  }
  if (const json* m = f.find("measured"); m != nullptr) {
    if (!m->is_array()) f.fail("measured", "must be a list");
    for (std::size_t i = 0; i < m->size(); ++i) {
      s.measured.push_back(parse_measured((*m)[i], origin, fmt::format("measured[{}]", i)));
    }
  }
  s.sources = f.sources();
  s.notes = f.notes();
  s.origin = origin;
  return s;
}

SystemSpec parse_system_spec(std::string_view json_text, const std::string& origin) {
  const json j = parse_object(json_text, origin);
  const Fields f(j, origin);
  f.schema();
  SystemSpec s;
  s.id = f.text("id");
  s.name = f.text("name");
  s.device = f.text("device");
  s.devices_per_node = f.integer("devices_per_node", 1, 1 << 16);
  s.intra_node = f.text("intra_node");
  s.inter_node = f.text("inter_node");
  s.nics_per_node = f.integer("nics_per_node", 1, 1 << 16);
  s.sources = f.sources();
  s.notes = f.notes();
  s.origin = origin;
  return s;
}

std::string interconnect_spec_json(const InterconnectSpec& s) {
  json j = {{"schema_version", 1}, {"id", s.id}, {"name", s.name}, {"kind", s.kind}, {"scope", s.scope}};
  if (s.line_rate_bytes_per_second) j["line_rate_bytes_per_second"] = *s.line_rate_bytes_per_second;
  j["bus_bandwidth_bytes_per_second"] = s.bus_bandwidth_bytes_per_second;
  j["latency_seconds"] = s.latency_seconds;
  j["in_network_reduction"] = s.in_network_reduction;
  if (s.in_network_bus_bandwidth_bytes_per_second) {
    j["in_network_bus_bandwidth_bytes_per_second"] = *s.in_network_bus_bandwidth_bytes_per_second;
  }
  if (!s.measured.empty()) {
    json measured = json::array();
    for (const auto& m : s.measured) {
      json segments = json::array();
      for (const auto& g : m.segments) {
        segments.push_back({{"min_bytes", g.min_bytes},
                            {"max_bytes", g.max_bytes},
                            {"latency_seconds", g.latency_seconds},
                            {"bus_bytes_per_second", g.bus_bytes_per_second}});
      }
      json one = {{"collective", collective_name(m.collective)}, {"ranks", m.ranks}, {"segments", segments}};
      if (m.held_back_max_error) one["held_back_max_error"] = *m.held_back_max_error;
      measured.push_back(one);
    }
    j["measured"] = measured;
  }
  j["sources"] = s.sources;
  j["notes"] = s.notes;
  return j.dump(2) + "\n";
}

const std::vector<InterconnectSpec>& builtin_interconnects() {
  static const std::vector<InterconnectSpec> specs =
      parse_embedded(detail::embedded_interconnect_specs(), &parse_interconnect_spec);
  return specs;
}

const std::vector<SystemSpec>& builtin_systems() {
  static const std::vector<SystemSpec> systems = [] {
    std::vector<SystemSpec> v = parse_embedded(detail::embedded_system_specs(), &parse_system_spec);
    for (const SystemSpec& s : v) {
      HardwareDatabase::builtin().get(s.device);  // a system's parts must exist
      find_interconnect(s.intra_node);
      find_interconnect(s.inter_node);
    }
    return v;
  }();
  return systems;
}

InterconnectSpec find_interconnect(const std::string& id_or_path) {
  for (const auto& s : builtin_interconnects()) {
    if (s.id == id_or_path) return s;
  }
  const bool json_name = id_or_path.size() > 5 && id_or_path.compare(id_or_path.size() - 5, 5, ".json") == 0;
  if (id_or_path.find('/') != std::string::npos || json_name) {
    return parse_interconnect_spec(read_input_file(id_or_path, fmt::format("interconnect file '{}'", id_or_path)),
                                   id_or_path);
  }
  not_found("interconnect", id_or_path, builtin_interconnects(), "interconnects");
}

const SystemSpec& find_system(const std::string& id) {
  for (const auto& s : builtin_systems()) {
    if (s.id == id) return s;
  }
  not_found("system", id, builtin_systems(), "systems");
}

}  // namespace neuralcost
