#include "bench/exchanges.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bench/report.h"

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
constexpr double kSlowLinkBytesPerSecond = 125e6;     // 1 Gbit/s
constexpr int kSlowLinkChunkBytes = 32 << 10;         // PS --chunk_bytes there
constexpr int kSlowLinkPushWindowBytes = 128 << 10;  // PS worker --push_window_bytes there

bool SlowLink(const LaunchContext& c) {
  const double link = c.cluster->link_bytes_per_second();
  return link > 0 && link <= kSlowLinkBytesPerSecond;
}

std::vector<int> FirstHosts(int count, int first = 0) {
  std::vector<int> hosts;
  for (int i = 0; i < count; ++i) hosts.push_back(first + i);
  return hosts;
}

// A ring allreduce over TCP: rank r on host r, no servers.
class RingPlugin final : public ExchangePlugin {
 public:
  Exchange id() const override { return Exchange::kRing; }
  std::string name() const override { return "ring"; }
  std::vector<Binary> binaries() const override { return {Binary::kRingWorker}; }
  Placement Place(int nodes, int /*dedicated_servers*/) const override { return {FirstHosts(nodes), {}}; }
  std::vector<std::string> WorkerArgv(const LaunchContext& c, int rank) const override {
    return {c.binaries->ring_worker,
            absl::StrCat("--iface_addr=", c.cluster->HostAddress(c.placement.worker_hosts[rank]))};
  }
  double BusFactor(int nodes) const override { return AllReduceBusFactor(nodes); }
  // N-1 reduce-scatter and N-1 allgather steps, one S/N chunk each way per step.
  CostTerms Terms(int nodes, int /*servers*/, double bytes) const override {
    return {2.0 * (nodes - 1), 2.0 * (nodes - 1) / nodes * bytes};
  }
};

// The sharded parameter server: what every placement of its shards shares (programs and flags). The
// subclasses place the shards and count the busiest host's traffic. Their terms are those of one flat step
// and equally of one bucket of a bucketed step: the workers slice every bucket over all K shards
// (ps/shard_layout.h), each shard taking 1/K of it, so while a bucket moves every server link carries its
// share of it (N * S_bucket / K in, as much out), never one or two links the whole bucket.
class PsPlugin : public ExchangePlugin {
 public:
  std::vector<Binary> binaries() const override { return {Binary::kPsServer, Binary::kPsWorker}; }

  std::vector<std::string> ServerArgv(const LaunchContext& c, int shard) const override {
    const std::string& address = c.cluster->HostAddress(c.placement.server_hosts[shard]);
    std::vector<std::string> argv = {c.binaries->ps_server,
                                     absl::StrCat("--port=", c.server_ports[shard]),
                                     absl::StrCat("--bind_addr=", address),
                                     absl::StrCat("--workers=", c.nodes()),
                                     absl::StrCat("--shard=", shard),
                                     absl::StrCat("--num_shards=", c.placement.server_hosts.size()),
                                     absl::StrCat("--mode=", c.ps_mode)};
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
                                     "--shutdown_servers=true"};
    if (SlowLink(c)) {
      argv.push_back(absl::StrCat("--chunk_bytes=", kSlowLinkChunkBytes));
      argv.push_back(absl::StrCat("--push_window_bytes=", kSlowLinkPushWindowBytes));
    }
    return argv;
  }

  // The allreduce factor on purpose: busbw is then the allreduce bandwidth the PS delivers, so busbw / B is
  // its efficiency against a bandwidth-optimal allreduce on the same links (bench/PERFORMANCE.md 2).
  double BusFactor(int nodes) const override { return AllReduceBusFactor(nodes); }
};

// One shard on a host of its own: its link carries every push and every pull, N pushes in and N replies out.
class PsOnePlugin final : public PsPlugin {
 public:
  Exchange id() const override { return Exchange::kPsOne; }
  std::string name() const override { return "ps-1"; }
  Placement Place(int nodes, int /*dedicated_servers*/) const override { return {FirstHosts(nodes), {nodes}}; }
  CostTerms Terms(int nodes, int /*servers*/, double bytes) const override {
    return {2.0 * nodes, static_cast<double>(nodes) * bytes};
  }
};

