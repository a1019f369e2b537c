// neural-cost: counts what a network asks of the machine and places it on the hardware's
// roofline. Argument parsing and printing only; the work is in the neuralcost library.
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <new>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "commands.hpp"
#include "neuralcost/calibrate/calibrate.hpp"
#include "neuralcost/core/atomic_file.hpp"
#include "neuralcost/core/call_thread.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/core/interrupt.hpp"
#include "neuralcost/version.hpp"

namespace neuralcost::cli {

void emit(const std::string& text, const std::string& output) {
  if (output.empty()) {
    fmt::print("{}", text);
  } else {
    write_file_atomically(output, text);
  }
}

void refuse_output_over_inputs(const std::string& output, std::initializer_list<std::string> inputs) {
  if (output.empty()) return;
  for (const std::string& input : inputs) {
    std::error_code ec;
    if (!input.empty() && std::filesystem::equivalent(output, input, ec) && !ec) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("-o {} is an input of this command: writing there would replace it", output));
    }
  }
}

void check_output_path(const std::string& path, const char* option) {
  if (path.empty()) return;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{} {}: is a directory, not a file", option, path));
  }
  // a device or pipe (/dev/stdout) is written in place
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec)) return;
  // the atomic write makes a temporary file beside it: make one now (root passes access() on /proc)
  const std::filesystem::path parent = std::filesystem::absolute(path, ec).parent_path();
  std::string probe = (parent / ".neural-cost-write-check-XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  if (fd < 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{} {}: cannot be written ({}: {})", option, path, parent.string(), std::strerror(errno)));
  }
  ::close(fd);
  ::unlink(probe.c_str());
  if (std::filesystem::exists(path, ec) && ::access(path.c_str(), W_OK) != 0) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{} {}: cannot be written", option, path));
  }
}

HardwareSpec hardware_for(const std::string& id_or_path, int threads) {
  const ResolvedHardware resolved = resolve_hardware(id_or_path, threads);
  if (resolved.source != HardwareSource::kNeedsCalibration) return *resolved.spec;
  // host with nothing usable cached: calibrating takes seconds, so say so on stderr
  std::string status;
  HardwareSpec spec = calibrate_if_needed(resolved, status);
  fmt::print(stderr, "note: {}\n", status);
  return spec;
}

void add_format_option(CLI::App& command, std::string& format, const std::string& html) {
  std::vector<std::string> names{"table", "json", "csv", "md", "markdown"};
  if (!html.empty()) names.push_back("html");
  command.add_option("--format", format, "Output format: table, json, csv, md" + (html.empty() ? "" : ", " + html))
      ->check(CLI::IsMember(names))
      ->capture_default_str();
}

void refuse_given(const CLI::App& command, std::initializer_list<const char*> options, const std::string& why) {
  for (const char* option : options) {
    if (command.count(option) > 0) throw Error(ErrorCode::kInvalidArgument, std::string(option) + why);
  }
}

Format output_format(const CLI::App& command, const std::string& format, const std::string& output) {
  if (command.count("--format") == 0 && !output.empty()) {
    if (const auto by_extension = format_for_path(output)) return *by_extension;
  }
  return *parse_format(format);
}

}  // namespace neuralcost::cli

namespace {

/// Room for the way out of an allocation failure. A failed allocation unwinds through
/// destructors, and nlohmann::json's allocates (the stack it frees a tree with): when that
/// fails too, the process ends in std::terminate instead of an error line (issue 13: a results
/// line of a million values under an address-space limit). The first failure frees this
/// reserve and fails as usual, so what unwinds has room.
std::atomic<char*> g_reserve{nullptr};

void release_reserve() {
  delete[] g_reserve.exchange(nullptr);  // any thread's failure: freed once
  std::set_new_handler(nullptr);
  throw std::bad_alloc();
}

void hold_reserve() {
  g_reserve = new char[64 << 20];  // address space only: never touched, so never resident
  std::set_new_handler(release_reserve);
}

/// A list option (comma-separated) names each item once, and none empty: --batch 1,1 ran a cell
/// twice, and a results file with one cell twice is ambiguous to report, compare and --resume.
void refuse_repeated_items(CLI::App& app) {
  for (CLI::Option* option : app.get_options()) {
    if (option->get_delimiter() != ',') continue;
    const std::string name = option->get_name(false, true);
    if (name.find("--stage-layers") != std::string::npos) continue;  // counts: 8,8,8,8 is a layout
    option->each([seen = std::make_shared<std::set<std::string>>(), name](const std::string& item) {
      if (item.empty()) {
        throw neuralcost::Error(neuralcost::ErrorCode::kInvalidArgument,
                                fmt::format("{}: an empty item in the list (two commas, or one at an end)", name));
      }
      if (!seen->insert(item).second) {
        throw neuralcost::Error(neuralcost::ErrorCode::kInvalidArgument, fmt::format("{} names {} twice", name, item));
      }
    });
  }
  for (CLI::App* sub : app.get_subcommands({})) refuse_repeated_items(*sub);
}

int run_command(int argc, char** argv) {
  CLI::App app{
      "neural-cost: exact FLOPs and compulsory bytes per layer of a neural network, placed on a\n"
      "hardware roofline (lower-bound time, limiting roof, share of the model).",
      "neural-cost"};
  app.set_version_flag("--version", std::string("neural-cost ") + std::string(neuralcost::kVersion));
  app.require_subcommand(1);
  app.footer("Counting convention: docs/counting.md. JSON schema: docs/json-schema.md.");
  neuralcost::cli::add_analyze_command(app);
  neuralcost::cli::add_hardware_command(app);
  neuralcost::cli::add_profile_command(app);
  neuralcost::cli::add_study_command(app);
  neuralcost::cli::add_backends_command(app);
  neuralcost::cli::add_report_commands(app);
  neuralcost::cli::add_to_target_command(app);
  refuse_repeated_items(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // argument syntax: one error line and exit 1, like every other bad input
    fmt::print(stderr, "error: {}\n", neuralcost::terminal_text(e.what()));
    fmt::print(stderr, "note: run with --help for the options\n");
    return 1;
  } catch (const std::bad_alloc&) {
    fmt::print(stderr, "error: out of memory (the model or an input is too large for this machine)\n");
    return 1;
  } catch (const neuralcost::Interrupted& e) {
    // Ctrl-C or SIGTERM: what finished was written; no process of ours outlives us
    neuralcost::end_child_processes();
    fmt::print(stderr, "error: {}\n", neuralcost::terminal_text(e.what()));
    return neuralcost::interrupt_exit_code();
  } catch (const neuralcost::Error& e) {
    fmt::print(stderr, "error: {}\n", neuralcost::terminal_text(e.what()));
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: internal: {}\n", neuralcost::terminal_text(e.what()));
    return 2;
  }
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  // a backend call that never returned still runs: end without static destructors (call_thread.hpp)
  hold_reserve();
  return neuralcost::end_process(run_command(argc, argv));
}
