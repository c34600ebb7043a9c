// Recursive-descent parser for the Jinja subset chat templates use, with
// Jinja2's operator precedence. Anything else is an error naming line and
// column, so an unsupported template is refused instead of rendered wrong.
#include <string>
#include <vector>
#include <memory>
#include <algorithm>

#include "core/plugin_host/error.hpp"
#include "ast.hpp"
#include "builtins.hpp"

namespace areal::jinja {
namespace {

class Parser {
 public:
  explicit Parser(const std::vector<Token>& t) : t_(t) {}

  Body parse_template() {
    Body body = parse_body({});
    if (peek().kind != Token::kEof) fail(peek().pos, "unexpected '{% " + block_name() + " %}'");
    return body;
  }

 private:
  [[noreturn]] void fail(Pos p, const std::string& what) const {
    throw Error(AREAL_CODE_INVALID_ARGUMENT, "template:" + std::to_string(p.line) + ":" + std::to_string(p.col) + ": " + what);
  }
  const Token& peek(size_t k = 0) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  const Token& next() { return t_[std::min(i_++, t_.size() - 1)]; }
  bool is_op(const char* op, size_t k = 0) const { return peek(k).kind == Token::kOp && peek(k).text == op; }
  bool is_name(const char* n, size_t k = 0) const { return peek(k).kind == Token::kName && peek(k).text == n; }
  void expect_op(const char* op) {
    if (!is_op(op)) fail(peek().pos, std::string("expected '") + op + "', found '" + describe(peek()) + "'");
    ++i_;
  }
  std::string expect_name() {
    if (peek().kind != Token::kName) fail(peek().pos, "expected a name, found '" + describe(peek()) + "'");
    return next().text;
  }
  void expect_block_end() {
    if (peek().kind != Token::kBlockEnd) fail(peek().pos, "expected '%}', found '" + describe(peek()) + "'");
    ++i_;
  }
  static std::string describe(const Token& t) {
    switch (t.kind) {
      case Token::kEof: return "end of template";
      case Token::kBlockEnd: return "%}";
      case Token::kVarEnd: return "}}";
      default: return t.text;
    }
  }
  // The tag name of a block at the cursor ({% name ...).
  std::string block_name() const {
    return peek().kind == Token::kBlockBegin && peek(1).kind == Token::kName ? peek(1).text : describe(peek());
  }

  // Parses statements until a block tag named in `stops` (not consumed).
  // Counts how deep blocks and expressions nest (kMaxNesting): recursion
  // is how both are parsed, and a stack must not be what ends a template.
  struct Nest {
    Parser& p;
    explicit Nest(Parser& parser, Pos at) : p(parser) {
      if (++p.depth_ > kMaxNesting) p.fail(at, "nested more than " + std::to_string(kMaxNesting) + " deep");
    }
    ~Nest() { --p.depth_; }
  };

  Body parse_body(const std::vector<std::string>& stops) {
    const Nest nest(*this, peek().pos);
    Body body;
    while (peek().kind != Token::kEof) {
      const Token& tok = peek();
      if (tok.kind == Token::kText) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::kText;
        s->pos = tok.pos;
        s->text = tok.text;
        body.push_back(std::move(s));
        ++i_;
      } else if (tok.kind == Token::kVarBegin) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::kOutput;
        s->pos = tok.pos;
        ++i_;
        s->expr = parse_expr();
        if (peek().kind != Token::kVarEnd) fail(peek().pos, "expected '}}', found '" + describe(peek()) + "'");
        ++i_;
        body.push_back(std::move(s));
      } else if (tok.kind == Token::kBlockBegin) {
        const std::string name = block_name();
        for (const auto& stop : stops)
          if (name == stop) return body;
        body.push_back(parse_block());
      } else {
        fail(tok.pos, "unexpected '" + describe(tok) + "'");
      }
    }
    return body;
  }

