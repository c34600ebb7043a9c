#include "core/hf/tokenizer/regex.hpp"

#include <unicode/uchar.h>
#include <unicode/uscript.h>

#include <algorithm>
#include <deque>
#include <functional>

#include "core/plugin_host/error.hpp"
#include "core/hf/tokenizer/unicode.hpp"

namespace areal::tokenizer {
namespace {

// ---------------------------------------------------------------------------
// Character classes
// ---------------------------------------------------------------------------

// A predicate over code points: explicit ranges plus property tests.
struct CharClass {
  bool negated = false;
  bool icase = false;
  std::vector<std::pair<char32_t, char32_t>> ranges;
  std::vector<std::pair<std::function<bool(char32_t)>, bool>> props;  // (test, negated)
  uint64_t ascii[2] = {0, 0};  // precomputed membership for c < 128

  bool raw_contains(char32_t c) const {
    for (const auto& [lo, hi] : ranges)
      if (c >= lo && c <= hi) return true;
    for (const auto& [test, neg] : props)
      if (test(c) != neg) return true;
    return false;
  }
  bool compute(char32_t c) const {
    bool in = raw_contains(c);
    if (!in && icase) {
      const char32_t f = unicode::fold_case(c);
      in = raw_contains(f) || raw_contains(static_cast<char32_t>(u_toupper(static_cast<UChar32>(c))));
    }
    return in != negated;
  }
  void finalize() {
    for (char32_t c = 0; c < 128; ++c)
      if (compute(c)) ascii[c >> 6] |= uint64_t{1} << (c & 63);
  }
  bool contains(char32_t c) const {
    if (c < 128) return (ascii[c >> 6] >> (c & 63)) & 1;
    return compute(c);
  }
};

bool general_category_in(char32_t c, uint32_t mask) { return (U_MASK(u_charType(static_cast<UChar32>(c))) & mask) != 0; }

// Resolves \p{name}. Returns false if unknown.
bool property(const std::string& name, std::function<bool(char32_t)>& out) {
  struct Named {
    const char* name;
    uint32_t mask;
  };
  static const Named kCategories[] = {
      {"L", U_GC_L_MASK}, {"Letter", U_GC_L_MASK}, {"Lu", U_GC_LU_MASK}, {"Ll", U_GC_LL_MASK}, {"Lt", U_GC_LT_MASK},
      {"Lm", U_GC_LM_MASK}, {"Lo", U_GC_LO_MASK}, {"M", U_GC_M_MASK}, {"Mark", U_GC_M_MASK}, {"Mn", U_GC_MN_MASK},
      {"Mc", U_GC_MC_MASK}, {"Me", U_GC_ME_MASK}, {"N", U_GC_N_MASK}, {"Number", U_GC_N_MASK}, {"Nd", U_GC_ND_MASK},
      {"Nl", U_GC_NL_MASK}, {"No", U_GC_NO_MASK}, {"P", U_GC_P_MASK}, {"Punctuation", U_GC_P_MASK},
      {"Pc", U_GC_PC_MASK}, {"Pd", U_GC_PD_MASK}, {"Ps", U_GC_PS_MASK}, {"Pe", U_GC_PE_MASK}, {"Pi", U_GC_PI_MASK},
      {"Pf", U_GC_PF_MASK}, {"Po", U_GC_PO_MASK}, {"S", U_GC_S_MASK}, {"Symbol", U_GC_S_MASK}, {"Sm", U_GC_SM_MASK},
      {"Sc", U_GC_SC_MASK}, {"Sk", U_GC_SK_MASK}, {"So", U_GC_SO_MASK}, {"Z", U_GC_Z_MASK}, {"Separator", U_GC_Z_MASK},
      {"Zs", U_GC_ZS_MASK}, {"Zl", U_GC_ZL_MASK}, {"Zp", U_GC_ZP_MASK}, {"C", U_GC_C_MASK}, {"Other", U_GC_C_MASK},
      {"Cc", U_GC_CC_MASK}, {"Cf", U_GC_CF_MASK}, {"Co", U_GC_CO_MASK}, {"Cn", U_GC_CN_MASK}, {"Cs", U_GC_CS_MASK},
  };
  for (const auto& n : kCategories)
    if (name == n.name) {
      const uint32_t mask = n.mask;
      out = [mask](char32_t c) { return general_category_in(c, mask); };
      return true;
    }
  const int32_t script = u_getPropertyValueEnum(UCHAR_SCRIPT, name.c_str());
  if (script != UCHAR_INVALID_CODE) {
    const auto s = static_cast<UScriptCode>(script);
    out = [s](char32_t c) {
      UErrorCode err = U_ZERO_ERROR;
      return uscript_getScript(static_cast<UChar32>(c), &err) == s;
    };
    return true;
  }
  return false;
}

// ---------------------------------------------------------------------------
// AST
// ---------------------------------------------------------------------------

struct Node {
  enum Kind { kEmpty, kChar, kClass, kAny, kConcat, kAlt, kRepeat, kGroup, kLook, kLineStart, kLineEnd, kTextStart, kTextEnd, kWordB, kNotWordB };
  Kind kind = kEmpty;
  char32_t ch = 0;
  bool icase = false;
  int class_index = -1;
  std::vector<std::unique_ptr<Node>> kids;
  int min = 0, max = -1;  // repeat; max -1 = unbounded
  bool greedy = true;
  bool negate = false;  // lookahead
};

class Parser {
 public:
  Parser(std::string_view pattern, std::vector<CharClass>& classes) : classes_(classes) {
    std::vector<uint32_t> offsets;
    unicode::decode_utf8(pattern, p_, offsets);
  }

