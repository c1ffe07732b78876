#ifndef LINSERVE_BENCH_MALLOC_FLAG_H_
#define LINSERVE_BENCH_MALLOC_FLAG_H_

// --malloc_keep_mb for the benches, with the server's default, so that an
// engine measured beside the server keeps freed memory as the server does
// (engine/base/malloc_tuning.h); --malloc_keep_mb=0 measures glibc's own
// bounds.

namespace linserve {

// Applies the flag; false (the reason on stderr) when it is out of range.
bool KeepFreedMemoryAsFlagged();

}  // namespace linserve

#endif  // LINSERVE_BENCH_MALLOC_FLAG_H_
