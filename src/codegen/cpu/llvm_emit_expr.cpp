// Kernel IR -> LLVM IR, expressions: KernelEmitter's (llvm_emitter.h) types, f16/bf16 rounding
// and the SSA value of each expression node in its register type. The numerics follow the
// reference interpreter (src/interp/eval_elementwise.cpp); see docs/codegen.md.
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "codegen/cpu/llvm_emitter.h"
#include "codegen/cpu/llvm_math.h"
#include "ir/tensor.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/DerivedTypes.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Intrinsics.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"

namespace kiln::codegen::cpu::llvm_emit {

// ---- types ----

llvm::Type* KernelEmitter::regType(DType t) {
  switch (t) {
    case DType::Bool: return b_.getInt1Ty();
    case DType::I8:
    case DType::U8: return b_.getInt8Ty();
    case DType::I16:
    case DType::U16: return b_.getInt16Ty();
    case DType::I32:
    case DType::U32: return b_.getInt32Ty();
    case DType::I64:
    case DType::U64: return b_.getInt64Ty();
    case DType::F16:
    case DType::BF16:
    case DType::F32: return b_.getFloatTy();
    case DType::F64: return b_.getDoubleTy();
    case DType::Str: break;  // no target compiles strings: the compile refuses them first
  }
  return b_.getInt64Ty();
}

llvm::Type* KernelEmitter::memType(DType t) {
  if (t == DType::Bool) return b_.getInt8Ty();
  if (isHalfLike(t)) return b_.getInt16Ty();
  return regType(t);
}

// The type math functions of dtype t run in: float for f16/bf16, double for f32 and f64 (the
// interpreter's choice, so results agree to the last bit where libm is the same).
llvm::Type* KernelEmitter::mathType(DType t) {
  return isHalfLike(t) ? b_.getFloatTy() : b_.getDoubleTy();
}

// ---- rounding helpers ----

// f32 -> the bits of bf16, rounded to nearest even; NaN stays a quiet NaN (floatToBf16).
llvm::Value* KernelEmitter::bf16Bits(llvm::Value* f) {
  llvm::Value* x = b_.CreateBitCast(f, b_.getInt32Ty());
  llvm::Value* hi = b_.CreateLShr(x, 16);
  llvm::Value* nanBits = b_.CreateOr(hi, 0x40);
  llvm::Value* rounding = b_.CreateAdd(b_.getInt32(0x7fff), b_.CreateAnd(hi, 1));
  llvm::Value* rounded = b_.CreateLShr(b_.CreateAdd(x, rounding), 16);
  llvm::Value* isNan = b_.CreateFCmpUNO(f, f);
  return b_.CreateTrunc(b_.CreateSelect(isNan, nanBits, rounded), b_.getInt16Ty());
}

llvm::Value* KernelEmitter::bf16ToFloat(llvm::Value* bits16) {
  llvm::Value* x = b_.CreateShl(b_.CreateZExt(bits16, b_.getInt32Ty()), 16);
  return b_.CreateBitCast(x, b_.getFloatTy());
}

llvm::Value* KernelEmitter::roundToBf16(llvm::Value* f) { return bf16ToFloat(bf16Bits(f)); }

llvm::Value* KernelEmitter::roundToHalf(llvm::Value* f) {
  return b_.CreateFPExt(b_.CreateFPTrunc(f, b_.getHalfTy()), b_.getFloatTy());
}

// double -> float rounded to odd (interp's roundToOddFloat): rounding that float once more to
// f16/bf16 equals rounding the double directly.
llvm::Value* KernelEmitter::roundToOddFloat(llvm::Value* d) {
  llvm::Value* f = b_.CreateFPTrunc(d, b_.getFloatTy());
  llvm::Value* back = b_.CreateFPExt(f, b_.getDoubleTy());
  llvm::Value* keep = b_.CreateOr(b_.CreateFCmpOEQ(back, d), b_.CreateFCmpUNO(d, d));
  llvm::Value* bits = b_.CreateBitCast(f, b_.getInt32Ty());
  llvm::Value* tooBig = b_.CreateFCmpOGT(fabs(back), fabs(d));
  bits = b_.CreateSelect(tooBig, b_.CreateSub(bits, b_.getInt32(1)), bits);
  llvm::Value* odd = b_.CreateBitCast(b_.CreateOr(bits, 1), b_.getFloatTy());
  return b_.CreateSelect(keep, f, odd);
}

llvm::Value* KernelEmitter::fabs(llvm::Value* v) {
  return b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, v);
}

