#include "engine/jinja/jinja_interpreter.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/jinja/jinja_builtin_helpers.h"
#include "engine/jinja/jinja_percent_format.h"

namespace linserve::jinja {

const Value* Scope::Find(const std::string& name) const {
  for (const Scope* scope = this; scope != nullptr; scope = scope->parent_.get()) {
    auto it = scope->vars_.find(name);
    if (it != scope->vars_.end()) return &it->second;
  }
  return nullptr;
}

void Interpreter::CountIteration() {
  if (++iterations_ > limits_.max_loop_iterations) {
    throw LimitError(absl::StrCat("more than ", limits_.max_loop_iterations,
                                  " loop iterations (the limit on loop iterations)"));
  }
}

void Interpreter::CheckSize(size_t bytes) const {
  if (static_cast<int64_t>(bytes) > limits_.max_output_bytes) {
    throw LimitError(absl::StrCat("a value of more than ", limits_.max_output_bytes,
                                  " bytes (the limit on output bytes)"));
  }
}

void Interpreter::Emit(const std::string& text) {
  output_bytes_ += static_cast<int64_t>(text.size());
  if (output_bytes_ > limits_.max_output_bytes) {
    throw LimitError(absl::StrCat("more than ", limits_.max_output_bytes,
                                  " bytes of output (the limit on output bytes)"));
  }
  buffers_.back() += text;
}

std::string Interpreter::Render(const Body& body, const std::shared_ptr<Scope>& scope) {
  buffers_.emplace_back();
  Exec(body, scope);
  std::string out = std::move(buffers_.back());
  buffers_.pop_back();
  return out;
}

Interpreter::Flow Interpreter::Exec(const Body& body, const std::shared_ptr<Scope>& scope) {
  for (const auto& stmt_ptr : body) {
    const Stmt& stmt = *stmt_ptr;
    line_ = stmt.line;
    switch (stmt.kind) {
      case Stmt::Kind::kText:
        Emit(stmt.text);
        break;
      case Stmt::Kind::kOutput: {
        Value value = Eval(*stmt.expr, scope);
        Emit(value.Str());
        break;
      }
      case Stmt::Kind::kIf: {
        const Body* chosen = &stmt.else_body;
        for (const auto& [condition, branch] : stmt.branches) {
          if (Eval(*condition, scope).Truthy()) {
            chosen = &branch;
            break;
          }
        }
        Flow flow = Exec(*chosen, scope);
        if (flow != Flow::kNormal) return flow;
        break;
      }
      case Stmt::Kind::kFor: {
        Flow flow = ExecFor(stmt, scope);
        if (flow != Flow::kNormal) return flow;
        break;
      }
      case Stmt::Kind::kSet:
      case Stmt::Kind::kSetBlock:
        ExecSet(stmt, scope);
        break;
      case Stmt::Kind::kMacro:
        DefineMacro(stmt, scope);
        break;
      case Stmt::Kind::kCallBlock: {
        // The call's callee gets `caller`, a macro of the block's body.
        const Expr& call = *stmt.expr;
        Value callee = Eval(*call.children[0], scope);
        if (callee.kind() != Value::Kind::kFunction) {
          throw RenderError("'{% call %}' of something that is not a macro");
        }
        CallArgs args = EvalArgs(call, 1, scope);
        std::shared_ptr<Scope> defined_in = scope;
        const Stmt* block = &stmt;
        args.keyword.emplace_back("caller",
                                  Value::MakeFunction([this, block, defined_in](CallArgs& a) {
                                    return CallMacro(*block, defined_in, a);
                                  }));
        Emit(callee.function()(args).Str());
        break;
      }
      case Stmt::Kind::kFilterBlock: {
        // The body's sets stay in the block, as Jinja's.
        Value text = Value::String(Render(stmt.body, std::make_shared<Scope>(scope)));
        for (const auto& filter : stmt.filters) text = EvalFilter(*filter, std::move(text), scope);
        Emit(text.Str());
        break;
      }
      case Stmt::Kind::kBreak:
        return Flow::kBreak;
      case Stmt::Kind::kContinue:
        return Flow::kContinue;
    }
  }
  return Flow::kNormal;
}

namespace {

// What a for loop walks: a list's items, a dict's keys, a string's characters.
List Iterate(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kList:
      return value.list();
    case Value::Kind::kDict: {
      List keys;
      for (const auto& item : value.dict().items()) keys.push_back(item.first);
      return keys;
    }
    case Value::Kind::kString: {
      List chars;
      for (char32_t c : DecodeUtf8(value.string())) {
        chars.push_back(Value::String(EncodeUtf8(std::u32string(1, c))));
      }
      return chars;
    }
    case Value::Kind::kUndefined:
      return {};
    default:
      throw RenderError(absl::StrCat("a ", value.TypeName(), " is not iterable"));
  }
}

void Unpack(const std::vector<std::string>& targets, const Value& item, Scope& scope) {
  if (targets.size() == 1) {
    scope.Set(targets[0], item);
    return;
  }
  if (!item.is_list() || item.list().size() != targets.size()) {
    throw RenderError(
        absl::StrCat("cannot unpack a ", item.TypeName(), " into ", targets.size(), " names"));
  }
  for (size_t i = 0; i < targets.size(); ++i) scope.Set(targets[i], item.list()[i]);
}

}  // namespace

