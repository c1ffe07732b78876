// ThreadSanitizer annotations for Debian's abseil (scripts/test-sanitized
// tsan loads this library with LD_PRELOAD).
//
// absl::Mutex and absl::CondVar are implemented in libabsl_synchronization.so,
// which Debian builds without ThreadSanitizer: their lock word and futex waits
// are invisible to it, so every access our code makes under an absl::Mutex
// would be reported as a race. Abseil built from source with
// -fsanitize=thread annotates itself with the __tsan_mutex_* interface; this
// library adds the same annotations from outside. It defines the public
// Mutex and CondVar member functions, so that the dynamic linker binds every
// caller (our code, gRPC, abseil itself) to these, which tell ThreadSanitizer
// what happens and forward to the real implementation (dlsym RTLD_NEXT).
// The annotations mirror abseil's own (absl/synchronization/mutex.cc).

#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/base/options.h"
#include "absl/synchronization/mutex.h"

// Weak: a process that is not built with ThreadSanitizer (redis-server, a
// shell) may load this library too; there the annotations are skipped.
extern "C" {
void __tsan_mutex_pre_lock(void*, unsigned) __attribute__((weak));
void __tsan_mutex_post_lock(void*, unsigned, int) __attribute__((weak));
int __tsan_mutex_pre_unlock(void*, unsigned) __attribute__((weak));
void __tsan_mutex_post_unlock(void*, unsigned) __attribute__((weak));
}