// ---- expressions ----

// Memoised per statement (emitStmt clears the memo): a node shared in the expression DAG is
// emitted once, and everything one statement emits is in one basic block, so it dominates.
llvm::Value* KernelEmitter::emitExpr(const ExprRef& e) {
  auto it = emitted_.find(e.get());
  if (it != emitted_.end()) return it->second;
  llvm::Value* v = emitExprNode(e);
  emitted_.emplace(e.get(), v);
  return v;
}

llvm::Value* KernelEmitter::emitExprNode(const ExprRef& e) {
  switch (e->kind) {
    case Expr::Kind::Const: return emitConst(*e);
    case Expr::Kind::Var: return lookupVar(e->name);
    case Expr::Kind::Load: return emitLoad(*e);
    case Expr::Kind::Unary: return emitUnary(*e);
    case Expr::Kind::Binary: return emitBinary(*e);
    case Expr::Kind::Select: {
      llvm::Value* cond = emitExpr(e->args[0]);
      llvm::Value* a = emitExpr(e->args[1]);
      llvm::Value* other = emitExpr(e->args[2]);
      if (!cond->getType()->isIntegerTy(1) || a->getType() != other->getType())
        return fail("select needs a bool condition and arms of one type", regType(e->type));
      return b_.CreateSelect(cond, a, other);
    }
    case Expr::Kind::Cast: return emitCast(emitExpr(e->args[0]), e->args[0]->type, e->type);
  }
  return fail("unknown expression kind", regType(e->type));
}

llvm::Value* KernelEmitter::emitConst(const Expr& e) {
  switch (e.type) {
    case DType::Bool: return b_.getInt1(e.i != 0);
    case DType::F16:
      return llvm::ConstantFP::get(b_.getFloatTy(),
                                   kiln::halfToFloat(floatToHalf(static_cast<float>(e.f))));
    case DType::BF16:
      return llvm::ConstantFP::get(b_.getFloatTy(),
                                   kiln::bf16ToFloat(floatToBf16(static_cast<float>(e.f))));
    case DType::F32: return llvm::ConstantFP::get(b_.getFloatTy(), static_cast<float>(e.f));
    case DType::F64: return llvm::ConstantFP::get(b_.getDoubleTy(), e.f);
    default: return llvm::ConstantInt::get(regType(e.type), static_cast<uint64_t>(e.i), true);
  }
}

llvm::Value* KernelEmitter::lookupVar(const std::string& name) {
  for (auto it = fs_.vars.rbegin(); it != fs_.vars.rend(); ++it)
    if (it->first == name) return it->second;
  return fail("unknown loop variable '" + name + "'", b_.getInt64Ty());
}

const BufferBinding* KernelEmitter::lookupBuffer(const std::string& name) {
  for (auto it = fs_.buffers.rbegin(); it != fs_.buffers.rend(); ++it)
    if (it->name == name) return &*it;
  for (const auto& [outer, why] : hiddenAllocs_)
    if (outer == name) {
      fail(why, b_.getInt1Ty());
      return nullptr;
    }
  fail("unknown buffer '" + name + "'", b_.getInt1Ty());
  return nullptr;
}

