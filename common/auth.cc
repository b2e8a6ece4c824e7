#include "common/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <cstdio>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace psring {
namespace {

// Host byte order, as the store's and the ring's other messages: all ranks of a job share an architecture.
struct HelloWire {
  uint32_t magic;
  uint32_t version;
  uint32_t protocol;
  int32_t rank;
  int32_t world_size;
  uint32_t has_token;
  uint32_t job_id_len;
  uint32_t reserved;
  int32_t peer_rank;        // HandshakeHello::peer_rank
  uint32_t data_integrity;  // 1: tags every message after the handshake (with a token)
  uint8_t nonce[32];
};
static_assert(sizeof(HelloWire) == kHelloWireBytes, "the hello's layout is part of the protocol");

struct VerdictWire {
  uint32_t magic;
  uint32_t code;  // absl::StatusCode
  uint32_t message_len;
  uint32_t reserved;
};

constexpr uint32_t kHelloMagic = 0x50534155;    // "PSAU"
constexpr uint32_t kVerdictMagic = 0x50535644;  // "PSVD"
constexpr uint32_t kVersion = 3;                // 2: peer_rank, data integrity; 3: a derived key
constexpr size_t kMacBytes = 32;
constexpr size_t kMaxVerdictMessage = 4096;

using Mac = std::array<uint8_t, kMacBytes>;

// The handshake's key, DeriveProtocolKey(token, kRingKeyLabel), wiped when it goes out of scope. Empty (no
// key) without a token.
class RingKey {
 public:
  explicit RingKey(const AuthConfig& auth) : set_(!auth.token.empty()) {
    if (set_) key_ = DeriveProtocolKey(auth.token, kRingKeyLabel);
  }
  ~RingKey() { WipeBytes(key_.data(), key_.size()); }
  RingKey(const RingKey&) = delete;
  RingKey& operator=(const RingKey&) = delete;

  bool set() const { return set_; }
  absl::string_view view() const {
    return absl::string_view(reinterpret_cast<const char*>(key_.data()), key_.size());
  }

 private:
  bool set_;
  std::array<uint8_t, 32> key_{};
};

// One side's hello as it goes on the wire (fixed part, then the job id).
std::string EncodeHello(const HandshakeHello& hello, const AuthConfig& auth, const uint8_t (&nonce)[32]) {
  HelloWire w{};
  w.magic = kHelloMagic;
  w.version = kVersion;
  w.protocol = static_cast<uint32_t>(hello.protocol);
  w.rank = hello.rank;
  w.world_size = hello.world_size;
  w.has_token = auth.token.empty() ? 0 : 1;
  w.job_id_len = static_cast<uint32_t>(auth.job_id.size());
  w.peer_rank = hello.peer_rank;
  w.data_integrity = auth.data_integrity ? 1 : 0;
  std::memcpy(w.nonce, nonce, sizeof(nonce));
  std::string out(reinterpret_cast<const char*>(&w), sizeof(w));
  out += auth.job_id;
  return out;
}

absl::Status FreshNonce(uint8_t (&nonce)[32]) {
  if (RAND_bytes(nonce, sizeof(nonce)) != 1) {
    return absl::InternalError("OpenSSL's RAND_bytes failed to make a nonce (no entropy source?)");
  }
  return absl::OkStatus();
}

// Reads the peer's hello; `encoded` gets its bytes as sent (for the transcript).
absl::StatusOr<HelloWire> ReadHello(const Socket& socket, HandshakeProtocol expected, absl::Time deadline,
                                    std::string* job_id, std::string* encoded) {
  HelloWire w{};
  // The magic and version first, so that a stranger's bytes are refused at once rather than after waiting
  // for a whole hello's worth of them.
  constexpr size_t kPrefix = offsetof(HelloWire, protocol);
  char* raw = reinterpret_cast<char*>(&w);
  RETURN_IF_ERROR(RecvAll(socket, raw, kPrefix, deadline));
  if (w.magic == kHelloMagic && w.version == kVersion) {
    RETURN_IF_ERROR(RecvAll(socket, raw + kPrefix, sizeof(w) - kPrefix, deadline));
  }
  if (w.magic != kHelloMagic || w.version != kVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat(socket.peer_name(),
                     " did not start with a psring hello; is another program using this address, or a "
                     "different psring version?"));
  }
  if (w.protocol != static_cast<uint32_t>(expected)) {
    return absl::InvalidArgumentError(absl::StrCat(socket.peer_name(), " speaks another psring protocol (",
                                                   w.protocol, ", expected ", static_cast<uint32_t>(expected),
                                                   "): a ring link and a store address mixed up?"));
  }
  if (w.job_id_len > kMaxJobIdBytes) {
    return absl::InvalidArgumentError(absl::StrCat(socket.peer_name(), " announced a job id of ",
                                                   w.job_id_len, " bytes (at most ", kMaxJobIdBytes, ")"));
  }
  job_id->resize(w.job_id_len);
  RETURN_IF_ERROR(RecvAll(socket, job_id->data(), job_id->size(), deadline));
  encoded->assign(reinterpret_cast<const char*>(&w), sizeof(w));
  *encoded += *job_id;
  return w;
}

