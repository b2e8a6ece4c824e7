// Integrity of the store's and the ring's traffic after common/auth.h's handshake: every message (a store
// request or reply, a ring segment) carries a 16-byte tag, AES-256-GMAC (AES-GCM with the message as the
// authenticated data and nothing encrypted) under a key of its own direction of its own connection, with
// the message's sequence number as the nonce. A changed, dropped, reordered, replayed or injected message
// fails the next check; the stream then stops (there is no resynchronising a tampered TCP stream).
//
// Why GMAC and not TLS with a pre-shared key: TLS would add a second handshake on top of ours, a record layer
// that copies and encrypts every 16 KB record (confidentiality the gradients do not need and the bench would
// pay for), and SSL_read/SSL_write in place of the ring's segment I/O. GMAC over the segments the ring
// already sends is one GHASH pass per byte (carry-less multiply, several GB/s per core), no copy and no change
// to the pipeline. The data is NOT confidential: an on-path observer still reads keys, values and gradients.
//
// Keys: common/auth.h derives one per direction from the token and the handshake transcript (both fresh
// nonces, ranks, intended peer, job id), so they are new for every connection and a (key, sequence number)
// pair, the GCM nonce, is never reused.
//
//   MessageMac send(keys.client_to_server);
//   Tag tag = send.Next({header, payload});   // the sender appends `tag`
//   if (!recv.Check({header, payload}, tag)) ...  // the receiver refuses the stream
//
// Not thread-safe: one object per direction of a connection, used by the one thread that sends (or receives)
// on it.
#ifndef PSRING_COMMON_INTEGRITY_H_
#define PSRING_COMMON_INTEGRITY_H_

#include <array>
#include <cstdint>
#include <initializer_list>

#include "absl/strings/string_view.h"

namespace psring {

inline constexpr size_t kMacTagBytes = 16;
using MacTag = std::array<uint8_t, kMacTagBytes>;
using DirectionKey = std::array<uint8_t, 32>;

class MessageMac {
 public:
  explicit MessageMac(const DirectionKey& key);
  ~MessageMac();
  MessageMac(const MessageMac&) = delete;
  MessageMac& operator=(const MessageMac&) = delete;

  // The tag of the next message (the parts concatenated) and advances the sequence number.
  MacTag Next(std::initializer_list<absl::string_view> parts);

  // Next(parts) == tag, in constant time; advances the sequence number either way.
  bool Check(std::initializer_list<absl::string_view> parts, const MacTag& tag);

  // Messages tagged or checked so far (the next one's sequence number).
  uint64_t sequence() const { return sequence_; }

 private:
  void* ctx_;  // EVP_CIPHER_CTX, keyed once
  uint64_t sequence_ = 0;
};

}  // namespace psring

#endif  // PSRING_COMMON_INTEGRITY_H_
