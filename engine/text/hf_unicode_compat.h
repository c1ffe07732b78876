#ifndef LINSERVE_ENGINE_TEXT_HF_UNICODE_COMPAT_H_
#define LINSERVE_ENGINE_TEXT_HF_UNICODE_COMPAT_H_

#include <string>
#include <string_view>

namespace linserve {

// Where the Rust library's Unicode tables differ from this machine's, so that
// class membership matches the library exactly. Oniguruma's \p{..} and Rust's
// char::is_numeric know Unicode 16, Debian 12's PCRE2 (10.42) Unicode 14 and
// utf8proc (2.8) Unicode 15; the unicode_categories crate behind the
// Punctuation pre-tokenizer and the normalizer's tables are older than either. Measured against
// @anush008/tokenizers (tokenizers 0.22.2) over every code point by
// tests/engine/text/hf_unicode_classes.js; rerun it when a library changes.

// The code points Oniguruma puts in \p{`property`} (L, N, M or P) and PCRE2
// 10.42 does not, as the body of a PCRE2 class ("\x{1C89}-\x{1C8A}..."); empty
// for other properties.
std::string_view OnigExtraClassBody(std::string_view property);

// Code points the unicode_categories crate does and does not call punctuation,
// against utf8proc's general categories.
bool IsPunctuationOnlyInLibrary(char32_t cp);
bool IsPunctuationOnlyInUtf8proc(char32_t cp);

// Code points Rust's char::is_numeric knows and utf8proc 2.8 does not.
bool IsNumericOnlyInRust(char32_t cp);

// Letters, marks and digits of Unicode 15-16 that utf8proc 2.8 may not know
// and the Rust regex crate's \w (single_word) does.
bool IsWordOnlyInUnicode16(char32_t cp);

// Code points whose NFC/NFKC the library's normalization tables (the
// unicode-normalization-alignments crate, Unicode 10-era) do not know, and
// utf8proc's do: the library leaves them as they are, a starter nothing
// composes with or reorders across.
bool IsUnknownToLibraryNormalization(char32_t cp);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_TEXT_HF_UNICODE_COMPAT_H_
