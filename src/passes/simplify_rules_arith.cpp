// algebraic-simplify rules for elementwise arithmetic, logic, select and convert.
//
// Float policy: a rule applies to floats only when it gives the same result for every input,
// NaN and infinities included, with one stated exception: the sign of a zero result may differ
// (x + 0 -> x turns -0 + 0 = +0 into -0), as in every mainstream compiler's simplifier. So
// x * 0 -> 0 and x - x -> 0 are integer-only (NaN * 0 = NaN, inf - inf = NaN), and
// x / c -> x * (1/c) is done only when c is a power of two whose reciprocal the dtype holds
// exactly, where both sides round the same real number once.
#include <cmath>

#include "passes/rewrite_util.h"
#include "passes/simplify_rules.h"

namespace kiln::simplify {
namespace {

using rewrite::builderBefore;
using rewrite::isSplat;
using rewrite::splatValue;

Value* lhs(Node& n) { return n.operand(0); }
Value* rhs(Node& n) { return n.operand(1); }
DType dtypeOf(Node& n) { return n.result()->type().dtype(); }

// add(x, 0) -> x
Value* addZeroRight(Node& n) { return isSplat(rhs(n), 0) ? lhs(n) : nullptr; }
// add(0, x) -> x
Value* addZeroLeft(Node& n) { return isSplat(lhs(n), 0) ? rhs(n) : nullptr; }
// add(x, neg(y)) -> sub(x, y)   (exact: x + (-y) and x - y round the same real number)
Value* addNeg(Node& n) {
  if (rhs(n)->def()->op() != OpCode::Neg) return nullptr;
  Builder b = builderBefore(&n);
  return b.sub(lhs(n), rhs(n)->def()->operand(0));
}
// sub(x, 0) -> x   (exact for floats, -0 - 0 = -0 included)
Value* subZero(Node& n) { return isSplat(rhs(n), 0) ? lhs(n) : nullptr; }
// sub(x, x) -> 0   (integers only: inf - inf and NaN - NaN are NaN)
Value* subSelf(Node& n) {
  if (lhs(n) != rhs(n) || !isInteger(dtypeOf(n))) return nullptr;
  Builder b = builderBefore(&n);
  return rewrite::splatConstant(b, n.result()->type(), 0);
}
// mul(x, 1) -> x
Value* mulOneRight(Node& n) { return isSplat(rhs(n), 1) ? lhs(n) : nullptr; }
// mul(1, x) -> x
Value* mulOneLeft(Node& n) { return isSplat(lhs(n), 1) ? rhs(n) : nullptr; }
// mul(x, 0) -> 0   (integers only: NaN * 0 and inf * 0 are NaN)
Value* mulZeroRight(Node& n) {
  return isInteger(dtypeOf(n)) && isSplat(rhs(n), 0) ? rhs(n) : nullptr;
}
// mul(0, x) -> 0   (integers only)
Value* mulZeroLeft(Node& n) {
  return isInteger(dtypeOf(n)) && isSplat(lhs(n), 0) ? lhs(n) : nullptr;
}
// mul(x, -1) -> neg(x)   (exact: both flip the sign; integers wrap alike)
Value* mulMinusOne(Node& n) {
  if (!isSplat(rhs(n), -1) || (!isSignedInteger(dtypeOf(n)) && !isFloat(dtypeOf(n))))
    return nullptr;
  Builder b = builderBefore(&n);
  return b.unary(OpCode::Neg, lhs(n));
}
// div(x, 1) -> x
Value* divOne(Node& n) { return isSplat(rhs(n), 1) ? lhs(n) : nullptr; }

// 1/c when c is a power of two and the dtype holds 1/c exactly.
std::optional<double> exactReciprocal(double c, DType t) {
  int e = 0;
  if (!std::isfinite(c) || c == 0 || std::fabs(std::frexp(c, &e)) != 0.5) return std::nullopt;
  double r = 1.0 / c;
  Tensor probe(t, {});
  probe.setDouble(0, r);
  if (probe.getDouble(0) != r) return std::nullopt;
  return r;
}

// div(x, c) -> mul(x, 1/c)   (floats, c a power of two with an exact reciprocal)
Value* divPowerOfTwo(Node& n) {
  DType t = dtypeOf(n);
  auto c = splatValue(rhs(n));
  if (!isFloat(t) || !c || *c == 1) return nullptr;
  auto r = exactReciprocal(*c, t);
  if (!r) return nullptr;
  Builder b = builderBefore(&n);
  return b.mul(lhs(n), rewrite::splatConstant(b, n.result()->type(), *r));
}
// pow(x, 1) -> x   (std::pow(x, 1) is x for every x; integer exponentiation likewise)
Value* powOne(Node& n) { return isSplat(rhs(n), 1) ? lhs(n) : nullptr; }
// pow(x, 2) -> mul(x, x)   (integers: exact. Floats: x*x is correctly rounded; pow(x, 2) is
// within an ulp of it, so results move by at most one ulp, well inside every tolerance)
Value* powTwo(Node& n) {
  if (!isSplat(rhs(n), 2)) return nullptr;
  Builder b = builderBefore(&n);
  return b.mul(lhs(n), lhs(n));
}
// neg(neg(x)) -> x
Value* negNeg(Node& n) {
  Value* x = lhs(n);
  return x->def()->op() == OpCode::Neg ? x->def()->operand(0) : nullptr;
}
// not(not(x)) -> x   (logical for bool, bitwise for integers: both involutions)
Value* notNot(Node& n) {
  Value* x = lhs(n);
  return x->def()->op() == OpCode::Not ? x->def()->operand(0) : nullptr;
}
// abs(abs(x)) -> abs(x)
Value* absAbs(Node& n) { return lhs(n)->def()->op() == OpCode::Abs ? lhs(n) : nullptr; }
// max(x, x) -> x, min(x, x) -> x, and(x, x) -> x, or(x, x) -> x
Value* idempotent(Node& n) { return lhs(n) == rhs(n) ? lhs(n) : nullptr; }
// and(x, true) -> x, or(x, false) -> x   (bool only; for integers "true" would be the value 1)
Value* boolIdentity(Node& n) {
  if (dtypeOf(n) != DType::Bool) return nullptr;
  double unit = n.op() == OpCode::And ? 1 : 0;
  if (isSplat(rhs(n), unit)) return lhs(n);
  if (isSplat(lhs(n), unit)) return rhs(n);
  return nullptr;
}
// and(x, false) -> false, or(x, true) -> true   (bool only)
Value* boolAbsorb(Node& n) {
  if (dtypeOf(n) != DType::Bool) return nullptr;
  double zero = n.op() == OpCode::And ? 0 : 1;
  if (isSplat(rhs(n), zero)) return rhs(n);
  if (isSplat(lhs(n), zero)) return lhs(n);
  return nullptr;
}
// select(true, a, b) -> a; select(false, a, b) -> b
Value* selectConstant(Node& n) {
  auto p = splatValue(n.operand(0));
  if (!p) return nullptr;
  return *p != 0 ? n.operand(1) : n.operand(2);
}
// select(p, a, a) -> a
Value* selectSame(Node& n) { return n.operand(1) == n.operand(2) ? n.operand(1) : nullptr; }
// convert(x) -> x when the result type is x's type
Value* convertSame(Node& n) { return lhs(n)->type() == n.result()->type() ? lhs(n) : nullptr; }

const Rule kRules[] = {
    {OpCode::Add, "add(x, 0) -> x", addZeroRight},
    {OpCode::Add, "add(0, x) -> x", addZeroLeft},
    {OpCode::Add, "add(x, neg(y)) -> sub(x, y)", addNeg},
    {OpCode::Sub, "sub(x, 0) -> x", subZero},
    {OpCode::Sub, "sub(x, x) -> 0 (integers)", subSelf},
    {OpCode::Mul, "mul(x, 1) -> x", mulOneRight},
    {OpCode::Mul, "mul(1, x) -> x", mulOneLeft},
    {OpCode::Mul, "mul(x, 0) -> 0 (integers)", mulZeroRight},
    {OpCode::Mul, "mul(0, x) -> 0 (integers)", mulZeroLeft},
    {OpCode::Mul, "mul(x, -1) -> neg(x)", mulMinusOne},
    {OpCode::Div, "div(x, 1) -> x", divOne},
    {OpCode::Div, "div(x, 2^k) -> mul(x, 2^-k) (floats)", divPowerOfTwo},
    {OpCode::Pow, "pow(x, 1) -> x", powOne},
    {OpCode::Pow, "pow(x, 2) -> mul(x, x)", powTwo},
    {OpCode::Neg, "neg(neg(x)) -> x", negNeg},
    {OpCode::Not, "not(not(x)) -> x", notNot},
    {OpCode::Abs, "abs(abs(x)) -> abs(x)", absAbs},
    {OpCode::Max, "max(x, x) -> x", idempotent},
    {OpCode::Min, "min(x, x) -> x", idempotent},
    {OpCode::And, "and(x, x) -> x", idempotent},
    {OpCode::Or, "or(x, x) -> x", idempotent},
    {OpCode::And, "and(x, true) -> x (bool)", boolIdentity},
    {OpCode::Or, "or(x, false) -> x (bool)", boolIdentity},
    {OpCode::And, "and(x, false) -> false (bool)", boolAbsorb},
    {OpCode::Or, "or(x, true) -> true (bool)", boolAbsorb},
    {OpCode::Select, "select(true, a, b) -> a; select(false, a, b) -> b", selectConstant},
    {OpCode::Select, "select(p, a, a) -> a", selectSame},
    {OpCode::Convert, "convert(x: T) -> x when the result type is T", convertSame},
};

}  // namespace

std::span<const Rule> arithmeticRules() { return kRules; }

}  // namespace kiln::simplify
