#ifndef LINSERVE_ENGINE_WORLD_VOCABULARY_H_
#define LINSERVE_ENGINE_WORLD_VOCABULARY_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace linserve {

// The text format of the RWKV "World" vocabulary (rwkv_vocab_v20230424.txt):
// one line per token, "ID REPR LEN", where REPR is a Python str literal
// ('…' or "…", its text encoded as UTF-8) or bytes literal (b'…'), as Python's
// repr() writes them, and LEN its length in bytes. Id 0, the end of text, has
// no line.

struct WorldVocabularyEntry {
  int64_t id;
  std::string bytes;  // never empty
};

// Every line of `text`, checked: ids rise strictly, start above 0 and stay
// below `id_limit` (the model's vocabulary size); each literal is well formed,
// has LEN bytes and differs from every other. An error is InvalidArgument
// naming the first bad line (1-based) and what is wrong with it. A final
// newline and a '\r' before each newline are allowed.
absl::StatusOr<std::vector<WorldVocabularyEntry>> ParseWorldVocabulary(std::string_view text,
                                                                       int64_t id_limit);

// The bytes of one Python str or bytes literal, quotes and prefix included:
// 'a\tb', "it's", b'\xe4\xb8'. Escapes are Python's (\\ \' \" \a \b \f \n \r
// \t \v, \ooo, \xhh, and in str literals \uXXXX and \UXXXXXXXX, which become
// UTF-8); an escape Python would keep verbatim, such as \q, is an error here,
// as repr() never writes one.
absl::StatusOr<std::string> DecodePythonLiteral(std::string_view literal);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_WORLD_VOCABULARY_H_
