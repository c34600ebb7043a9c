#include <map>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>
#include <memory>

#include "core/plugin_host/error.hpp"
#include "core/hf/chat_template/jinja.hpp"
#include "ast.hpp"
#include "builtins.hpp"

namespace areal::jinja {
namespace {

// A variable scope. `for` bodies and macro calls open one; `if` does not
// (Jinja2's scoping, which is why templates need namespace()).
struct Frame {
  Frame* parent = nullptr;
  std::vector<std::pair<std::string, Value>> vars;

  const Value* lookup(const std::string& name) const {
    for (const Frame* f = this; f != nullptr; f = f->parent)
      for (auto it = f->vars.rbegin(); it != f->vars.rend(); ++it)
        if (it->first == name) return &it->second;
    return nullptr;
  }
  void set(const std::string& name, Value v) {
    for (auto& kv : vars)
      if (kv.first == name) {
        kv.second = std::move(v);
        return;
      }
    vars.emplace_back(name, std::move(v));
  }
};

enum class Flow { kNormal, kBreak, kContinue };

class Interpreter {
 public:
  explicit Interpreter(Frame& top) : top_(top) {}

  static void append(std::string& out, const std::string& text, Pos p) {
    if (out.size() + text.size() > kMaxStringBytes) runtime_error(p, "the rendered text would exceed 16 MiB");
    out += text;
  }

  Flow exec(const Body& body, Frame& f, std::string& out) {
    for (const auto& s : body) {
      const Flow flow = exec(*s, f, out);
      if (flow != Flow::kNormal) return flow;
    }
    return Flow::kNormal;
  }

  Flow exec(const Stmt& s, Frame& f, std::string& out) {
    switch (s.kind) {
      case Stmt::kText: append(out, s.text, s.pos); return Flow::kNormal;
      case Stmt::kOutput: {
        const Value v = eval(*s.expr, f);
        append(out, v.str(), s.pos);
        return Flow::kNormal;
      }
      case Stmt::kIf:
        for (const auto& [cond, body] : s.branches)
          if (!cond || eval(*cond, f).truthy()) return exec(body, f, out);
        return Flow::kNormal;
      case Stmt::kFor: return exec_for(s, f, out);
      case Stmt::kSet: {
        Value v = eval(*s.expr, f);
        if (!s.attr.empty()) {
          const Value* target = f.lookup(s.targets[0]);
          if (target == nullptr || !target->is_object() || !target->as_object().is_namespace)
            runtime_error(s.pos, "cannot assign attribute '" + s.attr + "' on '" + s.targets[0] + "': only namespace() objects allow it");
          target->as_object().set(s.attr, std::move(v));
        } else if (s.targets.size() == 1) {
          f.set(s.targets[0], std::move(v));
        } else {
          const Array items = iterate(v, s.pos);
          if (items.size() != s.targets.size())
            runtime_error(s.pos, "cannot unpack " + std::to_string(items.size()) + " values into " + std::to_string(s.targets.size()) + " names");
          for (size_t k = 0; k < items.size(); ++k) f.set(s.targets[k], items[k]);
        }
        return Flow::kNormal;
      }
      case Stmt::kSetBlock: {
        std::string captured;
        exec(s.body, f, captured);
        f.set(s.targets[0], Value(captured));
        return Flow::kNormal;
      }
      case Stmt::kMacro: {
        const Stmt* def = &s;
        Interpreter* self = this;
        f.set(s.targets[0], Value(Function([self, def](Array& args, Kwargs& kwargs) -> Value {
          Frame local{&self->top_, {}};
          if (args.size() > def->params.size()) runtime_error(def->pos, "macro '" + def->targets[0] + "' takes " + std::to_string(def->params.size()) + " arguments");
          for (size_t k = 0; k < def->params.size(); ++k) {
            const auto& [name, dflt] = def->params[k];
            const Value* given = nullptr;
            for (const auto& [key, v] : kwargs)
              if (key == name) given = &v;
            if (k < args.size()) local.set(name, args[k]);
            else if (given) local.set(name, *given);
            else if (dflt) local.set(name, self->eval(*dflt, local));
            else local.set(name, Value());
          }
          if (self->macro_depth_ >= kMaxMacroDepth)
            runtime_error(def->pos, "macro '" + def->targets[0] + "' calls nested deeper than " + std::to_string(kMaxMacroDepth));
          ++self->macro_depth_;
          std::string out;
          try {
            self->exec(def->body, local, out);
          } catch (...) {
            --self->macro_depth_;
            throw;
          }
          --self->macro_depth_;
          return Value(out);
        })));
        return Flow::kNormal;
      }
      case Stmt::kBreak: return Flow::kBreak;
      case Stmt::kContinue: return Flow::kContinue;
      case Stmt::kBlockWrap: return exec(s.body, f, out);
    }
    return Flow::kNormal;
  }

