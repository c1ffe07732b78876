#include "engine/text/world_vocabulary.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/base/status_macros.h"

namespace linserve {
namespace {

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void AppendUtf8(uint32_t code_point, std::string& out) {
  if (code_point < 0x80) {
    out.push_back(static_cast<char>(code_point));
  } else if (code_point < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (code_point >> 6)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else if (code_point < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (code_point >> 12)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (code_point >> 18)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  }
}

// The length of the well-formed UTF-8 sequence starting at s[i] (Unicode
// table 3-7: no overlongs, surrogates or values above U+10FFFF); 0 if none.
size_t Utf8SequenceLength(std::string_view s, size_t i) {
  const uint8_t lead = static_cast<uint8_t>(s[i]);
  size_t length;
  uint8_t lower = 0x80, upper = 0xBF;  // the range of the second byte
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) lower = 0xA0;
    if (lead == 0xED) upper = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) lower = 0x90;
    if (lead == 0xF4) upper = 0x8F;
  } else {
    return 0;
  }
  if (i + length > s.size()) return 0;
  for (size_t k = 1; k < length; ++k) {
    const uint8_t byte = static_cast<uint8_t>(s[i + k]);
    if (byte < (k == 1 ? lower : 0x80) || byte > (k == 1 ? upper : 0xBF)) return 0;
  }
  return length;
}

// A byte as an error message shows it: itself if printable ASCII, else \xNN.
std::string ShowByte(uint8_t byte) {
  if (byte >= 0x20 && byte < 0x7F) return std::string(1, static_cast<char>(byte));
  constexpr char kHex[] = "0123456789abcdef";
  return {'\\', 'x', kHex[byte >> 4], kHex[byte & 0xF]};
}

// A field as an error message shows it: as written, but for control bytes
// and bytes that are not UTF-8 (\xNN), and cut short so that one bad line
// cannot make a huge message.
std::string Quote(std::string_view field) {
  constexpr size_t kMaxShown = 60;
  std::string out = "`";
  size_t i = 0;
  while (i < field.size() && i < kMaxShown) {
    const uint8_t byte = static_cast<uint8_t>(field[i]);
    const size_t length = Utf8SequenceLength(field, i);
    if (length == 0 || byte < 0x20 || byte == 0x7F) {
      out += ShowByte(byte);
      ++i;
    } else {
      out.append(field.substr(i, length));
      i += length;
    }
  }
  if (i < field.size()) out += "…";
  return out + "`";
}

// A non-negative decimal without sign or spaces (at most 18 digits, so it
// cannot overflow).
bool ParseDecimal(std::string_view field, int64_t* value) {
  if (field.empty() || field.size() > 18) return false;
  int64_t result = 0;
  for (char c : field) {
    if (c < '0' || c > '9') return false;
    result = result * 10 + (c - '0');
  }
  *value = result;
  return true;
}

// The escape starting at body[i] (the character after the backslash), its
// bytes appended to `out`; advances `i` past it.
absl::Status DecodeEscape(std::string_view body, bool is_bytes, size_t& i, std::string& out) {
  const char e = body[i++];
  switch (e) {
    case '\\':
    case '\'':
    case '"':
      out.push_back(e);
      return absl::OkStatus();
    case 'a':
      out.push_back('\a');
      return absl::OkStatus();
    case 'b':
      out.push_back('\b');
      return absl::OkStatus();
    case 'f':
      out.push_back('\f');
      return absl::OkStatus();
    case 'n':
      out.push_back('\n');
      return absl::OkStatus();
    case 'r':
      out.push_back('\r');
      return absl::OkStatus();
    case 't':
      out.push_back('\t');
      return absl::OkStatus();
    case 'v':
      out.push_back('\v');
      return absl::OkStatus();
    default:
      break;
  }
  if (e >= '0' && e <= '7') {
    uint32_t value = e - '0';
    for (int k = 0; k < 2 && i < body.size() && body[i] >= '0' && body[i] <= '7'; ++k) {
      value = value * 8 + (body[i++] - '0');
    }
    if (!is_bytes) {
      AppendUtf8(value, out);
    } else if (value <= 0xFF) {
      out.push_back(static_cast<char>(value));
    } else {
      return absl::InvalidArgumentError("octal escape above \\377 in a bytes literal");
    }
    return absl::OkStatus();
  }
  int digits;
  if (e == 'x') {
    digits = 2;
  } else if ((e == 'u' || e == 'U') && !is_bytes) {
    digits = e == 'u' ? 4 : 8;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("unknown escape \\",
                                                   ShowByte(static_cast<uint8_t>(e)),
                                                   is_bytes ? " in a bytes literal" : ""));
  }
  uint32_t value = 0;
  for (int k = 0; k < digits; ++k) {
    const int digit = i < body.size() ? HexDigit(body[i]) : -1;
    if (digit < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("escape \\", std::string(1, e), " needs ", digits, " hex digits"));
    }
    value = value * 16 + static_cast<uint32_t>(digit);
    ++i;
  }
  if (is_bytes) {
    out.push_back(static_cast<char>(value));
  } else if (value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF)) {
    return absl::InvalidArgumentError(absl::StrCat("escape \\", std::string(1, e), " names U+",
                                                   absl::Hex(value), ", which has no UTF-8 form"));
  } else {
    AppendUtf8(value, out);
  }
  return absl::OkStatus();
}

