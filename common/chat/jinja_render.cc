#include "common/chat/jinja_render.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/chat/jinja_builtins.h"
#include "common/chat/jinja_parser.h"
#include "common/util/absl_compat.h"
#include "common/util/status_macros.h"

namespace tessera::chat::jinja {
namespace {

enum class Flow { kNormal, kBreak, kContinue };

// `status` with the template line it happened at.
absl::Status AtLine(const absl::Status& status, int line) {
  return absl::Status(status.code(), absl::StrCat(status.message(), " (line ", line, ")"));
}

class Renderer {
 public:
  explicit Renderer(const Object& context) { scopes_.emplace_back(); globals_ = &context; }

  absl::Status RenderBody(const Body& body, Text* out, Flow* flow) {
    for (const auto& stmt : body) {
      TESSERA_RETURN_IF_ERROR(RenderStmt(*stmt, out, flow));
      if (*flow != Flow::kNormal) return absl::OkStatus();
    }
    return absl::OkStatus();
  }

 private:
  absl::Status Step() {
    if (++steps_ > kMaxSteps) {
      return absl::ResourceExhaustedError("chat template: too many steps (a runaway loop?)");
    }
    return absl::OkStatus();
  }

  absl::Status Emit(const Text& text, Text* out) {
    TESSERA_RETURN_IF_ERROR(Room(text.bytes.size(), *out));
    out->Append(text);
    return absl::OkStatus();
  }
  absl::Status EmitMarkup(std::string_view markup, Text* out) {
    TESSERA_RETURN_IF_ERROR(Room(markup.size(), *out));
    out->AppendMarkup(markup);
    return absl::OkStatus();
  }
  static absl::Status Room(size_t bytes, const Text& out) {
    if (out.bytes.size() + bytes > kMaxOutputBytes) {
      return absl::ResourceExhaustedError("chat template: the output exceeds 16 MiB");
    }
    return absl::OkStatus();
  }

  // --- variables ---
  // The innermost scope first, down to the current macro's frame, then the template's top
  // level, then the caller's context.
  Value Lookup(const std::string& name) const {
    for (size_t i = scopes_.size(); i-- > scope_floor_;) {
      if (const Value* v = scopes_[i].Find(name)) return *v;
    }
    if (const Value* v = scopes_.front().Find(name)) return *v;
    if (const Value* v = globals_->Find(name)) return *v;
    return GlobalFunction(name);
  }
  void Assign(const std::string& name, Value value) { scopes_.back().Set(name, std::move(value)); }
  // `for a, b in` / `set a, b =`: one name takes the value, several unpack a list (missing
  // elements undefined).
  void AssignTargets(const std::vector<std::string>& targets, const Value& value) {
    if (targets.size() == 1) {
      Assign(targets[0], value);
      return;
    }
    for (size_t t = 0; t < targets.size(); ++t) {
      Assign(targets[t], value.is_array() && t < value.array().size() ? value.array()[t] : Value());
    }
  }

  absl::Status RenderStmt(const Stmt& s, Text* out, Flow* flow);
  absl::Status RenderFor(const Stmt& s, Text* out);
  absl::Status RenderSet(const Stmt& s);
  absl::StatusOr<Value> Eval(const Expr& e);
  absl::StatusOr<Value> EvalBinary(const Expr& e);
  absl::StatusOr<Value> EvalConcatChain(const Expr& e);
  absl::StatusOr<CallArgs> EvalArgs(const Expr& e, size_t first);
  absl::StatusOr<Value> CallValue(const Expr& e, const Value& callee);
  absl::StatusOr<Value> CallMacro(const Stmt& macro, CallArgs& args);

