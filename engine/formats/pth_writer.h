#ifndef LINSERVE_ENGINE_PTH_WRITER_H_
#define LINSERVE_ENGINE_PTH_WRITER_H_

// Writes a dict of tensors in the layout torch.save gives it, so that tests,
// fuzz seeds and tools can make PyTorch checkpoints without Python: a zip of
// stored entries "<archive>/data.pkl" (a protocol-2 pickle of the dict),
// "<archive>/data/<i>" (tensor i's bytes, 64-byte aligned), "byteorder" and
// "version", closed by zip64 end records as torch.save always writes them.
// Python's torch.load reads the result; engine/formats/pth_reader.h reads it back.

#include <string>

#include "engine/formats/safetensors.h"

namespace linserve {

struct PthWriteOptions {
  // torch.save uses the file's stem.
  std::string archive_name = "archive";
  // See ZipWriteOptions (engine/formats/zip_writer.h).
  bool force_zip64 = false;
};

// Precondition: every tensor is defined, strided, and float32, bfloat16 or
// float16 (what pth_reader.h reads); violations throw c10::Error. Tensors
// are written contiguous from the CPU, each with a storage of its own.
std::string SerializePth(const TensorMap& tensors, const PthWriteOptions& options = {});

}  // namespace linserve

#endif  // LINSERVE_ENGINE_PTH_WRITER_H_
