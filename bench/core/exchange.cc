#include "bench/core/exchange.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace psring::bench {
namespace {

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
  Family family() const override { return Family::kRing; }
  std::vector<Binary> binaries() const override { return {Binary::kRingWorker}; }
  Placement Place(int nodes, int /*dedicated_servers*/) const override { return {FirstHosts(nodes), {}}; }
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
  Family family() const override { return Family::kParameterServer; }
  std::vector<Binary> binaries() const override { return {Binary::kPsServer, Binary::kPsWorker}; }


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

double AllReduceBusFactor(int n) { return n > 1 ? 2.0 * (n - 1) / n : 0.0; }

int Placement::HostsUsed() const {
  int hosts = 0;
  for (int h : worker_hosts) hosts = std::max(hosts, h + 1);
  for (int h : server_hosts) hosts = std::max(hosts, h + 1);
  return hosts;
}

int ExchangePlugin::Servers(int nodes, int dedicated_servers) const {
  return static_cast<int>(Place(nodes, dedicated_servers).server_hosts.size());
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

std::string ExchangeName(Exchange exchange) { return PluginFor(exchange).name(); }

std::vector<std::string> ExchangeNames(const std::vector<Exchange>& exchanges) {
  std::vector<std::string> names;
  names.reserve(exchanges.size());
  for (Exchange e : exchanges) names.push_back(ExchangeName(e));
  return names;
}

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
