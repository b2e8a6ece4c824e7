#include "bench/model/crossover.h"

#include <algorithm>

#include "bench/model/model_file.h"
#include "bench/report/crossover_svg.h"
#include "gtest/gtest.h"
#include "tests/bench/model/synthetic_runs.h"
#include "tests/bench/svg_checks.h"

namespace psring::bench::model {
namespace {

// Ring against a co-located PS at half the link's efficiency; ps-1 and ps-dedicated far behind. At N = 8 and
// S = 1 MB the ring pays 14 hops and 1.75 MB over the link, the PS 2 hops and 1.75 MB at half the rate: the
// PS wins once 12 L > 1.75 MB / B, i.e. at high latency on fast links.
proto::CostModelFile RingVersusPs() {
  return ModelFileOf({{0, 1, 0, 0}, {0, 0.01, 0, 0}, {0, 0.5, 0, 0}, {0, 0.01, 0, 0}});
}

TEST(CrossoverTest, LinkLatencyMapFindsBothRegions) {
  absl::StatusOr<std::vector<double>> links = LogSpaced(1e9 / 8, 400e9 / 8, 12);
  absl::StatusOr<std::vector<double>> latencies = LogSpaced(1e-6, 1e-2, 9);
  ASSERT_TRUE(links.ok() && latencies.ok());
  EXPECT_DOUBLE_EQ(links->back(), 50e9);
  absl::StatusOr<CrossoverMap> map =
      LinkLatencyMap(RingVersusPs(), FlatStep(0, 0, 1e6), {8, 2}, *links, *latencies);
  ASSERT_TRUE(map.ok()) << map.status();
  ASSERT_EQ(map->cells.size(), 12u * 9u);
  // 400 Gbit/s: 1.75 MB / B = 35 us, so the PS wins above L = 2.9 us.
  EXPECT_EQ(map->At(11, 0).winner, 0);  // 1 us: ring
  EXPECT_EQ(map->At(11, 8).winner, 2);  // 10 ms: ps-colocated
  EXPECT_EQ(map->At(11, 8).winner_bound, Bound::kLatency);
  // 1 Gbit/s, 1 us: the ring by nearly 2x (bandwidth).
  EXPECT_EQ(map->At(0, 0).winner, 0);
  EXPECT_NEAR(map->At(0, 0).margin, 1, 0.01);
  EXPECT_EQ(map->At(0, 0).step_s.size(), 4u);
}

TEST(CrossoverTest, NodesLinkMap) {
  absl::StatusOr<CrossoverMap> map =
      NodesLinkMap(RingVersusPs(), FlatStep(0, 0, 1e6), {8, 2, 0, 0, 1e-3}, {2, 4, 8, 16, 64}, {12.5e6, 125e6, 3.125e9});
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_EQ(map->cells.size(), 15u);
  // N = 2: the ring's 2 hops equal the PS's; the ring wins on bandwidth. N = 64 at 25 Gbit/s: latency.
  EXPECT_EQ(map->At(0, 2).winner, 0);
  EXPECT_EQ(map->At(4, 2).winner, 2);
}

TEST(CrossoverTest, Errors) {
  EXPECT_FALSE(LogSpaced(0, 1, 5).ok());
  EXPECT_FALSE(LogSpaced(1, 10, 1).ok());
  EXPECT_FALSE(LinkLatencyMap(RingVersusPs(), FlatStep(0, 0, 1), {8, 2}, {}, {1e-3}).ok());
  EXPECT_FALSE(LinkLatencyMap(RingVersusPs(), FlatStep(0, 0, 1), {8, 2}, {2, 1}, {1e-3}).ok());
}

TEST(CrossoverTest, SvgHasCellsLegendTitleAndPointsInside) {
  absl::StatusOr<CrossoverMap> map = LinkLatencyMap(RingVersusPs(), FlatStep(0, 0, 1e6), {8, 2},
                                                    *LogSpaced(1e9 / 8, 400e9 / 8, 12), *LogSpaced(1e-6, 1e-2, 9));
  ASSERT_TRUE(map.ok()) << map.status();
  const std::vector<MeasuredPoint> measured = {
      {10e9 / 8, 1e-3, Topology::kPsColocated},  // inside
      {100e6 / 8, 5e-3, Topology::kRing},        // 100 Mbit/s: left of the map
      {25e9 / 8, 1, Topology::kRing},            // 1 s: above it
  };
  const std::string svg = RenderCrossoverSvg(*map,
                                             "resnet50 & co, N = 8", "model of testhost, 2026-12-01", measured);
  std::string why;
  EXPECT_TRUE(WellFormed(svg, &why)) << why;
  EXPECT_EQ(Count(svg, "class=\"cell\""), 12 * 9);
  EXPECT_EQ(Count(svg, "class=\"point\""), 1);
  EXPECT_NE(svg.find("MODEL, not measured: resnet50 &amp; co, N = 8"), std::string::npos);
  for (const char* name : {"ring", "ps-1", "ps-colocated", "ps-dedicated", "tie (within 2 %) or undetermined"}) {
    EXPECT_NE(svg.find(std::string(">") + name + "</text>"), std::string::npos) << name;
  }
  EXPECT_NE(svg.find(">400 Gbit/s</text>"), std::string::npos);
  EXPECT_NE(svg.find(">10 ms</text>"), std::string::npos);
  EXPECT_NE(svg.find(">1 us</text>"), std::string::npos);
  // Exchanges, tie, and the hatching of cells beyond the calibration.
  EXPECT_EQ(Count(svg, "class=\"legend\""), 6);
  EXPECT_EQ(Count(svg, "class=\"extrapolated\""), 0);  // the file records no coverage: nothing hatched
}

// Calibrated on 1-10 Gbit/s links with up to 1 ms at N = 8 and 1 MB: a cell more than 2x beyond (over
// 20 Gbit/s or 2 ms) carries its factor and is hatched; the others are not.
TEST(CrossoverTest, CellsWhoseIntervalsOverlapAreUndeterminedAndGrey) {
  // Exact parameters but a 30 % residual scatter: every exchange's 90 % interval is about +-64 %, so a cell is
  // decided only where the fastest one is far ahead.
  proto::CostModelFile file = ModelFileOf({TruthFor(Topology::kRing), TruthFor(Topology::kPsOne),
                                           TruthFor(Topology::kPsColocated), TruthFor(Topology::kPsDedicated)});
  for (proto::ExchangeModel& e : *file.mutable_exchanges()) e.set_residual_rel_sd(0.3);
  absl::StatusOr<std::vector<double>> links = LogSpaced(1e9 / 8, 400e9 / 8, 6);
  absl::StatusOr<std::vector<double>> latencies = LogSpaced(1e-6, 1e-2, 5);
  ASSERT_TRUE(links.ok() && latencies.ok());
  absl::StatusOr<CrossoverMap> map = LinkLatencyMap(file, FlatStep(0, 0, 100e6), {8, 2}, *links, *latencies);
  ASSERT_TRUE(map.ok()) << map.status();
  int undetermined = 0;
  for (const CrossoverCell& cell : map->cells) undetermined += !cell.determined;
  EXPECT_GT(undetermined, 0);
  const std::string svg = RenderCrossoverSvg(*map, "t", "s", {});
  EXPECT_NE(svg.find("undetermined, point prediction"), std::string::npos);
  // Without scatter (and no parameter errors recorded) every cell is decided.
  for (proto::ExchangeModel& e : *file.mutable_exchanges()) e.set_residual_rel_sd(0);
  map = LinkLatencyMap(file, FlatStep(0, 0, 100e6), {8, 2}, *links, *latencies);
  ASSERT_TRUE(map.ok()) << map.status();
  for (const CrossoverCell& cell : map->cells) EXPECT_TRUE(cell.determined || cell.margin == 0);
}

TEST(CrossoverTest, CellsBeyondTheCalibrationAreHatched) {
  proto::CostModelFile model = RingVersusPs();
  for (proto::ExchangeModel& e : *model.mutable_exchanges()) {
    proto::Coverage* c = e.mutable_coverage();
    c->add_nodes(8);
    for (double b : {125e6, 1.25e9}) c->add_link_bytes_per_second(b);
    for (double l : {0.0, 1e-3}) c->add_latency_s(l);
    c->add_bytes(1e6);
  }
  const std::vector<double> links = *LogSpaced(1e9 / 8, 400e9 / 8, 12);
  const std::vector<double> latencies = *LogSpaced(1e-6, 1e-2, 9);
  absl::StatusOr<CrossoverMap> map = LinkLatencyMap(model, FlatStep(0, 0, 1e6), {8, 2}, links, latencies);
  ASSERT_TRUE(map.ok()) << map.status();
  int beyond = 0;
  for (size_t iy = 0; iy < latencies.size(); ++iy) {
    for (size_t ix = 0; ix < links.size(); ++ix) {
      const double want = std::max({1.0, links[ix] / 1.25e9, latencies[iy] / 1e-3});
      EXPECT_NEAR(map->At(ix, iy).extrapolation, want, 1e-9 * want) << ix << "," << iy;
      beyond += want > kExtrapolationMarkFactor;
    }
  }
  EXPECT_GT(beyond, 0);
  EXPECT_LT(beyond, static_cast<int>(links.size() * latencies.size()));
  const std::string svg = RenderCrossoverSvg(*map, "ring vs ps", "model of testhost", {});
  std::string why;
  EXPECT_TRUE(WellFormed(svg, &why)) << why;
  EXPECT_EQ(Count(svg, "class=\"extrapolated\""), beyond);
  EXPECT_NE(svg.find("hatched: &gt; 2x outside calibration"), std::string::npos);
}

// A cell whose winner is a PS marked INCAST at the base's port buffer is flagged and outlined in the SVG;
// without a buffer none is.
TEST(CrossoverTest, CellsWonByAPsBeyondThePortBufferAreOutlined) {
  const std::vector<double> links = *LogSpaced(1e9 / 8, 400e9 / 8, 12);
  const std::vector<double> latencies = *LogSpaced(1e-6, 1e-2, 9);
  // No windows: the co-located PS's streams burst their whole flow, S / N = 125 kB, 6 of them beyond one.
  Conditions base{8, 2};
  absl::StatusOr<CrossoverMap> plain =
      LinkLatencyMap(RingVersusPs(), FlatStep(0, 0, 1e6), base, links, latencies);
  ASSERT_TRUE(plain.ok()) << plain.status();
  for (const CrossoverCell& cell : plain->cells) EXPECT_FALSE(cell.incast);
  base.port_buffer_bytes = 500e3;  // 750 kB of burst: x1.5
  absl::StatusOr<CrossoverMap> map =
      LinkLatencyMap(RingVersusPs(), FlatStep(0, 0, 1e6), base, links, latencies);
  ASSERT_TRUE(map.ok()) << map.status();
  int ps_wins = 0, incast = 0;
  for (const CrossoverCell& cell : map->cells) {
    ps_wins += cell.winner == 2;
    incast += cell.incast;
    EXPECT_EQ(cell.incast, cell.winner == 2);
  }
  EXPECT_GT(ps_wins, 0);
  EXPECT_EQ(incast, ps_wins);
  const std::string svg = RenderCrossoverSvg(*map, "ring vs ps", "model of testhost", {});
  std::string why;
  EXPECT_TRUE(WellFormed(svg, &why)) << why;
  EXPECT_EQ(Count(svg, "class=\"incast\""), incast);
  EXPECT_NE(svg.find("red outline"), std::string::npos);
  EXPECT_EQ(RenderCrossoverSvg(*plain, "t", "s", {}).find("red outline"), std::string::npos);
}

// Cells whose fastest changes with every PS window round at 0 are the window round's to decide: counted per
// cell and dotted in the SVG. A co-located PS with 64 KiB windows and d = 1 ms against a ring at half the
// link's rate: where the link is fast and the latency short the ring wins only because of d.
TEST(CrossoverTest, CellsTheWindowRoundDecidesAreDotted) {
  proto::CostModelFile file =
      ModelFileOf({{0, 0.5, 0, 0}, {0, 0.01, 0, 0}, {0, 1, 65536, 0}, {0, 0.01, 0, 0}});
  const std::vector<double> links = *LogSpaced(1e9 / 8, 400e9 / 8, 12);
  const std::vector<double> latencies = *LogSpaced(1e-6, 1e-2, 9);
  absl::StatusOr<CrossoverMap> plain = LinkLatencyMap(file, FlatStep(0, 0, 8e6), {2, 1}, links, latencies);
  ASSERT_TRUE(plain.ok()) << plain.status();
  for (const CrossoverCell& cell : plain->cells)
    EXPECT_FALSE(cell.round_decides);  // no term, nothing decided
  file.mutable_exchanges(2)->mutable_window_round_s()->set_value(1e-3);
  absl::StatusOr<CrossoverMap> map = LinkLatencyMap(file, FlatStep(0, 0, 8e6), {2, 1}, links, latencies);
  ASSERT_TRUE(map.ok()) << map.status();
  int decided = 0;
  for (size_t i = 0; i < map->cells.size(); ++i) {
    decided += map->cells[i].round_decides;
    // Decided by d: the ring wins with it, the co-located PS without it (as in the map without the term).
    if (map->cells[i].round_decides) {
      EXPECT_EQ(map->cells[i].winner, 0);
      EXPECT_EQ(plain->cells[i].winner, 2);
    }
  }
  EXPECT_GT(decided, 0);
  EXPECT_LT(decided, static_cast<int>(map->cells.size()));
  const std::string svg = RenderCrossoverSvg(*map, "ring vs ps", "model of testhost", {});
  std::string why;
  EXPECT_TRUE(WellFormed(svg, &why)) << why;
  EXPECT_EQ(Count(svg, "class=\"round\""), decided);
  EXPECT_NE(svg.find("dot: the PS window round decides"), std::string::npos);
  EXPECT_EQ(RenderCrossoverSvg(*plain, "t", "s", {}).find("window round decides"), std::string::npos);
}

}  // namespace
}  // namespace psring::bench::model
