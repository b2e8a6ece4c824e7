// Bounded staleness for the asynchronous mode (staleness s > 0), as in SSP parameter servers: every rank
// has a clock, the next step it pushes. A push is applied on arrival (ps/shard_update.h) and moves its
// rank's clock to step + 1; the pusher may then go on only while no rank is more than s steps behind it:
//
//   clocks   rank 0: 7   rank 1: 5   rank 2: 6      s = 1
//   rank 0 pushed step 6 (clock 7): needs every clock >= 7 - 1 = 6, rank 1 is at 5 -> rank 0 waits
//
// Thread-compatible: the owner (ps/shard_core.h) serializes every call with its mutex and does the waiting.
#ifndef PSRING_PS_ASYNC_POLICY_H_
#define PSRING_PS_ASYNC_POLICY_H_

#include <cstdint>
#include <vector>

#include "absl/numeric/int128.h"
#include "absl/status/status.h"
#include "absl/time/time.h"

namespace psring::ps {

class StalenessPolicy {
 public:
  StalenessPolicy(int workers, int staleness);

  // The step `rank` pushes next.
  int64_t next_step(int rank) const { return clocks_[rank]; }
  const std::vector<int64_t>& clocks() const { return clocks_; }
  // Restores clocks saved in a checkpoint (extra entries are ignored, missing ones stay 0).
  void RestoreClocks(const std::vector<int64_t>& clocks);

  // The session whose push of `rank` is streaming in (at most one per session; 0: none). Tied to the
  // session, so a push that hangs does not block the rank's next session (a re-registered worker).
  absl::uint128 receiving(int rank) const { return receiving_[rank]; }
  void set_receiving(int rank, absl::uint128 session) { receiving_[rank] = session; }

  // `rank`'s push of its next step was applied: its clock moves on.
  void Advance(int rank) { ++clocks_[rank]; }

  // Whether a rank that pushed `step` may go on: every clock is at least step + 1 - staleness.
  bool MayProceed(int64_t step) const;
  // DEADLINE_EXCEEDED naming the ranks that held `rank` (which pushed `step`) back for `timeout`.
  absl::Status TimeoutError(int rank, int64_t step, absl::Duration timeout) const;

 private:
  const int staleness_;
  std::vector<int64_t> clocks_;
  std::vector<absl::uint128> receiving_;
};

}  // namespace psring::ps

#endif  // PSRING_PS_ASYNC_POLICY_H_
