#ifndef LINSERVE_ENGINE_JINJA_JINJA_INTERPRETER_H_
#define LINSERVE_ENGINE_JINJA_JINJA_INTERPRETER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "engine/jinja/jinja_ast.h"
#include "engine/jinja/jinja_template.h"
#include "engine/jinja/jinja_value.h"

namespace linserve::jinja {

// A limit of RenderLimits crossed.
class LimitError : public RenderError {
 public:
  using RenderError::RenderError;
};

// Variables of one level: the template's globals, a loop body, a macro call.
// A `set` writes to the innermost scope, so a loop's assignments stay in the
// loop, as in Jinja (namespaces carry values out).
class Scope {
 public:
  explicit Scope(std::shared_ptr<Scope> parent) : parent_(std::move(parent)) {}
  const Value* Find(const std::string& name) const;
  void Set(const std::string& name, Value value) { vars_[name] = std::move(value); }

 private:
  std::shared_ptr<Scope> parent_;
  absl::flat_hash_map<std::string, Value> vars_;
};

// Walks the statements and evaluates the expressions of one rendering,
// counting output bytes, loop iterations and call depth against the limits.
// Errors are thrown (RenderError, LimitError) and caught by Template::Render.
class Interpreter {
 public:
  explicit Interpreter(const RenderLimits& limits) : limits_(limits) {}

  // Renders body into a string.
  std::string Render(const Body& body, const std::shared_ptr<Scope>& scope);

  Value Eval(const Expr& expr, const std::shared_ptr<Scope>& scope);

  // One more loop iteration (or list element walked by a filter).
  void CountIteration();
  // A value about to be made of `bytes` bytes: refused beyond the output limit.
  void CheckSize(size_t bytes) const;
  const RenderLimits& limits() const { return limits_; }

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  Flow Exec(const Body& body, const std::shared_ptr<Scope>& scope);
  Flow ExecFor(const Stmt& stmt, const std::shared_ptr<Scope>& scope);
  void ExecSet(const Stmt& stmt, const std::shared_ptr<Scope>& scope);
  void DefineMacro(const Stmt& stmt, const std::shared_ptr<Scope>& scope);
  Value CallMacro(const Stmt& macro, const std::shared_ptr<Scope>& defined_in, CallArgs& args);
  void Emit(const std::string& text);

  Value EvalBinary(const Expr& expr, const std::shared_ptr<Scope>& scope);
  Value EvalCall(const Expr& expr, const std::shared_ptr<Scope>& scope);
  Value EvalFilter(const Expr& expr, Value operand, const std::shared_ptr<Scope>& scope);
  CallArgs EvalArgs(const Expr& expr, size_t first, const std::shared_ptr<Scope>& scope);

  const RenderLimits& limits_;
  std::vector<std::string> buffers_;  // the text of the body being rendered, innermost last
  int64_t output_bytes_ = 0;
  int64_t iterations_ = 0;
  int call_depth_ = 0;
  int line_ = 0;  // the line of the statement being run, for errors
  friend class Template;
};

// The builtins (jinja_builtins.cc): filters, tests, methods, globals.
Value ApplyFilter(Interpreter& interpreter, const std::string& name, const Value& operand,
                  CallArgs& args);
bool ApplyTest(Interpreter& interpreter, const std::string& name, const Value& operand,
               CallArgs& args);
// A method of a string, dict or list bound to it (`text.split`), or undefined.
Value GetMethod(Interpreter& interpreter, const Value& object, const std::string& name);
// raise_exception, namespace, range, dict.
void AddGlobals(Interpreter& interpreter, Scope& scope);
// `a in b` as Python computes it.
bool Contains(const Value& container, const Value& item);
// Python's <, refusing kinds that do not compare.
bool Less(const Value& a, const Value& b);

}  // namespace linserve::jinja

#endif  // LINSERVE_ENGINE_JINJA_JINJA_INTERPRETER_H_
