#include "ring/tcp_transport.h"

#include <algorithm>
#include <cstdio>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"

namespace psring::ring {
namespace {

// How long one incoming connection may take to finish its handshake before the rank gives up on it and
// accepts the next one (a stalled stranger must not use up the whole --timeout).
constexpr absl::Duration kHandshakeSlice = absl::Seconds(5);

// How many incoming connections may shake hands with a rank's ring port at once, and how many refusals a
// rank prints (the rest are counted): a flood of strangers costs bounded threads and log lines.
constexpr int kMaxHandshakesInFlight = 32;
constexpr int kRefusalsLogged = 5;

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

// Accepts connections until one proves to be the left neighbour. Each connection shakes hands on its own
// thread (at most kMaxHandshakesInFlight at once; more wait in the listen backlog), so strangers that stall
// their handshake cannot keep the real neighbour waiting behind them. A connection that fails the handshake
// before its hello is authenticated (no or wrong token, another job, not a psring hello, a stall) is refused
// and the rank keeps waiting; an authenticated neighbour that disagrees (rank, world size) fails the rank.
// The first connection that proves to be the left neighbour wins; the handshakes still running are shut
// down and joined before this returns. `listener` is shut down when this returns with a neighbour or an error.
absl::StatusOr<Socket> AcceptLeft(Socket& listener, int rank, int left, int world_size, const AuthConfig& auth,
                                  absl::Time deadline) {
  HandshakeHello mine;
  mine.protocol = HandshakeProtocol::kRing;
  mine.rank = rank;
  mine.world_size = world_size;

  struct Handshake {
    Socket socket;
    std::thread thread;
    bool done = false;  // guarded by mu
  };
  absl::Mutex mu;
  std::list<std::unique_ptr<Handshake>> running;  // guarded by mu (the list; each socket is its thread's)
  std::optional<Socket> winner;                   // guarded by mu
  absl::Status fatal;                             // guarded by mu
  absl::Status last_refused;                      // guarded by mu
  int refused = 0;                                // guarded by mu
  int in_flight = 0;                              // guarded by mu

  auto shake = [&](Handshake* h) {
    bool authenticated = false;
    absl::StatusOr<HandshakeHello> hello = ServerHandshake(
        h->socket, auth, mine,
        [&](const HandshakeHello& hi) {
          authenticated = true;
          return CheckNeighbour(hi, left, rank, world_size, "left");
        },
        std::min(deadline, absl::Now() + kHandshakeSlice));
    absl::MutexLock lock(&mu);
    --in_flight;
    h->done = true;
    if (winner.has_value() || !fatal.ok() || !hello.ok()) {
      h->socket.Close();  // refused, or not needed: the peer sees the connection close now
    }
    if (winner.has_value() || !fatal.ok()) return;
    if (hello.ok()) {
      winner = std::move(h->socket);
      listener.Shutdown();  // wakes the accept loop
      return;
    }
    if (authenticated) {
      fatal = hello.status();
      listener.Shutdown();
      return;
    }
    last_refused = hello.status();
    if (++refused <= kRefusalsLogged) {
      std::fprintf(stderr, "rank %d: refused a connection to its ring port: %s%s\n", rank,
                   std::string(hello.status().message()).c_str(),
                   refused == kRefusalsLogged ? " (further refusals are counted, not printed)" : "");
    }
  };

  absl::Status accept_error;
  while (true) {
    {
      // Wait for a free handshake slot (or for the wait to end).
      absl::MutexLock lock(&mu);
      auto slot_or_over = [&] {
        mu.AssertHeld();
        return winner.has_value() || !fatal.ok() || in_flight < kMaxHandshakesInFlight;
      };
      mu.AwaitWithDeadline(absl::Condition(&slot_or_over), deadline);
      if (winner.has_value() || !fatal.ok()) break;
      // Join the handshakes that ended (the list stays as long as the handshakes in flight).
      for (auto it = running.begin(); it != running.end();) {
        if ((*it)->done) {
          (*it)->thread.join();  // it only returns now: done is set under mu as its last step
          it = running.erase(it);
        } else {
          ++it;
        }
      }
    }
    absl::StatusOr<Socket> accepted = AcceptTcp(listener, deadline);
    if (!accepted.ok()) {
      accept_error = accepted.status();
      break;
    }
    accepted->set_peer_name(absl::StrCat("a connection to rank ", rank, "'s ring port from ",
                                         accepted->peer_name()));
    auto h = std::make_unique<Handshake>();
    h->socket = std::move(*accepted);
    Handshake* raw = h.get();
    absl::MutexLock lock(&mu);
    if (winner.has_value() || !fatal.ok()) break;  // `accepted` came after the winner; dropped
    ++in_flight;
    running.push_back(std::move(h));
    raw->thread = std::thread(shake, raw);
  }

  // The wait is over: stop the handshakes still running and join every thread.
  listener.Shutdown();
  {
    absl::MutexLock lock(&mu);
    for (auto& h : running) {
      if (!h->done) h->socket.Shutdown();
    }
  }
  for (auto& h : running) h->thread.join();

  absl::MutexLock lock(&mu);
  if (winner.has_value()) {
    if (refused > kRefusalsLogged) {
      std::fprintf(stderr, "rank %d: refused %d connections to its ring port before its left neighbour's\n",
                   rank, refused);
    }
    return std::move(*winner);
  }
  if (!fatal.ok()) return fatal;
  if (refused == 0) {
    return absl::Status(accept_error.code(), absl::StrCat("rank ", rank, " waiting for its left neighbour rank ",
                                                          left, " to connect: ", accept_error.message()));
  }
  return absl::Status(accept_error.code(),
                      absl::StrCat("rank ", rank, " waiting for its left neighbour rank ", left,
                                   ": no connection to its ring port proved to be rank ", left, " (", refused,
                                   " refused, the last: ", last_refused.message(), "); ",
                                   accept_error.message()));
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
