// PSRING_SKIP_WITHOUT_GPU(): what every GPU test does when no GPU is usable. Normally a skip; with the
// environment variable PSRING_REQUIRE_GPU=1 (tools/gpu_check.sh sets it) a failure, so a GPU host whose GPU
// or build is broken cannot report GPU tests as passed. Returns from the enclosing test or SetUp; stream the
// reason into it:
//
//   const absl::Status probe = ProbeCuda();
//   if (!probe.ok()) PSRING_SKIP_WITHOUT_GPU() << "no usable GPU: " << probe;
#ifndef PSRING_TESTS_TESTING_GPU_H_
#define PSRING_TESTS_TESTING_GPU_H_

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>

#include "gtest/gtest.h"

namespace psring::testing {

inline bool GpuRequired() {
  const char* value = std::getenv("PSRING_REQUIRE_GPU");
  return value != nullptr && std::strcmp(value, "1") == 0;
}

// Bazel 4.2.3 has no "skipped" test status: a GPU test binary whose tests all skipped shows PASSED. So every
// binary that includes this header prints, after its tests, one line saying how many did not run, and leaves
// the same line with Bazel as a test warning ($TEST_WARNINGS_OUTPUT_FILE: bazel-testlogs/.../test.warnings).
class GpuSkipSummary : public ::testing::Environment {
 public:
  void TearDown() override {
    const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
    if (unit.skipped_test_count() == 0) return;
    const std::string line =
        "psring: " + std::to_string(unit.skipped_test_count()) + " of " + std::to_string(unit.test_to_run_count()) +
        " tests SKIPPED, not run on this host (reasons in the [  SKIPPED ] lines above); Bazel reports the "
        "target as PASSED since it has no skipped status. PSRING_REQUIRE_GPU=1 (tools/gpu_check.sh) makes "
        "them fail instead.";
    std::cout << line << std::endl;
    if (const char* warnings = std::getenv("TEST_WARNINGS_OUTPUT_FILE")) std::ofstream(warnings) << line << "\n";
  }
};

// Registered once per test binary, before main() runs the tests (gtest owns the environment).
inline const bool kGpuSkipSummaryRegistered =
    (::testing::AddGlobalTestEnvironment(new GpuSkipSummary), true);

}  // namespace psring::testing

#define PSRING_SKIP_WITHOUT_GPU()                                                                  \
  return GTEST_MESSAGE_AT_(                                                                        \
      __FILE__, __LINE__,                                                                          \
      ::psring::testing::GpuRequired() ? "PSRING_REQUIRE_GPU=1 but this GPU test cannot run" : "", \
      ::psring::testing::GpuRequired() ? ::testing::TestPartResult::kFatalFailure                  \
                                       : ::testing::TestPartResult::kSkip)

#endif  // PSRING_TESTS_TESTING_GPU_H_