  std::unique_ptr<Stmt> parse_block() {
    const Pos pos = next().pos;  // {%
    if (peek().kind != Token::kName) fail(peek().pos, "expected a tag name");
    const std::string name = next().text;
    auto s = std::make_unique<Stmt>();
    s->pos = pos;
    if (name == "if") {
      s->kind = Stmt::kIf;
      ExprPtr cond = parse_expr();
      expect_block_end();
      Body body = parse_body({"elif", "else", "endif"});
      s->branches.emplace_back(std::move(cond), std::move(body));
      while (true) {
        const std::string tag = block_name();
        if (peek().kind == Token::kEof) fail(pos, "'{% if %}' is never closed with '{% endif %}'");
        i_ += 2;
        if (tag == "elif") {
          ExprPtr c = parse_expr();
          expect_block_end();
          s->branches.emplace_back(std::move(c), parse_body({"elif", "else", "endif"}));
        } else if (tag == "else") {
          expect_block_end();
          s->branches.emplace_back(nullptr, parse_body({"endif"}));
        } else {  // endif
          expect_block_end();
          return s;
        }
      }
    }
    if (name == "for") {
      s->kind = Stmt::kFor;
      s->targets.push_back(expect_name());
      while (is_op(",")) {
        ++i_;
        s->targets.push_back(expect_name());
      }
      if (!is_name("in")) fail(peek().pos, "expected 'in' in for loop");
      ++i_;
      s->expr = parse_expr(/*allow_cond=*/false);
      if (is_name("if")) {
        ++i_;
        s->filter = parse_expr(false);
      }
      if (is_name("recursive")) fail(peek().pos, "recursive loops are not supported");
      expect_block_end();
      s->body = parse_body({"else", "endfor"});
      if (block_name() == "else") {
        i_ += 2;
        expect_block_end();
        s->else_body = parse_body({"endfor"});
      }
      if (peek().kind == Token::kEof) fail(pos, "'{% for %}' is never closed with '{% endfor %}'");
      i_ += 2;
      expect_block_end();
      return s;
    }
    if (name == "set") {
      s->targets.push_back(expect_name());
      if (is_op(".")) {
        ++i_;
        s->attr = expect_name();
      }
      while (is_op(",")) {
        ++i_;
        s->targets.push_back(expect_name());
      }
      if (peek().kind == Token::kBlockEnd && s->targets.size() == 1 && s->attr.empty()) {  // {% set x %}...{% endset %}
        ++i_;
        s->kind = Stmt::kSetBlock;
        s->body = parse_body({"endset"});
        if (peek().kind == Token::kEof) fail(pos, "'{% set %}' block is never closed with '{% endset %}'");
        i_ += 2;
        expect_block_end();
        return s;
      }
      s->kind = Stmt::kSet;
      expect_op("=");
      s->expr = parse_tuple_or_expr();
      expect_block_end();
      return s;
    }
    if (name == "macro") {
      s->kind = Stmt::kMacro;
      s->targets.push_back(expect_name());
      expect_op("(");
      while (!is_op(")")) {
        std::string param = expect_name();
        ExprPtr dflt;
        if (is_op("=")) {
          ++i_;
          dflt = parse_expr();
        }
        s->params.emplace_back(param, std::move(dflt));
        if (!is_op(")")) expect_op(",");
      }
      ++i_;
      expect_block_end();
      s->body = parse_body({"endmacro"});
      if (peek().kind == Token::kEof) fail(pos, "'{% macro %}' is never closed with '{% endmacro %}'");
      i_ += 2;
      expect_block_end();
      return s;
    }
    if (name == "break" || name == "continue") {
      s->kind = name == "break" ? Stmt::kBreak : Stmt::kContinue;
      expect_block_end();
      return s;
    }
    if (name == "generation") {  // transformers' AssistantTracker tag: renders its body
      expect_block_end();
      s->kind = Stmt::kBlockWrap;
      s->body = parse_body({"endgeneration"});
      if (peek().kind == Token::kEof) fail(pos, "'{% generation %}' is never closed");
      i_ += 2;
      expect_block_end();
      return s;
    }
    fail(pos, "unsupported tag '{% " + name + " %}'");
  }

