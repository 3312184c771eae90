// kernel::simplifyIndices: the rewrites it makes on typical lowered indices, and, on random
// index expressions, that the simplified expression has the same value as the original for
// every value of the loop variables (the rewrites must be exact within the loops' ranges).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <string>

#include "kernel/simplify.h"

namespace kiln::kernel {
namespace {

// The index of the store inside `for i0 in [0, e0) { for i1 in [0, e1) { out[index] = 0 } }`,
// simplified.
ExprRef simplified(const ExprRef& index, int64_t e0, int64_t e1) {
  Kernel k;
  k.name = "k";
  k.body = forLoop("i0", intConst(e0), LoopKind::Serial,
                   forLoop("i1", intConst(e1), LoopKind::Vectorized,
                           store("out", index, floatConst(0, DType::F32))));
  Kernel s = simplifyIndices(k);
  return s.body->body[0]->body[0]->index;
}

ExprRef v(const char* n) { return var(n); }
ExprRef c(int64_t x) { return intConst(x); }
ExprRef add(ExprRef a, ExprRef b) { return binary(BinaryOp::Add, a, b); }
ExprRef mul(ExprRef a, ExprRef b) { return binary(BinaryOp::Mul, a, b); }
ExprRef div(ExprRef a, ExprRef b) { return binary(BinaryOp::Div, a, b); }
ExprRef rem(ExprRef a, ExprRef b) { return binary(BinaryOp::Rem, a, b); }

TEST(SimplifyIndices, FlattenedRowsAndReshapes) {
  // A row index through a flat index: (i0 * 384 + i1) / 384 * 384 + (i0 * 384 + i1) % 384.
  ExprRef flat = add(mul(v("i0"), c(384)), v("i1"));
  EXPECT_EQ(printExpr(simplified(add(mul(div(flat, c(384)), c(384)), rem(flat, c(384))), 197, 384)),
            "i0 * 384 + i1");
  // A transpose read through a reshape: [8,6,64] -> [8,384].
  ExprRef t = add(mul(add(mul(rem(div(flat, c(64)), c(6)), c(8)), div(flat, c(384))), c(64)),
                  rem(flat, c(64)));
  EXPECT_EQ(printExpr(simplified(t, 8, 384)), "(i1 / 64 * 8 + i0) * 64 + i1 % 64");
  // A constant factor distributes over a sum: ((i1 * 6 + i0) * 64 + 5) / 384 with i0 < 6.
  ExprRef d = div(add(mul(add(mul(v("i1"), c(6)), v("i0")), c(64)), c(5)), c(384));
  EXPECT_EQ(printExpr(simplified(d, 6, 197)), "i1");
  // Clamps that the ranges make redundant: min(max(i0 - 1, 0), 195) with i0 in [0, 197).
  ExprRef clamp = binary(BinaryOp::Min,
                         binary(BinaryOp::Max, binary(BinaryOp::Sub, v("i0"), c(1)), c(0)), c(195));
  EXPECT_EQ(printExpr(simplified(clamp, 197, 4)), "max(i0 - 1, 0)");
}

TEST(KernelIr, EqualExpressionsAreOneNode) {
  // Hash-consing: building the same structure twice gives the same node.
  EXPECT_EQ(add(mul(v("i0"), c(8)), v("i1")), add(mul(v("i0"), c(8)), v("i1")));
  EXPECT_NE(add(mul(v("i0"), c(8)), v("i1")), add(mul(v("i0"), c(8)), v("i2")));
  EXPECT_EQ(load("x", DType::F32, v("i0")), load("x", DType::F32, v("i0")));
  EXPECT_NE(load("x", DType::F32, v("i0")), load("x", DType::F16, v("i0")));
  // Float constants by their bits: -0.0 is not 0.0, and NaN is one constant.
  EXPECT_NE(floatConst(-0.0, DType::F32), floatConst(0.0, DType::F32));
  EXPECT_EQ(floatConst(std::nan(""), DType::F32), floatConst(std::nan(""), DType::F32));
  EXPECT_NE(intConst(1, DType::I64), intConst(1, DType::I32));
}

TEST(SimplifyIndices, InnerDimsBelowAFactorOfTheDivisor) {
  // A channel index of an nhwc layout read through nchw: (i0 * 784 + i1) with i1 < 784 (28 x 28
  // pixels), divided by and taken modulo 1568 (two channels of them).
  ExprRef flat = add(mul(v("i0"), c(784)), v("i1"));
  EXPECT_EQ(printExpr(simplified(div(flat, c(1568)), 48, 784)), "i0 / 2");
  EXPECT_EQ(printExpr(simplified(rem(flat, c(1568)), 48, 784)), "i0 % 2 * 784 + i1");
  // i1 may reach 784: no factor leaves a remainder below it.
  EXPECT_EQ(printExpr(simplified(div(flat, c(1568)), 48, 785)), "(i0 * 784 + i1) / 1568");
}

TEST(SimplifyIndices, AGridIndexSplitIntoDimsComesBackWhole) {
  // mapToGpu's g = i0 * 256 + i1 split into the dims of [8, 28, 28, 64] and flattened again:
  // ((g / 50176 * 28 + g / 1792 % 28) * 28 + g / 64 % 28) * 64 + g % 64. The quotient
  // g / 50176 simplifies to i0 / 196 first; it still pairs with g / 1792 % 28.
  ExprRef g = add(mul(v("i0"), c(256)), v("i1"));
  ExprRef n = add(mul(div(g, c(50176)), c(28)), rem(div(g, c(1792)), c(28)));
  ExprRef h = add(mul(n, c(28)), rem(div(g, c(64)), c(28)));
  ExprRef flat = add(mul(h, c(64)), rem(g, c(64)));
  EXPECT_EQ(printExpr(simplified(flat, 1568, 256)), "i0 * 256 + i1");
  // Its channel alone: what a broadcast bias reads.
  EXPECT_EQ(printExpr(simplified(rem(g, c(64)), 1568, 256)), "i1 % 64");
}

TEST(SimplifyIndices, LeavesWhatRangesDoNotAllow) {
  // i1 may exceed the divisor: nothing to drop.
  EXPECT_EQ(printExpr(simplified(div(add(mul(v("i0"), c(100)), v("i1")), c(64)), 4, 200)),
            "(i0 * 100 + i1) / 64");
  // A negative dividend: truncating division does not split.
  ExprRef neg = div(add(mul(v("i0"), c(64)), binary(BinaryOp::Sub, v("i1"), c(10))), c(64));
  EXPECT_EQ(printExpr(simplified(neg, 4, 8)), printExpr(neg));
  // A loop variable with no loop (no range): unchanged.
  ExprRef free = rem(var("x"), c(7));
  EXPECT_EQ(printExpr(simplified(free, 4, 8)), "x % 7");
}

int64_t eval(const ExprRef& e, const std::map<std::string, int64_t>& env) {
  switch (e->kind) {
    case Expr::Kind::Const: return e->i;
    case Expr::Kind::Var: return env.at(e->name);
    case Expr::Kind::Binary: {
      int64_t a = eval(e->args[0], env), b = eval(e->args[1], env);
      switch (e->binary) {
        case BinaryOp::Add: return a + b;
        case BinaryOp::Sub: return a - b;
        case BinaryOp::Mul: return a * b;
        case BinaryOp::Div: return a / b;
        case BinaryOp::Rem: return a % b;
        case BinaryOp::Min: return std::min(a, b);
        case BinaryOp::Max: return std::max(a, b);
        default: break;
      }
      break;
    }
    default: break;
  }
  ADD_FAILURE() << "unexpected expression " << printExpr(e);
  return 0;
}

// Random index arithmetic over i0, i1: sums, constant factors, div and mod by constants
// (often divisors of one another, as reshapes make them), subtraction, min and max.
ExprRef randomIndex(std::mt19937& rng, int depth) {
  static const int64_t kDivisors[] = {2, 3, 4, 6, 8, 12, 14, 16, 64, 96, 197, 384};
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  if (depth == 0 || pick(4) == 0) {
    int which = pick(3);
    if (which == 0) return v("i0");
    if (which == 1) return v("i1");
    return c(pick(20));
  }
  ExprRef a = randomIndex(rng, depth - 1);
  int64_t k = kDivisors[pick(12)];
  switch (pick(7)) {
    case 0: return add(a, randomIndex(rng, depth - 1));
    case 1: return mul(a, c(k));
    case 2: return div(a, c(k));
    case 3: return rem(a, c(k));
    case 4: return binary(BinaryOp::Sub, a, c(pick(8)));
    case 5: return binary(BinaryOp::Min, a, c(pick(400)));
    default: return binary(BinaryOp::Max, a, c(pick(8)));
  }
}

TEST(SimplifyIndices, RandomExpressionsKeepTheirValues) {
  std::mt19937 rng(7);
  int changed = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    ExprRef e = randomIndex(rng, 5);
    int64_t e0 = 1 + static_cast<int64_t>(rng() % 13), e1 = 1 + static_cast<int64_t>(rng() % 400);
    ExprRef s = simplified(e, e0, e1);
    if (printExpr(s) != printExpr(e)) ++changed;
    for (int64_t i0 = 0; i0 < e0; ++i0)
      for (int64_t i1 = 0; i1 < e1; ++i1) {
        std::map<std::string, int64_t> env{{"i0", i0}, {"i1", i1}};
        ASSERT_EQ(eval(s, env), eval(e, env))
            << printExpr(e) << " -> " << printExpr(s) << " at i0=" << i0 << ", i1=" << i1;
      }
  }
  // The generator makes simplifiable expressions often; a simplifier that did nothing would
  // pass the check above trivially.
  EXPECT_GT(changed, 300);
}

TEST(SimplifyIndices, SharedSubexpressionsAreSimplifiedOnce) {
  // e_{k+1} = e_k / 4 * 4 + e_k % 4 is e_k, so every level folds back to i0. As a tree the
  // 60th level has 2^60 leaves; as a DAG 60 * 6 nodes, which a memoised simplifier visits once.
  ExprRef e = v("i0");
  for (int k = 0; k < 60; ++k) e = add(mul(div(e, c(4)), c(4)), rem(e, c(4)));
  EXPECT_EQ(simplified(e, 1000, 3), v("i0"));
  // A chain that does not fold (e / 3 + e % 5 at each level) is simplified in linear time
  // too; at 16 levels (small enough for the tree-walking eval) its value stays right.
  ExprRef g = v("i0");
  for (int k = 0; k < 60; ++k) {
    g = add(div(g, c(3)), rem(g, c(5)));
    if (k != 15) continue;
    ExprRef s = simplified(g, 1000, 3);
    for (int64_t i : {0, 1, 7, 500, 999})
      EXPECT_EQ(eval(s, {{"i0", i}, {"i1", 0}}), eval(g, {{"i0", i}, {"i1", 0}})) << i;
  }
  // At 60 levels finishing is the check (the unmemoised simplifier walked the 2^60-leaf tree).
  EXPECT_EQ(simplified(g, 1000, 3)->type, DType::I64);
}

}  // namespace
}  // namespace kiln::kernel
