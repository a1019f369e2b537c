// A study's settings header (measure/study.hpp): what --resume checks before appending cells. A
// training study's cells are steps: resuming one with forward settings, or the other way, is
// refused by name; a header without a workload (written before training studies) is forward.
#include <cstdio>
#include <fstream>

#include <gtest/gtest.h>

#include "neuralcost/measure/study.hpp"

namespace neuralcost {
namespace {

TEST(StudySettingsTest, ATrainingStudyCannotResumeAForwardOneNorTheOtherWay) {
  ModelRequest base;
  ProfileOptions forward;
  const nlohmann::json f = study_settings(base, forward, "host");
  EXPECT_EQ(f["workload"], "forward");
  ProfileOptions train = forward;
  train.run.train = TrainRun{};
  train.run.train->options.optimizer = Optimizer::kSgd;
  const nlohmann::json t = study_settings(base, train, "host");
  EXPECT_EQ(t["workload"]["step"], "train");
  EXPECT_EQ(t["workload"]["optimizer"], "sgd");
  EXPECT_EQ(settings_difference(f, t).rfind("workload: \"forward\" in the file, {", 0), 0u)
      << settings_difference(f, t);
  EXPECT_EQ(settings_difference(t, f).rfind("workload: {", 0), 0u);
  EXPECT_EQ(settings_difference(t, t), "");
  // another optimizer or learning rate is another study
  ProfileOptions adam = train;
  adam.run.train->options.optimizer = Optimizer::kAdam;
  adam.run.train->hyper.learning_rate = 0.01;
  EXPECT_EQ(settings_difference(t, study_settings(base, adam, "host")).rfind("workload: ", 0), 0u);
}

TEST(StudySettingsTest, ADecoderStudyOfOnePhaseCannotResumeAsAnother) {
  ProfileOptions forward;
  ModelRequest plain;
  EXPECT_FALSE(study_settings(plain, forward, "host").contains("decoder"));  // files from before keep resuming
  ModelRequest decode = plain;
  decode.phase = "decode";
  decode.context = 512;
  decode.given = {"phase", "context"};
  const nlohmann::json d = study_settings(decode, forward, "host");
  EXPECT_EQ(d["decoder"]["phase"], "decode");
  EXPECT_EQ(d["decoder"]["context"], 512);
  ModelRequest prefill = decode;
  prefill.phase = "prefill";
  prefill.given = {"phase"};
  EXPECT_NE(settings_difference(d, study_settings(prefill, forward, "host")), "");
  EXPECT_EQ(settings_difference(d, study_settings(decode, forward, "host")), "");
}

TEST(StudySettingsTest, AFileFromBeforeTrainingStudiesResumesAsAForwardStudy) {
  ModelRequest base;
  ProfileOptions forward;
  nlohmann::json old = study_settings(base, forward, "host");
  old.erase("workload");
  const std::string path = ::testing::TempDir() + "/nc_old_study.jsonl";
  std::ofstream(path) << nlohmann::json{{"study", old}}.dump() << "\n";
  const StudyProgress p = read_study_progress(path);
  std::remove(path.c_str());
  EXPECT_EQ(settings_difference(p.settings, study_settings(base, forward, "host")), "");
}

// A last line without its newline: whole (an editor dropped the final newline) it is a finished
// cell, kept, and the file gets its newline; cut short by an interruption it is dropped, and
// cut_bytes says how much.
TEST(StudySettingsTest, AWholeLastLineWithoutItsNewlineIsKept) {
  ModelRequest base;
  ProfileOptions forward;
  const std::string header = nlohmann::json{{"study", study_settings(base, forward, "host")}}.dump() + "\n";
  const std::string run =
      nlohmann::json{{"model", "ff"}, {"backend", "libtorch"}, {"mode", "eager"}, {"batch", 1}}.dump();
  const std::string path = ::testing::TempDir() + "/nc_no_newline.jsonl";
  std::ofstream(path, std::ios::binary) << header << run;
  StudyProgress p = read_study_progress(path);
  EXPECT_EQ(p.done.size(), 1u);
  EXPECT_TRUE(p.missing_newline);
  EXPECT_EQ(p.cut_bytes, 0u);
  EXPECT_EQ(p.good_bytes, header.size() + run.size());
  std::ofstream(path, std::ios::binary) << header << run.substr(0, run.size() - 5);
  p = read_study_progress(path);
  std::remove(path.c_str());
  EXPECT_TRUE(p.done.empty());
  EXPECT_FALSE(p.missing_newline);
  EXPECT_EQ(p.cut_bytes, run.size() - 5);
  EXPECT_EQ(p.good_bytes, header.size());
}

}  // namespace
}  // namespace neuralcost