namespace {

#define LINSERVE_STRINGIFY_INNER(x) #x
#define LINSERVE_STRINGIFY(x) LINSERVE_STRINGIFY_INNER(x)

// The real function behind a mangled name of the form
// _ZN4absl<len><inline namespace><rest>.
template <typename Fn>
Fn Real(const char* rest) {
  const std::string ns = LINSERVE_STRINGIFY(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  const std::string name = "_ZN4absl" + std::to_string(ns.size()) + ns + rest;
  void* fn = dlsym(RTLD_NEXT, name.c_str());
  if (fn == nullptr) {
    std::fprintf(stderr, "tsan_absl_mutex: %s not found\n", name.c_str());
    std::abort();
  }
  return reinterpret_cast<Fn>(fn);
}

bool Tsan() { return __tsan_mutex_pre_lock != nullptr; }

void PreLock(void* mu, unsigned flags) {
  if (Tsan()) __tsan_mutex_pre_lock(mu, flags);
}
void PostLock(void* mu, unsigned flags) {
  if (Tsan()) __tsan_mutex_post_lock(mu, flags, 0);
}
void PreUnlock(void* mu, unsigned flags) {
  if (Tsan()) __tsan_mutex_pre_unlock(mu, flags);
}
void PostUnlock(void* mu, unsigned flags) {
  if (Tsan()) __tsan_mutex_post_unlock(mu, flags);
}

using MutexFn = void (*)(absl::Mutex*);
using TryFn = bool (*)(absl::Mutex*);
using CondFn = void (*)(absl::Mutex*, const absl::Condition&);
using CondTimeoutFn = bool (*)(absl::Mutex*, const absl::Condition&, absl::Duration);
using CondDeadlineFn = bool (*)(absl::Mutex*, const absl::Condition&, absl::Time);
using WaitFn = void (*)(absl::CondVar*, absl::Mutex*);
using WaitTimeoutFn = bool (*)(absl::CondVar*, absl::Mutex*, absl::Duration);
using WaitDeadlineFn = bool (*)(absl::CondVar*, absl::Mutex*, absl::Time);

constexpr unsigned kRead = __tsan_mutex_read_lock;

// The real AwaitWithTimeout, LockWhenWithTimeout and CondVar::WaitWithTimeout
// call their ...WithDeadline twins through the dynamic linker, that is back
// into this library: only the outermost call on a mutex is annotated (a
// second pre-unlock would be an unlock of an unlocked mutex).
thread_local const absl::Mutex* annotating = nullptr;

class OutermostCall {
 public:
  explicit OutermostCall(const absl::Mutex* mu)
      : previous_(annotating), outermost_(annotating != mu) {
    annotating = mu;
  }
  ~OutermostCall() { annotating = previous_; }
  bool outermost() const { return outermost_; }

 private:
  const absl::Mutex* previous_;
  bool outermost_;
};

// A blocking acquisition, plain or with a condition. The condition is
// evaluated inside the real call, between pre- and post-lock, where
// ThreadSanitizer ignores memory accesses, as abseil's own annotations do.
template <typename Call>
auto Acquire(absl::Mutex* mu, unsigned flags, Call call) {
  const OutermostCall scope(mu);
  if (!scope.outermost()) return call();
  PreLock(mu, flags);
  auto result = call();
  PostLock(mu, flags);
  return result;
}

// Held before and after, released while waiting (Await, CondVar::Wait). As in
// abseil's AwaitCommon and CondVar::WaitCommon, the release is annotated
// before the wait and the accesses inside the wait (a condition evaluated
// while the real call holds the mutex again) are ignored until the mutex is
// annotated as held again.
template <typename Call>
auto ReleaseWhileWaiting(absl::Mutex* mu, Call call) {
  const OutermostCall scope(mu);
  if (!scope.outermost()) return call();
  PreUnlock(mu, 0);
  auto result = call();
  PostUnlock(mu, 0);
  PreLock(mu, 0);
  PostLock(mu, 0);
  return result;
}

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

// No ~Mutex here: destroying a mutex is not annotated. The annotation is a
// write to the mutex that races with its last use unless ThreadSanitizer saw
// what ordered the two, and for gRPC's own mutexes that is often a reference
// count in its uninstrumented code (the last owner of a shared state frees
// it), from a destructor that may be ours (an inline virtual destructor
// tail-calling gRPC's). Nothing is lost for our objects: freeing their memory
// is itself checked as a write, and it also makes ThreadSanitizer forget the
// mutex.

void Mutex::Lock() {
  static const MutexFn real = Real<MutexFn>("5Mutex4LockEv");
  Acquire(this, 0, [&] { return (real(this), 0); });
}

void Mutex::ReaderLock() {
  static const MutexFn real = Real<MutexFn>("5Mutex10ReaderLockEv");
  Acquire(this, kRead, [&] { return (real(this), 0); });
}

bool Mutex::TryLock() {
  static const TryFn real = Real<TryFn>("5Mutex7TryLockEv");
  PreLock(this, __tsan_mutex_try_lock);
  const bool locked = real(this);
  PostLock(this, __tsan_mutex_try_lock | (locked ? 0 : __tsan_mutex_try_lock_failed));
  return locked;
}

bool Mutex::ReaderTryLock() {
  static const TryFn real = Real<TryFn>("5Mutex13ReaderTryLockEv");
  const unsigned flags = kRead | __tsan_mutex_try_lock;
  PreLock(this, flags);
  const bool locked = real(this);
  PostLock(this, flags | (locked ? 0 : __tsan_mutex_try_lock_failed));
  return locked;
}

void Mutex::Unlock() {
  static const MutexFn real = Real<MutexFn>("5Mutex6UnlockEv");
  PreUnlock(this, 0);
  real(this);
  PostUnlock(this, 0);
}

void Mutex::ReaderUnlock() {
  static const MutexFn real = Real<MutexFn>("5Mutex12ReaderUnlockEv");
  PreUnlock(this, kRead);
  real(this);
  PostUnlock(this, kRead);
}

void Mutex::LockWhen(const Condition& cond) {
  static const CondFn real = Real<CondFn>("5Mutex8LockWhenERKNS0_9ConditionE");
  Acquire(this, 0, [&] { return (real(this, cond), 0); });
}

void Mutex::ReaderLockWhen(const Condition& cond) {
  static const CondFn real = Real<CondFn>("5Mutex14ReaderLockWhenERKNS0_9ConditionE");
  Acquire(this, kRead, [&] { return (real(this, cond), 0); });
}

bool Mutex::LockWhenWithTimeout(const Condition& cond, Duration timeout) {
  static const CondTimeoutFn real =
      Real<CondTimeoutFn>("5Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  return Acquire(this, 0, [&] { return real(this, cond, timeout); });
}

bool Mutex::LockWhenWithDeadline(const Condition& cond, Time deadline) {
  static const CondDeadlineFn real =
      Real<CondDeadlineFn>("5Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  return Acquire(this, 0, [&] { return real(this, cond, deadline); });
}

void Mutex::Await(const Condition& cond) {
  static const CondFn real = Real<CondFn>("5Mutex5AwaitERKNS0_9ConditionE");
  ReleaseWhileWaiting(this, [&] { return (real(this, cond), 0); });
}

bool Mutex::AwaitWithTimeout(const Condition& cond, Duration timeout) {
  static const CondTimeoutFn real =
      Real<CondTimeoutFn>("5Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  return ReleaseWhileWaiting(this, [&] { return real(this, cond, timeout); });
}

bool Mutex::AwaitWithDeadline(const Condition& cond, Time deadline) {
  static const CondDeadlineFn real =
      Real<CondDeadlineFn>("5Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  return ReleaseWhileWaiting(this, [&] { return real(this, cond, deadline); });
}

void CondVar::Wait(Mutex* mu) {
  static const WaitFn real = Real<WaitFn>("7CondVar4WaitEPNS0_5MutexE");
  ReleaseWhileWaiting(mu, [&] { return (real(this, mu), 0); });
}

bool CondVar::WaitWithTimeout(Mutex* mu, Duration timeout) {
  static const WaitTimeoutFn real =
      Real<WaitTimeoutFn>("7CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  return ReleaseWhileWaiting(mu, [&] { return real(this, mu, timeout); });
}

bool CondVar::WaitWithDeadline(Mutex* mu, Time deadline) {
  static const WaitDeadlineFn real =
      Real<WaitDeadlineFn>("7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  return ReleaseWhileWaiting(mu, [&] { return real(this, mu, deadline); });
}

ABSL_NAMESPACE_END
}  // namespace absl
