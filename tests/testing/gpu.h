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

#include "gtest/gtest.h"

namespace psring::testing {

inline bool GpuRequired() {
  const char* value = std::getenv("PSRING_REQUIRE_GPU");
  return value != nullptr && std::strcmp(value, "1") == 0;
}

}  // namespace psring::testing

#define PSRING_SKIP_WITHOUT_GPU()                                                                  \
  return GTEST_MESSAGE_AT_(                                                                        \
      __FILE__, __LINE__,                                                                          \
      ::psring::testing::GpuRequired() ? "PSRING_REQUIRE_GPU=1 but this GPU test cannot run" : "", \
      ::psring::testing::GpuRequired() ? ::testing::TestPartResult::kFatalFailure                  \
                                       : ::testing::TestPartResult::kSkip)

#endif  // PSRING_TESTS_TESTING_GPU_H_
