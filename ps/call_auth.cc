#include "ps/call_auth.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/numeric/int128.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/auth.h"
#include "ps/wire.h"

namespace psring::ps {
namespace {

constexpr size_t kKeyBytes = 32;

std::string AsString(const std::array<uint8_t, 32>& mac) {
  return std::string(reinterpret_cast<const char*>(mac.data()), mac.size());
}

void AppendInt32(int32_t value, std::string* out) {
  const uint32_t v = static_cast<uint32_t>(value);
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void AppendUint64(uint64_t value, std::string* out) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

std::string SessionHex(uint64_t high, uint64_t low) {
  return absl::StrCat(absl::Hex(high, absl::kZeroPad16), absl::Hex(low, absl::kZeroPad16));
}

std::string AddressText(const proto::ShardAddress& address) {
  return absl::StrCat(address.shard(), "/", address.num_shards());
}

}  // namespace

std::string PsKeyFromToken(absl::string_view token) {
  if (token.empty()) return "";
  return AsString(DeriveProtocolKey(token, kPsKeyLabel));  // common/auth.h: distinct from the ring's key
}

std::string RandomBytes(size_t count) {
  std::string bytes(count, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(bytes.data()), static_cast<int>(count)) != 1) std::abort();
  return bytes;
}

absl::StatusOr<EphemeralKey> EphemeralKey::Generate() {
  EphemeralKey key;
  EVP_PKEY_CTX* ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_X25519, nullptr);
  const bool ok = ctx != nullptr && EVP_PKEY_keygen_init(ctx) == 1 && EVP_PKEY_keygen(ctx, &key.key_) == 1;
  EVP_PKEY_CTX_free(ctx);
  size_t len = kKeyBytes;
  key.public_key_.assign(kKeyBytes, '\0');
  if (!ok || EVP_PKEY_get_raw_public_key(key.key_, reinterpret_cast<unsigned char*>(key.public_key_.data()),
                                         &len) != 1 ||
      len != kKeyBytes) {
    return absl::InternalError("OpenSSL could not generate an X25519 key");
  }
  return key;
}

EphemeralKey::~EphemeralKey() { EVP_PKEY_free(key_); }

absl::StatusOr<std::string> EphemeralKey::SharedSecret(absl::string_view peer_public) const {
  if (peer_public.size() != kKeyBytes) {
    return absl::UnauthenticatedError(absl::StrCat("the peer's X25519 key has ", peer_public.size(),
                                                   " bytes, not ", kKeyBytes));
  }
  EVP_PKEY* peer = EVP_PKEY_new_raw_public_key(
      EVP_PKEY_X25519, nullptr, reinterpret_cast<const unsigned char*>(peer_public.data()), peer_public.size());
  EVP_PKEY_CTX* ctx = peer != nullptr ? EVP_PKEY_CTX_new(key_, nullptr) : nullptr;
  std::string secret(kKeyBytes, '\0');
  size_t len = secret.size();
  // OpenSSL refuses a low-order peer key (an all-zero shared secret) in EVP_PKEY_derive.
  const bool ok = ctx != nullptr && EVP_PKEY_derive_init(ctx) == 1 && EVP_PKEY_derive_set_peer(ctx, peer) == 1 &&
                  EVP_PKEY_derive(ctx, reinterpret_cast<unsigned char*>(secret.data()), &len) == 1 &&
                  len == kKeyBytes;
  EVP_PKEY_CTX_free(ctx);
  EVP_PKEY_free(peer);
  if (!ok) {
    OPENSSL_cleanse(secret.data(), secret.size());
    return absl::UnauthenticatedError("the peer's X25519 key is not usable (malformed or of low order)");
  }
  return secret;
}

