#include "bench/model/project.h"

#include <cmath>

#include "gtest/gtest.h"
#include "tests/bench/model/synthetic_runs.h"

namespace psring::bench::model {
namespace {

// No latency, software or window terms: only links (and a CPU ceiling where given).
proto::CostModelFile LinksOnly(double ring_cpu = 0) {
  return ModelFileOf({{0, 1, 0, ring_cpu}, {0, 1, 0, 0}, {0, 0.5, 0, 0}, {0, 1, 0, 0}});
}

TEST(ProjectTest, FlatStepByHand) {
  // N = 4, K = 2, S = 8 MB flat after 0.1 + 0.2 s of compute, 10 MB/s: ring 12 MB -> 1.2 s; ps-1 32 MB ->
  // 3.2 s; ps-colocated 12 MB at efficiency 0.5 -> 2.4 s; ps-dedicated 16 MB -> 1.6 s.
  const Conditions target{4, 2, 0, 10e6, 0};
  absl::StatusOr<Projection> p = Project(LinksOnly(), target, FlatStep(0.1, 0.2, 8e6));
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->exchanges.size(), 4u);
  EXPECT_DOUBLE_EQ(p->exchanges[0].step.step_s, 0.3 + 1.2);
  EXPECT_DOUBLE_EQ(p->exchanges[1].step.step_s, 0.3 + 3.2);
  EXPECT_DOUBLE_EQ(p->exchanges[2].step.step_s, 0.3 + 2.4);
  EXPECT_DOUBLE_EQ(p->exchanges[3].step.step_s, 0.3 + 1.6);
  EXPECT_EQ(p->fastest, 0);
  EXPECT_DOUBLE_EQ(p->margin, 1.9 / 1.5 - 1);
  for (const ExchangeProjection& e : p->exchanges) EXPECT_EQ(e.step.bound, Bound::kLink);
}

TEST(ProjectTest, CpuCeilingCapsFastLinksAndSaysSo) {
  // 25 Gbit/s (3.125 GB/s) but the ring's host moves 0.5 GB/s: 12 MB take 24 ms, not 3.84 ms.
  Conditions target{4, 2, 0, 3.125e9, 5e-6};
  absl::StatusOr<Projection> p = Project(LinksOnly(0.5e9), target, FlatStep(0, 0, 8e6));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->exchanges[0].step.bound, Bound::kCpu);
  EXPECT_NEAR(p->exchanges[0].step.step_s, 6 * 5e-6 + 12e6 / 0.5e9, 1e-12);
  const std::string table = FormatProjection(LinksOnly(0.5e9), target, *p, "flat 8 MB");
  EXPECT_NE(table.find("PROJECTION (model, not measured)"), std::string::npos) << table;
  EXPECT_NE(table.find("measured on testhost (2026-12-01)"), std::string::npos) << table;
  EXPECT_NE(table.find("25 Gbit/s"), std::string::npos) << table;
  EXPECT_NE(table.find("5 us"), std::string::npos) << table;
  EXPECT_NE(table.find("cpu"), std::string::npos) << table;
  EXPECT_NE(table.find("0.50 GB/s"), std::string::npos) << table;
  // A host 10x faster: the link binds again, and the table names the speedup.
  target.cpu_speedup = 10;
  p = Project(LinksOnly(0.5e9), target, FlatStep(0, 0, 8e6));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->exchanges[0].step.bound, Bound::kLink);
  EXPECT_NE(FormatProjection(LinksOnly(0.5e9), target, *p, "x").find("cpu_speedup 10"), std::string::npos);
}

TEST(ProjectTest, AWinnerOnlyWhereTheIntervalsAllowIt) {
  // Same FlatStepByHand numbers: ring 1.5 s, ps-dedicated 1.9 s (27 % apart). With a 1 % scatter every
  // interval is narrow and the ring wins; with 20 % the ring's [1.08, 2.08] overlaps ps-dedicated's.
  const Conditions target{4, 2, 0, 10e6, 0};
  for (double scatter : {0.01, 0.20}) {
    proto::CostModelFile file = LinksOnly();
    for (proto::ExchangeModel& e : *file.mutable_exchanges()) e.set_residual_rel_sd(scatter);
    absl::StatusOr<Projection> p = Project(file, target, FlatStep(0.1, 0.2, 8e6));
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->fastest, 0);
    const ExchangeProjection& ring = p->exchanges[0];
    EXPECT_NEAR(ring.interval.hi, 1.5 * std::exp(kIntervalZ * scatter), 1e-9);
    EXPECT_EQ(p->determined, scatter < 0.1) << scatter;
    const std::string table = FormatProjection(file, target, *p, "flat 8 MB");
    EXPECT_EQ(table.find("UNDETERMINED") != std::string::npos, scatter > 0.1) << table;
  }
}