Interpreter::Flow Interpreter::ExecFor(const Stmt& stmt, const std::shared_ptr<Scope>& scope) {
  List items = Iterate(Eval(*stmt.expr, scope));
  if (stmt.condition) {
    List kept;
    for (const Value& item : items) {
      CountIteration();
      auto test_scope = std::make_shared<Scope>(scope);
      Unpack(stmt.targets, item, *test_scope);
      if (Eval(*stmt.condition, test_scope).Truthy()) kept.push_back(item);
    }
    items = std::move(kept);
  }
  if (items.empty()) return Exec(stmt.else_body, scope);
  const int64_t length = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < length; ++i) {
    CountIteration();
    auto body_scope = std::make_shared<Scope>(scope);
    Value loop = Value::MakeDict();
    Dict& d = loop.dict();
    d.Set("index", Value::Int(i + 1));
    d.Set("index0", Value::Int(i));
    d.Set("revindex", Value::Int(length - i));
    d.Set("revindex0", Value::Int(length - i - 1));
    d.Set("first", Value::Bool(i == 0));
    d.Set("last", Value::Bool(i == length - 1));
    d.Set("length", Value::Int(length));
    d.Set("depth", Value::Int(1));
    d.Set("depth0", Value::Int(0));
    if (i > 0) d.Set("previtem", items[i - 1]);
    if (i + 1 < length) d.Set("nextitem", items[i + 1]);
    d.Set("cycle", Value::MakeFunction([i](CallArgs& args) {
            if (args.positional.empty()) throw RenderError("loop.cycle needs arguments");
            return args.positional[i % args.positional.size()];
          }));
    body_scope->Set("loop", std::move(loop));
    Unpack(stmt.targets, items[i], *body_scope);
    if (Exec(stmt.body, body_scope) == Flow::kBreak) break;
  }
  return Flow::kNormal;
}

void Interpreter::ExecSet(const Stmt& stmt, const std::shared_ptr<Scope>& scope) {
  Value value;
  if (stmt.kind == Stmt::Kind::kSetBlock) {
    value = Value::String(Render(stmt.body, scope));
    for (const auto& filter : stmt.filters) value = EvalFilter(*filter, std::move(value), scope);
  } else {
    value = Eval(*stmt.expr, scope);
  }
  const Expr& target = *stmt.target;
  switch (target.kind) {
    case Expr::Kind::kName:
      scope->Set(target.name, std::move(value));
      return;
    case Expr::Kind::kAttr: {
      Value object = Eval(*target.children[0], scope);
      if (!object.is_namespace()) {
        throw RenderError(absl::StrCat("cannot set an attribute of a ", object.TypeName(),
                                       " (only of a namespace)"));
      }
      object.dict().Set(target.name, std::move(value));
      return;
    }
    case Expr::Kind::kTuple: {
      std::vector<std::string> names;
      for (const auto& child : target.children) names.push_back(child->name);
      Unpack(names, value, *scope);
      return;
    }
    default:
      throw RenderError("an invalid assignment target");
  }
}

