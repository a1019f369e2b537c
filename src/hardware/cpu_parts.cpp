// The CPU table (see cpu_parts.hpp). Clocks are the vendors' published figures: AMD's product
// pages give base, all-core boost (EPYC) and max boost; Intel's ARK gives base and max turbo,
// and the all-core turbo comes from Intel's launch SKU tables; the cloud parts from the cloud's
// instance pages. A figure not published is 0, never guessed. FMA pipes and widths are from the
// vendors' optimisation guides: Zen 4 executes AVX-512 on two 256-bit FMA pipes, Zen 5 desktop
// and server cores have two full 512-bit pipes (mobile Zen 5 keeps 256-bit ones), and Xeon
// Scalable Platinum parts since Skylake-SP have two 512-bit FMA units per core.
#include "neuralcost/hardware/cpu_parts.hpp"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

namespace neuralcost {
namespace {

constexpr std::string_view kAmd = "AuthenticAMD", kIntel = "GenuineIntel";

// sources, one per document
constexpr std::string_view kAmdEpyc9004 =
    "AMD product pages of the EPYC 9004 series (amd.com, 4th Gen AMD EPYC processors): base, all-core boost and max "
    "boost clocks";
constexpr std::string_view kAmdEpyc9005 =
    "AMD product pages of the EPYC 9005 series (amd.com, 5th Gen AMD EPYC processors): base, all-core boost and max "
    "boost clocks";
constexpr std::string_view kAmdRyzen =
    "AMD product pages (amd.com, Ryzen desktop processors): base and max boost clocks; AMD publishes no all-core boost "
    "for Ryzen";
constexpr std::string_view kAmdZen4Fma =
    "AMD Software Optimization Guide for the Zen 4 microarchitecture: two 256-bit FMA pipes, a 512-bit operation "
    "takes both";
constexpr std::string_view kAmdZen5Fma =
    "AMD Software Optimization Guide for the Zen 5 microarchitecture: two 512-bit FMA pipes in desktop and server "
    "parts";
constexpr std::string_view kIntelArk =
    "Intel ARK (ark.intel.com): base and max turbo; all-core turbo from Intel's launch SKU table; two AVX-512 FMA "
    "units per core (Xeon Platinum)";

// clang-format off
const std::vector<CpuPart> kParts = {
    // vendor family models name              microarchitecture          cores base  all-core max   FMA bits source
    // AMD Zen 4: Genoa, Genoa-X (family 19h, models 10h-1Fh)
    {kAmd, 0x19, 0x10, 0x1F, "EPYC 9654",  "Zen 4 (Genoa)",            96, 2.40, 3.55, 3.70, 2, 256, kAmdEpyc9004},
    {kAmd, 0x19, 0x10, 0x1F, "EPYC 9554",  "Zen 4 (Genoa)",            64, 3.10, 3.75, 3.75, 2, 256, kAmdEpyc9004},
    {kAmd, 0x19, 0x10, 0x1F, "EPYC 9474F", "Zen 4 (Genoa)",            48, 3.60, 4.10, 4.10, 2, 256, kAmdEpyc9004},
    {kAmd, 0x19, 0x10, 0x1F, "EPYC 9374F", "Zen 4 (Genoa)",            32, 3.85, 4.30, 4.30, 2, 256, kAmdEpyc9004},
    {kAmd, 0x19, 0x10, 0x1F, "EPYC 9174F", "Zen 4 (Genoa)",            16, 4.10, 0,    4.40, 2, 256, kAmdEpyc9004},
    {kAmd, 0x19, 0x10, 0x1F, "EPYC 9684X", "Zen 4 (Genoa-X)",          96, 2.55, 3.42, 3.70, 2, 256, kAmdEpyc9004},
    {kAmd, 0x19, 0x10, 0x1F, "EPYC 9R14",  "Zen 4 (Genoa)",            96, 0,    0,    3.70, 2, 256,
     "Amazon EC2 M7a/C7a/R7a instance pages: 4th Gen AMD EPYC (Genoa) at up to 3.7 GHz"},
    // AMD Zen 4c: Bergamo (family 19h, models A0h-AFh)
    {kAmd, 0x19, 0xA0, 0xAF, "EPYC 9754",  "Zen 4c (Bergamo)",        128, 2.25, 3.10, 3.10, 2, 256, kAmdEpyc9004},
    // AMD Zen 4 desktop: Raphael, Ryzen 7000 and EPYC 4004 (family 19h, models 60h-6Fh)
    {kAmd, 0x19, 0x60, 0x6F, "Ryzen 9 7950X",   "Zen 4 (Raphael)",     16, 4.50, 0,    5.70, 2, 256, kAmdRyzen},
    {kAmd, 0x19, 0x60, 0x6F, "Ryzen 7 7800X3D", "Zen 4 (Raphael)",      8, 4.20, 0,    5.00, 2, 256, kAmdRyzen},
    {kAmd, 0x19, 0x60, 0x6F, "EPYC 4564P",      "Zen 4 (Raphael)",     16, 4.50, 0,    5.70, 2, 256,
     "AMD product page of the EPYC 4004 series (amd.com): base and max boost clocks"},
    // AMD Zen 5: Turin (family 1Ah, models 00h-0Fh)
    {kAmd, 0x1A, 0x00, 0x0F, "EPYC 9755",  "Zen 5 (Turin)",           128, 2.70, 4.10, 4.10, 2, 512, kAmdEpyc9005},
    {kAmd, 0x1A, 0x00, 0x0F, "EPYC 9655",  "Zen 5 (Turin)",            96, 2.60, 0,    4.50, 2, 512, kAmdEpyc9005},
    {kAmd, 0x1A, 0x00, 0x0F, "EPYC 9575F", "Zen 5 (Turin)",            64, 3.30, 0,    5.00, 2, 512, kAmdEpyc9005},
    {kAmd, 0x1A, 0x00, 0x0F, "EPYC 9175F", "Zen 5 (Turin)",            16, 4.20, 0,    5.00, 2, 512, kAmdEpyc9005},
    {kAmd, 0x1A, 0x00, 0x0F, "EPYC 9R45",  "Zen 5 (Turin)",             0, 0,    0,    4.50, 2, 512,
     "Amazon EC2 C8a/M8a/R8a instance pages: 5th Gen AMD EPYC (Turin) at up to 4.5 GHz"},
    // AMD Zen 5c: Turin dense (family 1Ah, models 10h-1Fh)
    {kAmd, 0x1A, 0x10, 0x1F, "EPYC 9965",  "Zen 5c (Turin dense)",    192, 2.25, 0,    3.70, 2, 512, kAmdEpyc9005},
    // AMD Zen 5 desktop: Granite Ridge, Ryzen 9000 (family 1Ah, models 40h-4Fh)
    {kAmd, 0x1A, 0x40, 0x4F, "Ryzen 9 9950X", "Zen 5 (Granite Ridge)", 16, 4.30, 0,    5.70, 2, 512, kAmdRyzen},
    {kAmd, 0x1A, 0x40, 0x4F, "Ryzen 7 9700X", "Zen 5 (Granite Ridge)",  8, 3.80, 0,    5.50, 2, 512, kAmdRyzen},
    // AMD Zen 5 mobile: Strix Point (family 1Ah, models 20h-2Fh): 256-bit FMA pipes
    {kAmd, 0x1A, 0x20, 0x2F, "Ryzen AI 9 HX 370", "Zen 5 (Strix Point)", 12, 2.00, 0, 5.10, 2, 256,
     "AMD product page (amd.com, Ryzen AI 300 series): base and max boost clocks; mobile Zen 5 has 256-bit FMA pipes"},
    // Intel Xeon: Ice Lake-SP (6, 6Ah), Sapphire Rapids (8Fh), Emerald Rapids (CFh), Granite Rapids (ADh)
    {kIntel, 6, 0x6A, 0x6A, "Platinum 8380",  "Ice Lake-SP",        40, 2.30, 3.00, 3.40, 2, 512, kIntelArk},
    {kIntel, 6, 0x6A, 0x6A, "Platinum 8375C", "Ice Lake-SP",        32, 2.90, 3.50, 3.50, 2, 512,
     "Amazon EC2 M6i/C6i instance pages: 3rd Gen Intel Xeon Scalable (Ice Lake 8375C), all-core turbo 3.5 GHz"},
    {kIntel, 6, 0x8F, 0x8F, "Platinum 8480+", "Sapphire Rapids",    56, 2.00, 3.00, 3.80, 2, 512, kIntelArk},
    {kIntel, 6, 0x8F, 0x8F, "Platinum 8488C", "Sapphire Rapids",    48, 0,    3.20, 0,    2, 512,
     "Amazon EC2 M7i/C7i instance pages: 4th Gen Intel Xeon Scalable (Sapphire Rapids 8488C), all-core turbo 3.2 GHz"},
    {kIntel, 6, 0xCF, 0xCF, "Platinum 8592+", "Emerald Rapids",     64, 1.90, 2.90, 3.90, 2, 512, kIntelArk},
    {kIntel, 6, 0xAD, 0xAD, "6980P",          "Granite Rapids",    128, 2.00, 3.20, 3.90, 2, 512, kIntelArk},
    // microarchitecture rows: the model name names no part of the table (a hypervisor may show
    // only "AMD EPYC"); the clock is the highest max boost of any part of the microarchitecture
    {kAmd, 0x19, 0x10, 0x1F, "", "Zen 4 (Genoa)",         0, 0, 0, 4.40, 2, 256,
     "the highest max boost of the EPYC 9004 Genoa parts (EPYC 9174F: 4.4 GHz; AMD product pages); FMA pipes: AMD "
     "Software Optimization Guide for Zen 4"},
    {kAmd, 0x19, 0xA0, 0xAF, "", "Zen 4c (Bergamo)",      0, 0, 0, 3.10, 2, 256,
     "the highest max boost of the EPYC 9004 Bergamo parts (EPYC 9754: 3.1 GHz; AMD product pages)"},
    {kAmd, 0x19, 0x60, 0x6F, "", "Zen 4 (Raphael)",       0, 0, 0, 5.70, 2, 256,
     "the highest max boost of the Ryzen 7000 / EPYC 4004 parts (Ryzen 9 7950X, EPYC 4564P: 5.7 GHz; AMD product "
     "pages)"},
    {kAmd, 0x1A, 0x00, 0x0F, "", "Zen 5 (Turin)",         0, 0, 0, 5.00, 2, 512,
     "the highest max boost of the EPYC 9005 Turin parts (EPYC 9575F, 9175F: 5.0 GHz; AMD product pages); FMA pipes: "
     "AMD Software Optimization Guide for Zen 5"},
    {kAmd, 0x1A, 0x10, 0x1F, "", "Zen 5c (Turin dense)",  0, 0, 0, 3.70, 2, 512,
     "the highest max boost of the EPYC 9005 Turin dense parts (EPYC 9965: 3.7 GHz; AMD product pages)"},
    {kAmd, 0x1A, 0x40, 0x4F, "", "Zen 5 (Granite Ridge)", 0, 0, 0, 5.70, 2, 512,
     "the highest max boost of the Ryzen 9000 parts (Ryzen 9 9950X: 5.7 GHz; AMD product pages)"},
};
// clang-format on

/// `name` occurs in `model` and is not followed by a digit.
bool names(std::string_view model, std::string_view name) {
  for (auto at = model.find(name); at != std::string_view::npos; at = model.find(name, at + 1)) {
    const auto end = at + name.size();
    if (end == model.size() || !std::isdigit(static_cast<unsigned char>(model[end]))) return true;
  }
  return false;
}

}  // namespace

const std::vector<CpuPart>& cpu_parts() { return kParts; }

const CpuPart* find_cpu_part(const HostDescription& host) {
  const CpuPart* family_row = nullptr;
  for (const CpuPart& p : kParts) {
    if (p.vendor != host.vendor || p.family != host.family || host.model_number < p.model_first ||
        host.model_number > p.model_last) {
      continue;
    }
    if (p.name.empty()) {
      if (!family_row) family_row = &p;
    } else if (names(host.model, p.name)) {
      return &p;
    }
  }
  return family_row;
}

PeakClock peak_clock(const HostDescription& host, int cores_used, double measured_ghz) {
  PeakClock c;
  c.part = find_cpu_part(host);
  if (c.part && !c.part->name.empty()) {
    const CpuPart& p = *c.part;
    const int all = p.cores * std::max(1, host.sockets);
    const bool every_core = p.cores > 0 && cores_used >= all;
    c.documented = true;
    if ((every_core || p.max_boost_ghz <= 0) && p.all_core_boost_ghz > 0) {
      c.ghz = p.all_core_boost_ghz;
      c.source = fmt::format("{} {} documented all-core boost ({}; source: {})", p.name, p.microarchitecture,
                             every_core ? fmt::format("all {} cores busy", all) : "no max boost published", p.source);
    } else {
      c.ghz = p.max_boost_ghz;
      c.source = fmt::format("{} {} documented max boost ({}: each can reach it, so an upper bound; source: {})",
                             p.name, p.microarchitecture,
                             p.cores > 0 ? fmt::format("{} of its {} cores busy", cores_used, all)
                                         : fmt::format("{} cores busy", cores_used),
                             p.source);
    }
    return c;
  }
  if (c.part) {
    c.documented = true;
    c.ghz = c.part->max_boost_ghz;
    c.source = fmt::format(
        "{} (CPUID family {:X}h model {:X}h): the model name '{}' names no part of the CPU table, so the highest "
        "documented max boost of any {} part, an upper bound ({})",
        c.part->microarchitecture, host.family, host.model_number, host.model, c.part->microarchitecture,
        c.part->source);
    return c;
  }
  const std::string missing = fmt::format("'{}' ({}, family {:X}h model {:X}h) is not in the CPU table, so", host.model,
                                          host.vendor.empty() ? "unknown vendor" : host.vendor,
                                          std::max(0, host.family), std::max(0, host.model_number));
  if (host.ghz > 0) {
    c.ghz = host.ghz;
    c.source = fmt::format("{} the clock Linux reports: {}", missing, host.ghz_source);
  } else if (measured_ghz > 0) {
    c.ghz = measured_ghz;
    c.source = fmt::format(
        "{} the clock calibration measured (dependent integer adds under its own load; not a "
        "documented figure)",
        missing);
  } else {
    c.ghz = 1.0;
    c.source = fmt::format("{} and no clock is readable: 1 GHz assumed", missing);
  }
  return c;
}

}  // namespace neuralcost
