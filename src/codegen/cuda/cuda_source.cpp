// Kernel IR -> CUDA C++. See cuda_source.h.
#include "codegen/cuda/cuda_source.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <unordered_map>

#include "codegen/cuda/cuda_prelude.h"
#include "ir/tensor.h"
#include "kernel/gpu_schedule.h"
#include "kernel/lanes.h"
#include "kernel/simplify.h"

namespace kiln::codegen::cuda {
namespace {

using kernel::BinaryOp;
using kernel::Expr;
using kernel::ExprRef;
using kernel::Stmt;
using kernel::StmtRef;
using kernel::UnaryOp;

// A vectorized loop runs as one thread's group of lanes, unrolled, only at the sizes
// vectorizeLanes makes (kernel::kMaxLanes at most); a longer one (an unmapped loop an opaque
// kernel's lowering vectorized for a CPU) stays a loop: unrolled, it compiles for minutes.
bool unrollsAsLanes(const Stmt& s) {
  return s.extent->kind == Expr::Kind::Const && s.extent->i <= kernel::kMaxLanes;
}

// The C type of a value of `t` in registers (f16 and bf16 compute in float).
const char* regType(DType t) {
  switch (t) {
    case DType::Bool: return "bool";
    case DType::I8: return "i8";
    case DType::U8: return "u8";
    case DType::I16: return "i16";
    case DType::U16: return "u16";
    case DType::I32: return "i32";
    case DType::U32: return "u32";
    case DType::I64: return "i64";
    case DType::U64: return "u64";
    case DType::F16:
    case DType::BF16:
    case DType::F32: return "float";
    case DType::F64: return "double";
    case DType::Str: break;  // no target compiles strings: the compile refuses them first
  }
  return "i64";
}

// The C type of an element of `t` in memory.
const char* memType(DType t) {
  if (t == DType::Bool) return "u8";
  if (t == DType::F16 || t == DType::BF16) return "u16";
  return regType(t);
}

// The suffix of the kiln_to_<int> conversion of the prelude.
const char* intName(DType t) {
  switch (t) {
    case DType::I8: return "i8";
    case DType::U8: return "u8";
    case DType::I16: return "i16";
    case DType::U16: return "u16";
    case DType::I32: return "i32";
    case DType::U32: return "u32";
    case DType::U64: return "u64";
    default: return "i64";
  }
}

bool narrow(DType t) { return !isFloat(t) && t != DType::Bool && dtypeSize(t) < 4; }

std::string floatLiteral(double v, DType t) {
  const bool f64 = t == DType::F64;
  if (std::isnan(v))
    return f64 ? "__longlong_as_double(0x7ff8000000000000LL)" : "__int_as_float(0x7fc00000)";
  if (std::isinf(v)) {
    if (f64)
      return v > 0 ? "__longlong_as_double(0x7ff0000000000000LL)"
                   : "__longlong_as_double(0xfff0000000000000LL)";
    return v > 0 ? "__int_as_float(0x7f800000)" : "__int_as_float(0xff800000)";
  }
  if (t == DType::F16) v = halfToFloat(floatToHalf(static_cast<float>(v)));
  if (t == DType::BF16) v = bf16ToFloat(floatToBf16(static_cast<float>(v)));
  char buf[64];
  std::snprintf(buf, sizeof buf, f64 ? "%.17g" : "%.9g",
                f64 ? v : static_cast<double>(static_cast<float>(v)));
  std::string s = buf;
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return f64 ? s : s + "f";
}

std::string intLiteral(int64_t v, DType t) {
  switch (t) {
    case DType::Bool: return v ? "true" : "false";
    case DType::I64:
      if (v == INT64_MIN) return "(-9223372036854775807LL - 1)";
      if (v >= INT32_MIN && v <= INT32_MAX) return std::to_string(v);
      return std::to_string(v) + "LL";
    case DType::U64: return std::to_string(static_cast<uint64_t>(v)) + "ull";
    case DType::I32: return v == INT32_MIN ? "(-2147483647 - 1)" : std::to_string(v);
    case DType::U32: return std::to_string(static_cast<uint32_t>(v)) + "u";
    default: return std::string("(") + regType(t) + ")" + std::to_string(v);
  }
}

// Whether `text` needs no parentheses as an operand: a name, a literal, or a name followed by
// one bracketed group that closes at the end (a call or an element).
bool atomic(const std::string& text) {
  size_t i = 0;
  while (i < text.size() &&
         (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '_' || text[i] == '.'))
    ++i;
  if (i == text.size()) return i > 0;
  if (i == 0 || (text[i] != '(' && text[i] != '[')) return false;
  int depth = 0;
  for (size_t j = i; j < text.size(); ++j) {
    if (text[j] == '(' || text[j] == '[') ++depth;
    if (text[j] == ')' || text[j] == ']') --depth;
    if (depth == 0) return j + 1 == text.size();
  }
  return false;
}

bool isCKeyword(const std::string& s) {
  static const std::set<std::string> words = {
      "auto",      "bool",          "break",       "case",         "char",
      "class",     "const",         "continue",    "default",      "delete",
      "do",        "double",        "else",        "enum",         "extern",
      "false",     "float",         "for",         "goto",         "if",
      "inline",    "int",           "long",        "new",          "operator",
      "private",   "public",        "register",    "return",       "short",
      "signed",    "sizeof",        "static",      "struct",       "switch",
      "template",  "this",          "true",        "typedef",      "union",
      "unsigned",  "void",          "volatile",    "while",        "asm",
      "namespace", "using",         "typename",    "and",          "and_eq",
      "bitand",    "bitor",         "compl",       "not",          "not_eq",
      "or",        "or_eq",         "xor",         "xor_eq",       "alignas",
      "alignof",   "catch",         "char8_t",     "char16_t",     "char32_t",
      "concept",   "const_cast",    "constexpr",   "consteval",    "constinit",
      "decltype",  "dynamic_cast",  "explicit",    "export",       "friend",
      "mutable",   "noexcept",      "nullptr",     "protected",    "reinterpret_cast",
      "requires",  "static_assert", "static_cast", "thread_local", "throw",
      "try",       "typeid",        "virtual",     "wchar_t",      "co_await",
      "co_return", "co_yield",      "i8",          "u8",           "i16",
      "u16",       "i32",           "u32",         "i64",          "u64",
      "blockIdx",  "threadIdx",     "blockDim",    "gridDim",      "warpSize"};
  return words.count(s) > 0;
}

// `text` (one launch's function) with `function` and each of `names` renamed by the order of its
// first appearance: two launches print the same canonical text exactly when one function serves
// both (the names are its own identifiers: the function, its buffers, its scratch arrays).
std::string canonical(const std::string& text, const std::string& function,
                      const std::map<std::string, std::string>& names) {
  std::set<std::string> own{function};
  for (const auto& [buffer, c] : names) own.insert(c);
  std::map<std::string, std::string> renamed;
  std::string out;
  auto isIdent = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t i = 0; i < text.size();) {
    if (!isIdent(text[i])) {
      out += text[i++];
      continue;
    }
    size_t j = i;
    while (j < text.size() && isIdent(text[j])) ++j;
    std::string word = text.substr(i, j - i);
    if (own.count(word) && (i == 0 || text[i - 1] != '.')) {  // not a member (blockIdx.x)
      auto [it, fresh] = renamed.emplace(word, "@" + std::to_string(renamed.size()));
      word = it->second;
    }
    out += word;
    i = j;
  }
  return out;
}

// Prints one kernel's launches. A launch whose function prints the same as an earlier one's
// (canonical) reuses it: a model that repeats a layer (an unrolled recurrence) compiles each
// distinct function once.
class Emitter {
 public:
  Emitter(const kernel::Kernel& k, std::string& out, std::set<std::string>& functions,
          std::map<std::string, std::string>& printed)
      : k_(k), out_(out), functions_(functions), printed_(printed) {}

