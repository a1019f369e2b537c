// The built-in hardware database and exact id/alias lookup with "did you mean" suggestions.
#include "neuralcost/hardware/database.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hardware/embedded_specs.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/hardware/calibration.hpp"
#include "neuralcost/hardware/host.hpp"

namespace neuralcost {
namespace {

std::string lower(std::string_view s) {
  std::string r(s);
  std::transform(r.begin(), r.end(), r.begin(), [](unsigned char c) { return std::tolower(c); });
  return r;
}

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace

HardwareDatabase::HardwareDatabase(std::vector<HardwareSpec> specs) : specs_(std::move(specs)) {
  std::map<std::string, std::string> owner;
  for (const HardwareSpec& s : specs_) {
    std::vector<std::string> names = s.aliases;
    names.push_back(s.id);
    for (const std::string& n : names) {
      auto [it, inserted] = owner.emplace(lower(n), s.id);
      if (!inserted) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("hardware name '{}' is claimed by both '{}' and '{}'", n, it->second, s.id));
      }
    }
  }
  std::map<std::string, std::string> device_owner;
  for (const HardwareSpec& s : specs_) {
    for (const std::string& n : s.device_names) {
      auto [it, inserted] = device_owner.emplace(lower(n), s.id);
      if (!inserted) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("device name '{}' is claimed by both '{}' and '{}'", n, it->second, s.id));
      }
    }
  }
}

const HardwareSpec* HardwareDatabase::find_device_name(std::string_view device_name) const {
  const std::string key = lower(device_name);
  for (const HardwareSpec& s : specs_) {
    for (const std::string& n : s.device_names) {
      if (lower(n) == key) return &s;
    }
  }
  return nullptr;
}

const HardwareDatabase& HardwareDatabase::builtin() {
  static const HardwareDatabase db = [] {
    std::vector<HardwareSpec> specs;
    for (const auto& e : detail::embedded_hardware_specs()) {
      HardwareSpec s = parse_hardware_spec(e.json_text, "data/hardware/" + std::string(e.file_name));
      s.origin = "built-in";
      specs.push_back(std::move(s));
    }
    return HardwareDatabase(std::move(specs));
  }();
  return db;
}

const HardwareSpec* HardwareDatabase::find(std::string_view id_or_alias) const {
  const std::string key = lower(id_or_alias);
  for (const HardwareSpec& s : specs_) {
    if (lower(s.id) == key) return &s;
    for (const std::string& a : s.aliases) {
      if (lower(a) == key) return &s;
    }
  }
  return nullptr;
}

std::vector<std::string> HardwareDatabase::nearest(std::string_view name, std::size_t count) const {
  const std::string key = lower(name);
  // rank: names containing the query first, then the longest common prefix, then edit distance
  using Rank = std::tuple<int, std::size_t, std::size_t>;
  auto rank_of = [&](const std::string& candidate) {
    std::size_t prefix = 0;
    while (prefix < key.size() && prefix < candidate.size() && key[prefix] == candidate[prefix]) ++prefix;
    return Rank{candidate.find(key) != std::string::npos ? 0 : 1, key.size() - prefix, edit_distance(key, candidate)};
  };
  std::vector<std::pair<Rank, std::string>> ranked;
  for (const HardwareSpec& s : specs_) {
    Rank best = rank_of(lower(s.id));
    for (const std::string& a : s.aliases) best = std::min(best, rank_of(lower(a)));
    ranked.emplace_back(best, s.id);
  }
  std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> out;
  for (std::size_t i = 0; i < ranked.size() && i < count; ++i) out.push_back(ranked[i].second);
  return out;
}

const HardwareSpec& HardwareDatabase::get(std::string_view id_or_alias) const {
  if (const HardwareSpec* s = find(id_or_alias)) return *s;
  throw Error(ErrorCode::kNotFound,
              fmt::format("unknown hardware '{}'; nearest ids: {} (see `neural-cost hardware list`)", id_or_alias,
                          fmt::join(nearest(id_or_alias, 5), ", ")));
}

std::string_view hardware_source_name(HardwareSource source) {
  switch (source) {
    case HardwareSource::kDatabase: return "built-in";
    case HardwareSource::kFile: return "file";
    case HardwareSource::kCachedCalibration: return "cached calibration";
    case HardwareSource::kNeedsCalibration: return "needs calibration";
  }
  return "?";
}

bool names_host(const std::string& id_or_path) { return id_or_path == "host" || id_or_path == "host-spec"; }

ResolvedHardware resolve_hardware(const std::string& id_or_path, int threads) {
  ResolvedHardware r;
  r.request = id_or_path;
  r.threads = threads;
  if (names_host(id_or_path)) {
    const HostDescription host = describe_host();
    CachedCalibration cached = load_cached_calibration(host, threads, false);
    r.status = cached.status;
    r.stale_calibration = cached.stale;
    if (!cached.calibration) {
      r.source = HardwareSource::kNeedsCalibration;
      return r;
    }
    r.source = HardwareSource::kCachedCalibration;
    r.spec = host_spec_from_calibration(id_or_path, host, *cached.calibration, cached.status);
    return r;
  }
  const bool looks_like_file = id_or_path.size() > 5 && id_or_path.compare(id_or_path.size() - 5, 5, ".json") == 0;
  std::error_code ec;
  // a built-in id always means the built-in part: a file of that name in the working folder
  // must not silently replace it (write ./h100-sxm for the file)
  if (!looks_like_file && id_or_path.find('/') == std::string::npos && HardwareDatabase::builtin().find(id_or_path)) {
    r.source = HardwareSource::kDatabase;
    r.spec = HardwareDatabase::builtin().get(id_or_path);
    return r;
  }
  if (looks_like_file || std::filesystem::is_regular_file(id_or_path, ec) ||
      id_or_path.find('/') != std::string::npos) {
    r.source = HardwareSource::kFile;
    r.spec = load_hardware_file(id_or_path);
    return r;
  }
  r.source = HardwareSource::kDatabase;
  r.spec = HardwareDatabase::builtin().get(id_or_path);
  return r;
}

}  // namespace neuralcost
