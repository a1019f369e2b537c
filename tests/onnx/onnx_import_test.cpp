// The ONNX importer: counts on generated fixtures, bindings, one malformed file per failure
// class (through the CLI: one error line naming the file, exit 1), and ONNX's own node-test
// corpus (every model loads, none crashes; the op-type coverage is printed).
#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/cli_run.hpp"
#include "neuralcost/analysis/roofline.hpp"
#include "neuralcost/core/error.hpp"
#include "neuralcost/hardware/database.hpp"
#include "neuralcost/registry.hpp"

namespace neuralcost {
namespace {

using namespace neuralcost::testing;
using ::testing::HasSubstr;

const std::string kFixtures = NEURALCOST_ONNX_FIXTURES;

nlohmann::json analyze_json(const std::string& args) {
  const CliResult r = run_cli("analyze " + args + " --format json");
  EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.err;
  return nlohmann::json::parse(r.out);
}

TEST(OnnxImportTest, SmallCnnCountsMatchAHandCount) {
  // conv 2*4*64*3*9 = 13,824 and gemm 2*64*10 = 1,280 contraction FLOPs per sample
  const auto j = analyze_json(kFixtures + "/small_cnn.onnx --dim N=2");
  EXPECT_EQ(j["totals"]["contraction_flops"], 2 * (13824 + 1280));
  EXPECT_EQ(j["totals"]["parameter_count"], 4 * 27 + 4 + 640 + 10);
  EXPECT_TRUE(j["unmodeled"].empty());
  EXPECT_EQ(j["ops"].size(), 5u);
  // the same through --input instead of --dim
  EXPECT_EQ(analyze_json(kFixtures + "/small_cnn.onnx --input x=2x3x8x8")["totals"]["contraction_flops"],
            2 * (13824 + 1280));
}

TEST(OnnxImportTest, ASymbolicBatchIsBoundByBatchAndPerSampleFiguresUseIt) {
  // the usual dynamic-batch export: without --batch its default (32) binds N, and says so
  auto j = analyze_json(kFixtures + "/small_cnn.onnx");
  EXPECT_EQ(j["model"]["batch"], 32);
  EXPECT_EQ(j["totals"]["contraction_flops"], 32 * (13824 + 1280));
  EXPECT_TRUE(j["unmodeled"].empty());
  ASSERT_EQ(j["notes"].size(), 1u);
  EXPECT_THAT(j["notes"][0].get<std::string>(), HasSubstr("batch 32: the leading dimension 'N' of input 'x' bound by "
                                                          "the default of --batch (32)"));
  j = analyze_json(kFixtures + "/small_cnn.onnx --batch 8");
  EXPECT_EQ(j["model"]["batch"], 8);
  EXPECT_EQ(j["totals"]["contraction_flops"], 8 * (13824 + 1280));
  EXPECT_EQ(j["totals"]["per_sample"]["flops"], j["totals"]["flops"].get<double>() / 8);
  // the table's header names the batch, and the best case says which bound it is from
  const CliResult r = run_cli("analyze " + kFixtures + "/small_cnn.onnx --batch 8");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("small_cnn.onnx (batch 8, fp32)"));
  EXPECT_THAT(r.out, HasSubstr("samples/s from the unfused bound"));
  EXPECT_THAT(r.out, HasSubstr("note: batch 8: the leading dimension 'N' of input 'x' bound by --batch"));
}

TEST(OnnxImportTest, AFileThatFixesItsBatchUsesItAndRefusesAnother) {
  auto j = analyze_json(kFixtures + "/fixed_batch.onnx");
  EXPECT_EQ(j["model"]["batch"], 2);  // not the default of --batch
  EXPECT_EQ(j["totals"]["contraction_flops"], 2 * (13824 + 1280));
  EXPECT_EQ(analyze_json(kFixtures + "/fixed_batch.onnx --batch 2")["model"]["batch"], 2);
  const CliResult r = run_cli("analyze " + kFixtures + "/fixed_batch.onnx --batch 8");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("input 'x' fixes the batch at 2 (2x3x8x8); --batch 8 does not apply"));
}

