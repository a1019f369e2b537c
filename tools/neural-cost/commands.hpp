// Subcommands of the neural-cost CLI. Each registers its options on the app and runs when
// selected; all real work is in the library.
#pragma once

#include <initializer_list>
#include <string>

#include <CLI/CLI.hpp>

#include "neuralcost/report/views.hpp"

namespace neuralcost::cli {

/// Prints `text` to stdout, or writes it atomically to `output` when one is given.
void emit(const std::string& text, const std::string& output);
/// Throws kInvalidArgument when `output` (-o) is one of the files the command reads: the atomic
/// write would replace the user's input with the output.
void refuse_output_over_inputs(const std::string& output, std::initializer_list<std::string> inputs);
/// Throws kInvalidArgument when `path` (given to `option`) cannot be written: a directory, or a
/// directory that does not exist or is not writable. For commands that measure for minutes before
/// they write: found before, not after.
void check_output_path(const std::string& path, const char* option);
/// resolve_hardware, with a note on stderr when `host` had to be calibrated first; `threads`
/// chooses host's calibration (the ceilings of that many threads' cores; 0: one per CPU).
HardwareSpec hardware_for(const std::string& id_or_path, int threads = 0);
/// Adds --format with table|json|csv|md validation.
/// --format: table, json, csv or md; and html when `html` says what it gives (empty: no html).
void add_format_option(CLI::App& command, std::string& format, const std::string& html = "");
/// Throws kInvalidArgument "OPTION<why>" for the first of `options` the command line gave (an
/// option that does not apply is an error, not ignored).
void refuse_given(const CLI::App& command, std::initializer_list<const char*> options, const std::string& why);
/// --format when given; else the format `output`'s extension names (-o out.json: JSON); else `format`'s default.
Format output_format(const CLI::App& command, const std::string& format, const std::string& output);

void add_analyze_command(CLI::App& app);
void add_hardware_command(CLI::App& app);
void add_profile_command(CLI::App& app);
/// `neural-cost study`: a resumable sweep into a JSON Lines results file.
void add_study_command(CLI::App& app);
/// `neural-cost backends`: the backends of `profile` and whether they can run here.
void add_backends_command(CLI::App& app);
/// `neural-cost report`, `cost` and `compare`: views over results files.
void add_report_commands(CLI::App& app);
void add_to_target_command(CLI::App& app);

}  // namespace neuralcost::cli
