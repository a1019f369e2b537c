// Element types. Storage size decides bytes moved; the compute type picks the hardware's peak.
// tf32 is stored as 4-byte fp32 but computed on TF32 units; fp8 covers e4m3 and e5m2.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace neuralcost {

enum class DType { kFp64, kFp32, kTf32, kFp16, kBf16, kInt8, kFp8, kInt32, kInt64, kBool };

/// Storage bytes of one element.
std::uint64_t dtype_bytes(DType dtype);
/// Lowercase name used in files and output: "fp32", "bf16", "int64", ...
std::string_view dtype_name(DType dtype);
/// Parses a dtype name (also accepts float32/float16/bfloat16/float64/half/double). Empty if unknown.
std::optional<DType> parse_dtype(std::string_view name);
/// The dtypes a hardware spec may give peaks for: fp64 fp32 tf32 fp16 bf16 int8 fp8.
const std::vector<DType>& compute_dtypes();

}  // namespace neuralcost
