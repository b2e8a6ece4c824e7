// The exchange plug-ins: placement, command lines, bus factor and cost terms (DESIGN.md's formulas).
#include "bench/core/exchange.h"
#include "bench/harness/launch.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/emulator/cluster.h"
#include "gtest/gtest.h"

namespace psring::bench {
namespace {

constexpr double kMiB = 1 << 20;

bool Has(const std::vector<std::string>& argv, const std::string& arg) {
  return std::find(argv.begin(), argv.end(), arg) != argv.end();
}

TEST(ExchangesTest, CostTermsMatchDesign) {
  const double s = 16 * kMiB;
  const ExchangePlugin& ring = PluginFor(Exchange::kRing);
  const ExchangePlugin& ps_one = PluginFor(Exchange::kPsOne);
  const ExchangePlugin& colocated = PluginFor(Exchange::kPsColocated);
  const ExchangePlugin& dedicated = PluginFor(Exchange::kPsDedicated);
  EXPECT_DOUBLE_EQ(ring.Terms(4, 0, s).messages, 6);
  // The PS: messages through the busiest server per step, N pushes in and N replies out (a co-located shard's
  // own worker is local).
  EXPECT_DOUBLE_EQ(ps_one.Terms(8, 1, s).messages, 16);
  EXPECT_DOUBLE_EQ(colocated.Terms(8, 8, s).messages, 14);
  EXPECT_DOUBLE_EQ(dedicated.Terms(8, 2, s).messages, 16);
  EXPECT_DOUBLE_EQ(ring.Terms(4, 0, s).link_bytes, 1.5 * s);
  EXPECT_DOUBLE_EQ(ring.Terms(1, 0, s).link_bytes, 0);
  EXPECT_DOUBLE_EQ(ps_one.Terms(8, 1, s).link_bytes, 8 * s);
  EXPECT_DOUBLE_EQ(colocated.Terms(8, 8, s).link_bytes, 1.75 * s);
  EXPECT_DOUBLE_EQ(dedicated.Terms(8, 2, s).link_bytes, 4 * s);
  EXPECT_DOUBLE_EQ(dedicated.Terms(1, 2, s).link_bytes, s);
}

// The overlap model charges each bucket with Terms of its own bytes. The PS slices every bucket over all K
// shards (ps/shard_layout.h), so a bucket's busiest link carries its 1/K share per worker, exactly as in a
// flat step, and the buckets of a step add up to the flat step's bytes. (Were a bucket held by one shard,
// its server link would carry N times the bucket: 8x, not 4x, below.)
TEST(ExchangesTest, PsBucketTermsSpreadEachBucketOverEveryServerLink) {
  const std::vector<double> buckets = {1 * kMiB, 6.5 * kMiB, 25 * kMiB, 3 * kMiB};
  double step = 0;
  for (double b : buckets) step += b;
  struct Setup {
    Exchange exchange;
    int nodes;
    int servers;
    double busiest_per_byte;  // busiest-link bytes per gradient byte
  };
  for (const Setup& setup : {Setup{Exchange::kPsDedicated, 8, 2, 4.0}, Setup{Exchange::kPsDedicated, 4, 4, 1.0},
                             Setup{Exchange::kPsDedicated, 2, 3, 1.0}, Setup{Exchange::kPsColocated, 8, 8, 1.75},
                             Setup{Exchange::kPsOne, 4, 1, 4.0}}) {
    const ExchangePlugin& ps = PluginFor(setup.exchange);
    SCOPED_TRACE(absl::StrCat(ps.name(), " N=", setup.nodes, " K=", setup.servers));
    double summed = 0;
    for (double b : buckets) {
      const CostTerms bucket = ps.Terms(setup.nodes, setup.servers, b);
      EXPECT_DOUBLE_EQ(bucket.link_bytes, setup.busiest_per_byte * b);
      summed += bucket.link_bytes;
    }
    EXPECT_DOUBLE_EQ(summed, ps.Terms(setup.nodes, setup.servers, step).link_bytes);
  }
}

TEST(ExchangesTest, BusFactorIsTheAllreduceOneForEveryExchange) {
  for (Exchange e : AllExchanges()) {
    EXPECT_DOUBLE_EQ(PluginFor(e).BusFactor(1), 0) << ExchangeName(e);
    EXPECT_DOUBLE_EQ(PluginFor(e).BusFactor(4), 1.5) << ExchangeName(e);
  }
}

TEST(ExchangesTest, Placement) {
  const Placement ring = PluginFor(Exchange::kRing).Place(3, 2);
  EXPECT_EQ(ring.worker_hosts, (std::vector<int>{0, 1, 2}));
  EXPECT_TRUE(ring.server_hosts.empty());
  EXPECT_EQ(PluginFor(Exchange::kPsOne).Place(3, 2).server_hosts, (std::vector<int>{3}));
  EXPECT_EQ(PluginFor(Exchange::kPsColocated).Place(3, 2).server_hosts, (std::vector<int>{0, 1, 2}));
  const Placement dedicated = PluginFor(Exchange::kPsDedicated).Place(3, 2);
  EXPECT_EQ(dedicated.server_hosts, (std::vector<int>{3, 4}));
  EXPECT_EQ(dedicated.HostsUsed(), 5);
  EXPECT_EQ(PluginFor(Exchange::kPsColocated).Servers(5, 2), 5);
  EXPECT_EQ(PluginFor(Exchange::kPsDedicated).Servers(5, 3), 3);
}

TEST(ExchangesTest, NamesRoundTrip) {
  for (Exchange e : AllExchanges()) {
    auto parsed = ParseExchange(ExchangeName(e));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, e);
  }
  auto unknown = ParseExchange("mesh");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("ps-dedicated"), std::string::npos) << unknown.status();
}