absl::string_view AsView(const Mac& mac) {
  return absl::string_view(reinterpret_cast<const char*>(mac.data()), mac.size());
}

Mac TranscriptMac(const RingKey& key, absl::string_view side, const std::string& client_hello,
                  const std::string& server_hello) {
  Mac mac{};
  if (!key.set()) return mac;
  return HmacSha256(key.view(), absl::StrCat("psring-auth-v3 ", side, client_hello, server_hello));
}

// Fills `keys` (when asked for) after both proofs went through; see auth.h for the derivation.
void DeriveKeys(const AuthConfig& auth, const RingKey& key, const std::string& client_hello,
                const std::string& server_hello, const Mac& server_mac, const Mac& client_mac,
                SessionKeys* keys) {
  if (keys == nullptr) return;
  *keys = SessionKeys{};
  if (!key.set() || !auth.data_integrity) return;
  Mac prk = HmacSha256(key.view(), absl::StrCat("psring-kdf-v3", client_hello, server_hello,
                                                AsView(server_mac), AsView(client_mac)));
  keys->enabled = true;
  keys->client_to_server = HmacSha256(AsView(prk), "client->server");
  keys->server_to_client = HmacSha256(AsView(prk), "server->client");
  WipeBytes(prk.data(), prk.size());
}

absl::Status SendVerdict(const Socket& socket, const absl::Status& status, absl::Time deadline) {
  const std::string message(status.message().substr(0, kMaxVerdictMessage));
  VerdictWire v{};
  v.magic = kVerdictMagic;
  v.code = static_cast<uint32_t>(status.code());
  v.message_len = static_cast<uint32_t>(message.size());
  RETURN_IF_ERROR(SendAll(socket, &v, sizeof(v), deadline));
  return SendAll(socket, message.data(), message.size(), deadline);
}

HandshakeHello FromWire(const HelloWire& w, std::string job_id) {
  HandshakeHello h;
  h.protocol = static_cast<HandshakeProtocol>(w.protocol);
  h.rank = w.rank;
  h.world_size = w.world_size;
  h.job_id = std::move(job_id);
  h.peer_rank = w.peer_rank;
  return h;
}

std::string RankName(int32_t rank) {
  return rank < 0 ? std::string("a client") : absl::StrCat("rank ", rank);
}

}  // namespace

AuthConfig::~AuthConfig() { WipeBytes(token.data(), token.size()); }

SessionKeys::~SessionKeys() {
  WipeBytes(client_to_server.data(), client_to_server.size());
  WipeBytes(server_to_client.data(), server_to_client.size());
}

void WipeBytes(void* data, size_t size) {
  if (size > 0) OPENSSL_cleanse(data, size);
}

std::array<uint8_t, 32> DeriveProtocolKey(absl::string_view token, absl::string_view label) {
  return HmacSha256(token, label);
}

absl::StatusOr<AuthConfig> AuthConfigFrom(const std::string& token_flag, const std::string& token_file_flag,
                                          const std::string& job_flag) {
  AuthConfig auth;
  ASSIGN_OR_RETURN(auth.token, LoadAuthToken(token_flag, token_file_flag));
  auth.job_id = job_flag;
  if (auth.job_id.empty()) {
    const char* env = std::getenv(kJobIdEnv);
    if (env != nullptr) auth.job_id = env;
  }
  if (auth.job_id.size() > kMaxJobIdBytes) {
    return absl::InvalidArgumentError(absl::StrCat("--job_id (or ", kJobIdEnv, ") has ", auth.job_id.size(),
                                                   " bytes; at most ", kMaxJobIdBytes));
  }
  return auth;
}

