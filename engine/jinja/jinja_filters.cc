// The filters chat templates use, with Python's (Jinja's) behaviour.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/jinja/jinja_builtin_helpers.h"
#include "engine/jinja/jinja_interpreter.h"
#include "engine/jinja/jinja_parser.h"
#include "engine/jinja/jinja_percent_format.h"

namespace linserve::jinja {
namespace {

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

// Python's int(value) of a float: its integer part, past 64 bits an error.
Value TruncatedFloat(double x) {
  if (std::isinf(x)) throw RenderError("cannot convert float infinity to integer");
  if (!(std::fabs(x) < 9223372036854775808.0)) throw RenderError("an integer overflowed");
  return Value::Int(static_cast<int64_t>(x));
}

// Jinja's int filter: int(value) (int(value, base) of a string), else
// int(float(value)), else the default.
Value IntFilter(const Value& v, const CallArgs& args) {
  using K = Value::Kind;
  const Value* fallback = args.Get(0, "default");
  auto otherwise = [&]() { return fallback != nullptr ? *fallback : Value::Int(0); };
  switch (v.kind()) {
    case K::kInt:
      return v;
    case K::kBool:
      return Value::Int(v.boolean());
    case K::kFloat:
      return std::isnan(v.number()) ? otherwise() : TruncatedFloat(v.number());
    case K::kUndefined:
      throw RenderError("int of an undefined value");
    case K::kString: {
      // A base that is no integer, or past 2..36, makes Python's int(value,
      // base) raise: -1 fails the same way.
      const Value* base = args.Get(1, "base");
      const int base_number = base == nullptr ? 10
                              : base->kind() == K::kInt
                                  ? static_cast<int>(std::clamp<int64_t>(base->integer(), -1, 37))
                                  : -1;
      int64_t parsed = 0;
      const PythonNumber read = ParsePythonInt(v.string(), base_number, &parsed);
      if (read == PythonNumber::kTooLarge) throw RenderError("an integer overflowed");
      if (read == PythonNumber::kValid) return Value::Int(parsed);
      double real = 0;
      if (ParsePythonFloat(v.string(), &real) && std::isfinite(real)) return TruncatedFloat(real);
      return otherwise();
    }
    default:
      return otherwise();
  }
}

// Python's round(x, digits) of an integer: itself, or for digits < 0 to a
// multiple of 10^-digits, ties to even.
Value RoundInteger(int64_t x, int64_t digits) {
  if (digits >= 0) return Value::Int(x);
  if (digits < -38) return Value::Int(0);
  __int128 unit = 1;
  for (int64_t k = 0; k < -digits; ++k) unit *= 10;
  const __int128 magnitude = x < 0 ? -static_cast<__int128>(x) : x;
  const __int128 rest = magnitude % unit;
  __int128 rounded = magnitude - rest;
  if (2 * rest > unit || (2 * rest == unit && (rounded / unit) % 2 != 0)) rounded += unit;
  const __int128 result = x < 0 ? -rounded : rounded;
  if (result > INT64_MAX || result < INT64_MIN) throw RenderError("an integer overflowed");
  return Value::Int(static_cast<int64_t>(result));
}

// Python's round(x, digits) of a float: the decimal nearest the exact
// binary value, ties to even (printf's %f rounds that way).
double RoundFloat(double x, int64_t digits) {
  if (!std::isfinite(x) || x == 0 || digits > 323) return x;
  if (digits < -308) return std::copysign(0.0, x);
  if (digits >= 0) {
    const int precision = static_cast<int>(digits);
    const int size = std::snprintf(nullptr, 0, "%.*f", precision, x);
    std::string text(static_cast<size_t>(size) + 1, '\0');
    std::snprintf(text.data(), text.size(), "%.*f", precision, x);
    return std::strtod(text.c_str(), nullptr);
  }
  // Tens, hundreds...: the integer part's digits rounded by hand, the
  // fraction only breaking ties.
  const double whole = std::trunc(x);
  const int size = std::snprintf(nullptr, 0, "%.0f", std::fabs(whole));
  std::string text(static_cast<size_t>(size) + 1, '\0');
  std::snprintf(text.data(), text.size(), "%.0f", std::fabs(whole));
  text.resize(static_cast<size_t>(size));
  const size_t cut = static_cast<size_t>(-digits);
  if (text.size() < cut) text.insert(0, cut - text.size(), '0');
  const std::string kept = "0" + text.substr(0, text.size() - cut);
  const std::string dropped = text.substr(text.size() - cut);
  const int first = dropped[0] - '0';
  const bool rest_zero = dropped.find_first_not_of('0', 1) == std::string::npos && whole == x;
  bool up = first > 5 || (first == 5 && !rest_zero) ||
            (first == 5 && rest_zero && (kept.back() - '0') % 2 != 0);
  std::string result = kept;
  for (size_t i = result.size(); up && i-- > 0;) {
    up = result[i] == '9';
    result[i] = up ? '0' : static_cast<char>(result[i] + 1);
  }
  return std::copysign(std::strtod((result + "e" + std::to_string(cut)).c_str(), nullptr), x);
}

// Jinja's round filter: round(value, precision) for "common", else
// math.ceil/floor(value * 10**precision) / 10**precision.
Value Round(const Value& v, const CallArgs& args) {
  const Value* precision_value = args.Get(0, "precision");
  const Value* method_value = args.Get(1, "method");
  if (precision_value != nullptr && precision_value->kind() != Value::Kind::kInt) {
    throw RenderError("round: precision must be an integer");
  }
  const int64_t precision = precision_value != nullptr ? precision_value->integer() : 0;
  const std::string method = method_value == nullptr ? "common" : method_value->Str();
  if (method != "common" && method != "ceil" && method != "floor") {
    throw RenderError("round: method must be common, ceil or floor");
  }
  if (method == "common") {
    if (v.kind() == Value::Kind::kBool) return RoundInteger(v.boolean(), precision);
    if (v.kind() == Value::Kind::kInt) return RoundInteger(v.integer(), precision);
    return Value::Float(RoundFloat(v.number(), precision));
  }
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = (v.kind() == Value::Kind::kBool ? v.boolean() : v.number()) * scale;
  return Value::Float((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

bool ApplyTestByName(Interpreter& in, const std::string& name, const Value& item,
                     const std::vector<Value>& extra) {
  CallArgs args;
  args.positional = extra;
  return ApplyTest(in, name, item, args);
}

// select/reject/selectattr/rejectattr.
Value Select(Interpreter& in, const Value& operand, CallArgs& args, bool by_attribute, bool keep) {
  // Jinja selects from a false value (none, undefined, "") nothing, unread.
  if (!operand.Truthy()) return Value::MakeList();
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
    if (!args.positional[next].is_string())
      throw RenderError("select: the test must be named by a string");
    test = args.positional[next].string();
    if (!IsKnownTest(test))
      throw RenderError(absl::StrCat("the test '", test, "' is not supported"));
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

// sort(reverse, case_sensitive, attribute), min/max(case_sensitive,
// attribute) and dictsort(case_sensitive, by, reverse), as Jinja's: strings
// compared lowered unless case_sensitive, the sort stable both ways (a
// reversed sort keeps equal items in their order), min and max the first
// of their equals.
Value SortFilter(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  const bool dictsort = name == "dictsort";
  const bool extreme = name == "min" || name == "max";
  const Value* case_sensitive = args.Get(dictsort || extreme ? 0 : 1, "case_sensitive");
  const Value* reverse = extreme ? nullptr : args.Get(dictsort ? 2 : 0, "reverse");
  const Value* attribute = dictsort ? nullptr : args.Get(extreme ? 1 : 2, "attribute");
  size_t position = 0;
  if (dictsort) {
    const Value* by = args.Get(1, "by");
    const std::string field = by == nullptr ? "key" : by->Str();
    if (field != "key" && field != "value") {
      throw RenderError("dictsort: you can only sort by either \"key\" or \"value\"");
    }
    position = field == "value" ? 1 : 0;
  }
  const bool fold_case = case_sensitive == nullptr || !case_sensitive->Truthy();
  List items = dictsort ? Items(v).list() : ToList(v);
  std::vector<Value> keys;
  keys.reserve(items.size());
  for (const Value& item : items) {
    in.CountIteration();
    Value key = dictsort ? item.list()[position]
                : attribute != nullptr && attribute->is_string()
                    ? Attribute(item, attribute->string())
                    : item;
    keys.push_back(fold_case && key.is_string() ? Value::String(Lower(key.string())) : key);
  }
  if (extreme) {
    if (items.empty()) return Value();
    size_t best = 0;
    for (size_t i = 1; i < items.size(); ++i) {
      if (name == "min" ? Less(keys[i], keys[best]) : Less(keys[best], keys[i])) best = i;
    }
    return items[best];
  }
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  const bool descending = reverse != nullptr && reverse->Truthy();
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return descending ? Less(keys[b], keys[a]) : Less(keys[a], keys[b]);
  });
  List sorted;
  sorted.reserve(items.size());
  for (size_t i : order) sorted.push_back(items[i]);
  return Value::MakeList(std::move(sorted));
}

}  // namespace

Value ApplyFilter(Interpreter& in, const std::string& name, const Value& v, CallArgs& args) {
  if (name == "trim") return SameSafety(v, Strip(v.Str(), args.Get(0, "chars"), true, true));
  if (name == "length" || name == "count") return Value::Int(Length(v));
  if (name == "string") return SameSafety(v, v.Str());
  if (name == "safe") return Value::SafeString(v.Str());
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
  if (name == "lower") return SameSafety(v, Lower(v.Str()));
  if (name == "upper") return SameSafety(v, Upper(v.Str()));
  if (name == "capitalize") return Value::String(Capitalize(v.Str()));
  if (name == "title") return Value::String(TitleFilter(v.Str()));
  if (name == "replace") {
    const Value* count = args.Get(2, "count");
    return Value::String(Replace(
        in, v.Str(), StringArg(args, 0, "old", "replace"), StringArg(args, 1, "new", "replace"),
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
      out += (attribute != nullptr && attribute->is_string() ? Attribute(item, attribute->string())
                                                             : item)
                 .Str();
      in.CheckSize(out.size());
    }
    return Value::String(std::move(out));
  }
  if (name == "int") return IntFilter(v, args);
  if (name == "float") {
    // float(value), or the default where Python raises ValueError or TypeError.
    if (v.is_undefined()) throw RenderError("float of an undefined value");
    if (v.is_number()) return Value::Float(v.number());
    if (v.kind() == Value::Kind::kBool) return Value::Float(v.boolean() ? 1.0 : 0.0);
    double parsed = 0;
    if (v.is_string() && ParsePythonFloat(v.string(), &parsed)) return Value::Float(parsed);
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
    if (!v.is_number() && v.kind() != Value::Kind::kBool) {
      throw RenderError(absl::StrCat("round of a ", v.TypeName()));
    }
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
    // unique(case_sensitive=False, attribute=None): the first of each
    // value, strings compared lowered unless case_sensitive.
    const Value* case_sensitive = args.Get(0, "case_sensitive");
    const Value* attribute = args.Get(1, "attribute");
    const bool fold_case = case_sensitive == nullptr || !case_sensitive->Truthy();
    List out;
    std::vector<Value> seen;
    for (const Value& item : ToList(v)) {
      Value key = attribute != nullptr && attribute->is_string()
                      ? Attribute(item, attribute->string())
                      : item;
      if (fold_case && key.is_string()) key = Value::String(Lower(key.string()));
      bool repeated = false;
      for (const Value& earlier : seen) {
        in.CountIteration();
        if (earlier.Equals(key)) {
          repeated = true;
          break;
        }
      }
      if (repeated) continue;
      seen.push_back(std::move(key));
      out.push_back(item);
    }
    return Value::MakeList(std::move(out));
  }
  if (name == "sort" || name == "min" || name == "max" || name == "dictsort") {
    return SortFilter(in, name, v, args);
  }
  if (name == "sum") {
    const Value* attribute = args.Get(0, "attribute");
    const Value* start = args.Get(1, "start");
    Value total = start != nullptr ? *start : Value::Int(0);
    auto as_number = [](const Value& x) {
      if (x.kind() == Value::Kind::kBool) return Value::Int(x.boolean());
      if (!x.is_number()) throw RenderError("sum of something that is not a number");
      return x;
    };
    total = as_number(total);
    for (const Value& item : ToList(v)) {
      in.CountIteration();
      Value x = as_number(attribute != nullptr && attribute->is_string()
                              ? Attribute(item, attribute->string())
                              : item);
      if (total.kind() == Value::Kind::kInt && x.kind() == Value::Kind::kInt) {
        int64_t r;
        if (__builtin_add_overflow(total.integer(), x.integer(), &r))
          throw RenderError("an integer overflowed");
        total = Value::Int(r);
      } else {
        total = Value::Float(total.number() + x.number());
      }
    }
    return total;
  }
  if (name == "map") {
    // As select: a false value maps to nothing, its arguments unread.
    if (!v.Truthy()) return Value::MakeList();
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
      int64_t width = width_value != nullptr && width_value->kind() == Value::Kind::kInt
                          ? width_value->integer()
                          : 4;
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
  if (name == "wordcount")
    return Value::Int(static_cast<int64_t>(Split(in, v.Str(), CallArgs()).list().size()));
  if (name == "escape" || name == "e") return Escape(v);
  if (name == "format") {
    // Jinja's: the string % (the positional values), or % {the keywords}.
    if (!args.positional.empty() && !args.keyword.empty()) {
      throw RenderError("format: can't handle positional and keyword arguments at the same time");
    }
    Value values = Value::MakeTuple(args.positional);
    if (!args.keyword.empty()) {
      values = Value::MakeDict();
      for (const auto& [key, value] : args.keyword) values.dict().Set(key, value);
    }
    return PercentFormat(in, v, values);
  }
  throw RenderError(absl::StrCat("the filter '", name, "' is not supported"));
}

}  // namespace linserve::jinja