  std::unique_ptr<Node> parse() {
    auto n = alternation(false);
    if (i_ < p_.size()) fail("unbalanced ')'");
    return n;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw Error(AREAL_CODE_INVALID_ARGUMENT, "regex: " + why + " at code point " + std::to_string(i_));
  }
  bool eof() const { return i_ >= p_.size(); }
  char32_t peek(size_t k = 0) const { return i_ + k < p_.size() ? p_[i_ + k] : 0; }

  std::unique_ptr<Node> alternation(bool icase) {
    auto first = concat(icase);
    if (peek() != '|') return first;
    auto alt = std::make_unique<Node>();
    alt->kind = Node::kAlt;
    alt->kids.push_back(std::move(first));
    while (!eof() && peek() == '|') {
      ++i_;
      alt->kids.push_back(concat(icase));
    }
    return alt;
  }

  std::unique_ptr<Node> concat(bool icase) {
    auto seq = std::make_unique<Node>();
    seq->kind = Node::kConcat;
    while (!eof() && peek() != '|' && peek() != ')') {
      if (peek() == '(' && peek(1) == '?' && peek(2) == 'i' && peek(3) == ')') {  // (?i) for the rest
        i_ += 4;
        icase = true;
        continue;
      }
      auto atom_node = atom(icase);
      seq->kids.push_back(quantified(std::move(atom_node)));
    }
    return seq;
  }

  std::unique_ptr<Node> quantified(std::unique_ptr<Node> a) {
    int min = -1, max = -1;
    if (eof()) return a;
    const char32_t c = peek();
    if (c == '*') min = 0, max = -1, ++i_;
    else if (c == '+') min = 1, max = -1, ++i_;
    else if (c == '?') min = 0, max = 1, ++i_;
    else if (c == '{' && counted(min, max)) {
    } else
      return a;
    auto r = std::make_unique<Node>();
    r->kind = Node::kRepeat;
    r->min = min;
    r->max = max;
    if (peek() == '?') r->greedy = false, ++i_;
    else if (peek() == '+') fail("possessive quantifiers are not supported");
    if (can_be_empty(*a) && (max == -1 || max > 1)) fail("a quantified subexpression that can match empty is not supported");
    if (a->kind == Node::kLook || a->kind == Node::kLineStart || a->kind == Node::kLineEnd) fail("quantified assertion");
    r->kids.push_back(std::move(a));
    if (!eof() && (peek() == '*' || peek() == '+' || (peek() == '?' && false))) fail("nested quantifier");
    return r;
  }

