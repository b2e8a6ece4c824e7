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

// Connection handling against strangers on the ring port (anyone who can reach it): the accept loop never
// waits for a handshake; a connection must send its first bytes within kFirstBytesWithin, take at most
// kHandshakeStep for each later step of its handshake and finish it within kHandshakeSlice; at most
// kMaxUnauthenticated connections shake hands at once, at most kMaxPerSource of them from one address other
// than the left neighbour's published host. Over a cap, the newest connection stays and the one that made the
// least progress loses its slot (strangers before the left neighbour's host; then silent ones, then those
// with part of a hello, then those with a whole hello; the oldest first): a flood of connections that send
// a byte and stall cannot keep out the real neighbour, whose hello arrives at once and whose client retries
// if it was dropped anyway.
constexpr absl::Duration kFirstBytesWithin = absl::Seconds(1);
constexpr absl::Duration kHandshakeStep = absl::Seconds(1);
constexpr absl::Duration kHandshakeSlice = absl::Seconds(3);
constexpr int kMaxUnauthenticated = 32;
constexpr int kMaxPerSource = 8;
// How many refusals a rank prints (the rest are counted): a flood costs bounded log lines.
constexpr int kRefusalsLogged = 5;
// The client's pause before it connects again after its handshake was cut off (evicted, or the neighbour
// not listening yet).
constexpr absl::Duration kReconnectPause = absl::Milliseconds(50);

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

// The host the left neighbour published, once ConnectTcpRing has read it (the acceptor starts before).
struct LeftHost {
  absl::Mutex mu;
  std::string host ABSL_GUARDED_BY(mu);
};

// The host part of an accepted socket's "ip:port" peer name.
std::string SourceHost(const std::string& peer_name) {
  const size_t colon = peer_name.rfind(':');
  return colon == std::string::npos ? peer_name : peer_name.substr(0, colon);
}