TEST(OnnxImportTest, BatchAndBindingsMustAgree) {
  CliResult r = run_cli("analyze " + kFixtures + "/small_cnn.onnx --dim N=4 --batch 8");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--batch 8 disagrees with --dim N=4"));
  r = run_cli("analyze " + kFixtures + "/small_cnn.onnx --input x=2x3x8x8 --batch 8");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--batch 8 disagrees with --input 'x'"));
  // an --input of another rank, or one that changes a fixed dimension
  r = run_cli("analyze " + kFixtures + "/small_cnn.onnx --input x=2x192");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--input 'x' gives 2 dimensions, the input has 4 (Nx3x8x8)"));
  r = run_cli("analyze " + kFixtures + "/small_cnn.onnx --input x=2x3x9x8");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("dimension 2 is fixed at 8 in the file (Nx3x8x8), not 9"));
}

TEST(OnnxImportTest, AnUnboundDimensionIsAnErrorNamingTheFixBeforeOnnxInferenceSeesIt) {
  // opset 15's Shape over a symbolic dimension: refused with the fix, not handed to ONNX
  CliResult r = run_cli("analyze " + kFixtures + "/shape15.onnx");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("1 input dimension is not known; bind it: 'S' (input 'x', dimension 1): --dim S=VALUE"));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  const auto j = analyze_json(kFixtures + "/shape15.onnx --dim S=4 --batch 2");
  EXPECT_TRUE(j["unmodeled"].empty());
  EXPECT_EQ(j["totals"]["flops"], 2 * 4 * 8);  // the Relu; Shape and Reshape do no arithmetic
}

TEST(OnnxImportTest, EinsumOutputShapesComeFromOurOwnRule) {
  // ONNX 1.12's inference gives Einsum a rank but no dims: without our rule every op after the
  // first Einsum would be unmodeled
  const auto j = analyze_json(kFixtures + "/einsum_attention.onnx --batch 3");
  EXPECT_TRUE(j["unmodeled"].empty());
  ASSERT_EQ(j["ops"].size(), 4u);
  EXPECT_EQ(j["totals"]["contraction_flops"], 3 * 2 * (2 * 2 * 4 * 4 * 8));
  EXPECT_EQ(j["ops"][1]["output_shapes"][0], nlohmann::json::array({3, 2, 4, 4}));
}

TEST(OnnxImportTest, SwinsWindowPaddingIsFoldedThroughReversedSlicesAndTransposes) {
  // Swin-T's export left 3,729 of 3,749 ops unmodeled before Slice took any axis and step and
  // Transpose was folded
  const auto j = analyze_json(kFixtures + "/swin_pad.onnx --batch 2");
  EXPECT_TRUE(j["unmodeled"].empty());
  ASSERT_EQ(j["ops"].size(), 2u);  // the pad arithmetic is folded away
  EXPECT_EQ(j["ops"][0]["output_shapes"][0], nlohmann::json::array({2, 7, 6, 4}));
  EXPECT_EQ(j["totals"]["flops"], 2 * 7 * 6 * 4);
}

TEST(OnnxImportTest, AHostileNodeNameIsMadeSafeForEveryOutput) {
  const std::string model = kFixtures + "/hostile_name.onnx";
  // JSON: the report survives the invalid byte (replaced by U+FFFD), and says that it was replaced
  const auto j = analyze_json(model);
  EXPECT_EQ(j["ops"][0]["name"], "=\xEF\xBF\xBD\x1b[2J\n|x=1+1!z");
  const std::string note = "held bytes that are not UTF-8, replaced by U+FFFD";
  ASSERT_TRUE(j.contains("warnings"));
  EXPECT_THAT(j["warnings"],
              ::testing::Contains(::testing::AllOf(HasSubstr(note), HasSubstr("first at /fusion_groups/0/ops/0"))))
      << j["warnings"].dump();
  // a terminal sees no escape sequence and no forged line, and a warning about the byte
  CliResult r = run_cli("analyze " + model);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos);
  EXPECT_THAT(r.out, HasSubstr("=\xEF\xBF\xBD\\x1b[2J\\x0a|x=1+1!z"));
  EXPECT_THAT(r.out, HasSubstr("\nwarning: text from outside (a name, a path, a worker's output) held bytes that are "
                               "not UTF-8; they are shown as U+FFFD\n"));
  // CSV: not a formula; Markdown: the pipe does not end the cell
  r = run_cli("analyze " + model + " --format csv");
  EXPECT_THAT(r.out, HasSubstr("\n\"'=\xEF\xBF\xBD"));  // quoted: the cell holds a newline
  r = run_cli("analyze " + model + " --format md");
  EXPECT_THAT(r.out, HasSubstr("\\x0a\\|x=1+1!z"));
  EXPECT_THAT(r.out, HasSubstr("\n\nwarning: text from outside"));
  // a clean model has no such warning
  EXPECT_FALSE(analyze_json(kFixtures + "/small_cnn.onnx").contains("warnings"));
  EXPECT_THAT(run_cli("analyze " + kFixtures + "/small_cnn.onnx").out, ::testing::Not(HasSubstr("not UTF-8")));
}

