#include "common/integrity.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
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

namespace {

constexpr size_t kNonceBytes = 12;

struct CipherCtxFree {
  void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }
};
using CipherCtx = std::unique_ptr<EVP_CIPHER_CTX, CipherCtxFree>;

const unsigned char* Bytes(absl::string_view s) { return reinterpret_cast<const unsigned char*>(s.data()); }

}  // namespace

absl::StatusOr<std::string> SealValue(const DirectionKey& key, absl::string_view context,
                                      absl::string_view plaintext) {
  std::string out(kNonceBytes + plaintext.size() + kMacTagBytes, '\0');
  unsigned char* nonce = reinterpret_cast<unsigned char*>(out.data());
  unsigned char* body = nonce + kNonceBytes;
  CipherCtx ctx(EVP_CIPHER_CTX_new());
  int len = 0;
  if (ctx == nullptr || RAND_bytes(nonce, kNonceBytes) != 1 ||
      EVP_EncryptInit_ex(ctx.get(), EVP_chacha20_poly1305(), nullptr, key.data(), nonce) != 1 ||
      EVP_EncryptUpdate(ctx.get(), nullptr, &len, Bytes(context), static_cast<int>(context.size())) != 1 ||
      EVP_EncryptUpdate(ctx.get(), body, &len, Bytes(plaintext), static_cast<int>(plaintext.size())) != 1 ||
      EVP_EncryptFinal_ex(ctx.get(), body + len, &len) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_AEAD_GET_TAG, kMacTagBytes, body + plaintext.size()) != 1) {
    return absl::InternalError("OpenSSL failed to seal a value (ChaCha20-Poly1305)");
  }
  return out;
}

absl::StatusOr<std::string> OpenValue(const DirectionKey& key, absl::string_view context,
                                      absl::string_view sealed) {
  if (sealed.size() < kSealOverheadBytes) {
    return absl::DataLossError(absl::StrCat("a sealed value of ", sealed.size(), " bytes is cut short (at least ",
                                            kSealOverheadBytes, ")"));
  }
  const size_t size = sealed.size() - kSealOverheadBytes;
  const unsigned char* nonce = Bytes(sealed);
  const unsigned char* body = nonce + kNonceBytes;
  unsigned char tag[kMacTagBytes];
  std::memcpy(tag, body + size, sizeof(tag));
  std::string out(size, '\0');
  CipherCtx ctx(EVP_CIPHER_CTX_new());
  int len = 0;
  if (ctx == nullptr ||
      EVP_DecryptInit_ex(ctx.get(), EVP_chacha20_poly1305(), nullptr, key.data(), nonce) != 1 ||
      EVP_DecryptUpdate(ctx.get(), nullptr, &len, Bytes(context), static_cast<int>(context.size())) != 1 ||
      EVP_DecryptUpdate(ctx.get(), reinterpret_cast<unsigned char*>(out.data()), &len, body,
                        static_cast<int>(size)) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_AEAD_SET_TAG, sizeof(tag), tag) != 1) {
    return absl::InternalError("OpenSSL failed to open a sealed value (ChaCha20-Poly1305)");
  }
  if (EVP_DecryptFinal_ex(ctx.get(), reinterpret_cast<unsigned char*>(out.data()) + len, &len) != 1) {
    OPENSSL_cleanse(out.data(), out.size());
    return absl::DataLossError(
        "a sealed value failed its check: it was changed, or sealed under another token or for another use");
  }
  return out;
}

}  // namespace psring
