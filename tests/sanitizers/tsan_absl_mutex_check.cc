// Shows that the preloaded abseil annotations (tsan_absl_mutex.cc) neither
// hide a race nor invent one. Run by ctest in ThreadSanitizer builds:
//   tsan_absl_mutex_check guarded    two threads share a counter under an
//                                    absl::Mutex, through Lock/Unlock, Await,
//                                    AwaitWithTimeout, LockWhen and
//                                    CondVar::WaitWithTimeout: no report
//   tsan_absl_mutex_check unguarded  the same counter without the mutex:
//                                    ThreadSanitizer must report a data race
#include <cstdio>
#include <cstring>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace {

constexpr int kRounds = 200;

int Guarded() {
  absl::Mutex mu;
  absl::CondVar changed;
  long counter = 0;
  bool ping = false;
  std::thread other([&] {
    for (int i = 0; i < kRounds; ++i) {
      absl::MutexLock lock(&mu, absl::Condition(&ping));  // LockWhen
      ++counter;
      ping = false;
      changed.Signal();
    }
  });
  for (int i = 0; i < kRounds; ++i) {
    absl::MutexLock lock(&mu);
    ++counter;
    ping = true;
    if (i % 2 == 0) {
      mu.AwaitWithTimeout(absl::Condition(+[](bool* p) { return !*p; }, &ping),
                          absl::Seconds(60));
    } else {
      while (ping) changed.WaitWithTimeout(&mu, absl::Seconds(60));
    }
  }
  other.join();
  absl::MutexLock lock(&mu);
  mu.Await(absl::Condition(+[](long* c) { return *c == 2 * kRounds; }, &counter));
  std::printf("guarded: counter %ld\n", counter);
  return counter == 2 * kRounds ? 0 : 1;
}

int Unguarded() {
  long counter = 0;
  std::thread other([&] {
    for (int i = 0; i < kRounds; ++i) ++counter;
  });
  for (int i = 0; i < kRounds; ++i) ++counter;
  other.join();
  std::printf("unguarded: counter %ld\n", counter);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "guarded") == 0) return Guarded();
  if (argc == 2 && std::strcmp(argv[1], "unguarded") == 0) return Unguarded();
  std::fprintf(stderr, "usage: tsan_absl_mutex_check guarded|unguarded\n");
  return 2;
}
