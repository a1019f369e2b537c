// Report views: the same results as a terminal table, Markdown, CSV or JSON. JSON is the
// stable machine interface (docs/json-schema.md); CSV carries raw numbers, table and Markdown
// SI-prefixed ones.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "neuralcost/analysis/roofline.hpp"
#include "neuralcost/calibrate/gpu_calibration.hpp"
#include "neuralcost/gpu/cuda_devices.hpp"
#include "neuralcost/hardware/calibration.hpp"
#include "neuralcost/hardware/host.hpp"
#include "neuralcost/registry.hpp"
#include "neuralcost/report/format.hpp"

namespace neuralcost {

/// Text from outside (a name, a path, a message quoting them) as it may reach a terminal: valid
/// UTF-8, and control characters (escape sequences, newlines) shown as \xNN.
std::string terminal_text(std::string_view text);

/// Per-op view of one analysis, then totals and warnings about unmodeled ops.
///
///   op                        kind       output     FLOPs   bytes   FLOP/B  bound    lower bound  share
///   encoder0.self_attn.in_proj linear    32x32x384  201 M   2.3 MB  87.3    compute  3.0 µs       11.2%
std::string render_analysis(const Analysis& analysis, Format format);
/// One row per analysis (the README's main job prints this for the five networks).
///
///   model        params   FLOPs    bytes    FLOP/B  bound   lower bound  fused    samples/s ≤
///   transformer  397.8 k  838.9 M  46.3 MB  18.1    memory  14.9 µs      11.0 µs  2.1 M
std::string render_summary(const std::vector<Analysis>& analyses, Format format);
/// The backends: name, modes, whether each can run on this machine (and why not), the devices
/// it offers here, description.
/// Checks availability only (a plugin loads, a worker's Python exists); it starts no worker.
/// With `cuda`, the machine's CUDA state too: why there are no cuda:N devices, when there are none.
std::string render_backends(const std::vector<const Backend*>& backends, Format format,
                            const CudaDevices* cuda = nullptr);
/// The hardware database as a list: id, name, type, peaks, bandwidth, ridge point, aliases.
std::string render_hardware_list(const std::vector<HardwareSpec>& specs, Format format);
/// One spec with the source of every number. Its JSON is a valid hardware spec file.
std::string render_hardware(const HardwareSpec& spec, Format format);
/// What host detection found (`neural-cost hardware detect`); with `cuda`, its CUDA devices (or
/// why there are none) as well.
std::string render_host(const HostDescription& host, Format format, const CudaDevices* cuda = nullptr);
/// A GPU's measured ceilings beside its datasheet (`hardware calibrate --device cuda:N`).
std::string render_gpu_calibration(const GpuCalibration& calibration, Format format);
/// What calibration measured (`neural-cost hardware calibrate`); its JSON is the cache file.
std::string render_calibration(const Calibration& calibration, Format format);

nlohmann::json analysis_json(const Analysis& analysis);
nlohmann::json hardware_json(const HardwareSpec& spec);

}  // namespace neuralcost