// With the target's port buffer given, a PS whose window burst into a server's port exceeds it is marked
// INCAST in the projection (its time unchanged); without one the table says ports are assumed lossless.
TEST(ProjectTest, MarksIncastOnlyWhereAPortBufferIsGivenAndExceeded) {
  // Windows of 64 KiB; N = 16: ps-1 and ps-dedicated burst 15 x 64 KiB = 983 kB, ps-colocated 14 x 64 KiB.
  const proto::CostModelFile file =
      ModelFileOf({{0, 1, 64 << 10, 0}, {0, 1, 64 << 10, 0}, {0, 1, 64 << 10, 0}, {0, 1, 64 << 10, 0}});
  Conditions target{16, 2, 0, 3.125e9, 5e-6};
  absl::StatusOr<Projection> lossless = Project(file, target, FlatStep(0, 0, 8e6));
  ASSERT_TRUE(lossless.ok()) << lossless.status();
  std::string table = FormatProjection(file, target, *lossless, "flat 8 MB");
  EXPECT_NE(table.find("switch ports assumed lossless"), std::string::npos) << table;
  EXPECT_EQ(table.find("INCAST"), std::string::npos) << table;
  target.port_buffer_bytes = 500e3;
  absl::StatusOr<Projection> p = Project(file, target, FlatStep(0, 0, 8e6));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_FALSE(p->exchanges[0].incast.marked());  // the ring
  EXPECT_NEAR(p->exchanges[1].incast.ratio(), 15.0 * (64 << 10) / 500e3, 1e-12);
  EXPECT_NEAR(p->exchanges[2].incast.ratio(), 14.0 * (64 << 10) / 500e3, 1e-12);
  for (size_t i = 0; i < p->exchanges.size(); ++i) {
    EXPECT_EQ(p->exchanges[i].step.step_s, lossless->exchanges[i].step.step_s) << i;
  }
  table = FormatProjection(file, target, *p, "flat 8 MB");
  EXPECT_NE(table.find("switch ports hold 500 kB"), std::string::npos) << table;
  EXPECT_NE(table.find("INCAST x2.0"), std::string::npos) << table;  // ps-1: 983 / 500
  EXPECT_NE(table.find("INCAST x1.8"), std::string::npos) << table;  // ps-colocated: 918 / 500
  // A deep port: nothing marked.
  target.port_buffer_bytes = 2e6;
  p = Project(file, target, FlatStep(0, 0, 8e6));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(FormatProjection(file, target, *p, "x").find("   INCAST x"), std::string::npos);  // a row's mark
}

TEST(ProjectTest, AddsTheIncastCostOnlyWhereTheRoundTripIsOneTheTermHolds) {
  proto::CostModelFile file =
      ModelFileOf({{0, 1, 64 << 10, 0}, {0, 1, 64 << 10, 0}, {0, 1, 64 << 10, 0}, {0, 1, 64 << 10, 0}});
  file.mutable_incast()->mutable_round_trips_per_cut()->set_value(1.5);
  file.mutable_incast()->set_multiplicative_decrease(0.7);
  file.mutable_incast()->set_min_round_trip_s(0.039);
  file.mutable_incast()->set_max_round_trip_s(0.156);
  // A data-center port: 25 Gbit/s, 5 us, 500 kB: marked, round trip 0.17 ms: no cost, and the header says
  // why.
  Conditions target{16, 2, 0, 3.125e9, 5e-6};
  target.port_buffer_bytes = 500e3;
  absl::StatusOr<Projection> p = Project(file, target, FlatStep(0, 0, 8e6));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(p->exchanges[1].incast.marked());
  EXPECT_EQ(p->exchanges[1].step.incast_s, 0);
  std::string table = FormatProjection(file, target, *p, "flat 8 MB");
  EXPECT_NE(table.find("below the 10 ms where the incast term holds"), std::string::npos) << table;
  // 20 ms one way: ps-1 pays 1.5 x ln(1.966) / ln(1 / 0.7) x (40 ms + 0.16 ms) = 0.1142 s, the ring nothing.
  target.latency_s = 0.020;
  p = Project(file, target, FlatStep(0, 0, 8e6));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->exchanges[0].step.incast_s, 0);
  EXPECT_NEAR(p->exchanges[1].step.incast_s, 0.11418, 1e-5);
  table = FormatProjection(file, target, *p, "flat 8 MB");
  EXPECT_NE(table.find("INCAST x2.0 +114.18 ms"), std::string::npos) << table;
  EXPECT_NE(table.find("fitted at 39-156 ms round trips"), std::string::npos) << table;
}