  Flow exec_for(const Stmt& s, Frame& f, std::string& out) {
    Array all = iterate(eval(*s.expr, f), s.pos);
    Array items;
    if (s.filter) {
      for (auto& item : all) {
        Frame probe{&f, {}};
        bind_targets(s, probe, item);
        if (eval(*s.filter, probe).truthy()) items.push_back(item);
      }
    } else {
      items = std::move(all);
    }
    if (items.empty()) return exec(s.else_body, f, out) == Flow::kBreak ? Flow::kNormal : Flow::kNormal;
    const int64_t n = static_cast<int64_t>(items.size());
    for (int64_t k = 0; k < n; ++k) {
      Frame iter{&f, {}};
      bind_targets(s, iter, items[k]);
      Object loop;
      loop.set("index", Value(k + 1));
      loop.set("index0", Value(k));
      loop.set("revindex", Value(n - k));
      loop.set("revindex0", Value(n - k - 1));
      loop.set("first", Value(k == 0));
      loop.set("last", Value(k == n - 1));
      loop.set("length", Value(n));
      loop.set("previtem", k > 0 ? items[k - 1] : Value());
      loop.set("nextitem", k + 1 < n ? items[k + 1] : Value());
      loop.set("cycle", Value(Function([k](Array& args, Kwargs&) -> Value {
        return args.empty() ? Value() : args[static_cast<size_t>(k) % args.size()];
      })));
      iter.set("loop", Value(std::move(loop)));
      const Flow flow = exec(s.body, iter, out);
      if (flow == Flow::kBreak) break;
    }
    return Flow::kNormal;
  }

  void bind_targets(const Stmt& s, Frame& f, const Value& item) {
    if (s.targets.size() == 1) {
      f.set(s.targets[0], item);
      return;
    }
    const Array parts = iterate(item, s.pos);
    if (parts.size() != s.targets.size())
      runtime_error(s.pos, "cannot unpack " + std::to_string(parts.size()) + " values into " + std::to_string(s.targets.size()) + " loop variables");
    for (size_t k = 0; k < parts.size(); ++k) f.set(s.targets[k], parts[k]);
  }

  void eval_args(const Expr& e, size_t first, Frame& f, Array& args, Kwargs& kwargs) {
    for (size_t k = first; k < e.kids.size(); ++k) args.push_back(eval(*e.kids[k], f));
    for (const auto& [key, x] : e.kwargs) kwargs.emplace_back(key, eval(*x, f));
  }

