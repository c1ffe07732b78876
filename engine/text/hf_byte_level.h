#ifndef LINSERVE_ENGINE_TEXT_HF_BYTE_LEVEL_H_
#define LINSERVE_ENGINE_TEXT_HF_BYTE_LEVEL_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace linserve {

// GPT-2's byte-to-character table, which byte-level BPE vocabularies are
// written in: printable Latin-1 bytes stand for themselves, the other 68
// bytes for U+0100 upwards (space is 'Ġ', U+0120).

// Appends the byte-level form of `bytes` (each byte as its character, UTF-8).
void AppendByteLevel(std::string_view bytes, std::string* out);

// The bytes `text` (byte-level characters, UTF-8) stands for. Returns false,
// leaving `out` as it was, if some character is not in the table.
bool DecodeByteLevel(std::string_view text, std::string* out);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_TEXT_HF_BYTE_LEVEL_H_