TEST(OnnxImportTest, TokenIdsStayIntegersAndDtypeConvertsTheFloats) {
  const auto j = analyze_json(kFixtures + "/token_ids.onnx --dim seq=16 --batch 2 --dtype bf16");
  EXPECT_TRUE(j["unmodeled"].empty());
  EXPECT_EQ(j["model"]["dtype"], "bf16");
  EXPECT_EQ(j["totals"]["parameter_bytes"], 100 * 16 * 2);  // the table in bf16 (the axis is a shape constant)
  bool converted = false;
  for (const auto& n : j["notes"])
    converted = converted || n.get<std::string>().find("counted as bf16") != std::string::npos;
  EXPECT_TRUE(converted) << j["notes"].dump();
  // the lookup reads its int64 ids (2 x 16 x 8 bytes) whatever --dtype says, and 32 rows of 16 bf16
  EXPECT_EQ(j["ops"][0]["bytes_read"], 2 * 16 * 8 + 2 * 16 * 16 * 2);
  const auto fp32 = analyze_json(kFixtures + "/token_ids.onnx --input ids=2x16 --input mask=2x16");
  EXPECT_EQ(fp32["totals"]["parameter_bytes"], 100 * 16 * 4);
  EXPECT_EQ(fp32["model"]["batch"], 2);
}

TEST(OnnxImportTest, OptionsThatDoNotApplyAreErrors) {
  for (const char* option : {"--seq 64", "--width 256", "--depth 3"}) {
    const CliResult r = run_cli("analyze " + kFixtures + "/small_cnn.onnx " + option);
    EXPECT_EQ(r.exit_code, 1) << option;
    EXPECT_THAT(r.err, HasSubstr("does not apply to an ONNX model")) << option;
  }
  // the decoder LLMs' options: an ONNX model's weights are stored as the file says, it has no KV
  // cache, latent attention or experts this tool models
  for (const auto& [option, message] : std::vector<std::pair<std::string, std::string>>{
           {"--weights int4", "--weights applies to decoder LLMs"},
           {"--kv-cache fp8", "--kv-cache applies to decoder LLMs"},
           {"--mla absorbed", "--mla applies to decoder LLMs with latent attention"},
           {"--routing routing.json", "--routing applies to decoder LLMs with experts"},
           {"--phase decode", "--phase applies to decoder LLMs"},
           {"--prompt 10", "--prompt applies to decoder LLMs"},
           {"--context 10", "--context applies to decoder LLMs"}}) {
    const CliResult d = run_cli("analyze " + kFixtures + "/small_cnn.onnx " + option);
    EXPECT_EQ(d.exit_code, 1) << option;
    EXPECT_THAT(d.err, HasSubstr(message)) << option;
  }
  const CliResult r = run_cli("analyze ff --dim N=2");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--dim does not apply to the built-in network 'ff'"));
}

TEST(OnnxImportTest, AMostlyUnmodeledReportSaysSoFirstAndFails) {
  const CliResult r = run_cli("analyze " + kFixtures + "/custom_ops.onnx");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, ::testing::StartsWith("warning: 2 of 2 ops are not modeled, so the totals below mean nothing; "
                                           "every one: "));
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("best case")));
  EXPECT_THAT(r.err, ::testing::StartsWith("error: "));
  EXPECT_THAT(r.err, HasSubstr("2 of 2 ops are not modeled"));
}

TEST(OnnxImportTest, ResizeCountsItsInterpolations) {
  const auto j = analyze_json(kFixtures + "/resize_linear.onnx");
  EXPECT_TRUE(j["unmodeled"].empty());
  ASSERT_EQ(j["ops"].size(), 1u);  // the Constant is folded away
  EXPECT_EQ(j["ops"][0]["flops"], 64 * 9);
  EXPECT_EQ(j["ops"][0]["bytes_read"], 16 * 4);
  EXPECT_EQ(j["ops"][0]["bytes_written"], 64 * 4);
}

