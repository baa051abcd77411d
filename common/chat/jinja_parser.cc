#include "common/chat/jinja_parser.h"

#include <cstdlib>
#include <initializer_list>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/chat/jinja_lexer.h"
#include "common/util/absl_compat.h"
#include "common/util/status_macros.h"

namespace tessera::chat::jinja {
namespace {

using TK = JinjaTokenKind;

ExprPtr Node(Expr::Kind kind, std::string name = {}) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->name = std::move(name);
  return e;
}

class Parser {
 public:
  explicit Parser(std::vector<JinjaToken> tokens) : t_(std::move(tokens)) {}

  absl::StatusOr<Body> ParseAll() {
    std::string end;
    TESSERA_ASSIGN_OR_RETURN(Body body, ParseBody({}, &end));
    return body;
  }

 private:
  // --- token helpers ---
  bool AtEnd() const { return pos_ >= t_.size(); }
  const JinjaToken& Peek(size_t ahead = 0) const {
    static const JinjaToken kEnd{TK::kStmtEnd, ""};
    return pos_ + ahead < t_.size() ? t_[pos_ + ahead] : kEnd;
  }
  bool IsOp(std::string_view op, size_t ahead = 0) const {
    return Peek(ahead).kind == TK::kOperator && Peek(ahead).value == op;
  }
  bool IsName(std::string_view name, size_t ahead = 0) const {
    return Peek(ahead).kind == TK::kName && Peek(ahead).value == name;
  }
  bool Accept(std::string_view op) {
    if (!IsOp(op)) return false;
    ++pos_;
    return true;
  }
  bool AcceptName(std::string_view name) {
    if (!IsName(name)) return false;
    ++pos_;
    return true;
  }
  absl::Status Error(std::string_view what) const {
    const std::string near = AtEnd() ? "the end of the template"
                                     : absl::StrCat("'", Peek().value, "', line ", Peek().line);
    return absl::InvalidArgumentError(
        absl::StrCat("chat template: ", util::ToAbsl(what), " (at ", near, ")"));
  }
  absl::Status Expect(std::string_view op) {
    if (Accept(op)) return absl::OkStatus();
    return Error(absl::StrCat("expected '", util::ToAbsl(op), "'"));
  }
  absl::Status ExpectKind(TK kind, std::string_view what) {
    if (Peek().kind != kind || AtEnd()) return Error(absl::StrCat("expected ", util::ToAbsl(what)));
    ++pos_;
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> ExpectIdentifier() {
    if (Peek().kind != TK::kName || AtEnd()) return Error("expected a name");
    return t_[pos_++].value;
  }

  // --- statements ---
  // Parses until a statement whose keyword is in `ends` (consumed up to its name; *end = it).
  absl::StatusOr<Body> ParseBody(std::initializer_list<std::string_view> ends, std::string* end) {
    Body body;
    while (!AtEnd()) {
      const JinjaToken& token = Peek();
      if (token.kind == TK::kText) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kText;
        s->text = token.value;
        body.push_back(std::move(s));
        ++pos_;
      } else if (token.kind == TK::kExprBegin) {
        ++pos_;
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kPrint;
        TESSERA_ASSIGN_OR_RETURN(s->expr, ParseExpression());
        TESSERA_RETURN_IF_ERROR(ExpectKind(TK::kExprEnd, "'}}'"));
        body.push_back(std::move(s));
      } else if (token.kind == TK::kStmtBegin) {
        const std::string keyword = Peek(1).value;
        for (std::string_view e : ends) {
          if (keyword == e) {
            pos_ += 2;
            *end = keyword;
            return body;
          }
        }
        pos_ += 2;
        TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<Stmt> s, ParseStatement(keyword));
        body.push_back(std::move(s));
      } else {
        return Error("unexpected token outside a tag");
      }
    }
    if (ends.size() > 0) {
      return Error(absl::StrCat("missing '", util::ToAbsl(*ends.begin()), "'"));
    }
    return body;
  }

