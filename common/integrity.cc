#include "common/integrity.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace psring {
namespace {

// OpenSSL fails these calls only on allocation failure or a programming error (a wrong algorithm or length),
// neither of which a caller could recover from.
void Must(int ok) {
  if (ok != 1) std::abort();
}

}  // namespace

MessageMac::MessageMac(const DirectionKey& key) : key_(key) {
  EVP_MAC* poly = EVP_MAC_fetch(nullptr, "POLY1305", nullptr);
  cipher_ = EVP_CIPHER_CTX_new();
  mac_ = poly == nullptr ? nullptr : EVP_MAC_CTX_new(poly);
  EVP_MAC_free(poly);  // the context keeps its own reference
  if (cipher_ == nullptr || mac_ == nullptr) std::abort();
}

MessageMac::~MessageMac() {
  EVP_MAC_CTX_free(mac_);
  EVP_CIPHER_CTX_free(cipher_);
  OPENSSL_cleanse(key_.data(), key_.size());
}

MacTag MessageMac::Next(std::initializer_list<absl::string_view> parts) {
  // The message's one-time Poly1305 key: the first 32 bytes of the ChaCha20 keystream under the direction
  // key, block counter 0 and the sequence number as the 96-bit nonce (RFC 8439 section 2.6).
  unsigned char iv[16] = {};  // 32-bit block counter, then the nonce
  std::memcpy(iv + 4, &sequence_, sizeof(sequence_));
  ++sequence_;
  unsigned char one_time_key[32] = {};
  int len = 0;
  Must(EVP_EncryptInit_ex(cipher_, EVP_chacha20(), nullptr, key_.data(), iv));
  Must(EVP_EncryptUpdate(cipher_, one_time_key, &len, one_time_key, sizeof(one_time_key)));
  Must(EVP_MAC_init(mac_, one_time_key, sizeof(one_time_key), nullptr));
  OPENSSL_cleanse(one_time_key, sizeof(one_time_key));
  for (absl::string_view part : parts) {
    Must(EVP_MAC_update(mac_, reinterpret_cast<const unsigned char*>(part.data()), part.size()));
  }
  MacTag tag;
  size_t written = 0;
  Must(EVP_MAC_final(mac_, tag.data(), &written, tag.size()));
  if (written != tag.size()) std::abort();
  return tag;
}

bool MessageMac::Check(std::initializer_list<absl::string_view> parts, const MacTag& tag) {
  const MacTag expected = Next(parts);
  return CRYPTO_memcmp(expected.data(), tag.data(), tag.size()) == 0;
}

}  // namespace psring
