// `neural-cost hardware list|show|detect|calibrate`: the built-in hardware database, user spec
// files, and this machine (detected; calibrated and cached for --hardware host).
#include <cstdio>
#include <memory>

#include <fmt/format.h>

#include "commands.hpp"
#include "neuralcost/calibrate/calibrate.hpp"
#include "neuralcost/calibrate/collective_calibration.hpp"
#include "neuralcost/calibrate/gpu_calibration.hpp"
#include "neuralcost/core/atomic_file.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/core/interrupt.hpp"
#include "neuralcost/gpu/cuda_devices.hpp"
#include "neuralcost/measure/device.hpp"
#include "neuralcost/report/link_views.hpp"
#include "neuralcost/training/memory.hpp"

namespace neuralcost::cli {
namespace {

/// `hardware calibrate --collectives`: the options that do not apply are errors.
void run_collective_calibration(const CLI::App& cmd, const std::vector<int>& ranks, const std::string& max_bytes,
                                int rounds, double after_compute_ms, const std::string& spec_output, Format format,
                                const std::string& output) {
  for (const char* other : {"--quick", "--force", "--threads", "--device", "--counters"}) {
    if (cmd.count(other) > 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{} does not apply to --collectives (it measures the link between local processes "
                              "on gloo; NCCL sweeps on GPUs are not built yet)",
                              other));
    }
  }
  CollectiveCalibrationOptions options;
  options.ranks = ranks;
  options.rounds = rounds;
  if (!(after_compute_ms >= 0 && after_compute_ms <= 10000)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--after-compute {} must be from 0 to 10000 milliseconds", after_compute_ms));
  }
  options.after_compute_seconds = after_compute_ms / 1000;
  try {
    options.max_bytes = static_cast<double>(parse_memory_size(max_bytes));
  } catch (const Error& e) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--max-bytes '{}' is not a size such as 64MiB or 1GB", max_bytes));
  }
  // what the sweep writes, checked before minutes of measuring; Ctrl-C ends the workers
  check_output_path(output, "-o");
  check_output_path(spec_output, "--spec-output");
  install_interrupt_handlers();
  const CollectiveCalibration c = calibrate_collectives(options);
  emit(render_collective_calibration(c, format), output);
  if (!spec_output.empty()) {
    write_file_atomically(spec_output, interconnect_spec_json(c.link));
    std::fprintf(stderr, "note: wrote the interconnect spec to %s\n", spec_output.c_str());
  }
}

}  // namespace