void Interpreter::DefineMacro(const Stmt& stmt, const std::shared_ptr<Scope>& scope) {
  const Stmt* macro = &stmt;
  // The scope holds the macro, so the macro holds its scope weakly (no cycle).
  std::weak_ptr<Scope> weak = scope;
  scope->Set(stmt.name, Value::MakeFunction([this, macro, weak](CallArgs& args) {
               std::shared_ptr<Scope> defined_in = weak.lock();
               if (!defined_in) throw RenderError("a macro called after its scope ended");
               return CallMacro(*macro, defined_in, args);
             }));
}

Value Interpreter::CallMacro(const Stmt& macro, const std::shared_ptr<Scope>& defined_in,
                             CallArgs& args) {
  if (++call_depth_ > limits_.max_call_depth) {
    throw LimitError(absl::StrCat("macro calls nested deeper than ", limits_.max_call_depth,
                                  " (the limit on call depth)"));
  }
  if (args.positional.size() > macro.params.size() && !macro.takes_varargs) {
    throw RenderError(absl::StrCat("macro '", macro.name, "' takes ", macro.params.size(),
                                   " arguments, given ", args.positional.size()));
  }
  auto call_scope = std::make_shared<Scope>(defined_in);
  List extra_positional;
  for (size_t i = macro.params.size(); i < args.positional.size(); ++i) {
    extra_positional.push_back(args.positional[i]);
  }
  Value extra_keyword = Value::MakeDict();
  for (const auto& keyword : args.keyword) {
    const std::string& name = keyword.first;
    const bool declared = std::any_of(macro.params.begin(), macro.params.end(),
                                      [&name](const Param& p) { return p.name == name; });
    if (declared || name == "caller") continue;
    if (!macro.takes_kwargs) {
      throw RenderError(
          absl::StrCat("macro '", macro.name, "' takes no keyword argument '", name, "'"));
    }
    extra_keyword.dict().Set(name, keyword.second);
  }
  call_scope->Set("varargs", Value::MakeTuple(std::move(extra_positional)));
  call_scope->Set("kwargs", extra_keyword);
  for (size_t i = 0; i < macro.params.size(); ++i) {
    const Param& param = macro.params[i];
    const Value* given = args.Get(i, param.name);
    if (given != nullptr) {
      call_scope->Set(param.name, *given);
    } else if (param.default_value) {
      call_scope->Set(param.name, Eval(*param.default_value, call_scope));
    } else {
      call_scope->Set(param.name, Value());
    }
  }
  for (const auto& [name, value] : args.keyword) {
    if (name == "caller") call_scope->Set(name, value);
  }
  int saved_line = line_;
  std::string text = Render(macro.body, call_scope);
  line_ = saved_line;
  --call_depth_;
  return Value::String(std::move(text));
}

CallArgs Interpreter::EvalArgs(const Expr& expr, size_t first,
                               const std::shared_ptr<Scope>& scope) {
  CallArgs args;
  for (size_t i = first; i < expr.children.size(); ++i) {
    args.positional.push_back(Eval(*expr.children[i], scope));
  }
  for (const auto& [name, value] : expr.keyword)
    args.keyword.emplace_back(name, Eval(*value, scope));
  return args;
}

Value Interpreter::EvalFilter(const Expr& expr, Value operand,
                              const std::shared_ptr<Scope>& scope) {
  CallArgs args = EvalArgs(expr, 1, scope);
  return ApplyFilter(*this, expr.name, operand, args);
}

namespace {

int64_t ToIndex(const Value& v, int64_t size, bool clamp, int64_t fallback) {
  if (v.is_undefined() || v.is_none()) return fallback;
  if (v.kind() != Value::Kind::kInt) throw RenderError("a slice index must be an integer");
  int64_t i = v.integer();
  if (i < 0) i += size;
  if (clamp) i = std::max<int64_t>(-1, std::min(i, size));
  return i;
}

// Python's seq[start:stop:step] as indices.
std::vector<int64_t> SliceIndices(int64_t size, const Value& start, const Value& stop,
                                  const Value& step_value) {
  int64_t step = 1;
  if (!step_value.is_undefined() && !step_value.is_none()) {
    if (step_value.kind() != Value::Kind::kInt || step_value.integer() == 0) {
      throw RenderError("a slice step must be a non-zero integer");
    }
    step = step_value.integer();
  }
  std::vector<int64_t> out;
  if (step > 0) {
    int64_t b = std::max<int64_t>(0, ToIndex(start, size, true, 0));
    int64_t e = std::min(size, ToIndex(stop, size, true, size));
    for (int64_t i = b; i < e; i += step) out.push_back(i);
  } else {
    int64_t b = std::min(size - 1, ToIndex(start, size, true, size - 1));
    int64_t e = std::max<int64_t>(-1, ToIndex(stop, size, true, -1));
    for (int64_t i = b; i > e; i += step) out.push_back(i);
  }
  return out;
}

}  // namespace