// Accepts connections until one proves to be the left neighbour. Each connection shakes hands on its own
// thread, under the caps above; a connection that fails the handshake before its hello is authenticated (no
// or wrong token, another job, not a psring hello, silence, a stall, evicted) is refused and the rank keeps
// waiting; an authenticated neighbour that disagrees (rank, world size, intended peer) fails the rank. The
// first connection that proves to be the left neighbour wins; the handshakes still running are shut down and
// joined before this returns. `left_host`: the host the left neighbour published, once known (its
// connections are exempt from the per-source cap and evicted last). `keys` gets the winner's session keys.
absl::StatusOr<Socket> AcceptLeft(Socket& listener, int rank, int left, int world_size,
                                  const AuthConfig& auth, LeftHost& left_host, absl::Time deadline,
                                  SessionKeys* keys) {
  HandshakeHello mine;
  mine.protocol = HandshakeProtocol::kRing;
  mine.rank = rank;
  mine.world_size = world_size;

  struct Handshake {
    Socket socket;
    std::string source;
    bool preferred = false;  // from left_host
    std::thread thread;
    bool spoke = false;    // guarded by mu: its first bytes arrived
    bool hello = false;    // guarded by mu: its whole hello arrived
    bool evicted = false;  // guarded by mu: its slot was given to a newer connection
    bool done = false;     // guarded by mu
  };
  absl::Mutex mu;
  std::list<std::unique_ptr<Handshake>> running;  // guarded by mu, oldest first
  std::optional<Socket> winner;                   // guarded by mu
  SessionKeys winner_keys;                        // guarded by mu
  absl::Status fatal;                             // guarded by mu
  absl::Status last_refused;                      // guarded by mu
  int refused = 0;                                // guarded by mu

  auto shake = [&](Handshake* h) {
    bool authenticated = false;
    SessionKeys session;
    absl::StatusOr<HandshakeHello> hello = absl::DeadlineExceededError(absl::StrCat(
        h->socket.peer_name(), " sent nothing within ", absl::FormatDuration(kFirstBytesWithin)));
    absl::StatusOr<bool> readable = WaitReadable(h->socket, kFirstBytesWithin);
    if (!readable.ok()) hello = readable.status();
    if (readable.ok() && *readable) {
      {
        absl::MutexLock lock(&mu);
        h->spoke = true;
      }
      ServerHandshakeSteps steps;
      steps.step_timeout = kHandshakeStep;
      steps.on_hello = [&] {
        absl::MutexLock lock(&mu);
        h->hello = true;
      };
      hello = ServerHandshake(
          h->socket, auth, mine,
          [&](const HandshakeHello& hi) {
            authenticated = true;
            return CheckNeighbour(hi, left, rank, world_size, "left");
          },
          std::min(deadline, absl::Now() + kHandshakeSlice), &session, &steps);
    }
    absl::MutexLock lock(&mu);
    h->done = true;
    if (winner.has_value() || !fatal.ok() || !hello.ok()) {
      h->socket.Close();  // refused, or not needed: the peer sees the connection close now
    }
    if (winner.has_value() || !fatal.ok()) return;
    if (hello.ok()) {
      winner = std::move(h->socket);
      winner_keys = session;
      listener.Shutdown();  // wakes the accept loop
      return;
    }
    if (authenticated) {
      fatal = hello.status();
      listener.Shutdown();
      return;
    }
    last_refused = h->evicted ? absl::ResourceExhaustedError(absl::StrCat(
                                    h->socket.peer_name(), " lost its handshake slot to newer connections"))
                              : hello.status();
    if (++refused <= kRefusalsLogged) {
      std::fprintf(stderr, "rank %d: refused a connection to its ring port: %s%s\n", rank,
                   std::string(last_refused.message()).c_str(),
                   refused == kRefusalsLogged ? " (further refusals are counted, not printed)" : "");
    }
  };

  // Makes room for one more connection from `source` (mu held): evicts the least advanced handshake of that
  // source over its cap, then the least advanced one over the total cap (see the constants above).
  auto make_room = [&](const std::string& source, bool preferred) {
    mu.AssertHeld();
    auto live = [](const std::unique_ptr<Handshake>& h) { return !h->done && !h->evicted; };
    auto rank_of = [](const Handshake& h) {  // lower: evicted first
      return (h.preferred ? 4 : 0) + (h.hello ? 2 : h.spoke ? 1 : 0);
    };
    auto evict = [&](auto match) {
      Handshake* victim = nullptr;
      for (auto& h : running) {  // oldest first: a tie keeps the older one
        if (!live(h) || !match(*h)) continue;
        if (victim == nullptr || rank_of(*h) < rank_of(*victim)) victim = h.get();
      }
      if (victim == nullptr) return;
      victim->evicted = true;
      victim->socket.Shutdown();  // its thread returns promptly
    };
    if (!preferred) {
      int same = 0;
      for (auto& h : running) same += live(h) && h->source == source ? 1 : 0;
      if (same >= kMaxPerSource) evict([&](const Handshake& h) { return h.source == source; });
    }
    int total = 0;
    for (auto& h : running) total += live(h) ? 1 : 0;
    if (total >= kMaxUnauthenticated) evict([](const Handshake&) { return true; });
  };

  absl::Status accept_error;
  while (true) {
    {
      // Join the handshakes that ended; wait while evicted ones still hold threads beyond twice the cap (they
      // return promptly once shut down), so a flood costs bounded threads.
      absl::MutexLock lock(&mu);
      auto threads_or_over = [&] {
        mu.AssertHeld();
        int alive = 0;
        for (auto& h : running) alive += h->done ? 0 : 1;
        return winner.has_value() || !fatal.ok() || alive < 2 * kMaxUnauthenticated;
      };
      mu.AwaitWithDeadline(absl::Condition(&threads_or_over), deadline);
      if (winner.has_value() || !fatal.ok()) break;
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
    auto h = std::make_unique<Handshake>();
    h->source = SourceHost(accepted->peer_name());
    {
      absl::MutexLock lock(&left_host.mu);
      h->preferred = !left_host.host.empty() && h->source == left_host.host;
    }
    accepted->set_peer_name(
        absl::StrCat("a connection to rank ", rank, "'s ring port from ", accepted->peer_name()));
    h->socket = std::move(*accepted);
    Handshake* raw = h.get();
    absl::MutexLock lock(&mu);
    if (winner.has_value() || !fatal.ok()) break;  // `accepted` came after the winner; dropped
    make_room(raw->source, raw->preferred);
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
    *keys = winner_keys;
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

// "<prefix>/addr/<r>" from the store: rank r's ring address, after checking its idea of the world size.
absl::StatusOr<HostPort> PublishedAddress(Store* store, int rank, int peer, int world_size,
                                          const TcpRingOptions& options, absl::Time deadline) {
  ASSIGN_OR_RETURN(std::string published, store->Get(absl::StrCat(options.store_prefix, "/addr/", peer),
                                                     std::max(deadline - absl::Now(), absl::ZeroDuration())));
  std::vector<std::string> parts = absl::StrSplit(published, ' ');
  int peer_world = 0;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[1], &peer_world)) {
    return absl::InvalidArgumentError(absl::StrCat("malformed ring address '", published, "' in the store"));
  }
  if (peer_world != world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("world size mismatch: rank ", rank, " has world size ", world_size, " but rank ", peer,
                     " has world size ", peer_world, "; start every rank with the same --world_size"));
  }
  return ParseHostPort(parts[0], absl::StrCat("rank ", peer, "'s ring address"));
}

