// Helpers shared by the mapping tables (see captured_records.hpp), and the dispatch of a
// captured op to its framework's table.
#include "backends/capture/captured_records.hpp"

#include <algorithm>
#include <set>

#include <fmt/format.h>

namespace neuralcost::capture {

TensorDesc desc(const CapturedTensor& t) { return {t.name, t.shape, t.dtype}; }
ParameterDesc param(const CapturedTensor& t) { return {t.name, t.shape, t.dtype, !t.buffer}; }

const CapturedTensor* tensor_at(const CapturedOp& call, std::size_t i) {
  if (i >= call.inputs.size() || call.inputs[i].kind != Kind::kTensor) return nullptr;
  return &call.inputs[i].tensors.front();
}

std::vector<std::int64_t> ints_at(const CapturedOp& call, std::size_t i) {
  if (i < call.inputs.size()) {
    if (call.inputs[i].kind == Kind::kInts) return call.inputs[i].ints;
    if (call.inputs[i].kind == Kind::kInt) return {call.inputs[i].i};
  }
  return {};
}

std::int64_t int_at(const CapturedOp& call, std::size_t i, std::int64_t fallback) {
  return i < call.inputs.size() && call.inputs[i].kind == Kind::kInt ? call.inputs[i].i : fallback;
}

bool bool_at(const CapturedOp& call, std::size_t i, bool fallback) {
  return i < call.inputs.size() && call.inputs[i].kind == Kind::kBool ? call.inputs[i].b : fallback;
}

/// A record with the call's tensors: activations as inputs (in argument order), weights and
/// constants as parameters, every tensor output as an output.
OpRecord record(const CapturedOp& call, OpKind kind) {
  OpRecord r;
  r.kind = kind;
  r.source_type = call.name;
  for (const CapturedValue& v : call.inputs) {
    for (const CapturedTensor& t : v.tensors) {
      if (t.parameter) {
        r.parameters.push_back(param(t));
      } else {
        r.inputs.push_back(desc(t));
      }
    }
  }
  for (const CapturedValue& v : call.outputs) {
    for (const CapturedTensor& t : v.tensors) r.outputs.push_back(desc(t));
  }
  return r;
}

/// Like record(), but only the tensors at `positions`, in that order (operand order matters
/// for products). Trailing weights become parameters; a weight followed by an activation
/// stays an input so that the operands keep their order.
OpRecord record_of(const CapturedOp& call, OpKind kind, std::initializer_list<std::size_t> positions) {
  std::vector<CapturedTensor> operands;
  for (std::size_t i : positions) {
    if (i < call.inputs.size()) {
      for (const CapturedTensor& t : call.inputs[i].tensors) operands.push_back(t);
    }
  }
  std::size_t first_param = operands.size();
  while (first_param > 0 && operands[first_param - 1].parameter) --first_param;
  OpRecord r;
  r.kind = kind;
  r.source_type = call.name;
  for (std::size_t i = 0; i < operands.size(); ++i) {
    if (i >= first_param) {
      r.parameters.push_back(param(operands[i]));
    } else {
      r.inputs.push_back(desc(operands[i]));
    }
  }
  for (const CapturedValue& v : call.outputs) {
    for (const CapturedTensor& t : v.tensors) r.outputs.push_back(desc(t));
  }
  return r;
}

OpRecord record_inputs(const CapturedOp& call, OpKind kind, std::initializer_list<std::size_t> positions) {
  OpRecord r;
  r.kind = kind;
  r.source_type = call.name;
  for (std::size_t i : positions) {
    if (i < call.inputs.size()) {
      for (const CapturedTensor& t : call.inputs[i].tensors) r.inputs.push_back(desc(t));
    }
  }
  for (const CapturedValue& v : call.outputs) {
    for (const CapturedTensor& t : v.tensors) r.outputs.push_back(desc(t));
  }
  return r;
}

std::vector<OpRecord> one(OpRecord r) { return {std::move(r)}; }

Handler function_of(OpKind kind, std::string function) {
  return [kind, function](const CapturedOp& call) {
    OpRecord r = record(call, kind);
    r.attributes.set("function", function);
    if (kind == OpKind::kBinary && r.inputs.size() + r.parameters.size() < 2) r.attributes.set("scalar_operand", true);
    return one(std::move(r));
  };
}

Handler view() {
  return [](const CapturedOp& call) -> std::vector<OpRecord> {
    OpRecord r = record(call, OpKind::kReshape);
    if (r.outputs.empty()) return {};
    if (r.inputs.empty()) {
      // a view of a weight that keeps its elements is still that weight (the observer names it
      // so); one that selects or broadcasts (a class token expanded to the batch, a slice of
      // position ids) is a free view that reads the weight, counted once at its own size
      const bool same = std::all_of(r.outputs.begin(), r.outputs.end(), [&](const TensorDesc& t) {
        return std::any_of(r.parameters.begin(), r.parameters.end(),
                           [&](const ParameterDesc& p) { return p.id == t.name; });
      });
      if (same || r.parameters.empty()) return {};
      return one(std::move(r));
    }
    r.parameters.clear();
    return one(std::move(r));
  };
}

const CapturedValue* attribute(const CapturedOp& call, const std::string& name) {
  auto it = call.attributes.find(name);
  return it == call.attributes.end() ? nullptr : &it->second;
}

std::vector<std::int64_t> attr_ints(const CapturedOp& call, const std::string& name) {
  const CapturedValue* v = attribute(call, name);
  if (v && v->kind == Kind::kInts) return v->ints;
  if (v && v->kind == Kind::kInt) return {v->i};
  return {};
}

std::int64_t attr_int(const CapturedOp& call, const std::string& name, std::int64_t fallback) {
  const CapturedValue* v = attribute(call, name);
  return v && v->kind == Kind::kInt ? v->i : fallback;
}

bool attr_bool(const CapturedOp& call, const std::string& name, bool fallback) {
  const CapturedValue* v = attribute(call, name);
  return v && v->kind == Kind::kBool ? v->b : fallback;
}

std::string attr_string(const CapturedOp& call, const std::string& name, const std::string& fallback) {
  const CapturedValue* v = attribute(call, name);
  return v && v->kind == Kind::kString ? v->s : fallback;
}

OpRecord unknown(const CapturedOp& call, const std::string& reason) {
  OpRecord r = record(call, OpKind::kUnknown);
  r.attributes.set("reason", reason);
  return r;
}

bool is_aten_view(const std::string& name) {
  static const std::set<std::string> views = {
#include "aten_view_ops.inc"
  };
  return views.count(name) != 0;
}

}  // namespace neuralcost::capture