  // Parses {n}, {n,}, {n,m}; leaves i_ unchanged and returns false if the
  // brace is a literal (Oniguruma treats a malformed interval as literal).
  bool counted(int& min, int& max) {
    size_t j = i_ + 1;
    auto number = [&](int& v) {
      size_t start = j;
      v = 0;
      while (j < p_.size() && p_[j] >= '0' && p_[j] <= '9') v = std::min(v * 10 + static_cast<int>(p_[j++] - '0'), 100000);  // capped: no overflow
      return j > start;
    };
    int a = 0, b = -1;
    if (!number(a)) return false;
    if (j < p_.size() && p_[j] == ',') {
      ++j;
      if (!number(b)) b = -1;
    } else {
      b = a;
    }
    if (j >= p_.size() || p_[j] != '}') return false;
    if (b != -1 && b < a) fail("bad interval");
    if (a > 1000 || b > 1000) fail("interval too large");
    i_ = j + 1;
    min = a;
    max = b;
    return true;
  }

  static bool can_be_empty(const Node& n) {
    switch (n.kind) {
      case Node::kChar:
      case Node::kClass:
      case Node::kAny: return false;
      case Node::kConcat:
        for (const auto& k : n.kids)
          if (!can_be_empty(*k)) return false;
        return true;
      case Node::kAlt:
        for (const auto& k : n.kids)
          if (can_be_empty(*k)) return true;
        return false;
      case Node::kRepeat: return n.min == 0 || can_be_empty(*n.kids[0]);
      case Node::kGroup: return can_be_empty(*n.kids[0]);
      default: return true;
    }
  }

  std::unique_ptr<Node> atom(bool icase) {
    auto n = std::make_unique<Node>();
    const char32_t c = p_[i_++];
    switch (c) {
      case '(': {
        bool group_icase = icase;
        if (peek() == '?') {
          ++i_;
          if (eof()) fail("unterminated group");
          const char32_t k = p_[i_];
          if (k == ':') {
            ++i_;
          } else if (k == '=' || k == '!') {
            ++i_;
            n->kind = Node::kLook;
            n->negate = k == '!';
            n->kids.push_back(alternation(icase));
            expect(')');
            return n;
          } else if (k == 'i' && peek(1) == ':') {
            i_ += 2;
            group_icase = true;
          } else if (k == '<' && (peek(1) == '=' || peek(1) == '!')) {
            fail("lookbehind is not supported");
          } else {
            fail("unsupported group syntax (?" + std::string(1, static_cast<char>(k)));
          }
        }
        n->kind = Node::kGroup;
        n->kids.push_back(alternation(group_icase));
        expect(')');
        return n;
      }
      case '[': n->kind = Node::kClass, n->class_index = char_class(icase); return n;
      case '.': {
        // Oniguruma (Ruby syntax): '.' matches anything but newline.
        CharClass cc;
        cc.negated = true;
        cc.ranges.push_back({'\n', '\n'});
        cc.finalize();
        classes_.push_back(std::move(cc));
        n->kind = Node::kClass;
        n->class_index = static_cast<int>(classes_.size()) - 1;
        return n;
      }
      case '^': n->kind = Node::kLineStart; return n;
      case '$': n->kind = Node::kLineEnd; return n;
      case '\\': return escape(icase, std::move(n));
      case ')': fail("unbalanced ')'");
      case '*':
      case '+':
      case '?': fail("quantifier without a target");
      default:
        n->kind = Node::kChar;
        n->ch = icase ? unicode::fold_case(c) : c;
        n->icase = icase;
        return n;
    }
  }

