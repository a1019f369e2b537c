// Power and energy of a timed phase (see power.hpp).
#include "neuralcost/gpu/power.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "neuralcost/core/atomic_file.hpp"
#include "neuralcost/core/error.hpp"

namespace neuralcost {
namespace {

constexpr double kMaxPlausibleWatts = 5000;  // a whole 8-GPU board draws less than this per GPU

void check_phase(double start, double end, int passes, int batch) {
  if (!std::isfinite(start) || !std::isfinite(end) || end <= start) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("power: the phase must end after it starts (start {} s, end {} s)", start, end));
  }
  if (passes < 1)
    throw Error(ErrorCode::kInvalidArgument, fmt::format("power: passes must be at least 1 (got {})", passes));
  if (batch < 1)
    throw Error(ErrorCode::kInvalidArgument, fmt::format("power: batch must be at least 1 (got {})", batch));
}

void per_pass(PowerSummary& s, int passes, int batch) {
  if (!s.energy_joules) return;
  s.energy_per_pass_joules = *s.energy_joules / passes;
  s.energy_per_sample_joules = *s.energy_per_pass_joules / batch;
  if (*s.energy_joules > 0) s.samples_per_joule = static_cast<double>(passes) * batch / *s.energy_joules;
}

double interpolate(const PowerSample& a, const PowerSample& b, double t) {
  if (b.seconds == a.seconds) return b.watts;
  return a.watts + (b.watts - a.watts) * (t - a.seconds) / (b.seconds - a.seconds);
}

}  // namespace

PowerSummary summarize_power(const std::vector<PowerSample>& samples, double start, double end, int passes, int batch,
                             double period_seconds) {
  check_phase(start, end, passes, batch);
  if (!(period_seconds > 0) || !std::isfinite(period_seconds)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("power: the sampling period must be positive (got {} s)", period_seconds));
  }
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const PowerSample& p = samples[i];
    if (!std::isfinite(p.seconds) || !std::isfinite(p.watts) || p.watts < 0 || p.watts > kMaxPlausibleWatts) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("power sample {} (at {} s) reads {} W, which no GPU draws", i, p.seconds, p.watts));
    }
    if (i > 0 && p.seconds < samples[i - 1].seconds) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("power sample {} (at {} s) is earlier than the one before it ({} s): samples must be in "
                              "time order",
                              i, p.seconds, samples[i - 1].seconds));
    }
  }
  PowerSummary s;
  s.phase_seconds = end - start;
  // the points integrated: the phase's ends interpolated where samples lie on both sides, and
  // every sample inside
  std::vector<PowerSample> points;
  const auto first_in = std::lower_bound(samples.begin(), samples.end(), start,
                                         [](const PowerSample& p, double t) { return p.seconds < t; });
  const auto after = std::upper_bound(samples.begin(), samples.end(), end,
                                      [](double t, const PowerSample& p) { return t < p.seconds; });
  if (first_in != samples.begin() && first_in != samples.end()) {
    points.push_back({start, interpolate(*(first_in - 1), *first_in, start)});
  }
  for (auto it = first_in; it != after; ++it) {
    points.push_back(*it);
    ++s.samples_in_phase;
    s.peak_watts = std::max(s.peak_watts.value_or(0.0), it->watts);
  }
  if (after != samples.begin() && after != samples.end() && (after - 1)->seconds < end) {
    points.push_back({end, interpolate(*(after - 1), *after, end)});
  }
  // the spacing of the real samples around and inside the phase (interpolated ends excluded)
  for (auto it = first_in == samples.begin() ? first_in : first_in - 1; it < after && it + 1 != samples.end(); ++it) {
    s.largest_gap_seconds = std::max(s.largest_gap_seconds, (it + 1)->seconds - it->seconds);
  }
  if (s.samples_in_phase < 2) {
    s.problems.push_back(fmt::format(
        "too few power samples: {} inside the {:.3g} s phase at one per {:.3g} s; a phase needs at least two (a longer "
        "phase, or a faster sampler)",
        s.samples_in_phase, s.phase_seconds, period_seconds));
  }
  if (points.size() < 2) {
    if (points.size() == 1) s.average_watts = points[0].watts;
    return s;
  }
  double joules = 0;
  for (std::size_t i = 1; i < points.size(); ++i) {
    joules += 0.5 * (points[i].watts + points[i - 1].watts) * (points[i].seconds - points[i - 1].seconds);
  }
  s.covered_seconds = points.back().seconds - points.front().seconds;
  if (s.largest_gap_seconds > 3 * period_seconds) {
    s.problems.push_back(
        fmt::format("a gap of {:.3g} s between power samples (the sampler's period is {:.3g} s): the "
                    "power over it is interpolated",
                    s.largest_gap_seconds, period_seconds));
  }
  if (s.covered_seconds <= 0) {
    s.problems.push_back("the power samples inside the phase all share one timestamp: no energy");
    return s;
  }
  if (s.covered_seconds < 0.9 * s.phase_seconds) {
    s.problems.push_back(
        fmt::format("the power samples span {:.0f}% of the phase ({:.3g} of {:.3g} s): its ends are "
                    "taken at the average",
                    100 * s.covered_seconds / s.phase_seconds, s.covered_seconds, s.phase_seconds));
  }
  s.average_watts = joules / s.covered_seconds;
  if (!s.peak_watts) {
    for (const PowerSample& p : points) s.peak_watts = std::max(s.peak_watts.value_or(0.0), p.watts);
  }
  s.energy_joules = *s.average_watts * s.phase_seconds;
  per_pass(s, passes, batch);
  return s;
}

