// Per-layer rows of the five reference networks are named as `analyze` names their layers, in
// LibTorch eager (RecordFunction scopes of the torch::nn networks) and the torch worker's eager
// mode (module hooks): every row with work is named, its name is an op of the static model or a
// module holding some (a fused encoder layer: "encoder0"), and every op of the static model lies
// in some row. Uses the .venv's PyTorch and the LibTorch plugin.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "neuralcost/hardware/database.hpp"
#include "neuralcost/measure/layer_table.hpp"
#include "neuralcost/measure/profile.hpp"
#include "neuralcost/models/reference.hpp"
#include "neuralcost/registry.hpp"

namespace neuralcost {
namespace {

struct Case {
  std::string backend, model;
};

class LayerNames : public testing::TestWithParam<Case> {};

/// `name` is `module` or inside it ("encoder0.norm1" in "encoder0").
bool within(const std::string& name, const std::string& module) {
  return name == module || name.rfind(module + ".", 0) == 0;
}

TEST_P(LayerNames, MatchAnalyzesNames) {
  const Case& c = GetParam();
  const Backend& backend = backend_named(c.backend);
  if (auto why = backend.unavailable_reason()) GTEST_SKIP() << c.backend << " cannot run here: " << *why;
  ModelRequest request;
  request.model = c.model;
  request.batch = 2;
  ProfileOptions options;
  options.batches = {2};
  options.layer_runs = 2;
  options.timing.budget_seconds = 0.05;
  options.timing.warmup_iterations = 1;
  options.timing.warmup_seconds = 0;
  options.run.threads = 1;
  const auto runs = profile(backend, request, HardwareDatabase::builtin().get("epyc-9654"), options);
  ASSERT_EQ(runs.size(), 1u);
  const ProfileRun& run = runs[0];
  ASSERT_FALSE(run.outcome.failed()) << run.outcome.error();
  ASSERT_FALSE(run.layers.empty()) << ::testing::PrintToString(run.warnings);
  ReferenceOptions o;
  o.model = c.model;
  o.batch = 2;
  const OpGraph expected = build_reference_model(o);
  std::vector<std::string> names;
  for (const LayerMeasurement& l : run.layers) {
    const bool work = l.flops > 0 || l.bytes > 0;
    if (!work) continue;  // views and metadata calls (the transformer's sequence-first transpose)
    names.push_back(layer_name(l));
    const bool known = std::any_of(expected.ops().begin(), expected.ops().end(),
                                   [&](const OpRecord& op) { return within(op.name, l.module); });
    EXPECT_TRUE(!l.module.empty() && known) << c.backend << " " << c.model << ": layer " << l.event << " (" << l.name
                                            << ") is named '" << l.module << "'";
  }
  for (const OpRecord& op : expected.ops()) {
    const bool covered = std::any_of(names.begin(), names.end(), [&](const std::string& n) { return within(op.name, n); });
    // a reshape without work (cnn's flatten) may be a view that became no record
    if (op.kind == OpKind::kReshape || op.kind == OpKind::kSlice) continue;
    EXPECT_TRUE(covered) << c.backend << " " << c.model << ": analyze's '" << op.name << "' is in no row; rows: "
                         << ::testing::PrintToString(names);
  }
}

std::vector<Case> cases() {
  std::vector<Case> all;
  for (const char* backend : {"libtorch", "torch"}) {
    for (const char* model : {"ff", "cnn", "rnn", "lstm", "transformer"}) all.push_back({backend, model});
  }
  return all;
}

INSTANTIATE_TEST_SUITE_P(EagerBackends, LayerNames, testing::ValuesIn(cases()),
                         [](const testing::TestParamInfo<Case>& info) { return info.param.backend + "_" + info.param.model; });

}  // namespace
}  // namespace neuralcost