// K = N shards, shard i on worker host i: each host sends (N-1)/N * S of pushes and serves (N-1)/N * S of
// pulls (S a step's or a bucket's bytes); its own worker is local, so N-1 remote messages each way.
class PsColocatedPlugin final : public PsPlugin {
 public:
  Exchange id() const override { return Exchange::kPsColocated; }
  std::string name() const override { return "ps-colocated"; }
  Placement Place(int nodes, int /*dedicated_servers*/) const override {
    return {FirstHosts(nodes), FirstHosts(nodes)};
  }
  CostTerms Terms(int nodes, int /*servers*/, double bytes) const override {
    return {2.0 * (nodes - 1), 2.0 * (nodes - 1) / nodes * bytes};
  }
};

// K shards on hosts of their own (N..N+K-1): each server link carries N*S/K, each worker link S (S a step's or
// a bucket's bytes).
class PsDedicatedPlugin final : public PsPlugin {
 public:
  Exchange id() const override { return Exchange::kPsDedicated; }
  std::string name() const override { return "ps-dedicated"; }
  Placement Place(int nodes, int dedicated_servers) const override {
    return {FirstHosts(nodes), FirstHosts(dedicated_servers, nodes)};
  }
  CostTerms Terms(int nodes, int servers, double bytes) const override {
    return {2.0 * nodes, std::max(bytes, nodes * bytes / std::max(servers, 1))};
  }
};

std::string BinaryPaths::*Member(Binary binary) {
  switch (binary) {
    case Binary::kRingWorker: return &BinaryPaths::ring_worker;
    case Binary::kPsServer: return &BinaryPaths::ps_server;
    case Binary::kPsWorker: return &BinaryPaths::ps_worker;
  }
  return &BinaryPaths::ring_worker;
}

// Stateless and never destroyed, like nccl-tests' table of collectives.
const std::vector<const ExchangePlugin*>& Registry() {
  static const auto* const plugins = new std::vector<const ExchangePlugin*>{
      new RingPlugin, new PsOnePlugin, new PsColocatedPlugin, new PsDedicatedPlugin};
  return *plugins;
}

}  // namespace

const std::string& BinaryPaths::Get(Binary binary) const { return this->*Member(binary); }

std::string* BinaryPaths::Mutable(Binary binary) { return &(this->*Member(binary)); }

int Placement::HostsUsed() const {
  int hosts = 0;
  for (int h : worker_hosts) hosts = std::max(hosts, h + 1);
  for (int h : server_hosts) hosts = std::max(hosts, h + 1);
  return hosts;
}

int ExchangePlugin::Servers(int nodes, int dedicated_servers) const {
  return static_cast<int>(Place(nodes, dedicated_servers).server_hosts.size());
}

std::vector<std::string> ExchangePlugin::ServerArgv(const LaunchContext& /*context*/, int /*shard*/) const {
  return {};
}

std::vector<Exchange> AllExchanges() {
  std::vector<Exchange> all;
  for (const ExchangePlugin* plugin : Registry()) all.push_back(plugin->id());
  return all;
}

const ExchangePlugin& PluginFor(Exchange exchange) {
  for (const ExchangePlugin* plugin : Registry()) {
    if (plugin->id() == exchange) return *plugin;
  }
  return *Registry().front();  // unreachable: every Exchange value is registered
}

model::Topology TopologyOf(Exchange exchange) {
  switch (exchange) {
    case Exchange::kRing: return model::Topology::kRing;
    case Exchange::kPsOne: return model::Topology::kPsOne;
    case Exchange::kPsColocated: return model::Topology::kPsColocated;
    case Exchange::kPsDedicated: return model::Topology::kPsDedicated;
  }
  return model::Topology::kRing;
}

std::string ExchangeName(Exchange exchange) { return PluginFor(exchange).name(); }

absl::StatusOr<Exchange> ParseExchange(const std::string& name) {
  std::vector<std::string> names;
  for (const ExchangePlugin* plugin : Registry()) {
    if (plugin->name() == name) return plugin->id();
    names.push_back(plugin->name());
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown exchange '", name, "': use one of ", absl::StrJoin(names, ", ")));
}

}  // namespace psring::bench