// The address of element `index` of buffer `name`, checking the element type.
llvm::Value* KernelEmitter::address(const std::string& name, DType type, const ExprRef& index,
                                    const BufferBinding** out) {
  const BufferBinding* buf = lookupBuffer(name);
  *out = buf;
  if (!buf) return nullptr;
  if (buf->type != type) {
    fail("buffer '" + name + "' holds " + std::string(dtypeName(buf->type)) + ", not " +
             std::string(dtypeName(type)),
         b_.getInt1Ty());
    return nullptr;
  }
  llvm::Value* i = emitExpr(index);
  if (!i->getType()->isIntegerTy(64)) {
    fail("the index into '" + name + "' is not i64", b_.getInt1Ty());
    return nullptr;
  }
  return b_.CreateInBoundsGEP(memType(type), buf->ptr, i);
}

llvm::Value* KernelEmitter::emitLoad(const Expr& e) {
  const BufferBinding* buf = nullptr;
  llvm::Value* p = address(e.name, e.type, e.args[0], &buf);
  if (!p) return llvm::PoisonValue::get(regType(e.type));
  llvm::LoadInst* v =
      b_.CreateAlignedLoad(memType(e.type), p, llvm::Align(dtypeSize(e.type)), e.name);
  tagAccess(v);
  if (e.type == DType::Bool) return b_.CreateICmpNE(v, b_.getInt8(0));
  if (e.type == DType::F16)
    return b_.CreateFPExt(b_.CreateBitCast(v, b_.getHalfTy()), b_.getFloatTy());
  if (e.type == DType::BF16) return bf16ToFloat(v);
  return v;
}

// Register value of `from` -> register value of `to`, with the semantics of the interpreter's
// convert: floats round to nearest even once, float -> int truncates and saturates (NaN -> 0),
// int -> int wraps, anything -> bool is != 0.
llvm::Value* KernelEmitter::emitCast(llvm::Value* v, DType from, DType to) {
  if (from == to) return v;
  llvm::Type* rt = regType(to);
  if (to == DType::Bool) {
    if (isFloat(from)) return b_.CreateFCmpUNE(v, llvm::ConstantFP::get(v->getType(), 0.0));
    return b_.CreateICmpNE(v, llvm::ConstantInt::get(v->getType(), 0));
  }
  if (!isFloat(from)) {  // bool or integer source
    bool sext = isSignedInteger(from);
    if (!isFloat(to)) return b_.CreateIntCast(v, rt, sext);
    auto toFp = [&](llvm::Type* t) { return sext ? b_.CreateSIToFP(v, t) : b_.CreateUIToFP(v, t); };
    if (to == DType::F32 || to == DType::F64) return toFp(rt);
    // f16: integers beyond 2^24 overflow f16 anyway, so one rounding to float is harmless.
    if (to == DType::F16) return roundToHalf(toFp(b_.getFloatTy()));
    if (v->getType()->getIntegerBitWidth() <= 16) return roundToBf16(toFp(b_.getFloatTy()));
    // bf16 from i32 (exact in double) or i64 (rounded to 53 bits first; see docs/codegen.md).
    return roundToBf16(roundToOddFloat(toFp(b_.getDoubleTy())));
  }
  if (!isFloat(to)) {  // float -> integer: truncate toward zero, saturate, NaN -> 0
    auto id = isUnsigned(to) ? llvm::Intrinsic::fptoui_sat : llvm::Intrinsic::fptosi_sat;
    return b_.CreateIntrinsic(id, {rt, v->getType()}, {v});
  }
  if (to == DType::F64) return b_.CreateFPExt(v, rt);
  if (from == DType::F64) {
    if (to == DType::F32) return b_.CreateFPTrunc(v, rt);
    llvm::Value* odd = roundToOddFloat(v);
    return to == DType::F16 ? roundToHalf(odd) : roundToBf16(odd);
  }
  // float register (f16, bf16 or f32) -> f32, f16 or bf16.
  if (to == DType::F32) return v;
  return to == DType::F16 ? roundToHalf(v) : roundToBf16(v);
}