  Value eval(const Expr& e, Frame& f) {
    switch (e.kind) {
      case Expr::kLiteral: return e.literal;
      case Expr::kName: {
        const Value* v = f.lookup(e.name);
        return v ? *v : Value();
      }
      case Expr::kList:
      case Expr::kTuple: {
        Array a;
        for (const auto& k : e.kids) a.push_back(eval(*k, f));
        return Value(std::move(a));
      }
      case Expr::kDict: {
        Object o;
        for (size_t k = 0; k + 1 < e.kids.size(); k += 2) {
          const Value key = eval(*e.kids[k], f);
          if (!key.is_string()) runtime_error(e.pos, "dict keys must be strings here");
          o.set(key.as_string(), eval(*e.kids[k + 1], f));
        }
        return Value(std::move(o));
      }
      case Expr::kAttr: {
        const Value obj = eval(*e.kids[0], f);
        if (obj.is_undefined()) runtime_error(e.pos, describe(*e.kids[0]) + " is undefined (reading ." + e.name + ")");
        return get_attr(obj, e.name, e.pos);
      }
      case Expr::kItem: {
        const Value obj = eval(*e.kids[0], f);
        if (obj.is_undefined()) runtime_error(e.pos, describe(*e.kids[0]) + " is undefined (reading [...])");
        return get_item(obj, eval(*e.kids[1], f), e.pos);
      }
      case Expr::kSlice: {
        const Value obj = eval(*e.kids[0], f);
        auto opt = [&](size_t k) { return e.kids[k] ? eval(*e.kids[k], f) : Value::none(); };
        return slice(obj, opt(1), opt(2), opt(3), e.pos);
      }
      case Expr::kCall: {
        const Value fn = eval(*e.kids[0], f);
        if (!fn.is_function()) runtime_error(e.pos, describe(*e.kids[0]) + " is not callable");
        Array args;
        Kwargs kwargs;
        eval_args(e, 1, f, args, kwargs);
        return fn.as_function()(args, kwargs);
      }
      case Expr::kFilter: {
        Value input = eval(*e.kids[0], f);
        Array args;
        Kwargs kwargs;
        eval_args(e, 1, f, args, kwargs);
        return apply_filter(e.name, input, args, kwargs, e.pos);
      }
      case Expr::kTest: {
        Value input;
        // `x is defined` must not fail on an undefined attribute chain.
        input = eval(*e.kids[0], f);
        Array args;
        Kwargs kwargs;
        eval_args(e, 1, f, args, kwargs);
        return Value(apply_test(e.name, input, args, e.pos) != e.negated);
      }
      case Expr::kUnary: {
        const Value v = eval(*e.kids[0], f);
        if (!v.is_number()) runtime_error(e.pos, "bad operand type for unary " + e.name + ": '" + v.type_name() + "'");
        if (e.name == "+") return v;
        return v.is_int() ? Value(-v.as_int()) : Value(-v.as_double());
      }
      case Expr::kBinary: {
        const Value a = eval(*e.kids[0], f);
        const Value b = eval(*e.kids[1], f);
        if (e.name == "in") return Value(contains(b, a, e.pos));
        if (e.name == "not in") return Value(!contains(b, a, e.pos));
        return binary_op(e.name, a, b, e.pos);
      }
      case Expr::kAnd: {
        Value a = eval(*e.kids[0], f);
        return a.truthy() ? eval(*e.kids[1], f) : a;
      }
      case Expr::kOr: {
        Value a = eval(*e.kids[0], f);
        return a.truthy() ? a : eval(*e.kids[1], f);
      }
      case Expr::kNot: return Value(!eval(*e.kids[0], f).truthy());
      case Expr::kCond:
        if (eval(*e.kids[0], f).truthy()) return eval(*e.kids[1], f);
        return e.kids[2] ? eval(*e.kids[2], f) : Value();
    }
    return Value();
  }

 private:
  static std::string describe(const Expr& e) {
    switch (e.kind) {
      case Expr::kName: return "'" + e.name + "'";
      case Expr::kAttr: return describe(*e.kids[0]) + "." + e.name;
      default: return "the value";
    }
  }

  size_t macro_depth_ = 0;  // macro calls in progress (kMaxMacroDepth)
  Frame& top_;
};

}  // namespace

Template::Template(std::string_view source)
    : body_(std::make_shared<std::vector<std::unique_ptr<Stmt>>>(parse(lex(source)))) {}
Template::~Template() = default;
Template::Template(Template&&) noexcept = default;

std::string Template::render(const Object& globals) const {
  Frame builtins_frame;
  for (auto& kv : make_globals().items) builtins_frame.vars.push_back(kv);
  Frame top{&builtins_frame, {}};
  for (const auto& kv : globals.items) top.vars.push_back(kv);
  Interpreter interp(top);
  std::string out;
  interp.exec(*body_, top, out);
  return out;
}

}  // namespace areal::jinja
