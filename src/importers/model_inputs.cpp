// The inputs of a model file (see model_inputs.hpp): parsing, matching to the model's inputs and
// the contract's description of their values.
#include "neuralcost/model_inputs.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "neuralcost/core/error.hpp"

namespace neuralcost {
namespace {

constexpr double kExactIntegers = 9007199254740992.0;  // 2^53: every integer up to it is a double

/// The dtypes an input may have: storage types a framework fills (tf32 and fp8 are compute types).
bool is_input_dtype(DType d) {
  switch (d) {
    case DType::kFp64:
    case DType::kFp32:
    case DType::kFp16:
    case DType::kBf16:
    case DType::kInt64:
    case DType::kInt32:
    case DType::kInt8:
    case DType::kBool: return true;
    case DType::kTf32:
    case DType::kFp8: return false;
  }
  return false;
}

/// [lowest, highest + 1) of an integer type, as far as doubles hold it exactly.
std::pair<double, double> integer_limits(DType d) {
  switch (d) {
    case DType::kInt8: return {-128.0, 128.0};
    case DType::kInt32: return {-2147483648.0, 2147483648.0};
    default: return {-kExactIntegers, kExactIntegers};
  }
}

std::string number(double v) {
  if (std::floor(v) == v && std::fabs(v) <= kExactIntegers) return fmt::format("{}", static_cast<long long>(v));
  return fmt::format("{}", v);
}

double parse_bound(const std::string& text, const std::string& what) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size() || !std::isfinite(v)) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: the range bound '{}' is not a number", what, text));
  }
  return v;
}

ValueRange parse_range(const std::string& text, const std::string& what) {
  const auto dots = text.find("..");
  if (dots == std::string::npos) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: the value range must look like LOW..HIGH (HIGH excluded), e.g. 0..30522", what));
  }
  const ValueRange r{parse_bound(text.substr(0, dots), what), parse_bound(text.substr(dots + 2), what)};
  if (!(r.low < r.high)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: the value range {}..{} is empty (LOW must be below HIGH, which is excluded)", what,
                            number(r.low), number(r.high)));
  }
  return r;
}

std::string input_dtypes() { return "fp32, fp64, fp16, bf16, int64, int32, int8 or bool"; }

}  // namespace

bool is_integer(DType dtype) { return dtype == DType::kInt8 || dtype == DType::kInt32 || dtype == DType::kInt64; }

InputSpec parse_input(const std::string& text, bool named, const std::string& option) {
  const std::string what = fmt::format("{} '{}'", option, text);
  InputSpec spec;
  std::string rest = text;
  if (named) {
    const auto eq = text.rfind('=');  // names may hold '=' (and ':'), the rest holds neither
    if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{} must look like NAME=SHAPE[:DTYPE[:LOW..HIGH]], e.g. ids=8x128:int64:0..30522", what));
    }
    spec.name = text.substr(0, eq);
    rest = text.substr(eq + 1);
  }
  std::vector<std::string> parts;
  for (std::size_t start = 0;;) {
    const auto colon = rest.find(':', start);
    parts.push_back(rest.substr(start, colon == std::string::npos ? std::string::npos : colon - start));
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  if (parts.size() > 3) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: expected {}SHAPE[:DTYPE[:LOW..HIGH]], e.g. {}8x128:int64:0..30522", what,
                            named ? "NAME=" : "", named ? "ids=" : ""));
  }
  spec.shape = parse_shape(parts[0], what);
  if (parts.size() >= 2) {
    const auto dtype = parse_dtype(parts[1]);
    if (!dtype || !is_input_dtype(*dtype)) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: '{}' is not an input dtype ({})", what, parts[1], input_dtypes()));
    }
    spec.dtype = *dtype;
  }
  if (parts.size() == 3) spec.range = parse_range(parts[2], what);
  if (!spec.dtype) return spec;  // the model's own dtype: its backend checks what it needs
  const DType d = *spec.dtype;
  if (d == DType::kBool && spec.range) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: a bool input takes no value range (it is 0 or 1)", what));
  }
  if (is_integer(d)) {
    if (!spec.range) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: an integer input needs its value range, LOW..HIGH with HIGH excluded, e.g. "
                              "{}{}:{}:0..30522 (token ids: 0..vocabulary size)",
                              what, named ? spec.name + "=" : "", parts[0], parts[1]));
    }
    const auto [lowest, end] = integer_limits(d);
    const ValueRange& r = *spec.range;
    if (std::floor(r.low) != r.low || std::floor(r.high) != r.high) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: the range of an integer input must be integers", what));
    }
    if (r.low < lowest || r.high > end) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: the range {}..{} does not fit {} ({}..{})", what, number(r.low), number(r.high),
                              dtype_name(d), number(lowest), number(end)));
    }
  }
  return spec;
}

