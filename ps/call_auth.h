// Authentication of parameter-server calls on a server with a token, without the token on the wire (issue 34).
// A client first opens a channel with the Authenticate RPC, then signs every call on it:
//
//   K_ps   = HMAC-SHA256(token, "psring-ps-key-v1")             (the PS's own key: the ring and the store
//                                                                derive theirs under other labels)
//   1. client -> server  AuthHello      rank (-1: operator), world size, shard address, nonce_c (32 random
//                                       bytes), X25519 public key P_c (ephemeral, fresh per channel)
//   2. server -> client  AuthChallenge  nonce_s, P_s (ephemeral), proof_s = HMAC(K_ps, "psring-ps-server" + T)
//   3. client -> server  AuthProof      proof_c = HMAC(K_ps, "psring-ps-client" + T), sent only when proof_s
//                                       checked: a process that holds the port without the token gets no proof
//   4. server -> client  AuthAccepted   channel id (16 random bytes)
//   T      = "psring-ps-auth-v1" + rank + world size + shard + num_shards (int32 LE each) + nonce_c + P_c +
//            nonce_s + P_s: both proofs cover both nonces, both keys and who the client claims to be
//   K_chan = HMAC(K_ps, "psring-ps-channel" + X25519(own private key, peer's public key) + T)
// Every later call carries metadata
//   x-psring-call: the call's identifying fields (CallFields below: rank, session, step, trainer step, ...)
//   x-psring-auth: <channel hex>.<counter>.<hex of HMAC(K_chan, "psring-ps-call" + method + 0 + channel +
//                  counter (uint64 LE) + fields)>
// The server checks the MAC and the counter (unseen, and within a 64-call window of the highest seen on the
// channel) before it reads anything of the call, and after reading the request that its fields are the ones
// the MAC covers. So a listener that took the port first sees a hello and nothing it can use (no proof, and
// the token never crosses the wire); one that relays to the real server sees calls it cannot replay (the
// counter) or alter (the MAC), on a channel whose key it cannot compute (X25519: not even with the token).
// The MAC covers who calls and which call, not the tensors or metric values: use TLS to protect those.
//
// Client side:
//   ASSIGN_OR_RETURN(auto channel, ChannelCredential::Open(stub, PsKeyFromToken(token), rank, world, address,
//                                                          deadline));
//   channel->Sign(&context, "PushPull", PushFields(header));   // then start the call
//
// Thread-safety: ChannelCredential::Sign may be called from any thread; the free functions have no state.
#ifndef PSRING_PS_CALL_AUTH_H_
#define PSRING_PS_CALL_AUTH_H_

#include <openssl/evp.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "proto/ps.grpc.pb.h"

namespace psring::ps {

inline constexpr char kCallAuthMetadataKey[] = "x-psring-auth";
inline constexpr char kCallFieldsMetadataKey[] = "x-psring-call";
inline constexpr size_t kNonceBytes = 32;
inline constexpr size_t kChannelIdBytes = 16;
// An operator's channel (AuthHello.rank): Stats, and Shutdown while no rank holds a live session.
inline constexpr int kOperatorRank = -1;

// K_ps above (32 bytes); empty for an empty token (no authentication).
std::string PsKeyFromToken(absl::string_view token);

// 32 bytes from OpenSSL's CSPRNG (aborts only if it cannot be seeded, which nothing here can fix).
std::string RandomBytes(size_t count);

// An ephemeral X25519 key pair (OpenSSL's libcrypto). Move-only.
class EphemeralKey {
 public:
  static absl::StatusOr<EphemeralKey> Generate();
  EphemeralKey(EphemeralKey&& other) noexcept : key_(other.key_), public_key_(std::move(other.public_key_)) {
    other.key_ = nullptr;
  }
  EphemeralKey& operator=(EphemeralKey&&) = delete;
  EphemeralKey(const EphemeralKey&) = delete;
  ~EphemeralKey();
  const std::string& public_key() const { return public_key_; }
  // X25519(our private key, peer_public). kUnauthenticated for a malformed or low-order peer key.
  absl::StatusOr<std::string> SharedSecret(absl::string_view peer_public) const;

 private:
  EphemeralKey() = default;
  EVP_PKEY* key_ = nullptr;
  std::string public_key_;
};

// T above, from the hello and the challenge (its proof is not part of T).
std::string HandshakeTranscript(const proto::AuthHello& hello, const proto::AuthChallenge& challenge);
std::string ServerProof(absl::string_view ps_key, absl::string_view transcript);
std::string ClientProof(absl::string_view ps_key, absl::string_view transcript);
// K_chan above; the shared secret is wiped by the caller.
std::string ChannelKey(absl::string_view ps_key, absl::string_view shared_secret, absl::string_view transcript);

// The MAC of one call and the x-psring-auth value that carries it.
std::string CallMac(absl::string_view channel_key, absl::string_view method, absl::string_view channel,
                    uint64_t counter, absl::string_view fields);
struct CallAuth {
  std::string channel;  // raw bytes
  uint64_t counter = 0;
  std::string mac;      // raw bytes
};
std::string FormatCallAuth(const CallAuth& auth);
// kUnauthenticated for anything but "<32 hex>.<decimal>.<64 hex>".
absl::StatusOr<CallAuth> ParseCallAuth(absl::string_view text);

// The identifying fields of each call that names a rank, as signed by the client and checked by the server
// against the request it read.
std::string RegisterFields(const proto::RegisterHeader& header);
std::string PushFields(const proto::PushHeader& header);
std::string PullFields(const proto::PullRequest& request);
std::string MetricsFields(const proto::MetricsRequest& request);

// Anti-replay: accepts each counter once, and only within kWindow of the highest accepted (calls of one
// channel may arrive out of order when they run in parallel). Counters start at 1. Not thread-safe.
class ReplayWindow {
 public:
  static constexpr uint64_t kWindow = 64;
  bool Accept(uint64_t counter);

 private:
  uint64_t highest_ = 0;
  uint64_t seen_ = 0;  // bit i: highest_ - i was accepted
};

// The client's end of one channel with one server.
class ChannelCredential {
 public:
  // Runs Authenticate on `stub` as `rank` (kOperatorRank: an operator) with `address` (the shard the client
  // means to reach). kUnauthenticated when the server fails to prove the token (another token, or another
  // process holds the port: this side then sends no proof) or refuses ours; the server's status otherwise
  // (kUnavailable when it cannot be reached, kFailedPrecondition when it runs without a token).
  static absl::StatusOr<std::unique_ptr<ChannelCredential>> Open(proto::ParameterServer::Stub* stub,
                                                                 absl::string_view ps_key, int rank,
                                                                 int world_size,
                                                                 const proto::ShardAddress& address,
                                                                 absl::Time deadline);
  ~ChannelCredential();
  // Adds the metadata that authenticates `method` ("Register", "PushPull", "Pull", "AverageMetrics", "Stats",
  // "Shutdown") with `fields` (empty for Stats and Shutdown) to `context`, under the next counter.
  void Sign(grpc::ClientContext* context, absl::string_view method, const std::string& fields);
  int rank() const { return rank_; }

 private:
  ChannelCredential(int rank, std::string channel, std::string key)
      : rank_(rank), channel_(std::move(channel)), key_(std::move(key)) {}
  const int rank_;
  const std::string channel_;
  std::string key_;
  std::atomic<uint64_t> counter_{0};
};

}  // namespace psring::ps

#endif  // PSRING_PS_CALL_AUTH_H_