  std::vector<Object> scopes_;  // [0]: the top level; then loops' and macros' scopes
  size_t scope_floor_ = 1;      // the running macro's frame (it sees no caller's scope)
  const Object* globals_;
  int64_t steps_ = 0;
  int depth_ = 0;
};

absl::Status Renderer::RenderStmt(const Stmt& s, Text* out, Flow* flow) {
  TESSERA_RETURN_IF_ERROR(Step());
  switch (s.kind) {
    case Stmt::Kind::kText: return EmitMarkup(s.text, out);
    case Stmt::Kind::kPrint: {
      TESSERA_ASSIGN_OR_RETURN(Value v, Eval(*s.expr));
      if (v.is_string()) return Emit(v.text(), out);
      return Emit(v.ToText(), out);
    }
    case Stmt::Kind::kIf: {
      for (size_t i = 0; i < s.conditions.size(); ++i) {
        TESSERA_ASSIGN_OR_RETURN(Value c, Eval(*s.conditions[i]));
        if (c.Truthy()) return RenderBody(s.bodies[i], out, flow);
      }
      if (s.bodies.size() > s.conditions.size()) return RenderBody(s.bodies.back(), out, flow);
      return absl::OkStatus();
    }
    case Stmt::Kind::kFor: return RenderFor(s, out);
    case Stmt::Kind::kSet: return RenderSet(s);
    case Stmt::Kind::kMacro: {
      const Stmt* macro = &s;
      Assign(s.name, Value::MakeFunction([this, macro](CallArgs& args) { return CallMacro(*macro, args); }));
      return absl::OkStatus();
    }
    case Stmt::Kind::kBreak: *flow = Flow::kBreak; return absl::OkStatus();
    case Stmt::Kind::kContinue: *flow = Flow::kContinue; return absl::OkStatus();
    case Stmt::Kind::kBlock: return RenderBody(s.bodies[0], out, flow);
  }
  return absl::OkStatus();
}

absl::StatusOr<Value> Renderer::CallMacro(const Stmt& macro, CallArgs& args) {
  if (depth_ >= kMaxCallDepth) return absl::ResourceExhaustedError("chat template: macro recursion too deep");
  Object frame;
  for (size_t i = 0; i < macro.targets.size(); ++i) {
    Value v = args.Get(macro.targets[i], i);
    if (v.is_undefined() && macro.defaults[i] != nullptr) {
      TESSERA_ASSIGN_OR_RETURN(v, Eval(*macro.defaults[i]));
    }
    frame.Set(macro.targets[i], std::move(v));
  }
  const size_t caller_floor = std::exchange(scope_floor_, scopes_.size());
  scopes_.push_back(std::move(frame));
  ++depth_;
  Text out;
  Flow flow = Flow::kNormal;
  const absl::Status status = RenderBody(macro.bodies[0], &out, &flow);
  --depth_;
  scopes_.resize(scope_floor_);  // the frame and anything an error left above it
  scope_floor_ = caller_floor;
  if (!status.ok()) return status;
  return Value::String(std::move(out));
}

// The attributes of `loop`, in jinja2's order; SetLoopState fills them for item i of `all`.
Object LoopObject() {
  Object loop;
  for (const char* name : {"index", "index0", "revindex", "revindex0", "first", "last", "length",
                           "previtem", "nextitem"}) {
    loop.items.emplace_back(name, Value());
  }
  return loop;
}

void SetLoopState(Object& loop, const std::vector<Value>& all, int64_t i) {
  const int64_t n = static_cast<int64_t>(all.size());
  auto& v = loop.items;
  v[0].second = Value::Int(i + 1);
  v[1].second = Value::Int(i);
  v[2].second = Value::Int(n - i);
  v[3].second = Value::Int(n - i - 1);
  v[4].second = Value::Bool(i == 0);
  v[5].second = Value::Bool(i == n - 1);
  v[6].second = Value::Int(n);
  v[7].second = i > 0 ? all[i - 1] : Value();
  v[8].second = i + 1 < n ? all[i + 1] : Value();
}

absl::Status Renderer::RenderFor(const Stmt& s, Text* out) {
  TESSERA_ASSIGN_OR_RETURN(Value iterable, Eval(*s.expr));
  std::vector<Value> owned;  // a dict's keys, a string's characters, or the filtered items
  const std::vector<Value>* list = &owned;
  if (iterable.is_array()) {
    list = &iterable.array();  // shared with the value, which outlives the loop
  } else if (iterable.is_object()) {
    for (const auto& kv : iterable.object().items) owned.push_back(Value::Markup(kv.first));
  } else if (iterable.is_string()) {
    owned = Characters(iterable);
  } else if (!iterable.is_undefined() && !iterable.is_none()) {
    return absl::InvalidArgumentError(absl::StrCat("chat template: cannot loop over a ", util::ToAbsl(iterable.TypeName())));
  }
  if (!s.conditions.empty()) {  // the loop's `if` filters before loop.* counts
    std::vector<Value> kept;
    for (const Value& item : *list) {
      scopes_.emplace_back();
      AssignTargets(s.targets, item);
      absl::StatusOr<Value> keep = Eval(*s.conditions[0]);
      scopes_.pop_back();
      if (!keep.ok()) return keep.status();
      if (keep->Truthy()) kept.push_back(item);
    }
    owned = std::move(kept);
    list = &owned;
  }
  if (list->empty()) {
    if (s.bodies.size() < 2) return absl::OkStatus();
    Flow flow = Flow::kNormal;
    return RenderBody(s.bodies[1], out, &flow);
  }
  const std::vector<Value>& all = *list;
  const int64_t n = static_cast<int64_t>(all.size());
  scopes_.emplace_back();  // the loop's scope, emptied (capacity kept) for each iteration
  Value loop;              // `loop`, updated in place while no template value holds it
  for (int64_t i = 0; i < n; ++i) {
    scopes_.back().items.clear();
    AssignTargets(s.targets, all[i]);
    if (!loop.is_object() || !loop.unshared()) loop = Value::MakeObject(LoopObject());
    SetLoopState(loop.object(), all, i);
    Assign("loop", loop);
    Flow flow = Flow::kNormal;
    const absl::Status status = RenderBody(s.bodies[0], out, &flow);
    if (!status.ok()) scopes_.pop_back();
    TESSERA_RETURN_IF_ERROR(status);
    if (flow == Flow::kBreak) break;
  }
  scopes_.pop_back();
  return absl::OkStatus();
}

absl::Status Renderer::RenderSet(const Stmt& s) {
  Value value;
  if (s.expr != nullptr) {
    TESSERA_ASSIGN_OR_RETURN(value, Eval(*s.expr));
  } else {
    Text body;
    Flow flow = Flow::kNormal;
    TESSERA_RETURN_IF_ERROR(RenderBody(s.bodies[0], &body, &flow));
    value = Value::String(std::move(body));
  }
  if (!s.attr.empty()) {
    const Value target = Lookup(s.targets[0]);
    if (!target.is_namespace()) {
      return absl::InvalidArgumentError(absl::StrCat("chat template: cannot assign attribute '", s.attr,
                                                     "' of '", s.targets[0], "' (not a namespace)"));
    }
    target.object().Set(s.attr, std::move(value));
    return absl::OkStatus();
  }
  AssignTargets(s.targets, value);
  return absl::OkStatus();
}

absl::StatusOr<CallArgs> Renderer::EvalArgs(const Expr& e, size_t first) {
  CallArgs args;
  for (size_t i = first; i < e.args.size(); ++i) {
    TESSERA_ASSIGN_OR_RETURN(Value v, Eval(*e.args[i]));
    args.positional.push_back(std::move(v));
  }
  for (const auto& [name, expr] : e.kwargs) {
    TESSERA_ASSIGN_OR_RETURN(Value v, Eval(*expr));
    args.keyword.emplace_back(name, std::move(v));
  }
  return args;
}

// Python slicing of a list or string.
Value SliceOf(const Value& v, const Value& start, const Value& stop, const Value& step_value) {
  const std::vector<size_t> at = v.is_array() ? std::vector<size_t>{} : CodePointOffsets(v.str());
  const int64_t n = v.is_array() ? static_cast<int64_t>(v.array().size())
                                 : static_cast<int64_t>(at.size()) - 1;
  const int64_t step = step_value.is_number() ? step_value.AsInt() : 1;
  if (step == 0) return Value();
  auto clamp = [&](const Value& x, int64_t fallback) {
    if (!x.is_number()) return fallback;
    int64_t i = x.AsInt();
    if (i < 0) i += n;
    return step > 0 ? std::min(std::max<int64_t>(i, 0), n) : std::min(std::max<int64_t>(i, -1), n - 1);
  };
  const int64_t begin = clamp(start, step > 0 ? 0 : n - 1);
  const int64_t end = clamp(stop, step > 0 ? n : -1);
  if (v.is_array()) {
    Array out;
    for (int64_t i = begin; step > 0 ? i < end : i > end; i += step) out.push_back(v.array()[i]);
    return Value::MakeArray(std::move(out));
  }
  Text out;
  for (int64_t i = begin; step > 0 ? i < end : i > end; i += step) {
    out.Append(v.text().Slice(at[i], at[i + 1]));
  }
  return Value::String(std::move(out));
}

// The call `e` of an evaluated callee: a function with e's arguments, or an error naming it.
absl::StatusOr<Value> Renderer::CallValue(const Expr& e, const Value& callee) {
  if (!callee.is_function()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chat template: calling a ", util::ToAbsl(callee.TypeName()),
        e.args[0]->kind == Expr::Kind::kName || e.args[0]->kind == Expr::Kind::kAttr
            ? absl::StrCat(" ('", e.args[0]->name, "')") : std::string(),
        " (line ", e.line, ")"));
  }
  TESSERA_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1));
  return callee.function()(args);
}

