#include "common/tcp_store.h"

#include <sys/socket.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/tcp_store_wire.h"

namespace psring {

using store_wire::kMagic;
using store_wire::RequestHeader;
using store_wire::ResponseHeader;

namespace {

// A client accepts replies up to its own value limit, and error messages in any case; the server cuts its
// error messages to kMaxErrorReply, so a request's echoed bytes cannot make a reply the client refuses.
constexpr size_t kMinReplyLimit = 64 << 10;
constexpr size_t kMaxErrorReply = 4 << 10;
// How long a client whose connection broke tries to join again (the server may still hold the old
// connection for a moment).
constexpr absl::Duration kRejoinWithin = absl::Seconds(2);
// A client's pause before it connects again after its connection was closed before the verdict (the server
// was not listening yet, or closed it to make room under a flood).
constexpr absl::Duration kRetryPause = absl::Milliseconds(20);

absl::string_view Bytes(const void* data, size_t size) {
  return absl::string_view(static_cast<const char*>(data), size);
}

// Sends header, payload and (with `mac`) the tag over both.
absl::Status SendResponse(const Socket& socket, MessageMac* mac, const absl::Status& status,
                          const std::string& value, int64_t number, absl::Time deadline) {
  const std::string message =
      status.ok() ? std::string() : std::string(status.message().substr(0, kMaxErrorReply));
  const std::string& payload = status.ok() ? value : message;
  ResponseHeader resp{};
  resp.code = static_cast<uint8_t>(status.code());
  resp.len = static_cast<uint32_t>(payload.size());
  resp.number = number;
  resp.magic = kMagic;
  RETURN_IF_ERROR(SendAll(socket, &resp, sizeof(resp), deadline));
  RETURN_IF_ERROR(SendAll(socket, payload.data(), payload.size(), deadline));
  if (mac == nullptr) return absl::OkStatus();
  const MacTag tag = mac->Next({Bytes(&resp, sizeof(resp)), payload});
  return SendAll(socket, tag.data(), tag.size(), deadline);
}

// After a refusal that ends the connection: FIN after the reply, then the bytes the client already sent are
// read and dropped (bounded in bytes and time, into a small buffer) so that closing does not reset the
// connection before the client has read the reason.
void DrainAfterRefusal(const Socket& socket) {
  ::shutdown(socket.fd(), SHUT_WR);
  char sink[4096];
  const absl::Time end = absl::Now() + absl::Milliseconds(500);
  size_t drained = 0;
  while (drained < (4u << 20)) {
    absl::StatusOr<bool> readable = WaitReadable(socket, end - absl::Now());
    if (!readable.ok() || !*readable) return;
    const ssize_t n = ::recv(socket.fd(), sink, sizeof(sink), MSG_DONTWAIT);
    if (n <= 0) return;  // EOF, or an error: nothing left to protect
    drained += static_cast<size_t>(n);
  }
}

}  // namespace

struct TcpStore::Response {
  std::string payload;
  int64_t number = 0;
};

absl::StatusOr<std::unique_ptr<TcpStore>> TcpStore::Create(const TcpStoreOptions& options) {
  std::unique_ptr<TcpStore> store(new TcpStore(options));
  if (options.is_server) {
    std::string bind = options.bind_addr;
    if (bind.empty() && options.auth.token.empty()) {
      bind = "127.0.0.1";
      std::fprintf(stderr,
                   "rendezvous store: no --auth_token (or %s), so it listens on 127.0.0.1 only; give every "
                   "rank a token, or --iface_addr, for ranks on other hosts\n",
                   kAuthTokenEnv);
    }
    absl::StatusOr<Socket> listener = ListenTcp(bind, options.master_port);
    if (!listener.ok()) {
      return Annotate(listener.status(), "rendezvous store (rank 0, --master_port / MASTER_PORT)");
    }
    store->listener_ = std::move(*listener);
    ASSIGN_OR_RETURN(store->port_, LocalPort(store->listener_));
    store->accept_thread_ = std::thread([s = store.get()] { s->AcceptLoop(); });
    return store;
  }
  store->port_ = options.master_port;
  absl::MutexLock lock(&store->call_mu_);
  RETURN_IF_ERROR(store->ConnectClient(/*rejoining=*/false));
  return store;
}

absl::Status TcpStore::ConnectClient(bool rejoining) {
  const absl::Time deadline =
      absl::Now() + (rejoining ? std::min(options_.timeout, kRejoinWithin) : options_.timeout);
  const std::string where = absl::StrCat(options_.master_addr, ":", options_.master_port);
  HandshakeHello mine;
  mine.protocol = HandshakeProtocol::kStore;
  mine.rank = options_.rank;
  mine.world_size = options_.world_size;
  while (true) {
    absl::StatusOr<Socket> conn = ConnectTcp(options_.master_addr, options_.master_port, deadline);
    if (!conn.ok()) {
      return absl::Status(conn.status().code(),
                          absl::StrCat("rendezvous store (rank 0) unreachable: ", conn.status().message(),
                                       "; check --master_addr/--master_port and that rank 0 started"));
    }
    conn->set_peer_name(absl::StrCat("rendezvous store at ", where));
    SessionKeys keys;
    absl::StatusOr<HandshakeHello> server = ClientHandshake(*conn, options_.auth, mine, deadline, &keys);
    if (server.ok()) {
      connection_ = std::move(*conn);
      send_mac_ = keys.enabled ? std::make_unique<MessageMac>(keys.client_to_server) : nullptr;
      recv_mac_ = keys.enabled ? std::make_unique<MessageMac>(keys.server_to_client) : nullptr;
      return absl::OkStatus();
    }
    if (absl::IsInvalidArgument(server.status()) &&
        absl::StrContains(server.status().message(), "did not start with a psring hello")) {
      return absl::UnavailableError(absl::StrCat("unexpected reply from ", where,
                                                 ": not a psring rendezvous store (another service on that "
                                                 "port?); check --master_addr/--master_port"));
    }
    // The server closed the connection before its verdict: at its connection limit, or shutting down. Try
    // again until the deadline; any other refusal is final.
    // A rank joining again may find the server still holding its broken connection (it notices the end at
    // its next read): that one goes away, so keep trying too.
    const bool retry =
        absl::IsUnavailable(server.status()) || (rejoining && absl::IsAlreadyExists(server.status()));
    if (!retry || absl::Now() >= deadline) return server.status();
    absl::SleepFor(kRetryPause);
  }
}

TcpStore::~TcpStore() {
  if (!options_.is_server) return;
  stop_accepting_ = true;
  if (accept_thread_.joinable()) accept_thread_.join();
  {
    absl::MutexLock lock(&clients_mu_);
    auto all_gone = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(clients_mu_) { return active_clients_ == 0; };
    clients_mu_.AwaitWithTimeout(absl::Condition(&all_gone),
                                 abandoned_ ? absl::ZeroDuration() : options_.shutdown_grace);
  }
  force_stop_ = true;
  table_.Close();
  std::list<Client> clients;
  {
    absl::MutexLock lock(&clients_mu_);
    for (Client& c : clients_) c.socket.Shutdown();
    clients.swap(clients_);
  }
  for (Client& c : clients) c.thread.join();
}

int TcpStore::MaxConnections() const {
  if (options_.max_connections > 0) return options_.max_connections;
  return options_.world_size > 0 ? 4 * options_.world_size + 16 : 64;
}

int TcpStore::open_connections() {
  absl::MutexLock lock(&clients_mu_);
  int open = 0;
  for (const Client& c : clients_) open += c.done ? 0 : 1;
  return open;
}

void TcpStore::AcceptLoop() {
  while (!stop_accepting_) {
    // Join the handlers that finished, so that threads and sockets do not pile up over a long job.
    std::list<Client> finished;
    {
      absl::MutexLock lock(&clients_mu_);
      for (auto it = clients_.begin(); it != clients_.end();) {
        auto next = std::next(it);
        if (it->done) finished.splice(finished.end(), clients_, it);
        it = next;
      }
    }
    for (Client& c : finished) c.thread.join();

    absl::StatusOr<Socket> accepted = AcceptTcp(listener_, absl::Now() + absl::Milliseconds(100));
    if (!accepted.ok()) continue;  // timeout slice, or a transient accept error: keep serving
    const std::string peer = accepted->peer_name();
    const std::string source = peer.substr(0, peer.rfind(':'));
    absl::MutexLock lock(&clients_mu_);
    if (!MakeRoom(source)) {
      RecordRefusal(absl::ResourceExhaustedError(
          absl::StrCat("a connection from ", peer, ": ", MaxConnections(),
                       " clients are connected already (TcpStoreOptions::max_connections)")));
      continue;  // closed by the Socket's destructor, before any byte is read
    }
    clients_.emplace_back();
    Client* client = &clients_.back();
    // A rank sends its whole hello right after connecting, so it is usually here already: counting it now
    // (rather than once the handler thread has read it) keeps the rank's connection out of reach of
    // connections that arrive after it and send less.
    char peek[kHelloWireBytes];
    const ssize_t waiting = ::recv(accepted->fd(), peek, sizeof(peek), MSG_PEEK | MSG_DONTWAIT);
    client->stage = waiting >= static_cast<ssize_t>(sizeof(peek)) ? Stage::kHello
                    : waiting > 0                                 ? Stage::kSpoke
                                                                  : Stage::kSilent;
    client->source = source;
    client->socket = std::move(*accepted);
    client->socket.set_peer_name("store client");
    client->thread = std::thread([this, client] { Serve(client); });
  }
}

bool TcpStore::MakeRoom(const std::string& source) {
  int handshaking = 0, from_source = 0, authenticated = 0;
  for (const Client& c : clients_) {
    if (c.done || c.evicted) continue;
    if (c.stage == Stage::kAuthenticated) {
      ++authenticated;
    } else {
      ++handshaking;
      from_source += c.source == source ? 1 : 0;
    }
  }
  // Without a world size nothing else bounds the authenticated connections.
  if (options_.world_size <= 0 && authenticated >= MaxConnections()) return false;
  // A host a rank authenticated from (the job's own) is exempt from the per-source cap; the cap in all
  // still bounds its connections.
  if (from_source >= options_.max_connections_per_source && known_hosts_.count(source) == 0) {
    if (EvictOne([&](const Client& c) { return c.source == source; })) --handshaking;
  }
  if (handshaking >= MaxConnections()) EvictOne([](const Client&) { return true; });
  return true;
}

template <typename Eligible>
bool TcpStore::EvictOne(Eligible eligible) {
  Client* victim = nullptr;
  bool victim_known = false;
  for (Client& c : clients_) {  // oldest first, so a tie keeps the older one as the victim
    if (c.done || c.evicted || c.stage == Stage::kAuthenticated || !eligible(c)) continue;
    const bool known = known_hosts_.count(c.source) != 0;
    // Strangers before known hosts, then the least progress.
    if (victim == nullptr || (victim_known && !known) ||
        (victim_known == known && c.stage < victim->stage)) {
      victim = &c;
      victim_known = known;
    }
  }
  if (victim == nullptr) return false;
  victim->evicted = true;  // counted once: its thread sees the shut-down socket and ends
  victim->socket.Shutdown();
  return true;
}

void TcpStore::SetStage(Client* client, Stage stage) {
  absl::MutexLock lock(&clients_mu_);
  if (client->stage < stage) client->stage = stage;
}

absl::Status TcpStore::AdmitRank(Client* client, int rank) {
  absl::MutexLock lock(&clients_mu_);
  if (client->evicted) {
    // Closed to make room while it proved the token: the socket is shut down, the client retries.
    return absl::ResourceExhaustedError("the store closed this connection to make room for newer ones");
  }
  if (options_.world_size > 0) {
    if (rank < 1 || rank >= options_.world_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", rank, " is not expected: this job has --world_size=", options_.world_size,
                       " (ranks 1..", options_.world_size - 1, " connect to rank 0's store)"));
    }
    if (!joined_ranks_.insert(rank).second) {
      return absl::AlreadyExistsError(absl::StrCat(
          "rank ", rank, " is connected to this job's store already; are two processes using the same --rank?"));
    }
  }
  // Counted as authenticated from here on (never evicted), before the verdict goes out.
  client->stage = Stage::kAuthenticated;
  known_hosts_.insert(client->source);
  ++active_clients_;
  return absl::OkStatus();
}