// A libm function of `type` (float or double) with `arity` arguments; it neither reads nor
// writes memory (errno is not looked at), so loops that call it still optimize.
llvm::Value* KernelEmitter::callMath(const std::string& name, llvm::Type* type,
                                     std::vector<llvm::Value*> args) {
  std::string symbol = type->isFloatTy() ? name + "f" : name;
  std::vector<llvm::Type*> params(args.size(), type);
  auto callee = m_.getOrInsertFunction(symbol, llvm::FunctionType::get(type, params, false));
  if (auto* f = llvm::dyn_cast<llvm::Function>(callee.getCallee())) {
    f->setDoesNotAccessMemory();
    f->setDoesNotThrow();
    f->addFnAttr(llvm::Attribute::WillReturn);
  }
  llvm::CallInst* call = b_.CreateCall(callee, args);
  call->setDoesNotAccessMemory();
  return call;
}

// Runs f on v converted to the math type of t, and rounds the result back to t's register.
template <typename F>
llvm::Value* KernelEmitter::inMath(llvm::Value* v, DType t, F f) {
  llvm::Type* mt = mathType(t);
  llvm::Value* r = f(b_.CreateFPCast(v, mt), mt);
  return b_.CreateFPCast(r, regType(t));
}

llvm::Value* KernelEmitter::emitUnary(const Expr& e) {
  llvm::Value* v = emitExpr(e.args[0]);
  DType t = e.args[0]->type;
  if (isFloat(t)) return floatUnary(e.unary, v, t);
  if (t == DType::Bool) {
    if (e.unary == UnaryOp::Not) return b_.CreateNot(v);
  } else {
    return intUnary(e.unary, v, t);
  }
  return fail(std::string(kernel::unaryOpName(e.unary)) + " is not defined for bool",
              regType(e.type));
}

llvm::Value* KernelEmitter::intUnary(UnaryOp op, llvm::Value* v, DType t) {
  llvm::Type* ty = v->getType();
  llvm::Value* zero = llvm::ConstantInt::get(ty, 0);
  switch (op) {
    case UnaryOp::Neg: return b_.CreateSub(zero, v);
    case UnaryOp::Abs:  // abs(INT_MIN) wraps to INT_MIN
      if (isUnsigned(t)) return v;
      return b_.CreateBinaryIntrinsic(llvm::Intrinsic::abs, v, b_.getFalse());
    case UnaryOp::Sign: {
      llvm::Value* nonzero = b_.CreateZExt(b_.CreateICmpNE(v, zero), ty);
      if (isUnsigned(t)) return nonzero;
      return b_.CreateSelect(b_.CreateICmpSLT(v, zero), llvm::ConstantInt::get(ty, -1, true),
                             nonzero);
    }
    case UnaryOp::Not: return b_.CreateNot(v);
    default: break;
  }
  return fail(std::string(kernel::unaryOpName(op)) + " is not defined for " +
                  std::string(dtypeName(t)),
              ty);
}

// f32 math through llvm_math.h's vectorizable forms (EmitOptions::approximateMath).
bool KernelEmitter::approximate(DType t) const {
  return options_.approximateMath && t == DType::F32;
}

