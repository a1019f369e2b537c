// Counter arithmetic, the counter record, kernels to layers (see kernel_counters.hpp). These are
// FLOPs of executed instructions (what the hardware did), not of ops: the cost model's rules for
// ops stay in src/cost/, and compare_layers sets the two side by side.
#include "neuralcost/gpu/kernel_counters.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "neuralcost/core/error.hpp"

namespace neuralcost {
namespace {

constexpr std::string_view kPtxMma = "PTX ISA, mma.sync shapes: one warp-wide instruction does m x n x k multiply-adds";
constexpr std::string_view kPtxWgmma =
    "PTX ISA, wgmma.mma_async .m64nNk16 (k8 for tf32): one warpgroup instruction does 64 x N x k multiply-adds; "
    "the profiler counts it once per warp, 4 per warpgroup instruction (measured on an H200 with ncu's "
    "sass__inst_executed_per_opcode, 2026-12-04: a 4096^3 bf16 GEMM of m64n128k16 instructions executed "
    "2,097,152 HGMMA = 4 x 2 x 4096^3 / (2 x 64 x 128 x 16))";
// a warpgroup is 4 warps, and each of them counts the warpgroup's instruction
constexpr double kWarpsPerWarpgroup = 4;

// FLOPs = 2 x m x n x k per instruction (per counted warp for HGMMA)
constexpr std::array kTensorInstructions{
    TensorInstruction{"HMMA.16816.F32", DType::kFp16, 2.0 * 16 * 8 * 16, "warp", kPtxMma},
    TensorInstruction{"HMMA.16816.F32.BF16", DType::kBf16, 2.0 * 16 * 8 * 16, "warp", kPtxMma},
    TensorInstruction{"HMMA.16816.F16", DType::kFp16, 2.0 * 16 * 8 * 16, "warp", kPtxMma},
    TensorInstruction{"HMMA.1688.F32", DType::kFp16, 2.0 * 16 * 8 * 8, "warp", kPtxMma},
    TensorInstruction{"HMMA.1688.F32.TF32", DType::kTf32, 2.0 * 16 * 8 * 8, "warp", kPtxMma},
    TensorInstruction{"HMMA.1684.F32.TF32", DType::kTf32, 2.0 * 16 * 8 * 4, "warp", kPtxMma},
    TensorInstruction{"DMMA.884", DType::kFp64, 2.0 * 8 * 8 * 4, "warp", kPtxMma},
    TensorInstruction{"IMMA.16832.S8.S8", DType::kInt8, 2.0 * 16 * 8 * 32, "warp", kPtxMma},
    TensorInstruction{"HGMMA.64x64x16.F32.BF16", DType::kBf16, 2.0 * 64 * 64 * 16 / kWarpsPerWarpgroup, "warp",
                      kPtxWgmma},
    TensorInstruction{"HGMMA.64x128x16.F32.BF16", DType::kBf16, 2.0 * 64 * 128 * 16 / kWarpsPerWarpgroup, "warp",
                      kPtxWgmma},
    TensorInstruction{"HGMMA.64x256x16.F32.BF16", DType::kBf16, 2.0 * 64 * 256 * 16 / kWarpsPerWarpgroup, "warp",
                      kPtxWgmma},
    TensorInstruction{"HGMMA.64x64x16.F32", DType::kFp16, 2.0 * 64 * 64 * 16 / kWarpsPerWarpgroup, "warp", kPtxWgmma},
    TensorInstruction{"HGMMA.64x128x16.F32", DType::kFp16, 2.0 * 64 * 128 * 16 / kWarpsPerWarpgroup, "warp", kPtxWgmma},
    TensorInstruction{"HGMMA.64x256x16.F32", DType::kFp16, 2.0 * 64 * 256 * 16 / kWarpsPerWarpgroup, "warp", kPtxWgmma},
    TensorInstruction{"HGMMA.64x128x8.F32.TF32", DType::kTf32, 2.0 * 64 * 128 * 8 / kWarpsPerWarpgroup, "warp",
                      kPtxWgmma},
};

/// Reads fields of one JSON object, naming the file and path in every error.
struct Reader {
  const std::string& origin;
  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    throw Error(ErrorCode::kDataLoss, fmt::format("{}: {} {}", origin, path, what));
  }
  double count(const nlohmann::json& o, const std::string& key, const std::string& path, bool required = false) const {
    if (!o.contains(key)) {
      if (required) fail(path + "." + key, "is missing");
      return 0;
    }
    const nlohmann::json& v = o[key];
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0) {
      fail(path + "." + key, "must be a non-negative number");
    }
    return v.get<double>();
  }
  std::string text(const nlohmann::json& o, const std::string& key, const std::string& path) const {
    if (!o.contains(key) || !o[key].is_string()) fail(path + "." + key, "must be a string");
    return o[key].get<std::string>();
  }
  const nlohmann::json& array(const nlohmann::json& o, const std::string& key) const {
    if (!o.contains(key) || !o[key].is_array()) fail(key, "must be an array");
    return o[key];
  }
};

}  // namespace

