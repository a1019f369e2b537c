// The ledger's index of a graph (memory_index.hpp): tensors, storages, records, gradient edges.
#include <algorithm>

#include <fmt/format.h>

#include "neuralcost/core/error.hpp"
#include "training/memory_index.hpp"

namespace neuralcost::training {
namespace {

bool carries_gradient(DType dtype) {
  switch (dtype) {
    case DType::kFp64:
    case DType::kFp32:
    case DType::kTf32:
    case DType::kFp16:
    case DType::kBf16:
    case DType::kFp8: return true;
    case DType::kInt8:
    case DType::kInt32:
    case DType::kInt64:
    case DType::kBool: return false;
  }
  return false;
}

}  // namespace

Index build_index(const OpGraph& g, Precision precision) {
  Index ix;
  const std::size_t n = g.size();
  ix.op_in.resize(n);
  ix.op_out.resize(n);
  ix.records.assign(n, false);
  ix.grad_preds.resize(n);
  ix.keeps.resize(n);
  ix.id.reserve(2 * n + 16);
  auto new_storage = [&](const TensorDesc& t, std::size_t producer, Precision p) {
    Storage s;
    s.name = t.name;
    s.bytes = activation_bytes(t, p);
    s.producer = producer;
    ix.storages.push_back(std::move(s));
    return ix.storages.size() - 1;
  };
  for (std::size_t i = 0; i < n; ++i) {
    const OpRecord& op = g.op(i);
    for (const TensorDesc& t : op.inputs) {
      auto [it, fresh] = ix.id.emplace(t.name, ix.tensors.size());
      if (fresh) {  // read before any op wrote it: a graph input
        Tensor x{t, kNoOp, {}, false, activation_bytes(t, precision)};
        x.roots.push_back(new_storage(t, kNoOp, precision));
        ix.tensors.push_back(std::move(x));
      }
      push_unique(ix.op_in[i], it->second);
    }
    // autograd records an op with a trainable parameter or an input that needs a gradient
    bool records =
        std::any_of(op.parameters.begin(), op.parameters.end(), [](const ParameterDesc& p) { return p.trainable; });
    for (std::size_t t : ix.op_in[i]) {
      if (!ix.tensors[t].needs_grad) continue;
      records = true;
      push_unique(ix.grad_preds[i], ix.tensors[t].producer);
    }
    ix.records[i] = records;
    const bool view = is_view(op) && !ix.op_in[i].empty();
    // an op the model computes in fp32 whatever the training precision (attribute computes_fp32:
    // a decoder's router, built for mixed precision) keeps its outputs fp32
    const Precision out = op.attributes.get_bool("computes_fp32", false) ? Precision::kFp32 : precision;
    // an in-place op (attribute in_place: ATen's add_, relu_, ...) writes into its first input's
    // storage: its output is that storage, not a new one
    const bool in_place =
        !view && op.attributes.get_bool("in_place", false) && !ix.op_in[i].empty() && op.outputs.size() == 1 &&
        activation_bytes(op.outputs[0], out) <= ix.storages[ix.tensors[ix.op_in[i][0]].roots.at(0)].bytes;
    for (const TensorDesc& t : op.outputs) {
      Tensor y{t, i, {}, records && carries_gradient(t.dtype), activation_bytes(t, out)};
      if (view || in_place) {  // an alias: a concatenation views every input, the others their first (data) input
        const std::size_t aliased = op.kind == OpKind::kConcat && view ? ix.op_in[i].size() : 1;
        for (std::size_t k = 0; k < aliased; ++k) {
          for (std::size_t r : ix.tensors[ix.op_in[i][k]].roots) push_unique(y.roots, r);
        }
      } else {
        y.roots.push_back(new_storage(t, i, out));
      }
      const auto [it, fresh] = ix.id.emplace(t.name, ix.tensors.size());
      if (!fresh) {
        throw Error(
            ErrorCode::kInvalidArgument,
            fmt::format("op '{}': tensor '{}' is {} (the ledger needs a finalized graph)", op.name, t.name,
                        ix.tensors[it->second].producer == kNoOp ? "read before it is written" : "written twice"));
      }
      ix.tensors.push_back(std::move(y));
      push_unique(ix.op_out[i], it->second);
    }
  }
  for (const std::string& name : g.outputs()) ix.outputs.push_back(ix.id.at(name));
  return ix;
}

}  // namespace neuralcost::training
