// GPU calibration: checks, the CUDA plugin, the datasheet comparison (see gpu_calibration.hpp).
#include "neuralcost/calibrate/gpu_calibration.hpp"

#include <dlfcn.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "backends/plugin_backend.hpp"
#include "neuralcost/core/call_thread.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/gpu/cuda_devices.hpp"
#include "neuralcost/gpu/kernel_counters.hpp"
#include "neuralcost/gpu/power.hpp"
#include "neuralcost/hardware/database.hpp"
#include "neuralcost/measure/device.hpp"

namespace neuralcost {
namespace {

constexpr int kCudaPluginVersion = 1;
// the most a calibration (or the counter check) may take on the device: far more than its
// kernels should need (never measured here: no GPU has run this code yet)
constexpr std::chrono::seconds kGpuCallDeadline{600};

/// The spec field each ceiling is compared with; a rate above it cannot be true.
struct Datasheet {
  std::optional<double> value;
  std::string field;
};

Datasheet datasheet_for(const std::string& name, const HardwareSpec& s) {
  auto peak = [&](DType d) -> Datasheet {
    const auto it = s.peak_flops_per_second.find(d);
    if (it == s.peak_flops_per_second.end()) return {};
    return {it->second, fmt::format("peak_flops_per_second.{}", dtype_name(d))};
  };
  auto vector_or_peak = [&](DType d) -> Datasheet {
    const auto it = s.vector_flops_per_second.find(d);
    if (it != s.vector_flops_per_second.end())
      return {it->second, fmt::format("vector_flops_per_second.{}", dtype_name(d))};
    return peak(d);
  };
  if (name == "hbm_copy" || name == "hbm_triad" || name == "hbm_memcpy")
    return {s.memory_bandwidth_bytes_per_second, "memory_bandwidth_bytes_per_second"};
  if (name == "l2_read") {
    for (const CacheLevel& c : s.caches) {
      if (c.name == "L2" && c.bandwidth_bytes_per_second)
        return {*c.bandwidth_bytes_per_second, "caches.L2.bandwidth_bytes_per_second"};
    }
    return {};
  }
  if (name == "fp32_fma") return vector_or_peak(DType::kFp32);
  if (name == "fp64_fma") return vector_or_peak(DType::kFp64);
  if (name == "gemm_tf32") return peak(DType::kTf32);
  if (name == "gemm_bf16") return peak(DType::kBf16);
  if (name == "gemm_fp16") return peak(DType::kFp16);
  if (name == "gemm_fp8") return peak(DType::kFp8);
  if (name == "launch_floor" && s.kernel_launch_seconds) return {*s.kernel_launch_seconds, "kernel_launch_seconds"};
  return {};
}

}  // namespace

HardwareSpec measured_gpu_spec(const HardwareSpec& datasheet, const GpuCalibration& c) {
  HardwareSpec s = datasheet;
  s.name = datasheet.name + " (calibrated)";
  s.origin = "calibrated";
  const std::string on =
      fmt::format("measured on {} ({}) by hardware calibrate{}", c.device, c.gpu_name, c.quick ? " --quick" : "");
  double best_memory = 0;
  std::string memory_how;
  for (const GpuCeiling& g : c.ceilings) {
    if (g.above_datasheet) {
      s.notes.push_back(
          fmt::format("{} measured {:.4g} {}, above the datasheet: not believed, the datasheet's {} stays", g.name,
                      g.measured, g.unit, g.datasheet_field));
      continue;
    }
    const std::string source = fmt::format("{}: {} ({})", on, g.name, g.how);
    auto peak = [&](DType d) {
      s.peak_flops_per_second[d] = g.measured;
      s.sources[fmt::format("peak_flops_per_second.{}", dtype_name(d))] = source;
    };
    auto fma = [&](DType d) {
      // the FMA units' rate: the vector rate where the datasheet has one, else the peak
      if (s.vector_flops_per_second.count(d)) {
        s.vector_flops_per_second[d] = g.measured;
        s.sources[fmt::format("vector_flops_per_second.{}", dtype_name(d))] = source;
      } else {
        peak(d);
      }
    };
    if ((g.name == "hbm_copy" || g.name == "hbm_triad" || g.name == "hbm_memcpy") && g.measured > best_memory) {
      best_memory = g.measured;
      memory_how = source;
    } else if (g.name == "gemm_tf32") {
      peak(DType::kTf32);
    } else if (g.name == "gemm_bf16") {
      peak(DType::kBf16);
    } else if (g.name == "gemm_fp16") {
      peak(DType::kFp16);
    } else if (g.name == "gemm_fp8") {
      peak(DType::kFp8);
    } else if (g.name == "fp32_fma") {
      fma(DType::kFp32);
    } else if (g.name == "fp64_fma") {
      fma(DType::kFp64);
    } else if (g.name == "l2_read") {
      for (CacheLevel& level : s.caches) {
        if (level.name != "L2") continue;
        level.bandwidth_bytes_per_second = g.measured;
        s.sources["caches.L2.bandwidth_bytes_per_second"] = source;
      }
    } else if (g.name == "launch_floor") {
      s.kernel_launch_seconds = g.measured;
      s.sources["kernel_launch_seconds"] = source;
    }
  }
  if (best_memory > 0) {
    s.memory_bandwidth_bytes_per_second = best_memory;
    s.sources["memory_bandwidth_bytes_per_second"] = memory_how;
  }
  s.notes.push_back(fmt::format("ceilings {}; figures it did not measure are the datasheet's", on));
  return s;
}

bool cuda_plugin_built() {
#ifdef NEURALCOST_WITH_CUDA
  return true;
#else
  return false;
#endif
}

GpuCalibration parse_gpu_calibration(std::string_view text, const HardwareSpec* spec, const std::string& origin) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(ErrorCode::kDataLoss, fmt::format("{}: not JSON ({})", origin, e.what()));
  }
  auto fail = [&](const std::string& field, const std::string& what) {
    throw Error(ErrorCode::kDataLoss, fmt::format("{}: {} {}", origin, field, what));
  };
  if (!doc.is_object()) fail("the document", "must be an object");
  if (!doc.contains("device_name") || !doc["device_name"].is_string()) fail("device_name", "must be a string");
  if (!doc.contains("ceilings") || !doc["ceilings"].is_array()) fail("ceilings", "must be an array");
  GpuCalibration c;
  c.gpu_name = doc["device_name"].get<std::string>();
  if (doc.contains("compute_capability") && doc["compute_capability"].is_string()) {
    c.compute_capability = doc["compute_capability"].get<std::string>();
  }
  if (spec) c.spec_id = spec->id;
  for (std::size_t i = 0; i < doc["ceilings"].size(); ++i) {
    const nlohmann::json& e = doc["ceilings"][i];
    const std::string at = fmt::format("ceilings[{}]", i);
    if (!e.is_object() || !e.contains("name") || !e["name"].is_string()) fail(at + ".name", "must be a string");
    if (!e.contains("value") || !e["value"].is_number() || !std::isfinite(e["value"].get<double>()) ||
        e["value"].get<double>() <= 0) {
      fail(at + ".value", "must be a positive number");
    }
    GpuCeiling g;
    g.name = e["name"].get<std::string>();
    g.measured = e["value"].get<double>();
    g.unit = e.value("unit", "");
    g.how = e.value("how", "");
    if (spec) {
      const Datasheet d = datasheet_for(g.name, *spec);
      g.datasheet = d.value;
      g.datasheet_field = d.field;
      if (d.value && *d.value > 0) {
        g.ratio = g.measured / *d.value;
        // a rate can only be at or below its ceiling; the launch floor is a time, not a ceiling
        if (g.name != "launch_floor" && *g.ratio > 1.0) {
          g.above_datasheet = true;
          c.warnings.push_back(
              fmt::format("{} measured {:.4g} {}, {:.0f}% of the datasheet's {} ({:.4g}): above the "
                          "ceiling, so the measurement or the spec is wrong",
                          g.name, g.measured, g.unit, 100 * *g.ratio, d.field, *d.value));
        }
      }
    }
    c.ceilings.push_back(std::move(g));
  }
  if (doc.contains("skipped") && doc["skipped"].is_array()) {
    for (const nlohmann::json& s : doc["skipped"]) {
      if (s.is_object()) c.skipped.push_back(fmt::format("{}: {}", s.value("name", "?"), s.value("why", "")));
    }
  }
  if (!spec) {
    c.warnings.push_back(
        fmt::format("the built-in database names no GPU '{}': no datasheet to compare with", c.gpu_name));
  }
  return c;
}

