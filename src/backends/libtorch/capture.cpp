// The op observer and the per-op profiler (see capture.hpp).
#include "backends/libtorch/capture.hpp"

#include <ATen/core/function_schema.h>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/profiler_legacy.h>

#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include "backends/capture/captured_records.hpp"
#include "neuralcost/core/error.hpp"

namespace neuralcost::libtorch {
namespace {

std::optional<DType> dtype_of(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Double: return DType::kFp64;
    case c10::ScalarType::Float: return DType::kFp32;
    case c10::ScalarType::Half: return DType::kFp16;
    case c10::ScalarType::BFloat16: return DType::kBf16;
    case c10::ScalarType::Char:
    case c10::ScalarType::QInt8:
    case c10::ScalarType::Byte:
    case c10::ScalarType::QUInt8: return DType::kInt8;
    case c10::ScalarType::Int: return DType::kInt32;
    case c10::ScalarType::Long: return DType::kInt64;
    case c10::ScalarType::Bool: return DType::kBool;
    default: return std::nullopt;
  }
}

/// Names every tensor seen during one forward pass.
class Namer {
 public:
  Namer(const std::vector<at::Tensor>& inputs, const ParameterNames& names) : param_names_(names) {
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      known_[inputs[i].unsafeGetTensorImpl()] = {fmt::format("input{}", i), false, key_of(inputs[i])};
    }
  }

  CapturedTensor describe(const at::Tensor& t) {
    CapturedTensor c;
    auto it = known_.find(t.unsafeGetTensorImpl());
    if (it != known_.end() && !it->second.matches(t)) {
      // the address was reused by a tensor that no observed call produced
      known_.erase(it);
      it = known_.end();
    }
    if (it == known_.end()) {
      // neither a model input nor produced by a call: a weight or a frozen constant
      const void* data = t.has_storage() ? t.data_ptr() : nullptr;
      auto named = param_names_.find(data);
      std::string name = named != param_names_.end() ? named->second : fmt::format("const{}", constants_++);
      it = known_.emplace(t.unsafeGetTensorImpl(), Entry{name, true, key_of(t)}).first;
    }
    c.name = it->second.name;
    c.parameter = it->second.parameter;
    c.shape.assign(t.sizes().begin(), t.sizes().end());
    c.dtype = dtype_of(t.scalar_type()).value_or(DType::kFp32);
    // an integer weight (batch norm's num_batches_tracked) is state: autograd trains floats only
    c.buffer = c.parameter && !t.is_floating_point();
    c.contiguous = t.is_contiguous();
    return c;
  }

  /// An output: a fresh edge name, or for a view of a weight the weight's own identity.
  CapturedTensor produce(const at::Tensor& t, const std::string& op, const std::vector<CapturedTensor>& inputs) {
    // TorchScript's autocast casts return a tensor already in their dtype as it is
    const bool kept_dtype =
        (op == "aten::_autocast_to_reduced_precision" || op == "aten::_autocast_to_full_precision") &&
        !inputs.empty() && dtype_of(t.scalar_type()) == inputs.front().dtype;
    bool of_parameter = (capture::is_aten_view(op) || kept_dtype) && !inputs.empty();
    for (const CapturedTensor& in : inputs) of_parameter = of_parameter && in.parameter;
    known_[t.unsafeGetTensorImpl()] = of_parameter ? Entry{inputs.front().name, true, key_of(t)}
                                                   : Entry{fmt::format("%{}", produced_++), false, key_of(t)};
    return describe(t);
  }

 private:
  /// What must still hold for a remembered address to be the same tensor.
  struct Key {
    const void* data = nullptr;
    std::vector<std::int64_t> sizes;
    bool operator==(const Key&) const = default;
  };
  static Key key_of(const at::Tensor& t) {
    return {t.has_storage() ? t.data_ptr() : nullptr, std::vector<std::int64_t>(t.sizes().begin(), t.sizes().end())};
  }
  struct Entry {
    std::string name;
    bool parameter;
    Key key;
    bool matches(const at::Tensor& t) const { return key == key_of(t); }
  };
  std::unordered_map<const void*, Entry> known_;
  const ParameterNames& param_names_;
  int constants_ = 0;
  int produced_ = 0;
};

