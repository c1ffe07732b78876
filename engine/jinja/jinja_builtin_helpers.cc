// Python's string operations and list views the builtins share.
#include "engine/jinja/jinja_builtin_helpers.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "utf8proc.h"

namespace linserve::jinja {

bool IsPythonSpace(char32_t c) {
  return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f) || c == 0x85 ||
         c == 0xa0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 ||
         c == 0x202f || c == 0x205f || c == 0x3000;
}

std::string Strip(const std::string& s, const Value* chars, bool left, bool right) {
  std::u32string text = DecodeUtf8(s);
  std::u32string set;
  bool whitespace = chars == nullptr || chars->is_none() || chars->is_undefined();
  if (!whitespace) {
    if (!chars->is_string()) throw RenderError("strip's argument must be a string");
    set = DecodeUtf8(chars->string());
  }
  auto strip = [&](char32_t c) {
    return whitespace ? IsPythonSpace(c) : set.find(c) != std::u32string::npos;
  };
  size_t b = 0, e = text.size();
  if (left) {
    while (b < e && strip(text[b])) ++b;
  }
  if (right) {
    while (e > b && strip(text[e - 1])) --e;
  }
  return EncodeUtf8(text.substr(b, e - b));
}

const std::string& StringArg(const CallArgs& args, size_t index, const std::string& name,
                             const std::string& what) {
  const Value* v = args.Get(index, name);
  if (v == nullptr || !v->is_string()) {
    throw RenderError(absl::StrCat(what, ": the argument '", name, "' must be a string"));
  }
  return v->string();
}

Value Split(Interpreter& in, const std::string& s, const CallArgs& args) {
  const Value* sep = args.Get(0, "sep");
  const Value* max_value = args.Get(1, "maxsplit");
  int64_t max_split =
      max_value != nullptr && max_value->kind() == Value::Kind::kInt ? max_value->integer() : -1;
  List parts;
  if (sep == nullptr || sep->is_none()) {
    std::u32string text = DecodeUtf8(s);
    size_t i = 0;
    while (true) {
      while (i < text.size() && IsPythonSpace(text[i])) ++i;
      if (i == text.size()) break;
      if (max_split >= 0 && static_cast<int64_t>(parts.size()) == max_split) {
        size_t e = text.size();
        while (e > i && IsPythonSpace(text[e - 1])) --e;
        parts.push_back(Value::String(EncodeUtf8(text.substr(i, e - i))));
        break;
      }
      size_t j = i;
      while (j < text.size() && !IsPythonSpace(text[j])) ++j;
      in.CountIteration();
      parts.push_back(Value::String(EncodeUtf8(text.substr(i, j - i))));
      i = j;
    }
    return Value::MakeList(std::move(parts));
  }
  if (!sep->is_string()) throw RenderError("split: the separator must be a string");
  const std::string& separator = sep->string();
  if (separator.empty()) throw RenderError("split: empty separator");
  size_t start = 0;
  while (true) {
    in.CountIteration();
    size_t found = s.find(separator, start);
    if (found == std::string::npos ||
        (max_split >= 0 && static_cast<int64_t>(parts.size()) == max_split)) {
      parts.push_back(Value::String(s.substr(start)));
      break;
    }
    parts.push_back(Value::String(s.substr(start, found - start)));
    start = found + separator.size();
  }
  return Value::MakeList(std::move(parts));
}

std::string Replace(Interpreter& in, const std::string& s, const std::string& from,
                    const std::string& to, int64_t count) {
  std::string out;
  size_t start = 0;
  int64_t done = 0;
  if (from.empty()) {
    // Python inserts `to` around every character.
    std::u32string chars = DecodeUtf8(s);
    for (char32_t c : chars) {
      if (count >= 0 && done >= count) {
        out += EncodeUtf8(std::u32string(1, c));
        continue;
      }
      out += to + EncodeUtf8(std::u32string(1, c));
      ++done;
      in.CheckSize(out.size());
    }
    if (count < 0 || done < count) out += to;
    return out;
  }
  while (count < 0 || done < count) {
    size_t found = s.find(from, start);
    if (found == std::string::npos) break;
    out.append(s, start, found - start);
    out += to;
    in.CheckSize(out.size());
    start = found + from.size();
    ++done;
  }
  out.append(s, start);
  in.CheckSize(out.size());
  return out;
}

bool StartsOrEnds(const std::string& s, const Value& what, bool start) {
  auto one = [&](const Value& v) {
    if (!v.is_string()) throw RenderError("startswith/endswith take a string");
    const std::string& p = v.string();
    if (p.size() > s.size()) return false;
    return start ? s.compare(0, p.size(), p) == 0
                 : s.compare(s.size() - p.size(), p.size(), p) == 0;
  };
  if (what.is_list()) {
    for (const Value& v : what.list()) {
      if (one(v)) return true;
    }
    return false;
  }
  return one(what);
}