TEST(OnnxImportTest, LrnAndMeanVarianceNormalizationMatchAHandCount) {
  const auto j = analyze_json(kFixtures + "/lrn_mvn.onnx");
  EXPECT_TRUE(j["unmodeled"].empty());
  ASSERT_EQ(j["ops"].size(), 2u);
  EXPECT_EQ(j["ops"][0]["flops"], 164);
  EXPECT_EQ(j["ops"][0]["transcendentals"], 20);
  EXPECT_EQ(j["ops"][1]["flops"], 110);
  EXPECT_EQ(j["ops"][1]["transcendentals"], 5);
}

TEST(OnnxImportTest, CumSumUsesItsFoldedAxis) {
  const auto j = analyze_json(kFixtures + "/cumsum.onnx");
  EXPECT_TRUE(j["unmodeled"].empty());
  EXPECT_EQ(j["totals"]["flops"], 9);
}

TEST(OnnxImportTest, ScanCountsItsBodyOncePerStep) {
  const auto j = analyze_json(kFixtures + "/scan_rnn.onnx");
  EXPECT_TRUE(j["unmodeled"].empty());
  ASSERT_EQ(j["ops"].size(), 1u);
  EXPECT_EQ(j["totals"]["flops"], 360);
  EXPECT_EQ(j["totals"]["contraction_flops"], 320);
  EXPECT_EQ(j["totals"]["transcendentals"], 20);
  EXPECT_EQ(j["totals"]["parameter_count"], 32);  // W and U once, not once per step
}

TEST(OnnxImportTest, LoopWithAKnownTripCountIsCountedAndSaysItIsAnUpperBound) {
  const auto j = analyze_json(kFixtures + "/loop_const.onnx");
  EXPECT_TRUE(j["unmodeled"].empty());
  EXPECT_EQ(j["totals"]["flops"], 3 * 32);
  EXPECT_EQ(j["totals"]["parameter_count"], 16);
  ASSERT_EQ(j["approximations"].size(), 1u);
  EXPECT_THAT(j["approximations"][0].get<std::string>(),
              HasSubstr("Loop counted at its trip count M = 3; its condition may end it sooner"));
}

TEST(OnnxImportTest, AnIfWithAKnownConditionCountsTheBranchTaken) {
  const auto j = analyze_json(kFixtures + "/if_known.onnx");
  EXPECT_TRUE(j["unmodeled"].empty());
  EXPECT_EQ(j["totals"]["flops"], 32);
  EXPECT_EQ(j["totals"]["parameter_count"], 16);
}

TEST(OnnxImportTest, AnInitializerUsedTwiceIsOneParameter) {
  const auto j = analyze_json(kFixtures + "/shared_weight.onnx");
  EXPECT_EQ(j["totals"]["parameter_count"], 256);
  EXPECT_EQ(j["totals"]["contraction_flops"], 2 * 2 * 4 * 16 * 16);
}

TEST(OnnxImportTest, ExternalDataIsCheckedOrSkipped) {
  EXPECT_EQ(analyze_json(kFixtures + "/external.onnx")["totals"]["parameter_count"], 256);
  const CliResult missing = run_cli("analyze " + kFixtures + "/missing_external.onnx");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_EQ(missing.err, "error: " + kFixtures + "/missing_external.onnx: initializer 'W': external data file '" +
                             kFixtures + "/nowhere.bin' is missing\n");
  // only the structure: the payload is never needed for counting
  EXPECT_EQ(analyze_json(kFixtures + "/missing_external.onnx --structure-only")["totals"]["parameter_count"], 256);
}

