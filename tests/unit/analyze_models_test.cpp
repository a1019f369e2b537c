// The analyze pipeline (analyze_models.hpp): the same analyses as importing and analysing each
// model by hand, a training step with its ledger and budget search, and its refusals.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "neuralcost/analyze_models.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/hardware/database.hpp"
#include "neuralcost/registry.hpp"
#include "unit/test_ops.hpp"

namespace neuralcost {
namespace {

using ::testing::HasSubstr;
using testing::op;
using testing::t;

const HardwareSpec& h100() {
  static const HardwareSpec spec = *HardwareDatabase::builtin().find("h100-sxm");
  return spec;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

AnalyzeRequest request_of(const std::vector<std::string>& models, std::int64_t batch) {
  AnalyzeRequest r;
  r.models = model_requests(ModelRequest{}, models, {batch});
  r.hardware = h100();
  return r;
}

TEST(AnalyzeModelsTest, EachModelIsAnalysedAsImportingAndAnalysingItByHandWould) {
  const AnalyzeResults got = analyze_models(request_of({"ff", "cnn"}, 8));
  ASSERT_EQ(got.analyses.size(), 2u);
  EXPECT_TRUE(got.reports.empty());
  for (std::size_t i = 0; i < 2; ++i) {
    ModelRequest m;
    m.model = i == 0 ? "ff" : "cnn";
    m.batch = 8;
    m.given.insert("batch");
    const Analysis by_hand = analyze(importer_for(m).import(m), h100());
    EXPECT_EQ(got.analyses[i].model, by_hand.model);
    EXPECT_EQ(got.analyses[i].batch, 8);
    EXPECT_EQ(got.analyses[i].totals.flops, by_hand.totals.flops);
    EXPECT_EQ(got.analyses[i].totals.bytes_read, by_hand.totals.bytes_read);
    EXPECT_DOUBLE_EQ(got.analyses[i].totals.lower_bound_seconds, by_hand.totals.lower_bound_seconds);
  }
}

TEST(AnalyzeModelsTest, ATrainingStepHasItsLedgerAndTheLargestBatchThatFitsTheBudget) {
  AnalyzeRequest r = request_of({"ff"}, 32);
  r.train = TrainingOptions{};
  const AnalyzeResults plain = analyze_models(r);
  ASSERT_EQ(plain.reports.size(), 1u);
  EXPECT_FALSE(plain.reports[0].fit.has_value());
  EXPECT_EQ(plain.analyses[0].totals.flops, plain.reports[0].step.totals.flops);
  // a step does the forward work and about twice more
  EXPECT_GT(plain.analyses[0].totals.flops, 2 * analyze_models(request_of({"ff"}, 32)).analyses[0].totals.flops);
  // a budget of four times the step at batch 32 holds a larger batch, and the step at it fits
  const std::uint64_t at_32 = plain.reports[0].memory.total_bytes(MemoryBound::kUpper);
  r.memory_budget = 4 * at_32;
  r.reserve = 0;
  const AnalyzeResults fitted = analyze_models(r);
  ASSERT_TRUE(fitted.reports[0].fit.has_value());
  EXPECT_GT(fitted.reports[0].fit->batch, 32);
  EXPECT_LE(fitted.reports[0].fit->needed_bytes, 4 * at_32);
}

TEST(AnalyzeModelsTest, ABudgetWithoutTrainingAndAContradictingDtypeAreRefused) {
  AnalyzeRequest r = request_of({"ff"}, 1);
  r.memory_budget = 1u << 30;
  EXPECT_EQ(error_of([&] { analyze_models(r); }), "--memory-budget applies only with --train");
  EXPECT_EQ(training_model_dtype(Precision::kFp32, DType::kFp16, true), DType::kFp16);
  EXPECT_EQ(training_model_dtype(Precision::kBf16Mixed, DType::kFp32, false), DType::kBf16);
  EXPECT_EQ(training_model_dtype(Precision::kFp16Mixed, DType::kFp16, true), DType::kFp16);
  EXPECT_EQ(error_of([] { training_model_dtype(Precision::kBf16Mixed, DType::kFp32, true); }),
            "--dtype fp32 contradicts --precision bf16-mixed (which computes in bf16)");
}

TEST(AnalyzeModelsTest, AModelMostlyUnmodeledIsNotAResult) {
  OpGraph g("mystery");
  g.add(op("fc", OpKind::kLinear, {t("x", {4, 8})}, {t("y", {4, 8})}, {testing::p("w", {8, 8})}));
  OpRecord unknown = op("odd", OpKind::kUnknown, {t("y", {4, 8})}, {t("z", {4, 8})});
  unknown.source_type = "FancyOp";
  g.add(unknown);
  g.finalize();
  const Analysis half = analyze(g, h100());
  ASSERT_TRUE(half.mostly_unmodeled());
  EXPECT_THAT(error_of([&] { refuse_mostly_unmodeled({half}); }),
              HasSubstr("mystery: 1 of 2 ops are not modeled, so its totals mean nothing"));
  EXPECT_EQ(error_of([] { refuse_mostly_unmodeled({analyze_models(request_of({"ff"}, 1)).analyses}); }), "no error");
}

}  // namespace
}  // namespace neuralcost
