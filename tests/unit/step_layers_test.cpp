// A training step's per-layer rows (measure/step_layers.hpp) from scripted events over the step
// graph of ff: each record in the row of its phase and module (a gradient in its forward op's
// module's, a sum of partial gradients in its tensor's producer's), a module without a row in the
// row holding it, a record without any row in a row without time with a warning, containers
// without records dropped.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "measure/step_layers.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/hardware/database.hpp"
#include "neuralcost/measure/layer_table.hpp"
#include "neuralcost/models/reference.hpp"

namespace neuralcost {
namespace {

using ::testing::HasSubstr;

/// The step graph of ff (block0.linear .. classifier) as a capture names its records.
Analysis step_of_ff() {
  ReferenceOptions o;
  o.model = "ff";
  o.batch = 2;
  o.depth = 1;
  const OpGraph ff = build_reference_model(o);
  OpGraph g("ff");
  g.set_batch(ff.batch());
  for (OpRecord op : ff.ops()) {
    op.attributes.set("module", op.name);
    g.add(std::move(op));
  }
  g.finalize();
  return analyze(training_step(g, TrainingOptions{}), HardwareDatabase::builtin().get("epyc-9654"), {2});
}

LayerTiming timing(const std::vector<std::pair<std::string, std::string>>& events) {
  LayerTiming t;
  t.step_phases = true;
  for (const auto& [phase, module] : events) {
    t.event_names.push_back(phase);
    t.event_modules.push_back(module);
    t.seconds.push_back({1e-3, 2e-3, 3e-3});
  }
  t.wall_seconds = {1, 1, 1};
  return t;
}

const LayerMeasurement* row(const std::vector<LayerMeasurement>& rows, const std::string& name) {
  for (const LayerMeasurement& l : rows) {
    if (layer_name(l) == name) return &l;
  }
  return nullptr;
}

TEST(StepLayersTest, EachRecordIsInTheRowOfItsPhaseAndModule) {
  const Analysis a = step_of_ff();
  // block0.relu's backward is not timed apart: it is in its container's row
  const LayerTiming t = timing({{"forward", ""},
                                {"forward", "block0"},
                                {"forward", "block0.linear"},
                                {"forward", "block0.relu"},
                                {"forward", "block0.norm"},
                                {"forward", "classifier"},
                                {"forward", "loss"},
                                {"backward", "loss"},
                                {"backward", "classifier"},
                                {"backward", "block0.norm"},
                                {"backward", "block0"},
                                {"backward", "block0.linear"},
                                {"optimizer", ""}});
  std::vector<std::string> warnings;
  const std::vector<LayerMeasurement> rows = measure_step_layers(a, t, warnings);
  EXPECT_TRUE(warnings.empty()) << ::testing::PrintToString(warnings);
  std::vector<std::string> names;
  std::uint64_t flops = 0;
  std::size_t records = 0;
  for (const LayerMeasurement& l : rows) {
    names.push_back(layer_name(l));
    flops += l.flops;
    records += l.records.size();
    EXPECT_DOUBLE_EQ(l.profiled_seconds, 2e-3) << names.back();  // the median of its steps
  }
  // the containers' forward rows have no records: dropped (their time is unattributed)
  EXPECT_EQ(names, (std::vector<std::string>{"forward: block0.linear", "forward: block0.relu", "forward: block0.norm",
                                             "forward: classifier", "forward: loss", "backward: loss",
                                             "backward: classifier", "backward: block0.norm", "backward: block0",
                                             "backward: block0.linear", "optimizer"}));
  EXPECT_EQ(flops, a.totals.flops);
  EXPECT_EQ(records, a.ops.size());
  const LayerMeasurement* linear = row(rows, "backward: block0.linear");
  ASSERT_NE(linear, nullptr);
  EXPECT_EQ(linear->kind, "linear backward");
  for (std::size_t i : linear->records) {
    const OpRecord& op = a.graph.op(i);
    ASSERT_TRUE(op.differentiates) << op.name;
    EXPECT_EQ(op.differentiates->name, "block0.linear");
  }
  const LayerMeasurement* relu = row(rows, "backward: block0");
  ASSERT_NE(relu, nullptr);
  ASSERT_FALSE(relu->records.empty());
  for (std::size_t i : relu->records) EXPECT_EQ(a.graph.op(i).differentiates->name, "block0.relu");
  EXPECT_EQ(row(rows, "optimizer")->kind, "optimizer_step");
  EXPECT_EQ(row(rows, "optimizer")->output_shape, "");
  EXPECT_EQ(row(rows, "backward: block0.linear")->output_shape, row(rows, "forward: block0.linear")->output_shape);
  EXPECT_EQ(row(rows, "forward: loss")->kind, "loss");
  EXPECT_EQ(row(rows, "forward: block0.linear")->pass, "forward");
}

TEST(StepLayersTest, GroupedByModuleALayersForwardAndBackwardAreOneRow) {
  const Analysis a = step_of_ff();
  const LayerTiming t = timing({{"forward", "block0.linear"},
                                {"forward", "block0.relu"},
                                {"forward", "block0.norm"},
                                {"forward", "classifier"},
                                {"forward", "loss"},
                                {"backward", "loss"},
                                {"backward", "classifier"},
                                {"backward", "block0.norm"},
                                {"backward", "block0.relu"},
                                {"backward", "block0.linear"},
                                {"optimizer", ""}});
  std::vector<std::string> warnings;
  ProfileRun run;
  run.layers = measure_step_layers(a, t, warnings);
  LayerTableOptions o;
  o.group = LayerGroup::kModule;
  std::vector<std::string> names;
  std::uint64_t linear = 0;
  for (const LayerMeasurement& l : run.layers) {
    if (l.module == "block0.linear") linear += l.flops;
  }
  for (const LayerRow& r : layer_rows(run, o).rows) {
    names.push_back(r.name);
    if (r.name == "block0.linear") {
      EXPECT_EQ(r.layers, 2u);
      EXPECT_EQ(r.flops, linear);
    }
  }
  EXPECT_EQ(names, (std::vector<std::string>{"block0.linear", "block0.relu", "block0.norm", "classifier", "loss",
                                             "optimizer"}));
}

TEST(StepLayersTest, ARecordWithoutARowGetsOneWithoutTimeAndAWarning) {
  const Analysis a = step_of_ff();
  const LayerTiming t = timing({{"forward", "block0.linear"},
                                {"forward", "block0.relu"},
                                {"forward", "block0.norm"},
                                {"forward", "classifier"},
                                {"forward", "loss"},
                                {"optimizer", ""}});
  std::vector<std::string> warnings;
  const std::vector<LayerMeasurement> rows = measure_step_layers(a, t, warnings);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("timed no event for backward: loss, backward: classifier"));
  const LayerMeasurement* untimed = row(rows, "backward: classifier");
  ASSERT_NE(untimed, nullptr);
  EXPECT_FALSE(untimed->records.empty());
  EXPECT_EQ(untimed->profiled_seconds, 0);
  std::uint64_t flops = 0;
  for (const LayerMeasurement& l : rows) flops += l.flops;
  EXPECT_EQ(flops, a.totals.flops);
}

TEST(StepLayersTest, AModuleTimedTwiceOrAnUnknownPhaseIsAnError) {
  const Analysis a = step_of_ff();
  std::vector<std::string> warnings;
  EXPECT_THROW(measure_step_layers(a, timing({{"forward", "loss"}, {"forward", "loss"}}), warnings), Error);
  EXPECT_THROW(measure_step_layers(a, timing({{"forward", "loss"}, {"update", ""}}), warnings), Error);
  LayerTiming fewer = timing({{"forward", "loss"}});
  fewer.event_modules.clear();
  EXPECT_THROW(measure_step_layers(a, fewer, warnings), Error);
}

}  // namespace
}  // namespace neuralcost
