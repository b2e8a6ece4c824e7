// TCP transport of the ring: one connection to the right neighbour (this rank sends on it) and one from the
// left neighbour (this rank receives on it), so both directions of every link carry data at once.
//
// Set-up through the rendezvous store: each rank listens on iface_addr (port chosen by the kernel), publishes
// "<prefix>/addr/<rank>" = "host:port world_size", connects to its right neighbour and accepts its left one.
// Each connection starts with common/auth.h's handshake (protocol kRing): with options.auth.token set, both
// neighbours prove the token (HMAC over fresh nonces) and the job id must match; a connection that fails
// this is refused and the rank keeps waiting for its real neighbour until the timeout. An authenticated
// neighbour with another world size, or the wrong rank, is a kInvalidArgument naming both values. The
// client names the rank it means to reach (r -> r+1), which the handshake binds into its MACs. With a token
// and auth.data_integrity (the default), every segment carries a Poly1305 tag under a per-link key derived
// from the handshake (common/integrity.h): a changed, dropped or injected segment fails the receiving rank
// with kDataLoss naming the link. The ring port keeps accepting under a flood of strangers (caps on
// unauthenticated connections, in total and per source address, and a 1 s deadline for their first bytes;
// see tcp_transport.cc). Sockets get TCP_NODELAY and large socket buffers
// (autotuned, or sized by TcpRingOptions::socket_buffer_bytes).
//
//   TcpRingOptions o; o.iface_addr = "10.0.0.3"; o.timeout = absl::Seconds(60);
//   ASSIGN_OR_RETURN(std::unique_ptr<TcpRingPeer> peer, ConnectTcpRing(store, rank, world_size, o));
#ifndef PSRING_RING_TCP_TRANSPORT_H_
#define PSRING_RING_TCP_TRANSPORT_H_

#include <atomic>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/auth.h"
#include "common/integrity.h"
#include "common/socket.h"
#include "common/store.h"
#include "ring/peer.h"

namespace psring::ring {

struct TcpRingOptions {
  // Address to bind and publish. Empty: 127.0.0.1 when the master is on loopback, else the local address
  // that routes to the master (master_addr/master_port).
  std::string iface_addr;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  // SO_SNDBUF/SO_RCVBUF. 0: the kernel's autotuning, which grows each buffer up to tcp_wmem/tcp_rmem's
  // maximum (4 MB / 32 MB on Debian 12); an explicit size is capped at net.core.[rw]mem_max and turns
  // autotuning off, which measured slower on loopback at N = 4.
  int socket_buffer_bytes = 0;
  absl::Duration timeout = absl::Seconds(60);  // connecting to the neighbours
  std::string store_prefix = "ring";           // distinct per ring sharing one store
  // Blocking socket calls woken every 100 ms to check deadlines (one system call per segment) instead of
  // non-blocking calls and poll.
  bool blocking_io = true;
  AuthConfig auth;  // token and job id, the same on every rank (common/auth.h)
};

class TcpRingPeer final : public Peer {
 public:
  // `right_keys` / `left_keys`: the links' session keys (common/auth.h); when enabled, every segment sent
  // right carries a tag and every segment received from the left is checked (kDataLoss naming the link when
  // it was changed on the way).
  TcpRingPeer(int rank, int world_size, Socket right, Socket left, const SessionKeys& right_keys = {},
              const SessionKeys& left_keys = {});

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  absl::Status SendRight(const void* data, size_t bytes, absl::Time deadline) override;
  absl::Status RecvLeft(void* data, size_t bytes, absl::Time deadline) override;
  void Abort() override;
  uint64_t bytes_sent() const override { return sent_; }
  uint64_t bytes_received() const override { return received_; }

 private:
  const int rank_;
  const int world_size_;
  Socket right_;
  Socket left_;
  std::unique_ptr<MessageMac> send_mac_;  // used by the sending thread only
  std::unique_ptr<MessageMac> recv_mac_;  // used by the receiving thread only
  std::atomic<bool> aborted_{false};
  std::atomic<uint64_t> sent_{0};
  std::atomic<uint64_t> received_{0};
};

// Builds the ring (blocks until both neighbours are connected, or `timeout`). world_size 1: a peer without
// links. `store` is only used during the call.
absl::StatusOr<std::unique_ptr<TcpRingPeer>> ConnectTcpRing(Store* store, int rank, int world_size,
                                                            const TcpRingOptions& options);

}  // namespace psring::ring

#endif  // PSRING_RING_TCP_TRANSPORT_H_
