// Ring allreduce (and the chain broadcast on the same machinery) over a Peer.
//
// The buffer of `count` elements is cut into N blocks B0..B(N-1) (the first count % N blocks hold one element
// more, so any count works, including count < N and 0). Rank r sends to r+1 and receives from r-1:
//
//        +-----> r0 -----> r1 -----+
//        |                         |
//        +------ r3 <----- r2 <----+
//
//   reduce-scatter, step s = 0..N-2: send B(r-s), receive B(r-s-1) and add it into the local copy.
//                   After N-1 steps rank r holds the full sum of B(r+1) (and scales it by 1/N for kAverage).
//   allgather,      step s = 0..N-2: send B(r+1-s), receive B(r-s) and overwrite the local copy.
//
// Each rank sends and receives 2(N-1) blocks of S/N bytes: 2(N-1)/N * S per rank whatever N is, which is
// bandwidth-optimal; time T = 2(N-1) * alpha + 2(N-1)/N * S / B (bus bandwidth = algbw * 2(N-1)/N).
//
// Pipelining and full duplex: every block is cut into segments of RingOptions::segment_bytes. A sender thread
// streams segments to the right while the calling thread receives segments from the left and reduces them;
// segment j of step t+1 leaves as soon as segment j of step t has been reduced, so sending, receiving and
// reducing overlap and both directions of every link are busy. No allocation per segment: the schedule and
// the receive scratch are reused across calls.
//
// Every call starts with a 24-byte header (operation, element type, count, root) sent to the right, which the
// right neighbour checks against its own call: ranks disagreeing on the buffer size get a kInvalidArgument
// naming both values. Any failure aborts the Peer, so neighbours fail fast too (kUnavailable), and is
// bounded by RingOptions::timeout (kDeadlineExceeded). After a failure the object is unusable.
//
// Results are bit-identical on every rank (the allgather copies the one reduced block around).
#ifndef PSRING_RING_RING_ALLREDUCE_H_
#define PSRING_RING_RING_ALLREDUCE_H_

#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "ring/peer.h"

namespace psring::ring {

enum class DataType : uint32_t { kFloat32 = 1, kFloat64 = 2 };
enum class ReduceOp : uint32_t { kSum = 1, kAverage = 2 };

size_t ElementSize(DataType type);

struct RingOptions {
  // Pipeline granularity; tests shrink it to a few bytes to exercise the multi-segment paths.
  size_t segment_bytes = 512 << 10;
  // Bound on each whole collective call.
  absl::Duration timeout = absl::Seconds(60);
};

// Wall time of the phases of the last call, for the bench.
struct PhaseTimes {
  double reduce_scatter_s = 0;
  double allgather_s = 0;  // for Broadcast: the whole call
};

// Runs collectives over one Peer. Not thread-safe: one thread calls at a time (it owns a helper thread for
// sending). Does not own the peer, which must outlive it.
//
//   RingCollectives ring(peer.get(), RingOptions{});
//   RETURN_IF_ERROR(ring.AllReduce(grads.data(), grads.size(), DataType::kFloat32, ReduceOp::kAverage));
class RingCollectives {
 public:
  RingCollectives(Peer* peer, RingOptions options);
  ~RingCollectives() ABSL_LOCKS_EXCLUDED(mu_);
  RingCollectives(const RingCollectives&) = delete;
  RingCollectives& operator=(const RingCollectives&) = delete;

  // In place; every rank passes the same count and type. Blocks until done. N == 1: no-op (kAverage too).
  absl::Status AllReduce(void* data, size_t count, DataType type, ReduceOp op) ABSL_LOCKS_EXCLUDED(mu_);

  // Overwrites `data` on every rank with root's, streamed along the chain root -> root+1 -> ... -> root-1.
  absl::Status Broadcast(void* data, size_t count, DataType type, int root) ABSL_LOCKS_EXCLUDED(mu_);

  const PhaseTimes& last_phase_times() const { return times_; }
  int rank() const { return peer_->rank(); }
  int world_size() const { return peer_->world_size(); }

 private:
  struct RecvItem {
    size_t offset;  // elements
    size_t count;
    bool reduce;  // add into data (else receive straight into data)
    bool scale;   // multiply by 1/N after adding (kAverage, the block this rank finishes)
  };
  struct SendItem {
    size_t offset;
    size_t count;
    size_t after;  // receive items that must be complete before this one leaves
  };
  struct Header {
    uint32_t magic;
    uint32_t kind;  // 1 allreduce, 2 broadcast
    uint32_t type;
    uint32_t op_or_root;
    uint64_t count;
  };

  // AllReduce over `elements` (>= count) elements of `data`, the header naming the caller's `count`.
  absl::Status AllReduceBlocks(void* data, size_t count, size_t elements, DataType type, ReduceOp op)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Run(const Header& header, void* data, DataType type, int world) ABSL_LOCKS_EXCLUDED(mu_);
  void SenderLoop() ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Receive(const Header& header, char* data, DataType type, absl::Time deadline)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status CheckHeader(const Header& mine, const Header& left) const;
  void Fail(const absl::Status& status) ABSL_LOCKS_EXCLUDED(mu_);

  Peer* const peer_;
  const RingOptions options_;
  std::vector<RecvItem> recv_items_;
  std::vector<SendItem> send_items_;
  size_t rs_items_ = 0;  // the first rs_items_ receive items are the reduce-scatter
  std::vector<char> scratch_;
  std::vector<char> padded_;  // AllReduce of fewer elements than ranks: one element per block
  absl::Time rs_end_;
  PhaseTimes times_;

  absl::Mutex mu_;
  // The job the sender thread runs (set by Run, read by the sender after job_id_ changes).
  uint64_t job_id_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t job_done_ ABSL_GUARDED_BY(mu_) = 0;
  const Header* job_header_ ABSL_GUARDED_BY(mu_) = nullptr;
  const char* job_data_ ABSL_GUARDED_BY(mu_) = nullptr;
  size_t job_elem_size_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time job_deadline_ ABSL_GUARDED_BY(mu_);
  size_t recv_done_ ABSL_GUARDED_BY(mu_) = 0;
  bool header_sent_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  std::thread sender_;
};

}  // namespace psring::ring

#endif  // PSRING_RING_RING_ALLREDUCE_H_