llvm::Value* KernelEmitter::floatUnary(UnaryOp op, llvm::Value* v, DType t) {
  llvm::Type* ty = v->getType();
  auto libm = [&](const char* name) {
    return inMath(v, t, [&](llvm::Value* x, llvm::Type* mt) { return callMath(name, mt, {x}); });
  };
  auto intrinsic = [&](llvm::Intrinsic::ID id) { return b_.CreateUnaryIntrinsic(id, v); };
  llvm::Value* inf = llvm::ConstantFP::getInfinity(ty);
  switch (op) {
    case UnaryOp::Neg: return b_.CreateFNeg(v);
    case UnaryOp::Abs: return fabs(v);
    case UnaryOp::Sign: {  // sign(±0) = ±0, sign(NaN) = NaN
      llvm::Value* keep = b_.CreateFCmpUEQ(v, llvm::ConstantFP::get(ty, 0.0));
      llvm::Value* one =
          b_.CreateSelect(b_.CreateFCmpOGT(v, llvm::ConstantFP::get(ty, 0.0)),
                          llvm::ConstantFP::get(ty, 1.0), llvm::ConstantFP::get(ty, -1.0));
      return b_.CreateSelect(keep, v, one);
    }
    case UnaryOp::Floor: return intrinsic(llvm::Intrinsic::floor);
    case UnaryOp::Ceil: return intrinsic(llvm::Intrinsic::ceil);
    case UnaryOp::RoundNearestEven: return intrinsic(llvm::Intrinsic::roundeven);
    // A correctly rounded sqrt in double rounds to the correctly rounded float sqrt.
    case UnaryOp::Sqrt: return intrinsic(llvm::Intrinsic::sqrt);
    case UnaryOp::Rsqrt:
      return inMath(v, t, [&](llvm::Value* x, llvm::Type* mt) {
        llvm::Value* s = b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, x);
        return b_.CreateFDiv(llvm::ConstantFP::get(mt, 1.0), s);
      });
    case UnaryOp::Sigmoid:  // 1 / (1 + e^-x): e^-x = inf gives 0, e^-x = 0 gives 1
      if (approximate(t)) {
        llvm::Value* one = llvm::ConstantFP::get(ty, 1.0);
        return b_.CreateFDiv(one, b_.CreateFAdd(one, emitExpF32(b_, b_.CreateFNeg(v))));
      }
      return inMath(v, t, [&](llvm::Value* x, llvm::Type* mt) {
        llvm::Value* ex = callMath("exp", mt, {b_.CreateFNeg(x)});
        llvm::Value* one = llvm::ConstantFP::get(mt, 1.0);
        return b_.CreateFDiv(one, b_.CreateFAdd(one, ex));
      });
    case UnaryOp::Exp: return approximate(t) ? emitExpF32(b_, v) : libm("exp");
    case UnaryOp::Expm1: return libm("expm1");
    case UnaryOp::Log: return libm("log");
    case UnaryOp::Log1p: return libm("log1p");
    case UnaryOp::Sin: return libm("sin");
    case UnaryOp::Cos: return libm("cos");
    case UnaryOp::Tan: return libm("tan");
    case UnaryOp::Asin: return libm("asin");
    case UnaryOp::Acos: return libm("acos");
    case UnaryOp::Atan: return libm("atan");
    case UnaryOp::Sinh: return libm("sinh");
    case UnaryOp::Cosh: return libm("cosh");
    case UnaryOp::Asinh: return libm("asinh");
    case UnaryOp::Acosh: return libm("acosh");
    case UnaryOp::Atanh: return libm("atanh");
    case UnaryOp::Tanh: return approximate(t) ? emitTanhF32(b_, v) : libm("tanh");
    case UnaryOp::Erf: return approximate(t) ? emitErfF32(b_, v) : libm("erf");
    case UnaryOp::IsFinite: return b_.CreateFCmpOLT(fabs(v), inf);
    case UnaryOp::IsInf: return b_.CreateFCmpOEQ(fabs(v), inf);
    case UnaryOp::IsNan: return b_.CreateFCmpUNO(v, v);
    case UnaryOp::Not:
    case UnaryOp::WarpSum:  // GPU schedules only
    case UnaryOp::WarpMax:
    case UnaryOp::WarpMin: break;
  }
  return fail(std::string(kernel::unaryOpName(op)) + " is not defined for " +
                  std::string(dtypeName(t)),
              ty);
}

llvm::Value* KernelEmitter::emitBinary(const Expr& e) {
  llvm::Value* a = emitExpr(e.args[0]);
  llvm::Value* rhs = emitExpr(e.args[1]);
  DType t = e.args[0]->type;
  if (e.args[1]->type != t)
    return fail(std::string(kernel::binaryOpName(e.binary)) + " of " + std::string(dtypeName(t)) +
                    " and " + std::string(dtypeName(e.args[1]->type)),
                regType(e.type));
  if (isFloat(t)) return floatBinary(e.binary, a, rhs, t);
  if (t == DType::Bool) return boolBinary(e.binary, a, rhs);
  return intBinary(e.binary, a, rhs, t);
}

