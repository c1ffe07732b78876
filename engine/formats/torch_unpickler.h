#ifndef LINSERVE_ENGINE_TORCH_UNPICKLER_H_
#define LINSERVE_ENGINE_TORCH_UNPICKLER_H_

// Reads the pickle that torch.save writes for a dict of tensors (the
// archive's data.pkl) without Python and without LibTorch's unpickler.
//
// Why not torch::pickle_load: fed hostile checkpoints, LibTorch 1.13's
// unpickler crashes (a REDUCE on an empty stack and a long chain of TUPLE1
// both end in SIGSEGV), tries to allocate whatever a memo index claims
// (LONG_BINPUT 2^31 - 1 throws bad_alloc after asking for ~32 GiB), and
// returns tensors whose sizes, strides or offsets reach past their storage,
// or whose storage record is shorter than declared, so the first read of
// them is out of bounds. A server loading files it did not write cannot
// catch any of that, so this reader understands exactly what a state dict
// needs and checks every read:
//   - protocol 2 opcodes: PROTO STOP MARK POP POP_MARK DUP, NONE NEWTRUE
//     NEWFALSE BININT BININT1 BININT2 LONG1 BINFLOAT BINUNICODE,
//     EMPTY_TUPLE TUPLE TUPLE1-3 EMPTY_LIST LIST APPEND APPENDS EMPTY_DICT
//     DICT SETITEM SETITEMS, BINPUT LONG_BINPUT BINGET LONG_BINGET, GLOBAL
//     REDUCE NEWOBJ BUILD BINPERSID;
//   - calls of collections.OrderedDict(), torch._utils._rebuild_tensor_v2
//     and torch._utils._rebuild_parameter are understood; any other class or
//     function is never called, only remembered by name, so that a file
//     holding something else is refused naming what it holds;
//   - a persistent id is ('storage', torch.<T>Storage, key, location, numel).
// Hostile input costs bounded memory: at most kMaxPickleOps opcodes and
// kMaxPickleObjects values, nesting at most kMaxPickleDepth deep, no value
// can come to contain itself, and what it copies is bounded by the pickle's
// size (kPickleCopiedBytesPerByte below).
//
// Error codes: DataLoss for a pickle that is malformed or truncated, naming
// the byte offset of the opcode; InvalidArgument for a valid pickle that is
// not a dict of string -> tensor, naming the key or what the file holds.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace linserve {

// A state dict for the largest published models is a few tens of thousands
// of opcodes; these bounds sit far above any real file and keep a hostile
// one to a few hundred MB.
inline constexpr int64_t kMaxPickleOps = int64_t{1} << 22;
inline constexpr int64_t kMaxPickleObjects = int64_t{1} << 20;
// A state dict nests four deep (dict, tensor arguments, shape, ints).
inline constexpr int kMaxPickleDepth = 32;
// Tensors of higher rank are corrupt, not large.
inline constexpr size_t kMaxPickledRank = 64;
// Counting values is not enough: a value memoized once can be copied by
// every opcode that uses it (an object named after a 64 KiB class name, a
// tensor with a 64 KiB storage key under a million names), a few bytes of
// pickle each. So every byte copied out of the pickle (strings, names,
// storage keys, sizes and strides, each PickledTensor made or returned) is
// charged, and a pickle may copy at most this many bytes per byte of its own
// plus kPickleCopiedBytesAllowance. torch.save's pickles copy about 5 (the
// RWKV-7 fixtures' 41 KB pickles, 214 KB; by count, rank-64 tensors about
// 7), so this refuses only files built to multiply themselves, and bounds
// the copies of the largest pickle read (64 MiB) to 1 GiB. References (DUP,
// BINGET, containers) copy a pointer, bounded by kMaxPickleOps.
inline constexpr int64_t kPickleCopiedBytesPerByte = 16;
inline constexpr int64_t kPickleCopiedBytesAllowance = int64_t{1} << 20;

// One tensor as data.pkl describes it; its bytes are the archive's entry
// "<archive>/data/<storage_key>". Sizes, strides and offset are checked to
// be non-negative but not yet against the storage.
struct PickledTensor {
  std::string storage_key;
  std::string storage_type;  // The class name, e.g. "FloatStorage", "BFloat16Storage".
  int64_t storage_numel = 0;
  int64_t storage_offset = 0;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
};

// Name and tensor, in the order the pickle lists them.
using PickledStateDict = std::vector<std::pair<std::string, PickledTensor>>;

// Parses `pickle`, found at byte `file_offset` of its file (for messages).
// Thread-safe.
absl::StatusOr<PickledStateDict> UnpickleStateDict(std::string_view pickle, uint64_t file_offset);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_TORCH_UNPICKLER_H_
