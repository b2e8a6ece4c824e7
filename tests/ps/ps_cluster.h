// Test helper: K parameter-server shards in this process on 127.0.0.1 (ports picked by the kernel), and
// N ranks run as threads.
#ifndef PSRING_TESTS_PS_PS_CLUSTER_H_
#define PSRING_TESTS_PS_PS_CLUSTER_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "ps/client.h"
#include "ps/server.h"

namespace psring::ps::testing {

struct LocalCluster {
  std::vector<std::unique_ptr<PsServer>> servers;
  std::vector<std::string> addresses;
  ServiceOptions service;  // shard fields set per server
};

// Starts shards 0..num_shards-1 of `service` on 127.0.0.1:0.
inline absl::StatusOr<LocalCluster> StartCluster(int num_shards, ServiceOptions service) {
  LocalCluster cluster;
  service.num_shards = num_shards;
  cluster.service = service;
  for (int shard = 0; shard < num_shards; ++shard) {
    ServerOptions options;
    options.service = service;
    options.service.shard = shard;
    options.bind_addr = "127.0.0.1";
    options.port = 0;
    absl::StatusOr<std::unique_ptr<PsServer>> server = PsServer::Start(options);
    if (!server.ok()) return server.status();
    cluster.addresses.push_back(absl::StrCat("127.0.0.1:", (*server)->port()));
    cluster.servers.push_back(std::move(*server));
  }
  return cluster;
}

// Restarts shard `shard` on its old port (after servers[shard]->Stop()).
inline absl::Status RestartShard(LocalCluster* cluster, int shard) {
  ServerOptions options;
  options.service = cluster->service;
  options.service.shard = shard;
  options.bind_addr = "127.0.0.1";
  options.port = cluster->servers[shard]->port();
  cluster->servers[shard].reset();
  absl::StatusOr<std::unique_ptr<PsServer>> server = PsServer::Start(options);
  if (!server.ok()) return server.status();
  cluster->servers[shard] = std::move(*server);
  return absl::OkStatus();
}

inline PsClientOptions ClientOptionsFor(const LocalCluster& cluster, int rank, int world_size) {
  PsClientOptions options;
  options.servers = cluster.addresses;
  options.rank = rank;
  options.world_size = world_size;
  options.timeout = absl::Seconds(30);
  options.reconnect_timeout = absl::Seconds(10);
  options.auth_token = cluster.service.auth_token;
  return options;
}

// Runs fn(rank) on `n` threads and returns each rank's status.
inline std::vector<absl::Status> RunRanks(int n, const std::function<absl::Status(int)>& fn) {
  std::vector<absl::Status> results(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back([&, r] { results[r] = fn(r); });
  for (std::thread& t : threads) t.join();
  return results;
}

}  // namespace psring::ps::testing

#endif  // PSRING_TESTS_PS_PS_CLUSTER_H_
