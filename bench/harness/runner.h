// One run of the harness: one exchange at one N and one S (or one workload and bucket cap) on a cluster
// (bench/core/cluster.h). It picks the run's ports and time limits, starts the servers and workers with their
// exchange's command lines (bench/harness/launch.h), collects their PSRING_RESULT lines into a RunRecord,
// reads the link counters and samples the box's CPU to mark a run EMULATOR-BOUND (bench/emulator/probes.h).
//
//   Runner runner(options, cluster.get(), &std::cerr, /*profiles=*/{});
//   RunRecord record = runner.Run(Exchange::kRing, 4, 16 << 20, "", -1, /*run_index=*/1);
//   if (!record.ok()) std::cerr << record.error;
//
// A failure is the record's error, never an exception or a hang: every job has a time limit. On loopback a
// port taken by another process between the choice and the bind is retried once with new ports.
// Blocking: Run blocks for the run. Not thread-safe: one run at a time on a cluster.
#ifndef PSRING_BENCH_HARNESS_RUNNER_H_
#define PSRING_BENCH_HARNESS_RUNNER_H_

#include <cstddef>
#include <map>
#include <memory>
#include <ostream>
#include <string>

#include "bench/core/cluster.h"
#include "bench/core/run_record.h"

namespace psring::bench {

class Runner {
 public:
  // `options` and `cluster` must outlive the runner. `profiles`: workload name -> what the workers get as
  // --workload (a scaled copy's path; absent: the name). Progress dots go to `progress`.
  Runner(const ScalingOptions& options, Cluster* cluster, std::ostream* progress,
         std::map<std::string, std::string> profiles);
  ~Runner();

  // `workload` "" and `bucket_mb` -1 outside replay mode and without --bucket_mb; `run_index` rotates the
  // ports of successive runs in the namespaces.
  RunRecord Run(Exchange exchange, int nodes, size_t bytes, const std::string& workload, double bucket_mb,
                int run_index);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace psring::bench

#endif  // PSRING_BENCH_HARNESS_RUNNER_H_
