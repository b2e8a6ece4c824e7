#include "ring/tcp_transport.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"

namespace psring::ring {
namespace {

// How long one incoming connection may take to finish its handshake before the rank gives up on it and
// accepts the next one (a stalled stranger must not use up the whole --timeout).
constexpr absl::Duration kHandshakeSlice = absl::Seconds(5);

absl::StatusOr<std::string> DefaultAddress(const TcpRingOptions& o) {
  if (!o.iface_addr.empty()) return o.iface_addr;
  if (IsLoopbackHost(o.master_addr)) return std::string("127.0.0.1");
  return LocalAddressToward(o.master_addr, o.master_port);
}

absl::Status CheckNeighbour(const HandshakeHello& h, int expected_rank, int my_rank, int world_size,
                            const char* role) {
  if (h.world_size != world_size) {
    return absl::InvalidArgumentError(absl::StrCat("world size mismatch: rank ", my_rank, " has world size ",
                                                   world_size, " but its ", role, " neighbour rank ", h.rank,
                                                   " has world size ", h.world_size,
                                                   "; start every rank with the same --world_size"));
  }
  if (h.rank != expected_rank) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", my_rank, " expected rank ", expected_rank,
                                                   " as its ", role, " neighbour but rank ", h.rank,
                                                   " connected; are two processes using the same rank?"));
  }
  return absl::OkStatus();
}

// Accepts connections until one proves to be the left neighbour. A connection that fails the handshake
// before its hello is authenticated (no or wrong token, another job, not a psring hello, a stall) is refused
// and the rank keeps waiting; an authenticated neighbour that disagrees (rank, world size) fails the rank.
absl::StatusOr<Socket> AcceptLeft(const Socket& listener, int rank, int left, int world_size,
                                  const AuthConfig& auth, absl::Time deadline) {
  HandshakeHello mine;
  mine.protocol = HandshakeProtocol::kRing;
  mine.rank = rank;
  mine.world_size = world_size;
  absl::Status last_refused;
  while (true) {
    absl::StatusOr<Socket> accepted = AcceptTcp(listener, deadline);
    if (!accepted.ok()) {
      return absl::Status(
          accepted.status().code(),
          absl::StrCat("rank ", rank, " waiting for its left neighbour rank ", left,
                       " to connect: ", accepted.status().message(),
                       last_refused.ok()
                           ? ""
                           : absl::StrCat(" (last refused connection: ", last_refused.message(), ")")));
    }
    accepted->set_peer_name(absl::StrCat("a connection to rank ", rank, "'s ring port"));
    bool authenticated = false;
    absl::StatusOr<HandshakeHello> hello = ServerHandshake(
        *accepted, auth, mine,
        [&](const HandshakeHello& h) {
          authenticated = true;
          return CheckNeighbour(h, left, rank, world_size, "left");
        },
        std::min(deadline, absl::Now() + kHandshakeSlice));
    if (hello.ok()) return std::move(*accepted);
    if (authenticated) return hello.status();
    last_refused = hello.status();
    std::fprintf(stderr, "rank %d: refused a connection to its ring port: %s\n", rank,
                 std::string(hello.status().message()).c_str());
  }
}

// Reads the right neighbour's address from the store, connects and proves this rank to it (and it to this
// rank).
absl::StatusOr<Socket> ConnectRight(Store* store, int rank, int right, int world_size,
                                    const TcpRingOptions& options, absl::Time deadline) {
  // The right neighbour's address, and its idea of the world size.
  ASSIGN_OR_RETURN(std::string published,
                   store->Get(absl::StrCat(options.store_prefix, "/addr/", right), options.timeout));
  std::vector<std::string> parts = absl::StrSplit(published, ' ');
  int right_world = 0;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[1], &right_world)) {
    return absl::InvalidArgumentError(absl::StrCat("malformed ring address '", published, "' in the store"));
  }
  if (right_world != world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("world size mismatch: rank ", rank, " has world size ", world_size, " but rank ", right,
                     " has world size ", right_world, "; start every rank with the same --world_size"));
  }
  ASSIGN_OR_RETURN(HostPort right_addr,
                   ParseHostPort(parts[0], absl::StrCat("rank ", right, "'s ring address")));
  ASSIGN_OR_RETURN(Socket to_right, ConnectTcp(right_addr.host, right_addr.port, deadline));
  to_right.set_peer_name(absl::StrCat("right neighbour rank ", right, " (", parts[0], ")"));
  if (options.socket_buffer_bytes > 0) RETURN_IF_ERROR(SetBufferSizes(to_right, options.socket_buffer_bytes));
  HandshakeHello mine;
  mine.protocol = HandshakeProtocol::kRing;
  mine.rank = rank;
  mine.world_size = world_size;
  ASSIGN_OR_RETURN(HandshakeHello right_hello, ClientHandshake(to_right, options.auth, mine, deadline));
  RETURN_IF_ERROR(CheckNeighbour(right_hello, right, rank, world_size, "right"));
  return to_right;
}

}  // namespace

