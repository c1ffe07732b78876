// Python's string operations and list views the builtins share.
#include "engine/jinja/jinja_builtin_helpers.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

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

std::string Capitalize(const std::string& s) {
  std::string out = s;
  bool first = true;
  for (char& c : out) {
    c = first ? static_cast<char>(std::toupper(static_cast<unsigned char>(c)))
              : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    first = false;
  }
  return out;
}

std::string Title(const std::string& s) {
  std::string out = s;
  bool previous_cased = false;
  for (char& c : out) {
    unsigned char u = static_cast<unsigned char>(c);
    if (std::isalpha(u)) {
      c = static_cast<char>(previous_cased ? std::tolower(u) : std::toupper(u));
      previous_cased = true;
    } else {
      previous_cased = false;
    }
  }
  return out;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
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
      for (const auto& item : v.dict().items()) keys.push_back(Value::String(item.first));
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
    out.push_back(Value::MakeList({Value::String(key), value}));
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

}  // namespace linserve::jinja
