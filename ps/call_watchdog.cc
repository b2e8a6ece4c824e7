#include "ps/call_watchdog.h"

namespace psring::ps {

CallWatchdog::CallWatchdog() : thread_([this] { Loop(); }) {}

CallWatchdog::~CallWatchdog() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void CallWatchdog::Loop() {
  absl::MutexLock lock(&mu_);
  const auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; };
  while (!mu_.AwaitWithTimeout(absl::Condition(&stopping), absl::Milliseconds(50))) {
    const absl::Time now = absl::Now();
    for (auto it = entries_.begin(); it != entries_.end();) {
      if (now < it->second.deadline) {
        ++it;
        continue;
      }
      // Under mu_: the guard cannot disarm meanwhile, so the context is alive.
      it->second.context->TryCancel();
      *it->second.fired = true;
      it = entries_.erase(it);
    }
  }
}

CallWatchdog::Guard::Guard(CallWatchdog* watchdog, grpc::ServerContext* context, absl::Duration limit)
    : watchdog_(watchdog), limit_(limit), id_([&] {
        absl::MutexLock lock(&watchdog->mu_);
        const uint64_t id = watchdog->next_id_++;
        watchdog->entries_[id] = Entry{context, absl::Now() + limit, &fired_};
        return id;
      }()) {}

void CallWatchdog::Guard::Extend() {
  absl::MutexLock lock(&watchdog_->mu_);
  auto it = watchdog_->entries_.find(id_);
  if (it != watchdog_->entries_.end()) it->second.deadline = absl::Now() + limit_;
}

void CallWatchdog::Guard::Disarm() {
  if (!armed_) return;
  armed_ = false;
  absl::MutexLock lock(&watchdog_->mu_);
  watchdog_->entries_.erase(id_);
}

bool CallWatchdog::Guard::fired() const {
  absl::MutexLock lock(&watchdog_->mu_);
  return fired_;
}

}  // namespace psring::ps
