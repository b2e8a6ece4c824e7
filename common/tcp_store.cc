#include "common/tcp_store.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace psring {
namespace {

// Wire format (host byte order; all ranks of a job share an architecture):
//   request:  RequestHeader, key bytes, value bytes
//   response: ResponseHeader, payload (the value, or the error message when code != 0)
enum Op : uint8_t { kSet = 1, kGet = 2, kAdd = 3 };

struct RequestHeader {
  uint8_t op;
  uint8_t reserved[3];
  uint32_t key_len;
  uint32_t value_len;
  uint32_t magic;
  int64_t arg;  // Get: timeout in ms; Add: delta
};

struct ResponseHeader {
  uint8_t code;  // absl::StatusCode
  uint8_t reserved[3];
  uint32_t len;
  int64_t number;  // Add's result
  uint32_t magic;
  uint32_t reserved2;
};

constexpr uint32_t kMagic = 0x5053544f;  // "PSTO"
constexpr uint32_t kMaxLen = 64u << 20;

}  // namespace

struct TcpStore::Response {
  std::string payload;
  int64_t number = 0;
};

absl::StatusOr<std::unique_ptr<TcpStore>> TcpStore::Create(const TcpStoreOptions& options) {
  std::unique_ptr<TcpStore> store(new TcpStore(options));
  if (options.is_server) {
    absl::StatusOr<Socket> listener = ListenTcp(options.bind_addr, options.master_port);
    if (!listener.ok()) {
      return Annotate(listener.status(), "rendezvous store (rank 0, --master_port / MASTER_PORT)");
    }
    store->listener_ = std::move(*listener);
    ASSIGN_OR_RETURN(store->port_, LocalPort(store->listener_));
    store->accept_thread_ = std::thread([s = store.get()] { s->AcceptLoop(); });
    return store;
  }
  absl::StatusOr<Socket> conn =
      ConnectTcp(options.master_addr, options.master_port, absl::Now() + options.timeout);
  if (!conn.ok()) {
    return absl::Status(conn.status().code(),
                        absl::StrCat("rendezvous store (rank 0) unreachable: ", conn.status().message(),
                                     "; check --master_addr/--master_port and that rank 0 started"));
  }
  conn->set_peer_name(absl::StrCat("rendezvous store at ", options.master_addr, ":", options.master_port));
  store->port_ = options.master_port;
  absl::MutexLock lock(&store->call_mu_);
  store->connection_ = std::move(*conn);
  return store;
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
  std::vector<std::thread> handlers;
  {
    absl::MutexLock lock(&clients_mu_);
    for (auto& c : clients_) c->Shutdown();
    handlers.swap(handlers_);
  }
  for (auto& t : handlers) t.join();
}

void TcpStore::AcceptLoop() {
  while (!stop_accepting_) {
    absl::StatusOr<Socket> client = AcceptTcp(listener_, absl::Now() + absl::Milliseconds(100));
    if (!client.ok()) continue;  // timeout slice, or a transient accept error: keep serving
    client->set_peer_name("store client");
    absl::MutexLock lock(&clients_mu_);
    clients_.push_back(std::make_unique<Socket>(std::move(*client)));
    ++active_clients_;
    handlers_.emplace_back([this, c = clients_.back().get()] { Serve(c); });
  }
}

void TcpStore::Serve(Socket* client) {
  std::string key, value;
  while (!force_stop_) {
    absl::StatusOr<bool> readable = WaitReadable(*client, absl::Milliseconds(100));
    if (!readable.ok()) break;
    if (!*readable) continue;
    const absl::Time deadline = absl::Now() + options_.timeout;
    RequestHeader req;
    if (!RecvAll(*client, &req, sizeof(req), deadline).ok()) break;  // the client hung up
    if (req.magic != kMagic || req.key_len > kMaxLen || req.value_len > kMaxLen) break;
    key.resize(req.key_len);
    value.resize(req.value_len);
    if (!RecvAll(*client, key.data(), key.size(), deadline).ok() ||
        !RecvAll(*client, value.data(), value.size(), deadline).ok()) {
      break;
    }
    absl::Status status;
    std::string payload;
    int64_t number = 0;
    switch (req.op) {
      case kSet:
        status = table_.Set(key, value);
        break;
      case kGet: {
        absl::StatusOr<std::string> got = table_.Get(key, absl::Milliseconds(req.arg));
        status = got.status();
        if (got.ok()) payload = std::move(*got);
        break;
      }
      case kAdd: {
        absl::StatusOr<int64_t> sum = table_.Add(key, req.arg);
        status = sum.status();
        if (sum.ok()) number = *sum;
        break;
      }
      default:
        status = absl::InvalidArgumentError(absl::StrCat("unknown store op ", req.op));
    }
    if (!status.ok()) payload = std::string(status.message());
    ResponseHeader resp{};
    resp.code = static_cast<uint8_t>(status.code());
    resp.len = static_cast<uint32_t>(payload.size());
    resp.number = number;
    resp.magic = kMagic;
    if (!SendAll(*client, &resp, sizeof(resp), deadline).ok() ||
        !SendAll(*client, payload.data(), payload.size(), deadline).ok()) {
      break;
    }
  }
  absl::MutexLock lock(&clients_mu_);
  --active_clients_;
}

absl::StatusOr<TcpStore::Response> TcpStore::Call(uint8_t op, const std::string& key,
                                                  const std::string& value, int64_t arg,
                                                  absl::Duration wait) {
  if (key.size() > kMaxLen || value.size() > kMaxLen) {
    return absl::InvalidArgumentError("store keys and values are limited to 64 MiB");
  }
  absl::MutexLock lock(&call_mu_);
  if (!connection_.valid()) {
    return absl::FailedPreconditionError("the store connection failed earlier; recreate the store");
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
  ResponseHeader resp{};
  if (io.ok()) io = RecvAll(connection_, &resp, sizeof(resp), deadline);
  if (io.ok() && (resp.magic != kMagic || resp.len > kMaxLen ||
                  resp.code > static_cast<uint8_t>(absl::StatusCode::kUnauthenticated))) {
    io = absl::UnavailableError(absl::StrCat(
        "unexpected reply from ", options_.master_addr, ":", options_.master_port,
        ": not a psring rendezvous store (another service on that port?); check --master_addr/--master_port"));
  }
  Response out;
  if (io.ok()) {
    out.payload.resize(resp.len);
    io = RecvAll(connection_, out.payload.data(), out.payload.size(), deadline);
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
  return Call(kSet, key, value, 0, absl::ZeroDuration()).status();
}

absl::StatusOr<std::string> TcpStore::Get(const std::string& key, absl::Duration timeout) {
  if (options_.is_server) return table_.Get(key, timeout);
  ASSIGN_OR_RETURN(Response r, Call(kGet, key, "", absl::ToInt64Milliseconds(timeout), timeout));
  return std::move(r.payload);
}

absl::StatusOr<int64_t> TcpStore::Add(const std::string& key, int64_t delta) {
  if (options_.is_server) return table_.Add(key, delta);
  ASSIGN_OR_RETURN(Response r, Call(kAdd, key, "", delta, absl::ZeroDuration()));
  return r.number;
}

}  // namespace psring