void add_hardware_command(CLI::App& app) {
  CLI::App* hw = app.add_subcommand("hardware",
                                    "The hardware database, its links and systems, and this machine: list, show, "
                                    "interconnects, systems, detect, calibrate");
  hw->require_subcommand(1);

  auto list_format = std::make_shared<std::string>("table");
  CLI::App* list = hw->add_subcommand("list", "List the built-in hardware specs");
  add_format_option(*list, *list_format);
  list->callback([list_format] {
    emit(render_hardware_list(HardwareDatabase::builtin().specs(), *parse_format(*list_format)), "");
  });

  auto show_id = std::make_shared<std::string>();
  auto show_format = std::make_shared<std::string>("table");
  auto show_threads = std::make_shared<int>(0);
  CLI::App* show = hw->add_subcommand("show", "Show one spec with the source of every number");
  show->add_option("id", *show_id,
                   "Hardware id or alias, a spec JSON file, host (this machine, calibrated) or host-spec (its "
                   "theoretical peaks at the CPU's documented clock)")
      ->required();
  show->add_option("--threads", *show_threads,
                   "host, host-spec: the ceilings of the cores N threads use (0: every CPU this process may use)")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str();
  add_format_option(*show, *show_format);
  show->callback([show_id, show_format, show_threads] {
    emit(render_hardware(hardware_for(*show_id, *show_threads), *parse_format(*show_format)), "");
  });

  auto links_format = std::make_shared<std::string>("table");
  CLI::App* links = hw->add_subcommand(
      "interconnects", "The built-in links between devices: line rate, achieved bus bandwidth, latency (with sources)");
  add_format_option(*links, *links_format);
  links->callback(
      [links_format] { emit(render_interconnects(builtin_interconnects(), *parse_format(*links_format)), ""); });
  auto systems_format = std::make_shared<std::string>("table");
  CLI::App* systems = hw->add_subcommand("systems", "The built-in systems: device, devices per node, links, NICs");
  add_format_option(*systems, *systems_format);
  systems->callback([systems_format] { emit(render_systems(builtin_systems(), *parse_format(*systems_format)), ""); });

  auto detect_format = std::make_shared<std::string>("table");
  CLI::App* detect = hw->add_subcommand(
      "detect",
      "What this machine is: CPU, cores, ISA, clock, caches, memory, NUMA, VM (from /proc and sysfs), and its CUDA "
      "GPUs as the NVIDIA driver reports them (or why there are none)");
  add_format_option(*detect, *detect_format);
  detect->callback(
      [detect_format] { emit(render_host(describe_host(), *parse_format(*detect_format), &cuda_devices()), ""); });

  struct CalibrateArgs {
    bool quick = false;
    bool force = false;
    bool counters = false;
    int threads = 0;
    std::string device = "cpu";
    std::string format = "table";
    std::string output;
    std::string spec_output;
    bool collectives = false;
    std::vector<int> ranks = {2, 3};
    std::string max_bytes = "256MiB";
    int rounds = 11;
    double after_compute_ms = 0;
  };
  auto cal = std::make_shared<CalibrateArgs>();
  CLI::App* calibrate_cmd = hw->add_subcommand(
      "calibrate",
      "Measure this machine's ceilings (bandwidth per cache level and DRAM, FMA peaks, GEMM) in interleaved rounds "
      "until the best rounds agree, and cache them for --hardware host (one calibration per thread count). The "
      "load of the machine is read before and during the measurement: a calibration taken while other processes "
      "ran, or whose rounds disagree, is printed but not saved (exit code 1) unless --force");
  calibrate_cmd->add_flag(
      "--quick", cal->quick,
      "Fewer runs per round and smaller GEMMs (on an idle 2-vCPU VM about 4 s instead of 6 to 9 s)");
  calibrate_cmd->add_flag("--force", cal->force,
                          "Save the calibration even when the machine was busy or the rounds disagree (the reasons "
                          "stay in its warnings)");
  calibrate_cmd
      ->add_option("--threads", cal->threads,
                   "Threads, one pinned per CPU: the ceilings of a run of N threads (default: one per CPU "
                   "this process may use)")
      ->check(CLI::Range(1, 4096));
  calibrate_cmd
      ->add_option("--device", cal->device,
                   "cpu (this machine's CPU), or cuda:N: the GPU's HBM copy and triad, L2, FP32/FP64 FMA, "
                   "cuBLASLt GEMM peaks (tf32, bf16, fp16, fp8) and launch floor beside its datasheet (needs "
                   "the NVIDIA driver, and nvcc when neural-cost was built; not cached)")
      ->capture_default_str();
  calibrate_cmd->add_flag("--counters", cal->counters,
                          "With --device cuda:N: also check the GPU's hardware counters (CUPTI) on kernels whose FLOPs "
                          "and DRAM bytes are known");
  calibrate_cmd->add_option("--spec-output", cal->spec_output,
                            "With --device cuda:N: also write the GPU's spec with the measured ceilings in place of "
                            "the datasheet's to FILE, for --hardware FILE; with --collectives: the interconnect spec");
  calibrate_cmd->add_flag("--collectives", cal->collectives,
                          "Calibrate the link instead: sweep all-reduce, reduce-scatter, all-gather, all-to-all and "
                          "broadcast from 4 B to --max-bytes on torch.distributed (gloo, --ranks local processes), "
                          "fit an α-β model per size segment on every other size, report its error on the sizes "
                          "between, and write the interconnect spec to --spec-output (docs/distributed.md)");
  calibrate_cmd->add_option("--ranks", cal->ranks, "With --collectives: the rank counts to sweep (each at least 2)")
      ->delimiter(',')
      ->capture_default_str();
  calibrate_cmd
      ->add_option("--max-bytes", cal->max_bytes,
                   "With --collectives: the largest size, e.g. 64MiB (sizes are 4 B × 2^k up to it)")
      ->capture_default_str();
  calibrate_cmd->add_option("--rounds", cal->rounds, "With --collectives: timed rounds per size (the median counts)")
      ->check(CLI::Range(3, 1000))
      ->capture_default_str();
  calibrate_cmd->add_option("--after-compute", cal->after_compute_ms,
                            "With --collectives: time one call a round, issued after this many milliseconds of "
                            "compute on every rank, as a training step issues its collectives (default 0: calls "
                            "back to back, the link at its best)");
  add_format_option(*calibrate_cmd, cal->format);
  calibrate_cmd->add_option("-o,--output", cal->output, "Write the result to FILE (atomically) instead of stdout");
  calibrate_cmd->callback([cal, calibrate_cmd] {
    const Format format = *parse_format(cal->format);
    check_output_path(cal->output, "-o");
    check_output_path(cal->spec_output, "--spec-output");
    if (cal->collectives) {
      run_collective_calibration(*calibrate_cmd, cal->ranks, cal->max_bytes, cal->rounds, cal->after_compute_ms,
                                 cal->spec_output, format, cal->output);
      return;
    }
    for (const char* only : {"--ranks", "--max-bytes", "--rounds", "--after-compute"}) {
      if (calibrate_cmd->count(only) > 0) {
        throw Error(ErrorCode::kInvalidArgument, fmt::format("{} is for --collectives", only));
      }
    }
    const Device device = Device::parse(cal->device);
    if (device.is_cuda()) {
      for (const char* cpu_only : {"--threads", "--force"}) {
        if (calibrate_cmd->count(cpu_only) > 0) {
          throw Error(ErrorCode::kInvalidArgument,
                      fmt::format("{} is for the CPU's calibration, not --device {}", cpu_only, cal->device));
        }
      }
      const GpuCalibration c = calibrate_gpu(device, cal->quick, cal->counters);
      emit(render_gpu_calibration(c, format), cal->output);
      if (!cal->spec_output.empty()) {
        const HardwareSpec* datasheet = HardwareDatabase::builtin().find(c.spec_id);
        if (!datasheet) {
          throw Error(ErrorCode::kNotFound, fmt::format("--spec-output: the built-in database names no GPU '{}', so "
                                                        "there is no spec to put the measurements in",
                                                        c.gpu_name));
        }
        emit(render_hardware(measured_gpu_spec(*datasheet, c), Format::kJson), cal->spec_output);
      }
      return;
    }
    if (!cal->spec_output.empty())
      throw Error(ErrorCode::kInvalidArgument, "--spec-output is for --device cuda:N or --collectives");
    if (cal->counters) throw Error(ErrorCode::kInvalidArgument, "--counters is for --device cuda:N, not the CPU");
    CalibrationOptions options;
    options.quick = cal->quick;
    options.threads = cal->threads;
    const HostDescription host = describe_host();
    // one calibration of these threads at a time: side by side they take each other's cores
    const CalibrationLock lock(calibration_threads(host, cal->threads), kCalibrationLockSeconds);
    if (lock.waited_seconds() > 0) {
      std::fprintf(stderr, "note: waited %.1f s for another calibration of this CPU to finish\n",
                   lock.waited_seconds());
    }
    Calibration c = calibrate(host, options);
    const std::vector<std::string> doubts = why_not_cacheable(c);
    if (!doubts.empty() && cal->force) {
      for (const std::string& d : doubts) c.warnings.push_back("saved with --force although " + d);
    }
    emit(render_calibration(c, format), cal->output);
    if (doubts.empty() || cal->force) {
      try {
        if (!lock.held()) throw Error(ErrorCode::kDataLoss, lock.why_not());
        save_calibration(c);
      } catch (const Error& e) {
        throw Error(e.code(), fmt::format("calibration not saved: {} (the result is {})", e.what(),
                                          cal->output.empty() ? "printed above" : "in " + cal->output));
      }
      std::fprintf(stderr, "note: saved to %s; --hardware host uses it for runs of %d thread%s\n",
                   calibration_cache_path(c.threads).c_str(), c.threads, c.threads == 1 ? "" : "s");
      return;
    }
    std::string why;
    for (const std::string& d : doubts) why += (why.empty() ? "" : "; ") + d;
    throw Error(ErrorCode::kResourceExhausted,
                fmt::format("calibration not saved: {}. Add --force to save it anyway", why));
  });
}

}  // namespace neuralcost::cli