std::vector<InputSpec> inputs_of(const ModelRequest& request) {
  if (!request.inputs.empty() && !request.input_shapes.empty()) {
    throw Error(ErrorCode::kInvalidArgument, "inputs are given both as inputs and as input shapes; give one list");
  }
  if (request.inputs.empty()) {
    std::vector<InputSpec> out;
    for (const Shape& s : request.input_shapes) out.push_back(InputSpec{"", s, std::nullopt, std::nullopt});
    return out;
  }
  const auto named =
      std::count_if(request.inputs.begin(), request.inputs.end(), [](const InputSpec& i) { return !i.name.empty(); });
  if (named != 0 && named != static_cast<std::ptrdiff_t>(request.inputs.size())) {
    throw Error(ErrorCode::kInvalidArgument,
                "inputs are given both by name (--input NAME=SHAPE) and by position (--input-shape SHAPE); "
                "give all of them one way");
  }
  std::set<std::string> seen;
  for (const InputSpec& i : request.inputs) {
    if (!i.name.empty() && !seen.insert(i.name).second) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("input '{}' is given twice", i.name));
    }
  }
  return request.inputs;
}

std::vector<InputSpec> match_inputs(const std::vector<InputSpec>& given, const std::vector<std::string>& names,
                                    std::size_t required, const std::string& model) {
  const std::string list = names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", "));
  required = std::min(required, names.size());
  if (given.empty() || given.front().name.empty()) {  // by position
    if (given.size() < required || given.size() > names.size()) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{} takes {}{} input{} ({}); {} given", model,
                              required == names.size() ? "" : fmt::format("{} to ", required), names.size(),
                              names.size() == 1 ? "" : "s", list, given.size()));
    }
    std::vector<InputSpec> out = given;
    for (std::size_t i = 0; i < out.size(); ++i) out[i].name = names[i];
    return out;
  }
  std::size_t last = 0;  // one past the last input given
  for (const InputSpec& g : given) {
    const auto it = std::find(names.begin(), names.end(), g.name);
    if (it == names.end()) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{} has no input '{}'; its inputs: {}", model, g.name, list));
    }
    last = std::max(last, static_cast<std::size_t>(it - names.begin()) + 1);
  }
  std::vector<InputSpec> out;
  for (std::size_t i = 0; i < std::max(last, required); ++i) {
    const auto it = std::find_if(given.begin(), given.end(), [&](const InputSpec& g) { return g.name == names[i]; });
    if (it == given.end()) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: input '{}' is not given (--input {}=SHAPE[:DTYPE]); its inputs: {}", model, names[i],
                              names[i], list));
    }
    out.push_back(*it);
  }
  return out;
}

std::string describe_input(const InputSpec& input, DType dtype) {
  std::string values;
  if (dtype == DType::kBool) {
    values = "0 or 1, uniform";
  } else if (is_integer(dtype)) {
    values = input.range
                 ? fmt::format("integers uniform in [{}, {})", number(input.range->low), number(input.range->high))
                 : std::string("integers (no range)");
  } else {
    values = input.range ? fmt::format("uniform in [{}, {})", number(input.range->low), number(input.range->high))
                         : std::string("standard normal");
  }
  return fmt::format("{}{}{} {}, {}", input.name, input.name.empty() ? "" : ": ", shape_string(input.shape),
                     dtype_name(dtype), values);
}

}  // namespace neuralcost
