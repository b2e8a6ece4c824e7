#include "common/integrity.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace psring {
namespace {

EVP_CIPHER_CTX* Ctx(void* p) { return static_cast<EVP_CIPHER_CTX*>(p); }

// OpenSSL fails these calls only on allocation failure or a programming error (a wrong cipher or length),
// neither of which a caller could recover from.
void Must(int ok) {
  if (ok != 1) std::abort();
}

}  // namespace

MessageMac::MessageMac(const DirectionKey& key) : ctx_(EVP_CIPHER_CTX_new()) {
  if (ctx_ == nullptr) std::abort();
  Must(EVP_EncryptInit_ex(Ctx(ctx_), EVP_aes_256_gcm(), nullptr, key.data(), nullptr));
}

MessageMac::~MessageMac() { EVP_CIPHER_CTX_free(Ctx(ctx_)); }

MacTag MessageMac::Next(std::initializer_list<absl::string_view> parts) {
  // 96-bit nonce: the sequence number, then zeros (the key is unique to this direction of this connection).
  unsigned char iv[12] = {};
  std::memcpy(iv, &sequence_, sizeof(sequence_));
  ++sequence_;
  Must(EVP_EncryptInit_ex(Ctx(ctx_), nullptr, nullptr, nullptr, iv));
  int len = 0;
  for (absl::string_view part : parts) {
    // OpenSSL takes an int length: feed large parts in pieces.
    size_t done = 0;
    while (done < part.size()) {
      const size_t piece = std::min<size_t>(part.size() - done, 1u << 30);
      Must(EVP_EncryptUpdate(Ctx(ctx_), nullptr, &len, reinterpret_cast<const unsigned char*>(part.data() + done),
                             static_cast<int>(piece)));
      done += piece;
    }
  }
  unsigned char unused[16];
  Must(EVP_EncryptFinal_ex(Ctx(ctx_), unused, &len));
  MacTag tag;
  Must(EVP_CIPHER_CTX_ctrl(Ctx(ctx_), EVP_CTRL_GCM_GET_TAG, static_cast<int>(tag.size()), tag.data()));
  return tag;
}

bool MessageMac::Check(std::initializer_list<absl::string_view> parts, const MacTag& tag) {
  const MacTag expected = Next(parts);
  return CRYPTO_memcmp(expected.data(), tag.data(), tag.size()) == 0;
}

}  // namespace psring