std::vector<CounterCheck> parse_counter_check(std::string_view text, const std::string& origin) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(ErrorCode::kDataLoss, fmt::format("{}: not JSON ({})", origin, e.what()));
  }
  if (!doc.is_object() || !doc.contains("kernels") || !doc["kernels"].is_array()) {
    throw Error(ErrorCode::kDataLoss, fmt::format("{}: kernels must be an array", origin));
  }
  std::vector<CounterCheck> out;
  for (std::size_t i = 0; i < doc["kernels"].size(); ++i) {
    const nlohmann::json& k = doc["kernels"][i];
    const std::string at = fmt::format("{}: kernels[{}]", origin, i);
    if (!k.is_object() || !k.contains("metrics") || !k["metrics"].is_object()) {
      throw Error(ErrorCode::kDataLoss, at + ".metrics must be an object (the kernel was not profiled)");
    }
    auto metric = [&](const char* name) {
      const nlohmann::json& m = k["metrics"];
      if (!m.contains(name) || !m[name].is_number()) {
        throw Error(ErrorCode::kDataLoss, fmt::format("{}.metrics.{} must be a number", at, name));
      }
      return m[name].get<double>();
    };
    KernelCounters c;
    c.name = k.value("kernel", "?");
    c.fadd = metric("smsp__sass_thread_inst_executed_op_fadd_pred_on.sum");
    c.fmul = metric("smsp__sass_thread_inst_executed_op_fmul_pred_on.sum");
    c.ffma = metric("smsp__sass_thread_inst_executed_op_ffma_pred_on.sum");
    c.dram_bytes_read = metric("dram__bytes_read.sum");
    c.dram_bytes_written = metric("dram__bytes_write.sum");
    const double flops = kernel_flops(c).fp32;
    const double want_flops = k.value("expected_fp32_flops", 0.0), want_bytes = k.value("expected_dram_bytes", 0.0);
    auto row = [&](const char* what, double expected, double measured) {
      CounterCheck r{c.name, what, expected, measured, std::nullopt};
      if (expected > 0) r.ratio = measured / expected;
      out.push_back(r);
    };
    row("fp32 FLOPs", want_flops, flops);
    if (want_bytes > 0) row("DRAM bytes", want_bytes, c.dram_bytes_read + c.dram_bytes_written);
  }
  return out;
}