namespace {

// Each code point through utf8proc's simple case mapping, as Python's
// str.lower/upper map all but a few (ß's "SS" is two code points).
template <typename Map>
std::u32string MapCase(std::u32string text, Map map) {
  for (char32_t& c : text) c = static_cast<char32_t>(map(static_cast<utf8proc_int32_t>(c)));
  return text;
}

bool IsTitleWordSeparator(char32_t c) {
  return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || IsPythonSpace(c);
}

}  // namespace

std::string Capitalize(const std::string& s) {
  std::u32string text = MapCase(DecodeUtf8(s), utf8proc_tolower);
  if (!text.empty()) text[0] = static_cast<char32_t>(utf8proc_totitle(text[0]));
  return EncodeUtf8(text);
}

std::string Title(const std::string& s) {
  // str.title: a letter after a letter is lowered, any other titled.
  std::u32string text = DecodeUtf8(s);
  bool previous_cased = false;
  for (char32_t& c : text) {
    const utf8proc_category_t category = utf8proc_category(static_cast<utf8proc_int32_t>(c));
    const bool cased = category == UTF8PROC_CATEGORY_LU || category == UTF8PROC_CATEGORY_LL ||
                       category == UTF8PROC_CATEGORY_LT;
    if (cased) {
      c = static_cast<char32_t>(previous_cased ? utf8proc_tolower(c) : utf8proc_totitle(c));
    }
    previous_cased = cased;
  }
  return EncodeUtf8(text);
}

std::string TitleFilter(const std::string& s) {
  // Jinja's title filter, not str.title: a word starts after a run of
  // spaces, '-', '(', '{', '[' or '<', so "it's" stays "It's".
  std::u32string text = DecodeUtf8(s);
  bool word_start = true;
  for (char32_t& c : text) {
    if (IsTitleWordSeparator(c)) {
      word_start = true;
      continue;
    }
    c = static_cast<char32_t>(word_start ? utf8proc_toupper(c) : utf8proc_tolower(c));
    word_start = false;
  }
  return EncodeUtf8(text);
}

std::string Lower(const std::string& s) {
  return EncodeUtf8(MapCase(DecodeUtf8(s), utf8proc_tolower));
}

std::string Upper(const std::string& s) {
  // ß is the one letter of common text whose uppercase (Python's full
  // mapping) is two: "SS". utf8proc's simple mapping would give ẞ.
  std::u32string text;
  for (char32_t c : DecodeUtf8(s)) {
    if (c == 0xDF) {
      text += U"SS";
    } else {
      text += static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(c)));
    }
  }
  return EncodeUtf8(text);
}

bool IsPythonLower(const std::string& s, bool upper) {
  bool any_cased = false;
  for (char32_t c : DecodeUtf8(s)) {
    const utf8proc_category_t category = utf8proc_category(static_cast<utf8proc_int32_t>(c));
    if (category == UTF8PROC_CATEGORY_LT) return false;
    if (category == UTF8PROC_CATEGORY_LU || category == UTF8PROC_CATEGORY_LL) {
      if ((category == UTF8PROC_CATEGORY_LU) != upper) return false;
      any_cased = true;
    }
  }
  return any_cased;
}

namespace {

int DigitValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'z') return c - 'a' + 10;
  if (c >= 'A' && c <= 'Z') return c - 'A' + 10;
  return 99;
}

// Digits of `base` from text[*i] on, single underscores between them, as
// Python's literals allow: how many digits (0: none there; -1: an
// underscore out of place). The digits go to `digits` without underscores.
int ScanDigits(const std::string& text, size_t* i, int base, std::string* digits) {
  int count = 0;
  while (*i < text.size()) {
    const char c = text[*i];
    if (c == '_') {
      if (count == 0 || *i + 1 >= text.size() || DigitValue(text[*i + 1]) >= base) return -1;
      ++*i;
      continue;
    }
    if (DigitValue(c) >= base) break;
    digits->push_back(c);
    ++count;
    ++*i;
  }
  return count;
}

}  // namespace

PythonNumber ParsePythonInt(const std::string& s, int base, int64_t* out) {
  if (base != 0 && (base < 2 || base > 36)) return PythonNumber::kInvalid;
  const std::string text = Strip(s, nullptr, true, true);
  size_t i = 0;
  const bool negative = i < text.size() && text[i] == '-';
  if (i < text.size() && (text[i] == '-' || text[i] == '+')) ++i;
  const bool any_base = base == 0;
  if (i + 1 < text.size() && text[i] == '0') {
    const char p = static_cast<char>(std::tolower(static_cast<unsigned char>(text[i + 1])));
    const int prefixed = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
    if (prefixed != 0 && (any_base || base == prefixed)) {
      base = prefixed;
      i += 2;
      // "0x_1f": one underscore may follow the prefix.
      if (i < text.size() && text[i] == '_') ++i;
    }
  }
  if (base == 0) base = 10;
  std::string digits;
  if (ScanDigits(text, &i, base, &digits) <= 0 || i != text.size()) return PythonNumber::kInvalid;
  // int("010", 0) is refused, as Python 3 refuses the literal 010.
  if (any_base && base == 10 && digits.size() > 1 && digits[0] == '0' &&
      digits.find_first_not_of('0') != std::string::npos) {
    return PythonNumber::kInvalid;
  }
  uint64_t magnitude = 0;
  for (char c : digits) {
    if (__builtin_mul_overflow(magnitude, static_cast<uint64_t>(base), &magnitude) ||
        __builtin_add_overflow(magnitude, static_cast<uint64_t>(DigitValue(c)), &magnitude)) {
      return PythonNumber::kTooLarge;
    }
  }
  const uint64_t limit = negative ? uint64_t{1} << 63 : (uint64_t{1} << 63) - 1;
  if (magnitude > limit) return PythonNumber::kTooLarge;
  *out = negative ? static_cast<int64_t>(0 - magnitude) : static_cast<int64_t>(magnitude);
  return PythonNumber::kValid;
}