std::span<const TensorInstruction> tensor_instructions() { return kTensorInstructions; }

const TensorInstruction* find_tensor_instruction(std::string_view name) {
  for (const TensorInstruction& t : kTensorInstructions) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

KernelFlops kernel_flops(const KernelCounters& k) {
  KernelFlops f;
  f.fp32 = k.fadd + k.fmul + 2 * k.ffma;
  f.fp64 = k.dadd + k.dmul + 2 * k.dfma;
  for (const auto& [name, count] : k.tensor) {
    if (const TensorInstruction* t = find_tensor_instruction(name)) {
      f.tensor += count * t->flops;
    } else if (count > 0) {
      f.unweighted.push_back(name);
    }
  }
  return f;
}

std::optional<double> LayerCounters::arithmetic_intensity() const {
  if (dram_bytes() <= 0) return std::nullopt;
  return flops / dram_bytes();
}

CounterRecord parse_counter_record(std::string_view json_text, const std::string& origin) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(ErrorCode::kDataLoss, fmt::format("{}: not JSON ({})", origin, e.what()));
  }
  const Reader r{origin};
  if (!doc.is_object()) r.fail("the document", "must be an object");
  if (doc.value("format", "") != "neuralcost-gpu-counters") r.fail("format", "must be \"neuralcost-gpu-counters\"");
  if (!doc.contains("version") || doc["version"] != 1) r.fail("version", "must be 1 (the only version this reads)");
  CounterRecord rec;
  rec.source = r.text(doc, "source", "");
  rec.device = r.text(doc, "device", "");
  const nlohmann::json& ranges = r.array(doc, "ranges");
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    const std::string path = fmt::format("ranges[{}]", i);
    const nlohmann::json& o = ranges[i];
    if (!o.is_object()) r.fail(path, "must be an object");
    ProfilerRange p{r.text(o, "name", path), static_cast<std::uint64_t>(r.count(o, "thread", path)),
                    r.count(o, "start_ns", path, true), r.count(o, "end_ns", path, true)};
    if (p.end_ns < p.start_ns) r.fail(path, "ends before it starts");
    rec.ranges.push_back(std::move(p));
  }
  const nlohmann::json& launches = r.array(doc, "launches");
  std::set<std::uint64_t> ids;
  for (std::size_t i = 0; i < launches.size(); ++i) {
    const std::string path = fmt::format("launches[{}]", i);
    const nlohmann::json& o = launches[i];
    if (!o.is_object()) r.fail(path, "must be an object");
    KernelLaunch l{static_cast<std::uint64_t>(r.count(o, "correlation_id", path, true)),
                   static_cast<std::uint64_t>(r.count(o, "thread", path)), r.count(o, "start_ns", path, true)};
    if (!ids.insert(l.correlation_id).second) r.fail(path + ".correlation_id", "repeats an earlier launch's");
    rec.launches.push_back(l);
  }
  const nlohmann::json& kernels = r.array(doc, "kernels");
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    const std::string path = fmt::format("kernels[{}]", i);
    const nlohmann::json& o = kernels[i];
    if (!o.is_object()) r.fail(path, "must be an object");
    KernelCounters k;
    k.name = r.text(o, "name", path);
    k.correlation_id = static_cast<std::uint64_t>(r.count(o, "correlation_id", path, true));
    k.start_ns = r.count(o, "start_ns", path, true);
    k.end_ns = r.count(o, "end_ns", path, true);
    if (k.end_ns < k.start_ns) r.fail(path, "ends before it starts");
    k.fadd = r.count(o, "fadd", path);
    k.fmul = r.count(o, "fmul", path);
    k.ffma = r.count(o, "ffma", path);
    k.dadd = r.count(o, "dadd", path);
    k.dmul = r.count(o, "dmul", path);
    k.dfma = r.count(o, "dfma", path);
    k.dram_bytes_read = r.count(o, "dram_bytes_read", path, true);
    k.dram_bytes_written = r.count(o, "dram_bytes_written", path, true);
    k.l2_bytes = r.count(o, "l2_bytes", path);
    k.cycles = r.count(o, "cycles", path);
    if (o.contains("tensor")) {
      if (!o["tensor"].is_object()) r.fail(path + ".tensor", "must be an object of instruction counts");
      for (const auto& [name, v] : o["tensor"].items()) k.tensor[name] = r.count(o["tensor"], name, path + ".tensor");
    }
    rec.kernels.push_back(std::move(k));
  }
  return rec;
}

