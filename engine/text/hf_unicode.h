#ifndef LINSERVE_ENGINE_TEXT_HF_UNICODE_H_
#define LINSERVE_ENGINE_TEXT_HF_UNICODE_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace linserve {

// The character classes and normalization forms the Hugging Face tokenizer
// pipeline uses, as Rust's `char` methods define them, over utf8proc's tables.

// Decodes the character at `text[*pos]` of valid UTF-8 and advances `*pos`.
char32_t NextCodePoint(std::string_view text, size_t* pos);

// Appends `cp` as UTF-8.
void AppendUtf8(char32_t cp, std::string* out);

// `text` with each ill-formed subsequence replaced by U+FFFD (as Rust's
// String::from_utf8_lossy does); returns true and leaves `out` untouched when
// `text` is already valid.
bool MakeValidUtf8(std::string_view text, std::string* out);

// Rust's char::is_numeric: general category Nd, Nl or No (Unicode 16).
bool IsNumeric(char32_t cp);
// The `Punctuation` pre-tokenizer's test: ASCII punctuation (which includes
// symbols such as '$' and '+') or general category P* as the unicode_categories
// crate's tables have it (see hf_unicode_compat.h).
bool IsPunctuation(char32_t cp);
// Rust's char::is_whitespace (the White_Space property).
bool IsWhitespace(char32_t cp);
// The Rust regex crate's \w (Alphabetic, M*, Nd, Pc, Join_Control), which
// `single_word` tests: Alphabetic as L*, Nl and the Other_Alphabetic symbols
// (utf8proc has no Alphabetic property; the rest of Other_Alphabetic is M*).
bool IsWordChar(char32_t cp);

enum class NormalForm { kNfc, kNfkc };

// `text` (valid UTF-8) in the normal form, as the Rust library normalizes
// it: code points its older tables do not know stay as they are
// (hf_unicode_compat.h).
std::string Normalize(std::string_view text, NormalForm form);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_TEXT_HF_UNICODE_H_
