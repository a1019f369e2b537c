// Per-layer tables from a fake backend with a scripted clock: layer names (module attribute,
// event module, weights), kinds of fused and empty layers, the reconciliation of layers with the
// run (its one efficiency, unattributed time never negative and explained), and the table's
// sorting, grouping and top N with the rest summed; the views' CSV and Markdown.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "neuralcost/core/error.hpp"
#include "neuralcost/hardware/database.hpp"
#include "neuralcost/measure/layer_table.hpp"
#include "neuralcost/measure/profile.hpp"
#include "neuralcost/models/reference.hpp"
#include "neuralcost/report/profile_views.hpp"

namespace neuralcost {
namespace {

using ::testing::HasSubstr;

/// The ff network as a framework would run it: event 0 a weight view (no record), event 1 the
/// first linear (named by its weights only), events 2-3 relu and norm named by a "module"
/// attribute, event 4 the second linear, relu and norm fused into one op, event 5 the classifier.
class FakeModel final : public PreparedModel {
 public:
  FakeModel(std::vector<double> layer_seconds, double pass_seconds, bool unrelated = false)
      : layer_seconds_(std::move(layer_seconds)), pass_seconds_(pass_seconds), unrelated_(unrelated) {}
  void run() override {}
  std::optional<double> last_run_seconds() const override { return 1e-3; }
  OpGraph captured_graph() override {
    ReferenceOptions o;
    o.model = "ff";
    const OpGraph ff = build_reference_model(o);  // block0.linear .. block1.norm, classifier
    const std::vector<std::int64_t> events = {1, 2, 3, 4, 4, 4, 5};
    OpGraph g("ff (fake)");
    for (std::size_t i = 0; i < ff.size(); ++i) {
      OpRecord r = ff.op(i);
      r.attributes.set("event", events[i]);
      r.source_type = names()[static_cast<std::size_t>(events[i])];
      if (i == 1 || i == 2) r.attributes.set("module", r.name);
      if (events[i] == 4) r.attributes.set("module", r.name);  // block1.linear, block1.relu, block1.norm
      // a kernel that fused layers of no common module
      if (events[i] == 4 && unrelated_)
        r.attributes.set("module", std::string(i == 3 ? "a.x" : i == 4 ? "b.y" : "c.z"));
      g.add(std::move(r));
    }
    g.finalize();
    return g;
  }
  LayerTiming profile_layers(int runs) override {
    LayerTiming t;
    t.event_names = names();
    t.event_modules = {"block0.linear", "", "", "", "", ""};
    for (double s : layer_seconds_) t.seconds.push_back(std::vector<double>(static_cast<std::size_t>(runs), s));
    t.wall_seconds.assign(static_cast<std::size_t>(runs), pass_seconds_);
    t.plain_wall_seconds.assign(static_cast<std::size_t>(runs), pass_seconds_ / 1.02);
    return t;
  }
  static std::vector<std::string> names() {
    return {"fw::t", "fw::linear", "fw::relu", "fw::norm", "fw::fused_block", "fw::linear"};
  }

 private:
  std::vector<double> layer_seconds_;
  double pass_seconds_;
  bool unrelated_;
};

class FakeBackend final : public Backend {
 public:
  FakeBackend(std::vector<double> layers, double pass, bool unrelated = false)
      : layers_(std::move(layers)), pass_(pass), unrelated_(unrelated) {}
  std::string_view name() const override { return "fake"; }
  std::string_view description() const override { return "scripted layers"; }
  std::optional<std::string> unavailable_reason() const override { return std::nullopt; }
  std::vector<std::string> modes() const override { return {"eager"}; }
  using Backend::prepare;
  std::unique_ptr<PreparedModel> prepare(const ModelRequest&, const std::string&, const RunOptions&) const override {
    return std::make_unique<FakeModel>(layers_, pass_, unrelated_);
  }