absl::StatusOr<Value> Renderer::Eval(const Expr& e) {
  TESSERA_RETURN_IF_ERROR(Step());
  switch (e.kind) {
    case Expr::Kind::kLiteral: return e.value;
    case Expr::Kind::kName: return Lookup(e.name);
    case Expr::Kind::kAttr: {
      TESSERA_ASSIGN_OR_RETURN(Value target, Eval(*e.args[0]));
      return GetAttribute(target, e.name);
    }
    case Expr::Kind::kItem: {
      TESSERA_ASSIGN_OR_RETURN(Value target, Eval(*e.args[0]));
      TESSERA_ASSIGN_OR_RETURN(Value index, Eval(*e.args[1]));
      return GetItem(target, index);
    }
    case Expr::Kind::kSlice: {
      TESSERA_ASSIGN_OR_RETURN(Value target, Eval(*e.args[0]));
      Value parts[3];
      for (int i = 0; i < 3; ++i) {
        if (e.args[i + 1] != nullptr) {
          TESSERA_ASSIGN_OR_RETURN(parts[i], Eval(*e.args[i + 1]));
        }
      }
      return SliceOf(target, parts[0], parts[1], parts[2]);
    }
    case Expr::Kind::kCall: {
      if (e.args[0]->kind == Expr::Kind::kAttr) {  // a method call needs no bound function
        TESSERA_ASSIGN_OR_RETURN(Value self, Eval(*e.args[0]->args[0]));
        if (IsMethodOf(self, e.args[0]->name)) {
          TESSERA_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1));
          return CallMethod(self, e.args[0]->name, args);
        }
        return CallValue(e, GetAttribute(self, e.args[0]->name));
      }
      TESSERA_ASSIGN_OR_RETURN(Value callee, Eval(*e.args[0]));
      return CallValue(e, std::move(callee));
    }
    case Expr::Kind::kFilter: {
      TESSERA_ASSIGN_OR_RETURN(Value input, Eval(*e.args[0]));
      TESSERA_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1));
      absl::StatusOr<Value> out = ApplyFilter(e.name, input, args);
      if (!out.ok()) return AtLine(out.status(), e.line);
      return out;
    }
    case Expr::Kind::kTest: {
      TESSERA_ASSIGN_OR_RETURN(Value input, Eval(*e.args[0]));
      TESSERA_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1));
      absl::StatusOr<bool> passed = ApplyTest(e.name, input, args);
      if (!passed.ok()) return AtLine(passed.status(), e.line);
      return Value::Bool(*passed != e.negated);
    }
    case Expr::Kind::kNot: {
      TESSERA_ASSIGN_OR_RETURN(Value v, Eval(*e.args[0]));
      return Value::Bool(!v.Truthy());
    }
    case Expr::Kind::kNegate: {
      TESSERA_ASSIGN_OR_RETURN(Value v, Eval(*e.args[0]));
      if (v.kind() == Value::Kind::kInt) return Value::Int(-v.AsInt());
      if (v.kind() == Value::Kind::kFloat) return Value::Float(-v.AsDouble());
      return absl::InvalidArgumentError(absl::StrCat("chat template: cannot negate a ", util::ToAbsl(v.TypeName())));
    }
    case Expr::Kind::kBinary: return EvalBinary(e);
    case Expr::Kind::kConditional: {
      TESSERA_ASSIGN_OR_RETURN(Value c, Eval(*e.args[0]));
      if (c.Truthy()) return Eval(*e.args[1]);
      if (e.args[2] == nullptr) return Value();
      return Eval(*e.args[2]);
    }
    case Expr::Kind::kList: {
      Array items;
      for (const ExprPtr& item : e.args) {
        TESSERA_ASSIGN_OR_RETURN(Value v, Eval(*item));
        items.push_back(std::move(v));
      }
      return Value::MakeArray(std::move(items));
    }
    case Expr::Kind::kDict: {
      Object object;
      for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
        TESSERA_ASSIGN_OR_RETURN(Value key, Eval(*e.args[i]));
        TESSERA_ASSIGN_OR_RETURN(Value value, Eval(*e.args[i + 1]));
        object.Set(key.ToText().bytes, std::move(value));
      }
      return Value::MakeObject(std::move(object));
    }
  }
  return Value();
}

