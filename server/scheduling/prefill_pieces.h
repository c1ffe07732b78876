#ifndef LINSERVE_SERVER_PREFILL_PIECES_H_
#define LINSERVE_SERVER_PREFILL_PIECES_H_

// How a prompt's prefill is cut into engine calls. The engine's chunked
// prefill splits each call into chunks from the call's own start, and a
// matrix product's rows come out bit-identical whatever the number of rows
// only once BLAS takes its blocked path (a handful of rows or more). So:
//   - a piece ends at a multiple of the chunk size, counted from the prompt's
//     first token, so chunk boundaries sit at the same tokens whatever the
//     load and the prefill token budget; and
//   - the prompt's last partial chunk is a piece of its own, so its few rows
//     go through the same small products however the prompt got there.
// A request resumed from a cached prefix (which ends at a chunk boundary)
// then makes, from that boundary on, the engine calls a run from the start
// would make, and its numbers are the same bits (docs/DESIGN.md, "The
// prefix-state cache").

#include <cstdint>

namespace linserve {

// Tokens to prefill next of a prompt of `total` tokens of which `done` are
// prefilled, with `budget` tokens left in this engine iteration. `stop`
// (when > done) is a boundary the piece must end at (a prefix snapshot is
// due there). Returns 0 when the budget left cannot reach the next
// boundary, unless `first` (nothing ran yet this iteration): then the next
// piece goes anyway, so that every iteration makes progress.
int64_t NextPieceLength(int64_t done, int64_t total, int64_t stop, int64_t budget,
                        int64_t chunk, bool first);

}  // namespace linserve

#endif  // LINSERVE_SERVER_PREFILL_PIECES_H_
