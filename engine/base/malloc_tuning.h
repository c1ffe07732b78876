#ifndef LINSERVE_ENGINE_BASE_MALLOC_TUNING_H_
#define LINSERVE_ENGINE_BASE_MALLOC_TUNING_H_

// How glibc's malloc should treat the engine's tensors. By default it hands a
// freed block of 128 KiB or more back to the kernel (munmap, or a trim of the
// heap's top; the bound then adapts to the blocks freed), and the block's
// pages fault in afresh the next time a tensor that size is made. A step of
// the engine makes and frees the same tensors every time, so it paid for
// their pages on every step: on the 2-core development machine a fault cost
// about 10 us, and a 1,024-token prefill of the 0.1B RWKV-7 shape spent about
// 30% of its time in them (bench/RESULTS.md, "Freed memory kept for reuse").
//
// KeepFreedMemory keeps blocks up to 32 MiB (glibc's largest bound) in the
// heap, and the heap's free top up to `keep_bytes`, for the next allocation,
// and puts every thread on the main heap (one arena), whose top is what that
// bound keeps.
// Call it once at the start of main, before threads start: malloc's settings
// are the process's. 0 leaves glibc's adaptive behaviour as it is; under a
// sanitizer, whose allocator replaces glibc's, the call changes nothing.
// InvalidArgument only for a `keep_bytes` malloc cannot take.

#include <cstdint>

#include "absl/status/status.h"

namespace linserve {

absl::Status KeepFreedMemory(int64_t keep_bytes);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_BASE_MALLOC_TUNING_H_