Value Interpreter::Eval(const Expr& expr, const std::shared_ptr<Scope>& scope) {
  switch (expr.kind) {
    case Expr::Kind::kLiteral:
      return expr.literal;
    case Expr::Kind::kName: {
      const Value* value = scope->Find(expr.name);
      return value == nullptr ? Value() : *value;
    }
    case Expr::Kind::kList:
    case Expr::Kind::kTuple: {
      List items;
      for (const auto& child : expr.children) items.push_back(Eval(*child, scope));
      return expr.kind == Expr::Kind::kTuple ? Value::MakeTuple(std::move(items))
                                             : Value::MakeList(std::move(items));
    }
    case Expr::Kind::kDict: {
      Value dict = Value::MakeDict();
      for (size_t i = 0; i + 1 < expr.children.size(); i += 2) {
        Value key = Eval(*expr.children[i], scope);
        dict.dict().Set(key, Eval(*expr.children[i + 1], scope));
      }
      return dict;
    }
    case Expr::Kind::kAttr: {
      Value object = Eval(*expr.children[0], scope);
      if (object.is_dict()) {
        const Value* item = object.dict().Find(expr.name);
        if (item != nullptr) return *item;
      }
      if (object.is_undefined()) {
        throw RenderError(
            absl::StrCat("'", object.TypeName(), "' has no attribute '", expr.name, "'"));
      }
      // As Jinja: what none lacks is undefined (printed empty, false under
      // "is defined"), and only using it further is an error.
      if (object.is_none()) return Value();
      return GetMethod(*this, object, expr.name);
    }
    case Expr::Kind::kIndex: {
      Value object = Eval(*expr.children[0], scope);
      Value key = Eval(*expr.children[1], scope);
      if (object.is_dict()) {
        // As Jinja's getitem: an absent or unhashable key is undefined.
        if (key.is_list() && !key.is_tuple()) return Value();
        if (key.is_dict() || key.kind() == Value::Kind::kFunction) return Value();
        const Value* item = object.dict().Find(key);
        return item == nullptr ? Value() : *item;
      }
      if (object.is_list() || object.is_string()) {
        if (key.kind() != Value::Kind::kInt) {
          if (key.is_string() && object.is_string()) return GetMethod(*this, object, key.string());
          throw RenderError(absl::StrCat("a ", object.TypeName(), " index must be an integer"));
        }
        if (object.is_list()) {
          int64_t size = static_cast<int64_t>(object.list().size());
          int64_t i = key.integer() < 0 ? key.integer() + size : key.integer();
          return i < 0 || i >= size ? Value() : object.list()[i];
        }
        std::u32string chars = DecodeUtf8(object.string());
        int64_t size = static_cast<int64_t>(chars.size());
        int64_t i = key.integer() < 0 ? key.integer() + size : key.integer();
        return i < 0 || i >= size ? Value() : Value::String(EncodeUtf8(chars.substr(i, 1)));
      }
      if (object.is_undefined()) {
        throw RenderError(absl::StrCat("cannot index a ", object.TypeName()));
      }
      return Value();
    }
    case Expr::Kind::kSlice: {
      Value object = Eval(*expr.children[0], scope);
      Value parts[3];
      for (int i = 0; i < 3; ++i) {
        if (expr.children[i + 1]) parts[i] = Eval(*expr.children[i + 1], scope);
      }
      if (object.is_list()) {
        List out;
        for (int64_t i : SliceIndices(object.list().size(), parts[0], parts[1], parts[2])) {
          out.push_back(object.list()[i]);
        }
        return Value::MakeList(std::move(out));
      }
      if (object.is_string()) {
        std::u32string chars = DecodeUtf8(object.string());
        std::u32string out;
        for (int64_t i : SliceIndices(chars.size(), parts[0], parts[1], parts[2])) out += chars[i];
        return Value::String(EncodeUtf8(out));
      }
      throw RenderError(absl::StrCat("cannot slice a ", object.TypeName()));
    }
    case Expr::Kind::kCall:
      return EvalCall(expr, scope);
    case Expr::Kind::kFilter:
      return EvalFilter(expr, Eval(*expr.children[0], scope), scope);
    case Expr::Kind::kTest: {
      Value operand = Eval(*expr.children[0], scope);
      CallArgs args = EvalArgs(expr, 1, scope);
      return Value::Bool(ApplyTest(*this, expr.name, operand, args) != expr.negated);
    }
    case Expr::Kind::kUnary: {
      Value operand = Eval(*expr.children[0], scope);
      if (expr.name == "not") return Value::Bool(!operand.Truthy());
      if (operand.kind() == Value::Kind::kInt) {
        if (expr.name == "+") return operand;
        if (operand.integer() == INT64_MIN) throw RenderError("an integer overflowed");
        return Value::Int(-operand.integer());
      }
      if (operand.kind() == Value::Kind::kFloat) {
        return Value::Float(expr.name == "-" ? -operand.number() : operand.number());
      }
      throw RenderError(
          absl::StrCat("bad operand for unary ", expr.name, ": ", operand.TypeName()));
    }
    case Expr::Kind::kBinary:
      return EvalBinary(expr, scope);
    case Expr::Kind::kTernary: {
      if (Eval(*expr.children[0], scope).Truthy()) return Eval(*expr.children[1], scope);
      return expr.children[2] ? Eval(*expr.children[2], scope) : Value();
    }
  }
  return Value();
}

