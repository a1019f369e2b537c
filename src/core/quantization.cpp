// Storage and dequantization of quantized weights (core/quantization.hpp). The layouts are the
// formats' own: AWQ (qweight, 4-bit qzeros, fp16 scales per group of 128), GPTQ (the same plus an
// int32 g_idx per input), LLM.int8 and fp8 (a scale per output row), NVFP4 and MXFP4 (OCP
// microscaling), bitsandbytes nf4 (fp32 absmax per block of 64, a 16-entry code table; double
// quantization: 8-bit absmax, one fp32 per 256 of them, a 256-entry table and an offset).
#include "neuralcost/core/quantization.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "neuralcost/core/checked_math.hpp"
#include "neuralcost/core/error.hpp"

namespace neuralcost {
namespace {

std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }

struct Dims {
  std::uint64_t lead = 1, out = 0, in = 0;
};

Dims dims_of(const std::vector<std::int64_t>& shape) {
  if (shape.size() < 2) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("a quantized weight must have rank 2 or more (out, in), got rank {}", shape.size()));
  }
  Dims d;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) throw Error(ErrorCode::kInvalidArgument, "a quantized weight has a negative dimension");
    const auto n = static_cast<std::uint64_t>(shape[i]);
    if (i + 2 < shape.size()) d.lead = checked_mul(d.lead, n, "quantized weight");
  }
  d.out = static_cast<std::uint64_t>(shape[shape.size() - 2]);
  d.in = static_cast<std::uint64_t>(shape.back());
  return d;
}

Error bad_spec(const std::string& spec, const std::string& why) {
  return Error(ErrorCode::kInvalidArgument,
               fmt::format("--weights '{}': {} (formats: int8, int8-gN, int4, int4-gN, int4-channel, int4-sym, "
                           "gptq-int4, fp8, fp8-block128, nvfp4, mxfp4, nf4, nf4-dq, bnb-fp4, bnb-fp4-dq)",
                           spec, why));
}

}  // namespace

std::uint64_t WeightQuantization::groups(const std::vector<std::int64_t>& shape) const {
  const Dims d = dims_of(shape);
  const std::uint64_t per_row = group_size > 0 ? ceil_div(d.in, static_cast<std::uint64_t>(group_size)) : 1;
  const std::uint64_t rows = ceil_div(d.out, static_cast<std::uint64_t>(block_rows));
  return checked_mul(checked_mul(d.lead, rows, "quantized weight"), per_row, "quantized weight groups");
}

std::uint64_t WeightQuantization::bytes(const std::vector<std::int64_t>& shape) const {
  const Dims d = dims_of(shape);
  const std::uint64_t values = checked_mul(checked_mul(d.lead, d.out, "quantized weight"), d.in, "quantized weight");
  const std::uint64_t g = groups(shape);
  std::uint64_t total = ceil_div(checked_mul(values, static_cast<std::uint64_t>(bits), "quantized weight"), 8);
  total += ceil_div(checked_mul(g, static_cast<std::uint64_t>(scale_bits), "scales"), 8);
  if (zero_points) total += ceil_div(checked_mul(g, static_cast<std::uint64_t>(bits), "zeros"), 8);
  if (index_bits_per_input > 0) total += d.lead * ceil_div(d.in * static_cast<std::uint64_t>(index_bits_per_input), 8);
  if (code_table_entries > 0) total += d.lead * 4 * static_cast<std::uint64_t>(code_table_entries);
  if (second_level_group > 0) {
    // the 8-bit scales' own fp32 scales, their 256-entry fp32 code table and one fp32 offset
    total += 4 * ceil_div(g, static_cast<std::uint64_t>(second_level_group)) + d.lead * (256 * 4 + 4);
  }
  if (tensor_scale) total += d.lead * 4;
  return total;
}

std::uint64_t WeightQuantization::dequantization_flops(const std::vector<std::int64_t>& shape) const {
  const Dims d = dims_of(shape);
  const std::uint64_t values = checked_mul(checked_mul(d.lead, d.out, "quantized weight"), d.in, "quantized weight");
  std::uint64_t flops = checked_mul(values, zero_points ? 2 : 1, "dequantization");
  if (second_level_group > 0) flops += 2 * groups(shape);
  if (tensor_scale) flops += groups(shape);
  return flops;
}

double WeightQuantization::bits_per_value() const {
  // a large weight whose inputs are whole groups: the per-tensor parts all but vanish
  const std::int64_t in = group_size > 0 ? group_size * std::max<std::int64_t>(1, 4096 / group_size) : 4096;
  const std::vector<std::int64_t> shape = {block_rows * std::max<std::int64_t>(1, 4096 / block_rows), in};
  return static_cast<double>(bytes(shape)) * 8.0 / static_cast<double>(shape[0] * shape[1]);
}

