// The filters chat templates use, with Python's (Jinja's) behaviour.
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/jinja/jinja_builtin_helpers.h"
#include "engine/jinja/jinja_interpreter.h"
#include "engine/jinja/jinja_parser.h"

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

Value Round(const Value& v, const CallArgs& args) {
  const Value* precision_value = args.Get(0, "precision");
  const Value* method_value = args.Get(1, "method");
  int64_t precision = precision_value != nullptr && precision_value->kind() == Value::Kind::kInt
                          ? precision_value->integer()
                          : 0;
  std::string method =
      method_value != nullptr && method_value->is_string() ? method_value->string() : "common";
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

}  // namespace

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
  if (name == "int") {
    if (v.kind() == Value::Kind::kInt) return v;
    if (v.kind() == Value::Kind::kFloat && std::isfinite(v.number()) &&
        std::fabs(v.number()) < 9e18) {
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
      return attribute != nullptr && attribute->is_string() ? Attribute(item, attribute->string())
                                                            : item;
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
      Value x = attribute != nullptr && attribute->is_string()
                    ? Attribute(item, attribute->string())
                    : item;
      if (!x.is_number()) throw RenderError("sum of something that is not a number");
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
  if (name == "escape" || name == "e") {
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
    return Value::String(std::move(out));
  }
  throw RenderError(absl::StrCat("the filter '", name, "' is not supported"));
}

}  // namespace linserve::jinja