Value Interpreter::EvalCall(const Expr& expr, const std::shared_ptr<Scope>& scope) {
  Value callee = Eval(*expr.children[0], scope);
  if (callee.kind() != Value::Kind::kFunction) {
    std::string what = expr.children[0]->kind == Expr::Kind::kName
                           ? absl::StrCat("'", expr.children[0]->name, "'")
                           : (expr.children[0]->kind == Expr::Kind::kAttr
                                  ? absl::StrCat("'", expr.children[0]->name, "'")
                                  : std::string("the value"));
    throw RenderError(
        absl::StrCat(what, " is ", callee.is_undefined() ? "undefined" : "not callable",
                     callee.is_undefined() ? "" : absl::StrCat(" (a ", callee.TypeName(), ")")));
  }
  CallArgs args = EvalArgs(expr, 1, scope);
  return callee.function()(args);
}

namespace {

Value Arithmetic(const std::string& op, const Value& a, const Value& b) {
  if (a.kind() == Value::Kind::kInt && b.kind() == Value::Kind::kInt && op != "/") {
    int64_t x = a.integer(), y = b.integer(), r = 0;
    bool overflow = false;
    if (op == "+") {
      overflow = __builtin_add_overflow(x, y, &r);
    } else if (op == "-") {
      overflow = __builtin_sub_overflow(x, y, &r);
    } else if (op == "*") {
      overflow = __builtin_mul_overflow(x, y, &r);
    } else if (op == "//" || op == "%") {
      if (y == 0) throw RenderError("integer division or modulo by zero");
      if (x == INT64_MIN && y == -1) throw RenderError("an integer overflowed");
      int64_t q = x / y, m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) {
        --q;
        m += y;
      }
      r = op == "//" ? q : m;
    } else if (op == "**") {
      if (y < 0) return Value::Float(std::pow(static_cast<double>(x), static_cast<double>(y)));
      // 0, 1 and -1 never overflow, whatever the exponent: answered here,
      // so that the loop below runs at most 64 times.
      if (x == 0 || x == 1) return Value::Int(y == 0 ? 1 : x);
      if (x == -1) return Value::Int(y % 2 == 0 ? 1 : -1);
      r = 1;
      for (int64_t i = 0; i < y && !overflow; ++i) overflow = __builtin_mul_overflow(r, x, &r);
    }
    if (overflow) throw RenderError("an integer overflowed");
    return Value::Int(r);
  }
  double x = a.number(), y = b.number();
  if (op == "+") return Value::Float(x + y);
  if (op == "-") return Value::Float(x - y);
  if (op == "*") return Value::Float(x * y);
  if (op == "**") return Value::Float(std::pow(x, y));
  if (y == 0) throw RenderError("division by zero");
  if (op == "/") return Value::Float(x / y);
  if (op == "//") return Value::Float(std::floor(x / y));
  double m = std::fmod(x, y);
  if (m != 0 && ((m < 0) != (y < 0))) m += y;
  return Value::Float(m);
}

}  // namespace

