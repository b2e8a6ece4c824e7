// bench/model/link_share.h: the share of the exchange time the network alone keeps the busiest link busy.
#include "bench/model/link_share.h"

#include "gtest/gtest.h"
#include "tests/bench/model/synthetic_runs.h"

namespace psring::bench::model {
namespace {

TEST(LinkShare, TheWireAloneFillsTheLink) {
  // No window, no latency: the link is the only bound, busy the whole exchange.
  const proto::CostModelFile file = ModelFileOf({{1e-3, 0.9, 0, 1e6}, {1e-3, 0.9, 0, 1e6}, {0, 0.9, 0, 0}, {0, 0.9, 0, 0}});
  EXPECT_NEAR(NetworkLinkShareAt(file, Topology::kRing, {4, 2, 16e6, 12.5e6, 0}), 1, 1e-9);
  // The CPU ceiling and software cost are the box's, not the network's: they do not lower the share.
  EXPECT_NEAR(NetworkLinkShareAt(file, Topology::kPsOne, {4, 2, 16e6, 12.5e6, 0}), 1, 1e-9);
}

TEST(LinkShare, AWindowAtHighLatencyLeavesTheLinkIdle) {
  // 128 KiB in flight per flow over a 40 ms round trip carries 3.3 MB/s against a 18.75 MB/s link; ps-1 at N = 2
  // has two flows into its server's link.
  const proto::CostModelFile file = ModelFileOf({{0, 1, 128 << 10, 0}, {0, 1, 128 << 10, 0}, {0, 1, 128 << 10, 0},
                                                 {0, 1, 128 << 10, 0}});
  const Conditions far{2, 2, 4e6, 150e6 / 8, 20e-3};
  const double share = NetworkLinkShareAt(file, Topology::kPsOne, far);
  EXPECT_GT(share, 0.01);
  EXPECT_LT(share, 0.5);
  // With eight workers the server's link carries eight windows at once: the link, not the window, binds.
  EXPECT_GT(NetworkLinkShareAt(file, Topology::kPsOne, {8, 2, 4e6, 150e6 / 8, 20e-3}), 0.8);
  // Closer, the same window fills more of the link.
  const Conditions near{2, 2, 4e6, 150e6 / 8, 1e-3};
  EXPECT_GT(NetworkLinkShareAt(file, Topology::kPsOne, near), share);
  // The run form: a record's exchange, N and S at the cluster's link and latency.
  RunRecord run;
  run.exchange = Exchange::kPsOne;
  run.nodes = 2;
  run.bytes = 4000000;
  EXPECT_NEAR(NetworkLinkShareOf(file, 2)(run, 150e6 / 8, 20e-3), share, 1e-12);
}

TEST(LinkShare, NothingToJudgeIsOne) {
  const proto::CostModelFile file = ModelFileOf({{0, 1, 0, 0}, {0, 1, 0, 0}, {0, 1, 0, 0}, {0, 1, 0, 0}});
  EXPECT_EQ(NetworkLinkShareAt(file, Topology::kRing, {4, 2, 16e6, 0, 0}), 1);      // unlimited link
  EXPECT_EQ(NetworkLinkShareAt(file, Topology::kRing, {4, 2, 0, 12.5e6, 1e-3}), 1);  // nothing moves
  EXPECT_EQ(NetworkLinkShareAt(proto::CostModelFile(), Topology::kRing, {4, 2, 1e6, 12.5e6, 0}), 1);
}

}  // namespace
}  // namespace psring::bench::model