absl::StatusOr<bool> Contains(const Value& container, const Value& item) {
  if (container.is_string()) {
    if (!item.is_string()) return absl::InvalidArgumentError("chat template: 'in <string>' needs a string");
    return container.str().find(item.str()) != std::string::npos;
  }
  if (container.is_object()) return item.is_string() && container.object().Find(item.str()) != nullptr;
  if (container.is_array()) {
    for (const Value& v : container.array()) {
      if (v.Equals(item)) return true;
    }
    return false;
  }
  if (container.is_undefined()) return absl::InvalidArgumentError("chat template: 'in' an undefined value");
  return absl::InvalidArgumentError(absl::StrCat("chat template: 'in' a ", util::ToAbsl(container.TypeName())));
}

absl::StatusOr<Value> Arithmetic(BinaryOp op, std::string_view spelling, const Value& a,
                                 const Value& b) {
  if (op == BinaryOp::kAdd && a.is_array() && b.is_array()) {
    Array items = a.array();
    items.insert(items.end(), b.array().begin(), b.array().end());
    return Value::MakeArray(std::move(items));
  }
  if (op == BinaryOp::kMul && a.is_string() && b.kind() == Value::Kind::kInt) {
    Text t;
    for (int64_t i = 0; i < b.AsInt() && i < 100000; ++i) t.Append(a.text());
    return Value::String(std::move(t));
  }
  const bool ints = a.kind() == Value::Kind::kInt && b.kind() == Value::Kind::kInt;
  if (!a.is_number() || !b.is_number()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chat template: unsupported operands for ", util::ToAbsl(spelling), ": ",
        util::ToAbsl(a.TypeName()), " and ", util::ToAbsl(b.TypeName())));
  }
  const double x = a.AsDouble(), y = b.AsDouble();
  const int64_t i = a.AsInt(), j = b.AsInt();
  const bool divides = op == BinaryOp::kDiv || op == BinaryOp::kFloorDiv || op == BinaryOp::kMod;
  if (divides && y == 0) return absl::InvalidArgumentError("chat template: division by zero");
  switch (op) {
    case BinaryOp::kAdd: return ints ? Value::Int(i + j) : Value::Float(x + y);
    case BinaryOp::kSub: return ints ? Value::Int(i - j) : Value::Float(x - y);
    case BinaryOp::kMul: return ints ? Value::Int(i * j) : Value::Float(x * y);
    case BinaryOp::kDiv: return Value::Float(x / y);
    case BinaryOp::kFloorDiv:
      return ints ? Value::Int(static_cast<int64_t>(std::floor(x / y)))
                  : Value::Float(std::floor(x / y));
    case BinaryOp::kMod:
      return ints ? Value::Int(((i % j) + j) % j) : Value::Float(x - y * std::floor(x / y));
    case BinaryOp::kPow:
      return ints && j >= 0 ? Value::Int(static_cast<int64_t>(std::pow(x, y)))
                            : Value::Float(std::pow(x, y));
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("chat template: unknown operator ", util::ToAbsl(spelling)));
  }
}