  void expect(char32_t c) {
    if (eof() || p_[i_] != c) fail(std::string("expected '") + static_cast<char>(c) + "'");
    ++i_;
  }

  std::unique_ptr<Node> escape(bool icase, std::unique_ptr<Node> n) {
    if (eof()) fail("trailing backslash");
    const char32_t e = p_[i_];
    switch (e) {
      case 'A': ++i_, n->kind = Node::kTextStart; return n;
      case 'z': ++i_, n->kind = Node::kTextEnd; return n;
      case 'b': ++i_, n->kind = Node::kWordB; return n;
      case 'B': ++i_, n->kind = Node::kNotWordB; return n;
      default: break;
    }
    if (e >= '1' && e <= '9') fail("backreferences are not supported");
    CharClass cc;
    cc.icase = icase;
    char32_t literal = 0;
    if (class_escape(cc, literal)) {
      cc.finalize();
      classes_.push_back(std::move(cc));
      n->kind = Node::kClass;
      n->class_index = static_cast<int>(classes_.size()) - 1;
    } else {
      n->kind = Node::kChar;
      n->ch = icase ? unicode::fold_case(literal) : literal;
      n->icase = icase;
    }
    return n;
  }

  // After a backslash (i_ at the escape letter): adds a class to `cc` and
  // returns true, or sets `literal` and returns false.
  bool class_escape(CharClass& cc, char32_t& literal) {
    if (eof()) fail("trailing backslash");
    const char32_t e = p_[i_++];
    auto add_prop = [&](std::function<bool(char32_t)> f, bool neg) { cc.props.push_back({std::move(f), neg}); };
    switch (e) {
      case 's': add_prop(unicode::is_white_space, false); return true;
      case 'S': add_prop(unicode::is_white_space, true); return true;
      case 'd': add_prop(unicode::is_digit, false); return true;
      case 'D': add_prop(unicode::is_digit, true); return true;
      case 'w': add_prop(unicode::is_word, false); return true;
      case 'W': add_prop(unicode::is_word, true); return true;
      case 'h': add_prop([](char32_t c) { return std::isxdigit(static_cast<int>(c & 0x7F)) && c < 128; }, false); return true;
      case 'p':
      case 'P': {
        std::string name;
        bool neg = e == 'P';
        if (peek() == '{') {
          ++i_;
          if (peek() == '^') neg = !neg, ++i_;
          while (!eof() && p_[i_] != '}') name.push_back(static_cast<char>(p_[i_++]));
          expect('}');
        } else {
          if (eof()) fail("\\p needs a property");
          name.push_back(static_cast<char>(p_[i_++]));
        }
        std::function<bool(char32_t)> f;
        if (!property(name, f)) fail("unknown Unicode property '" + name + "'");
        add_prop(std::move(f), neg);
        return true;
      }
      case 'n': literal = '\n'; return false;
      case 'r': literal = '\r'; return false;
      case 't': literal = '\t'; return false;
      case 'f': literal = '\f'; return false;
      case 'v': literal = '\v'; return false;
      case 'a': literal = 0x07; return false;
      case 'e': literal = 0x1B; return false;
      case '0': literal = 0; return false;
      case 'x': {
        literal = hex_escape();
        return false;
      }
      case 'u': {
        literal = 0;
        for (int k = 0; k < 4; ++k) literal = literal * 16 + hex_digit();
        return false;
      }
      default:
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9'))
          fail(std::string("unsupported escape \\") + static_cast<char>(e));
        literal = e;  // escaped punctuation
        return false;
    }
  }

  char32_t hex_digit() {
    if (eof()) fail("truncated hex escape");
    const char32_t c = p_[i_++];
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    fail("bad hex digit");
  }
  char32_t hex_escape() {
    char32_t v = 0;
    if (peek() == '{') {
      ++i_;
      while (!eof() && p_[i_] != '}') v = v * 16 + hex_digit();
      expect('}');
    } else {
      v = hex_digit() * 16;
      v += hex_digit();
    }
    return v;
  }