 private:
  std::vector<double> layers_;
  double pass_;
  bool unrelated_;
};

ProfileRun profile_fake(std::vector<double> layers, double pass, bool unrelated = false) {
  FakeBackend backend(std::move(layers), pass, unrelated);
  ProfileOptions options;
  options.timing.budget_seconds = 0.05;
  options.timing.warmup_iterations = 1;
  options.timing.warmup_seconds = 0;
  options.layer_runs = 3;
  ModelRequest request;
  request.model = "ff";
  auto runs = profile(backend, request, HardwareDatabase::builtin().get("epyc-9654"), options);
  EXPECT_EQ(runs.size(), 1u);
  return runs.at(0);
}

// layers 0..5 take 1, 40, 2, 3, 20, 4 µs of an 80 µs profiled pass (10 µs unattributed)
const std::vector<double> kLayers = {1e-6, 40e-6, 2e-6, 3e-6, 20e-6, 4e-6};

TEST(LayerTableTest, LayersAreNamedByModulesWithKindAndShape) {
  const ProfileRun r = profile_fake(kLayers, 80e-6);
  ASSERT_FALSE(r.outcome.failed()) << r.outcome.error();
  ASSERT_EQ(r.layers.size(), 6u);
  std::vector<std::string> names, kinds;
  for (const LayerMeasurement& l : r.layers) names.push_back(layer_name(l)), kinds.push_back(l.kind);
  // the event's module, the weights' module, record attributes, their common prefix (fused)
  EXPECT_EQ(names, (std::vector<std::string>{"block0.linear", "block0.linear", "block0.relu", "block0.norm", "block1",
                                             "classifier"}));
  EXPECT_EQ(kinds, (std::vector<std::string>{"none", "linear", "activation", "layer_norm", "fused", "linear"}));
  EXPECT_EQ(r.layers[1].output_shape, "1x128");
  EXPECT_EQ(r.layers[0].output_shape, "");
  EXPECT_EQ(r.layers[4].records.size(), 3u);
}

TEST(LayerTableTest, AFusedLayerOfUnrelatedModulesNamesThemAll) {
  const ProfileRun r = profile_fake(kLayers, 80e-6, true);
  ASSERT_FALSE(r.outcome.failed()) << r.outcome.error();
  EXPECT_EQ(layer_name(r.layers[4]), "a.x+b.y+c.z");
  EXPECT_EQ(r.layers[4].kind, "fused");
}

TEST(LayerTableTest, LayersAndUnattributedAddUpToTheRunWithItsOneEfficiency) {
  const ProfileRun r = profile_fake(kLayers, 80e-6);
  ASSERT_FALSE(r.outcome.failed()) << r.outcome.error();
  const double median = r.timing.summary.median;
  double measured = r.unattributed_seconds, lower = 0;
  std::uint64_t flops = 0;
  for (const LayerMeasurement& l : r.layers)
    measured += l.measured_seconds, lower += l.lower_bound_seconds, flops += l.flops;
  EXPECT_NEAR(measured, median, 1e-12);
  EXPECT_NEAR(lower, r.analysis.totals.lower_bound_seconds, 1e-15);
  EXPECT_EQ(flops, r.analysis.totals.flops);
  EXPECT_NEAR(r.efficiency, lower / median, 1e-12);
  EXPECT_NEAR(r.unattributed_seconds, 10e-6 * r.layer_scale, 1e-12);
  EXPECT_NEAR(r.profiling_overhead, 0.02, 1e-9);
}

TEST(LayerTableTest, APassShorterThanItsLayersLeavesNothingUnattributedAndSaysWhy) {
  const ProfileRun r = profile_fake(kLayers, 50e-6);  // the layers add up to 70 µs
  ASSERT_FALSE(r.outcome.failed()) << r.outcome.error();
  EXPECT_EQ(r.unattributed_seconds, 0);
  double measured = 0;
  for (const LayerMeasurement& l : r.layers) measured += l.measured_seconds;
  EXPECT_NEAR(measured, r.timing.summary.median, 1e-12);
  EXPECT_THAT(::testing::PrintToString(r.warnings), HasSubstr("more than the profiled pass"));
  const std::string table = render_profile({r}, HardwareDatabase::builtin().get("epyc-9654"), Format::kTable);
  EXPECT_THAT(table, HasSubstr("warning: the layers' times add up to 0.07 ms, more than the profiled pass (0.05 ms)"));
}

std::vector<std::string> row_names(const LayerTableRows& t) {
  std::vector<std::string> names;
  for (const LayerRow& r : t.rows) names.push_back(r.name);
  return names;
}

TEST(LayerTableTest, SortsByTimeWasteAndEfficiency) {
  const ProfileRun r = profile_fake(kLayers, 80e-6);
  LayerTableOptions o;
  o.sort = LayerSort::kTime;
  const LayerTableRows by_time = layer_rows(r, o);
  EXPECT_EQ(by_time.rows.front().op, "fw::linear");
  EXPECT_EQ(by_time.rows[1].name, "block1");
  for (std::size_t i = 1; i < by_time.rows.size(); ++i) {
    EXPECT_GE(by_time.rows[i - 1].measured_seconds, by_time.rows[i].measured_seconds);
  }
  o.sort = LayerSort::kWaste;
  const LayerTableRows by_waste = layer_rows(r, o);
  for (std::size_t i = 1; i < by_waste.rows.size(); ++i) {
    EXPECT_GE(by_waste.rows[i - 1].waste_seconds, by_waste.rows[i].waste_seconds);
  }
  o.sort = LayerSort::kEfficiency;
  const LayerTableRows by_efficiency = layer_rows(r, o);
  // the view without work (no efficiency) goes last; the others from the least efficient
  EXPECT_EQ(by_efficiency.rows.back().kind, "none");
  for (std::size_t i = 1; i + 1 < by_efficiency.rows.size(); ++i) {
    EXPECT_LE(by_efficiency.rows[i - 1].efficiency, by_efficiency.rows[i].efficiency);
  }
}

TEST(LayerTableTest, GroupsByKindAndModuleSummingTheirLayers) {
  const ProfileRun r = profile_fake(kLayers, 80e-6);
  LayerTableOptions o;
  o.group = LayerGroup::kModule;
  const LayerTableRows modules = layer_rows(r, o);
  EXPECT_EQ(row_names(modules),
            (std::vector<std::string>{"block0.linear", "block0.relu", "block0.norm", "block1", "classifier"}));
  EXPECT_EQ(modules.rows[0].layers, 2u);
  EXPECT_NEAR(modules.rows[0].measured_seconds, r.layers[0].measured_seconds + r.layers[1].measured_seconds, 1e-15);
  EXPECT_NEAR(modules.rows[0].efficiency, r.layers[1].lower_bound_seconds / modules.rows[0].measured_seconds, 1e-12);
  EXPECT_EQ(modules.rows[0].op, "");  // two different ops
  o.group = LayerGroup::kKind;
  const LayerTableRows kinds = layer_rows(r, o);
  EXPECT_EQ(row_names(kinds), (std::vector<std::string>{"none", "linear", "activation", "layer_norm", "fused"}));
  EXPECT_EQ(kinds.rows[1].layers, 2u);
  EXPECT_EQ(kinds.rows[1].flops, r.layers[1].flops + r.layers[5].flops);
}

TEST(LayerTableTest, TopKeepsTheFirstRowsAndSumsTheRest) {
  const ProfileRun r = profile_fake(kLayers, 80e-6);
  LayerTableOptions o;
  o.sort = LayerSort::kTime;
  o.top = 2;
  const LayerTableRows t = layer_rows(r, o);
  ASSERT_EQ(t.rows.size(), 2u);
  ASSERT_TRUE(t.rest);
  EXPECT_EQ(t.rest->layers, 4u);
  EXPECT_EQ(t.rest->name, "the other 4 row(s) (4 layer(s))");
  double sum = t.rest->measured_seconds + r.unattributed_seconds, share = t.rest->share;
  for (const LayerRow& row : t.rows) sum += row.measured_seconds, share += row.share;
  EXPECT_NEAR(sum, r.timing.summary.median, 1e-12);
  EXPECT_NEAR(share + r.unattributed_seconds / r.timing.summary.median, 1.0, 1e-12);
  o.top = 6;
  EXPECT_FALSE(layer_rows(r, o).rest);
}

TEST(LayerTableTest, BadOptionsAreErrorsNamingTheOption) {
  const auto message = [](auto f) {
    try {
      f();
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message([] { parse_layer_sort("speed"); }), "--sort must be time, waste or efficiency (got 'speed')");
  EXPECT_EQ(message([] { parse_layer_group("op"); }), "--group-by must be kind or module (got 'op')");
  EXPECT_EQ(message([] { layer_table_options(0LL, "", "", 20); }), "--top must be at least 1 (got 0)");
  EXPECT_EQ(message([] { layer_table_options(5LL, "", "", 0); }),
            "--top shapes the per-layer tables, but --layer-runs 0 measures no per-layer times");
  EXPECT_EQ(message([] { layer_table_options(std::nullopt, "", "kind", 0); }),
            "--group-by shapes the per-layer tables, but --layer-runs 0 measures no per-layer times");
  const LayerTableOptions o = layer_table_options(3LL, "waste", "module", 20);
  EXPECT_EQ(o.top, 3u);
  EXPECT_EQ(o.sort, LayerSort::kWaste);
  EXPECT_EQ(o.group, LayerGroup::kModule);
  EXPECT_FALSE(layer_table_options(std::nullopt, "", "", 0).any());
}

TEST(LayerTableTest, CsvAndMarkdownCarryTheShapedLayerTable) {
  const ProfileRun r = profile_fake(kLayers, 80e-6);
  const HardwareSpec& hw = HardwareDatabase::builtin().get("epyc-9654");
  LayerTableOptions o;
  o.sort = LayerSort::kTime;
  o.top = 1;
  const std::string csv = render_profile({r}, hw, Format::kCsv, o);
  EXPECT_THAT(csv, ::testing::StartsWith("model,backend,mode,batch,layer,kind,op,output_shape,flops,bytes,"
                                         "lower_bound_seconds,measured_seconds,share,waste_seconds,efficiency,bound\n"
                                         "ff,fake,eager,1,block0.linear,linear,fw::linear,1x128,"));
  EXPECT_THAT(csv, HasSubstr("\nff,fake,eager,1,the other 5 row(s) (5 layer(s)),"));
  EXPECT_THAT(csv, HasSubstr("\nff,fake,eager,1,total (timed median),"));
  const std::string md = render_profile({r}, hw, Format::kMarkdown, o);
  EXPECT_THAT(md, ::testing::ContainsRegex(R"(\| block0\.linear +\| linear +\| fw::linear +\| 1x128 +\|)"));
  EXPECT_THAT(md, ::testing::ContainsRegex(R"(\| the other 5 row\(s\) \(5 layer\(s\)\) +\|)"));
}

}  // namespace
}  // namespace neuralcost
