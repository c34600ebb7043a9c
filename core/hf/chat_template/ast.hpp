// Internal: tokens and syntax tree of the Jinja engine.
#pragma once

#include <memory>
#include <string>
#include <vector>
#include <cstdint>
#include <string_view>

#include "core/hf/chat_template/value.hpp"

namespace areal::jinja {

struct Pos {
  int line = 1, col = 1;
};

struct Token {
  enum Kind { kText, kVarBegin, kVarEnd, kBlockBegin, kBlockEnd, kName, kInt, kFloat, kString, kOp, kEof };
  Kind kind;
  std::string text;  // text, name, string value or operator
  int64_t i = 0;
  double d = 0;
  Pos pos;
};

// Splits a template into tokens, applying trim_blocks, lstrip_blocks and
// the -/+ whitespace controls as transformers' Jinja2 environment does.
std::vector<Token> lex(std::string_view source);

struct Expr {
  enum Kind { kLiteral, kName, kList, kDict, kTuple, kAttr, kItem, kSlice, kCall, kFilter, kTest, kUnary, kBinary, kAnd, kOr, kNot, kCond };
  Kind kind;
  Pos pos;
  Value literal;
  std::string name;  // name, attribute, operator, filter or test name
  std::vector<std::unique_ptr<Expr>> kids;                                  // operands / items / args
  std::vector<std::pair<std::string, std::unique_ptr<Expr>>> kwargs;        // call/filter/test keyword args
  bool negated = false;  // `is not`
};
using ExprPtr = std::unique_ptr<Expr>;

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
  enum Kind { kText, kOutput, kIf, kFor, kSet, kSetBlock, kMacro, kBreak, kContinue, kBlockWrap };
  Kind kind;
  Pos pos;
  std::string text;                  // kText
  ExprPtr expr;                      // output / set value / for iterable
  std::vector<std::pair<ExprPtr, Body>> branches;  // kIf: (condition or null for else, body)
  std::vector<std::string> targets;  // for / set names
  std::string attr;                  // set ns.attr
  ExprPtr filter;                    // for ... if cond
  Body body, else_body;
  std::vector<std::pair<std::string, ExprPtr>> params;  // macro params with defaults (null = required)
};

std::vector<std::unique_ptr<Stmt>> parse(const std::vector<Token>& tokens);

}  // namespace areal::jinja
