#include "engine/jinja/jinja_parser.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/jinja/jinja_builtin_helpers.h"

namespace linserve::jinja {
namespace {

// A syntax error, thrown from deep inside the recursive descent and turned
// into a status by Parse.
struct SyntaxError {
  int line;
  std::string what;
};

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : tokens_(tokens) {}

  Body ParseTemplate() {
    std::string end;
    Body body = ParseBody({}, &end);
    return body;
  }

 private:
  const Token& Peek(size_t ahead = 0) const {
    size_t i = std::min(pos_ + ahead, tokens_.size() - 1);
    return tokens_[i];
  }
  const Token& Next() {
    const Token& t = Peek();
    if (pos_ < tokens_.size() - 1) ++pos_;
    return t;
  }
  [[noreturn]] void Fail(const std::string& what) const { throw SyntaxError{Peek().line, what}; }

  bool IsPunct(std::string_view p, size_t ahead = 0) const {
    return Peek(ahead).kind == Token::Kind::kPunct && Peek(ahead).text == p;
  }
  bool IsName(std::string_view n, size_t ahead = 0) const {
    return Peek(ahead).kind == Token::Kind::kName && Peek(ahead).text == n;
  }
  void ExpectPunct(std::string_view p) {
    if (!IsPunct(p))
      Fail(absl::StrCat("expected '", std::string(p), "', found '", Describe(Peek()), "'"));
    Next();
  }
  void ExpectName(std::string_view n) {
    if (!IsName(n))
      Fail(absl::StrCat("expected '", std::string(n), "', found '", Describe(Peek()), "'"));
    Next();
  }
  std::string TakeName() {
    if (Peek().kind != Token::Kind::kName)
      Fail(absl::StrCat("expected a name, found '", Describe(Peek()), "'"));
    return Next().text;
  }
  void ExpectClose() {
    if (Peek().kind != Token::Kind::kCloseStatement) {
      Fail(absl::StrCat("expected '%}', found '", Describe(Peek()), "'"));
    }
    Next();
  }
  static std::string Describe(const Token& t) {
    if (t.kind == Token::Kind::kEnd) return "end of template";
    return t.text;
  }

  struct Depth {
    explicit Depth(Parser* p) : parser(p) {
      if (++parser->depth_ > kMaxNesting) {
        parser->Fail(absl::StrCat("nested deeper than ", kMaxNesting));
      }
    }
    ~Depth() { --parser->depth_; }
    Parser* parser;
  };

  // Statements up to one of end_tags (the tag's name is consumed, the rest
  // of its `{% %}` is not) or, with no end tags, to the end.
  Body ParseBody(const std::vector<std::string>& end_tags, std::string* end) {
    Depth depth(this);
    Body body;
    while (true) {
      const Token& t = Peek();
      if (t.kind == Token::Kind::kEnd) {
        if (!end_tags.empty()) Fail(absl::StrCat("missing '{% ", end_tags.back(), " %}'"));
        return body;
      }
      if (t.kind == Token::Kind::kText) {
        auto stmt = NewStmt(Stmt::Kind::kText);
        stmt->text = Next().text;
        body.push_back(std::move(stmt));
        continue;
      }
      if (t.kind == Token::Kind::kOpenExpression) {
        Next();
        auto stmt = NewStmt(Stmt::Kind::kOutput);
        stmt->expr = ParseExpression();
        if (Peek().kind != Token::Kind::kCloseExpression) {
          Fail(absl::StrCat("expected '}}', found '", Describe(Peek()), "'"));
        }
        Next();
        body.push_back(std::move(stmt));
        continue;
      }
      if (t.kind != Token::Kind::kOpenStatement) Fail("unexpected '" + Describe(t) + "'");
      Next();
      std::string tag = TakeName();
      for (const std::string& e : end_tags) {
        if (tag == e) {
          *end = tag;
          return body;
        }
      }
      body.push_back(ParseStatement(tag));
    }
  }

  std::unique_ptr<Stmt> NewStmt(Stmt::Kind kind) {
    auto stmt = std::make_unique<Stmt>();
    stmt->kind = kind;
    stmt->line = Peek().line;
    return stmt;
  }

