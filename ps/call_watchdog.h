// Cancels server calls whose client stops sending: a gRPC sync handler blocked in Read() holds its thread
// until the client's deadline, which the client chooses (none at all, for a hostile one). The watchdog
// gives every guarded wait its own limit and cancels the call (ServerContext::TryCancel, so the Read
// returns false) when it passes.
//
//   CallWatchdog::Guard guard(&watchdog, context, absl::Seconds(10));  // armed
//   while (stream->Read(&message)) { guard.Extend(); ... }              // 10 s from the latest message
//   if (guard.fired()) return absl::DeadlineExceededError("...");
//
// One thread checks the armed calls every 50 ms, so a limit holds within about 50 ms.
// Thread-safety: CallWatchdog is thread-safe; a Guard belongs to the handler that made it.
#ifndef PSRING_PS_CALL_WATCHDOG_H_
#define PSRING_PS_CALL_WATCHDOG_H_

#include <cstdint>
#include <map>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"

namespace psring::ps {

class CallWatchdog {
 public:
  CallWatchdog();
  ~CallWatchdog();  // joins the thread; every Guard must be gone
  CallWatchdog(const CallWatchdog&) = delete;
  CallWatchdog& operator=(const CallWatchdog&) = delete;

  class Guard {
   public:
    // Cancels `context`'s call unless Extend() or Disarm() comes within `limit`. `context` must outlive
    // the guard.
    Guard(CallWatchdog* watchdog, grpc::ServerContext* context, absl::Duration limit);
    ~Guard() { Disarm(); }
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;

    // The limit counts again from now.
    void Extend();
    // No cancellation from now on (blocks while one is being delivered, so the context may then go).
    void Disarm();
    // Whether the watchdog cancelled the call.
    bool fired() const;

   private:
    CallWatchdog* const watchdog_;
    const absl::Duration limit_;
    const uint64_t id_;
    bool armed_ = true;
    bool fired_ = false;  // guarded by watchdog_->mu_
  };

 private:
  struct Entry {
    grpc::ServerContext* context = nullptr;
    absl::Time deadline;
    bool* fired = nullptr;  // the guard's flag
  };
  void Loop();

  mutable absl::Mutex mu_;
  std::map<uint64_t, Entry> entries_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace psring::ps

#endif  // PSRING_PS_CALL_WATCHDOG_H_
