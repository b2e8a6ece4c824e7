// The exchanges the scaling harness measures, one small plug-in each (the shape of nccl-tests' struct
// testColl: the harness in bench/scaling.cc owns the sweep, the tables, the fit and the plots; a plug-in says
// only what differs between exchanges):
//
//   placement       which emulated host runs each worker rank and each PS shard
//   command lines   the server and worker argv (the driver appends the flags every worker shares)
//   bus factor      busbw = algbw * BusFactor(N)
//   cost terms      the alpha-beta model's features (bench/cost_model.h): messages and busiest-link bytes
//
//   exchange       placement                                       servers K   cost terms (messages, bytes)
//   ring           rank r on host r                                0           2(N-1), 2(N-1)/N * S
//   ps-1           workers on 0..N-1, the shard on host N          1           2N,     N * S
//   ps-colocated   shard i on worker host i                        N           2(N-1), 2(N-1)/N * S
//   ps-dedicated   workers on 0..N-1, shards on N..N+K-1           --ps_servers  2N,   max(S, N*S/K)
//
// The PS terms hold per bucket as they do per flat step: every bucket is sliced over all K shards
// (ps/shard_layout.h), so a bucket of S bytes loads the server links as a flat step of S bytes does.
//
// Adding an exchange: a class implementing ExchangePlugin in exchanges.cc, an Exchange value, and its entry
// in the registry there; bench/PERFORMANCE.md 2-3 documents it.
//
// Thread-safety: plug-ins are stateless and immutable; every function here may be called from any thread.
#ifndef PSRING_BENCH_EXCHANGES_H_
#define PSRING_BENCH_EXCHANGES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/cluster.h"
#include "bench/cost_model.h"
#include "bench/model/collective.h"

namespace psring::bench {

enum class Exchange { kRing, kPsOne, kPsColocated, kPsDedicated };

// The worker and server programs a plug-in launches.
enum class Binary { kRingWorker, kPsServer, kPsWorker };

struct BinaryPaths {
  std::string ring_worker;  // //ring:ring_worker
  std::string ps_server;    // //ps:server
  std::string ps_worker;    // //ps:worker
  const std::string& Get(Binary binary) const;
  std::string* Mutable(Binary binary);
};

struct Placement {
  std::vector<int> worker_hosts;  // host of rank r
  std::vector<int> server_hosts;  // host of shard k
  int HostsUsed() const;          // 1 + the highest host index
};

// What a plug-in needs to write the command lines of one run.
struct LaunchContext {
  const EmulatedCluster* cluster = nullptr;  // host addresses and the link rate
  const BinaryPaths* binaries = nullptr;
  Placement placement;
  int master_port = 0;                   // the rendezvous store on host 0 (the driver passes it to workers)
  std::vector<int> server_ports;         // shard k listens on server_ports[k]
  std::string ps_mode;                   // the servers' --mode
  std::vector<std::string> server_args;  // the user's extra server flags (last, so they win)
  int nodes() const { return static_cast<int>(placement.worker_hosts.size()); }
};

class ExchangePlugin {
 public:
  virtual ~ExchangePlugin() = default;

  virtual Exchange id() const = 0;
  virtual std::string name() const = 0;  // "ring", "ps-1", ... (flags, tables, CSV)
  virtual std::vector<Binary> binaries() const = 0;

  // Placement of N workers; `dedicated_servers` is --ps_servers (K of ps-dedicated).
  virtual Placement Place(int nodes, int dedicated_servers) const = 0;
  int Servers(int nodes, int dedicated_servers) const;

  // argv of shard `shard` (exchanges without servers have none to launch).
  virtual std::vector<std::string> ServerArgv(const LaunchContext& context, int shard) const;
  // Text a server prints once it accepts connections; workers start after every server printed it.
  virtual std::string server_ready_text() const { return ""; }
  // The exchange's part of rank `rank`'s argv: the program and its own flags. The driver appends --rank and
  // the flags every worker shares (world size, rendezvous, steps, mode).
  virtual std::vector<std::string> WorkerArgv(const LaunchContext& context, int rank) const = 0;

  // busbw / algbw at N workers.
  virtual double BusFactor(int nodes) const = 0;
  // The cost model's features of one step of S bytes with K = `servers`; the overlap model (bench/
  // replay_report.cc) charges each bucket of a bucketed step with Terms of the bucket's bytes, so they must
  // also describe what the exchange does with one bucket.
  virtual CostTerms Terms(int nodes, int servers, double bytes) const = 0;
};

// Every exchange, in the order tables and plots list them.
std::vector<Exchange> AllExchanges();
const ExchangePlugin& PluginFor(Exchange exchange);
std::string ExchangeName(Exchange exchange);
// The cost model's name for the same placement (bench/model/collective.h).
model::Topology TopologyOf(Exchange exchange);
// kInvalidArgument listing the known names.
absl::StatusOr<Exchange> ParseExchange(const std::string& name);

}  // namespace psring::bench

#endif  // PSRING_BENCH_EXCHANGES_H_