GpuCalibration calibrate_gpu(const Device& d, bool quick, bool counters) {
  const std::string device = d.name();
  if (!d.is_cuda()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--device {}: GPU calibration is for cuda:N; omit --device to calibrate the CPU", device));
  }
  if (const auto missing = cuda_device_missing(cuda_devices(), d.index())) throw Error(ErrorCode::kNotFound, *missing);
  if (!cuda_plugin_built()) {
    throw Error(ErrorCode::kUnimplemented,
                fmt::format("{}: CUDA toolkit not found at build time, so this neural-cost has no GPU calibration "
                            "kernels (rebuild with nvcc on PATH or CMAKE_CUDA_COMPILER set)",
                            device));
  }
  const std::string path = (std::filesystem::path(PluginBackend::plugin_directory()) / "neuralcost_cuda.so").string();
  void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* why = ::dlerror();
    throw Error(ErrorCode::kNotFound,
                fmt::format("{}: the CUDA plugin could not be loaded: {}", device, why ? why : path));
  }
  using Version = int (*)();
  using Calibrate = int (*)(int, int, char**, char**);
  using Free = void (*)(char*);
  auto version = reinterpret_cast<Version>(::dlsym(h, "neuralcost_cuda_plugin_version"));
  auto run = reinterpret_cast<Calibrate>(::dlsym(h, "neuralcost_cuda_calibrate"));
  auto release = reinterpret_cast<Free>(::dlsym(h, "neuralcost_cuda_free"));
  if (!version || !run || !release || version() != kCudaPluginVersion) {
    throw Error(ErrorCode::kNotFound,
                fmt::format("{}: the CUDA plugin {} is not version {} of its interface (rebuild it)", device, path,
                            kCudaPluginVersion));
  }
  // the kernels run in this process: a call that never returns (a hung kernel, a wedged driver)
  // fails the calibration at a deadline instead of hanging the command (core/call_thread.hpp)
  CallThread thread("the CUDA plugin");
  struct Answer {
    int rc = -1;
    std::string text, message;
  };
  const auto call = [release](const std::function<int(char**, char**)>& f) {
    auto answer = std::make_shared<Answer>();
    return std::make_pair(answer, [answer, f, release] {
      char* json = nullptr;
      char* error = nullptr;
      answer->rc = f(&json, &error);
      answer->text = json ? json : "";
      answer->message = error ? error : "";
      if (json) release(json);
      if (error) release(error);
    });
  };
  auto [calibrated, calibrate] =
      call([run, index = d.index(), quick](char** j, char** e) { return run(index, quick ? 1 : 0, j, e); });
  thread.run(calibrate, kGpuCallDeadline, fmt::format("GPU calibration on {}", device));
  const std::string text = calibrated->text;
  record_gpu_file("calibration_plugin.json", text);
  if (calibrated->rc != 0) {
    throw Error(ErrorCode::kInternal, fmt::format("{}: GPU calibration failed: {}", device, calibrated->message));
  }
  std::vector<CounterCheck> checks;
  if (counters) {
    using Check = int (*)(int, char**, char**);
    auto check = reinterpret_cast<Check>(::dlsym(h, "neuralcost_cuda_counter_check"));
    if (!check)
      throw Error(ErrorCode::kNotFound, fmt::format("{}: the CUDA plugin {} has no counter check", device, path));
    auto [checked, run_check] = call([check, index = d.index()](char** j, char** e) { return check(index, j, e); });
    thread.run(run_check, kGpuCallDeadline, fmt::format("the counter check on {}", device));
    if (checked->rc != 0) {
      throw Error(ErrorCode::kNotFound,
                  fmt::format("{}: hardware counters not available here: {}", device, checked->message));
    }
    record_gpu_file("counter_check.json", checked->text);
    checks = parse_counter_check(checked->text, path);
  }
  const HardwareDatabase& db = HardwareDatabase::builtin();
  std::string name;
  for (const CudaDeviceInfo& info : cuda_devices().devices) {
    if (info.index == d.index()) name = info.name;
  }
  const HardwareSpec* spec = db.find_device_name(name);
  GpuCalibration c = parse_gpu_calibration(text, spec, path);
  c.device = device;
  c.quick = quick;
  c.counter_checks = std::move(checks);
  return c;
}

}  // namespace neuralcost