void TcpStore::RecordRefusal(const absl::Status& why) {
  const int64_t refused = ++refused_;
  absl::MutexLock lock(&refusal_mu_);
  last_refusal_ = why;
  if (refused <= options_.refusals_logged) {
    std::fprintf(stderr, "rendezvous store: refused a connection: %s%s\n", std::string(why.message()).c_str(),
                 refused == options_.refusals_logged ? " (further refusals are counted, not printed)" : "");
  }
}

void TcpStore::Serve(Client* client) {
  HandshakeHello mine;
  mine.protocol = HandshakeProtocol::kStore;
  mine.rank = 0;
  mine.world_size = options_.world_size;
  const absl::Time deadline = absl::Now() + options_.handshake_timeout;
  absl::StatusOr<HandshakeHello> hello = absl::DeadlineExceededError(absl::StrCat(
      "a connection from ", client->source, " sent nothing within ",
      absl::FormatDuration(options_.first_bytes_timeout), " (TcpStoreOptions::first_bytes_timeout)"));
  absl::StatusOr<bool> readable = WaitReadable(client->socket, options_.first_bytes_timeout);
  bool admitted = false;  // AdmitRank accepted it: it counts in active_clients_ (and joined_ranks_)
  int admitted_rank = -1;
  if (!readable.ok()) {
    hello = readable.status();
  } else if (*readable) {
    SetStage(client, Stage::kSpoke);
    ServerHandshakeSteps steps;
    steps.step_timeout = options_.handshake_step_timeout;
    steps.on_hello = [this, client] { SetStage(client, Stage::kHello); };
    SessionKeys keys;
    hello = ServerHandshake(
        client->socket, options_.auth, mine,
        [&](const HandshakeHello& c) {
          absl::Status admit = AdmitRank(client, c.rank);
          admitted = admit.ok();
          admitted_rank = c.rank;
          return admit;
        },
        deadline, &keys, &steps);
    if (hello.ok() && !ServeRequests(client->socket, keys)) {
      RecordRefusal(absl::InvalidArgumentError(
          absl::StrCat(client->socket.peer_name(),
                       " broke the store protocol, sent a request over the limits or one that "
                       "failed its integrity check")));
    }
  }
  {
    absl::MutexLock lock(&clients_mu_);
    if (admitted) {
      --active_clients_;
      // The rank may join again (with the token) on a new connection.
      if (options_.world_size > 0) joined_ranks_.erase(admitted_rank);
    }
    if (!hello.ok() && client->evicted && !admitted) {
      hello = absl::ResourceExhaustedError(absl::StrCat(
          "a connection from ", client->source, " that had not authenticated was closed to make room for newer "
          "ones (TcpStoreOptions::max_connections[_per_source])"));
    }
  }
  if (!hello.ok()) RecordRefusal(hello.status());
  client->socket.Shutdown();
  client->done = true;
}

