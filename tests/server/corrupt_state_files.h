#ifndef LINSERVE_TESTS_SERVER_CORRUPT_STATE_FILES_H_
#define LINSERVE_TESTS_SERVER_CORRUPT_STATE_FILES_H_

// Damaged and foreign copies of a sound state file (server/store/state_file.h), as
// a failing disk, a hostile client or another build could hand the server.
// Every function keeps the file's checksum right unless its name says it
// breaks it, so that only the check under test can catch the damage.

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>

namespace linserve {

// `file` with its trailing SHA-256 recomputed over what precedes it.
std::string Resealed(std::string file);

// The file with another format version in its fixed header.
std::string WithFormatVersion(const std::string& file, uint32_t version);

// The file re-encoded with `payload` in place of its own (lengths and
// checksum right).
std::string WithPayload(const std::string& file, const std::string& payload);

// The file's payload with one element (at the middle) of tensor `name` set
// to `value`: a NaN or an Inf.
std::string WithValueInTensor(const std::string& file, const std::string& name, float value);

// The file's payload with every floating-point tensor stored as `dtype`.
std::string WithTensorsAs(const std::string& file, c10::ScalarType dtype);

// The file whose payload's tensor table claims tensor `name` is
// `claimed_bytes` long (F32, one dimension), while the payload holds a few
// bytes: what a parser that trusts the table would allocate.
std::string ClaimingHugeTensor(const std::string& file, const std::string& name,
                               uint64_t claimed_bytes);

// The file's payload header region: [start, end) byte offsets within the
// whole file of the record header JSON and the payload's tensor table, where
// a flipped bit changes structure rather than a number.
struct StructureRange {
  size_t record_header_begin = 0, record_header_end = 0;
  size_t tensor_table_begin = 0, tensor_table_end = 0;
};
StructureRange StructureOf(const std::string& file);

// The number of the payload's tensor data that byte `offset` of the file
// falls in: where it begins in the file and the dtype of its tensor.
struct NumberAt {
  size_t begin = 0;
  c10::ScalarType dtype = c10::ScalarType::Undefined;
};
NumberAt NumberAtOffset(const std::string& file, size_t offset);

}  // namespace linserve

#endif  // LINSERVE_TESTS_SERVER_CORRUPT_STATE_FILES_H_
