// The kernel IR printer: kernels and expressions as `kiln-opt --lower` shows them and
// kernel/parse.h reads them back (kernel_ir.h declares printKernel and printExpr).
#include <cmath>
#include <cstdio>
#include <string>

#include "ir/text/text.h"
#include "kernel/kernel_ir.h"

namespace kiln::kernel {

namespace {

std::string constText(const Expr& e) {
  if (isFloat(e.type)) {
    if (std::isnan(e.f)) return "nan";
    if (std::isinf(e.f)) return e.f > 0 ? "inf" : "-inf";
    // 9 significant digits read an f32 value back exactly; an f64 value takes up to 17.
    char buf[40];
    for (int digits = 9; digits <= 17; ++digits) {
      std::snprintf(buf, sizeof buf, "%.*g", digits, e.f);
      if (e.type != DType::F64 || std::strtod(buf, nullptr) == e.f) break;
    }
    std::string s = buf;
    if (s.find_first_of(".e") == std::string::npos) s += ".0";
    return s;
  }
  if (isBool(e.type)) return e.i ? "true" : "false";
  return std::to_string(e.i);
}

const char* infixOf(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add: return " + ";
    case BinaryOp::Sub: return " - ";
    case BinaryOp::Mul: return " * ";
    case BinaryOp::Div: return " / ";
    case BinaryOp::Rem: return " % ";
    case BinaryOp::Lt: return " < ";
    case BinaryOp::Le: return " <= ";
    case BinaryOp::Gt: return " > ";
    case BinaryOp::Ge: return " >= ";
    case BinaryOp::Eq: return " == ";
    case BinaryOp::Ne: return " != ";
    default: return nullptr;
  }
}

int precedence(const Expr& e) {
  if (e.kind != Expr::Kind::Binary || !infixOf(e.binary)) return 3;
  switch (e.binary) {
    case BinaryOp::Mul:
    case BinaryOp::Div:
    case BinaryOp::Rem: return 2;
    case BinaryOp::Add:
    case BinaryOp::Sub: return 1;
    default: return 0;
  }
}

void printExprTo(const Expr& e, std::string& out) {
  switch (e.kind) {
    case Expr::Kind::Const: out += constText(e); return;
    case Expr::Kind::Var: out += e.name; return;
    case Expr::Kind::Load:
      out += "%" + e.name + "[";
      printExprTo(*e.args[0], out);
      out += "]";
      return;
    case Expr::Kind::Unary:
      out += unaryOpName(e.unary);
      out += "(";
      printExprTo(*e.args[0], out);
      if (e.i) out += ", " + std::to_string(e.i);  // a warp op's group of lanes
      out += ")";
      return;
    case Expr::Kind::Binary: {
      if (const char* infix = infixOf(e.binary)) {
        int p = precedence(e);
        auto side = [&](const Expr& a, bool right) {
          bool paren = precedence(a) < p || (right && precedence(a) == p);
          if (paren) out += "(";
          printExprTo(a, out);
          if (paren) out += ")";
        };
        side(*e.args[0], false);
        out += infix;
        side(*e.args[1], true);
        return;
      }
      out += binaryOpName(e.binary);
      out += "(";
      printExprTo(*e.args[0], out);
      out += ", ";
      printExprTo(*e.args[1], out);
      out += ")";
      return;
    }
    case Expr::Kind::Select:
      out += "select(";
      for (size_t i = 0; i < 3; ++i) {
        if (i) out += ", ";
        printExprTo(*e.args[i], out);
      }
      out += ")";
      return;
    case Expr::Kind::Cast:
      out += std::string(dtypeName(e.type)) + "(";
      printExprTo(*e.args[0], out);
      out += ")";
      return;
  }
}

void printStmtTo(const Stmt& s, int indent, std::string& out) {
  std::string pad(static_cast<size_t>(indent) * 2, ' ');
  switch (s.kind) {
    case Stmt::Kind::Block:
      for (const StmtRef& b : s.body)
        if (b) printStmtTo(*b, indent, out);
      return;
    case Stmt::Kind::For:
      out +=
          pad + loopKindName(s.loop) + " for " + s.var + " in [0, " + printExpr(s.extent) + ") {\n";
      printStmtTo(*s.body[0], indent + 1, out);
      out += pad + "}\n";
      return;
    case Stmt::Kind::Store:
      out += pad + "%" + s.buffer + "[" + printExpr(s.index) + "] = " + printExpr(s.value) + "\n";
      return;
    case Stmt::Kind::Alloc:
      out += pad + (s.scope == MemoryScope::Local ? "local" : "shared") + " %" + s.buffer + ": " +
             std::string(dtypeName(s.type)) + "[" + std::to_string(s.size) + "] {\n";
      printStmtTo(*s.body[0], indent + 1, out);
      out += pad + "}\n";
      return;
    case Stmt::Kind::If:
      out += pad + "if (" + printExpr(s.cond) + ") {\n";
      printStmtTo(*s.body[0], indent + 1, out);
      if (s.body.size() > 1 && s.body[1]) {
        out += pad + "} else {\n";
        printStmtTo(*s.body[1], indent + 1, out);
      }
      out += pad + "}\n";
      return;
    case Stmt::Kind::Barrier: out += pad + "barrier\n"; return;
    case Stmt::Kind::Copy:
      out += pad + "%" + s.buffer + "[" + printExpr(s.index) + " : " + std::to_string(s.lanes) +
             "] = %" + s.from + "[" + printExpr(s.fromIndex) + " : " + std::to_string(s.lanes) +
             "]\n";
      return;
    case Stmt::Kind::Reduce:
      // %acc[0] = reduce<sum>(r0 in [0, 8), r1 in [0, 300)) %x[r0 * 300 + r1]
      out += pad + "%" + s.buffer + "[" + printExpr(s.index) + "] = reduce<" +
             reduceKindName(s.reduce) + ">(";
      for (size_t i = 0; i < s.vars.size(); ++i)
        out += (i ? ", " : "") + s.vars[i] + " in [0, " + printExpr(s.extents[i]) + ")";
      out += ") " + printExpr(s.value) + "\n";
      return;
    case Stmt::Kind::Call:
      out += pad + "call " + s.callee() + "(";
      for (size_t i = 0; i < s.args.size(); ++i) out += (i ? ", %" : "%") + s.args[i];
      out += ")";
      if (!s.attrs.empty()) out += " " + printAttributes(s.op, s.attrs);
      if (!s.layout.empty()) out += " layout " + s.layout;
      // call dot_general(%a, %w, %out, %bias) then add(%bias, dims [1]), clamp(0, inf)
      for (size_t i = 0; i < s.postOps.size(); ++i) {
        const PostOp& p = s.postOps[i];
        out += std::string(i ? ", " : " then ") + postOpName(p.kind);
        if (p.kind == PostOp::Kind::Add || p.kind == PostOp::Kind::Mul) {
          out += "(%" + p.operand + ", dims [";
          for (size_t d = 0; d < p.operandDims.size(); ++d)
            out += (d ? ", " : "") + std::to_string(p.operandDims[d]);
          out += "])";
        } else if (p.kind == PostOp::Kind::Clamp) {
          out += "(" + constText(*floatConst(p.lo, DType::F32)) + ", " +
                 constText(*floatConst(p.hi, DType::F32)) + ")";
        }
      }
      out += "\n";
      return;
  }
}

}  // namespace

