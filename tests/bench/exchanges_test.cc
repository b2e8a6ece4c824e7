// The exchange plug-ins: placement, command lines, bus factor and cost terms (DESIGN.md's formulas).
#include "bench/core/exchange.h"
#include "bench/harness/launch.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
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

// A cluster that only has a link rate and a latency: what the launchers read to pick the slow-link PS flags.
class ShapedLinks final : public Cluster {
 public:
  ShapedLinks(double bytes_per_second, double latency_s) : rate_(bytes_per_second), latency_(latency_s) {}
  int hosts() const override { return 8; }
  bool emulated() const override { return true; }
  const std::string& fallback_reason() const override { return none_; }
  std::string Describe() const override { return "shaped links"; }
  double box_cores() const override { return 2; }
  std::string HostAddress(int host) const override { return absl::StrCat("198.18.0.", host + 1); }
  std::vector<std::string> Command(int, const std::vector<std::string>& argv) const override { return argv; }
  double link_bytes_per_second() const override { return rate_; }
  double latency_seconds() const override { return latency_; }
  const std::string& latency_method() const override { return none_; }
  absl::StatusOr<std::vector<std::pair<int64_t, int64_t>>> AllHostLinkBytes() const override {
    return absl::UnimplementedError("no counters");
  }
  absl::StatusOr<DelayCounters> ReadDelayCounters() override { return absl::UnimplementedError("none"); }
  absl::StatusOr<double> MeasureStream(int, int, size_t) const override { return absl::UnimplementedError("none"); }
  absl::StatusOr<double> MeasureRtt(int, int, int) const override { return absl::UnimplementedError("none"); }
  absl::Status Destroy() override { return absl::OkStatus(); }

 private:
  double rate_, latency_;
  std::string none_;
};

// Slow links get 32 KiB PS chunks and a push window of at least 128 KiB that covers twice the link's
// bandwidth-delay product (bench/harness/launch.cc); fast links keep the binaries' defaults.
TEST(ExchangesTest, SlowLinkPushWindowCoversTwiceTheBandwidthDelayProduct) {
  const BinaryPaths binaries = {"/bin/ring_worker", "/bin/ps_server", "/bin/ps_worker"};
  const auto worker_flags = [&](double rate, double latency) {
    ShapedLinks links(rate, latency);
    LaunchContext context;
    context.cluster = &links;
    context.binaries = &binaries;
    context.placement = PluginFor(Exchange::kPsOne).Place(4, 1);
    context.server_ports = {7001};
    return LauncherFor(Exchange::kPsOne).WorkerArgv(context, 0);
  };
  // 100 Mbit/s, 1 ms: B x 2L = 25 KB, so the floor.
  std::vector<std::string> argv = worker_flags(12.5e6, 0.001);
  EXPECT_TRUE(Has(argv, "--chunk_bytes=32768"));
  EXPECT_TRUE(Has(argv, "--push_window_bytes=131072"));
  // 150 Mbit/s, 40 ms: 2 x 18.75 MB/s x 80 ms = 3 MB.
  argv = worker_flags(18.75e6, 0.040);
  EXPECT_TRUE(Has(argv, "--chunk_bytes=32768"));
  EXPECT_TRUE(Has(argv, "--push_window_bytes=3000000"));
  // 100 Mbit/s, 5 ms: 2 x 125 KB = 250 KB.
  EXPECT_TRUE(Has(worker_flags(12.5e6, 0.005), "--push_window_bytes=250000"));
  // 10 Gbit/s: no slow-link flags at all.
  argv = worker_flags(1.25e9, 0.040);
  for (const std::string& arg : argv) {
    EXPECT_FALSE(absl::StartsWith(arg, "--push_window_bytes") || absl::StartsWith(arg, "--chunk_bytes")) << arg;
  }
}

}  // namespace
}  // namespace psring::bench