CapturedValue convert(const c10::IValue& v, Namer& namer) {
  CapturedValue out;
  using K = CapturedValue::Kind;
  if (v.isTensor()) {
    if (!v.toTensor().defined()) {
      out.kind = K::kNone;
    } else {
      out.kind = K::kTensor;
      out.tensors.push_back(namer.describe(v.toTensor()));
    }
  } else if (v.isTensorList()) {
    out.kind = K::kTensorList;
    for (const at::Tensor& t : v.toTensorList().vec()) {
      if (t.defined()) out.tensors.push_back(namer.describe(t));
    }
  } else if (v.isInt()) {
    out.kind = K::kInt;
    out.i = v.toInt();
  } else if (v.isDouble()) {
    out.kind = K::kDouble;
    out.d = v.toDouble();
  } else if (v.isBool()) {
    out.kind = K::kBool;
    out.b = v.toBool();
  } else if (v.isIntList()) {
    out.kind = K::kInts;
    out.ints = v.toIntVector();
  } else if (v.isString()) {
    out.kind = K::kString;
    out.s = v.toStringRef();
  } else if (v.isNone()) {
    out.kind = K::kNone;
  }
  return out;
}

struct CaptureState {
  Namer* namer = nullptr;
  std::vector<CapturedOp>* calls = nullptr;
  int depth = 0;
  std::vector<std::string> scopes;  ///< the open module scopes (module_scope()), innermost last
};
thread_local CaptureState capture_state;

/// The last `n` values: the TorchScript interpreter hands RecordFunction its whole stack, of
/// which an op's arguments (and after it, its results) are the top `n` entries.
template <typename List>
std::vector<c10::IValue> last(const List& values, std::size_t n) {
  const std::size_t size = values.size();
  return std::vector<c10::IValue>(values.begin() + static_cast<std::ptrdiff_t>(size > n ? size - n : 0), values.end());
}

std::unique_ptr<at::ObserverContext> on_enter(const at::RecordFunction& fn) {
  CaptureState& s = capture_state;
  if (fn.scope() == at::RecordScope::USER_SCOPE) {
    s.scopes.emplace_back(fn.name());
    return nullptr;
  }
  // only operators count: TorchScript builtins such as "chunk" wrap the operator they call
  const auto schema = fn.operator_schema();
  if (!schema) return nullptr;
  if (s.depth++ == 0 && s.calls) {
    CapturedOp call;
    call.name = fn.name();
    if (!s.scopes.empty()) call.module = s.scopes.back();
    for (const c10::IValue& v : last(fn.inputs(), schema->arguments().size())) {
      call.inputs.push_back(convert(v, *s.namer));
    }
    s.calls->push_back(std::move(call));
  }
  return nullptr;
}

void on_exit(const at::RecordFunction& fn, at::ObserverContext*) {
  CaptureState& s = capture_state;
  if (fn.scope() == at::RecordScope::USER_SCOPE) {
    if (!s.scopes.empty()) s.scopes.pop_back();
    return;
  }
  const auto schema = fn.operator_schema();
  if (!schema) return;
  if (--s.depth == 0 && s.calls && !s.calls->empty()) {
    CapturedOp& call = s.calls->back();
    std::vector<CapturedTensor> ins;
    for (const CapturedValue& v : call.inputs) ins.insert(ins.end(), v.tensors.begin(), v.tensors.end());
    for (const c10::IValue& v : last(fn.outputs(), schema->returns().size())) {
      CapturedValue out;
      if (v.isTensor() && v.toTensor().defined()) {
        out.kind = CapturedValue::Kind::kTensor;
        out.tensors.push_back(s.namer->produce(v.toTensor(), call.name, ins));
      } else if (v.isTensorList()) {
        out.kind = CapturedValue::Kind::kTensorList;
        for (const at::Tensor& t : v.toTensorList().vec()) out.tensors.push_back(s.namer->produce(t, call.name, ins));
      } else {
        out = convert(v, *s.namer);
      }
      call.outputs.push_back(std::move(out));
    }
  }
}

}  // namespace

