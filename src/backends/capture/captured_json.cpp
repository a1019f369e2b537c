// Parsing captured ops from a worker's JSON (see captured_json.hpp).
#include "backends/capture/captured_json.hpp"

#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include "neuralcost/core/error.hpp"

namespace neuralcost::capture {
namespace {

using json = nlohmann::json;
using Kind = CapturedValue::Kind;

struct Context {
  const std::string& source;
  std::size_t index;
  std::string op;
  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    throw Error(ErrorCode::kDataLoss, fmt::format("{}: op #{} ('{}'), field '{}': {}", source, index, op, field, what));
  }
};

constexpr std::int64_t kMaxDim = std::int64_t{1} << 40;

CapturedTensor tensor_from(const json& j, const Context& c, const std::string& field) {
  CapturedTensor t;
  if (!j.contains("tensor") || !j["tensor"].is_string()) c.fail(field, "a tensor needs a string 'tensor' (its name)");
  t.name = j["tensor"].get<std::string>();
  if (!j.contains("shape") || !j["shape"].is_array())
    c.fail(field, fmt::format("tensor '{}' has no 'shape' array", t.name));
  if (j["shape"].size() > 16)
    c.fail(field, fmt::format("tensor '{}' has rank {} (at most 16)", t.name, j["shape"].size()));
  for (const json& d : j["shape"]) {
    if (!d.is_number_integer() || d.get<std::int64_t>() < 0 || d.get<std::int64_t>() > kMaxDim) {
      c.fail(field, fmt::format("tensor '{}' has a dimension that is not an integer in 0..2^40: {}", t.name, d.dump()));
    }
    t.shape.push_back(d.get<std::int64_t>());
  }
  const std::string dtype = j.value("dtype", std::string("float32"));
  auto parsed = parse_dtype(dtype);
  static const std::map<std::string, DType> more = {{"int8", DType::kInt8},   {"uint8", DType::kInt8},
                                                    {"int16", DType::kInt32}, {"int32", DType::kInt32},
                                                    {"int64", DType::kInt64}, {"bool", DType::kBool}};
  if (!parsed && more.count(dtype)) parsed = more.at(dtype);
  if (!parsed) c.fail(field, fmt::format("tensor '{}' has dtype '{}', which is not known", t.name, dtype));
  t.dtype = *parsed;
  if (j.contains("param")) {
    if (!j["param"].is_boolean()) c.fail(field, fmt::format("tensor '{}': 'param' must be true or false", t.name));
    t.parameter = j["param"].get<bool>();
  }
  if (j.contains("buffer")) {
    if (!j["buffer"].is_boolean()) c.fail(field, fmt::format("tensor '{}': 'buffer' must be true or false", t.name));
    t.buffer = j["buffer"].get<bool>();
    t.parameter = t.parameter || t.buffer;  // a buffer is state the op reads, not an edge
  }
  if (j.contains("contiguous") && j["contiguous"].is_boolean()) t.contiguous = j["contiguous"].get<bool>();
  if (j.contains("complex")) {
    if (!j["complex"].is_boolean() || t.shape.empty() || t.shape.back() != 2) {
      c.fail(field, fmt::format("tensor '{}': 'complex' must be true or false, its shape ending in 2", t.name));
    }
    t.complex = j["complex"].get<bool>();
  }
  return t;
}

CapturedValue value_from(const json& j, const Context& c, const std::string& field) {
  CapturedValue v;
  if (j.is_null()) {
    v.kind = Kind::kNone;
  } else if (j.is_boolean()) {
    v.kind = Kind::kBool;
    v.b = j.get<bool>();
  } else if (j.is_number_integer()) {
    v.kind = Kind::kInt;
    v.i = j.get<std::int64_t>();
  } else if (j.is_number_float()) {
    v.kind = Kind::kDouble;
    v.d = j.get<double>();
  } else if (j.is_string()) {
    v.kind = Kind::kString;
    v.s = j.get<std::string>();
  } else if (j.is_array()) {
    v.kind = Kind::kInts;
    for (const json& e : j) {
      if (!e.is_number_integer()) {  // a list of something else: kept, but not as integers
        v.kind = Kind::kOther;
        v.ints.clear();
        break;
      }
      v.ints.push_back(e.get<std::int64_t>());
    }
  } else if (j.is_object() && j.contains("tensor")) {
    v.kind = Kind::kTensor;
    v.tensors.push_back(tensor_from(j, c, field));
  } else if (j.is_object() && j.contains("tensors")) {
    if (!j["tensors"].is_array()) c.fail(field, "'tensors' must be an array");
    v.kind = Kind::kTensorList;
    for (const json& t : j["tensors"]) v.tensors.push_back(tensor_from(t, c, field));
  } else {
    v.kind = Kind::kOther;
  }
  return v;
}

std::vector<CapturedValue> values_from(const json& j, const Context& c, const std::string& field) {
  std::vector<CapturedValue> out;
  if (!j.contains(field)) return out;
  if (!j[field].is_array()) c.fail(field, "must be an array");
  for (std::size_t i = 0; i < j[field].size(); ++i) {
    out.push_back(value_from(j[field][i], c, fmt::format("{}[{}]", field, i)));
  }
  return out;
}

}  // namespace

std::vector<CapturedOp> captured_ops_from_json(const json& ops, const std::string& source) {
  if (!ops.is_array()) {
    throw Error(ErrorCode::kDataLoss, fmt::format("{}: 'ops' must be an array of op objects", source));
  }
  std::vector<CapturedOp> out;
  out.reserve(ops.size());
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const json& j = ops[i];
    Context c{source, i, ""};
    if (!j.is_object() || !j.contains("op") || !j["op"].is_string())
      c.fail("op", "each op is an object with a string 'op'");
    CapturedOp op;
    op.name = c.op = j["op"].get<std::string>();
    op.inputs = values_from(j, c, "in");
    op.outputs = values_from(j, c, "out");
    if (j.contains("module")) {
      if (!j["module"].is_string()) c.fail("module", "must be a string (the module path the op ran in)");
      op.module = j["module"].get<std::string>();
    }
    if (j.contains("attrs")) {
      if (!j["attrs"].is_object()) c.fail("attrs", "must be an object");
      for (const auto& [k, v] : j["attrs"].items()) op.attributes[k] = value_from(v, c, "attrs." + k);
    }
    if (j.contains("event")) {  // the kernel that ran it (null: none)
      const json& e = j["event"];
      if (!e.is_null() && !(e.is_number_integer() && e.get<std::int64_t>() >= 0)) {
        c.fail("event", "must be a kernel's index (an integer from 0) or null");
      }
      op.event = e.is_null() ? -1 : e.get<std::int64_t>();
    }
    out.push_back(std::move(op));
  }
  return out;
}

}  // namespace neuralcost::capture
