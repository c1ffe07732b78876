// Filters, tests, methods and globals: the ones chat templates call, with
// Python's (Jinja's) behaviour.
#include <algorithm>
#include <cmath>
#include <ctime>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/jinja/jinja_interpreter.h"
#include "engine/jinja/jinja_parser.h"

namespace linserve::jinja {
namespace {

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
  int64_t max_split = max_value != nullptr && max_value->kind() == Value::Kind::kInt
                          ? max_value->integer()
                          : -1;
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
    return start ? s.compare(0, p.size(), p) == 0 : s.compare(s.size() - p.size(), p.size(), p) == 0;
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
      for (char32_t c : DecodeUtf8(v.string())) chars.push_back(Value::String(EncodeUtf8(std::u32string(1, c))));
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

// `attribute` of an item: a dotted path, as Jinja's make_attrgetter reads it.
Value Attribute(const Value& item, const std::string& path) {
  Value current = item;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (current.is_dict()) {
      const Value* found = current.dict().Find(part);
      current = found == nullptr ? Value() : *found;
    } else if (current.is_list() && !part.empty() &&
               std::all_of(part.begin(), part.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
      size_t i = std::stoul(part);
      current = i < current.list().size() ? current.list()[i] : Value();
    } else {
      current = Value();
    }
    if (dot == std::string::npos) return current;
    start = dot + 1;
  }
}

Value::JsonFormat JsonFormatFrom(const CallArgs& args) {
  Value::JsonFormat format;
  const Value* indent = args.Get(0, "indent");
  if (indent != nullptr && !indent->is_none() && !indent->is_undefined()) {
    if (indent->kind() != Value::Kind::kInt || indent->integer() < 0 || indent->integer() > 64) {
      throw RenderError("tojson: indent must be an integer from 0 to 64");
    }
    format.indent = static_cast<int>(indent->integer());
    format.item_separator = ",";
  }
  const Value* separators = args.Get(99, "separators");
  if (separators != nullptr && !separators->is_none() && !separators->is_undefined()) {
    if (!separators->is_list() || separators->list().size() != 2 ||
        !separators->list()[0].is_string() || !separators->list()[1].is_string()) {
      throw RenderError("tojson: separators must be two strings");
    }
    format.item_separator = separators->list()[0].string();
    format.key_separator = separators->list()[1].string();
  }
  const Value* sort_keys = args.Get(99, "sort_keys");
  format.sort_keys = sort_keys != nullptr && sort_keys->Truthy();
  return format;
}

Value Round(const Value& v, const CallArgs& args) {
  const Value* precision_value = args.Get(0, "precision");
  const Value* method_value = args.Get(1, "method");
  int64_t precision = precision_value != nullptr && precision_value->kind() == Value::Kind::kInt
                          ? precision_value->integer()
                          : 0;
  std::string method = method_value != nullptr && method_value->is_string() ? method_value->string() : "common";
  double scale = std::pow(10.0, static_cast<double>(precision));
  double x = v.number() * scale;
  if (method == "ceil") {
    x = std::ceil(x);
  } else if (method == "floor") {
    x = std::floor(x);
  } else {
    x = std::round(x);
  }
  return Value::Float(x / scale);
}

bool ApplyTestByName(Interpreter& in, const std::string& name, const Value& item,
                     const std::vector<Value>& extra) {
  CallArgs args;
  args.positional = extra;
  return ApplyTest(in, name, item, args);
}

// select/reject/selectattr/rejectattr.
Value Select(Interpreter& in, const Value& operand, CallArgs& args, bool by_attribute, bool keep) {
  List items = ToList(operand);
  size_t next = 0;
  std::string attribute;
  if (by_attribute) {
    if (args.positional.empty() || !args.positional[0].is_string()) {
      throw RenderError("selectattr/rejectattr need an attribute name");
    }
    attribute = args.positional[0].string();
    next = 1;
  }
  std::string test;
  std::vector<Value> test_args;
  if (next < args.positional.size()) {
    if (!args.positional[next].is_string()) throw RenderError("select: the test must be named by a string");
    test = args.positional[next].string();
    if (!IsKnownTest(test)) throw RenderError(absl::StrCat("the test '", test, "' is not supported"));
    test_args.assign(args.positional.begin() + next + 1, args.positional.end());
  }
  List out;
  for (const Value& item : items) {
    in.CountIteration();
    Value subject = by_attribute ? Attribute(item, attribute) : item;
    bool pass = test.empty() ? subject.Truthy() : ApplyTestByName(in, test, subject, test_args);
    if (pass == keep) out.push_back(item);
  }
  return Value::MakeList(std::move(out));
}

}  // namespace

bool Contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kString:
      if (!item.is_string()) throw RenderError(absl::StrCat("'in <string>' needs a string, not a ", item.TypeName()));
      return container.string().find(item.string()) != std::string::npos;
    case Value::Kind::kList:
      for (const Value& v : container.list()) {
        if (v.Equals(item)) return true;
      }
      return false;
    case Value::Kind::kDict:
      return item.is_string() && container.dict().Find(item.string()) != nullptr;
    case Value::Kind::kUndefined:
      return false;
    default:
      throw RenderError(absl::StrCat("'in' on a ", container.TypeName()));
  }
}