std::vector<CapturedOp> capture_calls(const std::function<void()>& forward, const std::vector<at::Tensor>& inputs,
                                      const ParameterNames& names) {
  std::vector<CapturedOp> calls;
  Namer namer(inputs, names);
  capture_state = {&namer, &calls, 0, {}};
  auto handle = at::addThreadLocalCallback(at::RecordFunctionCallback(on_enter, on_exit)
                                               .needsInputs(true)
                                               .needsOutputs(true)
                                               .scopes({at::RecordScope::FUNCTION, at::RecordScope::USER_SCOPE}));
  try {
    forward();
  } catch (...) {
    at::removeCallback(handle);
    capture_state = {};
    throw;
  }
  at::removeCallback(handle);
  capture_state = {};
  return calls;
}

namespace {

struct TimerState {
  bool inside = false;        ///< a top-level operator is running
  int depth = 0;              ///< calls seen inside it (only where RecordFunction stayed on)
  bool switched_off = false;  ///< RecordFunction is off until the top-level op's exit
  std::size_t event = 0;      ///< top-level ops entered so far in this pass
  std::chrono::steady_clock::time_point start;
  std::vector<double>* seconds = nullptr;
  std::vector<const char*>* names = nullptr;
  /// [event]: how many calls the op makes (nested ops, each a callback). Learned in an untimed
  /// first pass (learning = true), then read: only ops that make kSwitchOffFrom calls or more
  /// switch RecordFunction off, since switching it off and on costs about as much as that many
  /// callbacks (~280 ns against ~100 ns per callback on the reference VM; layer_timer_bench)
  std::vector<int>* nested = nullptr;
  bool learning = false;
};
thread_local TimerState timer_state;
constexpr int kSwitchOffFrom = 3;

bool is_operator(const at::RecordFunction& fn) { return std::strstr(fn.name(), "::") != nullptr; }

/// Entry of a top-level operator: its timestamp; for one that calls several other ops (an
/// aten::lstm calls hundreds), RecordFunction off for this thread until its exit, so that its nested calls
/// cost no callback: the observer runs twice per top-level op, not per call.
std::unique_ptr<at::ObserverContext> timer_enter(const at::RecordFunction& fn) {
  TimerState& s = timer_state;
  if (s.inside) {
    ++s.depth;
    if (s.learning && s.nested && !s.nested->empty()) ++s.nested->back();
    return nullptr;
  }
  if (!is_operator(fn)) return nullptr;
  s.inside = true;
  if (s.learning) {
    if (s.nested) s.nested->push_back(0);
    return nullptr;
  }
  if (s.names) s.names->push_back(fn.name());
  s.switched_off = s.nested && s.event < s.nested->size() && (*s.nested)[s.event] >= kSwitchOffFrom;
  ++s.event;
  if (s.switched_off) at::enableRecordFunction(false);
  s.start = std::chrono::steady_clock::now();
  return nullptr;
}

void timer_exit(const at::RecordFunction&, at::ObserverContext*) {
  const auto now = std::chrono::steady_clock::now();
  TimerState& s = timer_state;
  // outside a top-level op, exits are those of non-operators (TorchScript builtins wrapping one)
  if (!s.inside) return;
  if (s.depth > 0) {
    --s.depth;
    return;
  }
  s.inside = false;
  if (s.switched_off) at::enableRecordFunction(true), s.switched_off = false;
  if (s.seconds && !s.learning) s.seconds->push_back(std::chrono::duration<double>(now - s.start).count());
}

}  // namespace