  absl::Status EndTag() { return ExpectKind(TK::kStmtEnd, "'%}'"); }

  absl::StatusOr<std::unique_ptr<Stmt>> ParseStatement(const std::string& keyword) {
    auto s = std::make_unique<Stmt>();
    if (keyword == "if") return ParseIf(std::move(s));
    if (keyword == "for") return ParseFor(std::move(s));
    if (keyword == "set") return ParseSet(std::move(s));
    if (keyword == "macro") return ParseMacro(std::move(s));
    if (keyword == "break" || keyword == "continue") {
      s->kind = keyword == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue;
      TESSERA_RETURN_IF_ERROR(EndTag());
      return s;
    }
    if (keyword == "generation") {
      s->kind = Stmt::Kind::kBlock;
      TESSERA_RETURN_IF_ERROR(EndTag());
      std::string end;
      TESSERA_ASSIGN_OR_RETURN(Body body, ParseBody({"endgeneration"}, &end));
      s->bodies.push_back(std::move(body));
      TESSERA_RETURN_IF_ERROR(EndTag());
      return s;
    }
    pos_ -= 1;
    return Error(absl::StrCat("unsupported statement '", keyword, "'"));
  }

  absl::StatusOr<std::unique_ptr<Stmt>> ParseIf(std::unique_ptr<Stmt> s) {
    s->kind = Stmt::Kind::kIf;
    while (true) {
      TESSERA_ASSIGN_OR_RETURN(ExprPtr condition, ParseExpression());
      TESSERA_RETURN_IF_ERROR(EndTag());
      s->conditions.push_back(std::move(condition));
      std::string end;
      TESSERA_ASSIGN_OR_RETURN(Body body, ParseBody({"endif", "elif", "else"}, &end));
      s->bodies.push_back(std::move(body));
      if (end == "elif") continue;
      if (end == "else") {
        TESSERA_RETURN_IF_ERROR(EndTag());
        TESSERA_ASSIGN_OR_RETURN(Body rest, ParseBody({"endif"}, &end));
        s->bodies.push_back(std::move(rest));
      }
      TESSERA_RETURN_IF_ERROR(EndTag());
      return s;
    }
  }

  absl::StatusOr<std::unique_ptr<Stmt>> ParseFor(std::unique_ptr<Stmt> s) {
    s->kind = Stmt::Kind::kFor;
    do {
      TESSERA_ASSIGN_OR_RETURN(std::string target, ExpectIdentifier());
      s->targets.push_back(std::move(target));
    } while (Accept(","));
    if (!AcceptName("in")) return Error("expected 'in'");
    TESSERA_ASSIGN_OR_RETURN(s->expr, ParseOr());  // no conditional: `if` filters the loop
    if (AcceptName("if")) {
      TESSERA_ASSIGN_OR_RETURN(ExprPtr filter, ParseOr());
      s->conditions.push_back(std::move(filter));
    }
    if (IsName("recursive")) return Error("unsupported recursive loop");
    TESSERA_RETURN_IF_ERROR(EndTag());
    std::string end;
    TESSERA_ASSIGN_OR_RETURN(Body body, ParseBody({"endfor", "else"}, &end));
    s->bodies.push_back(std::move(body));
    if (end == "else") {
      TESSERA_RETURN_IF_ERROR(EndTag());
      TESSERA_ASSIGN_OR_RETURN(Body rest, ParseBody({"endfor"}, &end));
      s->bodies.push_back(std::move(rest));
    }
    TESSERA_RETURN_IF_ERROR(EndTag());
    return s;
  }