// Command lines on a loopback cluster (every host is 127.0.0.1, unlimited links: no slow-link PS flags).
TEST(ExchangesTest, CommandLines) {
  ClusterOptions options;
  options.force_loopback = true;
  absl::StatusOr<std::unique_ptr<EmulatedCluster>> cluster = EmulatedCluster::Create(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const BinaryPaths binaries = {"/bin/ring_worker", "/bin/ps_server", "/bin/ps_worker"};
  LaunchContext context;
  context.cluster = cluster->get();
  context.binaries = &binaries;
  context.placement = PluginFor(Exchange::kPsDedicated).Place(2, 2);
  context.server_ports = {7001, 7002};
  context.ps_mode = "async";
  context.server_args = {"--staleness=3"};

  const ExchangeLauncher& ps = LauncherFor(Exchange::kPsDedicated);
  const std::vector<std::string> server = ps.ServerArgv(context, 1);
  EXPECT_EQ(server.front(), "/bin/ps_server");
  for (const char* arg : {"--port=7002", "--workers=2", "--shard=1", "--num_shards=2", "--mode=async"}) {
    EXPECT_TRUE(Has(server, arg)) << arg;
  }
  EXPECT_EQ(server.back(), "--staleness=3");  // the user's flags come last and win
  EXPECT_FALSE(Has(server, "--chunk_bytes=32768"));
  EXPECT_EQ(ps.server_ready_text(), "listening on");
  const std::vector<std::string> worker = ps.WorkerArgv(context, 0);
  EXPECT_EQ(worker.front(), "/bin/ps_worker");
  EXPECT_TRUE(Has(worker, "--servers=127.0.0.1:7001,127.0.0.1:7002"));
  EXPECT_TRUE(Has(worker, "--shutdown_servers=true"));

  context.placement = PluginFor(Exchange::kRing).Place(2, 2);
  context.server_ports.clear();
  const ExchangeLauncher& ring = LauncherFor(Exchange::kRing);
  EXPECT_TRUE(ring.ServerArgv(context, 0).empty());
  EXPECT_EQ(ring.WorkerArgv(context, 1),
            (std::vector<std::string>{"/bin/ring_worker", "--iface_addr=127.0.0.1", "--insecure"}));
}

}  // namespace
}  // namespace psring::bench
