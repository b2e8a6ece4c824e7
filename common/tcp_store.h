// TcpStore: the rendezvous Store over TCP, c10d-style. Rank 0 serves it on master_addr:master_port (binding
// `bind_addr`); every rank, rank 0 included, uses it through the same Store interface (rank 0 directly, the
// others over one connection each, which they open with retries until the timeout so start order does not
// matter).
//
//   TcpStoreOptions o;
//   o.master_addr = env.master_addr; o.master_port = env.master_port; o.is_server = env.rank == 0;
//   o.rank = env.rank; o.world_size = env.world_size; o.auth = auth;  // common/auth.h
//   ASSIGN_OR_RETURN(std::unique_ptr<TcpStore> store, TcpStore::Create(o));
//
// Every connection starts with common/auth.h's handshake: with a token, a client that cannot prove it, or
// belongs to another job id, can neither read nor write a key. With a token and auth.data_integrity (the
// default), every request and reply after it carries a Poly1305 tag (common/integrity.h) under a key of its
// direction and connection: a request changed on the way is refused (kDataLoss, the connection closed), a
// changed reply fails the client's call with kDataLoss. The server also refuses a rank outside [1,
// world_size) or one that is connected already (a rank whose connection dropped may join again, with the
// token; its client reconnects on its next call, trying for up to 2 s once), keys and values over the size
// limits (before reading or allocating them; the connection is closed), and a Set that would grow the table
// over max_total_bytes (the request fails). Connections that have not authenticated yet are capped apart from
// the ranks' own (max_connections in all, max_connections_per_source from one address, except from a "known
// host", the address of a connection that authenticated before): over a cap the store closes the one that
// made the least progress (nothing sent, then part of a hello, then a whole hello awaiting its proof), the
// oldest of those first, whatever it has sent, and always admits the new one; strangers are closed before
// connections from known hosts. So connections that send a byte and stall cannot keep a rank out: a rank's
// hello arrives with its connection, so every such connection goes before it. A connection must send its first
// bytes within first_bytes_timeout, take at most handshake_step_timeout for each later step of the handshake
// (the rest of its hello, its proof) and finish within handshake_timeout, or it is closed. Without a token and
// without a bind_addr the server listens on 127.0.0.1 only and says so on stderr. The server prints its first
// 5 refusals on stderr ("rendezvous store: refused ...", the rest are counted), and a Get of rank 0 that
// times out after a refusal names the last one (e.g. a rank with another --auth_token) instead of blaming a
// missing rank.
//
// Destroying the server waits (up to `shutdown_grace`) for connected clients to hang up, so ranks still
// finishing a Get are answered. Thread-safe: calls from several threads are serialised per connection.
#ifndef PSRING_COMMON_TCP_STORE_H_
#define PSRING_COMMON_TCP_STORE_H_

#include <atomic>
#include <cstddef>
#include <list>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/auth.h"
#include "common/integrity.h"
#include "common/socket.h"
#include "common/store.h"

namespace psring {

struct TcpStoreOptions {
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;  // the server may pass 0 and read port() (tests)
  bool is_server = false;   // true on rank 0
  // Where the server listens. "": every interface when auth.token is set, else 127.0.0.1 (with a line on
  // stderr saying so); "0.0.0.0": every interface.
  std::string bind_addr;
  absl::Duration timeout =
      absl::Seconds(60);  // connecting, and each request's round trip beyond its own wait
  absl::Duration shutdown_grace = absl::Seconds(10);
  AuthConfig auth;  // token and job id; the same on every rank

  // Client: this rank, sent in the hello. Server: the job's size; clients must be ranks 1..world_size-1, each
  // joining once. 0 on the server: any number of clients, without ranks (tests, tools).
  int rank = -1;
  int world_size = 0;
  // Server limits. A key or value over its limit fails that request and closes the connection before the
  // bytes are read.
  size_t max_key_bytes = 4096;
  size_t max_value_bytes = 1 << 20;
  // The sum of every key's and value's size the server holds; a Set or Add beyond it fails with
  // kResourceExhausted and changes nothing (the connection stays open). 0: unbounded.
  size_t max_total_bytes = 64 << 20;
  // Refusals the server prints on stderr (the rest are counted); 0: none (tests of floods).
  int refusals_logged = 5;
  // Connections handshaking at once; 0: 4 * world_size + 16 (64 when world_size is 0, which also caps the
  // authenticated ones then; with a world size, each rank holds one connection). Over it, see above (a
  // client whose connection was closed before the verdict retries until its timeout).
  int max_connections = 0;
  // Handshaking connections from one source address that no authenticated connection came from yet.
  int max_connections_per_source = 8;
  // A connection must send its first bytes within first_bytes_timeout, finish each later step of the
  // handshake within handshake_step_timeout, and the whole handshake within handshake_timeout, or it is
  // closed. A rank on loopback needs about a millisecond for all of it.
  absl::Duration first_bytes_timeout = absl::Seconds(1);
  absl::Duration handshake_step_timeout = absl::Seconds(1);
  absl::Duration handshake_timeout = absl::Seconds(3);
};

class TcpStore final : public Store {
 public:
  // Server: listens (kUnavailable if the port is taken). Client: connects and authenticates, retrying while
  // the server is not listening or is at its connection limit, until `timeout`; kUnauthenticated /
  // kPermissionDenied / kInvalidArgument / kAlreadyExists with the server's reason when it refused this rank.
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