  absl::StatusOr<std::unique_ptr<Stmt>> ParseSet(std::unique_ptr<Stmt> s) {
    s->kind = Stmt::Kind::kSet;
    TESSERA_ASSIGN_OR_RETURN(std::string first, ExpectIdentifier());
    s->targets.push_back(std::move(first));
    if (Accept(".")) {
      TESSERA_ASSIGN_OR_RETURN(s->attr, ExpectIdentifier());
    } else {
      while (Accept(",")) {
        TESSERA_ASSIGN_OR_RETURN(std::string more, ExpectIdentifier());
        s->targets.push_back(std::move(more));
      }
    }
    if (Accept("=")) {
      TESSERA_ASSIGN_OR_RETURN(s->expr, ParseExpression());
      TESSERA_RETURN_IF_ERROR(EndTag());
      return s;
    }
    TESSERA_RETURN_IF_ERROR(EndTag());  // block set: the body's output is the value
    std::string end;
    TESSERA_ASSIGN_OR_RETURN(Body body, ParseBody({"endset"}, &end));
    s->bodies.push_back(std::move(body));
    TESSERA_RETURN_IF_ERROR(EndTag());
    return s;
  }

  absl::StatusOr<std::unique_ptr<Stmt>> ParseMacro(std::unique_ptr<Stmt> s) {
    s->kind = Stmt::Kind::kMacro;
    TESSERA_ASSIGN_OR_RETURN(s->name, ExpectIdentifier());
    TESSERA_RETURN_IF_ERROR(Expect("("));
    while (!Accept(")")) {
      TESSERA_ASSIGN_OR_RETURN(std::string param, ExpectIdentifier());
      s->targets.push_back(std::move(param));
      ExprPtr default_value;
      if (Accept("=")) {
        TESSERA_ASSIGN_OR_RETURN(default_value, ParseExpression());
      }
      s->defaults.push_back(std::move(default_value));
      if (!IsOp(")")) TESSERA_RETURN_IF_ERROR(Expect(","));
    }
    TESSERA_RETURN_IF_ERROR(EndTag());
    std::string end;
    TESSERA_ASSIGN_OR_RETURN(Body body, ParseBody({"endmacro"}, &end));
    s->bodies.push_back(std::move(body));
    TESSERA_RETURN_IF_ERROR(EndTag());
    return s;
  }

  // --- expressions (jinja2's precedence, lowest first) ---
  absl::StatusOr<ExprPtr> ParseExpression() {
    TESSERA_ASSIGN_OR_RETURN(ExprPtr value, ParseOr());
    while (AcceptName("if")) {
      auto e = Node(Expr::Kind::kConditional);
      TESSERA_ASSIGN_OR_RETURN(ExprPtr condition, ParseOr());
      ExprPtr otherwise;
      if (AcceptName("else")) {
        TESSERA_ASSIGN_OR_RETURN(otherwise, ParseExpression());
      }
      e->args.push_back(std::move(condition));
      e->args.push_back(std::move(value));
      e->args.push_back(std::move(otherwise));
      value = std::move(e);
    }
    return value;
  }

  ExprPtr Binary(std::string op, ExprPtr left, ExprPtr right) {
    auto e = Node(Expr::Kind::kBinary, std::move(op));
    e->op = BinaryOpOf(e->name);
    e->args.push_back(std::move(left));
    e->args.push_back(std::move(right));
    return e;
  }

  absl::StatusOr<ExprPtr> ParseOr() {
    TESSERA_ASSIGN_OR_RETURN(ExprPtr left, ParseAnd());
    while (AcceptName("or")) {
      TESSERA_ASSIGN_OR_RETURN(ExprPtr right, ParseAnd());
      left = Binary("or", std::move(left), std::move(right));
    }
    return left;
  }

  absl::StatusOr<ExprPtr> ParseAnd() {
    TESSERA_ASSIGN_OR_RETURN(ExprPtr left, ParseNot());
    while (AcceptName("and")) {
      TESSERA_ASSIGN_OR_RETURN(ExprPtr right, ParseNot());
      left = Binary("and", std::move(left), std::move(right));
    }
    return left;
  }

  absl::StatusOr<ExprPtr> ParseNot() {
    if (AcceptName("not")) {
      auto e = Node(Expr::Kind::kNot);
      TESSERA_ASSIGN_OR_RETURN(ExprPtr inner, ParseNot());
      e->args.push_back(std::move(inner));
      return e;
    }
    return ParseCompare();
  }

