// A man in the middle for tests: a TCP relay on 127.0.0.1 that forwards every connection it accepts to a
// target address, byte for byte, and can flip one byte of the stream on the way (the bit an on-path attacker
// or a faulty path would change), or cut every connection it carries.
//
//   TamperRelay relay("127.0.0.1", server_port, {.flip_at = 100000});
//   ... connect the client to 127.0.0.1:relay.port() ...
//
// Thread-safe; the destructor stops and joins everything.
#ifndef PSRING_TESTS_TESTING_TAMPER_RELAY_H_
#define PSRING_TESTS_TESTING_TAMPER_RELAY_H_

#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/socket.h"

namespace psring::testing {

struct TamperOptions {
  // Offset (bytes since the connection started) of the byte to flip, in the direction chosen below, on the
  // first connection only; -1: none.
  int64_t flip_at = -1;
  bool client_to_server = true;  // false: flip in the server's replies
};

class TamperRelay {
 public:
  TamperRelay(std::string host, int port, TamperOptions options)
      : host_(std::move(host)), port_(port), options_(options) {
    absl::StatusOr<Socket> listener = ListenTcp("127.0.0.1", 0);
    if (listener.ok()) listener_ = std::move(*listener);
    absl::StatusOr<int> local = LocalPort(listener_);
    relay_port_ = local.ok() ? *local : -1;
    accept_thread_ = std::thread([this] { AcceptLoop(); });
  }
  ~TamperRelay() {
    stop_ = true;
    accept_thread_.join();
    CutAll();
    absl::MutexLock lock(&mu_);
    for (auto& p : pairs_) {
      for (std::thread& t : p->pumps) t.join();
    }
  }

  int port() const { return relay_port_; }
  // Bytes flipped so far (0 or 1).
  int flipped() const { return flipped_; }
  // Connections accepted so far.
  int connections() const { return connections_; }

  // Shuts down every connection carried so far (both ends see it close); later ones are relayed again.
  void CutAll() {
    absl::MutexLock lock(&mu_);
    for (auto& p : pairs_) {
      p->client.Shutdown();
      p->server.Shutdown();
    }
  }

 private:
  struct Pair {
    Socket client, server;
    std::thread pumps[2];
  };

  void AcceptLoop() {
    while (!stop_) {
      absl::StatusOr<Socket> client = AcceptTcp(listener_, absl::Now() + absl::Milliseconds(50));
      if (!client.ok()) continue;
      absl::StatusOr<Socket> server = ConnectTcp(host_, port_, absl::Now() + absl::Seconds(5));
      if (!server.ok()) continue;
      const bool first = connections_++ == 0;
      absl::MutexLock lock(&mu_);
      pairs_.push_back(std::make_unique<Pair>());
      Pair* p = pairs_.back().get();
      p->client = std::move(*client);
      p->server = std::move(*server);
      const int64_t up_flip = first && options_.client_to_server ? options_.flip_at : -1;
      const int64_t down_flip = first && !options_.client_to_server ? options_.flip_at : -1;
      p->pumps[0] = std::thread([this, p, up_flip] { Pump(p->client, p->server, up_flip); });
      p->pumps[1] = std::thread([this, p, down_flip] { Pump(p->server, p->client, down_flip); });
    }
  }

  // Copies from `from` to `to` until either closes or the relay stops; flips the byte at `flip_at`.
  void Pump(const Socket& from, const Socket& to, int64_t flip_at) {
    char buf[64 << 10];
    int64_t offset = 0;
    while (!stop_) {
      pollfd pfd{from.fd(), POLLIN, 0};
      const int ready = ::poll(&pfd, 1, 50);
      if (ready < 0) break;
      if (ready == 0) continue;
      const ssize_t n = ::recv(from.fd(), buf, sizeof(buf), 0);
      if (n <= 0) break;
      if (flip_at >= offset && flip_at < offset + n) {
        buf[flip_at - offset] ^= 0x20;
        ++flipped_;
      }
      offset += n;
      if (!SendAll(to, buf, static_cast<size_t>(n), absl::Now() + absl::Seconds(30)).ok()) break;
    }
    ::shutdown(to.fd(), SHUT_WR);
  }

  const std::string host_;
  const int port_;
  const TamperOptions options_;
  Socket listener_;
  int relay_port_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<int> flipped_{0};
  std::atomic<int> connections_{0};
  std::thread accept_thread_;
  absl::Mutex mu_;
  std::list<std::unique_ptr<Pair>> pairs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace psring::testing

#endif  // PSRING_TESTS_TESTING_TAMPER_RELAY_H_