  StatusOr<std::vector<Launch>> run() {
    std::vector<Launch> launches;
    const std::vector<StmtRef> top =
        k_.body->kind == Stmt::Kind::Block ? k_.body->body : std::vector<StmtRef>{k_.body};
    for (const StmtRef& s : top) {
      Launch l;
      if (s->kind == Stmt::Kind::Call) {
        l.call = s.get();
        launches.push_back(l);
        continue;
      }
      // <kernel>_<n>, unique in the source (kernels of different functions share names).
      l.function = k_.name + "_" + std::to_string(launches.size());
      for (int n = 1; functions_.count(l.function); ++n)
        l.function = k_.name + "_" + std::to_string(launches.size()) + "_" + std::to_string(n);
      functions_.insert(l.function);
      const size_t start = out_.size();
      KILN_RETURN_IF_ERROR(launch(*s, l));
      auto [it, fresh] =
          printed_.emplace(canonical(out_.substr(start), l.function, names_), l.function);
      if (!fresh) {
        out_.resize(start);
        l.function = it->second;
      }
      launches.push_back(l);
    }
    return launches;
  }

 private:
  Status fail(const std::string& why) const {
    return Status::error("kernel " + k_.name + ": " + why);
  }

  // The C type of a value of type t: i64 index arithmetic is `int` in a launch whose indices
  // all fit (index32_).
  std::string typeName(DType t) const { return t == DType::I64 && index32_ ? "int" : regType(t); }