bool TcpStore::ServeRequests(const Socket& socket, const SessionKeys& keys) {
  std::unique_ptr<MessageMac> recv_mac, send_mac;
  if (keys.enabled) {
    recv_mac = std::make_unique<MessageMac>(keys.client_to_server);
    send_mac = std::make_unique<MessageMac>(keys.server_to_client);
  }
  MacTag tag;
  std::string key, value;
  while (!force_stop_) {
    absl::StatusOr<bool> readable = WaitReadable(socket, absl::Milliseconds(100));
    if (!readable.ok()) return true;
    if (!*readable) continue;
    const absl::Time deadline = absl::Now() + options_.timeout;
    RequestHeader req;
    if (!RecvAll(socket, &req, sizeof(req), deadline).ok()) return true;  // the client hung up
    if (req.magic != kMagic) return false;
    if (req.key_len > options_.max_key_bytes || req.value_len > options_.max_value_bytes) {
      // Refused before a byte of it is read or allocated; the stream cannot be resynchronised cheaply, so the
      // connection ends here.
      (void)SendResponse(socket, send_mac.get(),
                         absl::ResourceExhaustedError(absl::StrCat(
                             "store request with a key of ", req.key_len, " bytes and a value of ",
                             req.value_len, " bytes refused: the limits are ", options_.max_key_bytes,
                             " and ", options_.max_value_bytes, " bytes")),
                         "", 0, deadline);
      DrainAfterRefusal(socket);
      return false;
    }
    key.resize(req.key_len);
    value.resize(req.value_len);
    if (!RecvAll(socket, key.data(), key.size(), deadline).ok() ||
        !RecvAll(socket, value.data(), value.size(), deadline).ok()) {
      return false;
    }
    if (recv_mac != nullptr) {
      if (!RecvAll(socket, tag.data(), tag.size(), deadline).ok()) return false;
      if (!recv_mac->Check({Bytes(&req, sizeof(req)), key, value}, tag)) {
        (void)SendResponse(socket, send_mac.get(),
                           absl::DataLossError("the store request failed its integrity check: it was changed "
                                               "between this rank and the store (a faulty or hostile network "
                                               "path); the store closed the connection"),
                           "", 0, deadline);
        DrainAfterRefusal(socket);
        return false;
      }
    }
    absl::Status status;
    std::string payload;
    int64_t number = 0;
    switch (req.op) {
      case store_wire::kSet:
        status = table_.Set(key, value);
        break;
      case store_wire::kGet: {
        if (req.arg < 0) {
          status = absl::InvalidArgumentError("store Get with a negative timeout");
          break;
        }
        absl::StatusOr<std::string> got = table_.Get(key, absl::Milliseconds(req.arg));
        status = got.status();
        if (got.ok()) payload = std::move(*got);
        break;
      }
      case store_wire::kAdd: {
        absl::StatusOr<int64_t> sum = table_.Add(key, req.arg);
        status = sum.status();
        if (sum.ok()) number = *sum;
        break;
      }
      default:
        status = absl::InvalidArgumentError(absl::StrCat("unknown store op ", req.op));
    }
    if (!SendResponse(socket, send_mac.get(), status, payload, number, deadline).ok()) return true;
  }
  return true;
}