std::array<uint8_t, 32> HmacSha256(absl::string_view key, absl::string_view message) {
  Mac out{};
  unsigned int len = 0;
  // HMAC() only fails for an unknown digest or an allocation failure, neither of which a caller can fix.
  const unsigned char* ok =
      HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(message.data()), message.size(), out.data(), &len);
  if (ok == nullptr || len != out.size()) std::abort();
  return out;
}

bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

absl::StatusOr<HandshakeHello> ClientHandshake(const Socket& socket, const AuthConfig& auth,
                                               const HandshakeHello& mine, absl::Time deadline,
                                               SessionKeys* keys) {
  const RingKey key(auth);
  uint8_t nonce[32];
  RETURN_IF_ERROR(FreshNonce(nonce));
  const std::string client_hello = EncodeHello(mine, auth, nonce);
  RETURN_IF_ERROR(SendAll(socket, client_hello.data(), client_hello.size(), deadline));

  std::string server_job, server_hello;
  ASSIGN_OR_RETURN(HelloWire theirs, ReadHello(socket, mine.protocol, deadline, &server_job, &server_hello));
  Mac server_mac{};
  RETURN_IF_ERROR(RecvAll(socket, server_mac.data(), server_mac.size(), deadline));
  if (!auth.token.empty()) {
    if (theirs.has_token == 0) {
      return absl::UnauthenticatedError(
          absl::StrCat(socket.peer_name(),
                       " runs without an auth token but this rank has one; give every rank of the job "
                       "the same --auth_token (or ",
                       kAuthTokenEnv, ")"));
    }
    const Mac expected = TranscriptMac(key, "server", client_hello, server_hello);
    if (!ConstantTimeEquals(AsView(expected), AsView(server_mac))) {
      return absl::UnauthenticatedError(absl::StrCat(
          socket.peer_name(), " failed to prove the auth token: it has another --auth_token (or ",
          kAuthTokenEnv, ") than this rank"));
    }
  }
  // Checked before this side's proof goes out, so that a server of the wrong rank learns nothing from it.
  if (mine.peer_rank >= 0 && theirs.rank != mine.peer_rank) {
    return absl::InvalidArgumentError(absl::StrCat(socket.peer_name(), " is rank ", theirs.rank,
                                                   ", not rank ", mine.peer_rank,
                                                   " as this rank expected; are two processes using the same "
                                                   "rank, or is its published address stale?"));
  }
  if (!auth.token.empty() && (theirs.data_integrity != 0) != auth.data_integrity) {
    return absl::InvalidArgumentError(absl::StrCat(
        socket.peer_name(), " runs with --data_integrity=", theirs.data_integrity != 0 ? "on" : "off",
        " and this rank with --data_integrity=", auth.data_integrity ? "on" : "off",
        "; give every rank the same setting"));
  }
  const Mac my_mac = TranscriptMac(key, "client", client_hello, server_hello);
  RETURN_IF_ERROR(SendAll(socket, my_mac.data(), my_mac.size(), deadline));

  VerdictWire verdict{};
  RETURN_IF_ERROR(RecvAll(socket, &verdict, sizeof(verdict), deadline));
  if (verdict.magic != kVerdictMagic || verdict.message_len > kMaxVerdictMessage ||
      verdict.code > static_cast<uint32_t>(absl::StatusCode::kUnauthenticated)) {
    return absl::InvalidArgumentError(
        absl::StrCat(socket.peer_name(), " sent a malformed handshake verdict; a different psring version?"));
  }
  std::string message(verdict.message_len, '\0');
  RETURN_IF_ERROR(RecvAll(socket, message.data(), message.size(), deadline));
  if (verdict.code != 0) {
    return absl::Status(static_cast<absl::StatusCode>(verdict.code),
                        absl::StrCat(socket.peer_name(), " refused this rank: ", message));
  }
  if (server_job != auth.job_id) {  // the server checked ours; this only guards a misbehaving one
    return absl::PermissionDeniedError(absl::StrCat("job id mismatch: this rank has '", auth.job_id, "', ",
                                                    socket.peer_name(), " has '",
                                                    absl::CHexEscape(server_job), "'"));
  }
  DeriveKeys(auth, key, client_hello, server_hello, server_mac, my_mac, keys);
  return FromWire(theirs, std::move(server_job));
}

