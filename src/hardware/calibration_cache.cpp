// The calibration's JSON form (the cache file and `hardware calibrate --format json` print the
// same document) and the per-user cache (see calibration.hpp). Reading and writing only: a new
// calibration is measured in src/calibrate/.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "neuralcost/core/atomic_file.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/core/interrupt.hpp"
#include "neuralcost/hardware/calibration.hpp"
#include "neuralcost/hardware/host.hpp"

namespace neuralcost {
namespace {

using json = nlohmann::ordered_json;

json rate_json(const RateMeasurement& m) {
  json j = {{"best", m.best}, {"median", m.median}, {"spread", m.spread}, {"runs", m.runs}};
  if (!m.kernel.empty()) j["kernel"] = m.kernel;
  if (m.rounds > 0) {
    j["rounds"] = m.rounds;
    j["round_agreement"] = m.round_agreement;
  }
  return j;
}

RateMeasurement rate_from(const json& j) {
  return {j.at("best").get<double>(),     j.at("median").get<double>(),     j.at("spread").get<double>(),
          j.at("runs").get<int>(),        j.value("kernel", std::string()), j.value("rounds", 0),
          j.value("round_agreement", 0.0)};
}

json load_json(const CalibrationLoad& l) {
  json j = {{"seconds", l.seconds}, {"other_cpus", l.other_cpus}, {"steal_fraction", l.steal_fraction}};
  if (l.other_runnable >= 0) j["other_runnable_tasks"] = l.other_runnable;
  return j;
}

CalibrationLoad load_from(const json& j) {
  return {j.at("seconds").get<double>(), j.at("other_cpus").get<double>(), j.at("steal_fraction").get<double>(),
          j.value("other_runnable_tasks", -1.0)};
}

}  // namespace

std::string calibration_to_json(const Calibration& c) {
  json j;
  j["fingerprint"] = c.fingerprint;
  j["created"] = c.created;
  j["tool_version"] = c.tool_version;
  j["quick"] = c.quick;
  j["seconds"] = c.seconds;
  j["threads"] = c.threads;
  j["kernel_isa"] = c.kernel_isa;
  j["clock_ghz"] = c.clock_ghz;
  j["peak_clock"] = {{"ghz", c.peak_clock_ghz}, {"source", c.peak_clock_source}};
  j["rounds"] = c.rounds;
  j["round_tolerance"] = c.round_tolerance;
  j["load"] = {{"before", load_json(c.load_before)}, {"during", load_json(c.load_during)}, {"busy", c.busy}};
  j["levels"] = json::array();
  for (const BandwidthLevel& l : c.levels) {
    j["levels"].push_back({{"name", l.name},
                           {"size_bytes", l.size_bytes},
                           {"working_set_bytes", l.working_set_bytes},
                           {"bandwidth_bytes_per_second", l.triad.best},
                           {"read", rate_json(l.read)},
                           {"copy", rate_json(l.copy)},
                           {"triad", rate_json(l.triad)}});
  }
  j["stream_triad"] = rate_json(c.stream_triad);
  j["peak_flops_per_second"] = json::object();
  for (const auto& [dtype, m] : c.fma) j["peak_flops_per_second"][dtype] = m.best;
  j["fma"] = json::object();
  for (const auto& [dtype, m] : c.fma) j["fma"][dtype] = rate_json(m);
  j["theoretical_flops_per_second"] = c.theoretical_flops;
  j["gemm"] = json::array();
  for (const GemmCeiling& g : c.gemm) {
    j["gemm"].push_back(
        {{"library", g.library}, {"dtype", g.dtype}, {"n", g.n}, {"flops_per_second", rate_json(g.flops_per_second)}});
  }
  j["environment"] = c.environment;
  j["warnings"] = c.warnings;
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

Calibration parse_calibration(std::string_view text, const std::string& origin) {
  Calibration c;
  std::string field = "(document)";
  try {
    const json j = json::parse(text);
    auto at = [&](const char* name) -> const json& {
      field = name;
      return j.at(name);
    };
    c.fingerprint = at("fingerprint").get<std::string>();
    c.created = at("created").get<std::string>();
    c.tool_version = at("tool_version").get<std::string>();
    c.quick = at("quick").get<bool>();
    c.seconds = at("seconds").get<double>();
    c.threads = at("threads").get<int>();
    c.kernel_isa = at("kernel_isa").get<std::string>();
    c.clock_ghz = at("clock_ghz").get<double>();
    c.peak_clock_ghz = at("peak_clock").at("ghz").get<double>();
    c.peak_clock_source = at("peak_clock").at("source").get<std::string>();
    c.rounds = at("rounds").get<int>();
    c.round_tolerance = at("round_tolerance").get<double>();
    c.load_before = load_from(at("load").at("before"));
    c.load_during = load_from(at("load").at("during"));
    c.busy = at("load").at("busy").get<std::vector<std::string>>();
    for (const json& l : at("levels")) {
      BandwidthLevel level;
      level.name = l.at("name").get<std::string>();
      level.size_bytes = l.at("size_bytes").get<double>();
      level.working_set_bytes = l.at("working_set_bytes").get<double>();
      level.read = rate_from(l.at("read"));
      level.copy = rate_from(l.at("copy"));
      level.triad = rate_from(l.at("triad"));
      if (!(level.triad.best > 0)) throw std::runtime_error("a level without a positive triad bandwidth");
      c.levels.push_back(level);
    }
    if (c.levels.empty() || c.levels.back().name != "DRAM") throw std::runtime_error("the last level is not DRAM");
    c.stream_triad = rate_from(at("stream_triad"));
    for (const auto& [dtype, m] : at("fma").items()) c.fma[dtype] = rate_from(m);
    if (!c.fma.count("fp32") || !(c.fma.at("fp32").best > 0)) throw std::runtime_error("no positive fp32 peak");
    c.theoretical_flops = at("theoretical_flops_per_second").get<std::map<std::string, double>>();
    for (const json& g : at("gemm")) {
      c.gemm.push_back({g.at("library").get<std::string>(), g.at("dtype").get<std::string>(), g.at("n").get<int>(),
                        rate_from(g.at("flops_per_second"))});
    }
    c.environment = at("environment").get<std::map<std::string, std::string>>();
    c.warnings = at("warnings").get<std::vector<std::string>>();
  } catch (const std::exception& e) {
    throw Error(ErrorCode::kDataLoss, fmt::format("{}: not a calibration (field '{}': {})", origin, field, e.what()));
  }
  return c;
}

/// A cached calibration is read as figures of this CPU only when they are possible here: no
/// fp32/fp64 FMA rate above 3x the theoretical peak of its threads' cores (the table's clock is an upper
/// bound already; 3x leaves room for a wrong row or an older description, not for a hand-edited x100), no bandwidth
/// above 100 TB/s, nothing negative or not finite. Empty when plausible.
static std::string implausible(const Calibration& c, const HostDescription& host) {
  // no CPU clocks above 6.2 GHz; a cache from before the clock kernel used register adds may
  // hold the 12-20 "GHz" of folded add-immediates, and the clock sizes the theoretical peaks
  if (!std::isfinite(c.clock_ghz) || c.clock_ghz < 0 || c.clock_ghz > kMaxPlausibleClockGhz) {
    return fmt::format("a clock of {:.3g} GHz", c.clock_ghz);
  }
  const HardwareSpec theory = theoretical_host_spec(host, c.threads);
  for (const auto& [dtype, m] : c.fma) {
    if (!std::isfinite(m.best) || m.best < 0) return fmt::format("{} FMA {}", dtype, m.best);
    // fp32 and fp64 only: the theoretical spec's other rates (bf16 dot products) are not bounds
    const auto d = parse_dtype(dtype);
    if (!d || (*d != DType::kFp32 && *d != DType::kFp64)) continue;
    const auto peak = theory.peak_flops_per_second.find(*d);
    if (peak != theory.peak_flops_per_second.end() && m.best > 3 * peak->second) {
      return fmt::format("{} FMA {:.3g} FLOP/s against a theoretical {:.3g}", dtype, m.best, peak->second);
    }
  }
  for (const BandwidthLevel& l : c.levels) {
    for (const RateMeasurement* r : {&l.read, &l.copy, &l.triad}) {
      if (!std::isfinite(r->best) || r->best < 0 || r->best > 1e14) {
        return fmt::format("{} bandwidth {:.3g} B/s", l.name, r->best);
      }
    }
  }
  return "";
}

std::string calibration_cache_path(int threads) {
  namespace fs = std::filesystem;
  fs::path dir;
  if (const char* d = std::getenv("NEURALCOST_CACHE_DIR"); d && *d) {
    dir = d;
  } else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) {
    dir = fs::path(x) / "neural-cost";
  } else if (const char* h = std::getenv("HOME"); h && *h) {
    dir = fs::path(h) / ".cache" / "neural-cost";
  } else {
    dir = fs::temp_directory_path() / "neural-cost";
  }
  return (dir / fmt::format("host-calibration-{}t.json", threads)).string();
}

int calibration_threads(const HostDescription& host, int threads) {
  const int cpus = std::max(1, host.logical_cpus);
  return threads > 0 ? std::min(threads, cpus) : cpus;
}

void save_calibration(const Calibration& c) {
  const std::string path = calibration_cache_path(c.threads);
  // a private directory of ours, and a file we replace (never a link we would follow)
  ensure_private_directory(std::filesystem::path(path).parent_path().string());
  replace_private_file(path, calibration_to_json(c), 0600);
}

CalibrationLock::CalibrationLock(int threads, double timeout_seconds) {
  const std::filesystem::path cache = calibration_cache_path(threads);
  const std::string path = std::filesystem::path(cache).replace_extension(".lock").string();
  try {
    ensure_private_directory(cache.parent_path().string());
  } catch (const Error& e) {
    why_not_ = e.what();
    return;
  }
  // in a folder of ours, yet never a link someone left there
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    why_not_ = fmt::format("cannot open the lock {}: {}", path, std::strerror(errno));
    return;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) {
    ::close(fd);
    why_not_ = fmt::format("the lock {} is not a file of ours", path);
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    waited_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (error != EWOULDBLOCK && error != EINTR) {
      ::close(fd);
      why_not_ = fmt::format("cannot lock {}: {}", path, std::strerror(error));
      return;
    }
    if (waited_seconds_ >= timeout_seconds) {
      ::close(fd);
      why_not_ = fmt::format("another calibration held {} for {:.0f} s", path, waited_seconds_);
      return;
    }
    try {
      throw_if_interrupted();
    } catch (...) {
      ::close(fd);
      throw;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  fd_ = fd;
}

CalibrationLock::~CalibrationLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the lock
}

CachedCalibration load_cached_calibration(const HostDescription& host, int threads, bool full) {
  const int wanted = calibration_threads(host, threads);
  const std::string path = calibration_cache_path(wanted);
  const std::string fingerprint = host_fingerprint(host);
  CachedCalibration out;
  try {
    ensure_private_directory(std::filesystem::path(path).parent_path().string());
  } catch (const Error& e) {
    out.status = fmt::format("the calibration cache is not used: {}", e.what());
    out.stale = true;
    return out;
  }
  std::ifstream in(path);
  if (!in) {
    out.status = fmt::format("no calibration for {} thread(s) cached at {}", wanted, path);
    return out;
  }
  std::stringstream text;
  text << in.rdbuf();
  try {
    Calibration c = parse_calibration(text.str(), path);
    if (const std::string absurd = implausible(c, host); !absurd.empty()) {
      out.status = fmt::format("{} holds figures no CPU like this reaches ({}): not used", path, absurd);
      out.stale = true;
      return out;
    }
    if (c.fingerprint == fingerprint && c.threads == wanted && (!full || !c.quick)) {
      out.status =
          fmt::format("calibration of {} ({} thread{}) from {}", c.created, c.threads, c.threads == 1 ? "" : "s", path);
      // saved with rounds that never agreed: say so each time it is used (calibrate.hpp, why_not_cacheable)
      for (const std::string& b : c.busy) out.status += fmt::format(" (saved with its spread: {})", b);
      out.calibration = std::move(c);
      return out;
    }
    out.status = c.fingerprint != fingerprint ? fmt::format("{} was measured on another CPU ({})", path, c.fingerprint)
                 : c.threads != wanted ? fmt::format("{} was measured with {} threads, not {}", path, c.threads, wanted)
                                       : fmt::format("{} holds a quick calibration and a full one was asked for", path);
  } catch (const Error& e) {
    out.status = e.what();
  }
  out.stale = true;
  return out;
}

}  // namespace neuralcost
