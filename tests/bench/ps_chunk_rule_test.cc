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

TEST(PsChunkRuleTest, ParsesTheFlag) {
  EXPECT_EQ(ParsePsChunks("harness").value(), false);
  EXPECT_EQ(ParsePsChunks("bdp").value(), true);
  const absl::StatusOr<bool> bad = ParsePsChunks("auto");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("use harness"), absl::string_view::npos) << bad.status();
}

}  // namespace
}  // namespace psring::bench