absl::StatusOr<TcpStore::Response> TcpStore::Call(uint8_t op, const std::string& key,
                                                  const std::string& value, int64_t arg,
                                                  absl::Duration wait) {
  if (key.size() > options_.max_key_bytes || value.size() > options_.max_value_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("store keys and values are limited to ",
                                                   options_.max_key_bytes, " and ", options_.max_value_bytes,
                                                   " bytes (TcpStoreOptions)"));
  }
  absl::MutexLock lock(&call_mu_);
  if (!connection_.valid()) {
    // The connection broke in an earlier call: join again (a new handshake, with the token), once, and
    // briefly, so that ranks whose store is gone (rank 0 exited) still fail fast.
    if (rejoin_failed_) {
      return absl::FailedPreconditionError(
          "the store connection broke and joining again failed earlier; recreate the store");
    }
    absl::Status rejoined = ConnectClient(/*rejoining=*/true);
    rejoin_failed_ = !rejoined.ok();
    if (!rejoined.ok()) {
      return absl::Status(rejoined.code(),
                          absl::StrCat("the store connection broke earlier and joining again "
                                       "failed: ",
                                       rejoined.message()));
    }
  }
  const absl::Time deadline = absl::Now() + wait + options_.timeout;
  RequestHeader req{};
  req.op = op;
  req.key_len = static_cast<uint32_t>(key.size());
  req.value_len = static_cast<uint32_t>(value.size());
  req.magic = kMagic;
  req.arg = arg;
  absl::Status io = SendAll(connection_, &req, sizeof(req), deadline);
  if (io.ok()) io = SendAll(connection_, key.data(), key.size(), deadline);
  if (io.ok()) io = SendAll(connection_, value.data(), value.size(), deadline);
  if (io.ok() && send_mac_ != nullptr) {
    const MacTag tag = send_mac_->Next({Bytes(&req, sizeof(req)), key, value});
    io = SendAll(connection_, tag.data(), tag.size(), deadline);
  }
  ResponseHeader resp{};
  if (io.ok()) io = RecvAll(connection_, &resp, sizeof(resp), deadline);
  const size_t reply_limit =
      resp.code == 0 ? std::max(options_.max_value_bytes, kMinReplyLimit) : kMinReplyLimit;
  if (io.ok() && (resp.magic != kMagic || resp.len > reply_limit ||
                  resp.code > static_cast<uint8_t>(absl::StatusCode::kUnauthenticated))) {
    io = absl::UnavailableError(absl::StrCat("unexpected reply from ", options_.master_addr, ":",
                                             options_.master_port,
                                             ": not a psring rendezvous store (another service on that "
                                             "port?); check --master_addr/--master_port"));
  }
  Response out;
  if (io.ok()) {
    out.payload.resize(resp.len);
    io = RecvAll(connection_, out.payload.data(), out.payload.size(), deadline);
  }
  if (io.ok() && recv_mac_ != nullptr) {
    MacTag tag;
    io = RecvAll(connection_, tag.data(), tag.size(), deadline);
    if (io.ok() && !recv_mac_->Check({Bytes(&resp, sizeof(resp)), out.payload}, tag)) {
      io = absl::DataLossError(absl::StrCat(
          "the reply of the rendezvous store at ", options_.master_addr, ":", options_.master_port,
          " failed its integrity check: it was changed on the way (a faulty or hostile network path)"));
    }
  }
  if (!io.ok()) {
    connection_.Close();  // the stream is out of sync now
    return io;
  }
  if (resp.code != 0) return absl::Status(static_cast<absl::StatusCode>(resp.code), out.payload);
  out.number = resp.number;
  return out;
}