  // Server: connections open now (handshaking or authenticated), and connections refused so far (failed
  // handshake, over a limit, malformed or tampered request). Thread-safe.
  int open_connections() ABSL_LOCKS_EXCLUDED(clients_mu_);
  int64_t refused_connections() const { return refused_; }

 private:
  struct Response;
  // How far a connection got; over a cap the store closes the least advanced one (see the file comment).
  enum class Stage { kSilent = 0, kSpoke = 1, kHello = 2, kAuthenticated = 3 };
  struct Client {
    Socket socket;
    std::string source;  // the peer's address, without the port
    std::thread thread;
    std::atomic<bool> done{false};  // the thread finished and may be joined
    Stage stage = Stage::kSilent;   // guarded by clients_mu_
    bool evicted = false;           // guarded by clients_mu_: closed to make room for a newer connection
  };
  explicit TcpStore(const TcpStoreOptions& options)
      : options_(options), table_(options.is_server ? options.max_total_bytes : 0) {}
  // Connects, shakes hands and keys the connection, retrying until options_.timeout (see Create).
  // `rejoining`: after a broken connection, when the server may still count this rank as connected.
  absl::Status ConnectClient(bool rejoining) ABSL_EXCLUSIVE_LOCKS_REQUIRED(call_mu_);
  absl::StatusOr<Response> Call(uint8_t op, const std::string& key, const std::string& value, int64_t arg,
                                absl::Duration wait) ABSL_LOCKS_EXCLUDED(call_mu_);
  void AcceptLoop() ABSL_LOCKS_EXCLUDED(clients_mu_);
  void Serve(Client* client) ABSL_LOCKS_EXCLUDED(clients_mu_);
  // Runs the request loop of an authenticated connection until it closes or the server stops. False when
  // the client broke the protocol (counted as refused).
  bool ServeRequests(const Socket& socket, const SessionKeys& keys);
  // Makes room for a new connection from `source` under the caps for handshaking connections, closing the
  // least advanced ones (see the file comment). False only without a world size when the authenticated
  // connections alone fill max_connections (the new connection is then refused).
  bool MakeRoom(const std::string& source) ABSL_EXCLUSIVE_LOCKS_REQUIRED(clients_mu_);
  // Closes the least advanced handshaking connection among those `eligible` accepts; false if none.
  template <typename Eligible>
  bool EvictOne(Eligible eligible) ABSL_EXCLUSIVE_LOCKS_REQUIRED(clients_mu_);
  void SetStage(Client* client, Stage stage) ABSL_LOCKS_EXCLUDED(clients_mu_);
  // The server's checks of an authenticated hello (rank range, one connection per rank); on success the
  // connection counts as authenticated and its address as a known host.
  absl::Status AdmitRank(Client* client, int rank) ABSL_LOCKS_EXCLUDED(clients_mu_);
  // Counts a refused connection, keeps `why` for a Get that times out, prints the first ones.
  void RecordRefusal(const absl::Status& why) ABSL_LOCKS_EXCLUDED(refusal_mu_);
  int MaxConnections() const;

  const TcpStoreOptions options_;
  int port_ = 0;

  // Client side.
  absl::Mutex call_mu_;
  Socket connection_ ABSL_GUARDED_BY(call_mu_);
  std::unique_ptr<MessageMac> send_mac_ ABSL_GUARDED_BY(call_mu_);  // null: integrity off
  std::unique_ptr<MessageMac> recv_mac_ ABSL_GUARDED_BY(call_mu_);
  bool rejoin_failed_ ABSL_GUARDED_BY(call_mu_) = false;

  // Server side.
  InMemoryStore table_;
  Socket listener_;
  std::thread accept_thread_;
  std::atomic<bool> stop_accepting_{false};
  std::atomic<bool> force_stop_{false};
  std::atomic<bool> abandoned_{false};
  std::atomic<int64_t> refused_{0};
  absl::Mutex refusal_mu_;
  absl::Status last_refusal_ ABSL_GUARDED_BY(refusal_mu_);
  absl::Mutex clients_mu_;
  std::list<Client> clients_ ABSL_GUARDED_BY(clients_mu_);  // std::list: Client addresses stay put
  int active_clients_ ABSL_GUARDED_BY(clients_mu_) = 0;
  std::set<int> joined_ranks_ ABSL_GUARDED_BY(clients_mu_);
  // Addresses that authenticated connections came from: exempt from the per-source cap, closed last.
  std::set<std::string> known_hosts_ ABSL_GUARDED_BY(clients_mu_);
};

}  // namespace psring

#endif  // PSRING_COMMON_TCP_STORE_H_