llvm::Value* KernelEmitter::unsupportedBinary(BinaryOp op, DType t) {
  return fail(std::string(kernel::binaryOpName(op)) + " is not defined for " +
                  std::string(dtypeName(t)),
              regType(t));
}

llvm::Value* KernelEmitter::floatBinary(BinaryOp op, llvm::Value* a, llvm::Value* v, DType t) {
  auto libm2 = [&](const char* name) {
    llvm::Type* mt = mathType(t);
    llvm::Value* r = callMath(name, mt, {b_.CreateFPCast(a, mt), b_.CreateFPCast(v, mt)});
    return b_.CreateFPCast(r, regType(t));
  };
  switch (op) {
    // +-*/ and fmod of f32 in float equal the interpreter's double op rounded once.
    case BinaryOp::Add: return b_.CreateFAdd(a, v);
    case BinaryOp::Sub: return b_.CreateFSub(a, v);
    case BinaryOp::Mul: return b_.CreateFMul(a, v);
    case BinaryOp::Div: return b_.CreateFDiv(a, v);
    case BinaryOp::Rem: return b_.CreateFRem(a, v);
    case BinaryOp::Pow: return libm2("pow");
    case BinaryOp::Atan2: return libm2("atan2");
    case BinaryOp::Max: return maxMin(a, v, true);
    case BinaryOp::Min: return maxMin(a, v, false);
    case BinaryOp::Lt: return b_.CreateFCmpOLT(a, v);
    case BinaryOp::Le: return b_.CreateFCmpOLE(a, v);
    case BinaryOp::Gt: return b_.CreateFCmpOGT(a, v);
    case BinaryOp::Ge: return b_.CreateFCmpOGE(a, v);
    case BinaryOp::Eq: return b_.CreateFCmpOEQ(a, v);
    case BinaryOp::Ne: return b_.CreateFCmpUNE(a, v);
    default: break;
  }
  return unsupportedBinary(op, t);
}

// max/min of the semantics: NaN propagates and -0 orders below +0 (interp's maxOf/minOf).
// Written as selects rather than llvm.maximum, which LLVM 19 miscompiles when it narrows the
// f32 operation of an f16 value to half (max(0, NaN) gave 0); the selects vectorize too.
// The first select is x86's maxps/minps (v where unordered or equal); equal values differ only
// as -0 and +0, whose max is the AND of their bits and min the OR. Six vector ops: a max pool is
// bound by them.
llvm::Value* KernelEmitter::maxMin(llvm::Value* a, llvm::Value* v, bool max) {
  llvm::Type* bits = b_.getIntNTy(a->getType()->getScalarSizeInBits());
  if (auto* vec = llvm::dyn_cast<llvm::VectorType>(a->getType()))
    bits = llvm::VectorType::get(bits, vec->getElementCount());
  llvm::Value* ab = b_.CreateBitCast(a, bits);
  llvm::Value* vb = b_.CreateBitCast(v, bits);
  llvm::Value* onTie =
      b_.CreateBitCast(max ? b_.CreateAnd(ab, vb) : b_.CreateOr(ab, vb), a->getType());
  llvm::Value* r = b_.CreateSelect(max ? b_.CreateFCmpOGT(a, v) : b_.CreateFCmpOLT(a, v), a, v);
  r = b_.CreateSelect(b_.CreateFCmpOEQ(a, v), onTie, r);
  return b_.CreateSelect(b_.CreateFCmpUNO(a, a), a, r);
}

llvm::Value* KernelEmitter::boolBinary(BinaryOp op, llvm::Value* a, llvm::Value* v) {
  switch (op) {
    case BinaryOp::And:
    case BinaryOp::Min: return b_.CreateAnd(a, v);
    case BinaryOp::Or:
    case BinaryOp::Max: return b_.CreateOr(a, v);
    case BinaryOp::Xor:
    case BinaryOp::Ne: return b_.CreateXor(a, v);
    case BinaryOp::Eq: return b_.CreateICmpEQ(a, v);
    case BinaryOp::Lt: return b_.CreateICmpULT(a, v);
    case BinaryOp::Le: return b_.CreateICmpULE(a, v);
    case BinaryOp::Gt: return b_.CreateICmpUGT(a, v);
    case BinaryOp::Ge: return b_.CreateICmpUGE(a, v);
    default: break;
  }
  return unsupportedBinary(op, DType::Bool);
}

