// Tests, methods and globals: the ones chat templates call, with Python's
// (Jinja's) behaviour; the filters are in jinja_filters.cc.
#include <algorithm>
#include <cmath>
#include <ctime>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/jinja/jinja_builtin_helpers.h"
#include "engine/jinja/jinja_interpreter.h"

namespace linserve::jinja {

bool Contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kString:
      if (!item.is_string())
        throw RenderError(absl::StrCat("'in <string>' needs a string, not a ", item.TypeName()));
      return container.string().find(item.string()) != std::string::npos;
    case Value::Kind::kList:
      for (const Value& v : container.list()) {
        if (v.Equals(item)) return true;
      }
      return false;
    case Value::Kind::kDict:
      return container.dict().Find(item) != nullptr;
    case Value::Kind::kUndefined:
      return false;
    default:
      throw RenderError(absl::StrCat("'in' on a ", container.TypeName()));
  }
}

bool Less(const Value& a, const Value& b) {
  auto numeric = [](const Value& v) { return v.is_number() || v.kind() == Value::Kind::kBool; };
  if (numeric(a) && numeric(b)) {
    auto n = [](const Value& v) {
      return v.kind() == Value::Kind::kBool ? (v.boolean() ? 1.0 : 0.0) : v.number();
    };
    if (a.kind() == Value::Kind::kInt && b.kind() == Value::Kind::kInt)
      return a.integer() < b.integer();
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
    if (v.kind() != K::kInt)
      throw RenderError(absl::StrCat("the test '", name, "' needs an integer"));
    return (v.integer() % 2 != 0) == (name == "odd");
  }
  if (name == "divisibleby") {
    const Value& n = need();
    if (v.kind() != K::kInt || n.kind() != K::kInt || n.integer() == 0) {
      throw RenderError("divisibleby needs non-zero integers");
    }
    return v.integer() % n.integer() == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==") return v.Equals(need());
  if (name == "ne" || name == "!=") return !v.Equals(need());
  if (name == "lt" || name == "lessthan" || name == "<") return Less(v, need());
  if (name == "gt" || name == "greaterthan" || name == ">") return Less(need(), v);
  if (name == "le" || name == "<=") return !Less(need(), v);
  if (name == "ge" || name == ">=") return !Less(v, need());
  if (name == "in") return Contains(need(), v);
  if (name == "sameas") {
    const Value& other = need();
    if (v.kind() != other.kind()) return false;
    if (v.is_list()) return &v.list() == &other.list();
    if (v.is_dict()) return &v.dict() == &other.dict();
    return v.Equals(other);
  }
  // str(value).islower() / isupper(), as Jinja's tests.
  if (name == "lower" || name == "upper") return IsPythonLower(v.Str(), name == "upper");
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
      return Value::MakeFunction(
          [s, interpreter](CallArgs& args) { return Split(*interpreter, s, args); });
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
        return Value::String(Replace(
            *interpreter, s, StringArg(args, 0, "old", "replace"),
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
          for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size()))
            ++n;
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
    if (name == "keys")
      return Value::MakeFunction([dict](CallArgs&) { return Value::MakeList(ToList(dict)); });
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
        const Value* found = dict.dict().Find(key);
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
              size_t n =
                  std::strftime(buffer, sizeof buffer, args.positional[0].string().c_str(), &local);
              return Value::String(std::string(buffer, n));
            }));
  scope.Set("raise_exception", Value::MakeFunction([](CallArgs& args) -> Value {
              std::string message = args.positional.empty() ? "" : args.positional[0].Str();
              throw RenderError(absl::StrCat("the template raised: ", message));
            }));
  scope.Set("namespace", Value::MakeFunction([](CallArgs& args) {
              Value ns = Value::MakeDict(/*is_namespace=*/true);
              for (const Value& v : args.positional) {
                if (!v.is_dict())
                  throw RenderError("namespace() takes a dict or keyword arguments");
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
              for (int64_t i = bounds[0]; bounds[2] > 0 ? i < bounds[1] : i > bounds[1];
                   i += bounds[2]) {
                interpreter->CountIteration();
                out.push_back(Value::Int(i));
                if ((bounds[2] > 0 && i > INT64_MAX - bounds[2]) ||
                    (bounds[2] < 0 && i < INT64_MIN - bounds[2]))
                  break;
              }
              return Value::MakeList(std::move(out));
            }));
}

}  // namespace linserve::jinja