  int char_class(bool icase) {
    CharClass cc;
    cc.icase = icase;
    if (peek() == '^') cc.negated = true, ++i_;
    bool first = true;
    while (true) {
      if (eof()) fail("unterminated character class");
      char32_t c = p_[i_];
      if (c == ']' && !first) {
        ++i_;
        break;
      }
      first = false;
      if (c == '[') fail("nested character classes are not supported");
      if (c == '&' && peek(1) == '&') fail("class intersection is not supported");
      char32_t lo;
      if (c == '\\') {
        ++i_;
        char32_t literal = 0;
        if (class_escape(cc, literal)) continue;
        lo = literal;
      } else {
        lo = c;
        ++i_;
      }
      if (peek() == '-' && peek(1) != ']' && i_ + 1 < p_.size()) {
        ++i_;
        char32_t hi = p_[i_];
        if (hi == '\\') {
          ++i_;
          char32_t literal = 0;
          if (class_escape(cc, literal)) fail("a class escape cannot end a range");
          hi = literal;
        } else {
          ++i_;
        }
        if (hi < lo) fail("reversed range in character class");
        cc.ranges.push_back({lo, hi});
      } else {
        cc.ranges.push_back({lo, lo});
      }
    }
    cc.finalize();
    classes_.push_back(std::move(cc));
    return static_cast<int>(classes_.size()) - 1;
  }

  std::vector<char32_t> p_;
  size_t i_ = 0;
  std::vector<CharClass>& classes_;
};

// ---------------------------------------------------------------------------
// Program
// ---------------------------------------------------------------------------

inline char32_t fold(char32_t c) {
  if (c < 128) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
  return unicode::fold_case(c);
}

enum class Op : uint8_t { kChar, kCharI, kClass, kRepClass, kSplit, kAlt, kJmp, kMatch, kLook, kLineStart, kLineEnd, kTextStart, kTextEnd, kWordB, kNotWordB };

struct Inst {
  Op op;
  bool flag = false;  // kRepClass: greedy; kLook: negate
  char32_t ch = 0;
  int32_t x = 0, y = 0;  // split targets; class index; look body start
  int32_t min = 0, max = -1;
};

}  // namespace

// What can start a match: literal characters and classes. `nullable` means
// the pattern can match empty (or starts with an assertion), so no filter.
struct FirstSet {
  bool nullable = false;
  std::vector<std::pair<char32_t, bool>> chars;  // (folded char if icase, icase)
  std::vector<int> classes;
};

void first_set(const Node& n, FirstSet& f, bool& nullable) {
  switch (n.kind) {
    case Node::kChar: f.chars.push_back({n.ch, n.icase}); nullable = false; return;
    case Node::kClass: f.classes.push_back(n.class_index); nullable = false; return;
    case Node::kConcat:
      for (const auto& k : n.kids) {
        bool kid_nullable = true;
        first_set(*k, f, kid_nullable);
        if (!kid_nullable) {
          nullable = false;
          return;
        }
      }
      nullable = true;
      return;
    case Node::kAlt: {
      bool any = false;
      for (const auto& k : n.kids) {
        bool kid_nullable = true;
        first_set(*k, f, kid_nullable);
        any = any || kid_nullable;
      }
      nullable = any;
      return;
    }
    case Node::kGroup: first_set(*n.kids[0], f, nullable); return;
    case Node::kRepeat: {
      bool kid_nullable = true;
      first_set(*n.kids[0], f, kid_nullable);
      nullable = n.min == 0 || kid_nullable;
      return;
    }
    default:  // assertions and empty: give up on filtering
      f.nullable = true;
      nullable = true;
      return;
  }
}

struct Regex::Program {
  std::string pattern;
  std::vector<CharClass> classes;
  std::vector<Inst> code;
  int32_t start = 0;
  FirstSet first;
  // kAlt: each alternative's entry pc and what its first character can be,
  // so only branches that can match the next character are tried.
  std::vector<std::vector<std::pair<int32_t, FirstSet>>> alts;

