// Per-layer rows of the five reference networks are named as `analyze` names their layers, in
// every backend and mode: LibTorch eager (RecordFunction scopes of the torch::nn networks), the
// torch worker's eager mode (module hooks) and torch.compile (its kernels' ATen ops), JAX eager
// and jit and TensorFlow eager, tf.function and XLA (name scopes of the workers' networks, read
// back by the captures; a compiled kernel's row is named by the layers it fused). Every row with
// work is named; each name (each part of a '+' join) is an op of the static model or a module
// holding some (a fused encoder layer: "encoder0"); every op of the static model lies in some
// row. The same runs check that each worker's eager network is the static model (parameters,
// contraction FLOPs, every op modeled, no compiled program ran), once per framework process
// instead of in a process of its own. Uses the .venv's frameworks and the LibTorch plugin.
#include <ostream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "neuralcost/analysis/roofline.hpp"
#include "neuralcost/hardware/database.hpp"
#include "neuralcost/measure/layer_table.hpp"
#include "neuralcost/measure/profile.hpp"
#include "neuralcost/models/reference.hpp"
#include "neuralcost/registry.hpp"

namespace neuralcost {
namespace {

struct Case {
  std::string backend, model;
  std::vector<std::string> modes;
};

/// How CTest's log names a case (not the 88 bytes of the struct).
void PrintTo(const Case& c, std::ostream* os) { *os << c.backend << " " << c.model; }

class LayerNames : public testing::TestWithParam<Case> {};

/// `name` is `module` or inside it ("encoder0.norm1" in "encoder0").
bool within(const std::string& name, const std::string& module) {
  return name == module || name.rfind(module + ".", 0) == 0;
}

/// The layers a row's name names: "block0.linear+block0.relu" -> both ("+N more" is no name).
std::vector<std::string> parts(const std::string& name) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= name.size()) {
    const std::size_t plus = std::min(name.find('+', start), name.size());
    const std::string part = name.substr(start, plus - start);
    if (!part.empty() && part.find(" more") == std::string::npos) out.push_back(part);
    start = plus + 1;
  }
  return out;
}

/// Short runs of `model` at `batch` in `modes`, with `layer_runs` profiled passes each.
std::vector<ProfileRun> profile_briefly(const Backend& backend, const std::string& model,
                                        const std::vector<std::string>& modes, int layer_runs, std::int64_t batch = 2) {
  ModelRequest request;
  request.model = model;
  request.batch = batch;
  ProfileOptions options;
  options.modes = modes;
  options.batches = {batch};
  options.layer_runs = layer_runs;
  options.timing.budget_seconds = 0.05;
  options.timing.warmup_iterations = 1;
  options.timing.warmup_seconds = 0;
  options.run.threads = 1;
  return profile(backend, request, HardwareDatabase::builtin().get("epyc-9654"), options);
}

TEST(LayerNamesTest, AJoinedNameIsItsParts) {
  EXPECT_EQ(parts("block0.linear"), std::vector<std::string>{"block0.linear"});
  EXPECT_EQ(parts("a.x+b.y+c.z+2 more"), (std::vector<std::string>{"a.x", "b.y", "c.z"}));
}

void expect_analyzes_names(const ProfileRun& run, const OpGraph& expected) {
  SCOPED_TRACE(run.backend + " " + run.mode + " " + run.model);
  ASSERT_FALSE(run.outcome.failed()) << run.outcome.error();
  ASSERT_FALSE(run.layers.empty()) << ::testing::PrintToString(run.warnings);
  std::vector<std::string> names;
  for (const LayerMeasurement& l : run.layers) {
    const bool work = l.flops > 0 || l.bytes > 0;
    if (!work) continue;  // views and metadata calls (the transformer's sequence-first transpose)
    EXPECT_FALSE(l.module.empty()) << "layer " << l.event << " (" << l.name << ") has no name";
    for (const std::string& part : parts(l.module)) {
      names.push_back(part);
      const bool known = std::any_of(expected.ops().begin(), expected.ops().end(),
                                     [&](const OpRecord& op) { return within(op.name, part); });
      EXPECT_TRUE(known) << "layer " << l.event << " (" << l.name << ") is named '" << l.module << "'";
    }
    if (l.module.find(" more") != std::string::npos) {
      // the layers a long join leaves out are those of its records
      for (std::size_t i : l.records) names.push_back(run.analysis.graph.op(i).attributes.get_string("module", ""));
    }
  }
  for (const OpRecord& op : expected.ops()) {
    const bool covered =
        std::any_of(names.begin(), names.end(), [&](const std::string& n) { return within(op.name, n); });
    // a reshape without work (cnn's flatten, the recurrent networks' last step) may be a view
    // that became no record
    if (op.kind == OpKind::kReshape || op.kind == OpKind::kSlice) continue;
    EXPECT_TRUE(covered) << "analyze's '" << op.name << "' is in no row; rows: " << ::testing::PrintToString(names);
  }
}