  Status launch(const Stmt& s, Launch& l) {
    const Stmt* t = s.kind == Stmt::Kind::For ? s.body[0].get() : nullptr;
    if (s.loop != kernel::LoopKind::GpuBlock || !t || t->kind != Stmt::Kind::For ||
        t->loop != kernel::LoopKind::GpuThread || t->extent->kind != Expr::Kind::Const)
      return fail("a top-level statement is not a gpu_block loop over a gpu_thread loop "
                  "(schedule it with mapToGpu)");
    if (s.extent->kind == Expr::Kind::Const) {
      l.grid = s.extent->i;
    } else {
      std::optional<int64_t> most = kernel::upperBound(s.extent, k_.symbols);
      if (!most) return fail("its grid " + kernel::printExpr(s.extent) + " is no size expression");
      l.grid = *most;
      l.gridExtent = s.extent;
    }
    l.block = t->extent->i;
    // 32-bit index arithmetic where every index value fits: a 64-bit division by a constant
    // is several multiplies on the GPU, a 32-bit one a multiply-high.
    index32_ = kernel::indicesWithin(s, std::numeric_limits<int32_t>::min(),
                                     std::numeric_limits<int32_t>::max(), k_.symbols);
    names_.clear();
    symbolNames_.clear();
    used_.clear();
    temps_ = 0;
    used_.insert(s.var);
    used_.insert(t->var);
    collectVars(t->body[0]);
    out_ += "extern \"C\" __global__ void __launch_bounds__(" + std::to_string(l.block) + ") " +
            l.function + "(";
    for (size_t i = 0; i < k_.buffers.size(); ++i) {
      const kernel::Buffer& b = k_.buffers[i];
      std::string c = ident(b.name);
      names_[b.name] = c;
      bool in = b.role == kernel::BufferRole::Input;
      out_ += std::string(i ? ", " : "") + (in ? "const " : "") + memType(b.type) + "* " +
              (in ? "__restrict__ " : "") + c;
    }
    // The symbols' values, passed as i64 and used in the launch's index type.
    std::string sizes;
    for (const kernel::Symbol& sym : k_.symbols) {
      const std::string c = ident(sym.name), arg = ident(c + "_arg");
      symbolNames_[sym.name] = c;
      out_ += ", const i64 " + arg;
      sizes += "  const " + typeName(DType::I64) + " " + c + " = " + arg + ";\n";
    }
    out_ += ") {\n" + sizes;
    out_ += "  const " + typeName(DType::I64) + " " + s.var + " = blockIdx.x;\n";
    out_ += "  const " + typeName(DType::I64) + " " + t->var + " = threadIdx.x;\n";
    KILN_RETURN_IF_ERROR(stmt(t->body[0], 1));
    out_ += "}\n\n";
    return Status::ok();
  }

