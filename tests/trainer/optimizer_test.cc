// The out-of-place SGD step (the parameter server's) against the in-place one (the trainer's): bit for bit,
// at lengths that leave vector-loop remainders, with values that exercise rounding, and without touching its
// inputs.
#include "trainer/optimizer.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace psring::trainer {
namespace {

std::vector<float> Random(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(OptimizerTest, OutOfPlaceStepIsBitIdenticalToInPlace) {
  const SgdOptions options{0.05f, 0.9f, 3e-4f};
  for (size_t n : {1u, 7u, 16u, 33u, 1000u, 4099u}) {
    const std::vector<float> grads = Random(n, 1, 1.0f);
    const std::vector<float> params = Random(n, 2, 0.3f);
    const std::vector<float> momentum = Random(n, 3, 0.1f);
    std::vector<float> p = params, v = momentum;
    SgdMomentumStep(options, grads.data(), p.data(), v.data(), n);
    std::vector<float> p_out(n, std::nanf("")), v_out(n, std::nanf(""));
    const std::vector<float> params_in = params, momentum_in = momentum;
    SgdMomentumStepInto(options, grads.data(), params_in.data(), momentum_in.data(), p_out.data(), v_out.data(), n);
    EXPECT_TRUE(SameBits(p_out, p)) << "n = " << n;
    EXPECT_TRUE(SameBits(v_out, v)) << "n = " << n;
    EXPECT_TRUE(SameBits(params_in, params)) << "the inputs must stay as they were, n = " << n;
    EXPECT_TRUE(SameBits(momentum_in, momentum)) << "n = " << n;
    EXPECT_FALSE(SameBits(p_out, params)) << "the step must move the parameters, n = " << n;
  }
}

}  // namespace
}  // namespace psring::trainer