  std::unique_ptr<Stmt> ParseStatement(const std::string& tag) {
    if (tag == "if") return ParseIf();
    if (tag == "for") return ParseFor();
    if (tag == "set") return ParseSet();
    if (tag == "macro") return ParseMacro();
    if (tag == "call") return ParseCall();
    if (tag == "filter") return ParseFilterBlock();
    if (tag == "generation") return ParseGenerationBlock();
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) Fail(absl::StrCat("'{% ", tag, " %}' outside a loop"));
      auto stmt = NewStmt(tag == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue);
      ExpectClose();
      return stmt;
    }
    static const absl::flat_hash_set<std::string> kEnds = {
        "elif",     "else",    "endif",     "endfor", "endset",
        "endmacro", "endcall", "endfilter", "endraw", "endgeneration"};
    if (kEnds.contains(tag)) Fail(absl::StrCat("'{% ", tag, " %}' without its opening tag"));
    Fail(absl::StrCat("'{% ", tag, " %}' is not supported"));
  }

  std::unique_ptr<Stmt> ParseIf() {
    auto stmt = NewStmt(Stmt::Kind::kIf);
    ExprPtr condition = ParseExpression();
    ExpectClose();
    while (true) {
      std::string end;
      Body body = ParseBody({"elif", "else", "endif"}, &end);
      stmt->branches.emplace_back(std::move(condition), std::move(body));
      if (end == "elif") {
        condition = ParseExpression();
        ExpectClose();
        continue;
      }
      if (end == "else") {
        ExpectClose();
        stmt->else_body = ParseBody({"endif"}, &end);
      }
      ExpectClose();
      return stmt;
    }
  }

  std::unique_ptr<Stmt> ParseFor() {
    auto stmt = NewStmt(Stmt::Kind::kFor);
    stmt->targets.push_back(TakeName());
    while (IsPunct(",")) {
      Next();
      stmt->targets.push_back(TakeName());
    }
    ExpectName("in");
    stmt->expr = ParseOr();  // not the ternary: `if` here filters the loop
    if (IsName("if")) {
      Next();
      stmt->condition = ParseExpression();
    }
    if (IsName("recursive")) Fail("'{% for ... recursive %}' is not supported");
    ExpectClose();
    ++loop_depth_;
    std::string end;
    stmt->body = ParseBody({"else", "endfor"}, &end);
    --loop_depth_;
    if (end == "else") {
      ExpectClose();
      stmt->else_body = ParseBody({"endfor"}, &end);
    }
    ExpectClose();
    return stmt;
  }

  std::unique_ptr<Stmt> ParseSet() {
    auto stmt = NewStmt(Stmt::Kind::kSet);
    ExprPtr target = ParsePrimaryWithPostfix(/*calls=*/false);
    if (IsPunct(",")) {
      auto tuple = NewExpr(Expr::Kind::kTuple);
      tuple->children.push_back(std::move(target));
      while (IsPunct(",")) {
        Next();
        tuple->children.push_back(ParsePrimaryWithPostfix(false));
      }
      target = std::move(tuple);
    }
    CheckTarget(*target);
    stmt->target = std::move(target);
    if (IsPunct("=")) {
      Next();
      stmt->expr = ParseTupleOrExpression();
      ExpectClose();
      return stmt;
    }
    stmt->kind = Stmt::Kind::kSetBlock;
    if (stmt->target->kind != Expr::Kind::kName) Fail("a '{% set %}' block assigns one name");
    while (IsPunct("|")) {
      Next();
      stmt->filters.push_back(ParseFilterCall(nullptr));
    }
    ExpectClose();
    std::string end;
    stmt->body = ParseBody({"endset"}, &end);
    ExpectClose();
    return stmt;
  }

  void CheckTarget(const Expr& target) {
    if (target.kind == Expr::Kind::kName) return;
    if (target.kind == Expr::Kind::kAttr && target.children[0]->kind == Expr::Kind::kName) return;
    if (target.kind == Expr::Kind::kTuple) {
      for (const auto& child : target.children) {
        if (child->kind != Expr::Kind::kName) Fail("'{% set %}' unpacks into names only");
      }
      return;
    }
    Fail("'{% set %}' assigns a name, a name's attribute or names");
  }

  std::vector<Param> ParseParams() {
    std::vector<Param> params;
    ExpectPunct("(");
    while (!IsPunct(")")) {
      Param param;
      param.name = TakeName();
      if (IsPunct("=")) {
        Next();
        param.default_value = ParseExpression();
      }
      params.push_back(std::move(param));
      if (!IsPunct(",")) break;
      Next();
    }
    ExpectPunct(")");
    return params;
  }

  std::unique_ptr<Stmt> ParseMacro() {
    auto stmt = NewStmt(Stmt::Kind::kMacro);
    stmt->name = TakeName();
    stmt->params = ParseParams();
    ExpectClose();
    std::string end;
    int saved_loops = loop_depth_;
    loop_depth_ = 0;
    macros_.push_back(stmt.get());
    stmt->body = ParseBody({"endmacro"}, &end);
    macros_.pop_back();
    loop_depth_ = saved_loops;
    if (Peek().kind == Token::Kind::kName) Next();  // {% endmacro name %}
    ExpectClose();
    return stmt;
  }

  std::unique_ptr<Stmt> ParseCall() {
    auto stmt = NewStmt(Stmt::Kind::kCallBlock);
    if (IsPunct("(")) stmt->params = ParseParams();
    stmt->expr = ParseExpression();
    if (stmt->expr->kind != Expr::Kind::kCall) Fail("'{% call %}' needs a call");
    ExpectClose();
    std::string end;
    stmt->body = ParseBody({"endcall"}, &end);
    ExpectClose();
    return stmt;
  }

  // transformers' {% generation %}: marks the assistant's text for training;
  // rendering gives its body, in a scope of its own as a call block's.
  std::unique_ptr<Stmt> ParseGenerationBlock() {
    auto stmt = NewStmt(Stmt::Kind::kFilterBlock);
    ExpectClose();
    std::string end;
    stmt->body = ParseBody({"endgeneration"}, &end);
    ExpectClose();
    return stmt;
  }

  std::unique_ptr<Stmt> ParseFilterBlock() {
    auto stmt = NewStmt(Stmt::Kind::kFilterBlock);
    stmt->filters.push_back(ParseFilterCall(nullptr));
    while (IsPunct("|")) {
      Next();
      stmt->filters.push_back(ParseFilterCall(nullptr));
    }
    ExpectClose();
    std::string end;
    stmt->body = ParseBody({"endfilter"}, &end);
    ExpectClose();
    return stmt;
  }

  // --- expressions ---

  ExprPtr NewExpr(Expr::Kind kind) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = Peek().line;
    return e;
  }
  ExprPtr Binary(std::string op, ExprPtr a, ExprPtr b) {
    auto e = NewExpr(Expr::Kind::kBinary);
    e->name = std::move(op);
    e->children.push_back(std::move(a));
    e->children.push_back(std::move(b));
    return e;
  }

  ExprPtr ParseTupleOrExpression() {
    ExprPtr first = ParseExpression();
    if (!IsPunct(",")) return first;
    auto tuple = NewExpr(Expr::Kind::kTuple);
    tuple->children.push_back(std::move(first));
    while (IsPunct(",")) {
      Next();
      if (IsPunct(")")) break;  // (1,) and (1, 2,), as Python writes them
      tuple->children.push_back(ParseExpression());
    }
    return tuple;
  }

  ExprPtr ParseExpression() {
    Depth depth(this);
    ExprPtr value = ParseOr();
    if (!IsName("if")) return value;
    Next();
    auto e = NewExpr(Expr::Kind::kTernary);
    ExprPtr condition = ParseOr();
    ExprPtr otherwise;
    if (IsName("else")) {
      Next();
      otherwise = ParseExpression();
    }
    e->children.push_back(std::move(condition));
    e->children.push_back(std::move(value));
    e->children.push_back(std::move(otherwise));
    return e;
  }

  ExprPtr ParseOr() {
    ExprPtr left = ParseAnd();
    while (IsName("or")) {
      Next();
      left = Binary("or", std::move(left), ParseAnd());
    }
    return left;
  }
  ExprPtr ParseAnd() {
    ExprPtr left = ParseNot();
    while (IsName("and")) {
      Next();
      left = Binary("and", std::move(left), ParseNot());
    }
    return left;
  }
  ExprPtr ParseNot() {
    if (IsName("not")) {
      Depth depth(this);
      auto e = NewExpr(Expr::Kind::kUnary);
      Next();
      e->name = "not";
      e->children.push_back(ParseNot());
      return e;
    }
    return ParseCompare();
  }
  ExprPtr ParseCompare() {
    ExprPtr left = ParseMath1();
    while (true) {
      static constexpr std::string_view kOps[] = {"==", "!=", "<", ">", "<=", ">="};
      std::string op;
      for (std::string_view o : kOps) {
        if (IsPunct(o)) op = std::string(o);
      }
      if (op.empty() && IsName("in")) op = "in";
      if (op.empty() && IsName("not") && IsName("in", 1)) {
        Next();
        op = "not in";
      }
      if (op.empty()) return left;
      Next();
      left = Binary(op, std::move(left), ParseMath1());
    }
  }
  ExprPtr ParseMath1() {
    ExprPtr left = ParseConcat();
    while (IsPunct("+") || IsPunct("-")) {
      std::string op = Next().text;
      left = Binary(op, std::move(left), ParseConcat());
    }
    return left;
  }
  ExprPtr ParseConcat() {
    ExprPtr left = ParseMath2();
    while (IsPunct("~")) {
      Next();
      left = Binary("~", std::move(left), ParseMath2());
    }
    return left;
  }
  ExprPtr ParseMath2() {
    ExprPtr left = ParsePow();
    while (IsPunct("*") || IsPunct("/") || IsPunct("//") || IsPunct("%")) {
      std::string op = Next().text;
      left = Binary(op, std::move(left), ParsePow());
    }
    return left;
  }
  ExprPtr ParsePow() {
    ExprPtr left = ParseUnary(true);
    while (IsPunct("**")) {
      Next();
      left = Binary("**", std::move(left), ParseUnary(true));
    }
    return left;
  }
  ExprPtr ParseUnary(bool with_filter) {
    Depth depth(this);
    ExprPtr node;
    if (IsPunct("-") || IsPunct("+")) {
      auto e = NewExpr(Expr::Kind::kUnary);
      e->name = Next().text;
      e->children.push_back(ParseUnary(false));
      node = std::move(e);
    } else {
      node = ParsePrimaryWithPostfix(true);
    }
    if (with_filter) node = ParseFiltersAndTests(std::move(node));
    return node;
  }

  ExprPtr ParseFiltersAndTests(ExprPtr node) {
    while (true) {
      if (IsPunct("|")) {
        Next();
        node = ParseFilterCall(std::move(node));
      } else if (IsName("is")) {
        Next();
        auto e = NewExpr(Expr::Kind::kTest);
        if (IsName("not")) {
          Next();
          e->negated = true;
        }
        e->name = TakeName();
        if (!IsKnownTest(e->name)) Fail(absl::StrCat("the test '", e->name, "' is not supported"));
        e->children.push_back(std::move(node));
        if (IsPunct("(")) {
          ParseArgs(*e);
        } else {
          const Token& t = Peek();
          bool argument = (t.kind == Token::Kind::kString || t.kind == Token::Kind::kInteger ||
                           t.kind == Token::Kind::kFloat || IsPunct("[") || IsPunct("{") ||
                           (t.kind == Token::Kind::kName && t.text != "else" && t.text != "or" &&
                            t.text != "and" && t.text != "if" && t.text != "is" &&
                            t.text != "not" && t.text != "in"));
          if (argument) e->children.push_back(ParsePrimaryWithPostfix(true));
        }
        node = std::move(e);
      } else {
        return node;
      }
    }
  }

  // `name` or `name(args)` after a `|`, applied to operand (nullptr in a
  // filter block, where the body's text is the operand).
  ExprPtr ParseFilterCall(ExprPtr operand) {
    auto e = NewExpr(Expr::Kind::kFilter);
    e->name = TakeName();
    if (!IsKnownFilter(e->name)) Fail(absl::StrCat("the filter '", e->name, "' is not supported"));
    e->children.push_back(std::move(operand));
    if (IsPunct("(")) ParseArgs(*e);
    return e;
  }

  void ParseArgs(Expr& e) {
    ExpectPunct("(");
    while (!IsPunct(")")) {
      if (Peek().kind == Token::Kind::kName && IsPunct("=", 1)) {
        std::string name = Next().text;
        Next();
        e.keyword.emplace_back(std::move(name), ParseExpression());
      } else {
        if (!e.keyword.empty()) Fail("a positional argument after a keyword argument");
        e.children.push_back(ParseExpression());
      }
      if (!IsPunct(",")) break;
      Next();
    }
    ExpectPunct(")");
  }

  // Python's integers have no bound; ours are 64-bit, so a longer literal is
  // refused at load rather than wrapped.
  // Decimal, or 0x/0o/0b, underscores between digits: Python's literals.
  int64_t IntegerLiteral() {
    int64_t value = 0;
    const PythonNumber read = ParsePythonInt(Peek().text, 0, &value);
    if (read == PythonNumber::kTooLarge) Fail("an integer out of range");
    if (read != PythonNumber::kValid) Fail(absl::StrCat("a malformed integer '", Peek().text, "'"));
    Next();
    return value;
  }

  // As in Python, a float literal beyond the range is infinity, below it zero.
  double FloatLiteral() {
    double value = 0;
    if (!ParsePythonFloat(Peek().text, &value)) Fail("a malformed float");
    Next();
    return value;
  }

  ExprPtr ParsePrimaryWithPostfix(bool calls) {
    ExprPtr node = ParsePrimary();
    while (true) {
      if (IsPunct(".")) {
        Next();
        auto e = NewExpr(Expr::Kind::kAttr);
        if (Peek().kind == Token::Kind::kInteger) {
          e->kind = Expr::Kind::kIndex;
          e->children.push_back(std::move(node));
          auto index = NewExpr(Expr::Kind::kLiteral);
          index->literal = Value::Int(IntegerLiteral());
          e->children.push_back(std::move(index));
        } else {
          e->name = TakeName();
          e->children.push_back(std::move(node));
        }
        node = std::move(e);
      } else if (IsPunct("[")) {
        Next();
        node = ParseSubscript(std::move(node));
      } else if (calls && IsPunct("(")) {
        auto e = NewExpr(Expr::Kind::kCall);
        e->children.push_back(std::move(node));
        ParseArgs(*e);
        node = std::move(e);
      } else {
        return node;
      }
    }
  }

  ExprPtr ParseSubscript(ExprPtr object) {
    Depth depth(this);
    ExprPtr parts[3];
    int part = 0;
    bool slice = false;
    while (true) {
      if (IsPunct(":")) {
        Next();
        slice = true;
        if (++part > 2) Fail("a slice has at most three parts");
        continue;
      }
      if (IsPunct("]")) break;
      if (parts[part]) Fail("expected ':' or ']'");
      parts[part] = ParseExpression();
    }
    Next();
    auto e = NewExpr(slice ? Expr::Kind::kSlice : Expr::Kind::kIndex);
    e->children.push_back(std::move(object));
    if (!slice) {
      if (!parts[0]) Fail("an empty subscript");
      e->children.push_back(std::move(parts[0]));
      return e;
    }
    for (auto& p : parts) e->children.push_back(std::move(p));
    return e;
  }

  ExprPtr ParsePrimary() {
    Depth depth(this);
    const Token& t = Peek();
    switch (t.kind) {
      case Token::Kind::kString: {
        auto e = NewExpr(Expr::Kind::kLiteral);
        std::string s;
        while (Peek().kind == Token::Kind::kString) s += Next().text;  // 'a' 'b' is 'ab'
        e->literal = Value::String(std::move(s));
        return e;
      }
      case Token::Kind::kInteger: {
        auto e = NewExpr(Expr::Kind::kLiteral);
        e->literal = Value::Int(IntegerLiteral());
        return e;
      }
      case Token::Kind::kFloat: {
        auto e = NewExpr(Expr::Kind::kLiteral);
        e->literal = Value::Float(FloatLiteral());
        return e;
      }
      case Token::Kind::kName: {
        auto e = NewExpr(Expr::Kind::kLiteral);
        const std::string& n = t.text;
        if (n == "true" || n == "True") {
          e->literal = Value::Bool(true);
        } else if (n == "false" || n == "False") {
          e->literal = Value::Bool(false);
        } else if (n == "none" || n == "None") {
          e->literal = Value::None();
        } else {
          e->kind = Expr::Kind::kName;
          e->name = n;
          // As Jinja's: a name in a nested macro counts for the outer ones too.
          for (Stmt* macro : macros_) {
            macro->takes_varargs |= n == "varargs";
            macro->takes_kwargs |= n == "kwargs";
          }
        }
        Next();
        return e;
      }
      case Token::Kind::kPunct:
        if (t.text == "(") {
          Next();
          if (IsPunct(")")) {
            Next();
            return NewExpr(Expr::Kind::kTuple);
          }
          ExprPtr inner = ParseTupleOrExpression();
          ExpectPunct(")");
          return inner;
        }
        if (t.text == "[") {
          Next();
          auto e = NewExpr(Expr::Kind::kList);
          while (!IsPunct("]")) {
            e->children.push_back(ParseExpression());
            if (!IsPunct(",")) break;
            Next();
          }
          ExpectPunct("]");
          return e;
        }
        if (t.text == "{") {
          Next();
          auto e = NewExpr(Expr::Kind::kDict);
          while (!IsPunct("}")) {
            e->children.push_back(ParseExpression());
            ExpectPunct(":");
            e->children.push_back(ParseExpression());
            if (!IsPunct(",")) break;
            Next();
          }
          ExpectPunct("}");
          return e;
        }
        break;
      default:
        break;
    }
    Fail(absl::StrCat("unexpected '", Describe(t), "'"));
  }

  const std::vector<Token>& tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
  std::vector<Stmt*> macros_;  // the macros whose bodies are being parsed
};

}  // namespace