bool ParsePythonFloat(const std::string& s, double* out) {
  const std::string text = Strip(s, nullptr, true, true);
  size_t i = 0;
  const bool negative = i < text.size() && text[i] == '-';
  if (i < text.size() && (text[i] == '-' || text[i] == '+')) ++i;
  const std::string word = Lower(text.substr(i));
  if (word == "inf" || word == "infinity") {
    *out = negative ? -HUGE_VAL : HUGE_VAL;
    return true;
  }
  if (word == "nan") {
    *out = std::nan("");
    return true;
  }
  std::string number = negative ? "-" : "";
  const int whole = ScanDigits(text, &i, 10, &number);
  int fraction = 0;
  if (i < text.size() && text[i] == '.') {
    number.push_back('.');
    ++i;
    fraction = ScanDigits(text, &i, 10, &number);
  }
  if (whole < 0 || fraction < 0 || whole + fraction == 0) return false;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    number.push_back('e');
    ++i;
    if (i < text.size() && (text[i] == '-' || text[i] == '+')) number.push_back(text[i++]);
    if (ScanDigits(text, &i, 10, &number) <= 0) return false;
  }
  // SimpleAtod reads past double's range as Python does: inf, or 0.
  return i == text.size() && absl::SimpleAtod(number, out);
}

int64_t Length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kString:
      return static_cast<int64_t>(DecodeUtf8(v.string()).size());
    case Value::Kind::kList:
      return static_cast<int64_t>(v.list().size());
    case Value::Kind::kDict:
      return static_cast<int64_t>(v.dict().size());
    case Value::Kind::kUndefined:
      return 0;
    default:
      throw RenderError(absl::StrCat("a ", v.TypeName(), " has no length"));
  }
}

List ToList(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kList:
      return v.list();
    case Value::Kind::kDict: {
      List keys;
      for (const auto& item : v.dict().items()) keys.push_back(item.first);
      return keys;
    }
    case Value::Kind::kString: {
      List chars;
      for (char32_t c : DecodeUtf8(v.string()))
        chars.push_back(Value::String(EncodeUtf8(std::u32string(1, c))));
      return chars;
    }
    case Value::Kind::kUndefined:
      return {};
    default:
      throw RenderError(absl::StrCat("a ", v.TypeName(), " is not iterable"));
  }
}

Value Items(const Value& v) {
  if (v.is_undefined()) return Value::MakeList();
  if (!v.is_dict()) throw RenderError(absl::StrCat("items of a ", v.TypeName(), " (not a dict)"));
  List out;
  for (const auto& [key, value] : v.dict().items()) {
    out.push_back(Value::MakeTuple({key, value}));
  }
  return Value::MakeList(std::move(out));
}

namespace {

// A path part that names a list item: all digits. One past size_t's range is
// past any list's end, so it reads as the largest index.
bool IsListIndex(const std::string& part, size_t* index) {
  if (part.empty() || !std::all_of(part.begin(), part.end(), [](char c) {
        return std::isdigit(static_cast<unsigned char>(c));
      })) {
    return false;
  }
  if (!absl::SimpleAtoi(part, index)) *index = SIZE_MAX;
  return true;
}

}  // namespace

// `attribute` of an item: a dotted path, as Jinja's make_attrgetter reads it.
Value Attribute(const Value& item, const std::string& path) {
  Value current = item;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (current.is_dict()) {
      const Value* found = current.dict().Find(part);
      current = found == nullptr ? Value() : *found;
    } else if (size_t i = 0; current.is_list() && IsListIndex(part, &i)) {
      current = i < current.list().size() ? current.list()[i] : Value();
    } else {
      current = Value();
    }
    if (dot == std::string::npos) return current;
    start = dot + 1;
  }
}

Value Escape(const Value& v) {
  if (v.is_safe()) return v;
  std::string out;
  for (char c : v.Str()) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return Value::SafeString(std::move(out));
}

Value SameSafety(const Value& like, std::string text) {
  return like.is_safe() ? Value::SafeString(std::move(text)) : Value::String(std::move(text));
}

}  // namespace linserve::jinja