KernelAttribution attribute_kernels(const CounterRecord& record, RangeLevel level) {
  KernelAttribution out;
  std::map<std::uint64_t, const KernelLaunch*> launch_of;
  for (const KernelLaunch& l : record.launches) launch_of[l.correlation_id] = &l;
  // the instance name of each range: "name", "name#2", ... by start time among equal names
  std::vector<std::size_t> order(record.ranges.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return record.ranges[a].start_ns < record.ranges[b].start_ns; });
  std::vector<std::string> instance(record.ranges.size());
  std::map<std::string, int> seen;
  for (std::size_t i : order) {
    const int n = ++seen[record.ranges[i].name];
    instance[i] = n == 1 ? record.ranges[i].name : fmt::format("{}#{}", record.ranges[i].name, n);
  }
  // kernels in launch order, so that layers come out in the order the model ran them
  std::vector<const KernelCounters*> kernels;
  for (const KernelCounters& k : record.kernels) kernels.push_back(&k);
  auto launch_time = [&](const KernelCounters* k) {
    const auto it = launch_of.find(k->correlation_id);
    return it == launch_of.end() ? k->start_ns : it->second->start_ns;
  };
  std::stable_sort(kernels.begin(), kernels.end(),
                   [&](const KernelCounters* a, const KernelCounters* b) { return launch_time(a) < launch_time(b); });
  std::map<std::string, std::size_t> row_of;
  std::map<std::string, std::set<std::string>> unweighted_of;
  for (const KernelCounters* k : kernels) {
    const KernelFlops f = kernel_flops(*k);
    const auto it = launch_of.find(k->correlation_id);
    if (it == launch_of.end()) {
      out.unattributed.push_back(
          fmt::format("{} (correlation id {}): no launch with its correlation id", k->name, k->correlation_id));
      out.unattributed_flops += f.total();
      continue;
    }
    const KernelLaunch& l = *it->second;
    std::optional<std::size_t> chosen;
    for (std::size_t i = 0; i < record.ranges.size(); ++i) {
      const ProfilerRange& r = record.ranges[i];
      if (r.thread != l.thread || l.start_ns < r.start_ns || l.start_ns > r.end_ns) continue;
      if (!chosen) {
        chosen = i;
        continue;
      }
      const ProfilerRange& c = record.ranges[*chosen];
      // outermost: the longest enclosing range; innermost: the shortest
      const double len = r.end_ns - r.start_ns, clen = c.end_ns - c.start_ns;
      if (level == RangeLevel::kOutermost ? len > clen : len < clen) chosen = i;
    }
    if (!chosen) {
      out.unattributed.push_back(
          fmt::format("{} (correlation id {}): launched outside every range", k->name, k->correlation_id));
      out.unattributed_flops += f.total();
      continue;
    }
    const std::string& name = instance[*chosen];
    auto [row, added] = row_of.try_emplace(name, out.layers.size());
    if (added) {
      out.layers.emplace_back();
      out.layers.back().name = name;
    }
    LayerCounters& layer = out.layers[row->second];
    ++layer.kernels;
    layer.flops += f.total();
    layer.tensor_flops += f.tensor;
    layer.dram_bytes_read += k->dram_bytes_read;
    layer.dram_bytes_written += k->dram_bytes_written;
    layer.l2_bytes += k->l2_bytes;
    layer.kernel_seconds += (k->end_ns - k->start_ns) * 1e-9;
    layer.cycles += k->cycles;
    for (const std::string& u : f.unweighted) {
      if (unweighted_of[name].insert(u).second) layer.unweighted.push_back(u);
    }
  }
  return out;
}

std::vector<LayerComparison> compare_layers(const KernelAttribution& measured, const std::vector<CountedLayer>& counted,
                                            const HardwareSpec* spec, DType dtype) {
  std::vector<LayerComparison> rows;
  std::map<std::string, const LayerCounters*> by_name;
  for (const LayerCounters& l : measured.layers) by_name[l.name] = &l;
  std::set<std::string> used;
  auto fill_measured = [&](LayerComparison& row, const LayerCounters& m) {
    row.measured_flops = m.flops;
    row.measured_dram_bytes = m.dram_bytes();
    row.measured_intensity = m.arithmetic_intensity();
    if (m.kernel_seconds > 0) row.measured_flops_per_second = m.flops / m.kernel_seconds;
    if (spec && row.measured_intensity) {
      const auto peak = spec->peak_flops_per_second.find(dtype);
      if (peak != spec->peak_flops_per_second.end()) {
        row.attainable_flops_per_second =
            std::min(peak->second, *row.measured_intensity * spec->memory_bandwidth_bytes_per_second);
        if (row.measured_flops_per_second && *row.attainable_flops_per_second > 0) {
          row.efficiency = *row.measured_flops_per_second / *row.attainable_flops_per_second;
        }
      }
    }
  };
  for (const CountedLayer& c : counted) {
    LayerComparison row;
    row.name = c.name;
    row.counted_flops = c.flops;
    row.counted_bytes = c.bytes;
    if (const auto it = by_name.find(c.name); it != by_name.end()) {
      used.insert(c.name);
      fill_measured(row, *it->second);
      if (c.flops > 0) row.flops_ratio = *row.measured_flops / c.flops;
    }
    rows.push_back(std::move(row));
  }
  for (const LayerCounters& m : measured.layers) {
    if (used.count(m.name)) continue;
    LayerComparison row;
    row.name = m.name;
    fill_measured(row, m);
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace neuralcost