bool Less(const Value& a, const Value& b) {
  auto numeric = [](const Value& v) { return v.is_number() || v.kind() == Value::Kind::kBool; };
  if (numeric(a) && numeric(b)) {
    auto n = [](const Value& v) { return v.kind() == Value::Kind::kBool ? (v.boolean() ? 1.0 : 0.0) : v.number(); };
    if (a.kind() == Value::Kind::kInt && b.kind() == Value::Kind::kInt) return a.integer() < b.integer();
    return n(a) < n(b);
  }
  if (a.is_string() && b.is_string()) return a.string() < b.string();
  if (a.is_list() && b.is_list()) {
    const List& x = a.list();
    const List& y = b.list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (Less(x[i], y[i])) return true;
      if (Less(y[i], x[i])) return false;
    }
    return x.size() < y.size();
  }
  throw RenderError(absl::StrCat("'<' between a ", a.TypeName(), " and a ", b.TypeName()));
}

Value ApplyFilter(Interpreter& in, const std::string& name, const Value& v, CallArgs& args) {
  if (name == "trim") return Value::String(Strip(v.Str(), args.Get(0, "chars"), true, true));
  if (name == "length" || name == "count") return Value::Int(Length(v));
  if (name == "string") return Value::String(v.Str());
  if (name == "safe") return v;
  if (name == "tojson") {
    std::string json = v.ToJson(JsonFormatFrom(args));
    in.CheckSize(json.size());
    return Value::String(std::move(json));
  }
  if (name == "items") return Items(v);
  if (name == "list") return Value::MakeList(ToList(v));
  if (name == "first" || name == "last") {
    List items = ToList(v);
    if (items.empty()) return Value();
    return name == "first" ? items.front() : items.back();
  }
  if (name == "lower") return Value::String(Lower(v.Str()));
  if (name == "upper") return Value::String(Upper(v.Str()));
  if (name == "capitalize") return Value::String(Capitalize(v.Str()));
  if (name == "title") return Value::String(Title(v.Str()));
  if (name == "replace") {
    const Value* count = args.Get(2, "count");
    return Value::String(Replace(in, v.Str(), StringArg(args, 0, "old", "replace"),
                                 StringArg(args, 1, "new", "replace"),
                                 count != nullptr && count->kind() == Value::Kind::kInt ? count->integer() : -1));
  }
  if (name == "default" || name == "d") {
    const Value* fallback = args.Get(0, "default_value");
    const Value* boolean = args.Get(1, "boolean");
    bool use_fallback = (boolean != nullptr && boolean->Truthy()) ? !v.Truthy() : v.is_undefined();
    if (!use_fallback) return v;
    return fallback == nullptr ? Value::String("") : *fallback;
  }
  if (name == "join") {
    const Value* separator = args.Get(0, "d");
    const Value* attribute = args.Get(1, "attribute");
    std::string sep = separator != nullptr ? separator->Str() : "";
    std::string out;
    bool first = true;
    for (const Value& item : ToList(v)) {
      in.CountIteration();
      if (!first) out += sep;
      first = false;
      out += (attribute != nullptr && attribute->is_string() ? Attribute(item, attribute->string()) : item).Str();
      in.CheckSize(out.size());
    }
    return Value::String(std::move(out));
  }
  if (name == "int") {
    if (v.kind() == Value::Kind::kInt) return v;
    if (v.kind() == Value::Kind::kFloat && std::isfinite(v.number()) && std::fabs(v.number()) < 9e18) {
      return Value::Int(static_cast<int64_t>(v.number()));
    }
    if (v.kind() == Value::Kind::kBool) return Value::Int(v.boolean());
    if (v.is_string()) {
      try {
        size_t used = 0;
        std::string s = Strip(v.string(), nullptr, true, true);
        int64_t i = std::stoll(s, &used);
        if (used == s.size()) return Value::Int(i);
      } catch (const std::exception&) {
      }
    }
    const Value* fallback = args.Get(0, "default");
    return fallback != nullptr ? *fallback : Value::Int(0);
  }
  if (name == "float") {
    if (v.is_number()) return Value::Float(v.number());
    if (v.is_string()) {
      try {
        size_t used = 0;
        std::string s = Strip(v.string(), nullptr, true, true);
        double f = std::stod(s, &used);
        if (used == s.size()) return Value::Float(f);
      } catch (const std::exception&) {
      }
    }
    const Value* fallback = args.Get(0, "default");
    return fallback != nullptr ? *fallback : Value::Float(0);
  }
  if (name == "abs") {
    if (v.kind() == Value::Kind::kInt) {
      if (v.integer() == INT64_MIN) throw RenderError("an integer overflowed");
      return Value::Int(v.integer() < 0 ? -v.integer() : v.integer());
    }
    if (v.kind() == Value::Kind::kFloat) return Value::Float(std::fabs(v.number()));
    throw RenderError(absl::StrCat("abs of a ", v.TypeName()));
  }
  if (name == "round") {
    if (!v.is_number()) throw RenderError(absl::StrCat("round of a ", v.TypeName()));
    return Round(v, args);
  }
  if (name == "reverse") {
    if (v.is_string()) {
      std::u32string chars = DecodeUtf8(v.string());
      std::reverse(chars.begin(), chars.end());
      return Value::String(EncodeUtf8(chars));
    }
    List items = ToList(v);
    std::reverse(items.begin(), items.end());
    return Value::MakeList(std::move(items));
  }
  if (name == "unique") {
    List out;
    for (const Value& item : ToList(v)) {
      bool seen = false;
      for (const Value& kept : out) {
        in.CountIteration();
        if (kept.Equals(item)) {
          seen = true;
          break;
        }
      }
      if (!seen) out.push_back(item);
    }
    return Value::MakeList(std::move(out));
  }
  if (name == "sort" || name == "min" || name == "max" || name == "dictsort") {
    bool dictsort = name == "dictsort";
    List items = dictsort ? Items(v).list() : ToList(v);
    const Value* reverse = args.Get(dictsort ? 2 : 0, "reverse");
    const Value* attribute = args.Get(dictsort ? 99 : 2, "attribute");
    for (size_t i = 0; i < items.size(); ++i) in.CountIteration();
    auto key = [&](const Value& item) {
      if (dictsort) return item.list()[0];
      return attribute != nullptr && attribute->is_string() ? Attribute(item, attribute->string()) : item;
    };
    std::stable_sort(items.begin(), items.end(),
                     [&](const Value& a, const Value& b) { return Less(key(a), key(b)); });
    if (name == "min") return items.empty() ? Value() : items.front();
    if (name == "max") return items.empty() ? Value() : items.back();
    if (reverse != nullptr && reverse->Truthy()) std::reverse(items.begin(), items.end());
    return Value::MakeList(std::move(items));
  }
  if (name == "sum") {
    Value total = Value::Int(0);
    const Value* attribute = args.Get(0, "attribute");
    for (const Value& item : ToList(v)) {
      in.CountIteration();
      Value x = attribute != nullptr && attribute->is_string() ? Attribute(item, attribute->string()) : item;
      if (!x.is_number()) throw RenderError("sum of something that is not a number");
      if (total.kind() == Value::Kind::kInt && x.kind() == Value::Kind::kInt) {
        int64_t r;
        if (__builtin_add_overflow(total.integer(), x.integer(), &r)) throw RenderError("an integer overflowed");
        total = Value::Int(r);
      } else {
        total = Value::Float(total.number() + x.number());
      }
    }
    return total;
  }
  if (name == "map") {
    const Value* attribute = args.Get(99, "attribute");
    List out;
    if (attribute != nullptr) {
      if (!attribute->is_string()) throw RenderError("map: attribute must be a string");
      const Value* fallback = args.Get(99, "default");
      for (const Value& item : ToList(v)) {
        in.CountIteration();
        Value x = Attribute(item, attribute->string());
        out.push_back(x.is_undefined() && fallback != nullptr ? *fallback : x);
      }
      return Value::MakeList(std::move(out));
    }
    if (args.positional.empty() || !args.positional[0].is_string()) {
      throw RenderError("map needs a filter name or attribute=");
    }
    std::string filter = args.positional[0].string();
    if (!IsKnownFilter(filter) || filter == "map") {
      throw RenderError(absl::StrCat("the filter '", filter, "' is not supported in map"));
    }
    CallArgs rest;
    rest.positional.assign(args.positional.begin() + 1, args.positional.end());
    rest.keyword = args.keyword;
    for (const Value& item : ToList(v)) {
      in.CountIteration();
      out.push_back(ApplyFilter(in, filter, item, rest));
    }
    return Value::MakeList(std::move(out));
  }
  if (name == "select") return Select(in, v, args, false, true);
  if (name == "reject") return Select(in, v, args, false, false);
  if (name == "selectattr") return Select(in, v, args, true, true);
  if (name == "rejectattr") return Select(in, v, args, true, false);
  if (name == "indent") {
    const Value* width_value = args.Get(0, "width");
    const Value* first_value = args.Get(1, "first");
    const Value* blank_value = args.Get(2, "blank");
    std::string pad;
    if (width_value != nullptr && width_value->is_string()) {
      pad = width_value->string();
    } else {
      int64_t width = width_value != nullptr && width_value->kind() == Value::Kind::kInt ? width_value->integer() : 4;
      pad = std::string(static_cast<size_t>(std::clamp<int64_t>(width, 0, 256)), ' ');
    }
    bool first = first_value != nullptr && first_value->Truthy();
    bool blank = blank_value != nullptr && blank_value->Truthy();
    std::string s = v.Str();
    std::string out;
    size_t start = 0;
    bool is_first = true;
    while (true) {
      size_t nl = s.find('\n', start);
      std::string line = s.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
      if ((!is_first || first) && (blank || !line.empty())) out += pad;
      out += line;
      in.CheckSize(out.size());
      if (nl == std::string::npos) break;
      out += '\n';
      start = nl + 1;
      is_first = false;
    }
    return Value::String(std::move(out));
  }
  if (name == "wordcount") return Value::Int(static_cast<int64_t>(Split(in, v.Str(), CallArgs()).list().size()));
  if (name == "escape" || name == "e") {
    std::string out;
    for (char c : v.Str()) {
      switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&#34;"; break;
        case '\'': out += "&#39;"; break;
        default: out += c;
      }
    }
    return Value::String(std::move(out));
  }
  throw RenderError(absl::StrCat("the filter '", name, "' is not supported"));
}

