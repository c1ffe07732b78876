#include "engine/text/hf_unicode.h"

#include <cstdlib>

#include "engine/text/hf_unicode_compat.h"
#include "utf8proc.h"

namespace linserve {

char32_t NextCodePoint(std::string_view text, size_t* pos) {
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  size_t i = *pos;
  const uint8_t b = s[i];
  char32_t cp;
  int extra;
  if (b < 0x80) {
    cp = b;
    extra = 0;
  } else if (b < 0xE0) {
    cp = b & 0x1F;
    extra = 1;
  } else if (b < 0xF0) {
    cp = b & 0x0F;
    extra = 2;
  } else {
    cp = b & 0x07;
    extra = 3;
  }
  ++i;
  for (int k = 0; k < extra && i < text.size(); ++k, ++i) cp = (cp << 6) | (s[i] & 0x3F);
  *pos = i;
  return cp;
}

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

namespace {

// The length of the well-formed sequence at `s[i]` (1 to 4), or the negated
// length of its maximal ill-formed subpart (Unicode 3.9, Table 3-7).
int SequenceLength(const uint8_t* s, size_t i, size_t n) {
  const uint8_t b = s[i];
  if (b < 0x80) return 1;
  int need;
  uint8_t lo = 0x80, hi = 0xBF;
  if (b >= 0xC2 && b <= 0xDF) {
    need = 1;
  } else if (b >= 0xE0 && b <= 0xEF) {
    need = 2;
    if (b == 0xE0) lo = 0xA0;
    if (b == 0xED) hi = 0x9F;
  } else if (b >= 0xF0 && b <= 0xF4) {
    need = 3;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;
  } else {
    return -1;
  }
  size_t j = i + 1;
  for (int k = 0; k < need; ++k, ++j) {
    if (j >= n || s[j] < lo || s[j] > hi) return -static_cast<int>(j - i);
    lo = 0x80;
    hi = 0xBF;
  }
  return need + 1;
}

}  // namespace

bool MakeValidUtf8(std::string_view text, std::string* out) {
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  bool valid = true;
  std::string fixed;
  while (i < n) {
    const int len = SequenceLength(s, i, n);
    if (len > 0) {
      if (!valid) fixed.append(text.data() + i, len);
      i += len;
      continue;
    }
    if (valid) {
      valid = false;
      fixed.assign(text.data(), i);
    }
    fixed += "\xEF\xBF\xBD";
    i += -len;
  }
  if (!valid) *out = std::move(fixed);
  return valid;
}

bool IsNumeric(char32_t cp) {
  const utf8proc_category_t c = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return c == UTF8PROC_CATEGORY_ND || c == UTF8PROC_CATEGORY_NL || c == UTF8PROC_CATEGORY_NO ||
         IsNumericOnlyInRust(cp);
}

bool IsPunctuation(char32_t cp) {
  if (cp < 0x80) {
    return (cp >= '!' && cp <= '/') || (cp >= ':' && cp <= '@') || (cp >= '[' && cp <= '`') ||
           (cp >= '{' && cp <= '~');
  }
  const utf8proc_category_t c = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  if (c >= UTF8PROC_CATEGORY_PC && c <= UTF8PROC_CATEGORY_PO) return !IsPunctuationOnlyInUtf8proc(cp);
  return IsPunctuationOnlyInLibrary(cp);
}

bool IsWhitespace(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

bool IsWordChar(char32_t cp) {
  if (cp == '_' || cp == 0x200C || cp == 0x200D) return true;
  // Symbols with the Other_Alphabetic property: circled, parenthesized and
  // squared Latin letters.
  if ((cp >= 0x24B6 && cp <= 0x24E9) || (cp >= 0x1F130 && cp <= 0x1F149) ||
      (cp >= 0x1F150 && cp <= 0x1F169) || (cp >= 0x1F170 && cp <= 0x1F189)) {
    return true;
  }
  const utf8proc_category_t c = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return (c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_ME) || c == UTF8PROC_CATEGORY_ND ||
         c == UTF8PROC_CATEGORY_NL || c == UTF8PROC_CATEGORY_PC || IsWordOnlyInUnicode16(cp);
}

namespace {

std::string Utf8procNormalize(std::string_view text, NormalForm form) {
  int options = UTF8PROC_STABLE | UTF8PROC_COMPOSE;
  if (form == NormalForm::kNfkc) options |= UTF8PROC_COMPAT;
  utf8proc_uint8_t* result = nullptr;
  const utf8proc_ssize_t len =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                   static_cast<utf8proc_ssize_t>(text.size()), &result,
                   static_cast<utf8proc_option_t>(options));
  if (len < 0) return std::string(text);  // only on invalid UTF-8, which callers exclude
  std::string out(reinterpret_cast<const char*>(result), static_cast<size_t>(len));
  std::free(result);
  return out;
}

}  // namespace

std::string Normalize(std::string_view text, NormalForm form) {
  // Characters below `stable` are left as they are by the form, block
  // reordering (combining class 0) and are never the second of a composing
  // pair: the text between two of them normalizes on its own. Below U+0300
  // for NFC; only ASCII for NFKC (which changes U+00A0, U+00B2...). So only
  // the stretches from such a character to the next one, with others in
  // between, go through utf8proc; the rest is copied. Characters the
  // library's older tables do not know are copied too, and bound stretches.
  const char32_t stable = form == NormalForm::kNfc ? 0x300 : 0x80;
  std::string out;
  out.reserve(text.size());
  size_t flushed = 0;      // text before this is in `out`
  size_t last_stable = 0;  // where the last stable character starts
  size_t dirty_start = 0;  // where the stretch for utf8proc starts, when dirty
  bool dirty = false;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t start = pos;
    const char32_t cp = static_cast<uint8_t>(text[pos]) < 0x80
                            ? static_cast<char32_t>(text[pos++])
                            : NextCodePoint(text, &pos);
    if (cp >= stable && IsUnknownToLibraryNormalization(cp)) {
      // The library's tables do not know it: it stays, and bounds the
      // stretches on either side.
      if (dirty) {
        out += Utf8procNormalize(text.substr(dirty_start, start - dirty_start), form);
        dirty = false;
      } else {
        out.append(text.data() + flushed, start - flushed);
      }
      out.append(text.data() + start, pos - start);
      flushed = pos;
      last_stable = pos;
    } else if (cp < stable) {
      if (dirty) {
        out += Utf8procNormalize(text.substr(dirty_start, start - dirty_start), form);
        flushed = start;
        dirty = false;
      }
      last_stable = start;
    } else if (!dirty) {
      dirty = true;
      dirty_start = last_stable;
      out.append(text.data() + flushed, dirty_start - flushed);
    }
  }
  if (dirty) {
    out += Utf8procNormalize(text.substr(dirty_start), form);
  } else {
    out.append(text.data() + flushed, text.size() - flushed);
  }
  return out;
}

}  // namespace linserve
