// BucketTracker: the bookkeeping of one bucketed step (GradientExchange::BeginStep/GradientReady/
// FinishStep), shared by the exchanges that overlap. The training thread reports ranges of the gradient as
// backward writes them; communication threads wait until a bucket, and every bucket before it in the plan,
// is complete, and then move it. Buckets are released strictly in plan order, whatever order their ranges
// arrive in, so every rank moves them in the same order (collectives cannot cross).
//
//   BucketTracker tracker;                        // one per exchange, reused step after step
//   tracker.Begin(plan);                          // training thread
//   std::thread comm([&] {
//     for (int i = 0; i < n; ++i) {
//       if (!tracker.WaitFor(i).ok()) break;      // blocks until bucket i may move
//       ... exchange plan.buckets()[i] ...
//     }
//   });
//   tracker.Ready(offset, count);                 // training thread, per layer, never blocks on the network
//   RETURN_IF_ERROR(tracker.Close());             // backward done: every element must have been reported
//   comm.join();
//
// Thread-safe. The plan passed to Begin must outlive the step.
#ifndef PSRING_TRAINER_BUCKET_TRACKER_H_
#define PSRING_TRAINER_BUCKET_TRACKER_H_

#include <cstddef>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "trainer/exchange.h"

namespace psring::trainer {

class BucketTracker {
 public:
  // Starts a step over `plan`: no element is ready yet.
  void Begin(const BucketPlan& plan) ABSL_LOCKS_EXCLUDED(mu_);

  // grads[offset, offset + count) is final. Reporting an element twice or past the plan's end aborts the
  // step with kInvalidArgument (WaitFor and Close return it). Takes the lock briefly; never blocks longer.
  void Ready(size_t offset, size_t count) ABSL_LOCKS_EXCLUDED(mu_);

  // Blocks until buckets 0..index are all complete (OK), or the step was aborted or closed with a bucket
  // still incomplete (that error).
  absl::Status WaitFor(int index) ABSL_LOCKS_EXCLUDED(mu_);

  // Ends the step on the failing side: waiters return `status` (not OK).
  void Abort(absl::Status status) ABSL_LOCKS_EXCLUDED(mu_);

  // Backward is over. kFailedPrecondition naming the first incomplete bucket when some element was never
  // reported (waiters get the same error); otherwise the step's error so far, or OK.
  absl::Status Close() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  absl::Mutex mu_;
  absl::CondVar changed_;  // signalled when complete_ or error_ changes
  const BucketPlan* plan_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::vector<size_t> missing_ ABSL_GUARDED_BY(mu_);  // elements not yet reported, per bucket
  int complete_ ABSL_GUARDED_BY(mu_) = 0;             // buckets [0, complete_) are all complete
  absl::Status error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace psring::trainer

#endif  // PSRING_TRAINER_BUCKET_TRACKER_H_
