#include "common/socket.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/exit_codes.h"
#include "common/status_macros.h"

namespace psring {
namespace {

std::string ErrnoText(int err) { return absl::StrCat(std::strerror(err), " (errno ", err, ")"); }

// Milliseconds left until `deadline` for poll(): -1 for an infinite deadline, 0 once it has passed.
int PollMillis(absl::Time deadline) {
  if (deadline == absl::InfiniteFuture()) return -1;
  const absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return 0;
  return static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 1 << 30));
}

absl::Status CheckDeadline(absl::Time deadline, const std::string& peer, const char* what) {
  if (absl::Now() < deadline) return absl::OkStatus();
  return absl::DeadlineExceededError(
      absl::StrCat("timed out waiting to ", what, " ", peer, "; the peer may be stalled or dead"));
}

// Waits for `events` on fd until `deadline`. OK when ready (or on error/hangup, which the next read or write
// reports precisely); kDeadlineExceeded otherwise.
absl::Status PollUntil(int fd, short events, absl::Time deadline, const std::string& peer, const char* what) {
  while (true) {
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, PollMillis(deadline));
    if (n > 0) return absl::OkStatus();
    if (n == 0) {
      absl::Status expired = CheckDeadline(deadline, peer, what);
      if (!expired.ok()) return expired;
      continue;
    }
    if (errno == EINTR) continue;
    return absl::InternalError(absl::StrCat("poll on socket to ", peer, ": ", ErrnoText(errno)));
  }
}

// After EAGAIN: a blocking socket (woken every slice) just checks the deadline; a non-blocking one polls.
absl::Status WaitToRetry(const Socket& socket, short events, absl::Time deadline, const char* what) {
  return socket.blocking() ? CheckDeadline(deadline, socket.peer_name(), what)
                           : PollUntil(socket.fd(), events, deadline, socket.peer_name(), what);
}

absl::StatusOr<sockaddr_in> Resolve(const std::string& host, int port) {
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("port ", port, " is out of range [0, 65535]"));
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (host.empty() || host == "0.0.0.0") {
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    return addr;
  }
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) == 1) return addr;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &result);
  if (rc != 0 || result == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("cannot resolve host '", host, "': ", ::gai_strerror(rc),
                                                   "; pass a numeric IPv4 address or a resolvable name"));
  }
  addr.sin_addr = reinterpret_cast<sockaddr_in*>(result->ai_addr)->sin_addr;
  ::freeaddrinfo(result);
  return addr;
}

absl::StatusOr<Socket> NewTcpSocket() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket(): ", ErrnoText(errno)));
  return Socket(fd);
}