  bool admits(const FirstSet& f, const std::vector<char32_t>& t, size_t pos) const {
    if (f.nullable) return true;
    return pos < t.size() && admits_char(f, t[pos]);
  }
  bool admits_char(const FirstSet& f, char32_t c) const {
    if (f.nullable) return true;
    for (const auto& [ch, icase] : f.chars)
      if ((icase ? fold(c) : c) == ch) return true;
    for (int k : f.classes)
      if (classes[k].contains(c)) return true;
    return false;
  }
  bool may_start(char32_t c) const { return admits_char(first, c); }

  int32_t emit(Inst i) {
    code.push_back(i);
    return static_cast<int32_t>(code.size()) - 1;
  }

  void compile(const Node& n) {
    switch (n.kind) {
      case Node::kEmpty: break;
      case Node::kChar: emit({n.icase ? Op::kCharI : Op::kChar, false, n.ch}); break;
      case Node::kClass: emit({Op::kRepClass, true, 0, n.class_index, 0, 1, 1}); break;
      case Node::kAny: break;
      case Node::kConcat:
        for (const auto& k : n.kids) compile(*k);
        break;
      case Node::kGroup: compile(*n.kids[0]); break;
      case Node::kAlt: {
        const int32_t dispatch = emit({Op::kAlt});
        code[dispatch].x = static_cast<int32_t>(alts.size());
        alts.emplace_back();
        std::vector<std::pair<int32_t, FirstSet>> table;
        std::vector<int32_t> jumps;
        for (size_t k = 0; k < n.kids.size(); ++k) {
          FirstSet f;
          bool nullable = true;
          first_set(*n.kids[k], f, nullable);
          if (nullable) f.nullable = true;
          table.emplace_back(static_cast<int32_t>(code.size()), std::move(f));
          compile(*n.kids[k]);
          jumps.push_back(emit({Op::kJmp}));
        }
        for (int32_t j : jumps) code[j].x = static_cast<int32_t>(code.size());
        alts[code[dispatch].x] = std::move(table);
        break;
      }
      case Node::kRepeat: {
        const Node& body = *n.kids[0];
        if (body.kind == Node::kClass) {  // the hot path: \p{L}+, \s*, \p{N}{1,3}
          emit({Op::kRepClass, n.greedy, 0, body.class_index, 0, n.min, n.max});
          break;
        }
        for (int k = 0; k < n.min; ++k) compile(body);
        if (n.max == -1) {
          const int32_t split = emit({Op::kSplit});
          compile(body);
          emit({Op::kJmp, false, 0, split});
          code[split].x = n.greedy ? split + 1 : static_cast<int32_t>(code.size());
          code[split].y = n.greedy ? static_cast<int32_t>(code.size()) : split + 1;
        } else {
          std::vector<int32_t> splits;
          for (int k = n.min; k < n.max; ++k) {
            splits.push_back(emit({Op::kSplit}));
            compile(body);
          }
          const int32_t end = static_cast<int32_t>(code.size());
          for (int32_t s : splits) {
            code[s].x = n.greedy ? s + 1 : end;
            code[s].y = n.greedy ? end : s + 1;
          }
        }
        break;
      }
      case Node::kLook: {
        const int32_t look = emit({Op::kLook, n.negate});
        const int32_t jump = emit({Op::kJmp});
        code[look].x = static_cast<int32_t>(code.size());
        compile(*n.kids[0]);
        emit({Op::kMatch});
        code[jump].x = static_cast<int32_t>(code.size());
        // kLook at `look` runs the body at look+2; on success continues at look+1 (the jump over the body).
        break;
      }
      case Node::kLineStart: emit({Op::kLineStart}); break;
      case Node::kLineEnd: emit({Op::kLineEnd}); break;
      case Node::kTextStart: emit({Op::kTextStart}); break;
      case Node::kTextEnd: emit({Op::kTextEnd}); break;
      case Node::kWordB: emit({Op::kWordB}); break;
      case Node::kNotWordB: emit({Op::kNotWordB}); break;
    }
  }

