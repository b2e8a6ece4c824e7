// The exchanges psring compares, one small description each (the shape of nccl-tests' struct testColl: the
// harness owns the sweep, the reports the tables and plots, the model the predictions; a description says
// only what differs between exchanges, and nothing about launching or printing):
//
//   placement       which host runs each worker rank and each PS shard (host indices of bench/core/cluster.h)
//   programs        the worker and server programs it needs (their command lines: bench/harness/launch.h)
//   bus factor      busbw = algbw * BusFactor(N)
//   cost terms      messages and busiest-link bytes of one step: the harness's time limits (the model's own
//                   counts per topology are bench/model/collective.h's)
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
// Adding an exchange: a class implementing ExchangePlugin in exchange.cc, an Exchange value, its entry in the
// registry there, and its family's launcher (bench/harness/launch.cc); bench/PERFORMANCE.md 2-3 documents it.
//
// Thread-safety: plug-ins are stateless and immutable; every function here may be called from any thread.
#ifndef PSRING_BENCH_CORE_EXCHANGE_H_
#define PSRING_BENCH_CORE_EXCHANGE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace psring::bench {

enum class Exchange { kRing, kPsOne, kPsColocated, kPsDedicated };

// How an exchange's processes talk: the launcher of its command lines (bench/harness/launch.h) is per family.
enum class Family { kRing, kParameterServer };

// Two features of one collective: what the harness sizes a run's time limits from.
struct CostTerms {
  double messages = 0;    // latency terms
  double link_bytes = 0;  // bytes through the busiest link direction; 0: nothing crosses a link
};

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

class ExchangePlugin {
 public:
  virtual ~ExchangePlugin() = default;

  virtual Exchange id() const = 0;
  virtual std::string name() const = 0;  // "ring", "ps-1", ... (flags, tables, CSV)
  virtual Family family() const = 0;
  virtual std::vector<Binary> binaries() const = 0;

  // Placement of N workers; `dedicated_servers` is --ps_servers (K of ps-dedicated).
  virtual Placement Place(int nodes, int dedicated_servers) const = 0;
  int Servers(int nodes, int dedicated_servers) const;

  // busbw / algbw at N workers.
  virtual double BusFactor(int nodes) const = 0;
  // The messages and busiest-link bytes of one step of S bytes with K = `servers` (also of one bucket: the
  // PS slices every bucket over all K shards).
  virtual CostTerms Terms(int nodes, int servers, double bytes) const = 0;
};

// busbw / algbw for a ring allreduce over n ranks: 2(n-1)/n (0 for n == 1, where nothing moves).
double AllReduceBusFactor(int n);

// Every exchange, in the order tables and plots list them.
std::vector<Exchange> AllExchanges();
const ExchangePlugin& PluginFor(Exchange exchange);
std::string ExchangeName(Exchange exchange);
// The names of `exchanges`, in their order (flags' defaults, messages).
std::vector<std::string> ExchangeNames(const std::vector<Exchange>& exchanges);
// kInvalidArgument listing the known names.
absl::StatusOr<Exchange> ParseExchange(const std::string& name);

}  // namespace psring::bench

#endif  // PSRING_BENCH_CORE_EXCHANGE_H_