// Connects to the right neighbour and proves this rank to it (and it to this rank). A handshake cut off
// before the verdict (the neighbour's port evicted it under a flood, or is not accepting yet) is tried again
// until the deadline; a refusal is final.
absl::StatusOr<Socket> ConnectRight(const HostPort& right_addr, int rank, int right, int world_size,
                                    const TcpRingOptions& options, absl::Time deadline, SessionKeys* keys) {
  HandshakeHello mine;
  mine.protocol = HandshakeProtocol::kRing;
  mine.rank = rank;
  mine.world_size = world_size;
  mine.peer_rank = right;
  while (true) {
    ASSIGN_OR_RETURN(Socket to_right, ConnectTcp(right_addr.host, right_addr.port, deadline));
    to_right.set_peer_name(
        absl::StrCat("right neighbour rank ", right, " (", right_addr.host, ":", right_addr.port, ")"));
    if (options.socket_buffer_bytes > 0)
      RETURN_IF_ERROR(SetBufferSizes(to_right, options.socket_buffer_bytes));
    absl::StatusOr<HandshakeHello> hello = ClientHandshake(to_right, options.auth, mine, deadline, keys);
    if (hello.ok()) {
      RETURN_IF_ERROR(CheckNeighbour(*hello, right, rank, world_size, "right"));
      return to_right;
    }
    if (!absl::IsUnavailable(hello.status()) || absl::Now() + kReconnectPause >= deadline) {
      return hello.status();
    }
    absl::SleepFor(kReconnectPause);
  }
}

}  // namespace

TcpRingPeer::TcpRingPeer(int rank, int world_size, Socket right, Socket left, const SessionKeys& right_keys,
                         const SessionKeys& left_keys)
    : rank_(rank), world_size_(world_size), right_(std::move(right)), left_(std::move(left)) {
  // This rank is the client of its right link and the server of its left one; each link carries data one
  // way only.
  if (right_keys.enabled) send_mac_ = std::make_unique<MessageMac>(right_keys.client_to_server);
  if (left_keys.enabled) recv_mac_ = std::make_unique<MessageMac>(left_keys.client_to_server);
}

absl::Status TcpRingPeer::SendRight(const void* data, size_t bytes, absl::Time deadline) {
  if (aborted_) return absl::UnavailableError("the ring transport was aborted after an earlier error");
  if (send_mac_ != nullptr) {
    const MacTag tag = send_mac_->Next({absl::string_view(static_cast<const char*>(data), bytes)});
    RETURN_IF_ERROR(SendAll(right_, data, bytes, deadline));
    RETURN_IF_ERROR(SendAll(right_, tag.data(), tag.size(), deadline));
  } else {
    RETURN_IF_ERROR(SendAll(right_, data, bytes, deadline));
  }
  sent_ += bytes;
  return absl::OkStatus();
}

absl::Status TcpRingPeer::RecvLeft(void* data, size_t bytes, absl::Time deadline) {
  if (aborted_) return absl::UnavailableError("the ring transport was aborted after an earlier error");
  RETURN_IF_ERROR(RecvAll(left_, data, bytes, deadline));
  if (recv_mac_ != nullptr) {
    MacTag tag;
    RETURN_IF_ERROR(RecvAll(left_, tag.data(), tag.size(), deadline));
    const uint64_t sequence = recv_mac_->sequence();
    if (!recv_mac_->Check({absl::string_view(static_cast<const char*>(data), bytes)}, tag)) {
      const int left = (rank_ + world_size_ - 1) % world_size_;
      return absl::DataLossError(
          absl::StrCat("integrity check failed on the ring link rank ", left, " -> rank ", rank_,
                       " (message ", sequence, ", ", bytes,
                       " bytes): the data was changed between the two ranks (a faulty or hostile network "
                       "path); the job stops rather than use it. --data_integrity=off turns the check off"));
    }
  }
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
  SessionKeys left_keys, right_keys;
  LeftHost left_host;
  std::thread acceptor([&] {
    accepted = AcceptLeft(listener, rank, left, world_size, options.auth, left_host, deadline, &left_keys);
  });
  // Both neighbours' addresses (each publishes before it connects to anyone); the left one's host is the
  // source address the acceptor prefers from then on.
  absl::StatusOr<Socket> connected = [&]() -> absl::StatusOr<Socket> {
    ASSIGN_OR_RETURN(HostPort right_addr,
                     PublishedAddress(store, rank, right, world_size, options, deadline));
    ASSIGN_OR_RETURN(HostPort left_addr, PublishedAddress(store, rank, left, world_size, options, deadline));
    {
      absl::MutexLock lock(&left_host.mu);
      left_host.host = left_addr.host;
    }
    return ConnectRight(right_addr, rank, right, world_size, options, deadline, &right_keys);
  }();
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
  return std::make_unique<TcpRingPeer>(rank, world_size, std::move(to_right), std::move(from_left),
                                       right_keys, left_keys);
}

}  // namespace psring::ring