  // Backtracking run from `pc` at `pos`; returns the end position of the
  // first (highest-priority) match, or -1. `memo` marks (pc, pos) states that
  // are known to fail; it stays valid across starts because nothing here
  // depends on where the match began.
  // memo may be null (lookahead bodies: tiny, and their states must not mix
  // with the main program's).
  struct Frame {
    int32_t pc;
    uint32_t pos;
  };
  int64_t run(const std::vector<char32_t>& t, int32_t pc0, size_t pos0, std::vector<uint64_t>* memo) const {
    // One reusable stack per nesting depth (lookahead bodies run nested).
    thread_local std::deque<std::vector<Frame>> stacks;  // deque: growing keeps outer references valid
    thread_local size_t depth = 0;
    if (stacks.size() <= depth) stacks.resize(depth + 1);
    std::vector<Frame>& stack = stacks[depth];
    struct Depth {
      size_t& d;
      explicit Depth(size_t& x) : d(x) { ++d; }
      ~Depth() { --d; }
    } nest(depth);
    stack.clear();
    stack.push_back({pc0, static_cast<uint32_t>(pos0)});
    const size_t width = t.size() + 1;
    auto seen = [&](int32_t pc, size_t pos) {
      if (memo == nullptr) return false;
      const size_t bit = static_cast<size_t>(pc) * width + pos;
      uint64_t& w = (*memo)[bit >> 6];
      const uint64_t m = uint64_t{1} << (bit & 63);
      if (w & m) return true;
      w |= m;
      return false;
    };
    while (!stack.empty()) {
      Frame f = stack.back();
      stack.pop_back();
      int32_t pc = f.pc;
      size_t pos = f.pos;
      // Straight-line code is deterministic: a state needs the memo only
      // where execution can arrive twice (a popped frame, a branch point).
      if (seen(pc, pos)) continue;
      bool fresh = true;  // this state was just memo-checked as a frame start
      while (true) {
        const Inst& in = code[pc];
        const bool check_memo = !fresh;
        fresh = false;
        bool ok = true;
        switch (in.op) {
          case Op::kChar:
            ok = pos < t.size() && t[pos] == in.ch;
            ++pos, ++pc;
            break;
          case Op::kCharI:
            ok = pos < t.size() && fold(t[pos]) == in.ch;
            ++pos, ++pc;
            break;
          case Op::kClass: ok = false; break;
          case Op::kRepClass: {
            const CharClass& cc = classes[in.x];
            size_t n = 0;
            const size_t limit = in.max < 0 ? t.size() - pos : std::min<size_t>(in.max, t.size() - pos);
            if (in.flag) {
              while (n < limit && cc.contains(t[pos + n])) ++n;
              if (n < static_cast<size_t>(in.min)) {
                ok = false;
                break;
              }
              for (size_t k = in.min; k < n; ++k) stack.push_back({pc + 1, static_cast<uint32_t>(pos + k)});
              pos += n;
            } else {
              while (n < static_cast<size_t>(in.min) && n < limit && cc.contains(t[pos + n])) ++n;
              if (n < static_cast<size_t>(in.min)) {
                ok = false;
                break;
              }
              // Lazy: try the shortest first; longer ones are pushed in reverse.
              size_t longest = n;
              while (longest < limit && cc.contains(t[pos + longest])) ++longest;
              for (size_t k = longest; k > n; --k) stack.push_back({pc + 1, static_cast<uint32_t>(pos + k)});
              pos += n;
            }
            ++pc;
            break;
          }
          case Op::kSplit:
            if (check_memo && seen(pc, pos)) {
              ok = false;
              break;
            }
            stack.push_back({in.y, static_cast<uint32_t>(pos)});
            pc = in.x;
            break;
          case Op::kAlt: {
            if (check_memo && seen(pc, pos)) {
              ok = false;
              break;
            }
            const auto& table = alts[in.x];
            int32_t first_pc = -1;
            // Push viable later branches in reverse so the earliest pops first.
            for (size_t k = table.size(); k-- > 0;) {
              if (!admits(table[k].second, t, pos)) continue;
              if (first_pc >= 0) stack.push_back({first_pc, static_cast<uint32_t>(pos)});
              first_pc = table[k].first;
            }
            if (first_pc < 0) {
              ok = false;
              break;
            }
            pc = first_pc;
            break;
          }
          case Op::kJmp: pc = in.x; break;
          case Op::kMatch: return static_cast<int64_t>(pos);
          case Op::kLook: {
            const bool matched = run(t, in.x, pos, nullptr) >= 0;
            ok = matched != in.flag;
            ++pc;  // the jump over the body
            break;
          }
          case Op::kLineStart: ok = pos == 0 || t[pos - 1] == '\n'; ++pc; break;
          case Op::kLineEnd: ok = pos == t.size() || t[pos] == '\n'; ++pc; break;
          case Op::kTextStart: ok = pos == 0; ++pc; break;
          case Op::kTextEnd: ok = pos == t.size(); ++pc; break;
          case Op::kWordB:
          case Op::kNotWordB: {
            const bool before = pos > 0 && unicode::is_word(t[pos - 1]);
            const bool after = pos < t.size() && unicode::is_word(t[pos]);
            ok = (before != after) == (in.op == Op::kWordB);
            ++pc;
            break;
          }
        }
        if (!ok || pos > t.size()) break;
      }
    }
    return -1;
  }
};

Regex::Regex(std::string_view pattern) : program_(std::make_unique<Program>()) {
  program_->pattern = std::string(pattern);
  Parser parser(pattern, program_->classes);
  auto ast = parser.parse();
  program_->compile(*ast);
  program_->emit({Op::kMatch});
  bool nullable = true;
  first_set(*ast, program_->first, nullable);
  if (nullable) program_->first.nullable = true;
}

Regex::~Regex() = default;
Regex::Regex(Regex&&) noexcept = default;
Regex& Regex::operator=(Regex&&) noexcept = default;

const std::string& Regex::pattern() const { return program_->pattern; }

int64_t Regex::match_at(const std::vector<char32_t>& text, size_t pos) const {
  std::vector<uint64_t> memo((program_->code.size() * (text.size() + 1) + 63) / 64, 0);
  const int64_t end = program_->run(text, 0, pos, &memo);
  return end < 0 ? -1 : end - static_cast<int64_t>(pos);
}

void Regex::find_all(const std::vector<char32_t>& text, std::vector<std::pair<uint32_t, uint32_t>>& out) const {
  out.clear();
  thread_local std::vector<uint64_t> memo;
  memo.assign((program_->code.size() * (text.size() + 1) + 63) / 64, 0);
  const size_t width = text.size() + 1;
  size_t pos = 0;
  while (pos < text.size()) {
    if (!program_->may_start(text[pos])) {
      ++pos;
      continue;
    }
    const int64_t end = program_->run(text, 0, pos, &memo);
    if (end > static_cast<int64_t>(pos)) {
      out.emplace_back(static_cast<uint32_t>(pos), static_cast<uint32_t>(end));
      pos = static_cast<size_t>(end);
      // States marked on the successful path did not fail; the only ones a
      // later start (>= end) can reach again sit at position `end`.
      for (size_t pc = 0; pc < program_->code.size(); ++pc) {
        const size_t bit = pc * width + pos;
        memo[bit >> 6] &= ~(uint64_t{1} << (bit & 63));
      }
    } else {
      ++pos;
    }
  }
}

}  // namespace areal::tokenizer