absl::StatusOr<HandshakeHello> ServerHandshake(const Socket& socket, const AuthConfig& auth,
                                               const HandshakeHello& mine, const HelloCheck& check,
                                               absl::Time deadline, SessionKeys* keys,
                                               const ServerHandshakeSteps* steps) {
  // Each step's deadline: its own allowance from now, within the overall one.
  const absl::Duration step_timeout = steps != nullptr ? steps->step_timeout : absl::InfiniteDuration();
  auto step_deadline = [&] { return std::min(deadline, absl::Now() + step_timeout); };
  std::string client_job, client_hello;
  ASSIGN_OR_RETURN(HelloWire theirs,
                   ReadHello(socket, mine.protocol, step_deadline(), &client_job, &client_hello));
  if (steps != nullptr && steps->on_hello) steps->on_hello();
  const RingKey key(auth);
  uint8_t nonce[32];
  RETURN_IF_ERROR(FreshNonce(nonce));
  const std::string server_hello = EncodeHello(mine, auth, nonce);
  const Mac my_mac = TranscriptMac(key, "server", client_hello, server_hello);
  const absl::Time send_by = step_deadline();
  RETURN_IF_ERROR(SendAll(socket, server_hello.data(), server_hello.size(), send_by));
  RETURN_IF_ERROR(SendAll(socket, my_mac.data(), my_mac.size(), send_by));
  Mac client_mac{};
  HandshakeHello client = FromWire(theirs, std::move(client_job));
  const absl::Status got_mac = RecvAll(socket, client_mac.data(), client_mac.size(), step_deadline());
  if (absl::IsUnavailable(got_mac) && theirs.has_token != 0) {
    // A client with a token that hangs up right after our hello is one whose token did not verify our proof
    // (ClientHandshake then closes without sending its own): say so, rather than "closed the connection".
    return absl::UnauthenticatedError(
        auth.token.empty()
            ? absl::StrCat(RankName(client.rank), " has an auth token and this job runs without one (it hung up "
                           "after this side's hello); give every rank the same --auth_token (or ",
                           kAuthTokenEnv, "), or none")
            : absl::StrCat(RankName(client.rank), " hung up after this side proved the auth token: it has another "
                           "--auth_token (or ", kAuthTokenEnv, ") than this job, or it exited; give every rank "
                           "the same token"));
  }
  RETURN_IF_ERROR(got_mac);
  absl::Status verdict;
  if (!auth.token.empty()) {
    const Mac expected = TranscriptMac(key, "client", client_hello, server_hello);
    if (theirs.has_token == 0) {
      verdict = absl::UnauthenticatedError(
          absl::StrCat("this job requires an auth token and ", RankName(client.rank),
                       " has none; give every rank the same --auth_token (or ", kAuthTokenEnv, ")"));
    } else if (!ConstantTimeEquals(AsView(expected), AsView(client_mac))) {
      verdict = absl::UnauthenticatedError(
          absl::StrCat(RankName(client.rank), " failed to prove the auth token (another --auth_token or ",
                       kAuthTokenEnv, ")"));
    }
  } else if (theirs.has_token != 0) {
    verdict = absl::UnauthenticatedError(
        absl::StrCat("this job runs without an auth token but ", RankName(client.rank),
                     " has one; give every rank the same --auth_token (or ", kAuthTokenEnv, "), or none"));
  }
  if (verdict.ok() && client.job_id != auth.job_id) {
    verdict = absl::PermissionDeniedError(absl::StrCat(
        "job id mismatch: ", RankName(client.rank), " has '", absl::CHexEscape(client.job_id),
        "', this job is '", auth.job_id, "'; give every rank the same --job_id (or ", kJobIdEnv, ")"));
  }
  if (verdict.ok() && !auth.token.empty() && (theirs.data_integrity != 0) != auth.data_integrity) {
    verdict = absl::InvalidArgumentError(absl::StrCat(
        RankName(client.rank), " runs with --data_integrity=", theirs.data_integrity != 0 ? "on" : "off",
        " and this job with --data_integrity=", auth.data_integrity ? "on" : "off",
        "; give every rank the same setting"));
  }
  if (verdict.ok() && client.peer_rank >= 0 && client.peer_rank != mine.rank) {
    verdict = absl::InvalidArgumentError(absl::StrCat(RankName(client.rank), " meant to reach rank ",
                                                      client.peer_rank, " but reached rank ", mine.rank,
                                                      "; is its published address stale?"));
  }
  if (verdict.ok() && check) verdict = check(client);
  RETURN_IF_ERROR(SendVerdict(socket, verdict, step_deadline()));
  if (!verdict.ok()) return verdict;
  DeriveKeys(auth, key, client_hello, server_hello, my_mac, client_mac, keys);
  return client;
}