absl::Status TcpRingPeer::SendRight(const void* data, size_t bytes, absl::Time deadline) {
  if (aborted_) return absl::UnavailableError("the ring transport was aborted after an earlier error");
  RETURN_IF_ERROR(SendAll(right_, data, bytes, deadline));
  sent_ += bytes;
  return absl::OkStatus();
}

absl::Status TcpRingPeer::RecvLeft(void* data, size_t bytes, absl::Time deadline) {
  if (aborted_) return absl::UnavailableError("the ring transport was aborted after an earlier error");
  RETURN_IF_ERROR(RecvAll(left_, data, bytes, deadline));
  received_ += bytes;
  return absl::OkStatus();
}

void TcpRingPeer::Abort() {
  aborted_ = true;
  right_.Shutdown();
  left_.Shutdown();
}

absl::StatusOr<std::unique_ptr<TcpRingPeer>> ConnectTcpRing(Store* store, int rank, int world_size,
                                                            const TcpRingOptions& options) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, " / world size ", world_size, " is invalid"));
  }
  if (world_size == 1) return std::make_unique<TcpRingPeer>(0, 1, Socket(), Socket());
  const absl::Time deadline = absl::Now() + options.timeout;
  const int right = (rank + 1) % world_size;
  const int left = (rank + world_size - 1) % world_size;

  ASSIGN_OR_RETURN(std::string host, DefaultAddress(options));
  ASSIGN_OR_RETURN(Socket listener, ListenTcp(host, 0));
  if (options.socket_buffer_bytes > 0) RETURN_IF_ERROR(SetBufferSizes(listener, options.socket_buffer_bytes));
  ASSIGN_OR_RETURN(int port, LocalPort(listener));
  RETURN_IF_ERROR(store->Set(absl::StrCat(options.store_prefix, "/addr/", rank),
                             absl::StrCat(host, ":", port, " ", world_size)));

  // Every rank is the client of its right neighbour and the server of its left one at the same time: the
  // left side is accepted on its own thread from now on, or each rank would wait for the server hello of a
  // neighbour that waits for its own right neighbour's.
  absl::StatusOr<Socket> accepted = absl::UnknownError("not accepted");
  std::thread acceptor(
      [&] { accepted = AcceptLeft(listener, rank, left, world_size, options.auth, deadline); });
  absl::StatusOr<Socket> connected = ConnectRight(store, rank, right, world_size, options, deadline);
  if (!connected.ok()) listener.Shutdown();  // wakes the acceptor
  acceptor.join();
  RETURN_IF_ERROR(connected.status());
  RETURN_IF_ERROR(accepted.status());
  Socket to_right = std::move(*connected);
  Socket from_left = std::move(*accepted);
  from_left.set_peer_name(absl::StrCat("left neighbour rank ", left));
  if (options.socket_buffer_bytes > 0)
    RETURN_IF_ERROR(SetBufferSizes(from_left, options.socket_buffer_bytes));
  if (options.blocking_io) {
    RETURN_IF_ERROR(to_right.SetBlockingSlice(absl::Milliseconds(100)));
    RETURN_IF_ERROR(from_left.SetBlockingSlice(absl::Milliseconds(100)));
  }
  return std::make_unique<TcpRingPeer>(rank, world_size, std::move(to_right), std::move(from_left));
}

}  // namespace psring::ring
