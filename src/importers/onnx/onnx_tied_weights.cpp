// Exporters that cannot share one initializer between two ops write a copy: GPT-2's language
// model head, tied to the token embedding [V, E], is written as a second initializer [E, V]
// holding its transpose. The copy is read and stored like any weight, so it is counted; this
// says so, naming both, so that the parameter count is not taken for the model's.
#include <cstring>
#include <map>

#include <fmt/format.h>

#include "importers/onnx/onnx_graph.hpp"
#include "neuralcost/core/number_text.hpp"

namespace neuralcost::onnx_import {
namespace {

/// The bytes of a stored floating-point initializer and its element width; empty when its
/// data is not in the file (external, or dropped by --structure-only) or is not raw bytes.
std::pair<const std::string*, std::size_t> raw(const onnx::TensorProto& t) {
  using T = onnx::TensorProto;
  static const std::map<int, std::size_t> widths = {{T::FLOAT, 4}, {T::DOUBLE, 8}, {T::FLOAT16, 2}, {T::BFLOAT16, 2}};
  const auto w = widths.find(t.data_type());
  if (w == widths.end() || t.dims_size() != 2 || t.data_location() == T::EXTERNAL || !t.has_raw_data())
    return {nullptr, 0};
  const std::uint64_t n = static_cast<std::uint64_t>(t.dims(0)) * static_cast<std::uint64_t>(t.dims(1));
  if (t.raw_data().size() != n * w->second) return {nullptr, 0};
  return {&t.raw_data(), w->second};
}

/// b [C, R] holds a [R, C] transposed, element for element.
bool transposed_copy(const std::string& a, const std::string& b, std::int64_t rows, std::int64_t cols,
                     std::size_t width) {
  for (std::int64_t i = 0; i < rows; ++i) {
    for (std::int64_t j = 0; j < cols; ++j) {
      const std::size_t x = static_cast<std::size_t>(i * cols + j) * width,
                        y = static_cast<std::size_t>(j * rows + i) * width;
      if (std::memcmp(a.data() + x, b.data() + y, width) != 0) return false;
    }
  }
  return true;
}

}  // namespace

std::vector<std::string> tied_copy_notes(const onnx::GraphProto& graph) {
  // candidates: rank-2 initializers of at least 1,024 elements that are not square (a square
  // one's transpose may be itself), by their dims, so that only [R, C] and [C, R] meet
  constexpr std::int64_t kSmallest = 1024;
  std::map<std::pair<std::int64_t, std::int64_t>, std::vector<const onnx::TensorProto*>> by_dims;
  for (const auto& t : graph.initializer()) {
    if (raw(t).first && t.dims(0) != t.dims(1) && t.dims(0) * t.dims(1) >= kSmallest)
      by_dims[{t.dims(0), t.dims(1)}].push_back(&t);
  }
  std::vector<std::string> notes;
  for (const auto& [dims, firsts] : by_dims) {
    if (dims.first > dims.second) continue;  // each pair once: from the [R, C] side with R < C
    const auto other = by_dims.find({dims.second, dims.first});
    if (other == by_dims.end()) continue;
    for (const onnx::TensorProto* a : firsts) {
      for (const onnx::TensorProto* b : other->second) {
        const auto [bytes_a, width] = raw(*a);
        const auto [bytes_b, width_b] = raw(*b);
        if (a->data_type() != b->data_type() || width != width_b) continue;
        if (!transposed_copy(*bytes_a, *bytes_b, dims.first, dims.second, width)) continue;
        notes.push_back(fmt::format(
            "initializers '{}' {}x{} and '{}' {}x{} hold one weight, each the other's transpose (a tied weight the "
            "export wrote twice): both are counted, {} parameters more than the model has",
            a->name(), dims.first, dims.second, b->name(), dims.second, dims.first,
            grouped(static_cast<std::uint64_t>(dims.first * dims.second))));
      }
    }
  }
  return notes;
}

}  // namespace neuralcost::onnx_import