Value Interpreter::EvalBinary(const Expr& expr, const std::shared_ptr<Scope>& scope) {
  const std::string& op = expr.name;
  Value a = Eval(*expr.children[0], scope);
  if (op == "and") return a.Truthy() ? Eval(*expr.children[1], scope) : a;
  if (op == "or") return a.Truthy() ? a : Eval(*expr.children[1], scope);
  Value b = Eval(*expr.children[1], scope);
  if (op == "==") return Value::Bool(a.Equals(b));
  if (op == "!=") return Value::Bool(!a.Equals(b));
  if (op == "<") return Value::Bool(Less(a, b));
  if (op == ">") return Value::Bool(Less(b, a));
  if (op == "<=") return Value::Bool(!Less(b, a));
  if (op == ">=") return Value::Bool(!Less(a, b));
  if (op == "in") return Value::Bool(Contains(b, a));
  if (op == "not in") return Value::Bool(!Contains(b, a));
  if (op == "~") {
    std::string left = a.Str(), right = b.Str();
    CheckSize(left.size() + right.size());
    return Value::String(left + right);
  }
  auto numeric = [](const Value& v) { return v.is_number() || v.kind() == Value::Kind::kBool; };
  auto as_number = [](const Value& v) {
    return v.kind() == Value::Kind::kBool ? Value::Int(v.boolean()) : v;
  };
  if (numeric(a) && numeric(b)) return Arithmetic(op, as_number(a), as_number(b));
  if (op == "+" && a.is_string() && b.is_string()) {
    // Markup + str escapes the str first, either side (markupsafe's
    // __add__ and __radd__).
    if (a.is_safe() || b.is_safe()) {
      const std::string left = Escape(a).string(), right = Escape(b).string();
      CheckSize(left.size() + right.size());
      return Value::SafeString(left + right);
    }
    CheckSize(a.string().size() + b.string().size());
    return Value::String(a.string() + b.string());
  }
  if (op == "%" && a.is_string()) return PercentFormat(*this, a, b);
  if (op == "+" && a.is_list() && b.is_list()) {
    List items = a.list();
    for (const Value& item : b.list()) {
      CountIteration();
      items.push_back(item);
    }
    return Value::MakeList(std::move(items));
  }
  if (op == "*" && (a.is_list() || b.is_list()) &&
      (a.kind() == Value::Kind::kInt || b.kind() == Value::Kind::kInt)) {
    const List& items = a.is_list() ? a.list() : b.list();
    const int64_t n = a.is_list() ? b.integer() : a.integer();
    List out;
    for (int64_t i = 0; i < n && !items.empty(); ++i) {
      for (const Value& item : items) {
        CountIteration();
        out.push_back(item);
      }
    }
    return Value::MakeList(std::move(out));
  }
  if (op == "*" && (a.is_string() || b.is_string()) &&
      (a.kind() == Value::Kind::kInt || b.kind() == Value::Kind::kInt)) {
    const std::string& s = a.is_string() ? a.string() : b.string();
    int64_t n = a.is_string() ? b.integer() : a.integer();
    if (n <= 0) return Value::String("");
    CheckSize(static_cast<size_t>(std::min<int64_t>(n, limits_.max_output_bytes + 1)) *
              std::max<size_t>(s.size(), 1));
    std::string out;
    for (int64_t i = 0; i < n; ++i) out += s;
    return Value::String(std::move(out));
  }
  throw RenderError(absl::StrCat("unsupported operand types for ", op, ": ", a.TypeName(), " and ",
                                 b.TypeName()));
}

}  // namespace linserve::jinja
