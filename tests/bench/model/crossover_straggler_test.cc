// The crossover map's straggler axis (bench/model/crossover.h StragglerLinkMap): a slow rank flips the winner
// from the ring to a PS that takes in the early pushes while the slow rank computes, as the closed forms say.
#include <string>

#include "bench/model/crossover.h"
#include "bench/report/crossover_svg.h"
#include "bench/model/schedule.h"
#include "gtest/gtest.h"
#include "tests/bench/model/synthetic_runs.h"

namespace psring::bench::model {
namespace {

// N = 4, S = 1 MB, 100 MB/s links, no latency or software cost, 100 ms of backward then a flat exchange:
//   ring           2(N-1)/N S at the full rate: x = 15 ms
//   ps-colocated   the same bytes at 3/4 of the rate: x = 20 ms, half of it (10 ms) pushes the servers take
//   in ps-1, ps-ded.  far behind (1 % efficiency)
// No straggler: ring 115 ms, ps-colocated 120 ms. One rank x 4: ring 415 ms; ps-colocated takes in the three
// early pushes while it waits, 400 + 20 - 3/4 x 10 = 412.5 ms.
proto::CostModelFile RingVersusColocated() {
  return ModelFileOf({{0, 1, 0, 0}, {0, 0.01, 0, 0}, {0, 0.75, 0, 0}, {0, 0.01, 0, 0}});
}

Conditions Base() {
  Conditions c;
  c.nodes = 4;
  c.servers = 2;
  return c;
}

TEST(StragglerCrossoverTest, ASlowRankFlipsTheWinner) {
  absl::StatusOr<StragglerCrossoverMap> map =
      StragglerLinkMap(RingVersusColocated(), FlatStep(0, 0.1, 1e6), Base(), {1, 4}, {1e8}, 0, 0);
  ASSERT_TRUE(map.ok()) << map.status();
  ASSERT_EQ(map->cells.size(), 2u);
  const CrossoverCell& even = map->At(0, 0);
  EXPECT_EQ(even.winner, 0);  // ring
  EXPECT_NEAR(even.step_s[0], 0.115, 1e-9);
  EXPECT_NEAR(even.step_s[2], 0.120, 1e-9);
  EXPECT_NEAR(even.margin, 0.120 / 0.115 - 1, 1e-9);
  const CrossoverCell& slow = map->At(1, 0);
  EXPECT_EQ(slow.winner, 2);  // ps-colocated
  EXPECT_NEAR(slow.step_s[0], 0.415, 1e-9);
  EXPECT_NEAR(slow.step_s[2], 0.4125, 1e-9);
  const std::string text = FormatStragglerMap(*map);
  EXPECT_NE(text.find("x4"), std::string::npos) << text;
  EXPECT_NE(text.find("ps-colocated +1%"), std::string::npos) << text;
}

TEST(StragglerCrossoverTest, BackupWorkersCompareTheQuorum) {
  // B = 1 with one rank x 4 and no noise: the quorum of the other three closes at the unstretched pace, less
  // the last push's ingest it does not wait for; the ring still waits for the slow rank.
  absl::StatusOr<StragglerCrossoverMap> map =
      StragglerLinkMap(RingVersusColocated(), FlatStep(0, 0.1, 1e6), Base(), {4}, {1e8}, 0, 1);
  ASSERT_TRUE(map.ok()) << map.status();
  const CrossoverCell& cell = map->At(0, 0);
  EXPECT_EQ(cell.winner, 2);
  EXPECT_NEAR(cell.step_s[0], 0.415, 1e-9);
  EXPECT_GE(cell.step_s[2], 0.120 - 0.010 / 4 - 1e-9);
  EXPECT_LE(cell.step_s[2], 0.120 + 1e-9);
}

TEST(StragglerCrossoverTest, CloseCellsAreUndeterminedAndTheSvgHasTheFactorAxis) {
  // A 10 % residual scatter: ring and ps-colocated, 0.6 % apart at factor 4, cannot be told apart there,
  // while the far slower ps-1 and ps-dedicated never win.
  proto::CostModelFile model = RingVersusColocated();
  for (proto::ExchangeModel& e : *model.mutable_exchanges()) e.set_residual_rel_sd(0.1);
  absl::StatusOr<StragglerCrossoverMap> map =
      StragglerLinkMap(model, FlatStep(0, 0.1, 1e6), Base(), {1, 4}, {1e8}, 0, 0);
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_FALSE(map->At(1, 0).determined);
  EXPECT_EQ(map->At(1, 0).winner, 2);  // the point prediction is kept
  const std::string text = FormatStragglerMap(*map);
  EXPECT_NE(text.find("(ps-colocated +1%)"), std::string::npos) << text;
  EXPECT_NE(text.find("cells undetermined"), std::string::npos) << text;
  const std::string svg = RenderCrossoverSvg(AsCrossoverMap(*map), "t", "s", {});
  EXPECT_NE(svg.find("one rank's compute factor"), std::string::npos) << svg.substr(0, 3000);
  EXPECT_NE(svg.find(">x4<"), std::string::npos);
  EXPECT_NE(svg.find("undetermined, point prediction ps-colocated"), std::string::npos);
}

TEST(StragglerCrossoverTest, Errors) {
  const proto::CostModelFile model = RingVersusColocated();
  const StepShape shape = FlatStep(0, 0.1, 1e6);
  EXPECT_EQ(StragglerLinkMap(model, shape, Base(), {0.5, 2}, {1e8}, 0, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(StragglerLinkMap(model, shape, Base(), {}, {1e8}, 0, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(StragglerLinkMap(model, shape, Base(), {2, 1.5}, {1e8}, 0, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(StragglerLinkMap(model, shape, Base(), {2}, {1e8}, -1, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(StragglerLinkMap(model, shape, Base(), {2}, {1e8}, 0, 4).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace psring::bench::model