  ExprPtr node(Expr::Kind k, Pos p) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->pos = p;
    return e;
  }

  // `a, b` without brackets (only where Jinja allows it: set, for targets).
  ExprPtr parse_tuple_or_expr() {
    ExprPtr first = parse_expr();
    if (!is_op(",")) return first;
    auto t = node(Expr::kTuple, first->pos);
    t->kids.push_back(std::move(first));
    while (is_op(",")) {
      ++i_;
      t->kids.push_back(parse_expr());
    }
    return t;
  }

  ExprPtr parse_expr(bool allow_cond = true) {
    const Nest nest(*this, peek().pos);
    ExprPtr e = parse_or();
    if (allow_cond && is_name("if")) {
      const Pos p = next().pos;
      auto c = node(Expr::kCond, p);
      ExprPtr cond = parse_or();
      ExprPtr otherwise;
      if (is_name("else")) {
        ++i_;
        otherwise = parse_expr();
      }
      c->kids.push_back(std::move(cond));
      c->kids.push_back(std::move(e));
      c->kids.push_back(std::move(otherwise));  // may be null: Undefined
      return c;
    }
    return e;
  }
  ExprPtr parse_or() {
    ExprPtr e = parse_and();
    while (is_name("or")) {
      auto o = node(Expr::kOr, next().pos);
      o->kids.push_back(std::move(e));
      o->kids.push_back(parse_and());
      e = std::move(o);
    }
    return e;
  }
  ExprPtr parse_and() {
    ExprPtr e = parse_not();
    while (is_name("and")) {
      auto a = node(Expr::kAnd, next().pos);
      a->kids.push_back(std::move(e));
      a->kids.push_back(parse_not());
      e = std::move(a);
    }
    return e;
  }
  ExprPtr parse_not() {
    const Nest nest(*this, peek().pos);  // `not not not ...`
    if (is_name("not")) {
      auto n = node(Expr::kNot, next().pos);
      n->kids.push_back(parse_not());
      return n;
    }
    return parse_compare();
  }
  ExprPtr parse_compare() {
    ExprPtr e = parse_math1();
    while (true) {
      std::string op;
      const Pos p = peek().pos;
      if (peek().kind == Token::kOp && (peek().text == "==" || peek().text == "!=" || peek().text == "<" ||
                                        peek().text == ">" || peek().text == "<=" || peek().text == ">=")) {
        op = next().text;
      } else if (is_name("in")) {
        ++i_;
        op = "in";
      } else if (is_name("not") && is_name("in", 1)) {
        i_ += 2;
        op = "not in";
      } else {
        return e;
      }
      auto b = node(Expr::kBinary, p);
      b->name = op;
      b->kids.push_back(std::move(e));
      b->kids.push_back(parse_math1());
      e = std::move(b);
    }
  }
  ExprPtr binary(ExprPtr l, const std::string& op, ExprPtr r, Pos p) {
    auto b = node(Expr::kBinary, p);
    b->name = op;
    b->kids.push_back(std::move(l));
    b->kids.push_back(std::move(r));
    return b;
  }
  // Jinja2's precedence, loosest first: + and -, then ~, then * / // %,
  // then **, then unary signs; a filter applies to the signed value (-1|abs is 1).
  ExprPtr parse_math1() {
    ExprPtr e = parse_concat();
    while (is_op("+") || is_op("-")) {
      const Token& t = next();
      e = binary(std::move(e), t.text, parse_concat(), t.pos);
    }
    return e;
  }
  ExprPtr parse_concat() {
    ExprPtr e = parse_math2();
    while (is_op("~")) {
      const Pos p = next().pos;
      e = binary(std::move(e), "~", parse_math2(), p);
    }
    return e;
  }
  ExprPtr parse_math2() {
    ExprPtr e = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& t = next();
      e = binary(std::move(e), t.text, parse_pow(), t.pos);
    }
    return e;
  }
  ExprPtr parse_pow() {
    ExprPtr e = parse_unary();
    while (is_op("**")) {
      const Pos p = next().pos;
      e = binary(std::move(e), "**", parse_unary(), p);
    }
    return e;
  }
  ExprPtr parse_unary(bool with_filters = true) {
    const Nest nest(*this, peek().pos);  // `- - -x`
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      const Token& t = next();
      e = node(Expr::kUnary, t.pos);
      e->name = t.text;
      e->kids.push_back(parse_unary(false));
    } else {
      e = parse_postfix(parse_primary());
    }
    return with_filters ? parse_filters(std::move(e)) : std::move(e);
  }

  void parse_call_args(Expr& call) {
    expect_op("(");
    while (!is_op(")")) {
      if (peek().kind == Token::kName && is_op("=", 1)) {
        std::string key = next().text;
        ++i_;
        call.kwargs.emplace_back(key, parse_expr());
      } else {
        if (!call.kwargs.empty()) fail(peek().pos, "positional argument after keyword argument");
        call.kids.push_back(parse_expr());
      }
      if (!is_op(")")) expect_op(",");
    }
    ++i_;
  }

  ExprPtr parse_postfix(ExprPtr e) {
    while (true) {
      if (is_op(".")) {
        const Pos p = next().pos;
        auto a = node(Expr::kAttr, p);
        if (peek().kind == Token::kInt) a->name = std::to_string(next().i);  // x.0 is x[0]
        else a->name = expect_name();
        a->kids.push_back(std::move(e));
        e = std::move(a);
      } else if (is_op("[")) {
        const Pos p = next().pos;
        ExprPtr lo, hi, step;
        bool is_slice = false;
        if (!is_op(":")) lo = parse_expr();
        if (is_op(":")) {
          is_slice = true;
          ++i_;
          if (!is_op(":") && !is_op("]")) hi = parse_expr();
          if (is_op(":")) {
            ++i_;
            if (!is_op("]")) step = parse_expr();
          }
        }
        expect_op("]");
        auto s = node(is_slice ? Expr::kSlice : Expr::kItem, p);
        s->kids.push_back(std::move(e));
        s->kids.push_back(std::move(lo));
        if (is_slice) {
          s->kids.push_back(std::move(hi));
          s->kids.push_back(std::move(step));
        }
        e = std::move(s);
      } else if (is_op("(")) {
        auto c = node(Expr::kCall, peek().pos);
        c->kids.push_back(std::move(e));
        parse_call_args(*c);
        e = std::move(c);
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_filters(ExprPtr e) {
    while (true) {
      if (is_op("|")) {
        const Pos p = next().pos;
        auto f = node(Expr::kFilter, p);
        f->name = expect_name();
        f->kids.push_back(std::move(e));
        if (is_op("(")) parse_call_args(*f);
        e = std::move(f);
      } else if (is_name("is")) {
        const Pos p = next().pos;
        auto t = node(Expr::kTest, p);
        if (is_name("not")) {
          ++i_;
          t->negated = true;
        }
        // Test names may be keywords: `is none`, `is true`, `is defined`.
        t->name = expect_name();
        t->kids.push_back(std::move(e));
        if (is_op("(")) {
          parse_call_args(*t);
        } else if (peek().kind == Token::kString || peek().kind == Token::kInt || peek().kind == Token::kFloat ||
                   (peek().kind == Token::kName && !is_name("and") && !is_name("or") && !is_name("else") &&
                    !is_name("if") && !is_name("in") && !is_name("not") && !is_name("is"))) {
          t->kids.push_back(parse_primary());  // `is divisibleby 3`, `is sameas x`
        }
        e = std::move(t);
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_primary() {
    const Token& t = peek();
    switch (t.kind) {
      case Token::kString: {
        auto e = node(Expr::kLiteral, t.pos);
        std::string s = next().text;
        while (peek().kind == Token::kString) s += next().text;  // adjacent literals concatenate
        e->literal = Value(s);
        return e;
      }
      case Token::kInt: {
        auto e = node(Expr::kLiteral, t.pos);
        e->literal = Value(next().i);
        return e;
      }
      case Token::kFloat: {
        auto e = node(Expr::kLiteral, t.pos);
        e->literal = Value(next().d);
        return e;
      }
      case Token::kName: {
        const std::string n = next().text;
        auto e = node(Expr::kLiteral, t.pos);
        if (n == "true" || n == "True") e->literal = Value(true);
        else if (n == "false" || n == "False") e->literal = Value(false);
        else if (n == "none" || n == "None") e->literal = Value::none();
        else {
          e->kind = Expr::kName;
          e->name = n;
        }
        return e;
      }
      case Token::kOp:
        if (t.text == "(") {
          ++i_;
          if (is_op(")")) {
            ++i_;
            return node(Expr::kTuple, t.pos);
          }
          ExprPtr first = parse_expr();
          if (is_op(",")) {
            auto tup = node(Expr::kTuple, t.pos);
            tup->kids.push_back(std::move(first));
            while (is_op(",")) {
              ++i_;
              if (is_op(")")) break;
              tup->kids.push_back(parse_expr());
            }
            expect_op(")");
            return tup;
          }
          expect_op(")");
          return first;
        }
        if (t.text == "[") {
          ++i_;
          auto l = node(Expr::kList, t.pos);
          while (!is_op("]")) {
            l->kids.push_back(parse_expr());
            if (!is_op("]")) expect_op(",");
          }
          ++i_;
          return l;
        }
        if (t.text == "{") {
          ++i_;
          auto d = node(Expr::kDict, t.pos);
          while (!is_op("}")) {
            d->kids.push_back(parse_expr());
            expect_op(":");
            d->kids.push_back(parse_expr());
            if (!is_op("}")) expect_op(",");
          }
          ++i_;
          return d;
        }
        break;
      default: break;
    }
    fail(t.pos, "unexpected '" + describe(t) + "' in expression");
  }

  const std::vector<Token>& t_;
  size_t i_ = 0;
  size_t depth_ = 0;
};

}  // namespace

std::vector<std::unique_ptr<Stmt>> parse(const std::vector<Token>& tokens) { return Parser(tokens).parse_template(); }

}  // namespace areal::jinja
