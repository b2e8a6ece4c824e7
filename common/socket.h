// TCP socket helpers shared by the rendezvous store (common/tcp_store.h) and the ring transport
// (ring/tcp_transport.h). Every call returns absl::Status; every wait is bounded by a deadline.
//
//   ASSIGN_OR_RETURN(Socket listener, ListenTcp("127.0.0.1", 0));
//   ASSIGN_OR_RETURN(int port, LocalPort(listener));
//   ... elsewhere: ASSIGN_OR_RETURN(Socket s, ConnectTcp("127.0.0.1", port, absl::Now() + absl::Seconds(5)));
//   RETURN_IF_ERROR(SendAll(s, data, n, deadline));
//
// Status codes: kUnavailable when the peer is gone (refused, reset, closed), kDeadlineExceeded when the
// deadline passes, kInvalidArgument for a bad address, kInternal for other system errors. Messages name the
// peer (Socket::set_peer_name) and the errno text.
//
// Thread-safety: a Socket is thread-compatible. One thread may send while another receives on the same
// socket; Shutdown() may be called from any thread to wake both.
#ifndef PSRING_COMMON_SOCKET_H_
#define PSRING_COMMON_SOCKET_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace psring {

// Owns a socket file descriptor (closed on destruction). Move-only.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() { Close(); }
  Socket(Socket&& other) noexcept;
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void Close();
  // shutdown(SHUT_RDWR): a thread blocked in poll on this socket wakes up and sees the connection closed.
  void Shutdown();

  // Switches SendAll/RecvAll on this socket to blocking system calls that the kernel wakes every `slice`
  // (SO_SNDTIMEO/SO_RCVTIMEO) to check the deadline: one call per buffer instead of a poll per socket-buffer
  // fill, for bulk streams (the ring). Without it they use non-blocking calls and poll.
  absl::Status SetBlockingSlice(absl::Duration slice);
  bool blocking() const { return blocking_; }

  // Used in error messages, e.g. "rank 2 (10.0.0.3:41234)".
  const std::string& peer_name() const { return peer_name_; }
  void set_peer_name(std::string name) { peer_name_ = std::move(name); }

 private:
  int fd_ = -1;
  bool blocking_ = false;
  std::string peer_name_ = "peer";
};

// Listens on bind_addr:port (port 0: the kernel picks one; SO_REUSEADDR set). bind_addr is a numeric IPv4
// address or a host name; "" or "0.0.0.0" means every interface. A port that another socket holds is
// PortInUseError (common/exit_codes.h).
absl::StatusOr<Socket> ListenTcp(const std::string& bind_addr, int port, int backlog = 128);

// The port a bound socket listens on.
absl::StatusOr<int> LocalPort(const Socket& socket);

// `count` distinct TCP ports free on 127.0.0.1 right now, for servers whose clients are told the port up
// front: all are bound at once (port 0, the kernel picks) and released on return, so another process may
// still take one before the caller binds it again (its bind then fails with PortInUseError: pick again).
absl::StatusOr<std::vector<int>> FreeLoopbackPorts(int count);
absl::StatusOr<int> FreeLoopbackPort();  // one of them

// Waits for one connection until `deadline` (kDeadlineExceeded after it; kCancelled when the listener is
// shut down meanwhile). The accepted socket's peer_name() is the peer's "ip:port".
absl::StatusOr<Socket> AcceptTcp(const Socket& listener, absl::Time deadline);

// Connects to host:port, retrying while the peer is not listening yet (connection refused, host unreachable)
// until `deadline`. The returned socket has TCP_NODELAY set.
absl::StatusOr<Socket> ConnectTcp(const std::string& host, int port, absl::Time deadline);

// Sends/receives exactly `bytes` bytes (handles EINTR and partial transfers). kUnavailable when the peer
// closes or resets the connection, kDeadlineExceeded at `deadline`.
absl::Status SendAll(const Socket& socket, const void* data, size_t bytes, absl::Time deadline);
absl::Status RecvAll(const Socket& socket, void* data, size_t bytes, absl::Time deadline);

// True when the socket becomes readable (data or EOF) within `timeout`, false when it does not.
absl::StatusOr<bool> WaitReadable(const Socket& socket, absl::Duration timeout);

absl::Status SetNoDelay(const Socket& socket);
// Requests SO_SNDBUF and SO_RCVBUF of `bytes` (the kernel may cap them at net.core.[rw]mem_max).
absl::Status SetBufferSizes(const Socket& socket, int bytes);

// The local IPv4 address this host would use to reach host:port (no packet is sent). Lets a rank publish an
// address its peers can reach when no --iface_addr is given.
absl::StatusOr<std::string> LocalAddressToward(const std::string& host, int port);

// True when `host` only reaches this machine: a numeric 127.0.0.0/8 or ::1 address (also ::ffff:127.x.y.z and
// bracketed "[::1]"), or a name every address of which is one of those ("localhost"). A name is resolved
// (getaddrinfo, so it may block on DNS); one that does not resolve is not loopback, nor are "", "0.0.0.0"
// and "127.x.example" (a name, not an address). Thread-safe.
bool IsLoopbackHost(absl::string_view host);

struct HostPort {
  std::string host;  // a name or a numeric address, IPv6 without its brackets
  int port = 0;      // in [1, 65535]
};

// "host:port", "10.0.0.1:port" or "[IPv6 address]:port" (the only way to write an IPv6 address, since its own
// colons would be ambiguous). kInvalidArgument naming `what` (e.g. "--servers entry") when malformed.
absl::StatusOr<HostPort> ParseHostPort(absl::string_view text, absl::string_view what);

}  // namespace psring

#endif  // PSRING_COMMON_SOCKET_H_
