// Rendezvous key-value store (after Gloo's rendezvous::Store and c10d's Store): ranks publish small values
// (listening addresses, NCCL's unique id) and wait for each other's.
//
//   InMemoryStore store;                                   // ranks as threads in one process (tests)
//   ASSIGN_OR_RETURN(auto store, TcpStore::Create(opts));  // ranks as processes (common/tcp_store.h)
//   RETURN_IF_ERROR(store->Set("addr/0", "10.0.0.1:4000"));
//   ASSIGN_OR_RETURN(std::string a, store->Get("addr/1", absl::Seconds(60)));  // blocks until set
//
// Keys are never deleted; callers namespace them with a prefix per use. Every call is thread-safe.
#ifndef PSRING_COMMON_STORE_H_
#define PSRING_COMMON_STORE_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace psring {

class Store {
 public:
  virtual ~Store() = default;

  // Sets (or overwrites) `key`. Does not wait for readers.
  virtual absl::Status Set(const std::string& key, const std::string& value) = 0;

  // Blocks until `key` exists and returns its value; kDeadlineExceeded after `timeout`.
  virtual absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) = 0;

  // Adds `delta` to the decimal integer stored at `key` (a missing key counts as 0) and returns the sum.
  virtual absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) = 0;

  // Blocks until every key exists; kDeadlineExceeded naming the first missing key after `timeout`.
  virtual absl::Status Wait(absl::Span<const std::string> keys, absl::Duration timeout);
};

// Every rank calls it with the same `name`: returns once all `world_size` ranks have arrived (or the
// timeout).
absl::Status StoreBarrier(Store* store, const std::string& name, int world_size, absl::Duration timeout);

// A Store shared by threads of one process. Close() wakes blocked Get()s with kUnavailable.
class InMemoryStore final : public Store {
 public:
  // max_total_bytes > 0 bounds the sum of every key's and value's size: a Set or Add that would exceed it
  // fails with kResourceExhausted and changes nothing. 0: unbounded.
  explicit InMemoryStore(size_t max_total_bytes = 0) : max_total_bytes_(max_total_bytes) {}

  absl::Status Set(const std::string& key, const std::string& value) override ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) override ABSL_LOCKS_EXCLUDED(mu_);
  void Close() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Stores key = value if the table stays within max_total_bytes_.
  absl::Status Put(const std::string& key, std::string value) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t max_total_bytes_;
  absl::Mutex mu_;
  std::map<std::string, std::string> data_ ABSL_GUARDED_BY(mu_);
  size_t total_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace psring

#endif  // PSRING_COMMON_STORE_H_