// One line, "ID REPR LEN", whose id must exceed `previous_id`.
absl::StatusOr<WorldVocabularyEntry> ParseLine(std::string_view line, int64_t previous_id,
                                               int64_t id_limit) {
  // REPR may hold spaces, ID and LEN cannot: split at the first and last.
  const size_t first_space = line.find(' ');
  const size_t last_space = line.rfind(' ');
  if (first_space == std::string_view::npos || first_space == last_space) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected three fields, ID REPR LEN; found ", Quote(line)));
  }
  const std::string_view id_field = line.substr(0, first_space);
  const std::string_view repr = line.substr(first_space + 1, last_space - first_space - 1);
  const std::string_view length_field = line.substr(last_space + 1);

  WorldVocabularyEntry entry;
  if (!ParseDecimal(id_field, &entry.id)) {
    return absl::InvalidArgumentError(
        absl::StrCat("id ", Quote(id_field), " is not a decimal number"));
  }
  if (entry.id == 0) {
    return absl::InvalidArgumentError("id 0 is the end of text, which has no line");
  }
  if (entry.id >= id_limit) {
    return absl::InvalidArgumentError(
        absl::StrCat("id ", entry.id, " is not below the vocabulary size ", id_limit));
  }
  if (entry.id == previous_id) {
    return absl::InvalidArgumentError(absl::StrCat("duplicate id ", entry.id));
  }
  if (entry.id < previous_id) {
    return absl::InvalidArgumentError(
        absl::StrCat("id ", entry.id, " is out of order (after ", previous_id, "); ids must rise"));
  }
  absl::StatusOr<std::string> bytes = DecodePythonLiteral(repr);
  if (!bytes.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("REPR ", Quote(repr), ": ", bytes.status().message()));
  }
  entry.bytes = *std::move(bytes);
  int64_t length;
  if (!ParseDecimal(length_field, &length)) {
    return absl::InvalidArgumentError(
        absl::StrCat("LEN ", Quote(length_field), " is not a decimal number"));
  }
  if (entry.bytes.empty()) {
    return absl::InvalidArgumentError("empty piece: a token needs at least one byte");
  }
  if (static_cast<int64_t>(entry.bytes.size()) != length) {
    return absl::InvalidArgumentError(absl::StrCat("LEN ", length, " does not match the ",
                                                   entry.bytes.size(), " bytes of REPR ",
                                                   Quote(repr)));
  }
  return entry;
}

std::string LineError(size_t line, absl::string_view what) {
  return absl::StrCat("vocabulary line ", line, ": ", what);
}

}  // namespace

absl::StatusOr<std::string> DecodePythonLiteral(std::string_view literal) {
  std::string_view rest = literal;
  const bool is_bytes = !rest.empty() && rest[0] == 'b';
  if (is_bytes) rest.remove_prefix(1);
  if (rest.size() < 2 || (rest[0] != '\'' && rest[0] != '"') || rest.back() != rest[0]) {
    return absl::InvalidArgumentError(
        "not a quoted Python str ('…', \"…\") or bytes (b'…') literal");
  }
  const char quote = rest[0];
  const std::string_view body = rest.substr(1, rest.size() - 2);
  std::string out;
  out.reserve(body.size());
  size_t i = 0;
  while (i < body.size()) {
    const char c = body[i];
    if (c == quote) {
      return absl::InvalidArgumentError(
          absl::StrCat("unescaped quote ", std::string(1, quote), " inside the literal"));
    }
    if (c == '\\') {
      if (++i == body.size()) {
        return absl::InvalidArgumentError("the closing quote is escaped: unterminated literal");
      }
      LINSERVE_RETURN_IF_ERROR(DecodeEscape(body, is_bytes, i, out));
      continue;
    }
    if (static_cast<uint8_t>(c) < 0x80) {
      out.push_back(c);
      ++i;
      continue;
    }
    // Python source is UTF-8, and a bytes literal takes ASCII characters only.
    if (is_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "non-ASCII byte 0x", absl::Hex(static_cast<uint8_t>(c)), " in a bytes literal"));
    }
    const size_t length = Utf8SequenceLength(body, i);
    if (length == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("invalid UTF-8 at byte ", i + 1, " of the literal"));
    }
    out.append(body.substr(i, length));
    i += length;
  }
  return out;
}

absl::StatusOr<std::vector<WorldVocabularyEntry>> ParseWorldVocabulary(std::string_view text,
                                                                       int64_t id_limit) {
  std::vector<WorldVocabularyEntry> entries;
  std::vector<size_t> lines;  // the line number of each entry
  size_t line_number = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    absl::StatusOr<WorldVocabularyEntry> entry =
        ParseLine(line, entries.empty() ? 0 : entries.back().id, id_limit);
    if (!entry.ok()) {
      return absl::InvalidArgumentError(LineError(line_number, entry.status().message()));
    }
    entries.push_back(*std::move(entry));
    lines.push_back(line_number);
  }

  // Equal pieces sort next to each other; a stable sort keeps the earlier
  // line first, so the later one is the line to blame.
  std::vector<size_t> order(entries.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&entries](size_t a, size_t b) { return entries[a].bytes < entries[b].bytes; });
  size_t repeat = 0, original = 0;  // entry indices; repeat == 0 while none found
  for (size_t k = 1; k < order.size(); ++k) {
    if (entries[order[k]].bytes != entries[order[k - 1]].bytes) continue;
    if (repeat == 0 || order[k] < repeat) {
      repeat = order[k];
      original = order[k - 1];
    }
  }
  if (repeat != 0) {
    return absl::InvalidArgumentError(LineError(
        lines[repeat], absl::StrCat("the piece of id ", entries[repeat].id, " repeats that of id ",
                                    entries[original].id, " (line ", lines[original], ")")));
  }
  return entries;
}

}  // namespace linserve