// One non-blocking connect() bounded by `deadline`; returns 0 or the errno that made it fail.
int ConnectOnce(const Socket& sock, const sockaddr_in& addr, absl::Time deadline) {
  const int flags = ::fcntl(sock.fd(), F_GETFL, 0);
  if (flags < 0 || ::fcntl(sock.fd(), F_SETFL, flags | O_NONBLOCK) != 0) return errno;
  int err = 0;
  if (::connect(sock.fd(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    err = errno;
    if (err == EINPROGRESS) {
      pollfd p{sock.fd(), POLLOUT, 0};
      int n;
      do {
        n = ::poll(&p, 1, PollMillis(deadline));
      } while (n < 0 && errno == EINTR);
      if (n == 0) return ETIMEDOUT;
      socklen_t len = sizeof(err);
      if (n < 0 || ::getsockopt(sock.fd(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    }
  }
  if (err == 0 && ::fcntl(sock.fd(), F_SETFL, flags) != 0) err = errno;
  return err;
}

}  // namespace

Socket::Socket(Socket&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      blocking_(std::exchange(other.blocking_, false)),
      peer_name_(std::move(other.peer_name_)) {}

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    Close();
    fd_ = std::exchange(other.fd_, -1);
    blocking_ = std::exchange(other.blocking_, false);
    peer_name_ = std::move(other.peer_name_);
  }
  return *this;
}

void Socket::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

absl::Status Socket::SetBlockingSlice(absl::Duration slice) {
  const timeval tv = absl::ToTimeval(std::max(slice, absl::Milliseconds(1)));
  for (int opt : {SO_SNDTIMEO, SO_RCVTIMEO}) {
    if (::setsockopt(fd_, SOL_SOCKET, opt, &tv, sizeof(tv)) != 0) {
      return absl::InternalError(absl::StrCat("setsockopt(SO_SNDTIMEO/SO_RCVTIMEO): ", ErrnoText(errno)));
    }
  }
  blocking_ = true;
  return absl::OkStatus();
}

void Socket::Shutdown() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

absl::StatusOr<Socket> ListenTcp(const std::string& bind_addr, int port, int backlog) {
  auto addr = Resolve(bind_addr, port);
  if (!addr.ok()) return addr.status();
  auto sock = NewTcpSocket();
  if (!sock.ok()) return sock.status();
  const int one = 1;
  ::setsockopt(sock->fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(sock->fd(), reinterpret_cast<const sockaddr*>(&*addr), sizeof(*addr)) != 0) {
    const int err = errno;
    const std::string where = absl::StrCat(bind_addr.empty() ? "0.0.0.0" : bind_addr, ":", port);
    if (err == EADDRINUSE) {
      return PortInUseError(absl::StrCat("cannot listen on ", where,
                                         ": the port is in use by another process; choose another port"));
    }
    return absl::InvalidArgumentError(absl::StrCat("cannot bind ", where, ": ", ErrnoText(err),
                                                   "; is the address assigned to an interface here?"));
  }
  if (::listen(sock->fd(), backlog) != 0) {
    return absl::InternalError(absl::StrCat("listen(): ", ErrnoText(errno)));
  }
  return std::move(*sock);
}

absl::StatusOr<int> LocalPort(const Socket& socket) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(socket.fd(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return absl::InternalError(absl::StrCat("getsockname(): ", ErrnoText(errno)));
  }
  return static_cast<int>(ntohs(addr.sin_port));
}

absl::StatusOr<std::vector<int>> FreeLoopbackPorts(int count) {
  std::vector<Socket> held;
  std::vector<int> ports;
  for (int i = 0; i < count; ++i) {
    ASSIGN_OR_RETURN(Socket s, ListenTcp("127.0.0.1", 0, 1));
    ASSIGN_OR_RETURN(int port, LocalPort(s));
    held.push_back(std::move(s));
    ports.push_back(port);
  }
  return ports;  // `held` closes here
}

absl::StatusOr<int> FreeLoopbackPort() {
  ASSIGN_OR_RETURN(std::vector<int> ports, FreeLoopbackPorts(1));
  return ports.front();
}

absl::StatusOr<Socket> AcceptTcp(const Socket& listener, absl::Time deadline) {
  auto where = [&] {
    absl::StatusOr<int> port = LocalPort(listener);
    return port.ok() ? absl::StrCat("port ", *port) : std::string("a listening socket");
  };
  while (true) {
    absl::Status ready = PollUntil(listener.fd(), POLLIN, deadline, "the listening socket", "accept on");
    if (absl::IsDeadlineExceeded(ready)) {
      return absl::DeadlineExceededError(
          absl::StrCat("timed out waiting for a connection on ", where(), " (nobody connected)"));
    }
    if (!ready.ok()) return ready;
    sockaddr_in peer{};
    socklen_t peer_len = sizeof(peer);
    const int fd = ::accept4(listener.fd(), reinterpret_cast<sockaddr*>(&peer), &peer_len, SOCK_CLOEXEC);
    if (fd >= 0) {
      Socket s(fd);
      absl::Status nodelay = SetNoDelay(s);
      if (!nodelay.ok()) return nodelay;
      char ip[INET_ADDRSTRLEN] = "?";
      if (peer.sin_family == AF_INET) ::inet_ntop(AF_INET, &peer.sin_addr, ip, sizeof(ip));
      s.set_peer_name(absl::StrCat(ip, ":", ntohs(peer.sin_port)));
      return s;
    }
    if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED) continue;
    if (errno == EINVAL) {  // shutdown() on the listener: its owner stopped the wait
      return absl::CancelledError(
          absl::StrCat("stopped waiting for a connection on ", where(), " (the listener was shut down)"));
    }
    return absl::InternalError(absl::StrCat("accept() on ", where(), ": ", ErrnoText(errno)));
  }
}

absl::StatusOr<Socket> ConnectTcp(const std::string& host, int port, absl::Time deadline) {
  auto addr = Resolve(host, port);
  if (!addr.ok()) return addr.status();
  const std::string where = absl::StrCat(host, ":", port);
  absl::Duration backoff = absl::Milliseconds(10);
  int last_err = 0;
  while (true) {
    auto sock = NewTcpSocket();
    if (!sock.ok()) return sock.status();
    last_err = ConnectOnce(*sock, *addr, deadline);
    if (last_err == 0) {
      absl::Status nodelay = SetNoDelay(*sock);
      if (!nodelay.ok()) return nodelay;
      sock->set_peer_name(where);
      return std::move(*sock);
    }
    const bool retryable = last_err == ECONNREFUSED || last_err == EHOSTUNREACH || last_err == ENETUNREACH ||
                           last_err == ETIMEDOUT || last_err == EINTR || last_err == ECONNRESET;
    if (!retryable) {
      return absl::UnavailableError(absl::StrCat("cannot connect to ", where, ": ", ErrnoText(last_err)));
    }
    if (absl::Now() + backoff >= deadline) break;
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Milliseconds(200));
  }
  return absl::DeadlineExceededError(absl::StrCat("timed out connecting to ", where,
                                                  " (last error: ", ErrnoText(last_err),
                                                  "); is that process running and the address right?"));
}

absl::Status SendAll(const Socket& socket, const void* data, size_t bytes, absl::Time deadline) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::send(socket.fd(), p, bytes, (socket.blocking() ? 0 : MSG_DONTWAIT) | MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      RETURN_IF_ERROR(WaitToRetry(socket, POLLOUT, deadline, "send to"));
      continue;
    }
    const int err = errno;
    return absl::UnavailableError(
        absl::StrCat("send to ", socket.peer_name(), " failed: ", ErrnoText(err), "; the peer is gone"));
  }
  return absl::OkStatus();
}