// `a + b ~ c + ...` (a left-deep chain of + and ~): operands evaluated left to right as the
// nested form would, folded left to right with the same semantics, but a run of strings is
// appended to one Text instead of copying the growing prefix at every operator.
absl::StatusOr<Value> Renderer::EvalConcatChain(const Expr& e) {
  std::vector<const Expr*> spine;  // the chain's operator nodes, outermost first
  const Expr* node = &e;
  while (node->kind == Expr::Kind::kBinary &&
         (node->op == BinaryOp::kAdd || node->op == BinaryOp::kConcat)) {
    spine.push_back(node);
    node = node->args[0].get();
  }
  TESSERA_ASSIGN_OR_RETURN(Value acc, Eval(*node));
  Text text;             // the accumulated string while `in_text`
  bool in_text = false;
  for (auto it = spine.rbegin(); it != spine.rend(); ++it) {
    TESSERA_ASSIGN_OR_RETURN(Value b, Eval(*(*it)->args[1]));
    const BinaryOp op = (*it)->op;
    if (op == BinaryOp::kConcat || (b.is_string() && (in_text || acc.is_string()))) {
      if (!in_text) acc.AppendTextTo(&text);  // text is empty here
      in_text = true;
      b.AppendTextTo(&text);
      continue;
    }
    if (in_text) acc = Value::String(std::exchange(text, Text{}));
    in_text = false;
    TESSERA_ASSIGN_OR_RETURN(acc, Arithmetic(op, (*it)->name, acc, b));
  }
  return in_text ? Value::String(std::move(text)) : acc;
}

