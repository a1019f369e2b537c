// Host detection (see host.hpp): /proc/cpuinfo, /proc/meminfo and sysfs, read under a root so
// that tests can feed canned trees (this VM's, an ARM server's).
#include "neuralcost/hardware/host.hpp"

#include <sched.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

namespace neuralcost {
namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::string s = text.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

/// Counts the CPUs in a sysfs list such as "0-3,8,10-11".
int count_cpu_list(const std::string& list) {
  int count = 0;
  std::stringstream in(list);
  for (std::string part; std::getline(in, part, ',');) {
    if (part.empty()) continue;
    const auto dash = part.find('-');
    if (dash == std::string::npos) {
      ++count;
    } else {
      count += std::max(0, std::atoi(part.c_str() + dash + 1) - std::atoi(part.c_str()) + 1);
    }
  }
  return count;
}

/// "32K", "1024K", "32M" (sysfs cache sizes) in bytes.
std::uint64_t parse_size(const std::string& text) {
  const std::uint64_t value = std::strtoull(text.c_str(), nullptr, 10);
  switch (text.empty() ? ' ' : text.back()) {
    case 'K': return value << 10;
    case 'M': return value << 20;
    case 'G': return value << 30;
    default: return value;
  }
}

void parse_cpuinfo(const std::string& text, HostDescription& host, double& mhz, int& processors) {
  std::istringstream in(text);
  std::string physical = "0";
  std::set<std::string> cores, sockets;
  for (std::string line; std::getline(in, line);) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    key.erase(key.find_last_not_of(" \t") + 1);
    const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "processor") ++processors;
    if (key == "model name" && host.model == "unknown") host.model = value;
    if (key == "vendor_id" && host.vendor.empty()) host.vendor = value;
    if (key == "CPU implementer" && host.vendor.empty()) host.vendor = "ARM implementer " + value;
    if (key == "CPU part" && host.cpu_part.empty()) host.cpu_part = value;
    if (key == "cpu family" && host.family < 0) host.family = std::atoi(value.c_str());
    if (key == "model" && host.model_number < 0) host.model_number = std::atoi(value.c_str());
    if (key == "physical id") {
      physical = value;
      sockets.insert(value);
    }
    if (key == "core id") cores.insert(physical + ":" + value);
    if (key == "cpu MHz" && mhz == 0) mhz = std::atof(value.c_str());
    if ((key == "flags" || key == "Features") && host.flags.empty()) {
      std::istringstream words(value);
      for (std::string w; words >> w;) host.flags.push_back(w);
    }
  }
  host.sockets = std::max<int>(1, static_cast<int>(sockets.size()));
  host.cores = cores.empty() ? 0 : static_cast<int>(cores.size());
  if (host.model == "unknown" && !host.cpu_part.empty()) host.model = "ARM CPU part " + host.cpu_part;
}

int affinity_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  return sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 0;
}

}  // namespace

bool HostDescription::has(const std::string& flag) const {
  return std::find(flags.begin(), flags.end(), flag) != flags.end();
}