bool ApplyTest(Interpreter& in, const std::string& name, const Value& v, CallArgs& args) {
  (void)in;
  const Value* arg = args.Get(0, "value");
  auto need = [&]() -> const Value& {
    if (arg == nullptr) throw RenderError(absl::StrCat("the test '", name, "' needs an argument"));
    return *arg;
  };
  using K = Value::Kind;
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_number() || v.kind() == K::kBool;
  if (name == "integer") return v.kind() == K::kInt;
  if (name == "float") return v.kind() == K::kFloat;
  if (name == "boolean") return v.kind() == K::kBool;
  if (name == "true") return v.kind() == K::kBool && v.boolean();
  if (name == "false") return v.kind() == K::kBool && !v.boolean();
  if (name == "mapping") return v.is_dict();
  if (name == "iterable") return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined();
  if (name == "sequence") return v.is_list() || v.is_dict() || v.is_string();
  if (name == "callable") return v.kind() == K::kFunction;
  if (name == "odd" || name == "even") {
    if (v.kind() != K::kInt) throw RenderError(absl::StrCat("the test '", name, "' needs an integer"));
    return (v.integer() % 2 != 0) == (name == "odd");
  }
  if (name == "divisibleby") {
    const Value& n = need();
    if (v.kind() != K::kInt || n.kind() != K::kInt || n.integer() == 0) {
      throw RenderError("divisibleby needs non-zero integers");
    }
    return v.integer() % n.integer() == 0;
  }
  if (name == "eq" || name == "equalto") return v.Equals(need());
  if (name == "ne") return !v.Equals(need());
  if (name == "lt") return Less(v, need());
  if (name == "gt") return Less(need(), v);
  if (name == "le") return !Less(need(), v);
  if (name == "ge") return !Less(v, need());
  if (name == "in") return Contains(need(), v);
  if (name == "sameas") {
    const Value& other = need();
    if (v.kind() != other.kind()) return false;
    if (v.is_list()) return &v.list() == &other.list();
    if (v.is_dict()) return &v.dict() == &other.dict();
    return v.Equals(other);
  }
  if (name == "lower") return v.is_string() && Lower(v.string()) == v.string();
  if (name == "upper") return v.is_string() && Upper(v.string()) == v.string();
  throw RenderError(absl::StrCat("the test '", name, "' is not supported"));
}

