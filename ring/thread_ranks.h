// Runs the ranks of one job as threads of this process, joined through an InMemoryStore and the real TCP
// ring transport on loopback (tests and //bench:allreduce_bench).
//
//   std::vector<absl::Status> s = RunRanks(4, LoopbackOptions(), [](int rank, ProcessGroup* g) { ... });
//
// Blocks until every rank's body returned. The bodies run concurrently; each owns its group.
#ifndef PSRING_RING_THREAD_RANKS_H_
#define PSRING_RING_THREAD_RANKS_H_

#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "common/store.h"
#include "ring/process_group.h"

namespace psring::ring {

// TCP ring options for ranks on 127.0.0.1.
inline ProcessGroupOptions LoopbackOptions(size_t segment_bytes = 512 << 10,
                                           absl::Duration timeout = absl::Seconds(20)) {
  ProcessGroupOptions o;
  o.tcp.iface_addr = "127.0.0.1";
  o.tcp.timeout = timeout;
  o.ring.timeout = timeout;
  o.ring.segment_bytes = segment_bytes;
  return o;
}

// Calls body(rank, group) on `world_size` threads, each handed its own connected group; returns each rank's
// status (a connection failure is that rank's status).
inline std::vector<absl::Status> RunRanksOwning(
    int world_size, const ProcessGroupOptions& options,
    const std::function<absl::Status(int, std::unique_ptr<ProcessGroup>)>& body) {
  InMemoryStore store;
  std::vector<absl::Status> results(world_size);
  std::vector<std::thread> threads;
  for (int r = 0; r < world_size; ++r) {
    threads.emplace_back([&, r] {
      absl::StatusOr<std::unique_ptr<ProcessGroup>> group =
          CreateProcessGroup(&store, r, world_size, options);
      results[r] = group.ok() ? body(r, std::move(*group)) : group.status();
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

// The same, with the group owned by the runner for the duration of body.
inline std::vector<absl::Status> RunRanks(int world_size, const ProcessGroupOptions& options,
                                          const std::function<absl::Status(int, ProcessGroup*)>& body) {
  return RunRanksOwning(world_size, options, [&](int rank, std::unique_ptr<ProcessGroup> group) {
    return body(rank, group.get());
  });
}

}  // namespace psring::ring

#endif  // PSRING_RING_THREAD_RANKS_H_