std::string HandshakeTranscript(const proto::AuthHello& hello, const proto::AuthChallenge& challenge) {
  std::string t = "psring-ps-auth-v1";
  AppendInt32(hello.rank(), &t);
  AppendInt32(hello.world_size(), &t);
  AppendInt32(hello.address().shard(), &t);
  AppendInt32(hello.address().num_shards(), &t);
  // Fixed lengths (checked by both sides before this is computed), so no field can bleed into the next.
  absl::StrAppend(&t, hello.nonce(), hello.public_key(), challenge.nonce(), challenge.public_key());
  return t;
}

std::string ServerProof(absl::string_view ps_key, absl::string_view transcript) {
  return AsString(HmacSha256(ps_key, absl::StrCat("psring-ps-server", transcript)));
}

std::string ClientProof(absl::string_view ps_key, absl::string_view transcript) {
  return AsString(HmacSha256(ps_key, absl::StrCat("psring-ps-client", transcript)));
}

std::string ChannelKey(absl::string_view ps_key, absl::string_view shared_secret, absl::string_view transcript) {
  std::string message = absl::StrCat("psring-ps-channel", shared_secret, transcript);
  std::string key = AsString(HmacSha256(ps_key, message));
  OPENSSL_cleanse(message.data(), message.size());
  return key;
}

std::string CallMac(absl::string_view channel_key, absl::string_view method, absl::string_view channel,
                    uint64_t counter, absl::string_view fields) {
  std::string message = absl::StrCat("psring-ps-call", method, absl::string_view("\0", 1), channel);
  AppendUint64(counter, &message);
  absl::StrAppend(&message, fields);
  return AsString(HmacSha256(channel_key, message));
}

std::string FormatCallAuth(const CallAuth& auth) {
  return absl::StrCat(absl::BytesToHexString(auth.channel), ".", auth.counter, ".",
                      absl::BytesToHexString(auth.mac));
}

absl::StatusOr<CallAuth> ParseCallAuth(absl::string_view text) {
  const absl::Status malformed = absl::UnauthenticatedError(
      absl::StrCat("malformed ", kCallAuthMetadataKey, " metadata (this server expects psring's per-call MAC)"));
  std::vector<absl::string_view> parts = absl::StrSplit(text, '.');
  if (parts.size() != 3 || parts[0].size() != 2 * kChannelIdBytes || parts[2].size() != 64) return malformed;
  const auto is_hex = [](absl::string_view s) {
    for (char c : s) {
      if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) return false;
    }
    return true;
  };
  CallAuth auth;
  if (!is_hex(parts[0]) || !is_hex(parts[2]) || !absl::SimpleAtoi(parts[1], &auth.counter) || auth.counter == 0) {
    return malformed;
  }
  auth.channel = absl::HexStringToBytes(parts[0]);
  auth.mac = absl::HexStringToBytes(parts[2]);
  return auth;
}

std::string RegisterFields(const proto::RegisterHeader& h) {
  return absl::StrCat("rank=", h.rank(), " world=", h.world_size(), " shard=", AddressText(h.address()),
                      " total=", h.total_params(), " offers=", h.offers_parameters() ? 1 : 0);
}

std::string PushFields(const proto::PushHeader& h) {
  return absl::StrCat("rank=", h.rank(), " session=", SessionHex(h.session_high(), h.session()),
                      " shard=", AddressText(h.address()), " step=", h.step(), " trainer_step=", h.trainer_step(),
                      " elements=", h.num_elements());
}

std::string PullFields(const proto::PullRequest& r) {
  return absl::StrCat("rank=", r.rank(), " session=", SessionHex(r.session_high(), r.session()),
                      " shard=", AddressText(r.address()));
}

std::string MetricsFields(const proto::MetricsRequest& r) {
  return absl::StrCat("rank=", r.rank(), " session=", SessionHex(r.session_high(), r.session()),
                      " shard=", AddressText(r.address()), " values=", r.values_size());
}