  // A C identifier for a buffer name, unique in the function.
  std::string ident(const std::string& name) {
    std::string c;
    for (char ch : name) c += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
    if (c.empty() || std::isdigit(static_cast<unsigned char>(c[0]))) c = "b_" + c;
    if (c.rfind("kiln_", 0) == 0 || c.rfind("__", 0) == 0) c = "b_" + c;
    std::string u = c;
    for (int n = 1; used_.count(u) || isCKeyword(u); ++n) u = c + "_" + std::to_string(n);
    used_.insert(u);
    return u;
  }

  void collectVars(const StmtRef& s) {
    if (!s) return;
    if (s->kind == Stmt::Kind::For) used_.insert(s->var);
    for (const StmtRef& b : s->body) collectVars(b);
  }

  std::string pad(int depth) const { return std::string(2 * static_cast<size_t>(depth), ' '); }

  Status stmt(const StmtRef& s, int depth);
  Status stmtBody(const Stmt& s, int depth);
  std::string freshTemp(const std::string& prefix);
  Status wideCopy(const Stmt& s, int depth);
  StatusOr<std::string> expr(const ExprRef& e, int depth);
  StatusOr<std::string> node(const Expr& e, const std::vector<std::string>& a);
  StatusOr<std::string> unaryText(const Expr& e, const std::string& x);
  StatusOr<std::string> binaryText(const Expr& e, const std::string& x, const std::string& y);
  std::string castText(const std::string& x, DType from, DType to);
  StatusOr<std::string> buffer(const std::string& name, DType type);
  void countUses(const ExprRef& e);

