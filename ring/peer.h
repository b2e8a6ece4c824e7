// Peer: what the ring algorithm sees of the network — a link to the right neighbour (rank + 1 mod N) that it
// sends on, and a link from the left neighbour (rank - 1 mod N) that it receives on. Transports (TCP:
// ring/tcp_transport.h) implement it; the algorithm (ring/ring_allreduce.h) never sees sockets or the store.
#ifndef PSRING_RING_PEER_H_
#define PSRING_RING_PEER_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace psring::ring {

class Peer {
 public:
  virtual ~Peer() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // Blocks until all `bytes` are handed to the transport toward the right neighbour (the caller may reuse
  // `data` on return), or fails: kUnavailable (neighbour gone), kDeadlineExceeded (at `deadline`).
  // SendRight and RecvLeft may run at the same time on two threads (full duplex); each alone is not
  // reentrant.
  virtual absl::Status SendRight(const void* data, size_t bytes, absl::Time deadline) = 0;

  // Blocks until exactly `bytes` from the left neighbour are in `data`, or fails like SendRight.
  virtual absl::Status RecvLeft(void* data, size_t bytes, absl::Time deadline) = 0;

  // Breaks both links: blocked calls here return promptly, and the neighbours see the links close (so an
  // error on one rank travels around the ring instead of leaving others waiting for their timeout).
  // Every later call fails. Thread-safe.
  virtual void Abort() = 0;

  // Payload bytes moved so far (headers included). Thread-safe.
  virtual uint64_t bytes_sent() const = 0;
  virtual uint64_t bytes_received() const = 0;
};

}  // namespace psring::ring

#endif  // PSRING_RING_PEER_H_
