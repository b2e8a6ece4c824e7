// The rendezvous store's request/response framing (common/tcp_store.cc), after the handshake of
// common/auth.h. Public so that tests can send hostile frames; nothing else should need it.
//   request:  RequestHeader, key bytes, value bytes
//   response: ResponseHeader, payload (the value, or the error message when code != 0)
// Host byte order: all ranks of a job share an architecture.
#ifndef PSRING_COMMON_TCP_STORE_WIRE_H_
#define PSRING_COMMON_TCP_STORE_WIRE_H_

#include <cstdint>

namespace psring::store_wire {

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

inline constexpr uint32_t kMagic = 0x5053544f;  // "PSTO"

}  // namespace psring::store_wire

#endif  // PSRING_COMMON_TCP_STORE_WIRE_H_