llvm::Value* KernelEmitter::intBinary(BinaryOp op, llvm::Value* a, llvm::Value* v, DType t) {
  const bool u = isUnsigned(t);
  llvm::Type* ty = a->getType();
  const unsigned bits = ty->getIntegerBitWidth();
  llvm::Value* zero = llvm::ConstantInt::get(ty, 0);
  llvm::Value* one = llvm::ConstantInt::get(ty, 1);
  // Shifts by an amount outside [0, bits) (unsigned compare catches negatives) are defined.
  llvm::Value* outOfRange = b_.CreateICmpUGE(v, llvm::ConstantInt::get(ty, bits));
  auto shift = [&](llvm::Instruction::BinaryOps kind, llvm::Value* whenOut) {
    llvm::Value* s = b_.CreateSelect(outOfRange, zero, v);
    return b_.CreateSelect(outOfRange, whenOut, b_.CreateBinOp(kind, a, s));
  };
  switch (op) {
    case BinaryOp::Add: return b_.CreateAdd(a, v);  // wraps: no nsw/nuw flags
    case BinaryOp::Sub: return b_.CreateSub(a, v);
    case BinaryOp::Mul: return b_.CreateMul(a, v);
    case BinaryOp::Div:
    case BinaryOp::Rem: {
      // x / 0 = 0 and x % 0 = x; INT_MIN / -1 = INT_MIN and INT_MIN % -1 = 0. Dividing by a
      // safe divisor of 1 in those cases gives exactly those results (and no UB).
      llvm::Value* byZero = b_.CreateICmpEQ(v, zero);
      llvm::Value* unsafe = byZero;
      if (!u) {
        llvm::Value* minInt = llvm::ConstantInt::get(ty, llvm::APInt::getSignedMinValue(bits));
        llvm::Value* overflow = b_.CreateAnd(
            b_.CreateICmpEQ(a, minInt), b_.CreateICmpEQ(v, llvm::ConstantInt::get(ty, -1, true)));
        unsafe = b_.CreateOr(byZero, overflow);
      }
      llvm::Value* d = b_.CreateSelect(unsafe, one, v);
      if (op == BinaryOp::Div)
        return b_.CreateSelect(byZero, zero, u ? b_.CreateUDiv(a, d) : b_.CreateSDiv(a, d));
      return b_.CreateSelect(byZero, a, u ? b_.CreateURem(a, d) : b_.CreateSRem(a, d));
    }
    case BinaryOp::Pow: return b_.CreateCall(intPowFunction(ty, u), {a, v});
    case BinaryOp::Max:
      return b_.CreateBinaryIntrinsic(u ? llvm::Intrinsic::umax : llvm::Intrinsic::smax, a, v);
    case BinaryOp::Min:
      return b_.CreateBinaryIntrinsic(u ? llvm::Intrinsic::umin : llvm::Intrinsic::smin, a, v);
    case BinaryOp::And: return b_.CreateAnd(a, v);
    case BinaryOp::Or: return b_.CreateOr(a, v);
    case BinaryOp::Xor: return b_.CreateXor(a, v);
    case BinaryOp::ShiftLeft: return shift(llvm::Instruction::Shl, zero);
    case BinaryOp::ShiftRightLogical: return shift(llvm::Instruction::LShr, zero);
    case BinaryOp::ShiftRightArithmetic:  // the bits read as signed: out of range gives 0 or -1
      return shift(llvm::Instruction::AShr, b_.CreateAShr(a, bits - 1));
    case BinaryOp::Lt: return u ? b_.CreateICmpULT(a, v) : b_.CreateICmpSLT(a, v);
    case BinaryOp::Le: return u ? b_.CreateICmpULE(a, v) : b_.CreateICmpSLE(a, v);
    case BinaryOp::Gt: return u ? b_.CreateICmpUGT(a, v) : b_.CreateICmpSGT(a, v);
    case BinaryOp::Ge: return u ? b_.CreateICmpUGE(a, v) : b_.CreateICmpSGE(a, v);
    case BinaryOp::Eq: return b_.CreateICmpEQ(a, v);
    case BinaryOp::Ne: return b_.CreateICmpNE(a, v);
    case BinaryOp::Atan2: break;
  }
  return unsupportedBinary(op, t);
}

