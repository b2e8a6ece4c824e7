#include "bench/harness/launch.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace psring::bench {
namespace {

// PS chunks and push window on slow links. A synchronous step pays about 2*N*chunk/B to fill and drain its
// pipeline (the first range goes back only once every worker pushed it), and N workers pushing into one
// server link (incast) keep up to N * push window in flight: with 1 MiB windows (the default then, 8 MiB
// now) that is 8 MiB against the 625 KB a 50 ms queue holds at 100 Mbit/s, so tail drops and retransmission
// timeouts stall the whole step. Measured at N = 8, S = 16 MiB on 100 Mbit/s (N*S/B = 10.74 s, 3-step
// runs): chunk 128 KiB + window 1 MiB 12.0-12.8 s (965-3496 segments retransmitted), 64 KiB + 1 MiB
// 11.8-12.0 s, 64 KiB + 128-256 KiB 11.6-11.7 s, 32 KiB + 128 KiB 11.38 s (90 segments); the harness with
// 32 KiB + 128 KiB: 1.05-1.06 x N*S/B for N = 1, 2, 4, 8 (bench/PERFORMANCE.md 7.1). Faster (or unlimited)
// links keep the defaults, where fewer, larger messages cost less CPU. Flags in --worker_args/--server_args come later and win.
// The workers keep gRPC's adaptive HTTP/2 receive window: a fixed 256 KiB one (--receive_window_bytes) slows
// every exchange whose connections each carry a large share of a link (training the MLP, ps-1 at N = 1: 0.25
// against 0.17 s per step).
// Where the link's round trip is long, the push window must not be what paces a worker. Each worker's push
// is held by gRPC's 64 KiB HTTP/2 connection window (about 64-75 KiB per round trip, bench/PERFORMANCE.md
// 9.9), and the push window loops through the reply, which waits for every worker's push of that range: a
// window of less than a couple of round trips' pushes ties every worker to the slowest of the N each round,
// and the step grows with N. Measured at 150 Mbit/s, 40 ms, ps-1, 4 MiB: N = 6 took 4.98-5.27 s with 128
// KiB and 4.57-4.76 s with 4 MiB (N = 2: 4.51-4.53 s); neither --max_lead_bytes=0 (4.96-5.23 s) nor a 10 ms
// link queue (5.11-5.28 s) changed it. So the window covers twice the link's bandwidth-delay product
// (B x 2L) where that is more than 128 KiB (at 100 Mbit/s: from 5 ms one-way on); the in-flight bytes stay
// bounded by the HTTP/2 window, so this adds no incast.
constexpr double kSlowLinkBytesPerSecond = 125e6;     // 1 Gbit/s
constexpr int kSlowLinkChunkBytes = 32 << 10;         // PS --chunk_bytes there
constexpr int64_t kSlowLinkPushWindowBytes = 128 << 10;  // PS worker --push_window_bytes there, at least
constexpr double kPushWindowRoundTrips = 2;           // ... and this many of the link's bandwidth-delay products

bool SlowLink(const LaunchContext& c) {
  const double link = c.cluster->link_bytes_per_second();
  return link > 0 && link <= kSlowLinkBytesPerSecond;
}

int64_t SlowLinkPushWindowBytes(const LaunchContext& c) {
  const double bdp = c.cluster->link_bytes_per_second() * 2 * c.cluster->latency_seconds();
  return std::max<int64_t>(kSlowLinkPushWindowBytes, static_cast<int64_t>(std::ceil(kPushWindowRoundTrips * bdp)));
}

// A ring allreduce over TCP: each rank binds its host's address.
class RingLauncher final : public ExchangeLauncher {
 public:
  std::vector<std::string> WorkerArgv(const LaunchContext& c, int rank) const override {
    // --insecure: the bench's hosts are its own (namespaces or a cluster it was given); a token, when the
    // environment has one, still applies.
    return {c.binaries->ring_worker,
            absl::StrCat("--iface_addr=", c.cluster->HostAddress(c.placement.worker_hosts[rank])), "--insecure"};
  }
};

// The sharded parameter server, wherever its shards are placed: the programs and flags every placement shares.
class PsLauncher final : public ExchangeLauncher {
 public:
  std::vector<std::string> ServerArgv(const LaunchContext& c, int shard) const override {
    const std::string& address = c.cluster->HostAddress(c.placement.server_hosts[shard]);
    std::vector<std::string> argv = {c.binaries->ps_server,
                                     absl::StrCat("--port=", c.server_ports[shard]),
                                     absl::StrCat("--bind_addr=", address),
                                     absl::StrCat("--workers=", c.nodes()),
                                     absl::StrCat("--shard=", shard),
                                     absl::StrCat("--num_shards=", c.placement.server_hosts.size()),
                                     absl::StrCat("--mode=", c.ps_mode), "--insecure"};
    if (SlowLink(c)) argv.push_back(absl::StrCat("--chunk_bytes=", kSlowLinkChunkBytes));
    argv.insert(argv.end(), c.server_args.begin(), c.server_args.end());
    return argv;
  }

  // The server logs "... listening on ADDR:PORT" once it serves.
  std::string server_ready_text() const override { return "listening on"; }

  std::vector<std::string> WorkerArgv(const LaunchContext& c, int /*rank*/) const override {
    std::vector<std::string> servers;
    for (size_t k = 0; k < c.placement.server_hosts.size(); ++k) {
      servers.push_back(absl::StrCat(c.cluster->HostAddress(c.placement.server_hosts[k]), ":", c.server_ports[k]));
    }
    std::vector<std::string> argv = {c.binaries->ps_worker, absl::StrCat("--servers=", absl::StrJoin(servers, ",")),
                                     "--shutdown_servers=true", "--insecure"};
    if (SlowLink(c)) {
      argv.push_back(absl::StrCat("--chunk_bytes=", kSlowLinkChunkBytes));
      argv.push_back(absl::StrCat("--push_window_bytes=", SlowLinkPushWindowBytes(c)));
    }
    return argv;
  }
};

}  // namespace

std::vector<std::string> ExchangeLauncher::ServerArgv(const LaunchContext& /*context*/, int /*shard*/) const {
  return {};
}

const ExchangeLauncher& LauncherFor(Exchange exchange) {
  // Stateless and never destroyed, like the exchanges' registry.
  static const ExchangeLauncher* const ring = new RingLauncher;
  static const ExchangeLauncher* const ps = new PsLauncher;
  return PluginFor(exchange).family() == Family::kRing ? *ring : *ps;
}

}  // namespace psring::bench
