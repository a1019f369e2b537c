// Op graph bookkeeping: edge index, consistency checks and topological order.
#include "neuralcost/core/graph.hpp"

#include <algorithm>
#include <deque>
#include <set>

#include <fmt/format.h>

#include "neuralcost/core/error.hpp"

namespace neuralcost {
namespace {

void check_same(const TensorDesc& seen, const TensorDesc& now, const std::string& op) {
  if (seen.shape != now.shape || seen.dtype != now.dtype) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("op '{}': tensor '{}' is {} {} here but {} {} elsewhere", op,
                                                         now.name, shape_string(now.shape), dtype_name(now.dtype),
                                                         shape_string(seen.shape), dtype_name(seen.dtype)));
  }
}

}  // namespace

std::size_t OpGraph::add(OpRecord op) {
  if (op.name.empty()) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("op #{} has no name", ops_.size()));
  }
  if (op_by_name_.count(op.name)) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("duplicate op name '{}'", op.name));
  }
  for (const TensorDesc& t : op.outputs) {
    if (producer_.count(t.name)) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("op '{}': tensor '{}' is already produced by op '{}'",
                                                           op.name, t.name, ops_[producer_.at(t.name)].name));
    }
  }
  for (const auto* list : {&op.inputs, &op.outputs}) {
    for (const TensorDesc& t : *list) {
      t.elements();  // rejects negative or overflowing dimensions early, naming the tensor
      auto [it, inserted] = tensors_.emplace(t.name, t);
      if (!inserted) check_same(it->second, t, op.name);
    }
  }
  const std::size_t index = ops_.size();
  op_by_name_[op.name] = index;
  for (const TensorDesc& t : op.outputs) producer_[t.name] = index;
  for (const TensorDesc& t : op.inputs) {
    auto& c = consumers_[t.name];
    if (c.empty() || c.back() != index) c.push_back(index);
  }
  ops_.push_back(std::move(op));
  return index;
}

void OpGraph::mark_output(const std::string& tensor) {
  if (!tensors_.count(tensor)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("graph '{}': output '{}' is not a tensor of the graph", name_, tensor));
  }
  if (std::find(marked_outputs_.begin(), marked_outputs_.end(), tensor) == marked_outputs_.end()) {
    marked_outputs_.push_back(tensor);
  }
}

void OpGraph::finalize() {
  // Already in topological order (every producer before its consumers: importers and the
  // training transform add ops that way)? Then the order stands, and so does the index.
  bool ordered = true;
  for (std::size_t i = 0; i < ops_.size() && ordered; ++i) {
    for (const TensorDesc& t : ops_[i].inputs) {
      const auto it = producer_.find(t.name);
      if (it != producer_.end() && it->second >= i) {
        ordered = false;
        break;
      }
    }
  }
  if (ordered) return;
  // Kahn's algorithm, stable: among ready ops the earliest added goes first.
  std::vector<std::size_t> pending(ops_.size(), 0);
  for (std::size_t i = 0; i < ops_.size(); ++i) {
    const std::vector<TensorDesc>& in = ops_[i].inputs;
    for (std::size_t k = 0; k < in.size(); ++k) {
      bool repeated = false;  // an op reading one tensor twice waits for it once
      for (std::size_t j = 0; j < k && !repeated; ++j) repeated = in[j].name == in[k].name;
      if (!repeated && producer_.count(in[k].name)) ++pending[i];
    }
  }
  std::set<std::size_t> ready;
  for (std::size_t i = 0; i < ops_.size(); ++i) {
    if (pending[i] == 0) ready.insert(i);
  }
  std::vector<std::size_t> order;
  while (!ready.empty()) {
    const std::size_t i = *ready.begin();
    ready.erase(ready.begin());
    order.push_back(i);
    for (const TensorDesc& t : ops_[i].outputs) {
      for (std::size_t c : consumers_[t.name]) {
        if (--pending[c] == 0) ready.insert(c);
      }
    }
  }
  if (order.size() != ops_.size()) {
    for (std::size_t i = 0; i < ops_.size(); ++i) {
      if (pending[i] != 0) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("graph '{}' has a cycle through op '{}'", name_, ops_[i].name));
      }
    }
  }
  std::vector<OpRecord> sorted;
  sorted.reserve(ops_.size());
  for (std::size_t i : order) sorted.push_back(std::move(ops_[i]));
  ops_ = std::move(sorted);
  rebuild_index();
}

void OpGraph::rebuild_index() {
  op_by_name_.clear();
  producer_.clear();
  consumers_.clear();
  for (std::size_t i = 0; i < ops_.size(); ++i) {
    op_by_name_[ops_[i].name] = i;
    for (const TensorDesc& t : ops_[i].outputs) producer_[t.name] = i;
    for (const TensorDesc& t : ops_[i].inputs) {
      auto& c = consumers_[t.name];
      if (c.empty() || c.back() != i) c.push_back(i);
    }
  }
}

std::optional<std::size_t> OpGraph::producer(const std::string& tensor) const {
  auto it = producer_.find(tensor);
  if (it == producer_.end()) return std::nullopt;
  return it->second;
}

const std::vector<std::size_t>& OpGraph::consumers(const std::string& tensor) const {
  static const std::vector<std::size_t> none;
  auto it = consumers_.find(tensor);
  return it == consumers_.end() ? none : it->second;
}

bool OpGraph::is_output(const std::string& tensor) const {
  if (std::find(marked_outputs_.begin(), marked_outputs_.end(), tensor) != marked_outputs_.end()) {
    return true;
  }
  return producer_.count(tensor) && consumers(tensor).empty();
}

std::vector<std::string> OpGraph::outputs() const {
  std::vector<std::string> out = marked_outputs_;
  for (const OpRecord& op : ops_) {
    for (const TensorDesc& t : op.outputs) {
      if (consumers(t.name).empty() && std::find(out.begin(), out.end(), t.name) == out.end()) {
        out.push_back(t.name);
      }
    }
  }
  return out;
}

std::vector<TensorDesc> OpGraph::inputs() const {
  std::vector<TensorDesc> in;
  std::set<std::string> seen;
  for (const OpRecord& op : ops_) {
    for (const TensorDesc& t : op.inputs) {
      if (!producer_.count(t.name) && seen.insert(t.name).second) in.push_back(t);
    }
  }
  return in;
}

std::vector<ParameterDesc> OpGraph::unique_parameters() const {
  std::vector<ParameterDesc> params;
  std::map<std::string, std::size_t> index;
  for (const OpRecord& op : ops_) {
    for (const ParameterDesc& p : op.parameters) {
      auto [it, inserted] = index.emplace(p.id, params.size());
      if (inserted) {
        params.push_back(p);
      } else if (params[it->second].elements() != p.elements() || params[it->second].dtype != p.dtype) {
        // the same weight may be seen through a view (W and its transpose): same size and type
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("op '{}': parameter '{}' is {} {} here but {} {} elsewhere", op.name, p.id,
                                shape_string(p.shape), dtype_name(p.dtype), shape_string(params[it->second].shape),
                                dtype_name(params[it->second].dtype)));
      }
    }
  }
  return params;
}

}  // namespace neuralcost
