// ThreadSanitizer happens-before edges for absl::Mutex and absl::CondVar, linked into every binary built with
// --config=tsan (see //third_party:absl).
//
// Why: Debian's Abseil is a shared library built without -fsanitize=thread, so its Mutex synchronises with
// atomics and futexes that TSan never sees, and every field guarded by an absl::Mutex would be reported as a
// data race. Abseil built with TSan annotates its own Mutex; this file does the same from the outside: the
// executable defines the Mutex and CondVar members that take or give up a lock, so the dynamic linker binds
// every call (from psring and from gRPC) here first; each calls the real function in libabsl (found with
// dlsym(RTLD_NEXT)) and tells TSan about the lock with __tsan_acquire / __tsan_release on the Mutex's
// address. Conditions are wrapped too (EvalAnnotated).
//
// Only the happens-before order is modelled, not lock ownership: TSan still finds unsynchronised accesses,
// but not lock-order inversions of absl::Mutex (the thread-safety analysis of --config=clang covers locking
// discipline). Members not defined here (WriterLock & co.) are inline wrappers of those that are.
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/base/options.h"
#include "absl/synchronization/mutex.h"

static_assert(ABSL_OPTION_USE_INLINE_NAMESPACE == 1,
              "the mangled names below assume Abseil's inline namespace");

