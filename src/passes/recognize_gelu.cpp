// recognize-patterns: GELU, erf and tanh forms.
//   erf:  0.5 * x * (1 + erf(x * 1/sqrt(2)))            (PyTorch, TF and Keras exports)
//   tanh: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
// The outer product is flattened (recognize::flattenProduct), so every order and grouping of the
// factors matches; x itself may be a product (its factors are compared as a multiset).
#include "passes/recognize_matchers.h"
#include "passes/recognize_util.h"
#include "passes/rewrite_util.h"

namespace kiln::recognize {
namespace {

constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kCubic = 0.044715;

// v = 1 + f(arg) (either order) with f of op `f`: returns arg.
Value* onePlus(Value* v, OpCode f, double tol) {
  if (!isOp(v, OpCode::Add)) return nullptr;
  for (int side = 0; side < 2; ++side) {
    auto c = rewrite::splatValue(v->def()->operand(side));
    Value* other = v->def()->operand(1 - side);
    if (c && rewrite::approxEqual(*c, 1, tol) && isOp(other, f)) return other->def()->operand(0);
  }
  return nullptr;
}

// True when coefficient * product(rest) is 0.5 * x.
bool isHalfOf(double coefficient, const std::vector<Value*>& rest, Value* x, double tol) {
  Product px = flattenProduct(x);
  return px.ok && px.coefficient != 0 && sameFactors(rest, px.factors) &&
         rewrite::approxEqual(coefficient / px.coefficient, 0.5, tol);
}

// arg = sqrt(2/pi) * (x + 0.044715 * x^3): returns x.
Value* tanhArgumentOf(Value* arg, double tol) {
  Product outer = flattenProduct(arg);
  if (!outer.ok || outer.factors.size() != 1 ||
      !rewrite::approxEqual(outer.coefficient, kSqrt2OverPi, tol))
    return nullptr;
  Value* sum = outer.factors[0];
  if (!isOp(sum, OpCode::Add)) return nullptr;
  for (int side = 0; side < 2; ++side) {
    Value* x = sum->def()->operand(side);
    Product px = flattenProduct(x), cube = flattenProduct(sum->def()->operand(1 - side));
    if (!px.ok || !cube.ok || px.coefficient == 0) continue;
    std::vector<Value*> x3;
    for (int i = 0; i < 3; ++i) x3.insert(x3.end(), px.factors.begin(), px.factors.end());
    double c = cube.coefficient / (px.coefficient * px.coefficient * px.coefficient);
    if (sameFactors(cube.factors, x3) && rewrite::approxEqual(c, kCubic, tol)) return x;
  }
  return nullptr;
}

}  // namespace

Value* recognizeGelu(Node& root) {
  const TensorType& type = root.result()->type();
  if (root.op() != OpCode::Mul || !isFloat(type.dtype())) return nullptr;
  Product p = flattenProduct(root.result());
  if (!p.ok) return nullptr;
  double tol = rewrite::constantTolerance(type.dtype());
  for (size_t i = 0; i < p.factors.size(); ++i) {
    std::vector<Value*> rest = p.factors;
    rest.erase(rest.begin() + static_cast<std::ptrdiff_t>(i));
    Value* x = nullptr;
    const char* approximate = nullptr;
    double k = 0;
    if (Value* arg = onePlus(p.factors[i], OpCode::Erf, tol)) {
      Value* inner = peelScale(arg, k);
      if (inner && rewrite::approxEqual(k, kInvSqrt2, tol)) {
        x = inner;
        approximate = "none";
      }
    } else if (Value* targ = onePlus(p.factors[i], OpCode::Tanh, tol)) {
      x = tanhArgumentOf(targ, tol);
      approximate = "tanh";
    }
    if (!x || x->type() != type || !isHalfOf(p.coefficient, rest, x, tol)) continue;
    Builder b = rewrite::builderBefore(&root);
    AttrMap attrs;
    if (std::string(approximate) == "tanh") attrs["approximate"] = enumAttr("tanh");
    return b.op(OpCode::Gelu, {x}, std::move(attrs));
  }
  return nullptr;
}

}  // namespace kiln::recognize