std::string WeightQuantization::describe() const {
  std::string grouping = group_size == 0  ? "one scale per output row"
                         : block_rows > 1 ? fmt::format("{} x {} blocks", block_rows, group_size)
                                          : fmt::format("groups of {}", group_size);
  std::string s = fmt::format("{} ({}-bit values, {}, {}-bit scales", format, bits, grouping,
                              second_level_group > 0 ? 8 : scale_bits);
  if (zero_points) s += fmt::format(", {}-bit zeros", bits);
  if (index_bits_per_input > 0) s += ", an int32 group index per input";
  if (second_level_group > 0)
    s += fmt::format(", double quantization: an fp32 scale per {} scales", second_level_group);
  if (tensor_scale) s += ", an fp32 scale per tensor";
  return s + fmt::format("; {:.3f} bits per value)", bits_per_value());
}

std::string WeightQuantization::spec() const { return name; }

WeightQuantization parse_weight_quantization(const std::string& spec) {
  std::vector<std::string> parts;
  std::string base = spec;
  for (const char* two_part : {"bnb-fp4", "gptq-int4", "gptq-int8"}) {
    if (spec.rfind(two_part, 0) == 0) base = spec.substr(std::string(two_part).size());
  }
  std::string head = spec.substr(0, spec.size() - base.size());
  std::size_t start = 0;
  if (head.empty()) {
    start = std::min(spec.find('-'), spec.size());
    head = spec.substr(0, start);
    base = spec.substr(start);
  }
  for (std::size_t i = 0; i < base.size();) {
    if (base[i] != '-') throw bad_spec(spec, "options follow the format after '-'");
    const std::size_t next = std::min(base.find('-', i + 1), base.size());
    parts.push_back(base.substr(i + 1, next - i - 1));
    i = next;
  }
  WeightQuantization q;
  q.name = spec;
  q.format = head;
  bool allow_group = false, allow_sym = false, allow_asym = false, allow_dq = false, allow_block = false;
  if (head == "int8") {
    q.bits = 8, q.scale_bits = 16, allow_group = allow_asym = allow_sym = true;
  } else if (head == "gptq-int8") {
    q.bits = 8, q.scale_bits = 16, allow_group = true;
  } else if (head == "int4") {
    q.bits = 4, q.group_size = 128, q.scale_bits = 16, q.zero_points = true, allow_group = allow_sym = true;
  } else if (head == "gptq-int4") {
    q.bits = 4, q.group_size = 128, q.scale_bits = 16, q.zero_points = true, allow_group = true;
  } else if (head == "fp8") {
    q.bits = 8, q.scale_bits = 32, allow_block = true;
  } else if (head == "nvfp4") {
    q.bits = 4, q.group_size = 16, q.scale_bits = 8, q.tensor_scale = true;
  } else if (head == "mxfp4") {
    q.bits = 4, q.group_size = 32, q.scale_bits = 8;
  } else if (head == "nf4" || head == "bnb-fp4") {
    q.bits = 4, q.group_size = 64, q.scale_bits = 32, q.code_table_entries = 16, allow_dq = true;
  } else {
    throw bad_spec(spec, fmt::format("unknown format '{}'", head));
  }
  if (head.rfind("gptq-", 0) == 0) {
    // GPTQ checkpoints store zeros whatever `sym` says, and a group index per input (g_idx)
    q.zero_points = true;
    q.index_bits_per_input = 32;
    if (head == "gptq-int8") q.group_size = 128;
  }
  for (const std::string& p : parts) {
    auto number = [&](std::size_t skip) {
      const std::string digits = p.substr(skip);
      if (digits.empty() || digits.size() > 7 || digits.find_first_not_of("0123456789") != std::string::npos ||
          std::stoll(digits) < 1) {
        throw bad_spec(spec, fmt::format("'{}' needs a positive size", p));
      }
      return std::stoll(digits);
    };
    if (allow_group && p.size() > 1 && p[0] == 'g') {
      q.group_size = number(1);
    } else if (allow_group && p == "channel") {
      q.group_size = 0;
    } else if (allow_sym && p == "sym") {
      q.zero_points = false;
    } else if (allow_asym && p == "asym") {
      q.zero_points = true;
    } else if (allow_dq && p == "dq") {
      q.scale_bits = 8, q.second_level_group = 256;
    } else if (allow_block && p.rfind("block", 0) == 0) {
      q.group_size = q.block_rows = number(5);
    } else {
      throw bad_spec(spec, fmt::format("'{}' does not apply to {}", p, head));
    }
  }
  return q;
}

}  // namespace neuralcost
