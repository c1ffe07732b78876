#ifndef LINSERVE_ENGINE_PTH_READER_H_
#define LINSERVE_ENGINE_PTH_READER_H_

// PyTorch checkpoints (".pth", ".pt") as Python's torch.save writes them — a
// zip archive holding a pickled dict and one entry per tensor storage — read
// without Python. This is how BlinkDL publishes RWKV-7 weights.
//
// Three layers, each checking what it reads before trusting it:
//   engine/formats/zip_directory.h  the archive's structure: end records (zip64
//                           included), central directory, local headers;
//                           every entry's data inside the file, none
//                           overlapping, all stored uncompressed.
//   engine/formats/torch_unpickler.h  data.pkl. Not LibTorch's torch::pickle_load:
//                           on hostile files it crashes, allocates what the
//                           file claims, and returns tensors that reach past
//                           their storage (that header says how it was
//                           tested); ours is a restricted unpickler for
//                           exactly what a state dict holds.
//   this file               each tensor's sizes, strides and offset checked
//                           against its storage, whose entry must hold
//                           exactly the bytes the storage declares.
// A file's tensor bytes are read (pread) straight into the tensors, never
// held twice; a tensor that is all of its storage shares it, and a view of
// part of a storage is copied out (the copies together may not exceed the
// file's size, which bounds memory on hostile input). Measured on the 2-core
// development machine, a 2 GiB bfloat16 checkpoint in the page cache: 1.2 s,
// peak RSS 2.15 GiB; torch::pickle_load on the same file (read into memory
// first, as its API takes it): 17.8 s, 6.15 GiB. 5 GiB (zip64): 8.1 s.
//
// Error codes, as in engine/formats/safetensors.h:
//   DataLoss         the bytes are not a valid checkpoint (truncated, corrupt
//                    archive or pickle, a tensor's data missing or short);
//                    messages name the byte offset or the tensor, and those
//                    about a short file start with "pth: truncated".
//   InvalidArgument  a valid file that is not a dict of string -> tensor, or
//                    whose tensors are of a dtype not read, naming the key or
//                    what the file holds.
//   errno-derived    the file system failed (NotFound, PermissionDenied, ...).
//   ResourceExhausted  the tensors did not fit in memory.
//
// All functions are thread-safe: they share no state.

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "engine/formats/safetensors.h"

namespace linserve {

// Tensors by name, on the CPU, contiguous, in the dtype stored: float32,
// bfloat16 or float16; a tensor of another dtype is refused by name.
absl::StatusOr<TensorMap> ReadPthFile(const std::string& path);

// The same from memory (tests, fuzzing). The tensors own their memory, so
// `bytes` may be freed afterwards.
absl::StatusOr<TensorMap> ParsePth(std::string_view bytes);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_PTH_READER_H_