PowerSummary summarize_energy_counter(double joules_at_start, double joules_at_end, double phase_seconds, int passes,
                                      int batch) {
  check_phase(0, phase_seconds, passes, batch);
  PowerSummary s;
  s.phase_seconds = phase_seconds;
  s.covered_seconds = phase_seconds;
  if (!std::isfinite(joules_at_start) || !std::isfinite(joules_at_end) || joules_at_end < joules_at_start) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("power: the energy counter went from {} J to {} J: a cumulative counter cannot decrease",
                            joules_at_start, joules_at_end));
  }
  s.energy_joules = joules_at_end - joules_at_start;
  s.average_watts = *s.energy_joules / phase_seconds;
  if (*s.energy_joules == 0) {
    s.problems.push_back(
        "the energy counter did not advance during the phase (it counts in millijoules and may update "
        "only every few milliseconds): the phase is too short for it");
  }
  per_pass(s, passes, batch);
  return s;
}

PowerRecord parse_power_record(std::string_view text, const std::string& origin) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(ErrorCode::kDataLoss, fmt::format("{}: not JSON ({})", origin, e.what()));
  }
  auto fail = [&](const std::string& field, const std::string& what) {
    throw Error(ErrorCode::kDataLoss, fmt::format("{}: {} {}", origin, field, what));
  };
  auto number = [&](const nlohmann::json& o, const char* key, const std::string& at) {
    if (!o.contains(key) || !o[key].is_number() || !std::isfinite(o[key].get<double>()))
      fail(at + key, "must be a number");
    return o[key].get<double>();
  };
  if (!doc.is_object() || doc.value("format", "") != "neuralcost-gpu-power")
    fail("format", "must be \"neuralcost-gpu-power\"");
  if (!doc.contains("version") || doc["version"] != 1) fail("version", "must be 1");
  PowerRecord r;
  if (!doc.contains("source") || !doc["source"].is_string()) fail("source", "must be a string");
  r.source = doc["source"].get<std::string>();
  r.device = doc.value("device", "");
  r.period_seconds = number(doc, "period_seconds", "");
  if (!doc.contains("phase") || !doc["phase"].is_object()) fail("phase", "must be an object");
  const nlohmann::json& phase = doc["phase"];
  r.start_seconds = number(phase, "start_seconds", "phase.");
  r.end_seconds = number(phase, "end_seconds", "phase.");
  r.passes = static_cast<int>(number(phase, "passes", "phase."));
  r.batch = static_cast<int>(number(phase, "batch", "phase."));
  if (!doc.contains("samples") || !doc["samples"].is_array()) fail("samples", "must be an array of [seconds, watts]");
  for (std::size_t i = 0; i < doc["samples"].size(); ++i) {
    const nlohmann::json& s = doc["samples"][i];
    if (!s.is_array() || s.size() != 2 || !s[0].is_number() || !s[1].is_number()) {
      fail(fmt::format("samples[{}]", i), "must be [seconds, watts]");
    }
    r.samples.push_back({s[0].get<double>(), s[1].get<double>()});
  }
  return r;
}

PowerSummary summarize_power(const PowerRecord& r) {
  return summarize_power(r.samples, r.start_seconds, r.end_seconds, r.passes, r.batch, r.period_seconds);
}

std::string power_record_json(const PowerRecord& r) {
  nlohmann::json samples = nlohmann::json::array();
  for (const PowerSample& s : r.samples) samples.push_back({s.seconds, s.watts});
  const nlohmann::json doc = {
      {"format", "neuralcost-gpu-power"},
      {"version", 1},
      {"source", r.source},
      {"device", r.device},
      {"period_seconds", r.period_seconds},
      {"phase",
       {{"start_seconds", r.start_seconds}, {"end_seconds", r.end_seconds}, {"passes", r.passes}, {"batch", r.batch}}},
      {"samples", samples}};
  return doc.dump(1) + "\n";
}

std::optional<std::string> record_gpu_file(const std::string& name, const std::string& text) {
  const char* dir = std::getenv("NEURALCOST_GPU_RECORD");
  if (dir == nullptr || *dir == '\0') return std::nullopt;
  const std::string path = (std::filesystem::path(dir) / name).string();
  try {
    std::filesystem::create_directories(dir);
    write_file_atomically(path, text);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "warning: $NEURALCOST_GPU_RECORD: %s not written: %s\n", path.c_str(), e.what());
    return std::nullopt;
  }
  return path;
}

}  // namespace neuralcost
