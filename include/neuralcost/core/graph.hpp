// The op graph: ops in topological order, connected by tensor names. Producer and consumer
// edges are indexed here because later analyses (activation liveness, fusion) walk them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "neuralcost/core/op.hpp"

namespace neuralcost {

class OpGraph {
 public:
  explicit OpGraph(std::string name = "graph") : name_(std::move(name)) {}

  /// Appends an op. Throws kInvalidArgument if its name is taken, a tensor it outputs already
  /// has a producer, or an input disagrees in shape/dtype with the tensor of the same name.
  /// Inputs nobody produced (yet) are graph inputs until a later op produces them.
  std::size_t add(OpRecord op);
  /// Marks a tensor as a result of the graph (it must be written to memory even when fused).
  void mark_output(const std::string& tensor);

  /// Checks the graph is acyclic and every edge is consistent, and reorders ops topologically.
  /// Throws kInvalidArgument naming an op on the cycle.
  void finalize();

  const std::string& name() const { return name_; }
  const std::vector<OpRecord>& ops() const { return ops_; }
  const OpRecord& op(std::size_t index) const { return ops_.at(index); }
  std::size_t size() const { return ops_.size(); }

  /// Index of the op producing `tensor`, or empty for a graph input.
  std::optional<std::size_t> producer(const std::string& tensor) const;
  /// Indices of the ops reading `tensor` (in op order).
  const std::vector<std::size_t>& consumers(const std::string& tensor) const;
  /// Tensors marked as outputs, plus produced tensors no op consumes.
  std::vector<std::string> outputs() const;
  bool is_output(const std::string& tensor) const;
  /// Only the tensors marked as outputs, in marking order.
  const std::vector<std::string>& marked_outputs() const { return marked_outputs_; }
  /// Tensors read but produced by no op, in first-use order.
  std::vector<TensorDesc> inputs() const;

  /// Every distinct parameter (by id) in first-use order, as first seen. Ops may see one weight
  /// through different views (W, Wᵀ); throws kInvalidArgument if two uses of an id differ in
  /// element count or dtype.
  std::vector<ParameterDesc> unique_parameters() const;

  /// Samples per forward pass as the importer knows it (the reference networks: the requested
  /// batch; ONNX: the leading dimension of the first input after binding); 0 = unknown.
  std::int64_t batch() const { return batch_; }
  void set_batch(std::int64_t batch) { batch_ = batch; }
  /// What the importer decided for the user and says so: how the batch was found, which
  /// tensors a requested dtype converted (one sentence each; views print them as notes).
  const std::vector<std::string>& notes() const { return notes_; }
  void add_note(std::string note) { notes_.push_back(std::move(note)); }

 private:
  void rebuild_index();

  std::string name_;
  std::vector<OpRecord> ops_;
  // hashed: a training step graph has several thousand records, each indexed by name
  std::unordered_map<std::string, std::size_t> op_by_name_;
  std::unordered_map<std::string, std::size_t> producer_;
  std::unordered_map<std::string, std::vector<std::size_t>> consumers_;
  std::unordered_map<std::string, TensorDesc> tensors_;
  std::vector<std::string> marked_outputs_;
  std::int64_t batch_ = 0;
  std::vector<std::string> notes_;
};

}  // namespace neuralcost
