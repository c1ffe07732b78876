#ifndef LINSERVE_ENGINE_CPU_ENGINE_THREADS_H_
#define LINSERVE_ENGINE_CPU_ENGINE_THREADS_H_

// The engine's one pool of threads. The products, the recurrences and the
// fused passes split their work over it; nothing else in the engine starts
// threads (LibTorch's intra-op loops are set to one thread where the pool is
// sized: see server/main.cc), so the machine's cores are used once.
//
// Bits: ParallelFor cuts [0, n) into spans of `grain` fixed by the caller
// from the problem's shape, never from the thread count, and calls the task
// once per span. A loop whose every output belongs to one span, computed the
// same way whichever thread runs it, therefore gives the same bits at any
// thread count (docs/DESIGN.md, "What is bit-identical").
//
// Thread-safe. One job runs on the pool at a time; a call made while another
// thread's job holds the pool, or from inside a task, runs its spans on the
// calling thread, in order: never a wait on the pool, so never a deadlock.

#include <cstdint>

namespace linserve {

// The pool's size, counting the calling thread: `threads - 1` workers wait
// for jobs. 1 (the default) runs every job on its caller. Takes effect for
// the next job; safe to call at any time, from any thread (a job running
// keeps the workers it had).
void SetEngineThreads(int threads);
int EngineThreads();

// The cores this process may run on (its affinity mask), at least 1: the
// server's default pool size.
int AvailableCores();

namespace engine_threads_internal {
using SpanFn = void (*)(const void* task, int64_t begin, int64_t end);
void Run(int64_t n, int64_t grain, SpanFn fn, const void* task);
}  // namespace engine_threads_internal

// Calls task(begin, end) for every span [k * grain, min(n, (k + 1) * grain))
// of [0, n), spread over the pool, and returns when all are done. Spans run
// in no particular order and on any thread. The first exception a task throws
// is rethrown here, after every span has run.
template <class Task>
void ParallelFor(int64_t n, int64_t grain, const Task& task) {
  engine_threads_internal::Run(
      n, grain,
      [](const void* t, int64_t begin, int64_t end) {
        (*static_cast<const Task*>(t))(begin, end);
      },
      &task);
}

}  // namespace linserve

#endif  // LINSERVE_ENGINE_CPU_ENGINE_THREADS_H_
