// Model files in the Python workers through the CLI: a two-input model that takes token ids
// (tests/workers/make_token_model.py, written with the project's .venv by the fixture) runs in the backend its
// file calls for (.pt2: torch, a SavedModel: tensorflow) with inputs by name, dtype and value
// range, and the inputs' errors name the model's own inputs.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "backends/python_worker/worker_backend.hpp"
#include "cli/cli_run.hpp"

namespace neuralcost {
namespace {

using namespace neuralcost::testing;
using ::testing::HasSubstr;

const std::string kQuick =
    " --threads 1 --budget 0.2 --warmup 2 --warmup-seconds 0 --layer-runs 2 --target-ci 0.5 --format json" + kTestRoof;
const std::string kInputs = " --input ids=2x8:int64:0..1000 --input mask=2x8";

/// The token model's files, written once per test run by CTest's fixture worker_model_files
/// (tests/workers/make_model_files.sh).
class WorkerFilesTest : public ::testing::Test {
 protected:
  static std::string file(const std::string& kind) {
    return std::string(NEURALCOST_MODEL_FILES) + (kind == "export" ? "/token.pt2" : "/token_saved");
  }
};

/// The one run of a profile that must succeed.
nlohmann::json only_run(const CliResult& r) {
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["runs"].size(), 1u);
  EXPECT_FALSE(j["runs"][0]["failed"].get<bool>()) << j["runs"][0].value("error", "");
  return j["runs"][0];
}

TEST_F(WorkerFilesTest, APt2ProgramRunsInTorchWithTokenIds) {
  const auto run = only_run(run_cli("profile " + file("export") + kInputs + kQuick));
  EXPECT_EQ(run["backend"], "torch");
  EXPECT_EQ(run["batch"], 2);
  EXPECT_EQ(run["contract"]["backend_chosen_by"], "the model file: a torch.export program (.pt2)");
  EXPECT_EQ(run["contract"]["input_values"],
            "ids: 2x8 int64, integers uniform in [0, 1000); mask: 2x8 fp32, standard normal");
  EXPECT_EQ(run["totals"]["contraction_flops"], 2 * 2 * 8 * 16 * 4);
  EXPECT_EQ(run["totals"]["parameter_count"], 1000 * 16 + 16 * 4 + 4);
  // the program declares ids int64: by position, without a dtype, it stays an integer
  const auto positional =
      only_run(run_cli("profile " + file("export") + " --input-shape 2x8:int64:0..1000 --input-shape 2x8" + kQuick));
  EXPECT_EQ(positional["contract"]["input_values"], run["contract"]["input_values"]);
}

TEST_F(WorkerFilesTest, ASavedModelRunsInTensorFlowWithTokenIds) {
  const auto run = only_run(run_cli("profile " + file("savedmodel") + kInputs + " --mode function" + kQuick));
  EXPECT_EQ(run["backend"], "tensorflow");
  EXPECT_EQ(run["contract"]["backend_chosen_by"], "the model file: a SavedModel directory");
  EXPECT_EQ(run["contract"]["input_values"],
            "ids: 2x8 int64, integers uniform in [0, 1000); mask: 2x8 fp32, standard normal");
  EXPECT_EQ(run["totals"]["contraction_flops"], 2 * 2 * 8 * 16 * 4);
  EXPECT_EQ(run["totals"]["parameter_count"], 1000 * 16 + 16 * 4 + 4);
}

TEST_F(WorkerFilesTest, InputErrorsNameTheModelsOwnInputs) {
  CliResult r = run_cli("profile " + file("export") + " --input idz=2x8:int64:0..1000 --input mask=2x8" + kQuick);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr(file("export") + " has no input 'idz'; its inputs: ids, mask\n"));
  r = run_cli("profile " + file("export") + " --input ids=2x8 --input mask=2x8" + kQuick);
  EXPECT_THAT(r.err, HasSubstr(file("export") + ": input 'ids' is int64: give its value range, e.g. --input "
                                                "ids=2x8:int64:0..30522 (HIGH excluded)"));
  r = run_cli("profile " + file("savedmodel") + " --input ids=2x8:int32:0..1000 --input mask=2x8" + kQuick);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err,
              HasSubstr(file("savedmodel") + ": input 'ids' is int64 in signature 'serving_default', not int32"));
  r = run_cli("profile " + file("savedmodel") + " --input mask=2x8" + kQuick);
  EXPECT_THAT(r.err, HasSubstr(file("savedmodel") + ": input 'ids' is not given (--input ids=SHAPE[:DTYPE]); its "
                                                    "inputs: ids, mask"));
}

}  // namespace
}  // namespace neuralcost
