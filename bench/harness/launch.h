// The command lines of each exchange's processes: the launching half of an exchange (its description, the
// placement and cost terms, is bench/core/exchange.h). One launcher per family: the ring's workers, and the
// parameter server's shards and workers, whatever the placement of the shards.
//
//   LaunchContext context{&cluster, &binaries, PluginFor(e).Place(n, k), master_port, server_ports, "sync", {}};
//   const ExchangeLauncher& launcher = LauncherFor(e);
//   std::vector<std::string> server = launcher.ServerArgv(context, 0);   // the program and its flags
//   std::vector<std::string> worker = launcher.WorkerArgv(context, r);   // the harness appends the shared flags
//
// Addresses come from the cluster seam (bench/core/cluster.h), so the same lines serve every kind of cluster.
// Thread-safety: launchers are stateless and immutable.
#ifndef PSRING_BENCH_HARNESS_LAUNCH_H_
#define PSRING_BENCH_HARNESS_LAUNCH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "bench/core/cluster.h"
#include "bench/core/exchange.h"

namespace psring::bench {

// What a launcher needs to write the command lines of one run.
struct LaunchContext {
  const Cluster* cluster = nullptr;  // host addresses and the link rate
  const BinaryPaths* binaries = nullptr;
  Placement placement;
  int master_port = 0;                   // the rendezvous store on host 0 (the driver passes it to workers)
  std::vector<int> server_ports;         // shard k listens on server_ports[k]
  std::string ps_mode;                   // the servers' --mode
  std::vector<std::string> server_args;  // the user's extra server flags (last, so they win)
  int64_t ps_chunk_bytes = 0;  // --ps_chunks=bdp/capped: every PS process's chunk (0: the launcher's)
  int nodes() const { return static_cast<int>(placement.worker_hosts.size()); }
};

class ExchangeLauncher {
 public:
  virtual ~ExchangeLauncher() = default;
  // argv of shard `shard` (exchanges without servers have none to launch: empty).
  virtual std::vector<std::string> ServerArgv(const LaunchContext& context, int shard) const;
  // Text a server prints once it accepts connections; workers start after every server printed it.
  virtual std::string server_ready_text() const { return ""; }
  // The exchange's part of rank `rank`'s argv: the program and its own flags. The driver appends --rank and
  // the flags every worker shares (world size, rendezvous, steps, mode).
  virtual std::vector<std::string> WorkerArgv(const LaunchContext& context, int rank) const = 0;
};

const ExchangeLauncher& LauncherFor(Exchange exchange);

}  // namespace psring::bench

#endif  // PSRING_BENCH_HARNESS_LAUNCH_H_