  absl::StatusOr<ExprPtr> ParseCompare() {
    TESSERA_ASSIGN_OR_RETURN(ExprPtr left, ParseMath1());
    while (true) {
      std::string op;
      for (std::string_view c : {"==", "!=", "<=", ">=", "<", ">"}) {
        if (IsOp(c)) op = c;
      }
      if (!op.empty()) {
        ++pos_;
      } else if (AcceptName("in")) {
        op = "in";
      } else if (IsName("not") && IsName("in", 1)) {
        pos_ += 2;
        op = "notin";
      } else {
        return left;
      }
      TESSERA_ASSIGN_OR_RETURN(ExprPtr right, ParseMath1());
      left = Binary(op, std::move(left), std::move(right));
    }
  }

  absl::StatusOr<ExprPtr> ParseMath1() {
    TESSERA_ASSIGN_OR_RETURN(ExprPtr left, ParseConcat());
    while (IsOp("+") || IsOp("-")) {
      const std::string op = t_[pos_++].value;
      TESSERA_ASSIGN_OR_RETURN(ExprPtr right, ParseConcat());
      left = Binary(op, std::move(left), std::move(right));
    }
    return left;
  }

  absl::StatusOr<ExprPtr> ParseConcat() {
    TESSERA_ASSIGN_OR_RETURN(ExprPtr left, ParseMath2());
    while (Accept("~")) {
      TESSERA_ASSIGN_OR_RETURN(ExprPtr right, ParseMath2());
      left = Binary("~", std::move(left), std::move(right));
    }
    return left;
  }

  absl::StatusOr<ExprPtr> ParseMath2() {
    TESSERA_ASSIGN_OR_RETURN(ExprPtr left, ParsePow());
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      const std::string op = t_[pos_++].value;
      TESSERA_ASSIGN_OR_RETURN(ExprPtr right, ParsePow());
      left = Binary(op, std::move(left), std::move(right));
    }
    return left;
  }

  absl::StatusOr<ExprPtr> ParsePow() {
    TESSERA_ASSIGN_OR_RETURN(ExprPtr left, ParseUnary(true));
    while (Accept("**")) {
      TESSERA_ASSIGN_OR_RETURN(ExprPtr right, ParseUnary(true));
      left = Binary("**", std::move(left), std::move(right));
    }
    return left;
  }

  absl::StatusOr<ExprPtr> ParseUnary(bool with_filter) {
    ExprPtr node;
    if (Accept("-")) {
      node = Node(Expr::Kind::kNegate);
      TESSERA_ASSIGN_OR_RETURN(ExprPtr inner, ParseUnary(false));
      node->args.push_back(std::move(inner));
    } else if (Accept("+")) {
      TESSERA_ASSIGN_OR_RETURN(node, ParseUnary(false));
    } else {
      TESSERA_ASSIGN_OR_RETURN(node, ParsePrimary());
    }
    TESSERA_ASSIGN_OR_RETURN(node, ParsePostfix(std::move(node)));
    if (!with_filter) return node;
    return ParseFilters(std::move(node));
  }

  absl::StatusOr<ExprPtr> ParsePrimary();
  absl::StatusOr<ExprPtr> ParsePostfix(ExprPtr node);
  absl::StatusOr<ExprPtr> ParseFilters(ExprPtr node);
  absl::Status ParseCallArgs(Expr* call);
  absl::StatusOr<ExprPtr> ParseSubscript(ExprPtr target);

  std::vector<JinjaToken> t_;
  size_t pos_ = 0;
};