absl::Status RecvAll(const Socket& socket, void* data, size_t bytes, absl::Time deadline) {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::recv(socket.fd(), p, bytes, socket.blocking() ? MSG_WAITALL : MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) {
      return absl::UnavailableError(
          absl::StrCat(socket.peer_name(), " closed the connection; that process exited or failed"));
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      RETURN_IF_ERROR(WaitToRetry(socket, POLLIN, deadline, "receive from"));
      continue;
    }
    const int err = errno;
    return absl::UnavailableError(
        absl::StrCat("receive from ", socket.peer_name(), " failed: ", ErrnoText(err), "; the peer is gone"));
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> WaitReadable(const Socket& socket, absl::Duration timeout) {
  absl::Status s = PollUntil(socket.fd(), POLLIN, absl::Now() + timeout, socket.peer_name(), "receive from");
  if (s.ok()) return true;
  if (absl::IsDeadlineExceeded(s)) return false;
  return s;
}

absl::Status SetNoDelay(const Socket& socket) {
  const int one = 1;
  if (::setsockopt(socket.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0) {
    return absl::InternalError(absl::StrCat("setsockopt(TCP_NODELAY): ", ErrnoText(errno)));
  }
  return absl::OkStatus();
}

absl::Status SetBufferSizes(const Socket& socket, int bytes) {
  for (int opt : {SO_SNDBUF, SO_RCVBUF}) {
    if (::setsockopt(socket.fd(), SOL_SOCKET, opt, &bytes, sizeof(bytes)) != 0) {
      return absl::InternalError(absl::StrCat("setsockopt(SO_SNDBUF/SO_RCVBUF): ", ErrnoText(errno)));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> LocalAddressToward(const std::string& host, int port) {
  auto addr = Resolve(host, port);
  if (!addr.ok()) return addr.status();
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket(): ", ErrnoText(errno)));
  Socket udp(fd);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&*addr), sizeof(*addr)) != 0) {
    return absl::UnavailableError(absl::StrCat("no route to ", host, ": ", ErrnoText(errno),
                                               "; pass --iface_addr with this host's address"));
  }
  sockaddr_in local{};
  socklen_t len = sizeof(local);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0) {
    return absl::InternalError(absl::StrCat("getsockname(): ", ErrnoText(errno)));
  }
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &local.sin_addr, text, sizeof(text));
  return std::string(text);
}

namespace {

bool IsLoopbackAddress(const sockaddr* sa) {
  if (sa->sa_family == AF_INET) {
    const uint32_t a = ntohl(reinterpret_cast<const sockaddr_in*>(sa)->sin_addr.s_addr);
    return (a >> 24) == 127;
  }
  if (sa->sa_family == AF_INET6) {
    const in6_addr& a = reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(&a)) return true;
    return IN6_IS_ADDR_V4MAPPED(&a) && a.s6_addr[12] == 127;  // ::ffff:127.x.y.z
  }
  return false;
}

}  // namespace

bool IsLoopbackHost(absl::string_view host) {
  std::string name(host);
  if (name.size() >= 2 && name.front() == '[' && name.back() == ']') name = name.substr(1, name.size() - 2);
  if (name.empty()) return false;  // every interface
  // A numeric address is parsed, never looked up; a name is resolved and counts only when every address it
  // resolves to is a loopback one (a name that does not resolve is not loopback).
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  if (::getaddrinfo(name.c_str(), nullptr, &hints, &result) != 0 || result == nullptr) return false;
  bool loopback = true;
  for (const addrinfo* ai = result; ai != nullptr && loopback; ai = ai->ai_next) {
    loopback = IsLoopbackAddress(ai->ai_addr);
  }
  ::freeaddrinfo(result);
  return loopback;
}

absl::StatusOr<HostPort> ParseHostPort(absl::string_view text, absl::string_view what) {
  auto malformed = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " '", text, "' ", why, "; write host:port, e.g. 10.0.0.1:29500 or [fd00::1]:29500"));
  };
  HostPort result;
  absl::string_view port_text;
  if (absl::StartsWith(text, "[")) {
    const size_t close = text.find(']');
    if (close == absl::string_view::npos) return malformed("has no ']' after its IPv6 address");
    result.host = std::string(text.substr(1, close - 1));
    if (text.substr(close + 1, 1) != ":") return malformed("has no :port after its ']'");
    port_text = text.substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == absl::string_view::npos) return malformed("has no port");
    result.host = std::string(text.substr(0, colon));
    if (absl::StrContains(result.host, ':'))
      return malformed("is ambiguous: put an IPv6 address in brackets");
    port_text = text.substr(colon + 1);
  }
  if (result.host.empty()) return malformed("has no host");
  if (!absl::SimpleAtoi(port_text, &result.port) || result.port < 1 || result.port > 65535) {
    return malformed("has no port in [1, 65535]");
  }
  return result;
}

}  // namespace psring
