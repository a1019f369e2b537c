// The training options' names and parsers, and optimizer state sizes (training/training.hpp).
#include <array>
#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "neuralcost/core/error.hpp"
#include "neuralcost/training/training.hpp"

namespace neuralcost {
namespace {

constexpr std::array<std::pair<std::string_view, Optimizer>, 4> kOptimizers = {{{"sgd", Optimizer::kSgd},
                                                                                {"momentum", Optimizer::kMomentum},
                                                                                {"adam", Optimizer::kAdam},
                                                                                {"adamw", Optimizer::kAdamW}}};
constexpr std::array<std::pair<std::string_view, Precision>, 3> kPrecisions = {
    {{"fp32", Precision::kFp32}, {"bf16-mixed", Precision::kBf16Mixed}, {"fp16-mixed", Precision::kFp16Mixed}}};

template <typename T, std::size_t N>
std::string names_of(const std::array<std::pair<std::string_view, T>, N>& table) {
  std::string out;
  for (const auto& [name, value] : table) out += (out.empty() ? "" : ", ") + std::string(name);
  return out;
}

template <typename T, std::size_t N>
T parse_from(const std::array<std::pair<std::string_view, T>, N>& table, const std::string& text, const char* option) {
  for (const auto& [name, value] : table) {
    if (name == text) return value;
  }
  throw Error(ErrorCode::kInvalidArgument, fmt::format("{} '{}' is not one of {}", option, text, names_of(table)));
}

template <typename T, std::size_t N>
std::string_view name_from(const std::array<std::pair<std::string_view, T>, N>& table, T value) {
  for (const auto& [name, v] : table) {
    if (v == value) return name;
  }
  return "unknown";
}

}  // namespace

std::string_view pass_name(Pass pass) {
  switch (pass) {
    case Pass::kForward: return "forward";
    case Pass::kRecompute: return "recompute";
    case Pass::kInputGradient: return "input_gradient";
    case Pass::kWeightGradient: return "weight_gradient";
    case Pass::kOptimizer: return "optimizer";
  }
  return "forward";
}

Pass pass_of(const OpRecord& op) {
  const std::string name = op.attributes.get_string(std::string(kPassAttribute), "forward");
  for (Pass p : {Pass::kForward, Pass::kRecompute, Pass::kInputGradient, Pass::kWeightGradient, Pass::kOptimizer}) {
    if (pass_name(p) == name) return p;
  }
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("attribute 'pass' is '{}', not a pass of a training step", name));
}

Optimizer parse_optimizer(const std::string& text) { return parse_from(kOptimizers, text, "--optimizer"); }
Precision parse_precision(const std::string& text) { return parse_from(kPrecisions, text, "--precision"); }
std::string_view optimizer_name(Optimizer optimizer) { return name_from(kOptimizers, optimizer); }
Precision graph_precision(const TrainingOptions& options) {
  return options.autocast ? Precision::kFp32 : options.precision;
}

std::string_view precision_name(Precision precision) { return name_from(kPrecisions, precision); }

CheckpointPolicy parse_checkpoint(const std::string& text) {
  if (text == "none") return {CheckpointKind::kNone, 0};
  if (text == "full") return {CheckpointKind::kFull, 0};
  if (text == "selective") return {CheckpointKind::kSelective, 0};
  if (text == "every") return {CheckpointKind::kEveryK, 0};
  if (text.rfind("every:", 0) == 0) {
    const std::string k = text.substr(6);
    std::int64_t value = 0;
    bool ok = !k.empty() && k.size() <= 9;
    for (char c : k) ok = ok && c >= '0' && c <= '9';
    if (ok) value = std::stoll(k);
    if (ok && value > 0) return {CheckpointKind::kEveryK, value};
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--checkpoint '{}': K in every:K must be a positive integer", text));
  }
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("--checkpoint '{}' is not one of none, full, every:K, every (K = square root of the op "
                          "count), selective",
                          text));
}

std::string checkpoint_name(const CheckpointPolicy& policy) {
  switch (policy.kind) {
    case CheckpointKind::kNone: return "none";
    case CheckpointKind::kFull: return "full";
    case CheckpointKind::kSelective: return "selective";
    case CheckpointKind::kEveryK: return policy.every > 0 ? fmt::format("every:{}", policy.every) : "every";
  }
  return "none";
}

std::uint64_t optimizer_state_bytes_per_element(Optimizer optimizer, Precision precision) {
  std::uint64_t states = 0;
  switch (optimizer) {
    case Optimizer::kSgd: states = 0; break;
    case Optimizer::kMomentum: states = 1; break;
    case Optimizer::kAdam:
    case Optimizer::kAdamW: states = 2; break;
  }
  const std::uint64_t master = precision == Precision::kFp32 ? 0 : 1;  // fp32 master weights
  return 4 * (states + master);
}

}  // namespace neuralcost