namespace {

// The contents of the token file `path` (named `source` in messages), refusing what another local user could
// read, change or redirect: a symbolic link, anything but a regular file, a group- or world-accessible mode.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path, const std::string& source) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    if (err == ELOOP) {
      return absl::PermissionDeniedError(absl::StrCat(
          source, " is a symbolic link; give the token file itself (links are not followed, so that nobody "
                  "can point it elsewhere)"));
    }
    const std::string message = absl::StrCat("cannot read ", source, ": ", std::strerror(err));
    return err == ENOENT ? absl::NotFoundError(message) : absl::PermissionDeniedError(message);
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    return absl::PermissionDeniedError(absl::StrCat("cannot stat ", source, ": ", std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::PermissionDeniedError(absl::StrCat(source, " is not a regular file; put the token in one"));
  }
  if ((st.st_mode & (S_IRGRP | S_IWGRP | S_IROTH | S_IWOTH)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%03o", static_cast<unsigned>(st.st_mode & 0777));
    return absl::PermissionDeniedError(absl::StrCat(source, " has mode ", mode,
                                                    ": other users may read or change the token; run `chmod 600 ",
                                                    path, "`"));
  }
  // Tokens are short; a file of more than 64 KiB is not one.
  constexpr size_t kMaxTokenFileBytes = 64 << 10;
  if (static_cast<uint64_t>(st.st_size) > kMaxTokenFileBytes) {
    return absl::InvalidArgumentError(absl::StrCat(source, " has ", st.st_size, " bytes; a token file holds the "
                                                   "token only (at most ", kMaxTokenFileBytes, " bytes)"));
  }
  std::string token(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < token.size()) {
    const ssize_t n = ::read(fd, token.data() + got, token.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      WipeBytes(token.data(), token.size());
      return absl::PermissionDeniedError(absl::StrCat("cannot read ", source, ": ", std::strerror(err)));
    }
    if (n == 0) break;  // shrank meanwhile
    got += static_cast<size_t>(n);
  }
  token.resize(got);
  return token;
}

}  // namespace

absl::StatusOr<std::string> LoadAuthToken(const std::string& token_flag, const std::string& file_flag) {
  if (!token_flag.empty() && !file_flag.empty()) {
    return absl::InvalidArgumentError("give --auth_token or --auth_token_file, not both");
  }
  std::string token = token_flag;
  std::string source = "--auth_token";
  if (!file_flag.empty()) {
    source = absl::StrCat("--auth_token_file=", file_flag);
    ASSIGN_OR_RETURN(token, ReadTokenFile(file_flag, source));
    if (!token.empty() && token.back() == '\n') token.pop_back();  // as `echo secret > file` writes it
    if (token.empty()) return absl::InvalidArgumentError(absl::StrCat(source, " is empty; put the token in it"));
  } else if (token.empty()) {
    const char* env = std::getenv(kAuthTokenEnv);
    if (env != nullptr) token = env;
    source = kAuthTokenEnv;
  }
  if (!token.empty() && token.size() < kMinAuthTokenBytes) {
    const size_t size = token.size();
    WipeBytes(token.data(), token.size());
    return absl::InvalidArgumentError(absl::StrCat(
        "the token from ", source, " has ", size, " bytes; use at least ", kMinAuthTokenBytes,
        " random bytes (e.g. `openssl rand -hex 16`), a short one can be guessed offline"));
  }
  return token;
}

absl::Status RequireTokenOffLoopback(absl::string_view program, absl::string_view address, bool has_token,
                                     bool insecure) {
  if (has_token || IsLoopbackHost(address)) return absl::OkStatus();
  if (!insecure) return absl::InvalidArgumentError(absl::StrCat(address, " ", kNoTokenOffLoopback));
  std::fprintf(stderr,
               "%.*s: warning: --insecure: no auth token, so anyone who can reach %.*s can join or steer the "
               "job\n",
               static_cast<int>(program.size()), program.data(), static_cast<int>(address.size()),
               address.data());
  return absl::OkStatus();
}

}  // namespace psring