namespace {

#define PSRING_STRINGIFY_INNER(x) #x
#define PSRING_STRINGIFY(x) PSRING_STRINGIFY_INNER(x)

// The real member of absl::<inline namespace>:: whose Itanium-mangled name ends with `rest`, in libabsl.
template <typename Fn>
Fn Real(const char* rest) {
  const std::string inline_namespace = PSRING_STRINGIFY(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  const std::string name = "_ZN4absl" + std::to_string(inline_namespace.size()) + inline_namespace + rest;
  void* function = dlsym(RTLD_NEXT, name.c_str());
  if (function == nullptr) {
    std::fprintf(stderr, "tsan annotations: %s not found in the Abseil library (%s)\n", name.c_str(),
                 dlerror());
    std::abort();
  }
  return reinterpret_cast<Fn>(function);
}

struct AnnotatedCondition {
  const absl::Condition* condition;
  absl::Mutex* mu;
};

// Abseil evaluates a condition with the lock held, on the waiting thread or on whichever thread unlocks, and
// neither passes through the wrappers below at that point: acquire before reading the guarded state, and
// release after, so the next holder of the lock is ordered after these reads.
bool EvalAnnotated(AnnotatedCondition* c) {
  __tsan_acquire(c->mu);
  const bool met = c->condition->Eval();
  __tsan_release(c->mu);
  return met;
}

// Acquires `mu` for TSan when it goes out of scope, i.e. after the real call returned.
struct AcquireOnReturn {
  absl::Mutex* mu;
  ~AcquireOnReturn() { __tsan_acquire(mu); }
};

enum Kind { kLocks, kWaits };  // LockWhen*: takes the lock; Await*: holds it and gives it up while waiting

// real(mu, cond, rest...) of the LockWhen and Await families, with the condition wrapped.
template <typename R, typename... Rest>
R CallWithCondition(R (*real)(absl::Mutex*, const absl::Condition&, Rest...), absl::Mutex* mu,
                    const absl::Condition& cond, Kind kind, Rest... rest) {
  AnnotatedCondition annotated{&cond, mu};
  if (kind == kWaits) __tsan_release(mu);
  AcquireOnReturn acquire{mu};
  return real(mu, absl::Condition(&EvalAnnotated, &annotated), rest...);
}

// real(cv, mu, rest...) of CondVar::Wait*: `mu` is given up while waiting and held again on return.
template <typename R, typename... Rest>
R WaitOn(R (*real)(absl::CondVar*, absl::Mutex*, Rest...), absl::CondVar* cv, absl::Mutex* mu, Rest... rest) {
  __tsan_release(mu);
  AcquireOnReturn acquire{mu};
  return real(cv, mu, rest...);
}

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

// Plain locking.

void Mutex::Lock() {
  static const auto real = Real<void (*)(Mutex*)>("5Mutex4LockEv");
  real(this);
  __tsan_acquire(this);
}

void Mutex::ReaderLock() {
  static const auto real = Real<void (*)(Mutex*)>("5Mutex10ReaderLockEv");
  real(this);
  __tsan_acquire(this);
}

bool Mutex::TryLock() {
  static const auto real = Real<bool (*)(Mutex*)>("5Mutex7TryLockEv");
  const bool locked = real(this);
  if (locked) __tsan_acquire(this);
  return locked;
}

bool Mutex::ReaderTryLock() {
  static const auto real = Real<bool (*)(Mutex*)>("5Mutex13ReaderTryLockEv");
  const bool locked = real(this);
  if (locked) __tsan_acquire(this);
  return locked;
}

void Mutex::Unlock() {
  static const auto real = Real<void (*)(Mutex*)>("5Mutex6UnlockEv");
  __tsan_release(this);
  real(this);
}

void Mutex::ReaderUnlock() {
  static const auto real = Real<void (*)(Mutex*)>("5Mutex12ReaderUnlockEv");
  __tsan_release(this);
  real(this);
}

// Locking once a condition holds (the lock is held on return whatever the result), and waiting with the lock
// held (released while waiting, held again on return).

void Mutex::LockWhen(const Condition& cond) {
  static const auto real = Real<void (*)(Mutex*, const Condition&)>("5Mutex8LockWhenERKNS0_9ConditionE");
  return CallWithCondition(real, this, cond, kLocks);
}

void Mutex::ReaderLockWhen(const Condition& cond) {
  static const auto real =
      Real<void (*)(Mutex*, const Condition&)>("5Mutex14ReaderLockWhenERKNS0_9ConditionE");
  return CallWithCondition(real, this, cond, kLocks);
}

bool Mutex::LockWhenWithTimeout(const Condition& cond, Duration timeout) {
  static const auto real = Real<bool (*)(Mutex*, const Condition&, Duration)>(
      "5Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  return CallWithCondition(real, this, cond, kLocks, timeout);
}

bool Mutex::ReaderLockWhenWithTimeout(const Condition& cond, Duration timeout) {
  static const auto real = Real<bool (*)(Mutex*, const Condition&, Duration)>(
      "5Mutex25ReaderLockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  return CallWithCondition(real, this, cond, kLocks, timeout);
}

bool Mutex::LockWhenWithDeadline(const Condition& cond, Time deadline) {
  static const auto real = Real<bool (*)(Mutex*, const Condition&, Time)>(
      "5Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  return CallWithCondition(real, this, cond, kLocks, deadline);
}

bool Mutex::ReaderLockWhenWithDeadline(const Condition& cond, Time deadline) {
  static const auto real = Real<bool (*)(Mutex*, const Condition&, Time)>(
      "5Mutex26ReaderLockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  return CallWithCondition(real, this, cond, kLocks, deadline);
}

void Mutex::Await(const Condition& cond) {
  static const auto real = Real<void (*)(Mutex*, const Condition&)>("5Mutex5AwaitERKNS0_9ConditionE");
  return CallWithCondition(real, this, cond, kWaits);
}

bool Mutex::AwaitWithTimeout(const Condition& cond, Duration timeout) {
  static const auto real = Real<bool (*)(Mutex*, const Condition&, Duration)>(
      "5Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  return CallWithCondition(real, this, cond, kWaits, timeout);
}

bool Mutex::AwaitWithDeadline(const Condition& cond, Time deadline) {
  static const auto real =
      Real<bool (*)(Mutex*, const Condition&, Time)>("5Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  return CallWithCondition(real, this, cond, kWaits, deadline);
}

void CondVar::Wait(Mutex* mu) {
  static const auto real = Real<void (*)(CondVar*, Mutex*)>("7CondVar4WaitEPNS0_5MutexE");
  return WaitOn(real, this, mu);
}

bool CondVar::WaitWithTimeout(Mutex* mu, Duration timeout) {
  static const auto real =
      Real<bool (*)(CondVar*, Mutex*, Duration)>("7CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  return WaitOn(real, this, mu, timeout);
}

bool CondVar::WaitWithDeadline(Mutex* mu, Time deadline) {
  static const auto real =
      Real<bool (*)(CondVar*, Mutex*, Time)>("7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  return WaitOn(real, this, mu, deadline);
}

ABSL_NAMESPACE_END
}  // namespace absl
