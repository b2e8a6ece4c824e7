#include "trainer/straggler.h"

#include <vector>

#include "gtest/gtest.h"

namespace psring::trainer {
namespace {

TEST(ParseStragglerFlags, EmptyMeansNone) {
  absl::StatusOr<StragglerOptions> o = ParseStragglerFlags("", "", "");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_FALSE(o->any());
}

TEST(ParseStragglerFlags, AllThree) {
  absl::StatusOr<StragglerOptions> o = ParseStragglerFlags("3:2.5", "0.5:7", "10:200ms");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->slow_rank, 3);
  EXPECT_DOUBLE_EQ(o->factor, 2.5);
  EXPECT_DOUBLE_EQ(o->noise_sigma, 0.5);
  EXPECT_EQ(o->noise_seed, 7u);
  EXPECT_EQ(o->pause_every, 10);
  EXPECT_DOUBLE_EQ(o->pause_s, 0.2);
  EXPECT_TRUE(o->any());
}

TEST(ParseStragglerFlags, BadValuesNameTheFlag) {
  const std::vector<std::vector<const char*>> bad = {
      {"3", "", ""}, {"-1:2", "", ""}, {"1:0.5", "", ""}, {"1:x", "", ""}, {"1:2:3", "", ""},
      {"", "-0.1", ""}, {"", "4", ""}, {"", "0.5:x", ""}, {"", "", "10"}, {"", "", "0:1s"}, {"", "", "5:2"},
      {"", "", "5:90s"}};
  for (const auto& flags : bad) {
    absl::StatusOr<StragglerOptions> o = ParseStragglerFlags(flags[0], flags[1], flags[2]);
    EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument) << flags[0] << " " << flags[1] << " " << flags[2];
    const char* named = *flags[0] ? "--straggler" : (*flags[1] ? "--step_noise" : "--pause");
    EXPECT_NE(o.status().message().find(named), std::string::npos) << o.status();
  }
}

TEST(Straggler, OnlyTheSlowRankIsStretched) {
  StragglerOptions o;
  o.slow_rank = 1;
  o.factor = 4;
  Straggler slow(o, 1), other(o, 0);
  for (int step = 0; step < 5; ++step) {
    EXPECT_DOUBLE_EQ(slow.StepFactor(step), 4);
    EXPECT_DOUBLE_EQ(other.StepFactor(step), 1);
  }
  EXPECT_TRUE(other.active());  // every rank knows a straggler is configured
}

TEST(Straggler, NoiseIsSeededPerRankAndNeverFaster) {
  StragglerOptions o;
  o.noise_sigma = 1;
  o.noise_seed = 5;
  Straggler a(o, 2), b(o, 2), c(o, 3);
  int stretched = 0;
  bool differs = false;
  for (int step = 0; step < 200; ++step) {
    const double fa = a.StepFactor(step);
    EXPECT_DOUBLE_EQ(fa, b.StepFactor(step));  // same seed and rank: the same draws
    const double fc = c.StepFactor(step);
    differs |= fa != fc;
    EXPECT_GE(fa, 1);
    stretched += fa > 1;
  }
  EXPECT_TRUE(differs);
  // max(1, exp(Z)) > 1 exactly when Z > 0: about half the steps (binomial, 200 draws: 70..130 is > 4 sigma).
  EXPECT_GT(stretched, 70);
  EXPECT_LT(stretched, 130);
}

TEST(Straggler, PausesEveryNthStep) {
  StragglerOptions o;
  o.pause_every = 3;
  o.pause_s = 0.25;
  Straggler s(o, 0);
  const std::vector<double> expected = {0, 0, 0, 0.25, 0, 0, 0.25};
  for (int step = 0; step < static_cast<int>(expected.size()); ++step) {
    EXPECT_DOUBLE_EQ(s.PauseSeconds(step), expected[step]) << step;
  }
}

}  // namespace
}  // namespace psring::trainer