TEST(OnnxImportTest, MalformedFilesGiveOneErrorLineNamingTheFile) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"truncated", "not an ONNX model (the protobuf does not parse)"},
      {"random", "not an ONNX model (the protobuf does not parse)"},
      {"not_a_model", "not an ONNX model"},
      {"cyclic", "the ONNX checker rejects it: Nodes in a graph must be topologically sorted"},
      {"negative_dim", "input 'x' has a negative dimension (-3)"},
      {"newer_opset", "field 'opset_import' asks for opset 99, newer than this ONNX library knows"},
      {"does_not_exist", "cannot open ONNX file"},
      {"zero_stride", "node 'pool' (MaxPool): attribute 'strides' has 0; it must be positive"},
      {"escaping_external_abs", "external data location '/etc/hostname' is outside the model's folder"},
      {"escaping_external_up", "external data location '../external.bin' is outside the model's folder"},
      {"wrapping_external", "initializer 'W': external data offset + length overflows"},
      // raw bytes that do not fit the declared size: ONNX's ParseData overflowed its buffer on them
      {"bad_raw_int64", "initializer 'shape': its raw data is 12 bytes, its 1 elements of 8 bytes need 8"},
      // ONNX 1.12's own inference crashes on it: the importer runs it in a child process
      {"scalar_layernorm",
       "ONNX's shape inference (the ONNX library, not this tool) crashed (Segmentation fault) at node 'norm' "
       "(LayerNormalization)"},
  };
  const auto expect_one_error = [](const std::string& name, const std::string& flags, const std::string& message) {
    const CliResult r = run_cli("analyze " + kFixtures + "/" + name + ".onnx" + flags);
    EXPECT_EQ(r.exit_code, 1) << name << flags;
    EXPECT_THAT(r.err, ::testing::StartsWith("error: ")) << name << flags;
    EXPECT_THAT(r.err, HasSubstr(message)) << name << flags;
    EXPECT_THAT(r.err, HasSubstr(name + ".onnx")) << name << flags;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << name << flags << ": " << r.err;
  };
  for (const auto& [name, message] : cases) expect_one_error(name, "", message);
  // --structure-only keeps small initializers whole (the overflow was there too)
  expect_one_error("bad_raw_int64", " --structure-only",
                   "initializer 'shape': its raw data is 12 bytes, its 1 elements of 8 bytes need 8");
}

TEST(OnnxImportTest, BadBindingsAreErrors) {
  CliResult r = run_cli("analyze " + kFixtures + "/small_cnn.onnx --input nope=1x3x8x8");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--input 'nope' is not an input of the graph"));
  r = run_cli("analyze " + kFixtures + "/small_cnn.onnx --dim N=zero");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("'zero' is not a positive integer"));
  r = run_cli("analyze " + kFixtures + "/small_cnn.onnx --dim batch=2");  // a typo for N
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--dim 'batch' is not a symbolic dimension of the graph inputs (they have: N)"));
}

TEST(OnnxCorpusTest, EveryNodeTestModelLoadsWithoutACrash) {
  const std::filesystem::path corpus = "/usr/share/libonnx-testdata/data/node";
  if (!std::filesystem::exists(corpus)) GTEST_SKIP() << "libonnx-testdata is not installed";
  const HardwareSpec& hw = HardwareDatabase::builtin().get("h100-sxm");
  std::size_t models = 0, complete = 0, partial = 0, rejected = 0;
  std::map<std::string, std::size_t> modeled, unmodeled;
  for (const auto& entry : std::filesystem::directory_iterator(corpus)) {
    const auto file = entry.path() / "model.onnx";
    if (!std::filesystem::exists(file)) continue;
    ++models;
    ModelRequest request;
    request.model = file.string();
    try {
      const Analysis a = analyze(importer_for(request).import(request), hw);
      (a.complete() ? complete : partial) += 1;
      for (const OpRoofline& r : a.ops) {
        (r.cost.modeled ? modeled : unmodeled)[a.graph.op(r.op_index).source_type] += 1;
      }
    } catch (const Error& e) {
      ++rejected;  // a clear, named rejection is an acceptable outcome; a crash is not
      EXPECT_THAT(e.what(), HasSubstr(file.string())) << e.what();
    }
  }
  EXPECT_GT(models, 900u);
  std::size_t both = 0;
  for (const auto& [type, n] : modeled) both += unmodeled.count(type);
  std::printf("ONNX node corpus: %zu models: %zu fully analysed, %zu with unmodeled ops, %zu rejected\n", models,
              complete, partial, rejected);
  std::printf("op types modeled: %zu; op types unmodeled: %zu (%zu seen both ways)\n", modeled.size(), unmodeled.size(),
              both);
  std::string list;
  for (const auto& [type, n] : unmodeled) list += type + " ";
  std::printf("unmodeled op types: %s\n", list.c_str());
  EXPECT_GT(complete, models / 2);
}

}  // namespace
}  // namespace neuralcost