Value GetMethod(Interpreter& in, const Value& object, const std::string& name) {
  Interpreter* interpreter = &in;
  if (object.is_string()) {
    const std::string s = object.string();
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
      bool left = name != "rstrip", right = name != "lstrip";
      return Value::MakeFunction([s, left, right](CallArgs& args) {
        return Value::String(Strip(s, args.Get(0, "chars"), left, right));
      });
    }
    if (name == "split") {
      return Value::MakeFunction([s, interpreter](CallArgs& args) { return Split(*interpreter, s, args); });
    }
    if (name == "startswith" || name == "endswith") {
      bool start = name == "startswith";
      return Value::MakeFunction([s, start](CallArgs& args) {
        if (args.positional.empty()) throw RenderError("startswith/endswith need an argument");
        return Value::Bool(StartsOrEnds(s, args.positional[0], start));
      });
    }
    if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
      return Value::MakeFunction([s, name](CallArgs&) {
        if (name == "upper") return Value::String(Upper(s));
        if (name == "lower") return Value::String(Lower(s));
        if (name == "title") return Value::String(Title(s));
        return Value::String(Capitalize(s));
      });
    }
    if (name == "replace") {
      return Value::MakeFunction([s, interpreter](CallArgs& args) {
        const Value* count = args.Get(2, "count");
        return Value::String(Replace(*interpreter, s, StringArg(args, 0, "old", "replace"),
                                     StringArg(args, 1, "new", "replace"),
                                     count != nullptr && count->kind() == Value::Kind::kInt ? count->integer() : -1));
      });
    }
    if (name == "find" || name == "rfind" || name == "count") {
      return Value::MakeFunction([s, name](CallArgs& args) {
        const std::string& sub = StringArg(args, 0, "sub", name);
        if (name == "count") {
          if (sub.empty()) return Value::Int(static_cast<int64_t>(DecodeUtf8(s).size()) + 1);
          int64_t n = 0;
          for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
          return Value::Int(n);
        }
        size_t at = name == "find" ? s.find(sub) : s.rfind(sub);
        if (at == std::string::npos) return Value::Int(-1);
        return Value::Int(static_cast<int64_t>(DecodeUtf8(s.substr(0, at)).size()));
      });
    }
    if (name == "join") {
      return Value::MakeFunction([s, interpreter](CallArgs& args) {
        if (args.positional.empty()) throw RenderError("join needs an argument");
        std::string out;
        bool first = true;
        for (const Value& item : ToList(args.positional[0])) {
          interpreter->CountIteration();
          if (!item.is_string()) throw RenderError("join: an item is not a string");
          if (!first) out += s;
          first = false;
          out += item.string();
          interpreter->CheckSize(out.size());
        }
        return Value::String(std::move(out));
      });
    }
    if (name == "isdigit" || name == "isspace" || name == "isalpha" || name == "isalnum") {
      return Value::MakeFunction([s, name](CallArgs&) {
        if (s.empty()) return Value::Bool(false);
        for (unsigned char c : s) {
          bool ok = name == "isdigit"   ? std::isdigit(c)
                    : name == "isspace" ? std::isspace(c)
                    : name == "isalpha" ? std::isalpha(c)
                                        : std::isalnum(c);
          if (!ok) return Value::Bool(false);
        }
        return Value::Bool(true);
      });
    }
    if (name == "splitlines") {
      return Value::MakeFunction([s](CallArgs&) {
        List lines;
        size_t start = 0;
        while (start < s.size()) {
          size_t nl = s.find_first_of("\r\n", start);
          if (nl == std::string::npos) {
            lines.push_back(Value::String(s.substr(start)));
            break;
          }
          lines.push_back(Value::String(s.substr(start, nl - start)));
          start = nl + ((s[nl] == '\r' && nl + 1 < s.size() && s[nl + 1] == '\n') ? 2 : 1);
        }
        return Value::MakeList(std::move(lines));
      });
    }
    return Value();
  }
  if (object.is_dict()) {
    Value dict = object;
    if (name == "items") return Value::MakeFunction([dict](CallArgs&) { return Items(dict); });
    if (name == "keys") return Value::MakeFunction([dict](CallArgs&) { return Value::MakeList(ToList(dict)); });
    if (name == "values") {
      return Value::MakeFunction([dict](CallArgs&) {
        List values;
        for (const auto& item : dict.dict().items()) values.push_back(item.second);
        return Value::MakeList(std::move(values));
      });
    }
    if (name == "get") {
      return Value::MakeFunction([dict](CallArgs& args) {
        if (args.positional.empty()) throw RenderError("get needs a key");
        const Value* fallback = args.Get(1, "default");
        const Value& key = args.positional[0];
        const Value* found = key.is_string() ? dict.dict().Find(key.string()) : nullptr;
        if (found != nullptr) return *found;
        return fallback != nullptr ? *fallback : Value::None();
      });
    }
    return Value();
  }
  if (object.is_list()) {
    Value list = object;
    if (name == "append") {
      return Value::MakeFunction([list, interpreter](CallArgs& args) {
        if (args.positional.size() != 1) throw RenderError("append takes one argument");
        interpreter->CountIteration();
        list.list().push_back(args.positional[0]);
        return Value::None();
      });
    }
    return Value();
  }
  return Value();
}

