// `neural-cost hardware list|show|detect|calibrate`: the built-in hardware database, user spec
// files, and this machine (detected; calibrated and cached for --hardware host).
#include <cstdio>
#include <memory>

#include "commands.hpp"
#include "neuralcost/calibrate/calibrate.hpp"

namespace neuralcost::cli {

void add_hardware_command(CLI::App& app) {
  CLI::App* hw = app.add_subcommand("hardware", "The hardware database, and this machine: list, show, detect, calibrate");
  hw->require_subcommand(1);

  auto list_format = std::make_shared<std::string>("table");
  CLI::App* list = hw->add_subcommand("list", "List the built-in hardware specs");
  add_format_option(*list, *list_format);
  list->callback([list_format] {
    emit(render_hardware_list(HardwareDatabase::builtin().specs(), *parse_format(*list_format)), "");
  });

  auto show_id = std::make_shared<std::string>();
  auto show_format = std::make_shared<std::string>("table");
  CLI::App* show = hw->add_subcommand("show", "Show one spec with the source of every number");
  show->add_option("id", *show_id,
                   "Hardware id or alias, a spec JSON file, host (this machine, calibrated) or host-spec (its "
                   "theoretical peaks)")
      ->required();
  add_format_option(*show, *show_format);
  show->callback([show_id, show_format] {
    emit(render_hardware(hardware_for(*show_id), *parse_format(*show_format)), "");
  });

  auto detect_format = std::make_shared<std::string>("table");
  CLI::App* detect = hw->add_subcommand(
      "detect", "What this machine is: CPU, cores, ISA, clock, caches, memory, NUMA, VM (from /proc and sysfs)");
  add_format_option(*detect, *detect_format);
  detect->callback([detect_format] { emit(render_host(describe_host(), *parse_format(*detect_format)), ""); });

  struct CalibrateArgs {
    bool quick = false;
    int threads = 0;
    std::string format = "table";
    std::string output;
  };
  auto cal = std::make_shared<CalibrateArgs>();
  CLI::App* calibrate_cmd = hw->add_subcommand(
      "calibrate", "Measure this machine's ceilings (bandwidth per cache level and DRAM, FMA peaks, GEMM) and "
                   "cache them for --hardware host");
  calibrate_cmd->add_flag("--quick", cal->quick, "Fewer repetitions and smaller GEMMs (under 10 s instead of 60 s)");
  calibrate_cmd->add_option("--threads", cal->threads, "Threads (default: one per CPU this process may use)")
      ->check(CLI::Range(1, 4096));
  add_format_option(*calibrate_cmd, cal->format);
  calibrate_cmd->add_option("-o,--output", cal->output, "Write the result to FILE (atomically) instead of stdout");
  calibrate_cmd->callback([cal] {
    const Format format = *parse_format(cal->format);
    CalibrationOptions options;
    options.quick = cal->quick;
    options.threads = cal->threads;
    const Calibration c = calibrate(describe_host(), options);
    save_calibration(c);
    std::fprintf(stderr, "note: saved to %s; --hardware host uses it\n", calibration_cache_path().c_str());
    emit(render_calibration(c, format), cal->output);
  });
}

}  // namespace neuralcost::cli
