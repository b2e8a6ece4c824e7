// Authentication of the ring's TCP connections (the rendezvous store, common/tcp_store.h, and the ring's
// neighbour links, ring/tcp_transport.h): a shared secret (LoadAuthToken: --auth_token, --auth_token_file or
// PSRING_AUTH_TOKEN) proven by both ends of every connection with a challenge-response, so the secret never
// crosses the wire and a recorded exchange cannot be replayed.
//
// The handshake (both messages of step 1 and 2 have the same layout, HelloWire + job id bytes):
//   1. client -> server  hello: protocol, rank, world size, job id, "has a token", a fresh 32-byte nonce
//   2. server -> client  hello (same fields, its own fresh nonce) + MAC_s
//   3. client -> server  MAC_c (sent only when MAC_s is right, or when the client has no token)
//   4. server -> client  verdict: status code + message (the server's checks: token, job id, rank)
// MAC_x = HMAC-SHA256(K, "psring-auth-v3 " + x + transcript), x = "server" or "client", transcript = both
// hellos as sent, so each MAC covers both nonces, ranks, world sizes, job ids, the rank each side meant to
// reach (peer_rank: a ring link r -> r+1 cannot be relayed to another rank) and the data-integrity setting.
// K = DeriveProtocolKey(token, kRingKeyLabel), never the token itself: the parameter server derives its own
// key with kPsKeyLabel, so what one protocol's traffic reveals is no oracle for the other's. A client that
// names a peer_rank checks the server's rank before it sends MAC_c. Comparisons are constant-time. Without a
// token (both sides) the MACs are zeros and the hellos still carry the job id, ranks and world size, which are
// checked as with one.
//
// After the handshake (token set, data integrity on at both ends): one key per direction,
//   PRK = HMAC-SHA256(K, "psring-kdf-v3" + transcript + MAC_s + MAC_c),
//   key(client -> server) = HMAC-SHA256(PRK, "client->server"), key(server -> client) likewise,
// for common/integrity.h's per-message tags. A recorded handshake cannot be replayed into a live connection
// (fresh nonces on both sides), and what follows it cannot be changed undetected: the token authenticates
// every store message and ring segment, not only the connection's start. It does not make them secret.
// K, the PRK and SessionKeys are wiped (OPENSSL_cleanse) when they go out of scope, as is AuthConfig's token.
//
//   AuthConfig auth{.token = "a token of 16 bytes or more", .job_id = "train-42"};
//   HandshakeHello mine{HandshakeProtocol::kStore, /*rank=*/1, /*world_size=*/4};
//   ASSIGN_OR_RETURN(HandshakeHello server, ClientHandshake(socket, auth, mine, deadline));
//
// Every call blocks until its handshake is done, refused or `deadline` passes. Thread-compatible; no state.
#ifndef PSRING_COMMON_AUTH_H_
#define PSRING_COMMON_AUTH_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/socket.h"

namespace psring {

// The environment variable a rank reads its token from when --auth_token is not given.
inline constexpr char kAuthTokenEnv[] = "PSRING_AUTH_TOKEN";
// The environment variable a rank reads its job id from when --job_id is not given.
inline constexpr char kJobIdEnv[] = "PSRING_JOB_ID";
// Longest job id a hello may carry.
inline constexpr size_t kMaxJobIdBytes = 256;

struct AuthConfig {
  ~AuthConfig();  // wipes `token`

  // Shared secret of the job; empty: no authentication (every rank must then have none).
  std::string token;
  // Names the job; ranks and stores with different ids refuse each other even with the same token. Empty is a
  // valid id here; //ring:ring_worker defaults it to one derived from the master port.
  std::string job_id;
  // With a token: tag every message after the handshake (common/integrity.h), and derive its keys. Every
  // rank must agree (the handshake refuses a peer that differs). Ignored without a token.
  bool data_integrity = true;
};

// The token as LoadAuthToken loads it (--auth_token, --auth_token_file, PSRING_AUTH_TOKEN; its minimum and
// file checks); the job id from `job_flag`, else PSRING_JOB_ID. LoadAuthToken's errors, and kInvalidArgument
// for a job id longer than kMaxJobIdBytes. Never prints the token.
absl::StatusOr<AuthConfig> AuthConfigFrom(const std::string& token_flag, const std::string& token_file_flag,
                                          const std::string& job_flag);

// Which service the connection is for, so a store hello cannot be replayed into a ring link and back.
enum class HandshakeProtocol : uint32_t { kStore = 1, kRing = 2 };

struct HandshakeHello {
  HandshakeProtocol protocol = HandshakeProtocol::kStore;
  int32_t rank = -1;  // -1: the sender has no rank (a store server)
  int32_t world_size = 0;
  std::string job_id;  // filled from AuthConfig when sending
  // The rank the sender means to reach; -1: any. A server refuses a client that meant another rank; a
  // client refuses a server of another rank before proving the token to it.
  int32_t peer_rank = -1;
};

// Per-direction keys derived by a handshake with a token and data integrity on (common/integrity.h). Wiped
// when destroyed.
struct SessionKeys {
  ~SessionKeys();

