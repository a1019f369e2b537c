// Element type sizes and names.
#include "neuralcost/core/dtype.hpp"

#include <algorithm>
#include <cctype>
#include <string>

namespace neuralcost {

std::uint64_t dtype_bytes(DType dtype) {
  switch (dtype) {
    case DType::kFp64:
    case DType::kInt64: return 8;
    case DType::kFp32:
    case DType::kTf32:
    case DType::kInt32: return 4;
    case DType::kFp16:
    case DType::kBf16: return 2;
    case DType::kInt8:
    case DType::kFp8:
    case DType::kBool: return 1;
  }
  return 0;
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kFp64: return "fp64";
    case DType::kFp32: return "fp32";
    case DType::kTf32: return "tf32";
    case DType::kFp16: return "fp16";
    case DType::kBf16: return "bf16";
    case DType::kInt8: return "int8";
    case DType::kFp8: return "fp8";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kBool: return "bool";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view name) {
  std::string n(name);
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
  if (n == "fp64" || n == "float64" || n == "double") return DType::kFp64;
  if (n == "fp32" || n == "float32" || n == "float") return DType::kFp32;
  if (n == "tf32") return DType::kTf32;
  if (n == "fp16" || n == "float16" || n == "half") return DType::kFp16;
  if (n == "bf16" || n == "bfloat16") return DType::kBf16;
  if (n == "int8") return DType::kInt8;
  if (n == "fp8" || n == "float8") return DType::kFp8;
  if (n == "int32") return DType::kInt32;
  if (n == "int64") return DType::kInt64;
  if (n == "bool") return DType::kBool;
  return std::nullopt;
}

const std::vector<DType>& compute_dtypes() {
  static const std::vector<DType> all = {DType::kFp64, DType::kFp32, DType::kTf32, DType::kFp16,
                                         DType::kBf16, DType::kInt8, DType::kFp8};
  return all;
}

}  // namespace neuralcost