std::string printExpr(const ExprRef& e) {
  std::string out;
  printExprTo(*e, out);
  return out;
}

const char* bufferRoleName(BufferRole r) {
  switch (r) {
    case BufferRole::Input: return "in";
    case BufferRole::Output: return "out";
    case BufferRole::Temp: return "temp";
    case BufferRole::Internal: return "internal";
  }
  return "?";
}

std::string printKernel(const Kernel& k) {
  std::string out = "kernel " + k.name + "(";
  for (size_t i = 0; i < k.symbols.size(); ++i) {
    const Symbol& s = k.symbols[i];
    out += (i ? ", " : "") + std::string("sym ") + s.name + " in [" + std::to_string(s.lo) + ", " +
           std::to_string(s.hi) + "]";
  }
  for (size_t i = 0; i < k.buffers.size(); ++i) {
    const Buffer& b = k.buffers[i];
    out += i || !k.symbols.empty() ? ", " : "";
    out += std::string(bufferRoleName(b.role)) + " %";
    out += b.name + ": " + std::string(dtypeName(b.type)) + "[";
    for (size_t d = 0; d < b.shape.size(); ++d)
      out += (d ? "," : "") + (b.dims.empty() ? std::to_string(b.shape[d]) : printExpr(b.dims[d]));
    out += "]";
    if (!b.layout.empty()) out += " layout " + b.layout;
  }
  out += ") {\n";
  if (k.body) printStmtTo(*k.body, 1, out);
  out += "}\n";
  return out;
}

std::string printKernels(const std::vector<Kernel>& ks) {
  std::string out;
  for (size_t i = 0; i < ks.size(); ++i) out += (i ? "\n" : "") + printKernel(ks[i]);
  return out;
}

}  // namespace kiln::kernel