void AddGlobals(Interpreter& in, Scope& scope) {
  Interpreter* interpreter = &in;
  // transformers' strftime_now: the local time now, through strftime.
  scope.Set("strftime_now", Value::MakeFunction([](CallArgs& args) {
              if (args.positional.size() != 1 || !args.positional[0].is_string() ||
                  args.positional[0].string().size() > 256) {
                throw RenderError("strftime_now takes one format string of at most 256 bytes");
              }
              std::time_t now = std::time(nullptr);
              std::tm local{};
              localtime_r(&now, &local);
              char buffer[4096];
              size_t n = std::strftime(buffer, sizeof buffer, args.positional[0].string().c_str(), &local);
              return Value::String(std::string(buffer, n));
            }));
  scope.Set("raise_exception", Value::MakeFunction([](CallArgs& args) -> Value {
              std::string message = args.positional.empty() ? "" : args.positional[0].Str();
              throw RenderError(absl::StrCat("the template raised: ", message));
            }));
  scope.Set("namespace", Value::MakeFunction([](CallArgs& args) {
              Value ns = Value::MakeDict(/*is_namespace=*/true);
              for (const Value& v : args.positional) {
                if (!v.is_dict()) throw RenderError("namespace() takes a dict or keyword arguments");
                for (const auto& [key, value] : v.dict().items()) ns.dict().Set(key, value);
              }
              for (const auto& [key, value] : args.keyword) ns.dict().Set(key, value);
              return ns;
            }));
  scope.Set("dict", Value::MakeFunction([](CallArgs& args) {
              Value d = Value::MakeDict();
              for (const auto& [key, value] : args.keyword) d.dict().Set(key, value);
              return d;
            }));
  scope.Set("range", Value::MakeFunction([interpreter](CallArgs& args) {
              int64_t bounds[3] = {0, 0, 1};
              size_t n = args.positional.size();
              if (n < 1 || n > 3) throw RenderError("range takes 1 to 3 integers");
              for (const Value& v : args.positional) {
                if (v.kind() != Value::Kind::kInt) throw RenderError("range takes integers");
              }
              if (n == 1) {
                bounds[1] = args.positional[0].integer();
              } else {
                bounds[0] = args.positional[0].integer();
                bounds[1] = args.positional[1].integer();
                if (n == 3) bounds[2] = args.positional[2].integer();
              }
              if (bounds[2] == 0) throw RenderError("range's step is zero");
              List out;
              for (int64_t i = bounds[0]; bounds[2] > 0 ? i < bounds[1] : i > bounds[1]; i += bounds[2]) {
                interpreter->CountIteration();
                out.push_back(Value::Int(i));
                if ((bounds[2] > 0 && i > INT64_MAX - bounds[2]) || (bounds[2] < 0 && i < INT64_MIN - bounds[2])) break;
              }
              return Value::MakeList(std::move(out));
            }));
}

}  // namespace linserve::jinja
