#ifndef LINSERVE_ENGINE_JINJA_JINJA_AST_H_
#define LINSERVE_ENGINE_JINJA_JINJA_AST_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/jinja/jinja_value.h"

namespace linserve::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

// One expression. Which fields a node uses depends on its kind; each says.
struct Expr {
  enum class Kind {
    kLiteral,  // literal
    kName,     // name
    kList,     // children
    kTuple,    // children
    kDict,     // children: key, value, key, value, ...
    kAttr,     // children[0].name
    kIndex,    // children[0][children[1]]
    kSlice,    // children[0][children[1]:children[2]:children[3]] (nullptr for an omitted part)
    kCall,     // children[0](children[1..], keyword)
    kFilter,   // children[0] | name(children[1..], keyword)
    kTest,     // children[0] is [not] name(children[1..])
    kUnary,    // op children[0]: not, -, +
    kBinary,   // children[0] op children[1]
    kTernary,  // children[1] if children[0] else children[2] (nullptr: undefined)
  };
  Kind kind;
  int line = 0;
  Value literal;
  std::string name;      // a name, attribute, filter, test or operator
  bool negated = false;  // a test written `is not`
  std::vector<ExprPtr> children;
  std::vector<std::pair<std::string, ExprPtr>> keyword;
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

// A macro's parameter: its name and default (nullptr: none given).
struct Param {
  std::string name;
  ExprPtr default_value;
};

struct Stmt {
  enum class Kind {
    kText,         // text
    kOutput,       // {{ expr }}
    kIf,           // branches: (condition, body) ...; else_body
    kFor,          // {% for targets in expr [if condition] %} body {% else %} else_body
    kSet,          // {% set target = expr %} (target: a name, an attribute, a tuple)
    kSetBlock,     // {% set target %} body {% endset %}, through filters when given
    kMacro,        // {% macro name(params) %} body
    kCallBlock,    // {% call [(params)] expr %} body: expr called with `caller`
    kFilterBlock,  // {% filter f %} body: the body's text through filters (none:
                   // {% generation %})
    kBreak,
    kContinue,
  };
  Kind kind;
  int line = 0;
  std::string text;
  ExprPtr expr;                      // output, for's iterable, set's value, call's call
  ExprPtr target;                    // set's target
  ExprPtr condition;                 // for's filter
  std::vector<std::string> targets;  // for's loop variables
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body;
  Body else_body;
  std::string name;  // macro name
  std::vector<Param> params;
  // A macro whose body (nested macros included) names `varargs` / `kwargs`
  // takes extra positional / keyword arguments into them; any other refuses
  // extras, as Jinja's.
  bool takes_varargs = false;
  bool takes_kwargs = false;
  std::vector<ExprPtr> filters;  // set block and filter block: kFilter nodes on an empty operand
};

}  // namespace linserve::jinja

#endif  // LINSERVE_ENGINE_JINJA_JINJA_AST_H_