bool ReplayWindow::Accept(uint64_t counter) {
  if (counter == 0) return false;
  if (counter > highest_) {
    const uint64_t shift = counter - highest_;
    seen_ = shift >= kWindow ? 0 : seen_ << shift;
    seen_ |= 1;
    highest_ = counter;
    return true;
  }
  const uint64_t age = highest_ - counter;
  if (age >= kWindow) return false;
  const uint64_t bit = uint64_t{1} << age;
  if ((seen_ & bit) != 0) return false;
  seen_ |= bit;
  return true;
}

absl::StatusOr<std::unique_ptr<ChannelCredential>> ChannelCredential::Open(proto::ParameterServer::Stub* stub,
                                                                           absl::string_view ps_key, int rank,
                                                                           int world_size,
                                                                           const proto::ShardAddress& address,
                                                                           absl::Time deadline) {
  absl::StatusOr<EphemeralKey> mine = EphemeralKey::Generate();
  if (!mine.ok()) return mine.status();
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(deadline));
  auto stream = stub->Authenticate(&context);
  proto::AuthRequest request;
  proto::AuthHello* hello = request.mutable_hello();
  hello->set_rank(rank);
  hello->set_world_size(world_size);
  *hello->mutable_address() = address;
  hello->set_nonce(RandomBytes(kNonceBytes));
  hello->set_public_key(mine->public_key());
  const proto::AuthHello sent = *hello;
  proto::AuthReply reply;
  absl::Status refused;
  std::string channel;
  std::string key;
  if (stream->Write(request) && stream->Read(&reply)) {
    const proto::AuthChallenge& challenge = reply.challenge();
    const std::string transcript = HandshakeTranscript(sent, challenge);
    if (!reply.has_challenge() || challenge.nonce().size() != kNonceBytes ||
        !ConstantTimeEquals(challenge.proof(), ServerProof(ps_key, transcript))) {
      // Nothing more is sent: whoever answered learns no proof of ours.
      refused = absl::UnauthenticatedError(absl::StrCat(
          "the server did not prove the job's token: it has another --auth_token (or ", kAuthTokenEnv,
          "), or another process holds its port"));
      context.TryCancel();
    } else {
      absl::StatusOr<std::string> shared = mine->SharedSecret(challenge.public_key());
      if (!shared.ok()) {
        refused = shared.status();
        context.TryCancel();
      } else {
        key = ChannelKey(ps_key, *shared, transcript);
        OPENSSL_cleanse(shared->data(), shared->size());
        proto::AuthRequest proof;
        proof.mutable_proof()->set_proof(ClientProof(ps_key, transcript));
        if (stream->Write(proof) && stream->WritesDone() && stream->Read(&reply) && reply.has_accepted() &&
            reply.accepted().channel().size() == kChannelIdBytes) {
          channel = reply.accepted().channel();
        }
      }
    }
  }
  while (stream->Read(&reply)) {
  }
  const grpc::Status status = stream->Finish();
  if (!refused.ok()) {
    OPENSSL_cleanse(key.data(), key.size());
    return refused;
  }
  if (!status.ok()) {
    OPENSSL_cleanse(key.data(), key.size());
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
  }
  if (channel.empty()) return absl::UnavailableError("the server ended the handshake early");
  return std::unique_ptr<ChannelCredential>(new ChannelCredential(rank, std::move(channel), std::move(key)));
}

ChannelCredential::~ChannelCredential() { OPENSSL_cleanse(key_.data(), key_.size()); }

void ChannelCredential::Sign(grpc::ClientContext* context, absl::string_view method, const std::string& fields) {
  CallAuth auth;
  auth.channel = channel_;
  auth.counter = ++counter_;
  auth.mac = CallMac(key_, method, channel_, auth.counter, fields);
  context->AddMetadata(kCallAuthMetadataKey, FormatCallAuth(auth));
  if (!fields.empty()) context->AddMetadata(kCallFieldsMetadataKey, fields);
}

}  // namespace psring::ps
