// GPU power and energy of a timed phase, from timestamped power samples (NVML or nvidia-smi) or
// from the driver's energy counter. The arithmetic is here, free of any driver, so that it is
// tested on recorded samples: trapezoid integration over the phase (its ends interpolated from
// the samples around them), average and peak watts, energy per pass and per sample, samples per
// joule; gaps in the samples and phases too short for the sampling period are named, not hidden.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace neuralcost {

struct PowerSample {
  double seconds = 0;  ///< on the clock of the phase's start and end (any origin)
  double watts = 0;
};

struct PowerSummary {
  double phase_seconds = 0;
  int samples_in_phase = 0;             ///< samples taken inside [start, end]
  double covered_seconds = 0;           ///< the part of the phase the samples span (ends interpolated)
  double largest_gap_seconds = 0;       ///< the longest time between two samples used
  std::optional<double> average_watts;  ///< time-weighted (trapezoid) over the covered part
  std::optional<double> peak_watts;     ///< the highest sample inside the phase
  std::optional<double> energy_joules;  ///< average_watts x phase_seconds
  std::optional<double> energy_per_pass_joules;
  std::optional<double> energy_per_sample_joules;  ///< per pass / batch
  std::optional<double> samples_per_joule;         ///< passes x batch / energy
  /// What makes the figures doubtful or absent: too few samples, a gap, the phase not covered.
  std::vector<std::string> problems;
};

/// Summarises `samples` (in time order; kInvalidArgument naming the first out of order, or a
/// negative, non-finite or implausible (> 5 kW) reading) over the phase [start, end] of `passes`
/// forward passes of `batch` samples each, taken every `period_seconds` (the stated rate, for
/// naming gaps: one longer than 3 periods is a problem). Without at least two points spanning part
/// of the phase there is no energy, and `problems` says why.
PowerSummary summarize_power(const std::vector<PowerSample>& samples, double start_seconds, double end_seconds,
                             int passes, int batch, double period_seconds);

/// The same figures from a cumulative energy counter (NVML's total energy since the driver
/// loaded, in joules), read at the phase's start and end; the average is energy / phase.
PowerSummary summarize_energy_counter(double joules_at_start, double joules_at_end, double phase_seconds, int passes,
                                      int batch);

/// A recorded phase with its power samples (docs/gpu.md §5): what a GPU run's power sampler saw,
/// kept as a fixture so that the arithmetic is tested on real data.
struct PowerRecord {
  std::string source;  ///< how it was recorded ("hand-written: ..." until a GPU run records one)
  std::string device;
  double period_seconds = 0;
  double start_seconds = 0, end_seconds = 0;
  int passes = 0, batch = 0;
  std::vector<PowerSample> samples;
};

/// Reads a power record; kDataLoss naming `origin` and the field when it is malformed.
PowerRecord parse_power_record(std::string_view json_text, const std::string& origin);

/// summarize_power over a record's phase.
PowerSummary summarize_power(const PowerRecord& record);

/// The record as JSON text, in the format parse_power_record reads.
std::string power_record_json(const PowerRecord& record);

/// When $NEURALCOST_GPU_RECORD names a folder, writes `text` there as `name` (atomically) and
/// returns the path; else nothing. A GPU run's raw answers (the plugin's calibration and counter
/// check, each timed phase's power samples) are kept this way as fixtures (bench/gpu_check.sh).
std::optional<std::string> record_gpu_file(const std::string& name, const std::string& text);

}  // namespace neuralcost
