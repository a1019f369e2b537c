// Environment facts: detection never fails, and the distortion checks fire on their cue.
#include "neuralcost/measure/environment.hpp"

#include <sys/mman.h>
#include <sys/resource.h>

#include <cstdlib>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace neuralcost {
namespace {

using ::testing::HasSubstr;

TEST(EnvironmentTest, DetectsCpusAndRecordsVariables) {
  const EnvironmentFacts f = detect_environment();
  EXPECT_GE(f.logical_cpus, 1);
  EXPECT_FALSE(f.cpu_model.empty());
  EXPECT_TRUE(f.variables.count("OPENBLAS_CORETYPE"));
  EXPECT_TRUE(f.variables.count("OMP_NUM_THREADS"));
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  if (coretype != nullptr && *coretype != '\0') {
    EXPECT_THAT(f.warnings, ::testing::Contains(HasSubstr("OPENBLAS_CORETYPE")));
  }
}

TEST(EnvironmentTest, MallocIsTunedUnlessTheUserSetGlibcTunables) {
  const char* before = std::getenv("GLIBC_TUNABLES");
  const std::string saved = before != nullptr ? before : "";
  // the user's choice is kept and said
  ::setenv("GLIBC_TUNABLES", "glibc.malloc.check=0", 1);
  MallocTuning kept = tune_malloc_for_measurement();
  EXPECT_FALSE(kept.tuned);
  EXPECT_THAT(kept.description, HasSubstr("GLIBC_TUNABLES=glibc.malloc.check=0 from the environment"));
  EXPECT_STREQ(std::getenv("GLIBC_TUNABLES"), "glibc.malloc.check=0");
  // unset: this process's thresholds are set and the workers it starts inherit the same
  ::unsetenv("GLIBC_TUNABLES");
  const MallocTuning tuned = tune_malloc_for_measurement();
  EXPECT_TRUE(tuned.tuned) << tuned.description;
  EXPECT_THAT(tuned.description, HasSubstr("keeps freed memory"));
  ASSERT_NE(std::getenv("GLIBC_TUNABLES"), nullptr);
  EXPECT_THAT(std::string(std::getenv("GLIBC_TUNABLES")), HasSubstr("glibc.malloc.mmap_threshold=33554432"));
  EXPECT_EQ(malloc_tuning().description, tuned.description);
  EXPECT_THAT(tuned.arenas, HasSubstr("one malloc arena"));
  EXPECT_THAT(kept.arenas, HasSubstr("one malloc arena"));  // the user's thresholds, our thread's arena
  if (before != nullptr) {
    ::setenv("GLIBC_TUNABLES", saved.c_str(), 1);
  } else {
    ::unsetenv("GLIBC_TUNABLES");
  }
}

TEST(EnvironmentTest, CountsPageFaultsOfFreshMemory) {
  // a fresh anonymous mapping faults once per page touched: 64 pages, 64 faults per call
  const double faults = page_faults_per_iteration(
      [] {
        const std::size_t bytes = 64 * 4096;
        void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        ASSERT_NE(p, MAP_FAILED);
        for (std::size_t i = 0; i < bytes; i += 4096) static_cast<volatile char*>(p)[i] = 1;
        munmap(p, bytes);
      },
      5);
  EXPECT_GE(faults, 64.0);
  EXPECT_LT(faults, 80.0);
  EnvironmentFacts f;
  check_page_faults(f, faults, MallocTuning{});
  EXPECT_THAT(f.warnings, ::testing::Contains(HasSubstr("allocator churn: 64 page faults per iteration")));
  EXPECT_THAT(f.warnings, ::testing::Contains(HasSubstr("try GLIBC_TUNABLES=")));
  // with the thresholds in force, suggesting them again would change nothing
  EnvironmentFacts tuned;
  check_page_faults(tuned, faults, MallocTuning{true, "glibc malloc keeps freed memory: ...", "one malloc arena"});
  ASSERT_EQ(tuned.warnings.size(), 1U);
  EXPECT_THAT(tuned.warnings[0], HasSubstr("allocator churn: 64 page faults per iteration"));
  EXPECT_THAT(tuned.warnings[0], HasSubstr("glibc's thresholds were in force"));
  EXPECT_THAT(tuned.warnings[0], ::testing::Not(HasSubstr("try GLIBC_TUNABLES")));
  EnvironmentFacts quiet;
  check_page_faults(quiet, page_faults_per_iteration([] {}, 5));
  EXPECT_TRUE(quiet.warnings.empty());
}

TEST(EnvironmentTest, ReferenceBlasIsFlagged) {
  EnvironmentFacts f;
  check_blas(f, "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3.11.0");
  EXPECT_THAT(f.warnings, ::testing::Contains(HasSubstr("reference BLAS in use")));
  EnvironmentFacts fine;
  check_blas(fine, "/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3");
  EXPECT_TRUE(fine.warnings.empty());
  EXPECT_EQ(fine.variables["blas_library"], "/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3");
}

TEST(EnvironmentTest, OversubscriptionNeedsMoreThreadsThanCpus) {
  EnvironmentFacts f;
  f.logical_cpus = 2;
  check_oversubscription(f, 2, 2);
  EXPECT_THAT(f.warnings, ::testing::Contains(HasSubstr("2 intra-op threads x 2 BLAS threads on 2 CPUs")));
  EXPECT_THAT(f.warnings, ::testing::Contains(HasSubstr("without OMP_WAIT_POLICY=PASSIVE")));
  EnvironmentFacts fine;
  fine.logical_cpus = 2;
  check_oversubscription(fine, 1, 2);
  EXPECT_TRUE(fine.warnings.empty());
  EnvironmentFacts passive;
  passive.logical_cpus = 8;
  passive.variables["OMP_WAIT_POLICY"] = "PASSIVE";
  check_oversubscription(passive, 2, 2);
  EXPECT_TRUE(passive.warnings.empty());
}

// The thread that runs LibTorch's calls (CallThread) allocates a pass's activations and frees
// them, pass after pass. With an arena of its own, glibc unmaps its emptied heaps and every pass
// faults the pages in again; with the one arena the tuning leaves, the second pass faults none.
TEST(EnvironmentTest, AThreadsPassesReuseTheirMemoryOnceMallocIsTuned) {
  tune_malloc_for_measurement();
  long faults_later = -1;
  std::thread worker([&] {
    auto pass = [] {
      std::vector<char*> blocks;
      for (int i = 0; i < 16; ++i) {  // 16 x 8 MiB: more than one 64 MiB heap of an arena
        char* b = static_cast<char*>(std::malloc(8 << 20));
        ASSERT_NE(b, nullptr);
        for (std::size_t at = 0; at < (8u << 20); at += 4096) b[at] = static_cast<char>(at);
        blocks.push_back(b);
      }
      for (char* b : blocks) std::free(b);
    };
    pass();  // the first pass faults its pages in
    rusage before{}, after{};
    getrusage(RUSAGE_THREAD, &before);
    for (int i = 0; i < 3; ++i) pass();
    getrusage(RUSAGE_THREAD, &after);
    faults_later = (after.ru_minflt + after.ru_majflt) - (before.ru_minflt + before.ru_majflt);
  });
  worker.join();
  // 3 passes of 32,768 pages each (with an arena of its own: 12,291 faults here); a few allowed
  EXPECT_LT(faults_later, 300) << "the passes' memory went back to the OS between passes";
}

}  // namespace
}  // namespace neuralcost
