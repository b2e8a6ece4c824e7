// A GPU test on a machine without one, for gpu_skip_test.sh: skipped, or failed under PSRING_REQUIRE_GPU=1.
#include "gtest/gtest.h"
#include "tests/testing/gpu.h"

namespace {

TEST(GpuSkipProbe, NeedsAGpu) { PSRING_SKIP_WITHOUT_GPU() << "no usable GPU: the probe never has one"; }

}  // namespace
