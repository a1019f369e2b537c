// Einsum, the general contraction: the one rule for every importer's einsum (ONNX Einsum,
// TensorFlow Einsum, JAX dot_general with dimension numbers the matmul rule cannot take).
// Attribute `equation` gives one subscript term per operand, in the order inputs then parameters,
// with an optional "->output" (numpy's implicit output otherwise) and "..." for broadcast dims.
// Every index of the equation is looped over once:
//  - two operands: one multiply per point, plus one add per point when an index is summed, so
//    a multiply-accumulate is 2 FLOPs as everywhere (2·M·N·K for "mk,kn->mn"); a contraction;
//  - one operand: summing an index adds (points - outputs); otherwise it only copies (0 FLOPs).
// More than two operands is unmodeled: the count depends on the contraction order the runtime
// picks, which the record does not say.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cost/op_families.hpp"
#include "neuralcost/core/checked_math.hpp"
#include "neuralcost/core/error.hpp"

namespace neuralcost::cost {
namespace {

constexpr char kFirstBroadcastLabel = 1;  // labels 1..31 stand for the dims under "..."

/// The operand terms before "->" (or of the whole equation), split at commas.
std::vector<std::string> operand_terms(const std::string& equation) {
  std::vector<std::string> terms(1);
  for (char c : equation.substr(0, equation.find("->"))) {
    if (c == ',') {
      terms.emplace_back();
    } else {
      terms.back().push_back(c);
    }
  }
  return terms;
}

bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

/// A term's labels with "..." expanded to `broadcast` labels, right-aligned (numpy rules).
std::string expand(const std::string& term, std::size_t rank, std::size_t* broadcast_rank, const std::string& what) {
  const auto dots = term.find("...");
  std::string letters = term;
  if (dots != std::string::npos) letters.erase(dots, 3);
  for (char c : letters) {
    if (!is_letter(c))
      throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: '{}' is not a subscript letter", what, c));
  }
  if (dots == std::string::npos) {
    if (letters.size() != rank) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: subscripts '{}' do not match rank {}", what, term, rank));
    }
    return letters;
  }
  if (letters.size() > rank || rank - letters.size() > 30) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: subscripts '{}' do not fit rank {}", what, term, rank));
  }
  const std::size_t n = rank - letters.size();
  *broadcast_rank = std::max(*broadcast_rank, n);
  std::string labels;
  for (std::size_t i = n; i > 0; --i) labels += static_cast<char>(kFirstBroadcastLabel + i - 1);
  return term.substr(0, dots) + labels + term.substr(dots + 3);
}

/// The equation resolved against its operands' shapes: each index's extent and the output's
/// indices (broadcast dims as labels below 'A').
struct Resolved {
  std::map<char, std::int64_t> size;
  std::string out;
};

Resolved resolve(std::string eq, const std::vector<Shape>& shapes) {
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  if (eq.empty()) throw Error(ErrorCode::kInvalidArgument, "missing attribute 'equation'");
  const auto arrow = eq.find("->");
  const std::vector<std::string> terms = operand_terms(eq);
  if (terms.size() != shapes.size()) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("equation '{}' has {} operand terms, the op has {} operands",
                                                         eq, terms.size(), shapes.size()));
  }
  std::size_t broadcast_rank = 0;
  Resolved r;
  std::map<char, int> uses;
  for (std::size_t i = 0; i < terms.size(); ++i) {
    const std::string labels = expand(terms[i], shapes[i].size(), &broadcast_rank, fmt::format("operand {}", i));
    for (std::size_t k = 0; k < labels.size(); ++k) {
      const std::int64_t d = shapes[i][k];
      auto [it, fresh] = r.size.emplace(labels[k], d);
      ++uses[labels[k]];
      if (fresh || it->second == d || d == 1) continue;
      if (it->second == 1 && labels[k] < 'A') {  // a broadcast dim of size 1 takes the other's size
        it->second = d;
        continue;
      }
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("equation '{}': index '{}' is {} in one operand and {} in another", eq,
                              labels[k] < 'A' ? '.' : labels[k], it->second, d));
    }
  }
  if (arrow == std::string::npos) {  // implicit: broadcast dims, then the indices used once, sorted
    for (std::size_t i = broadcast_rank; i > 0; --i) r.out += static_cast<char>(kFirstBroadcastLabel + i - 1);
    for (const auto& [label, n] : uses) {
      if (label >= 'A' && n == 1) r.out += label;
    }
  } else {
    const std::string given = eq.substr(arrow + 2);
    const auto dots = given.find("...");
    std::string labels;
    for (std::size_t i = broadcast_rank; i > 0; --i) labels += static_cast<char>(kFirstBroadcastLabel + i - 1);
    r.out = dots == std::string::npos ? given : given.substr(0, dots) + labels + given.substr(dots + 3);
    for (char c : r.out) {
      if (c >= 'A' && !r.size.count(c)) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("equation '{}': output index '{}' is on no operand", eq, c));
      }
    }
  }
  return r;
}

}  // namespace

void cost_einsum(const OpRecord& op, OpCost& cost) {
  std::vector<Shape> shapes;
  for (const TensorDesc& t : op.inputs) shapes.push_back(t.shape);
  for (const ParameterDesc& p : op.parameters) shapes.push_back(p.shape);
  const Resolved r = resolve(op.attributes.get_string("equation", ""), shapes);
  if (shapes.size() > 2) {
    return unmodeled(cost,
                     fmt::format("einsum over {} operands: its count depends on the contraction order", shapes.size()));
  }
  const std::map<char, std::int64_t>& size = r.size;
  const std::string& out = r.out;
  std::uint64_t points = 1, outputs = 1;
  bool summed = false;
  for (const auto& [label, extent] : size) {
    points = product({points, dim(extent)});
    if (out.find(label) == std::string::npos) {
      summed = true;
    } else {
      outputs = product({outputs, dim(extent)});
    }
  }
  if (shapes.size() == 2) {
    if (summed) return add_contraction(cost, product({2, points}));
    return add_flops(cost, points);
  }
  if (summed) add_flops(cost, points - outputs);
}

}  // namespace neuralcost::cost

namespace neuralcost {

Shape einsum_output_shape(const std::string& equation, const std::vector<Shape>& operands) {
  const cost::Resolved r = cost::resolve(equation, operands);
  Shape out;
  for (char label : r.out) out.push_back(r.size.at(label));
  return out;
}

std::string einsum_inputs_first(const std::string& equation, const std::vector<bool>& is_parameter) {
  const auto arrow = equation.find("->");
  const std::vector<std::string> terms = cost::operand_terms(equation);
  if (terms.size() != is_parameter.size()) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("equation '{}' has {} operand terms for {} operands", equation,
                                                         terms.size(), is_parameter.size()));
  }
  std::string inputs, parameters;
  for (std::size_t i = 0; i < terms.size(); ++i) {
    std::string& to = is_parameter[i] ? parameters : inputs;
    to += (to.empty() ? "" : ",") + terms[i];
  }
  const std::string joined = inputs.empty() || parameters.empty() ? inputs + parameters : inputs + "," + parameters;
  return arrow == std::string::npos ? joined : joined + equation.substr(arrow);
}

}  // namespace neuralcost
