// bench/harness/ps_chunk_rule.h: the chunk of scaling --ps_chunks=bdp, against the table written down before
// its runs (bench/results/plans/chunk_rule_claims_2026-12-07.txt), and the fan-in of each PS placement.
#include "bench/harness/ps_chunk_rule.h"

#include "bench/core/exchange.h"
#include "gtest/gtest.h"

namespace psring::bench {
namespace {

constexpr double k200Mbit = 25e6;  // bytes/s
constexpr int64_t kKiB = 1024;

TEST(PsChunkRuleTest, FanInCountsWorkersOffEachServersHost) {
  for (int n : {1, 2, 4, 8}) {
    EXPECT_EQ(PsFanIn(PluginFor(Exchange::kPsOne).Place(n, 2)), n) << n;
    EXPECT_EQ(PsFanIn(PluginFor(Exchange::kPsDedicated).Place(n, 2)), n) << n;
    // A worker's own shard is on its host: loopback, not the link.
    EXPECT_EQ(PsFanIn(PluginFor(Exchange::kPsColocated).Place(n, 2)), n - 1) << n;
  }
  EXPECT_EQ(PsFanIn(PluginFor(Exchange::kRing).Place(4, 2)), 0);
}

TEST(PsChunkRuleTest, TheClaimsTable) {
  struct Case {
    double latency_s;
    int fan_in;
    int64_t chunk;  // 0: the harness's 32 KiB
  };
  const Case cases[] = {
      {0.005, 2, 128 * kKiB},  {0.005, 4, 64 * kKiB},   {0.005, 8, 0},          {0.005, 1, 256 * kKiB},
      {0.005, 3, 64 * kKiB},   {0.005, 7, 0},           {0.020, 2, 512 * kKiB}, {0.020, 4, 256 * kKiB},
      {0.020, 8, 128 * kKiB},  {0.020, 1, 1024 * kKiB}, {0.020, 3, 256 * kKiB}, {0.020, 7, 128 * kKiB},
      {0.040, 2, 1024 * kKiB}, {0.040, 4, 512 * kKiB},  {0.040, 8, 256 * kKiB}, {0.040, 1, 2048 * kKiB},
      {0.040, 3, 512 * kKiB},  {0.040, 7, 256 * kKiB},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(BdpChunkBytes(k200Mbit, c.latency_s, c.fan_in), c.chunk)
        << c.latency_s << " s, fan-in " << c.fan_in;
  }
}

TEST(PsChunkRuleTest, KeepsTheHarnessesChunkOutsideItsDomain) {
  EXPECT_EQ(BdpChunkBytes(0, 0.040, 2), 0);                // unlimited link
  EXPECT_EQ(BdpChunkBytes(126e6, 0.040, 2), 0);            // faster than 1 Gbit/s: the harness's 1 MiB
  EXPECT_EQ(BdpChunkBytes(125e6, 0.040, 2), 2048 * kKiB);  // 1 Gbit/s: capped at 2 MiB
  EXPECT_EQ(BdpChunkBytes(k200Mbit, 0, 2), 0);             // no latency
  EXPECT_EQ(BdpChunkBytes(k200Mbit, 0.040, 0), 0);         // no server link crossed
  EXPECT_EQ(BdpChunkBytes(12.5e6, 0.001, 8), 0);  // 100 Mbit/s 1 ms N = 8: the incast case stays 32 KiB
}

// --ps_chunks=capped against chunks worked out by hand before its runs (bench/results/plans/
// chunk_cap_share_claims_2026-12-08.txt's W1-W6 and the conditions of the runs before): B (bytes/s), one-way
// L, fan-in F, the port's buffer P = B x 60 ms (the emulator's 50 ms queue and 10 ms burst); the cap is the
// largest power of two C with F (64 KiB + C) <= B 2L + P, the co-located gate B 2L / F >= 192 KiB.
TEST(PsChunkRuleTest, CappedKeepsTheBurstBelowThePort) {
  struct Case {
    double mbit;
    double latency_s;
    int fan_in;
    bool colocated;
    int64_t chunk;  // 0: the harness's 32 KiB
  };
  const Case cases[] = {
      {70, 0.050, 6, false, 128 * kKiB},   // W1: bdp 128 KiB under the cap (R 0.84)
      {50, 0.050, 6, false, 64 * kKiB},    // W5: bdp 128 KiB (R 1.18) capped at 64 KiB (R 0.79)
      {150, 0.040, 8, false, 256 * kKiB},  // P2: bdp 256 KiB at R 0.999
      {60, 0.050, 8, false, 64 * kKiB},    // 9.39's K2: 64 KiB (R 0.87), bdp 128 KiB (R 1.31)
      {40, 0.050, 5, false, 64 * kKiB},    // 9.39's K1: 64 KiB (R 0.82), bdp 128 KiB (R 1.23)
      {60, 0.050, 12, false, 0},           // 9.39's N = 12: even 64 KiB is over (R 1.31)
      {50, 0.048, 5, false, 64 * kKiB},    // 9.38's ps-1 at 50 Mbit/s: its fastest chunk
      {90, 0.050, 5, true, 256 * kKiB},    // W4: co-located, share 220 KiB: through the gate (R 0.91)
      {50, 0.048, 4, true, 0},   // 9.38's co-located at 50 Mbit/s N = 5, share 117 KiB: below the gate
      {110, 0.020, 4, true, 0},  // co-located, share 134 KiB: below the gate
      {200, 0.020, 7, true, 0},  // co-located 200 Mbit/s 20 ms N = 8, share 143 KiB: below it
      {200, 0.040, 2, false, 1024 * kKiB},  // bdp 1 MiB under the cap (R 0.64; 9.37's largest gains)
  };
  for (const Case& c : cases) {
    const double bytes_per_second = c.mbit * 1e6 / 8;
    EXPECT_EQ(
        CappedChunkBytes(bytes_per_second, c.latency_s, c.fan_in, bytes_per_second * 0.060, c.colocated),
        c.chunk)
        << c.mbit << " Mbit/s " << c.latency_s << " s, fan-in " << c.fan_in
        << (c.colocated ? " co-located" : "");
  }
  // No port known (real hosts), or outside bdp's domain: the harness's chunk.
  EXPECT_EQ(CappedChunkBytes(12.5e6, 0.040, 8, 0, false), 0);
  EXPECT_EQ(CappedChunkBytes(0, 0.040, 8, 1e6, false), 0);
  EXPECT_EQ(CappedChunkBytes(12.5e6, 0, 8, 1e6, false), 0);
}

TEST(PsChunkRuleTest, ParsesTheFlag) {
  EXPECT_EQ(ParsePsChunks("harness").value(), PsChunks::kHarness);
  EXPECT_EQ(ParsePsChunks("bdp").value(), PsChunks::kBdp);
  EXPECT_EQ(ParsePsChunks("capped").value(), PsChunks::kCapped);
  const absl::StatusOr<PsChunks> bad = ParsePsChunks("auto");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("use harness"), absl::string_view::npos) << bad.status();
}

}  // namespace
}  // namespace psring::bench
