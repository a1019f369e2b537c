// Model-file inputs (model_inputs.hpp) and the choice of backend by model (measure/model_files.hpp):
// the --input syntax and its errors, matching to the model's inputs, what a contract says of the
// values, and which backend runs which kind of model.
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "neuralcost/core/error.hpp"
#include "neuralcost/core/suggest.hpp"
#include "neuralcost/measure/model_files.hpp"
#include "neuralcost/measure/profile.hpp"
#include "neuralcost/model_inputs.hpp"
#include "neuralcost/registry.hpp"

namespace neuralcost {
namespace {

using ::testing::ElementsAre;

template <typename F>
std::string error_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

InputSpec named(const std::string& text) { return parse_input(text, true, "--input"); }

TEST(ModelInputsTest, ParsesNameShapeDtypeAndRange) {
  InputSpec ids = named("ids=8x128:int64:0..30522");
  EXPECT_EQ(ids.name, "ids");
  EXPECT_EQ(ids.shape, (Shape{8, 128}));
  EXPECT_EQ(ids.dtype, DType::kInt64);
  ASSERT_TRUE(ids.range.has_value());
  EXPECT_EQ(ids.range->low, 0);
  EXPECT_EQ(ids.range->high, 30522);
  const InputSpec mask = named("attention_mask=8x128");
  EXPECT_EQ(mask.name, "attention_mask");
  EXPECT_FALSE(mask.dtype.has_value());  // the model's own
  EXPECT_FALSE(mask.range.has_value());
  const InputSpec pixels = parse_input("1x3x224x224:float16:-1..1", false, "--input-shape");
  EXPECT_EQ(pixels.name, "");
  EXPECT_EQ(pixels.dtype, DType::kFp16);
  EXPECT_EQ(pixels.range->low, -1);
  // names may hold ':' and '=' (TensorFlow's "x:0"); the shape part holds neither
  EXPECT_EQ(named("serving=x:0=2x4:bool").name, "serving=x:0");
}

TEST(ModelInputsTest, RefusesMalformedInputsNamingTheText) {
  EXPECT_EQ(error_of([] { named("8x128"); }),
            "--input '8x128' must look like NAME=SHAPE[:DTYPE[:LOW..HIGH]], e.g. ids=8x128:int64:0..30522");
  EXPECT_EQ(error_of([] { named("ids=8x128:int16:0..9"); }),
            "--input 'ids=8x128:int16:0..9': 'int16' is not an input dtype (fp32, fp64, fp16, bf16, int64, int32, "
            "int8 or bool)");
  EXPECT_EQ(error_of([] { named("x=8:tf32"); }),
            "--input 'x=8:tf32': 'tf32' is not an input dtype (fp32, fp64, fp16, bf16, int64, int32, int8 or bool)");
  EXPECT_EQ(error_of([] { named("ids=8x128:int64"); }),
            "--input 'ids=8x128:int64': an integer input needs its value range, LOW..HIGH with HIGH excluded, e.g. "
            "ids=8x128:int64:0..30522 (token ids: 0..vocabulary size)");
  EXPECT_EQ(
      error_of([] { named("ids=8x128:int64:5..5"); }),
      "--input 'ids=8x128:int64:5..5': the value range 5..5 is empty (LOW must be below HIGH, which is excluded)");
  EXPECT_EQ(error_of([] { named("ids=8x128:int64:0.5..9"); }),
            "--input 'ids=8x128:int64:0.5..9': the range of an integer input must be integers");
  EXPECT_EQ(error_of([] { named("ids=8:int8:0..300"); }),
            "--input 'ids=8:int8:0..300': the range 0..300 does not fit int8 (-128..128)");
  EXPECT_EQ(error_of([] { named("ids=8:int64:0-9"); }),
            "--input 'ids=8:int64:0-9': the value range must look like LOW..HIGH (HIGH excluded), e.g. 0..30522");
  EXPECT_EQ(error_of([] { named("ids=8:int64:a..9"); }),
            "--input 'ids=8:int64:a..9': the range bound 'a' is not a number");
  EXPECT_EQ(error_of([] { named("m=8:bool:0..2"); }),
            "--input 'm=8:bool:0..2': a bool input takes no value range (it is 0 or 1)");
  EXPECT_EQ(error_of([] { named("x=8:fp32:0..1:more"); }),
            "--input 'x=8:fp32:0..1:more': expected NAME=SHAPE[:DTYPE[:LOW..HIGH]], e.g. ids=8x128:int64:0..30522");
  EXPECT_EQ(error_of([] { parse_input("4x-2", false, "--input-shape"); }),
            "--input-shape '4x-2': dimensions must be positive integers joined by 'x' (e.g. 32x3x32x32)");
}

TEST(ModelInputsTest, InputsAreGivenOneWayEachNameOnce) {
  ModelRequest r;
  r.input_shapes = {{2, 3}};
  const auto from_shapes = inputs_of(r);
  ASSERT_EQ(from_shapes.size(), 1u);
  EXPECT_EQ(from_shapes[0].shape, (Shape{2, 3}));
  EXPECT_EQ(from_shapes[0].name, "");
  r.input_shapes.clear();
  r.inputs = {named("a=2"), parse_input("2", false, "--input-shape")};
  EXPECT_EQ(error_of([&] { inputs_of(r); }),
            "inputs are given both by name (--input NAME=SHAPE) and by position (--input-shape SHAPE); give all of "
            "them one way");
  r.inputs = {named("a=2"), named("a=3")};
  EXPECT_EQ(error_of([&] { inputs_of(r); }), "input 'a' is given twice");
}

TEST(ModelInputsTest, MatchesNamesToTheModelsInputsAndNamesThemOnError) {
  const std::vector<std::string> inputs = {"ids", "mask"};
  const auto matched = match_inputs({named("mask=2x8"), named("ids=2x8:int64:0..9")}, inputs, 2, "m.pt2");
  ASSERT_EQ(matched.size(), 2u);
  EXPECT_EQ(matched[0].name, "ids");  // in the model's order
  EXPECT_EQ(matched[1].name, "mask");
  const auto by_position =
      match_inputs({parse_input("2x8:int64:0..9", false, "-"), parse_input("2x8", false, "-")}, inputs, 2, "m.pt2");
  EXPECT_EQ(by_position[1].name, "mask");
  EXPECT_EQ(error_of([&] { match_inputs({named("idz=2x8")}, inputs, 2, "m.pt2"); }),
            "m.pt2 has no input 'idz'; its inputs: ids, mask");
  EXPECT_EQ(error_of([&] { match_inputs({named("ids=2x8:int64:0..9")}, inputs, 2, "m.pt2"); }),
            "m.pt2: input 'mask' is not given (--input mask=SHAPE[:DTYPE]); its inputs: ids, mask");
  EXPECT_EQ(error_of([&] { match_inputs({parse_input("2x8", false, "-")}, inputs, 2, "m.pt"); }),
            "m.pt takes 2 inputs (ids, mask); 1 given");
  // a trailing input with a default may be left out
  EXPECT_EQ(match_inputs({named("ids=2x8:int64:0..9")}, inputs, 1, "m.pt").size(), 1u);
  EXPECT_EQ(error_of([&] { match_inputs({}, inputs, 1, "m.pt"); }), "m.pt takes 1 to 2 inputs (ids, mask); 0 given");
}

TEST(ModelInputsTest, DescribesTheValuesARunUsed) {
  EXPECT_EQ(describe_input(named("ids=8x128:int64:0..30522"), DType::kInt64),
            "ids: 8x128 int64, integers uniform in [0, 30522)");
  EXPECT_EQ(describe_input(named("mask=8x128"), DType::kFp32), "mask: 8x128 fp32, standard normal");
  EXPECT_EQ(describe_input(named("x=2:fp16:-0.5..1"), DType::kFp16), "x: 2 fp16, uniform in [-0.5, 1)");
  EXPECT_EQ(describe_input(named("m=2:bool"), DType::kBool), "m: 2 bool, 0 or 1, uniform");
}

class ModelFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) / ("nc_model_files_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_ / "saved");
    std::ofstream(dir_ / "saved" / "saved_model.pb") << "";
    std::filesystem::create_directories(dir_ / "empty_dir");
    std::ofstream(dir_ / "weights.bin") << "";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::filesystem::path dir_;
};

std::vector<std::string> names_of(const ModelBackends& m) {
  std::vector<std::string> out;
  for (const Backend* b : m.backends) out.emplace_back(b->name());
  return out;
}

TEST_F(ModelFilesTest, KindComesFromTheName) {
  EXPECT_EQ(model_kind("transformer"), ModelKind::kBuiltIn);
  EXPECT_EQ(model_kind("/missing/m.pt"), ModelKind::kTorchScript);  // opening it is the backend's error
  EXPECT_EQ(model_kind("m.TS"), ModelKind::kTorchScript);
  EXPECT_EQ(model_kind("m.pt2"), ModelKind::kTorchExport);
  EXPECT_EQ(model_kind("m.onnx"), ModelKind::kOnnx);
  EXPECT_EQ(model_kind(path("saved")), ModelKind::kSavedModel);
  EXPECT_EQ(model_kind(path("weights.bin")), ModelKind::kOtherFile);
  EXPECT_EQ(error_of([&] { model_kind(path("empty_dir")); }),
            path("empty_dir") + ": a directory, but not a SavedModel (no saved_model.pb in it)");
}

TEST_F(ModelFilesTest, AMistypedNameSuggestsTheBuiltInOne) {
  EXPECT_EQ(error_of([] { model_kind("tranformer"); }), "unknown model 'tranformer'; did you mean transformer?");
  EXPECT_EQ(error_of([] { model_kind("Lstn"); }), "unknown model 'Lstn'; did you mean lstm?");
  EXPECT_EQ(error_of([] { model_kind("resnet50"); }),
            "unknown model 'resnet50': neither a built-in network (ff, cnn, rnn, lstm, transformer) nor a file");
  EXPECT_EQ(closest_name("ff", {"ff", "cnn"}), "ff");
  EXPECT_EQ(closest_name("xy", {"ff", "cnn"}), std::nullopt);  // two edits of two letters: no guess
}

TEST_F(ModelFilesTest, TheBackendFollowsTheFileWhenNoneIsNamed) {
  const bool libtorch = backends().front()->name() == "libtorch";  // a build with LibTorch
  const auto plan = choose_backends({"ff", "m.pt2", path("saved")}, {});
  ASSERT_EQ(plan.size(), 3u);
  EXPECT_THAT(names_of(plan[0]), ElementsAre(libtorch ? "libtorch" : "torch"));
  EXPECT_EQ(plan[0].chosen_by, "the default for built-in networks");
  EXPECT_THAT(names_of(plan[1]), ElementsAre("torch"));
  EXPECT_EQ(plan[1].chosen_by, "the model file: a torch.export program (.pt2)");
  EXPECT_THAT(names_of(plan[2]), ElementsAre("tensorflow"));
  EXPECT_EQ(plan[2].chosen_by, "the model file: a SavedModel directory");
  EXPECT_EQ(backends_of(plan).size(), libtorch ? 3u : 2u);  // each backend once
  if (libtorch) {
    const auto script = choose_backends({"m.pt", "m.ts"}, {});
    EXPECT_THAT(names_of(script[0]), ElementsAre("libtorch"));
    EXPECT_EQ(script[0].chosen_by, "the model file: a TorchScript file (.pt, .ts)");
    EXPECT_THAT(names_of(script[1]), ElementsAre("libtorch"));
  }
  // a named backend runs built-in networks and is checked against files
  const auto named_plan = choose_backends({"ff", "m.pt2"}, {"torch"});
  EXPECT_THAT(names_of(named_plan[1]), ElementsAre("torch"));
  EXPECT_EQ(named_plan[1].chosen_by, "--backend");
  EXPECT_THAT(names_of(choose_backends({path("weights.bin")}, {"torch"})[0]), ElementsAre("torch"));
}

TEST_F(ModelFilesTest, EachBackendSaysWhichFilesItLoadsAndAllBuildTheBuiltInNetworks) {
  std::map<std::string, std::vector<ModelKind>> loads;
  for (const Backend* b : backends()) {
    EXPECT_TRUE(b->accepts(ModelKind::kBuiltIn)) << b->name();
    EXPECT_FALSE(b->accepts(ModelKind::kOtherFile)) << b->name();  // only a named backend tries one
    EXPECT_FALSE(b->accepts(ModelKind::kOnnx)) << b->name();       // counted, never run
    for (ModelKind k : {ModelKind::kTorchScript, ModelKind::kTorchExport, ModelKind::kSavedModel}) {
      if (b->accepts(k)) loads[std::string(b->name())].push_back(k);
    }
  }
  EXPECT_THAT(loads["torch"], ElementsAre(ModelKind::kTorchExport));
  EXPECT_THAT(loads["tensorflow"], ElementsAre(ModelKind::kSavedModel));
  EXPECT_THAT(loads["jax"], ElementsAre());
  if (backends().front()->name() == "libtorch") EXPECT_THAT(loads["libtorch"], ElementsAre(ModelKind::kTorchScript));
}

TEST_F(ModelFilesTest, AWrongBackendOrAnOnnxFileIsOneErrorBeforeAnythingRuns) {
  EXPECT_EQ(error_of([] { choose_backends({"m.pt2"}, {"tensorflow"}); }),
            "--backend tensorflow cannot run m.pt2, a torch.export program (.pt2); the torch backend runs it (or "
            "leave out --backend)");
  EXPECT_EQ(error_of([] {
              choose_backends({"ff", "m.pt"}, {"jax", "torch"});
            }),
            "--backend jax cannot run m.pt, a TorchScript file (.pt, .ts); the libtorch backend runs it (or leave "
            "out --backend)");
  EXPECT_EQ(error_of([] {
              choose_backends({"ff", "m.pt"}, {"torch"});
            }),
            "--backend torch cannot run m.pt, a TorchScript file (.pt, .ts); the libtorch backend runs it (or leave "
            "out --backend)");
  EXPECT_EQ(error_of([&] { choose_backends({path("saved")}, {"jax"}); }),
            "--backend jax cannot run " + path("saved") +
                ", a SavedModel directory; the tensorflow backend runs it (or leave out --backend)");
  EXPECT_EQ(error_of([] { choose_backends({"m.onnx"}, {}); }),
            "m.onnx: profile cannot run an ONNX file; analyze counts it (neural-cost analyze m.onnx)");
  EXPECT_EQ(error_of([] { choose_backends({"m.onnx"}, {"torch"}); }),
            "m.onnx: profile cannot run an ONNX file; analyze counts it (neural-cost analyze m.onnx)");
  EXPECT_EQ(error_of([&] { choose_backends({path("weights.bin")}, {}); }),
            path("weights.bin") +
                ": cannot tell from its name which backend runs it (a TorchScript file (.pt, "
                ".ts): libtorch; a torch.export program (.pt2): torch; a SavedModel directory: "
                "tensorflow; a decoder LLM's config.json: torch); give --backend");
  EXPECT_THAT(error_of([] { choose_backends({"ff"}, {"mxnet"}); }), ::testing::StartsWith("unknown backend 'mxnet'"));
}

}  // namespace
}  // namespace neuralcost
