#include "common/store.h"

#include <algorithm>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace psring {

absl::Status Store::Wait(absl::Span<const std::string> keys, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  for (const std::string& key : keys) {
    RETURN_IF_ERROR(Get(key, std::max(deadline - absl::Now(), absl::ZeroDuration())).status());
  }
  return absl::OkStatus();
}

absl::Status StoreBarrier(Store* store, const std::string& name, int world_size, absl::Duration timeout) {
  ASSIGN_OR_RETURN(int64_t arrived, store->Add(name + "/arrived", 1));
  if (arrived == world_size) RETURN_IF_ERROR(store->Set(name + "/done", "1"));
  absl::Status s = store->Get(name + "/done", timeout).status();
  if (absl::IsDeadlineExceeded(s)) {
    return absl::DeadlineExceededError(absl::StrCat("barrier '", name, "': not all ", world_size,
                                                    " ranks arrived within ", absl::FormatDuration(timeout)));
  }
  return s;
}

absl::Status InMemoryStore::Set(const std::string& key, const std::string& value) {
  absl::MutexLock lock(&mu_);
  if (closed_) return absl::UnavailableError("the store is shut down");
  return Put(key, value);
}

absl::Status InMemoryStore::Put(const std::string& key, std::string value) {
  auto it = data_.find(key);
  const size_t old_bytes = it == data_.end() ? 0 : key.size() + it->second.size();
  const size_t new_total = total_bytes_ - old_bytes + key.size() + value.size();
  if (max_total_bytes_ > 0 && new_total > max_total_bytes_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "store key '", key.substr(0, 64), key.size() > 64 ? "...'" : "'", " with a value of ", value.size(),
        " bytes refused: the store would hold ", new_total, " bytes, over its limit of ", max_total_bytes_,
        " bytes (TcpStoreOptions::max_total_bytes)"));
  }
  total_bytes_ = new_total;
  if (it == data_.end()) {
    data_.emplace(key, std::move(value));
  } else {
    it->second = std::move(value);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> InMemoryStore::Get(const std::string& key, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return closed_ || data_.count(key) > 0; };
  if (!mu_.AwaitWithTimeout(absl::Condition(&ready), timeout)) {
    return absl::DeadlineExceededError(absl::StrCat("store key '", key, "' was not set within ",
                                                    absl::FormatDuration(timeout),
                                                    "; a rank is missing or slow (check --world_size)"));
  }
  if (closed_) return absl::UnavailableError("the store is shut down");
  return data_[key];
}

absl::StatusOr<int64_t> InMemoryStore::Add(const std::string& key, int64_t delta) {
  absl::MutexLock lock(&mu_);
  if (closed_) return absl::UnavailableError("the store is shut down");
  int64_t value = 0;
  auto it = data_.find(key);
  if (it != data_.end() && !absl::SimpleAtoi(it->second, &value)) {
    // At most 32 bytes of the value, escaped: the error goes back over the wire and into logs.
    constexpr size_t kShown = 32;
    return absl::InvalidArgumentError(absl::StrCat(
        "store key '", key, "' holds '", absl::CHexEscape(absl::string_view(it->second).substr(0, kShown)),
        it->second.size() > kShown ? absl::StrCat("...' (", it->second.size(), " bytes)") : "'",
        ", not an integer; Add() needs an integer key"));
  }
  if (__builtin_add_overflow(value, delta, &value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("store key '", key, "': adding ", delta, " overflows a 64-bit integer"));
  }
  RETURN_IF_ERROR(Put(key, absl::StrCat(value)));
  return value;
}

void InMemoryStore::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
}

}  // namespace psring