LayerTiming time_calls(const std::function<void()>& forward, int runs) {
  LayerTiming timing;
  std::vector<const char*> names;
  std::vector<double> seconds;
  std::vector<int> nested;
  const auto seconds_of = [](const std::function<void()>& f) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  const auto observed = [&](TimerState state) {
    timer_state = state;
    auto handle = at::addThreadLocalCallback(
        at::RecordFunctionCallback(timer_enter, timer_exit).scopes({at::RecordScope::FUNCTION}));
    const auto done = [&] {
      at::removeCallback(handle);
      if (timer_state.switched_off) at::enableRecordFunction(true);  // an op threw between entry and exit
      timer_state = {};
    };
    double wall = 0;
    try {
      wall = seconds_of(forward);
    } catch (...) {
      done();
      throw;
    }
    done();
    return wall;
  };
  // an untimed pass that learns which top-level ops call others
  TimerState learn;
  learn.nested = &nested;
  learn.learning = true;
  observed(learn);
  for (int run = 0; run < runs; ++run) {
    // a plain pass, then a timed one: the overhead compares passes taken at the same moment
    timing.plain_wall_seconds.push_back(seconds_of(forward));
    seconds.clear();  // keeps its capacity: no allocation in the timed passes after the first
    names.clear();
    TimerState timed;
    timed.seconds = &seconds;
    timed.names = run == 0 ? &names : nullptr;
    timed.nested = &nested;
    timing.wall_seconds.push_back(observed(timed));
    if (run == 0) {
      timing.event_names.assign(names.begin(), names.end());
      timing.seconds.resize(seconds.size());
    }
    if (seconds.size() != timing.seconds.size()) {
      throw Error(ErrorCode::kUnimplemented,
                  fmt::format("the model ran {} ops in one timed pass and {} in another; per-layer times "
                              "need the same ops every pass",
                              timing.seconds.size(), seconds.size()));
    }
    for (std::size_t i = 0; i < seconds.size(); ++i) timing.seconds[i].push_back(seconds[i]);
  }
  return timing;
}

LayerTiming profile_calls(const std::function<void()>& forward, int runs, const std::set<std::string>& op_names) {
  namespace prof = torch::autograd::profiler;
  LayerTiming timing;
  for (int run = 0; run < runs; ++run) {
    const auto p0 = std::chrono::steady_clock::now();
    forward();
    timing.plain_wall_seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - p0).count());
    prof::enableProfilerLegacy(prof::ProfilerConfig(prof::ProfilerState::CPU, false, false));
    const auto t0 = std::chrono::steady_clock::now();
    forward();
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const prof::thread_event_lists lists = prof::disableProfilerLegacy();
    // pair push/pop events of ATen ops on the calling thread; keep the outermost ones
    std::vector<std::pair<std::string, double>> top;
    for (const auto& list : lists) {
      std::vector<const prof::LegacyEvent*> stack;
      for (const prof::LegacyEvent& e : list) {
        const std::string name = e.name();
        if (e.kind() == prof::EventKind::PushRange && (op_names.count(name) || name.rfind("aten::", 0) == 0)) {
          stack.push_back(&e);
        } else if (e.kind() == prof::EventKind::PopRange && !stack.empty() && e.handle() == stack.back()->handle()) {
          const prof::LegacyEvent* start = stack.back();
          stack.pop_back();
          if (stack.empty()) top.emplace_back(start->name(), start->cpuElapsedUs(e) * 1e-6);
        }
      }
      if (!top.empty()) break;  // the forward pass runs on one thread
    }
    if (run == 0) {
      for (const auto& [name, seconds] : top) timing.event_names.push_back(name);
      timing.seconds.resize(top.size());
    } else if (top.size() != timing.event_names.size()) {
      throw Error(ErrorCode::kUnimplemented,
                  fmt::format("the model ran {} ops in one profiled pass and {} in another; per-layer "
                              "times need the same ops every pass",
                              timing.event_names.size(), top.size()));
    }
    for (std::size_t i = 0; i < top.size(); ++i) timing.seconds[i].push_back(top[i].second);
    timing.wall_seconds.push_back(wall);
  }
  return timing;
}

}  // namespace neuralcost::libtorch