HostDescription describe_host(const std::string& root) {
  const fs::path base = root.empty() ? fs::path("/") : fs::path(root);
  const bool live = fs::equivalent(base, "/");
  HostDescription host;
  double mhz = 0;
  int processors = 0;
  parse_cpuinfo(read_text(base / "proc/cpuinfo"), host, mhz, processors);
  const std::string arch = read_text(base / "proc/sys/kernel/arch");
  host.architecture = !arch.empty() ? arch : host.has("asimd") ? "aarch64" : "x86_64";
  host.logical_cpus = std::max(1, live ? affinity_cpus() : processors);
  // SMT: cores counted from (package, core) pairs, capped at the CPUs this process may use
  if (host.cores <= 0) host.cores = std::max(1, processors);
  host.threads_per_core = std::max(1, processors / std::max(1, host.cores));
  host.cores = std::max(1, std::min(host.cores, host.logical_cpus));
  static const char* extensions[] = {"sse4_2",      "avx",         "avx2",        "fma",      "avx512f",
                                     "avx512_bf16", "avx512_vnni", "avx512_fp16", "avx_vnni", "amx_tile",
                                     "amx_bf16",    "amx_int8",    "asimd",       "asimdhp",  "asimddp",
                                     "bf16",        "i8mm",        "sve",         "sve2"};
  for (const char* e : extensions) {
    if (host.has(e)) host.isa.push_back(e);
  }
  // clock: cpufreq's maximum when readable, else what cpuinfo reports (a VM often shows only the TSC)
  const fs::path cpu0 = base / "sys/devices/system/cpu/cpu0";
  const double max_khz = std::atof(read_text(cpu0 / "cpufreq/cpuinfo_max_freq").c_str());
  if (max_khz > 0) {
    host.ghz = max_khz / 1e6;
    host.ghz_source = "cpufreq cpuinfo_max_freq";
  } else if (mhz > 0) {
    host.ghz = mhz / 1e3;
    host.ghz_source = "/proc/cpuinfo 'cpu MHz' (no cpufreq: the reported clock, not the boost clock)";
  } else {
    host.notes.push_back("no clock is readable (no cpufreq, no 'cpu MHz'): calibration measures it");
  }
  // caches of cpu0, smallest first
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(cpu0 / "cache", ec)) {
    if (entry.path().filename().string().rfind("index", 0) != 0) continue;
    HostCache c;
    c.type = read_text(entry.path() / "type");
    if (c.type == "Instruction") continue;
    c.level = std::atoi(read_text(entry.path() / "level").c_str());
    c.size_bytes = parse_size(read_text(entry.path() / "size"));
    c.shared_by_cpus = std::max(1, count_cpu_list(read_text(entry.path() / "shared_cpu_list")));
    c.instances = std::max(1, (std::max(processors, host.logical_cpus) + c.shared_by_cpus - 1) / c.shared_by_cpus);
    if (c.size_bytes == 0) continue;
    // no real cache gives each CPU sharing it more than 16 MiB (3D V-Cache: 12 MiB per core);
    // a VM that passes the host's whole L3 through does
    const std::uint64_t per_cpu = c.size_bytes / static_cast<std::uint64_t>(c.shared_by_cpus);
    const std::uint64_t limit = c.level == 1 ? (1u << 20) : c.level == 2 ? (64u << 20) : (16u << 20);
    if (per_cpu > limit) {
      c.plausible = false;
      host.notes.push_back(fmt::format(
          "L{} reports {} MiB shared by {} CPU(s), more than any real cache gives a CPU; calibration measures "
          "where bandwidth falls to memory speed instead",
          c.level, c.size_bytes >> 20, c.shared_by_cpus));
    }
    host.caches.push_back(c);
  }
  std::sort(host.caches.begin(), host.caches.end(),
            [](const HostCache& a, const HostCache& b) { return a.level < b.level; });
  // memory and NUMA
  std::istringstream meminfo(read_text(base / "proc/meminfo"));
  for (std::string key; meminfo >> key;) {
    std::uint64_t kb = 0;
    meminfo >> kb;
    if (key == "MemTotal:") host.memory_bytes = kb << 10;
    meminfo.ignore(1 << 20, '\n');
  }
  const std::string nodes = read_text(base / "sys/devices/system/node/online");
  host.numa_nodes = std::max(1, count_cpu_list(nodes));
  // virtual machine: the hypervisor CPUID bit, and its name where sysfs gives it
  host.virtualized = host.has("hypervisor");
  host.hypervisor = read_text(base / "sys/hypervisor/type");
  if (host.hypervisor.empty()) host.hypervisor = read_text(base / "sys/class/dmi/id/sys_vendor");
  if (host.hypervisor == "QEMU" || host.hypervisor == "KVM" || host.hypervisor == "xen" ||
      host.hypervisor == "Microsoft Corporation" || host.hypervisor == "Amazon EC2") {
    host.virtualized = true;
  }
  return host;
}

}  // namespace neuralcost