/// A worker's eager network is the static model: the same parameters and contraction FLOPs
/// (captured, and by the framework's own count of its trainable parameters), every captured op
/// modeled, and its passes ran no compiled program (by the framework's own count).
void expect_static_model(const ProfileRun& eager, const OpGraph& static_model) {
  SCOPED_TRACE(eager.backend + " " + eager.mode + " " + eager.model);
  ASSERT_FALSE(eager.outcome.failed()) << eager.outcome.error();
  const Analysis expected = analyze(static_model, HardwareDatabase::builtin().get("epyc-9654"));
  const Analysis& captured = eager.analysis;
  EXPECT_TRUE(captured.complete()) << captured.unmodeled.size() << " op(s) not modeled, e.g. "
                                   << captured.graph.op(captured.unmodeled.front().op_index).source_type;
  EXPECT_EQ(captured.totals.parameter_count, expected.totals.parameter_count);
  EXPECT_EQ(captured.totals.contraction_flops, expected.totals.contraction_flops);
  EXPECT_EQ(eager.contract.at("framework_parameters"), std::to_string(expected.totals.parameter_count));
  EXPECT_EQ(eager.contract.at("execution.compiled_programs"), "0");
  EXPECT_GT(eager.timing.summary.median, 0);
}

TEST_P(LayerNames, MatchAnalyzesNames) {
  const Case& c = GetParam();
  const Backend& backend = backend_named(c.backend);
  if (auto why = backend.unavailable_reason()) GTEST_SKIP() << c.backend << " cannot run here: " << *why;
  // an odd batch (3) catches a batch dimension taken for another; cnn's runs stay at 2
  const std::int64_t batch = c.model == "cnn" ? 2 : 3;
  const auto runs = profile_briefly(backend, c.model, c.modes, 2, batch);
  ASSERT_EQ(runs.size(), c.modes.size());
  ReferenceOptions o;
  o.model = c.model;
  o.batch = batch;
  const OpGraph expected = build_reference_model(o);
  for (const ProfileRun& run : runs) expect_analyzes_names(run, expected);
  // the workers' networks (python/neuralcost_worker/torch/reference.py, jax/models.py, tensorflow/models.py) are the
  // static model: checked on the eager run, which is the first mode
  if (c.backend != "libtorch") expect_static_model(runs.front(), expected);
}

TEST(LayerNamesTest, LibTorchsFrozenGraphNamesARowOnlyByItsOwnWeights) {
  // the frozen graph has no scopes: rows are named by the weights they read, and constant
  // pooling makes equal weights of two layers one (block0.norm's and block1.norm's unit
  // scales); a row is then unnamed, never named after the other layer. ff and cnn run their
  // layers in analyze's order, one op each: row i with work is op i of the static model.
  const Backend& backend = backend_named("libtorch");
  if (auto why = backend.unavailable_reason()) GTEST_SKIP() << "libtorch cannot run here: " << *why;
  for (const char* model : {"ff", "cnn"}) {
    const auto runs = profile_briefly(backend, model, {"compiled"}, 1);
    ASSERT_EQ(runs.size(), 1u);
    ASSERT_FALSE(runs[0].outcome.failed()) << runs[0].outcome.error();
    ReferenceOptions o;
    o.model = model;
    o.batch = 2;
    const OpGraph graph = build_reference_model(o);
    std::vector<std::string> expected;
    for (const OpRecord& op : graph.ops()) {
      if (op.kind != OpKind::kReshape) expected.push_back(op.name);  // cnn's flatten is a view
    }
    std::vector<std::string> named;
    std::size_t row = 0;
    for (const LayerMeasurement& l : runs[0].layers) {
      if (l.flops == 0 && l.bytes == 0) continue;
      ASSERT_LT(row, expected.size()) << model;
      if (!l.module.empty()) {
        EXPECT_EQ(l.module, expected[row]) << model << " row " << row << " (" << l.name << ")";
        named.push_back(l.module);
      }
      ++row;
    }
    EXPECT_EQ(row, expected.size()) << model;
    // the layers with weights of their own are named: the linears, convolutions and batch norms
    EXPECT_GE(named.size(), std::string(model) == "ff" ? 3u : 5u) << ::testing::PrintToString(named);
  }
}

std::vector<Case> cases() {
  const std::vector<std::pair<std::string, std::vector<std::string>>> backends = {
      {"libtorch", {"eager"}},
      {"torch", {"eager", "compiled"}},
      {"jax", {"eager", "jit"}},
      {"tensorflow", {"eager", "function", "xla"}}};
  std::vector<Case> all;
  for (const auto& [backend, modes] : backends) {
    for (const char* model : {"ff", "cnn", "rnn", "lstm", "transformer"}) all.push_back({backend, model, modes});
  }
  return all;
}

INSTANTIATE_TEST_SUITE_P(EveryBackend, LayerNames, testing::ValuesIn(cases()),
                         [](const testing::TestParamInfo<Case>& info) {
                           return info.param.backend + "_" + info.param.model;
                         });

}  // namespace
}  // namespace neuralcost
