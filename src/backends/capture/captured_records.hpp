// Building op records from captured ops: the helpers every framework's mapping table shares
// (aten_mapping.cpp, jax_mapping.cpp, tf_mapping.cpp), and the tables themselves.
#pragma once

#include <functional>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "backends/capture/captured_op.hpp"
#include "neuralcost/core/checked_math.hpp"
#include "neuralcost/cost/cost_model.hpp"

namespace neuralcost::capture {

using Kind = CapturedValue::Kind;
/// Maps one captured op to the records it computes (none for a view of a weight).
using Handler = std::function<std::vector<OpRecord>(const CapturedOp&)>;
using HandlerTable = std::map<std::string, Handler>;

/// The tables, keyed by full op name ("aten::addmm", "jax::dot_general", "tf::MatMul").
const HandlerTable& aten_handlers();
const HandlerTable& jax_handlers();
const HandlerTable& tf_handlers();

TensorDesc desc(const CapturedTensor& t);
ParameterDesc param(const CapturedTensor& t);

/// Positional inputs.
const CapturedTensor* tensor_at(const CapturedOp& call, std::size_t i);
std::vector<std::int64_t> ints_at(const CapturedOp& call, std::size_t i);
std::int64_t int_at(const CapturedOp& call, std::size_t i, std::int64_t fallback);
bool bool_at(const CapturedOp& call, std::size_t i, bool fallback);

/// Named attributes.
const CapturedValue* attribute(const CapturedOp& call, const std::string& name);
std::vector<std::int64_t> attr_ints(const CapturedOp& call, const std::string& name);
std::int64_t attr_int(const CapturedOp& call, const std::string& name, std::int64_t fallback);
bool attr_bool(const CapturedOp& call, const std::string& name, bool fallback);
std::string attr_string(const CapturedOp& call, const std::string& name, const std::string& fallback);

/// A record with the call's tensors: activations as inputs (in argument order), weights and
/// constants as parameters, every tensor output as an output.
OpRecord record(const CapturedOp& call, OpKind kind);
/// Like record(), but only the tensors at `positions`, in that order (operand order matters
/// for products). Trailing weights become parameters; a weight followed by an activation
/// stays an input so that the operands keep their order.
OpRecord record_of(const CapturedOp& call, OpKind kind, std::initializer_list<std::size_t> positions);
/// The tensors at `positions` as inputs, in that order, whether weights or not (an attention's
/// operands are data even when a buffer holds one of them).
OpRecord record_inputs(const CapturedOp& call, OpKind kind, std::initializer_list<std::size_t> positions);
/// A kUnknown record of the call with attribute "reason".
OpRecord unknown(const CapturedOp& call, const std::string& reason);

std::vector<OpRecord> one(OpRecord r);
/// An elementwise op of `kind` with attribute function = `function`.
Handler function_of(OpKind kind, std::string function);
/// A view: no work; none at all for a view of a weight (it is still that weight).
Handler view();

/// True for an ATen op whose output is a view of its first input: the one list
/// (python/neuralcost_worker/torch/aten_view_ops.txt), which the torch worker reads too.
bool is_aten_view(const std::string& name);

}  // namespace neuralcost::capture