// kiln.ipow.<s|u><bits>(base, exponent): exponentiation by squaring with wraparound; a
// negative exponent gives 0, except for bases 1 and -1 (the interpreter's intPow).
llvm::Function* KernelEmitter::intPowFunction(llvm::Type* ty, bool u) {
  std::string name =
      std::string("kiln.ipow.") + (u ? "u" : "s") + std::to_string(ty->getIntegerBitWidth());
  if (llvm::Function* f = m_.getFunction(name)) return f;
  auto* fn = llvm::Function::Create(llvm::FunctionType::get(ty, {ty, ty}, false),
                                    llvm::Function::InternalLinkage, name, m_);
  setAttributes(fn);
  llvm::IRBuilder<> pb(c_);
  auto* entry = llvm::BasicBlock::Create(c_, "entry", fn);
  auto* negative = llvm::BasicBlock::Create(c_, "negative", fn);
  auto* header = llvm::BasicBlock::Create(c_, "header", fn);
  auto* body = llvm::BasicBlock::Create(c_, "body", fn);
  auto* done = llvm::BasicBlock::Create(c_, "done", fn);
  llvm::Value* base = fn->getArg(0);
  llvm::Value* exponent = fn->getArg(1);
  llvm::Value* zero = llvm::ConstantInt::get(ty, 0);
  llvm::Value* one = llvm::ConstantInt::get(ty, 1);
  llvm::Value* minusOne = llvm::ConstantInt::get(ty, -1, true);
  pb.SetInsertPoint(entry);
  if (u) pb.CreateBr(header);
  else pb.CreateCondBr(pb.CreateICmpSLT(exponent, zero), negative, header);
  pb.SetInsertPoint(negative);
  llvm::Value* odd = pb.CreateICmpNE(pb.CreateAnd(exponent, one), zero);
  llvm::Value* ofMinusOne = pb.CreateSelect(odd, minusOne, one);
  llvm::Value* r = pb.CreateSelect(pb.CreateICmpEQ(base, minusOne), ofMinusOne, zero);
  pb.CreateRet(pb.CreateSelect(pb.CreateICmpEQ(base, one), one, r));
  pb.SetInsertPoint(header);
  llvm::PHINode* result = pb.CreatePHI(ty, 2, "result");
  llvm::PHINode* b = pb.CreatePHI(ty, 2, "b");
  llvm::PHINode* e = pb.CreatePHI(ty, 2, "e");
  pb.CreateCondBr(pb.CreateICmpNE(e, zero), body, done);
  pb.SetInsertPoint(body);
  llvm::Value* bit = pb.CreateICmpNE(pb.CreateAnd(e, one), zero);
  llvm::Value* nextResult = pb.CreateSelect(bit, pb.CreateMul(result, b), result);
  llvm::Value* nextB = pb.CreateMul(b, b);
  llvm::Value* nextE = pb.CreateLShr(e, one);
  pb.CreateBr(header);
  result->addIncoming(one, entry);
  result->addIncoming(nextResult, body);
  b->addIncoming(base, entry);
  b->addIncoming(nextB, body);
  e->addIncoming(exponent, entry);
  e->addIncoming(nextE, body);
  pb.SetInsertPoint(done);
  pb.CreateRet(result);
  return fn;
}

}  // namespace kiln::codegen::cpu::llvm_emit