absl::Status TcpStore::Set(const std::string& key, const std::string& value) {
  if (options_.is_server) return table_.Set(key, value);
  return Call(store_wire::kSet, key, value, 0, absl::ZeroDuration()).status();
}

absl::StatusOr<std::string> TcpStore::Get(const std::string& key, absl::Duration timeout) {
  if (options_.is_server) {
    absl::StatusOr<std::string> got = table_.Get(key, timeout);
    const int64_t refused = refused_;
    if (!absl::IsDeadlineExceeded(got.status()) || refused == 0) return got;
    // A rank that was refused is not missing: say why it was refused rather than "check --world_size".
    absl::MutexLock lock(&refusal_mu_);
    return absl::DeadlineExceededError(absl::StrCat(
        "store key '", key, "' was not set within ", absl::FormatDuration(timeout), ": the store refused ",
        refused, refused == 1 ? " connection" : " connections", ", the last because ", last_refusal_.message()));
  }
  ASSIGN_OR_RETURN(Response r, Call(store_wire::kGet, key, "", absl::ToInt64Milliseconds(timeout), timeout));
  return std::move(r.payload);
}

absl::StatusOr<int64_t> TcpStore::Add(const std::string& key, int64_t delta) {
  if (options_.is_server) return table_.Add(key, delta);
  ASSIGN_OR_RETURN(Response r, Call(store_wire::kAdd, key, "", delta, absl::ZeroDuration()));
  return r.number;
}

}  // namespace psring