absl::StatusOr<ExprPtr> Parser::ParsePrimary() {
  const JinjaToken token = Peek();
  if (AtEnd()) return Error("expected an expression");
  if (token.kind == TK::kString) {
    ++pos_;
    std::string value = token.value;
    while (Peek().kind == TK::kString && !AtEnd()) value += t_[pos_++].value;  // 'a' 'b'
    auto e = Node(Expr::Kind::kLiteral);
    e->value = Value::Markup(std::move(value));
    return e;
  }
  if (token.kind == TK::kNumber) {
    ++pos_;
    const std::string digits = absl::StrReplaceAll(token.value, {{"_", ""}});
    auto e = Node(Expr::Kind::kLiteral);
    e->value = digits.find('.') != std::string::npos
                   ? Value::Float(std::strtod(digits.c_str(), nullptr))
                   : Value::Int(std::strtoll(digits.c_str(), nullptr, 10));
    return e;
  }
  if (token.kind == TK::kName) {
    ++pos_;
    auto e = Node(Expr::Kind::kLiteral);
    if (token.value == "true" || token.value == "True") e->value = Value::Bool(true);
    else if (token.value == "false" || token.value == "False") e->value = Value::Bool(false);
    else if (token.value == "none" || token.value == "None") e->value = Value::None();
    else e = Node(Expr::Kind::kName, token.value);
    return e;
  }
  if (Accept("(")) {  // parenthesized expression or tuple
    if (Accept(")")) return Node(Expr::Kind::kList);
    TESSERA_ASSIGN_OR_RETURN(ExprPtr first, ParseExpression());
    if (Accept(")")) return first;
    auto tuple = Node(Expr::Kind::kList);
    tuple->args.push_back(std::move(first));
    while (Accept(",")) {
      if (IsOp(")")) break;
      TESSERA_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression());
      tuple->args.push_back(std::move(item));
    }
    TESSERA_RETURN_IF_ERROR(Expect(")"));
    return tuple;
  }
  if (Accept("[")) {
    auto list = Node(Expr::Kind::kList);
    while (!Accept("]")) {
      TESSERA_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression());
      list->args.push_back(std::move(item));
      if (!IsOp("]")) TESSERA_RETURN_IF_ERROR(Expect(","));
    }
    return list;
  }
  if (Accept("{")) {
    auto dict = Node(Expr::Kind::kDict);
    while (!Accept("}")) {
      TESSERA_ASSIGN_OR_RETURN(ExprPtr key, ParseExpression());
      TESSERA_RETURN_IF_ERROR(Expect(":"));
      TESSERA_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
      dict->args.push_back(std::move(key));
      dict->args.push_back(std::move(value));
      if (!IsOp("}")) TESSERA_RETURN_IF_ERROR(Expect(","));
    }
    return dict;
  }
  return Error("expected an expression");
}

absl::Status Parser::ParseCallArgs(Expr* call) {
  while (!Accept(")")) {
    if (Peek().kind == TK::kName && IsOp("=", 1)) {
      std::string name = t_[pos_].value;
      pos_ += 2;
      TESSERA_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
      call->kwargs.emplace_back(std::move(name), std::move(value));
    } else {
      TESSERA_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
      call->args.push_back(std::move(value));
    }
    if (!IsOp(")")) TESSERA_RETURN_IF_ERROR(Expect(","));
  }
  return absl::OkStatus();
}

absl::StatusOr<ExprPtr> Parser::ParseSubscript(ExprPtr target) {
  ExprPtr parts[3];
  int colons = 0;
  while (!IsOp("]")) {
    if (Accept(":")) {
      if (++colons > 2) return Error("bad slice");
      continue;
    }
    TESSERA_ASSIGN_OR_RETURN(parts[colons], ParseExpression());
  }
  TESSERA_RETURN_IF_ERROR(Expect("]"));
  if (colons == 0) {
    if (parts[0] == nullptr) return Error("empty subscript");
    auto e = Node(Expr::Kind::kItem);
    e->args.push_back(std::move(target));
    e->args.push_back(std::move(parts[0]));
    return e;
  }
  auto e = Node(Expr::Kind::kSlice);
  e->args.push_back(std::move(target));
  for (ExprPtr& part : parts) e->args.push_back(std::move(part));
  return e;
}

