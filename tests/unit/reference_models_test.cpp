// The reference networks against docs/reference-networks.md (defaults) and against closed-form
// counts for other widths, depths and sequence lengths.
#include "neuralcost/models/reference.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "neuralcost/analysis/roofline.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/hardware/database.hpp"

namespace neuralcost {
namespace {

struct Counts {
  std::uint64_t parameters;
  std::uint64_t contraction_flops;
};

Counts counts(const ReferenceOptions& o) {
  const Analysis a = analyze(build_reference_model(o), HardwareDatabase::builtin().get("h100-sxm"));
  EXPECT_TRUE(a.complete()) << o.model;
  return {a.totals.parameter_count, a.totals.contraction_flops};
}

ReferenceOptions model(const std::string& name, std::int64_t batch = 1) {
  ReferenceOptions o;
  o.model = name;
  o.batch = batch;
  return o;
}

// The tables of docs/reference-networks.md, typed in from the document.
TEST(ReferenceModelsTest, DefaultsMatchTheDocumentExactly) {
  const std::vector<std::tuple<std::string, std::uint64_t, std::uint64_t>> doc = {
      {"ff", 118794, 236032},     {"cnn", 77322, 41290240},          {"rnn", 67338, 4196864},
      {"lstm", 265482, 16779776}, {"transformer", 397834, 26216960},
  };
  for (const auto& [name, params, flops] : doc) {
    const Counts c = counts(model(name));
    EXPECT_EQ(c.parameters, params) << name;
    EXPECT_EQ(c.contraction_flops, flops) << name;
  }
}

TEST(ReferenceModelsTest, FlopsScaleWithBatchParametersDoNot) {
  for (const std::string& name : reference_model_names()) {
    const Counts one = counts(model(name, 1)), many = counts(model(name, 37));
    EXPECT_EQ(many.parameters, one.parameters) << name;
    EXPECT_EQ(many.contraction_flops, 37 * one.contraction_flops) << name;
  }
}

TEST(ReferenceModelsTest, TransformerMatchesClosedFormAtOtherSizes) {
  ReferenceOptions o = model("transformer");
  o.width = 256;
  o.depth = 3;
  o.seq = 64;
  const std::uint64_t d = 256, T = 64, L = 3;
  const Counts c = counts(o);
  EXPECT_EQ(c.parameters, L * (12 * d * d + 13 * d) + 10 * d + 10);
  EXPECT_EQ(c.contraction_flops, L * (2 * T * 12 * d * d + 4 * T * T * d) + 2 * d * 10);
}

TEST(ReferenceModelsTest, RecurrentAndFeedForwardMatchClosedForm) {
  ReferenceOptions o = model("lstm");
  o.width = 64;
  o.depth = 3;
  o.seq = 10;
  const std::uint64_t h = 64;
  Counts c = counts(o);
  EXPECT_EQ(c.parameters, 3 * 4 * (2 * h * h + 2 * h) + 10 * h + 10);
  EXPECT_EQ(c.contraction_flops, 3 * 10 * 2 * 4 * (2 * h * h) + 2 * h * 10);
  o.model = "rnn";
  c = counts(o);
  EXPECT_EQ(c.parameters, 3 * (2 * h * h + 2 * h) + 10 * h + 10);
  o.model = "ff";
  o.depth = 4;
  c = counts(o);
  EXPECT_EQ(c.parameters, (784 * h + h + 2 * h) + 3 * (h * h + h + 2 * h) + 10 * h + 10);
  EXPECT_EQ(c.contraction_flops, 2 * (784 * h + 3 * h * h + 10 * h));
}

TEST(ReferenceModelsTest, CnnStagesHalveChannelsAndSpatialSize) {
  ReferenceOptions o = model("cnn");
  o.width = 64;
  o.depth = 3;  // channels 16, 32, 64 at 32x32, 16x16, 8x8
  const Counts c = counts(o);
  EXPECT_EQ(c.parameters, (27 * 16 + 16 + 32) + (9 * 16 * 32 + 32 + 64) + (9 * 32 * 64 + 64 + 128) + 650u);
  EXPECT_EQ(c.contraction_flops, 2u * (16 * 1024 * 27 + 32 * 256 * 9 * 16 + 64 * 64 * 9 * 32) + 2 * 64 * 10);
}

TEST(ReferenceModelsTest, BadOptionsNameTheOption) {
  auto error_of = [](ReferenceOptions o) -> std::string {
    try {
      build_reference_model(o);
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  };
  EXPECT_EQ(error_of(model("ff", 0)), "--batch must be at least 1 (got 0)");
  EXPECT_EQ(error_of(model("ff", -4)), "--batch must be at least 1 (got -4)");
  EXPECT_EQ(error_of(model("resnet")), "unknown model 'resnet'; built-in models: ff, cnn, rnn, lstm, transformer");
  ReferenceOptions o = model("transformer");
  o.width = 130;
  EXPECT_EQ(error_of(o), "--width 130 must be divisible by the 4 attention heads");
  o = model("cnn");
  o.depth = 9;
  EXPECT_THAT(error_of(o), ::testing::HasSubstr("--depth 9 is too deep"));
}

TEST(ReferenceModelsTest, AbsurdBatchOverflowsLoudly) {
  ReferenceOptions o = model("transformer", std::int64_t{1} << 40);
  try {
    analyze(build_reference_model(o), HardwareDatabase::builtin().get("h100-sxm"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kOutOfRange);
    EXPECT_THAT(e.what(), ::testing::HasSubstr("overflows 64 bits"));
  }
}

}  // namespace
}  // namespace neuralcost