  const kernel::Kernel& k_;
  std::string& out_;
  std::set<std::string>& functions_;
  std::map<std::string, std::string>& printed_;  // canonical text -> function
  std::map<std::string, std::string> names_;     // buffer -> C identifier (scratch included)
  std::map<std::string, DType> scratch_;
  std::map<std::string, std::string> symbolNames_;  // symbol -> C identifier
  std::set<std::string> used_;
  int temps_ = 0;
  bool index32_ = false;  // this launch's indices all fit in 32 bits
  // Per statement: the uses of each expression node, and the temporaries already printed.
  std::unordered_map<const Expr*, int> uses_;
  std::unordered_map<const Expr*, std::string> memo_;
  std::string pending_;  // temporaries printed before the statement that needs them
};

StatusOr<std::string> Emitter::buffer(const std::string& name, DType type) {
  auto it = names_.find(name);
  if (it == names_.end()) return fail("unknown buffer '" + name + "'");
  const kernel::Buffer* b = k_.find(name);
  DType held = b ? b->type : scratch_.at(name);
  if (held != type)
    return fail("buffer '" + name + "' holds " + std::string(dtypeName(held)) + ", not " +
                std::string(dtypeName(type)));
  return it->second;
}

void Emitter::countUses(const ExprRef& e) {
  if (!e) return;
  if (uses_[e.get()]++ > 0) return;
  for (const ExprRef& a : e->args) countUses(a);
}

// A node used more than once in the statement gets a temporary; the rest print inline.
StatusOr<std::string> Emitter::expr(const ExprRef& e, int depth) {
  if (e->kind == Expr::Kind::Const)
    return isFloat(e->type) ? floatLiteral(e->f, e->type) : intLiteral(e->i, e->type);
  if (e->kind == Expr::Kind::Var) {
    auto sym = symbolNames_.find(e->name);
    return sym == symbolNames_.end() ? e->name : sym->second;
  }
  if (auto m = memo_.find(e.get()); m != memo_.end()) return m->second;
  std::vector<std::string> args;
  for (const ExprRef& a : e->args) {
    KILN_ASSIGN_OR_RETURN(std::string t, expr(a, depth));
    args.push_back(std::move(t));
  }
  KILN_ASSIGN_OR_RETURN(std::string text, node(*e, args));
  if (uses_[e.get()] <= 1) return atomic(text) ? text : "(" + text + ")";
  const std::string name = freshTemp("v");
  pending_ += pad(depth) + "const " + typeName(e->type) + " " + name + " = " + text + ";\n";
  memo_[e.get()] = name;
  return name;
}

StatusOr<std::string> Emitter::node(const Expr& e, const std::vector<std::string>& a) {
  switch (e.kind) {
    case Expr::Kind::Load: {
      KILN_ASSIGN_OR_RETURN(std::string b, buffer(e.name, e.type));
      const std::string at = b + "[" + a[0] + "]";
      if (e.type == DType::Bool) return at + " != 0";
      if (e.type == DType::F16) return "kiln_h2f(" + at + ")";
      if (e.type == DType::BF16) return "kiln_bf2f(" + at + ")";
      return at;
    }
    case Expr::Kind::Unary: return unaryText(e, a[0]);
    case Expr::Kind::Binary: return binaryText(e, a[0], a[1]);
    case Expr::Kind::Select: return a[0] + " ? " + a[1] + " : " + a[2];
    case Expr::Kind::Cast: return castText(a[0], e.args[0]->type, e.type);
    default: break;
  }
  return fail("unknown expression kind");
}

StatusOr<std::string> Emitter::unaryText(const Expr& e, const std::string& x) {
  DType t = e.args[0]->type;
  if (t == DType::Bool) {
    if (e.unary == UnaryOp::Not) return "!" + x;
    return fail(std::string(kernel::unaryOpName(e.unary)) + " is not defined for bool");
  }
  if (!isFloat(t)) {
    std::string c = regType(t);
    switch (e.unary) {
      case UnaryOp::Neg: return "kiln_neg(" + x + ")";
      case UnaryOp::Abs: return "kiln_abs(" + x + ")";
      case UnaryOp::Sign:
        return isUnsignedInteger(t) ? c + "(" + x + " != 0)"
                                    : c + "(" + x + " > 0 ? 1 : " + x + " < 0 ? -1 : 0)";
      case UnaryOp::Not: return c + "(~" + x + ")";
      default:
        return fail(std::string(kernel::unaryOpName(e.unary)) + " is not defined for " +
                    std::string(dtypeName(t)));
    }
  }
  const std::string f = t == DType::F64 ? "" : "f";
  auto call = [&](const char* fn) { return std::string(fn) + f + "(" + x + ")"; };
  const std::string lanes = e.i ? ", " + std::to_string(e.i) : "";  // a warp op's lane groups
  switch (e.unary) {
    case UnaryOp::Neg: return "-" + x;
    case UnaryOp::Abs: return call("fabs");
    case UnaryOp::Sign: return "kiln_sign(" + x + ")";
    case UnaryOp::Floor: return call("floor");
    case UnaryOp::Ceil: return call("ceil");
    case UnaryOp::RoundNearestEven: return call("rint");
    case UnaryOp::Sqrt: return call("sqrt");
    case UnaryOp::Rsqrt: return (f.empty() ? "1.0 / sqrt(" : "1.0f / sqrtf(") + x + ")";
    case UnaryOp::Sigmoid:
      return (f.empty() ? "1.0 / (1.0 + exp(-" : "1.0f / (1.0f + expf(-") + x + "))";
    case UnaryOp::Exp: return call("exp");
    case UnaryOp::Expm1: return call("expm1");
    case UnaryOp::Log: return call("log");
    case UnaryOp::Log1p: return call("log1p");
    case UnaryOp::Sin: return call("sin");
    case UnaryOp::Cos: return call("cos");
    case UnaryOp::Tan: return call("tan");
    case UnaryOp::Asin: return call("asin");
    case UnaryOp::Acos: return call("acos");
    case UnaryOp::Atan: return call("atan");
    case UnaryOp::Sinh: return call("sinh");
    case UnaryOp::Cosh: return call("cosh");
    case UnaryOp::Asinh: return call("asinh");
    case UnaryOp::Acosh: return call("acosh");
    case UnaryOp::Atanh: return call("atanh");
    case UnaryOp::Tanh: return call("tanh");
    case UnaryOp::Erf: return f.empty() ? call("erf") : "kiln_erf(" + x + ")";
    case UnaryOp::IsFinite: return "isfinite(" + x + ")";
    case UnaryOp::IsInf: return "isinf(" + x + ")";
    case UnaryOp::IsNan: return "isnan(" + x + ")";
    case UnaryOp::WarpSum: return "kiln_warp_sum(" + x + lanes + ")";
    case UnaryOp::WarpMax: return "kiln_warp_max(" + x + lanes + ")";
    case UnaryOp::WarpMin: return "kiln_warp_min(" + x + lanes + ")";
    case UnaryOp::Not: break;
  }
  return fail(std::string(kernel::unaryOpName(e.unary)) + " is not defined for " +
              std::string(dtypeName(t)));
}

StatusOr<std::string> Emitter::binaryText(const Expr& e, const std::string& x,
                                          const std::string& y) {
  DType t = e.args[0]->type;
  auto infix = [&](const char* op) {
    std::string s = x + " " + op + " " + y;
    return narrow(t) ? std::string(regType(t)) + "(" + s + ")" : s;
  };
  auto fn = [&](const char* name) { return std::string(name) + "(" + x + ", " + y + ")"; };
  switch (e.binary) {
    case BinaryOp::Lt: return x + " < " + y;
    case BinaryOp::Le: return x + " <= " + y;
    case BinaryOp::Gt: return x + " > " + y;
    case BinaryOp::Ge: return x + " >= " + y;
    case BinaryOp::Eq: return x + " == " + y;
    case BinaryOp::Ne: return x + " != " + y;
    default: break;
  }
  if (t == DType::Bool) {
    switch (e.binary) {
      case BinaryOp::And:
      case BinaryOp::Min: return x + " && " + y;
      case BinaryOp::Or:
      case BinaryOp::Max: return x + " || " + y;
      case BinaryOp::Xor: return x + " != " + y;
      default: break;
    }
  } else if (isFloat(t)) {
    const bool f64 = t == DType::F64;
    switch (e.binary) {
      case BinaryOp::Add: return x + " + " + y;
      case BinaryOp::Sub: return x + " - " + y;
      case BinaryOp::Mul: return x + " * " + y;
      case BinaryOp::Div: return x + " / " + y;
      case BinaryOp::Rem: return fn(f64 ? "fmod" : "fmodf");
      case BinaryOp::Pow: return fn(f64 ? "pow" : "powf");
      case BinaryOp::Atan2: return fn(f64 ? "atan2" : "atan2f");
      case BinaryOp::Max: return fn("kiln_max");
      case BinaryOp::Min: return fn("kiln_min");
      default: break;
    }
  } else {
    const std::string c = typeName(t);
    auto helper = [&](const char* name) {
      return std::string(name) + "((" + c + ")" + x + ", (" + c + ")" + y + ")";
    };
    switch (e.binary) {
      case BinaryOp::Add: return infix("+");
      case BinaryOp::Sub: return infix("-");
      case BinaryOp::Mul: return infix("*");
      case BinaryOp::Div: return helper("kiln_div");
      case BinaryOp::Rem: return helper("kiln_rem");
      case BinaryOp::Pow: return helper("kiln_pow");
      case BinaryOp::Max: return x + " > " + y + " ? " + x + " : " + y;
      case BinaryOp::Min: return x + " < " + y + " ? " + x + " : " + y;
      case BinaryOp::And: return infix("&");
      case BinaryOp::Or: return infix("|");
      case BinaryOp::Xor: return infix("^");
      case BinaryOp::ShiftLeft: return helper("kiln_shl");
      case BinaryOp::ShiftRightLogical: return helper("kiln_shr_logical");
      case BinaryOp::ShiftRightArithmetic: return helper("kiln_shr_arith");
      default: break;
    }
  }
  return fail(std::string(kernel::binaryOpName(e.binary)) + " is not defined for " +
              std::string(dtypeName(t)));
}

// The interpreter's convert: floats round to nearest even once, float -> int truncates and
// saturates (NaN -> 0), int -> int wraps, anything -> bool is != 0.
std::string Emitter::castText(const std::string& x, DType from, DType to) {
  if (from == to) return x;
  if (to == DType::Bool) return x + " != 0";
  if (isFloat(from) && !isFloat(to)) return std::string("kiln_to_") + intName(to) + "(" + x + ")";
  if (to == DType::F16) return "kiln_round_h((float)" + x + ")";
  if (to == DType::BF16) return "kiln_round_bf((float)" + x + ")";
  if (to == DType::F32 && (from == DType::F16 || from == DType::BF16)) return x;
  return std::string("(") + regType(to) + ")" + x;
}

Status Emitter::stmt(const StmtRef& s, int depth) {
  uses_.clear();
  memo_.clear();
  pending_.clear();
  for (const ExprRef& e : {s->index, s->value, s->cond, s->extent, s->fromIndex}) countUses(e);
  return stmtBody(*s, depth);
}

Status Emitter::stmtBody(const Stmt& s, int depth) {
  const std::string p = pad(depth);
  switch (s.kind) {
    case Stmt::Kind::Block:
      for (const StmtRef& b : s.body) KILN_RETURN_IF_ERROR(stmt(b, depth));
      return Status::ok();
    case Stmt::Kind::For: {
      KILN_ASSIGN_OR_RETURN(std::string n, expr(s.extent, depth));
      out_ += pending_;
      if (s.loop == kernel::LoopKind::Unrolled ||
          (s.loop == kernel::LoopKind::Vectorized && unrollsAsLanes(s)))
        out_ += p + "#pragma unroll\n";
      out_ += p + "for (" + typeName(DType::I64) + " " + s.var + " = 0; " + s.var + " < " + n +
              "; ++" + s.var + ") {\n";
      KILN_RETURN_IF_ERROR(stmt(s.body[0], depth + 1));
      out_ += p + "}\n";
      return Status::ok();
    }
    case Stmt::Kind::Store: {
      KILN_ASSIGN_OR_RETURN(std::string b, buffer(s.buffer, s.value->type));
      KILN_ASSIGN_OR_RETURN(std::string i, expr(s.index, depth));
      // A stored cast from f32 converts once: the store's conversion rounds to nearest even as
      // the cast does, so the cast's own round trip (two more conversions) is dropped.
      DType t = s.value->type;
      const bool narrowing = s.value->kind == Expr::Kind::Cast &&
                             (t == DType::F16 || t == DType::BF16) &&
                             s.value->args[0]->type == DType::F32;
      KILN_ASSIGN_OR_RETURN(std::string v, expr(narrowing ? s.value->args[0] : s.value, depth));
      if (t == DType::Bool) v = "(u8)" + v;
      else if (t == DType::F16) v = "kiln_f2h(" + v + ")";
      else if (t == DType::BF16) v = "kiln_f2bf(" + v + ")";
      out_ += pending_ + p + b + "[" + i + "] = " + v + ";\n";
      return Status::ok();
    }
    case Stmt::Kind::Alloc: {
      std::string c = ident(s.buffer);
      names_[s.buffer] = c;
      scratch_[s.buffer] = s.type;
      // Local arrays are aligned for the wide copies into and out of them.
      out_ += p + "{\n" + p + "  " +
              (s.scope == kernel::MemoryScope::Shared ? "__shared__ " : "__align__(16) ") +
              memType(s.type) + " " + c + "[" + std::to_string(s.size) + "];\n";
      KILN_RETURN_IF_ERROR(stmt(s.body[0], depth + 1));
      out_ += p + "}\n";
      return Status::ok();
    }
    case Stmt::Kind::If: {
      KILN_ASSIGN_OR_RETURN(std::string c, expr(s.cond, depth));
      out_ += pending_ + p + "if (" + c + ") {\n";
      KILN_RETURN_IF_ERROR(stmt(s.body[0], depth + 1));
      if (s.body.size() > 1 && s.body[1]) {
        out_ += p + "} else {\n";
        KILN_RETURN_IF_ERROR(stmt(s.body[1], depth + 1));
      }
      out_ += p + "}\n";
      return Status::ok();
    }
    case Stmt::Kind::Barrier: out_ += p + "__syncthreads();\n"; return Status::ok();
    case Stmt::Kind::Call:
      return fail("library call " + s.callee() + " inside a launch has no GPU kernel");
    case Stmt::Kind::Reduce:
      return fail("a reduce into %" + s.buffer + " was not lowered (lowerReductions)");
    case Stmt::Kind::Copy: return wideCopy(s, depth);
  }
  return fail("unknown statement kind");
}

std::string Emitter::freshTemp(const std::string& prefix) {
  std::string name;
  do name = prefix + std::to_string(temps_++);
  while (used_.count(name));
  return name;
}

// A Copy as accesses of up to 16 bytes: uint4, uint2, ... (both sides aligned to the access:
// the verifier checked each index is a multiple of the element count).
Status Emitter::wideCopy(const Stmt& s, int depth) {
  const kernel::Buffer* kb = k_.find(s.buffer);
  auto held = scratch_.find(s.buffer);
  if (!kb && held == scratch_.end()) return fail("unknown buffer '" + s.buffer + "'");
  const DType t = kb ? kb->type : held->second;
  KILN_ASSIGN_OR_RETURN(std::string to, buffer(s.buffer, t));
  KILN_ASSIGN_OR_RETURN(std::string from, buffer(s.from, t));
  KILN_ASSIGN_OR_RETURN(std::string i, expr(s.index, depth));
  KILN_ASSIGN_OR_RETURN(std::string j, expr(s.fromIndex, depth));
  const int64_t bytes = s.lanes * static_cast<int64_t>(dtypeSize(t));
  int64_t access = 16;
  while (access > 1 && bytes % access != 0) access /= 2;
  const char* type = access == 16  ? "uint4"
                     : access == 8 ? "uint2"
                     : access == 4 ? "unsigned"
                     : access == 2 ? "unsigned short"
                                   : "unsigned char";
  const std::string dst = std::string("reinterpret_cast<") + type + "*>(" + to + " + " + i + ")";
  const std::string src =
      std::string("reinterpret_cast<const ") + type + "*>(" + from + " + " + j + ")";
  out_ += pending_;
  for (int64_t c = 0; c < bytes / access; ++c)
    out_ += pad(depth) + dst + "[" + std::to_string(c) + "] = " + src + "[" + std::to_string(c) +
            "];\n";
  return Status::ok();
}

}  // namespace

StatusOr<CudaSource> emitCuda(const std::vector<kernel::Kernel>& kernels) {
  CudaSource out;
  out.source = kCudaPrelude;
  out.source += "\n";
  std::set<std::string> functions;
  std::map<std::string, std::string> printed;
  for (const kernel::Kernel& k : kernels) {
    Emitter e(k, out.source, functions, printed);
    KILN_ASSIGN_OR_RETURN(std::vector<Launch> launches, e.run());
    out.launches.push_back(std::move(launches));
  }
  return out;
}

}  // namespace kiln::codegen::cuda
