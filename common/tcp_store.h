// TcpStore: the rendezvous Store over TCP, c10d-style. Rank 0 serves it on master_addr:master_port (binding
// `bind_addr`); every rank, rank 0 included, uses it through the same Store interface (rank 0 directly, the
// others over one connection each, which they open with retries until the timeout so start order does not
// matter).
//
//   TcpStoreOptions o;
//   o.master_addr = env.master_addr; o.master_port = env.master_port; o.is_server = env.rank == 0;
//   ASSIGN_OR_RETURN(std::unique_ptr<TcpStore> store, TcpStore::Create(o));
//
// Destroying the server waits (up to `shutdown_grace`) for connected clients to hang up, so ranks still
// finishing a Get are answered. Thread-safe: calls from several threads are serialised per connection.
#ifndef PSRING_COMMON_TCP_STORE_H_
#define PSRING_COMMON_TCP_STORE_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/socket.h"
#include "common/store.h"

namespace psring {

struct TcpStoreOptions {
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;  // the server may pass 0 and read port() (tests)
  bool is_server = false;   // true on rank 0
  std::string bind_addr;    // where the server listens; "" = every interface
  absl::Duration timeout =
      absl::Seconds(60);  // connecting, and each request's round trip beyond its own wait
  absl::Duration shutdown_grace = absl::Seconds(10);
};

class TcpStore final : public Store {
 public:
  // Server: listens (kUnavailable if the port is taken). Client: connects, retrying until `timeout`.
  static absl::StatusOr<std::unique_ptr<TcpStore>> Create(const TcpStoreOptions& options);
  ~TcpStore() override ABSL_LOCKS_EXCLUDED(clients_mu_);

  absl::Status Set(const std::string& key, const std::string& value) override ABSL_LOCKS_EXCLUDED(call_mu_);
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override
      ABSL_LOCKS_EXCLUDED(call_mu_);
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) override ABSL_LOCKS_EXCLUDED(call_mu_);

  // The port the server listens on, or the port the client connected to.
  int port() const { return port_; }

  // Server: the job failed, so the destructor skips `shutdown_grace` instead of waiting for clients (a
  // stalled rank would hold this one up to it). Thread-safe; a no-op on a client.
  void Abandon() { abandoned_ = true; }

 private:
  struct Response;
  explicit TcpStore(const TcpStoreOptions& options) : options_(options) {}
  absl::StatusOr<Response> Call(uint8_t op, const std::string& key, const std::string& value, int64_t arg,
                                absl::Duration wait) ABSL_LOCKS_EXCLUDED(call_mu_);
  void AcceptLoop() ABSL_LOCKS_EXCLUDED(clients_mu_);
  void Serve(Socket* client) ABSL_LOCKS_EXCLUDED(clients_mu_);

  const TcpStoreOptions options_;
  int port_ = 0;

  // Client side.
  absl::Mutex call_mu_;
  Socket connection_ ABSL_GUARDED_BY(call_mu_);

  // Server side.
  InMemoryStore table_;
  Socket listener_;
  std::thread accept_thread_;
  std::atomic<bool> stop_accepting_{false};
  std::atomic<bool> force_stop_{false};
  std::atomic<bool> abandoned_{false};
  absl::Mutex clients_mu_;
  std::vector<std::unique_ptr<Socket>> clients_ ABSL_GUARDED_BY(clients_mu_);
  std::vector<std::thread> handlers_ ABSL_GUARDED_BY(clients_mu_);
  int active_clients_ ABSL_GUARDED_BY(clients_mu_) = 0;
};

}  // namespace psring

#endif  // PSRING_COMMON_TCP_STORE_H_