absl::StatusOr<Value> Renderer::EvalBinary(const Expr& e) {
  if (e.op == BinaryOp::kAdd || e.op == BinaryOp::kConcat) return EvalConcatChain(e);
  TESSERA_ASSIGN_OR_RETURN(Value a, Eval(*e.args[0]));
  if (e.op == BinaryOp::kAnd) return a.Truthy() ? Eval(*e.args[1]) : a;
  if (e.op == BinaryOp::kOr) return a.Truthy() ? a : Eval(*e.args[1]);
  TESSERA_ASSIGN_OR_RETURN(Value b, Eval(*e.args[1]));
  switch (e.op) {
    case BinaryOp::kEq: return Value::Bool(a.Equals(b));
    case BinaryOp::kNe: return Value::Bool(!a.Equals(b));
    case BinaryOp::kIn:
    case BinaryOp::kNotIn: {
      TESSERA_ASSIGN_OR_RETURN(bool in, Contains(b, a));
      return Value::Bool(in == (e.op == BinaryOp::kIn));
    }
    case BinaryOp::kLt:
    case BinaryOp::kGt:
    case BinaryOp::kLe:
    case BinaryOp::kGe: {
      int c = 0;
      if (a.is_string() && b.is_string()) {
        c = a.str().compare(b.str());
      } else if (a.is_number() && b.is_number()) {
        c = a.AsDouble() < b.AsDouble() ? -1 : a.AsDouble() > b.AsDouble() ? 1 : 0;
      } else {
        return absl::InvalidArgumentError(absl::StrCat("chat template: cannot compare ",
                                                       util::ToAbsl(a.TypeName()), " and ",
                                                       util::ToAbsl(b.TypeName())));
      }
      return Value::Bool(e.op == BinaryOp::kLt   ? c < 0
                         : e.op == BinaryOp::kGt ? c > 0
                         : e.op == BinaryOp::kLe ? c <= 0
                                                 : c >= 0);
    }
    default: return Arithmetic(e.op, e.name, a, b);
  }
}

// What jinja2's lexer does to a source first: "\r\n" and "\r" become "\n", and one trailing
// newline is dropped (keep_trailing_newline=False), so a template file's last newline is not
// output.
std::string NormalizedNewlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] != '\r') {
      out.push_back(source[i]);
      continue;
    }
    out.push_back('\n');
    if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
  }
  if (out.ends_with('\n')) out.pop_back();
  return out;
}

}  // namespace

absl::StatusOr<Template> Template::Parse(std::string_view source) {
  TESSERA_ASSIGN_OR_RETURN(Body body, ParseTemplate(NormalizedNewlines(source)));
  return Template(std::make_shared<const Body>(std::move(body)));
}

absl::StatusOr<Text> Template::Render(const Object& context) const {
  Renderer renderer(context);
  Text out;
  Flow flow = Flow::kNormal;
  TESSERA_RETURN_IF_ERROR(renderer.RenderBody(*body_, &out, &flow));
  return out;
}

}  // namespace tessera::chat::jinja