  bool enabled = false;  // false: no token, or --data_integrity=off: messages go untagged
  std::array<uint8_t, 32> client_to_server{};
  std::array<uint8_t, 32> server_to_client{};
};

// Client side of the handshake (steps 1-4). On success: the server's hello, authenticated when the client
// has a token. kUnauthenticated when the server fails to prove the token or the server refused this
// client's proof; kPermissionDenied / kInvalidArgument / kResourceExhausted with the server's message when it
// refused this client for another reason (job id, rank); kUnavailable / kDeadlineExceeded when the
// connection broke or stalled; kInvalidArgument when the peer does not speak this protocol.
// `keys`, when not null, gets the connection's keys.
absl::StatusOr<HandshakeHello> ClientHandshake(const Socket& socket, const AuthConfig& auth,
                                               const HandshakeHello& mine, absl::Time deadline,
                                               SessionKeys* keys = nullptr);

// Checks an authenticated client's hello on the server: OK to accept it, else the status sent back to it
// (the server's own call then returns that status too).
using HelloCheck = std::function<absl::Status(const HandshakeHello& client)>;

// How a server facing strangers (the store, a ring port) bounds and watches each step of ServerHandshake.
struct ServerHandshakeSteps {
  // Each step (reading the client's hello once its first byte is there, sending ours, reading the client's
  // proof, sending the verdict) must finish within this of its start, besides the overall deadline: a client
  // that stalls in any step is dropped after this, not after the whole handshake's allowance.
  absl::Duration step_timeout = absl::InfiniteDuration();
  // Called once the client's whole hello has arrived and parsed (before any MAC is computed). Lets the server
  // prefer, when it must drop one of several handshaking connections, those that have sent less.
  std::function<void()> on_hello;
};

// Server side of the handshake. Returns the client's hello once it proved the token (when the server has
// one), its job id equals the server's and `check` accepted it; otherwise an error (also sent to the client
// in the verdict, except when the connection did not even carry a hello). kUnauthenticated for a missing or
// wrong proof; kPermissionDenied for another job id.
// `steps` (may be null): per-step deadlines and progress, see ServerHandshakeSteps.
absl::StatusOr<HandshakeHello> ServerHandshake(const Socket& socket, const AuthConfig& auth,
                                               const HandshakeHello& mine, const HelloCheck& check,
                                               absl::Time deadline, SessionKeys* keys = nullptr,
                                               const ServerHandshakeSteps* steps = nullptr);

// Bytes of a hello's fixed part (the job id follows it).
inline constexpr size_t kHelloWireBytes = 72;

// HMAC-SHA256 of `message` under `key` (OpenSSL's libcrypto).
std::array<uint8_t, 32> HmacSha256(absl::string_view key, absl::string_view message);

// Constant-time equality of two byte strings (the time depends only on their lengths).
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

// Labels of DeriveProtocolKey: the ring and its store (this file's handshake), the parameter server...
inline constexpr char kRingKeyLabel[] = "psring-ring-key-v1";
inline constexpr char kPsKeyLabel[] = "psring-ps-key-v1";
// ... and the key that seals NCCL's unique id in the store (ring/nccl_process_group.cc).
inline constexpr char kNcclIdKeyLabel[] = "psring-nccl-id-v1";

// The key one protocol uses in place of the job's token: HMAC-SHA256(token, label). Keys of different labels
// are independent, so MACs one protocol sends (or a listener captures) say nothing usable about another's.
// The caller should wipe it after use (OPENSSL_cleanse, or WipeBytes).
//   std::array<uint8_t, 32> key = DeriveProtocolKey(token, kPsKeyLabel);
std::array<uint8_t, 32> DeriveProtocolKey(absl::string_view token, absl::string_view label);

// Overwrites `size` bytes at `data` with zeros in a way the compiler does not optimise away (OPENSSL_cleanse),
// for key material and token copies.
void WipeBytes(void* data, size_t size);

// Shortest token LoadAuthToken accepts: the MACs of the handshake (and a captured PS call) allow offline
// guessing, which a short token does not survive.
inline constexpr size_t kMinAuthTokenBytes = 16;

// The job's token, from the first source that is set: `token_flag` (--auth_token), the file `file_flag`
// names (--auth_token_file; its contents without one trailing newline), else PSRING_AUTH_TOKEN. Empty when
// none is set (no authentication). kInvalidArgument naming the source for a token shorter than
// kMinAuthTokenBytes, for both flags at once, or an empty file; kNotFound / kPermissionDenied for a file it
// cannot read; kPermissionDenied for a file that group or others may read or write ("chmod 600 FILE"), a
// symbolic link (opened with O_NOFOLLOW) or not a regular file. Never prints the token. Blocks on reading
// the file.
absl::StatusOr<std::string> LoadAuthToken(const std::string& token_flag, const std::string& file_flag);

// The one rule of every psring program that listens on or connects to an address (the PS server and workers,
// ring_worker and its store): off loopback (IsLoopbackHost, which resolves names) a job needs a token, or
// --insecure said out loud. OK when `address` is loopback or `has_token`; with `insecure` also OK, after one
// line on stderr ("<program>: warning: --insecure: ..."); otherwise kInvalidArgument with kNoTokenOffLoopback
// after the address. Blocks on a name lookup.
//   RETURN_IF_ERROR(RequireTokenOffLoopback("ring_worker", env.master_addr, !token.empty(), insecure));
absl::Status RequireTokenOffLoopback(absl::string_view program, absl::string_view address, bool has_token,
                                     bool insecure);

// The refusal's text after "<address> ": the same from every program.
inline constexpr char kNoTokenOffLoopback[] =
    "is not a loopback address and no auth token is set, so anyone who can reach it could join or steer the "
    "job; give every process of the job the same token of at least 16 bytes (--auth_token_file=FILE with "
    "mode 600, or PSRING_AUTH_TOKEN), or --insecure on a trusted network";

}  // namespace psring

#endif  // PSRING_COMMON_AUTH_H_