TEST(ProjectTest, Errors) {
  proto::CostModelFile missing = LinksOnly();
  missing.mutable_exchanges()->RemoveLast();
  EXPECT_EQ(Project(missing, {4, 2, 0, 1e6}, FlatStep(0, 0, 1)).status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(Project(LinksOnly(), {4, 0, 0, 1e6}, FlatStep(0, 0, 1)).ok());  // ps-dedicated without K
}

TEST(ProjectTest, Units) {
  EXPECT_EQ(FormatLinkRate(12.5e6), "100 Mbit/s");
  EXPECT_EQ(FormatLinkRate(50e9), "400 Gbit/s");
  EXPECT_EQ(FormatLinkRate(0), "unlimited");
  EXPECT_EQ(FormatLatency(1e-6), "1 us");
  EXPECT_EQ(FormatLatency(0.01), "10 ms");
}

// The PS's window round d (collective.h window_round_s) is the calibration host's: a row whose step is
// mostly d is marked ROUND, and where d decides the fastest the table names the one it would be without it.
// N = 2, K = 1, 25 Gbit/s (3.125 GB/s), 5 us, S = 8 MB flat; windows of 64 KiB, d = 1 ms. ps-1: 8 MB / 64 KiB
// = 122.07 windows of 2L + d = 1.01 ms: 123.3 ms against 16 MB / 3.125 GB/s = 5.12 ms on the link, so d is
// about 1 - 5.13 / 123.3 = 95.8 % of its step. The ring at efficiency 0.5 moves 8 MB in 5.12 ms and is
// fastest; with d = 0 the co-located PS (8 MB over the link at full rate, 2.56 ms; 61 windows of 10 us) is.
TEST(ProjectTest, MarksRowsTheWindowRoundDecidesAndNamesTheWinnerWithoutIt) {
  proto::CostModelFile file =
      ModelFileOf({{0, 0.5, 0, 0}, {0, 1, 65536, 0}, {0, 1, 65536, 0}, {0, 1, 65536, 0}});
  for (int i = 1; i < 4; ++i) {
    file.mutable_exchanges(i)->mutable_window_round_s()->set_value(1e-3);
    file.mutable_exchanges(i)->mutable_window_round_s()->set_std_error(1e-4);
  }
  const Conditions target{2, 1, 0, 3.125e9, 5e-6};
  absl::StatusOr<Projection> p = Project(file, target, FlatStep(0, 0, 8e6));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->exchanges[0].round_share, 0);  // the ring has no window round
  EXPECT_NEAR(p->exchanges[1].round_share, 1 - 5.12e-3 / (8e6 * 1.01e-3 / 65536), 1e-3);
  EXPECT_EQ(p->exchanges[1].step.bound, Bound::kWindow);
  EXPECT_EQ(p->fastest, 0);
  EXPECT_EQ(p->fastest_without_round, 2);
  std::string table = FormatProjection(file, target, *p, "flat 8 MB");
  EXPECT_NE(table.find("ROUND 96 %"), std::string::npos) << table;
  EXPECT_NE(table.find("(d = 0: ps-colocated fastest)"), std::string::npos) << table;
  EXPECT_NE(table.find("as fitted on testhost (2026-12-01): ps-1 1.00 ms"), std::string::npos) << table;
  EXPECT_NE(table.find("--window_round_us=US: the target's"), std::string::npos) << table;
  // A window-bound row is said to be gRPC's connection window under the servers' fixed receive windows.
  EXPECT_NE(table.find("# bound window: the PS held by its fitted window (ps-1 64 KiB"), std::string::npos)
      << table;
  EXPECT_NE(table.find("PERFORMANCE.md 9.36"), std::string::npos) << table;

  // The target's own round, 5 us: 122 windows of 15 us = 1.8 ms, below the link's 5.12 ms: no row marked, and
  // the co-located PS is fastest with or without it.
  absl::StatusOr<proto::CostModelFile> target_host = WithWindowRound(file, 5e-6, "--window_round_us=5");
  ASSERT_TRUE(target_host.ok()) << target_host.status();
  p = Project(*target_host, target, FlatStep(0, 0, 8e6));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->exchanges[1].round_share, 0);
  EXPECT_EQ(p->fastest, 2);
  EXPECT_EQ(p->fastest_without_round, 2);
  table = FormatProjection(*target_host, target, *p, "flat 8 MB");
  EXPECT_EQ(table.find("   ROUND "), std::string::npos) << table;
  EXPECT_EQ(table.find("(d = 0:"), std::string::npos) << table;
  EXPECT_NE(table.find("0.005 ms from --window_round_us=5"), std::string::npos) << table;
  for (const ExchangeProjection& e : p->exchanges) EXPECT_NE(e.step.bound, Bound::kWindow);
  EXPECT_EQ(table.find("# bound window"), std::string::npos) << table;  // no row bound by its window
}

}  // namespace
}  // namespace psring::bench::model
