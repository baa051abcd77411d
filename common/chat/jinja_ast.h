// The syntax tree of a Jinja chat template (parsed by jinja_parser.h, run by jinja_render.h).
// One node type each for expressions and statements, told apart by `kind`, so the parser and the
// renderer stay small. Immutable after parsing; shared by every render of a template.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/chat/jinja_value.h"

namespace tessera::chat::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

// A kBinary node's operator, resolved once at parse time.
enum class BinaryOp {
  kOr, kAnd, kEq, kNe, kLt, kGt, kLe, kGe, kIn, kNotIn, kAdd, kSub, kMul, kDiv, kFloorDiv, kMod,
  kPow, kConcat
};

// The operator spelled `op` ("==", "notin", "~", ...); kConcat for an unknown spelling is never
// asked for (the parser only makes these).
BinaryOp BinaryOpOf(std::string_view op);

struct Expr {
  enum class Kind {
    kLiteral,      // value
    kName,         // name
    kAttr,         // args[0].name
    kItem,         // args[0][args[1]]
    kSlice,        // args[0][args[1]:args[2]:args[3]] (null parts omitted)
    kCall,         // args[0](args[1..], kwargs)
    kFilter,       // args[0] | name(args[1..], kwargs)
    kTest,         // args[0] is [not] name(args[1..])
    kNot,          // not args[0]
    kNegate,       // -args[0]
    kBinary,       // args[0] op args[1]; op in name: or and == != < > <= >= in notin + - * / // % ** ~
    kConditional,  // args[1] if args[0] else args[2] (args[2] may be null)
    kList,         // [args...] (also tuples)
    kDict,         // {kwargs...} with keys as expressions in args (key, value pairs)
  };
  Kind kind = Kind::kLiteral;
  Value value;
  std::string name;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  bool negated = false;  // kTest: `is not`
  BinaryOp op = BinaryOp::kConcat;  // kBinary
  int line = 0;  // kFilter, kTest, kCall: the source line, for errors
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
  enum class Kind {
    kText,      // text
    kPrint,     // {{ expr }}
    kIf,        // branches: (conditions[i], bodies[i]); else: bodies.back() when one more body
    kFor,       // for targets in expr [if condition]: bodies[0]; else: bodies[1] (optional)
    kSet,       // set targets = expr, or `set targets %}bodies[0]{% endset`; attr: ns.attr
    kMacro,     // macro name(params with defaults): bodies[0]
    kBreak,
    kContinue,
    kBlock,     // a body rendered as is ({% generation %})
  };
  Kind kind = Kind::kText;
  std::string text;
  ExprPtr expr;
  std::vector<ExprPtr> conditions;  // kIf; kFor: the optional filter in conditions[0]
  std::vector<Body> bodies;
  std::vector<std::string> targets;  // kFor / kSet names; kMacro parameter names
  std::string attr;                  // kSet: `set targets[0].attr = ...`
  std::string name;                  // kMacro
  std::vector<ExprPtr> defaults;     // kMacro: one per parameter (null: none)
};

}  // namespace tessera::chat::jinja
