// AverageMetrics / Barrier: a rendezvous of all N ranks in rounds; each round's result is the element-wise
// mean of the N value lists (empty lists: a plain barrier).
//
//   round r:  rank 0 Arrive([a0, b0]) ... rank N-1 Arrive([aN, bN])  ->  every rank gets [mean a, mean b]
//
// A round ends when the last rank arrives (it has a result) or when a waiter gives up after its timeout
// (Abandon: it has none, its other waiters fail too). A rank that registers again leaves the round
// (Withdraw). Thread-compatible: the owner (ps/shard_core.h) serializes every call with its mutex and does
// the waiting.
#ifndef PSRING_PS_METRICS_BARRIER_H_
#define PSRING_PS_METRICS_BARRIER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace psring::ps {

class MetricsBarrier {
 public:
  explicit MetricsBarrier(int workers);

  // Adds `rank`'s values to the current round and returns that round's number; the round completes when
  // this was the last rank. ALREADY_EXISTS when the rank already waits in this round, INVALID_ARGUMENT when
  // its number of values differs from those already there.
  absl::StatusOr<uint64_t> Arrive(int rank, std::vector<double> values);
  // Whether round `round` has ended (completed or abandoned).
  bool Ended(uint64_t round) const { return round_ != round; }
  // The mean of round `round`, or nullptr when it did not complete (abandoned, or not ended yet).
  const std::vector<double>* Result(uint64_t round) const;
  // Ends the current round without a result and returns the ranks that had not arrived.
  std::vector<int> Abandon();
  // Takes `rank` out of the current round (its values are forgotten).
  void Withdraw(int rank) { arrived_[rank] = false; }

 private:
  std::vector<bool> arrived_;
  std::vector<std::vector<double>> values_;
  uint64_t round_ = 0;
  uint64_t result_round_ = ~uint64_t{0};
  std::vector<double> result_;
};

}  // namespace psring::ps

#endif  // PSRING_PS_METRICS_BARRIER_H_