absl::StatusOr<ExprPtr> Parser::ParsePostfix(ExprPtr node) {
  while (true) {
    if (Accept(".")) {
      if (Peek().kind == TK::kNumber && !AtEnd()) {  // x.0 is x[0]
        auto e = Node(Expr::Kind::kItem);
        e->args.push_back(std::move(node));
        auto index = Node(Expr::Kind::kLiteral);
        index->value = Value::Int(std::strtoll(t_[pos_++].value.c_str(), nullptr, 10));
        e->args.push_back(std::move(index));
        node = std::move(e);
        continue;
      }
      TESSERA_ASSIGN_OR_RETURN(std::string name, ExpectIdentifier());
      auto e = Node(Expr::Kind::kAttr, std::move(name));
      e->args.push_back(std::move(node));
      node = std::move(e);
    } else if (Accept("[")) {
      TESSERA_ASSIGN_OR_RETURN(node, ParseSubscript(std::move(node)));
    } else if (Accept("(")) {
      auto call = Node(Expr::Kind::kCall);
      call->line = Peek().line;
      call->args.push_back(std::move(node));
      TESSERA_RETURN_IF_ERROR(ParseCallArgs(call.get()));
      node = std::move(call);
    } else {
      return node;
    }
  }
}

absl::StatusOr<ExprPtr> Parser::ParseFilters(ExprPtr node) {
  while (true) {
    if (Accept("|")) {
      const int line = Peek().line;
      TESSERA_ASSIGN_OR_RETURN(std::string name, ExpectIdentifier());
      auto filter = Node(Expr::Kind::kFilter, std::move(name));
      filter->line = line;
      filter->args.push_back(std::move(node));
      if (Accept("(")) TESSERA_RETURN_IF_ERROR(ParseCallArgs(filter.get()));
      TESSERA_ASSIGN_OR_RETURN(node, ParsePostfix(std::move(filter)));
    } else if (AcceptName("is")) {
      auto test = Node(Expr::Kind::kTest);
      test->negated = AcceptName("not");
      test->line = Peek().line;
      TESSERA_ASSIGN_OR_RETURN(test->name, ExpectIdentifier());
      test->args.push_back(std::move(node));
      if (Accept("(")) {
        TESSERA_RETURN_IF_ERROR(ParseCallArgs(test.get()));
      } else if (Peek().kind == TK::kString || Peek().kind == TK::kNumber ||
                 (Peek().kind == TK::kName && !IsName("and") && !IsName("or") &&
                  !IsName("else") && !IsName("if") && !IsName("in") && !IsName("not"))) {
        TESSERA_ASSIGN_OR_RETURN(ExprPtr argument, ParsePrimary());
        test->args.push_back(std::move(argument));
      }
      node = std::move(test);
    } else {
      return node;
    }
  }
}

}  // namespace

BinaryOp BinaryOpOf(std::string_view op) {
  static constexpr std::pair<std::string_view, BinaryOp> kOps[] = {
      {"or", BinaryOp::kOr},   {"and", BinaryOp::kAnd},   {"==", BinaryOp::kEq},
      {"!=", BinaryOp::kNe},   {"<", BinaryOp::kLt},      {">", BinaryOp::kGt},
      {"<=", BinaryOp::kLe},   {">=", BinaryOp::kGe},     {"in", BinaryOp::kIn},
      {"notin", BinaryOp::kNotIn}, {"+", BinaryOp::kAdd}, {"-", BinaryOp::kSub},
      {"*", BinaryOp::kMul},   {"/", BinaryOp::kDiv},     {"//", BinaryOp::kFloorDiv},
      {"%", BinaryOp::kMod},   {"**", BinaryOp::kPow},    {"~", BinaryOp::kConcat}};
  for (const auto& [spelling, value] : kOps) {
    if (spelling == op) return value;
  }
  return BinaryOp::kConcat;
}

absl::StatusOr<Body> ParseTemplate(std::string_view source) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<JinjaToken> tokens, TokenizeJinja(source));
  return Parser(std::move(tokens)).ParseAll();
}

}  // namespace tessera::chat::jinja
