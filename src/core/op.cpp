// Checked attribute access and the compute dtype of an op record.
#include "neuralcost/core/op.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "neuralcost/core/error.hpp"

namespace neuralcost {
namespace {

template <typename T>
const T* typed(const std::map<std::string, AttributeValue>& values, const std::string& key, const char* type_name) {
  auto it = values.find(key);
  if (it == values.end()) return nullptr;
  const T* v = std::get_if<T>(&it->second);
  if (v == nullptr) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("attribute '{}' must be {}", key, type_name));
  }
  return v;
}

}  // namespace

bool Attributes::get_bool(const std::string& key, bool fallback) const {
  const bool* v = typed<bool>(values_, key, "a boolean");
  return v ? *v : fallback;
}

std::int64_t Attributes::get_int(const std::string& key) const {
  const std::int64_t* v = typed<std::int64_t>(values_, key, "an integer");
  if (v == nullptr) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("missing attribute '{}'", key));
  }
  return *v;
}

std::int64_t Attributes::get_int(const std::string& key, std::int64_t fallback) const {
  const std::int64_t* v = typed<std::int64_t>(values_, key, "an integer");
  return v ? *v : fallback;
}

double Attributes::get_double(const std::string& key, double fallback) const {
  auto it = values_.find(key);
  if (it == values_.end()) return fallback;
  if (const auto* i = std::get_if<std::int64_t>(&it->second)) return static_cast<double>(*i);
  const double* v = typed<double>(values_, key, "a number");
  return *v;
}

std::string Attributes::get_string(const std::string& key, const std::string& fallback) const {
  const std::string* v = typed<std::string>(values_, key, "a string");
  return v ? *v : fallback;
}

std::vector<std::int64_t> Attributes::get_ints(const std::string& key, std::size_t rank, std::int64_t fallback) const {
  auto it = values_.find(key);
  if (it == values_.end()) return std::vector<std::int64_t>(rank, fallback);
  if (const auto* one = std::get_if<std::int64_t>(&it->second)) {
    return std::vector<std::int64_t>(rank, *one);
  }
  const auto* list = typed<std::vector<std::int64_t>>(values_, key, "a list of integers");
  if (list->size() == 1) return std::vector<std::int64_t>(rank, list->front());
  if (list->size() != rank) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("attribute '{}' must have {} values, got {}", key, rank, list->size()));
  }
  return *list;
}

std::vector<std::int64_t> Attributes::get_list(const std::string& key) const {
  const auto it = values_.find(key);
  if (it == values_.end()) throw Error(ErrorCode::kInvalidArgument, fmt::format("missing attribute '{}'", key));
  if (const auto* one = std::get_if<std::int64_t>(&it->second)) return {*one};
  return *typed<std::vector<std::int64_t>>(values_, key, "a list of integers");
}

DType OpRecord::effective_compute_dtype() const {
  if (compute_dtype) return *compute_dtype;
  // the first arithmetic type among outputs then inputs: a comparison of fp32 tensors that
  // yields bool computes in fp32; an embedding's int64 indices do not decide its type
  const auto& arithmetic = compute_dtypes();
  for (const auto* list : {&outputs, &inputs}) {
    for (const TensorDesc& t : *list) {
      if (std::find(arithmetic.begin(), arithmetic.end(), t.dtype) != arithmetic.end()) return t.dtype;
    }
  }
  if (!outputs.empty()) return outputs.front().dtype;
  return DType::kFp32;
}

}  // namespace neuralcost