bool IsKnownFilter(const std::string& name) {
  static const absl::flat_hash_set<std::string> kFilters = {
      "abs",    "capitalize", "count",      "d",        "default", "dictsort", "e",
      "escape", "first",      "float",      "format",   "indent",  "int",      "items",
      "join",   "last",       "length",     "list",     "lower",   "map",      "max",
      "min",    "reject",     "rejectattr", "replace",  "reverse", "round",    "safe",
      "select", "selectattr", "sort",       "string",   "sum",     "title",    "tojson",
      "trim",   "unique",     "upper",      "wordcount"};
  return kFilters.contains(name);
}

bool IsKnownTest(const std::string& name) {
  // Jinja's names; the operator aliases ("==", "<", ...) serve select and
  // selectattr, as in selectattr('role', '==', 'user').
  static const absl::flat_hash_set<std::string> kTests = {
      "boolean", "callable", "defined",   "divisibleby", "eq",          "equalto",
      "even",    "false",    "float",     "ge",          "gt",          "in",
      "integer", "iterable", "le",        "lower",       "lt",          "mapping",
      "ne",      "none",     "number",    "odd",         "sameas",      "sequence",
      "string",  "true",     "undefined", "upper",       "==",          "!=",
      "<",       "<=",       ">",         ">=",          "greaterthan", "lessthan"};
  return kTests.contains(name);
}

absl::StatusOr<Body> Parse(const std::vector<Token>& tokens) {
  try {
    return Parser(tokens).ParseTemplate();
  } catch (const SyntaxError& error) {
    return absl::InvalidArgumentError(absl::StrCat("template line ", error.line, ": ", error.what));
  }
}

}  // namespace linserve::jinja
