// algebraic-simplify's float policy (exact for every input, NaN, infinities and subnormals
// included, up to the sign of zero), constant-fold's options, and cse on constants.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "interp/interpreter.h"
#include "ir/builder.h"
#include "ir/text/text.h"
#include "passes/algebraic_simplify.h"
#include "passes/constant_fold.h"
#include "passes/cse.h"
#include "passes/rewrite_util.h"

namespace kiln {
namespace {

std::unique_ptr<Module> parse(const std::string& text) {
  auto m = parseModule(text, "test.kir");
  EXPECT_TRUE(m.isOk()) << m.status().str();
  return m ? std::move(*m) : nullptr;
}

size_t countOp(const Function& f, OpCode op) {
  size_t n = 0;
  for (const auto& node : f.nodes()) n += node->op() == op ? 1 : 0;
  return n;
}

// Every float rule on one input vector of special values; each output is one rule's chain.
const char* kFloatRules =
    R"(func @main(%x: f32[8]) -> (f32[8], f32[8], f32[8], f32[8], f32[8], f32[8], f32[8], f32[8], f32[8], f32[8]) {
  %z = f32[] constant() {value = [0.0]}
  %zb = f32[8] broadcast_in_dim(%z) {dims = []}
  %one = f32[] constant() {value = [1.0]}
  %oneb = f32[8] broadcast_in_dim(%one) {dims = []}
  %m1 = f32[] constant() {value = [-1.0]}
  %m1b = f32[8] broadcast_in_dim(%m1) {dims = []}
  %q = f32[] constant() {value = [0.25]}
  %qb = f32[8] broadcast_in_dim(%q) {dims = []}
  %big = f32[] constant() {value = [1.7014118e+38]}
  %bigb = f32[8] broadcast_in_dim(%big) {dims = []}
  %a = f32[8] add(%x, %zb)
  %s = f32[8] sub(%x, %zb)
  %m = f32[8] mul(%oneb, %x)
  %d = f32[8] div(%x, %oneb)
  %d4 = f32[8] div(%x, %qb)
  %dbig = f32[8] div(%x, %bigb)
  %n = f32[8] mul(%x, %m1b)
  %p = f32[8] pow(%x, %oneb)
  %nn1 = f32[8] neg(%x)
  %nn = f32[8] neg(%nn1)
  %neg = f32[8] neg(%x)
  %an = f32[8] add(%x, %neg)
  return %a, %s, %m, %d, %d4, %dbig, %n, %p, %nn, %an
}
)";

bool sameFloat(float a, float b) {
  if (std::isnan(a)) return std::isnan(b);
  if (a == 0 && b == 0) return true;  // the stated exception: the sign of a zero may change
  return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
}

TEST(AlgebraicSimplify, FloatRulesAreExactOnSpecialValues) {
  auto before = parse(kFloatRules);
  auto after = parse(kFloatRules);
  auto changed = algebraicSimplify(*after);
  ASSERT_TRUE(changed.isOk()) << changed.status().str();
  EXPECT_TRUE(*changed);
  // Every division goes: by 1 (identity), by 0.25 and by 2^127 (powers of two whose reciprocals
  // f32 holds exactly, 2^-127 as a subnormal). add(x, neg(x)) became sub(x, x), which stays.
  EXPECT_EQ(countOp(*after->entry(), OpCode::Div), 0u) << printModule(*after);
  EXPECT_EQ(countOp(*after->entry(), OpCode::Pow), 0u) << printModule(*after);
  float inf = std::numeric_limits<float>::infinity();
  Tensor x(DType::F32, {8});
  float values[8] = {std::numeric_limits<float>::quiet_NaN(),
                     inf,
                     -inf,
                     -0.0f,
                     1.5f,
                     -3.0e38f,
                     1.0e-45f,
                     6.0e-39f};
  for (int i = 0; i < 8; ++i) x.mutableData<float>()[i] = values[i];
  auto ref = interpret(*before->entry(), std::vector<Tensor>{x});
  auto got = interpret(*after->entry(), std::vector<Tensor>{x});
  ASSERT_TRUE(ref.isOk()) << ref.status().str();
  ASSERT_TRUE(got.isOk()) << got.status().str();
  for (size_t o = 0; o < ref->size(); ++o)
    for (int i = 0; i < 8; ++i)
      EXPECT_TRUE(sameFloat((*ref)[o].data<float>()[i], (*got)[o].data<float>()[i]))
          << "output " << o << " input " << values[i] << ": " << (*ref)[o].data<float>()[i]
          << " vs " << (*got)[o].data<float>()[i];
}

TEST(AlgebraicSimplify, IntegerRulesWrapLikeTheOps) {
  const char* text = R"(func @main(%i: i32[4]) -> (i32[4], i32[4], i32[4]) {
  %z = i32[4] constant() {value = [0, 0, 0, 0]}
  %m1 = i32[4] constant() {value = [-1, -1, -1, -1]}
  %a = i32[4] mul(%i, %z)
  %b = i32[4] sub(%i, %i)
  %c = i32[4] mul(%i, %m1)
  return %a, %b, %c
}
)";
  auto before = parse(text);
  auto after = parse(text);
  ASSERT_TRUE(algebraicSimplify(*after).isOk());
  EXPECT_EQ(countOp(*after->entry(), OpCode::Mul), 0u) << printModule(*after);
  EXPECT_EQ(countOp(*after->entry(), OpCode::Sub), 0u) << printModule(*after);
  Tensor i(DType::I32, {4});
  int32_t values[4] = {std::numeric_limits<int32_t>::min(), -7, 0,
                       std::numeric_limits<int32_t>::max()};
  for (int k = 0; k < 4; ++k) i.mutableData<int32_t>()[k] = values[k];
  auto ref = interpret(*before->entry(), std::vector<Tensor>{i});
  auto got = interpret(*after->entry(), std::vector<Tensor>{i});
  ASSERT_TRUE(ref.isOk() && got.isOk());
  for (size_t o = 0; o < ref->size(); ++o)
    EXPECT_TRUE((*ref)[o].identical((*got)[o])) << "output " << o;
}

// A 1-D convolution (NCW) of x[1,2,X] with w[3,2,K]: stride, padding and dilation given.
// The weights are the constant 1 - 0.125 i (i row-major), with `nan` at index 0 when given.
std::string conv1d(int64_t x, int64_t k, int64_t stride, int64_t lo, int64_t hi, int64_t dil,
                   bool nan = false) {
  const int64_t y = (x + lo + hi - ((k - 1) * dil + 1)) / stride + 1;
  auto s = [](int64_t v) { return std::to_string(v); };
  std::string w;
  for (int64_t i = 0; i < 6 * k; ++i)
    w += (i ? ", " : "") + (nan && i == 0 ? std::string("nan") : std::to_string(1.0 - 0.125 * i));
  return "func @main(%x: f32[1,2," + s(x) + "]) -> (f32[1,3," + s(y) + "]) {\n  %w = f32[3,2," +
         s(k) + "] constant() {value = [" + w + "]}\n  %y = f32[1,3," + s(y) +
         "] convolution(%x, %w) {window_strides = [" + s(stride) + "], padding_low = [" + s(lo) +
         "], padding_high = [" + s(hi) + "], rhs_dilation = [" + s(dil) + "]}\n  return %y\n}\n";
}

// Dropping the taps of a convolution that read only padding adds no value: over strides,
// paddings and dilations (those where the window fits), the simplified convolution gives the
// interpreter's values bit for bit (the dropped taps only added zeros), and some drop taps.
TEST(AlgebraicSimplify, ConvolutionTapsOfPaddingAreDroppedExactly) {
  int rewritten = 0, cases = 0;
  for (int64_t x : {1, 3, 5})
    for (int64_t k : {1, 2, 3})
      for (int64_t stride : {1, 2, 4})
        for (int64_t dil : {1, 2, 5})
          for (int64_t lo : {0, 2, 6})
            for (int64_t hi : {0, 1, 7}) {
              if (x + lo + hi < (k - 1) * dil + 1) continue;
              const std::string text = conv1d(x, k, stride, lo, hi, dil);
              auto before = parse(text), after = parse(text);
              ASSERT_TRUE(before && after);
              ASSERT_TRUE(algebraicSimplify(*after).isOk()) << text;
              rewritten += countOp(*after->entry(), OpCode::Slice) > 0;
              ++cases;
              Tensor xs(DType::F32, {1, 2, x});
              for (int64_t i = 0; i < xs.numElements(); ++i)
                xs.mutableData<float>()[i] = 0.25f * static_cast<float>(i + 1);
              auto ref = interpret(*before->entry(), std::vector<Tensor>{xs});
              auto got = interpret(*after->entry(), std::vector<Tensor>{xs});
              ASSERT_TRUE(ref.isOk() && got.isOk()) << text << printModule(*after);
              ASSERT_EQ((*ref)[0].numElements(), (*got)[0].numElements());
              for (int64_t i = 0; i < (*ref)[0].numElements(); ++i)
                ASSERT_TRUE(sameFloat((*ref)[0].data<float>()[i], (*got)[0].data<float>()[i]))
                    << text << printModule(*after) << "element " << i;
            }
  EXPECT_GE(rewritten, 100) << rewritten << " of " << cases;  // 152 of 615
  // With a NaN weight nothing is dropped (NaN * 0 is NaN); without it the same convolution,
  // whose outer taps read only padding, drops them.
  for (bool nan : {true, false}) {
    auto m = parse(conv1d(3, 3, 1, 6, 6, 5, nan));
    ASSERT_TRUE(m && algebraicSimplify(*m).isOk());
    EXPECT_EQ(countOp(*m->entry(), OpCode::Slice), nan ? 0u : 1u) << printModule(*m);
  }
  // A 3x3 convolution of dilation 24 over 14x14 (deeplabv3's ASPP) reads the input only at its
  // centre tap: it becomes a 1x1 convolution without padding.
  std::string halves;
  for (int i = 0; i < 4 * 8 * 9; ++i) halves += i ? ", 0.5" : "0.5";
  auto m = parse("func @main(%x: f32[1,8,14,14]) -> (f32[1,4,14,14]) {\n"
                 "  %w = f32[4,8,3,3] constant() {value = [" +
                 halves +
                 "]}\n  %y = f32[1,4,14,14] convolution(%x, %w) {padding_low = [24, 24], "
                 "padding_high = [24, 24], rhs_dilation = [24, 24]}\n  return %y\n}\n");
  ASSERT_TRUE(m && algebraicSimplify(*m).isOk());
  const std::string printed = printModule(*m);
  EXPECT_NE(printed.find("f32[4,8,1,1] slice(%w)"), std::string::npos) << printed;
  EXPECT_NE(printed.find("padding_low = [0, 0], padding_high = [0, 0], rhs_dilation = [1, 1]"),
            std::string::npos)
      << printed;
}

// A 1-D pool of kind `kind` over pad(x[1,X,2], v) {lo, hi}, with the pool's own padding
// plo/phi, window k, stride, and the count of a 1-D average pool over the padded extent (a pool
// of ones without padding).
std::string poolOfPad(const std::string& kind, const std::string& v, int64_t x, int64_t lo,
                      int64_t hi, int64_t k, int64_t stride, int64_t plo, int64_t phi) {
  auto s = [](int64_t n) { return std::to_string(n); };
  const int64_t p = x + lo + hi, y = (p + plo + phi - k) / stride + 1;
  const std::string win = "window_dimensions = [1, " + s(k) + ", 1], window_strides = [1, " +
                          s(stride) + ", 1], padding_low = [0, " + s(plo) +
                          ", 0], padding_high = [0, " + s(phi) + ", 0]";
  const std::string out = "f32[1," + s(y) + ",2]";
  return "func @main(%x: f32[1," + s(x) + ",2]) -> (" + out + ", " + out +
         ") {\n  %v = f32[] constant() {value = [" + v + "]}\n  %p = f32[1," + s(p) +
         ",2] pad(%x, %v) {low = [0, " + s(lo) + ", 0], high = [0, " + s(hi) +
         ", 0]}\n  %y = " + out + " reduce_window(%p) {kind = " + kind + ", " + win +
         "}\n  %one = f32[] constant() {value = [1.0]}\n  %ones = f32[1," + s(p + plo + phi) +
         ",2] broadcast_in_dim(%one) {dims = []}\n  %c = " + out +
         " reduce_window(%ones) {kind = sum, window_dimensions = [1, " + s(k) +
         ", 1], window_strides = [1, " + s(stride) + ", 1]}\n  return %y, %c\n}\n";
}

// A pad of the pool's identity joins the pool's padding, and a pool of a splat without padding
// becomes a splat: over pads, pools' own paddings, windows and strides, and inputs with NaN,
// infinities and signed zeros, the simplified program gives the interpreter's values bit for
// bit, the pad is gone and the count is a constant.
TEST(AlgebraicSimplify, PoolsOfPadsAndSplatsAreExact) {
  const float inf = std::numeric_limits<float>::infinity();
  const float values[] = {1.5f, -0.0f, std::nanf(""), -inf, 3.25f, 0.0f, inf, -2.0f, 7.0f};
  int cases = 0;
  for (const auto& [kind, v] : {std::pair<std::string, std::string>{"sum", "0.0"},
                                {"sum", "-0.0"},
                                {"max", "-inf"},
                                {"min", "inf"}})
    for (int64_t x : {1, 4, 9})
      for (int64_t lo : {0, 1, 3})
        for (int64_t hi : {0, 2})
          for (int64_t k : {1, 3, 4})
            for (int64_t stride : {1, 2})
              for (int64_t plo : {0, 1}) {
                const int64_t phi = 1 - plo;
                if (x + lo + hi + plo + phi < k) continue;
                const std::string text = poolOfPad(kind, v, x, lo, hi, k, stride, plo, phi);
                auto before = parse(text), after = parse(text);
                ASSERT_TRUE(before && after) << text;
                ASSERT_TRUE(algebraicSimplify(*after).isOk()) << text;
                EXPECT_EQ(countOp(*after->entry(), OpCode::Pad), 0u) << printModule(*after);
                EXPECT_EQ(countOp(*after->entry(), OpCode::ReduceWindow), 1u)
                    << printModule(*after);
                ++cases;
                Tensor xs(DType::F32, {1, x, 2});
                for (int64_t i = 0; i < xs.numElements(); ++i)
                  xs.mutableData<float>()[i] = values[i % 9];
                auto ref = interpret(*before->entry(), std::vector<Tensor>{xs});
                auto got = interpret(*after->entry(), std::vector<Tensor>{xs});
                ASSERT_TRUE(ref.isOk() && got.isOk()) << text << printModule(*after);
                for (size_t o = 0; o < 2; ++o)
                  for (int64_t i = 0; i < (*ref)[o].numElements(); ++i) {
                    const float a = (*ref)[o].data<float>()[i], b = (*got)[o].data<float>()[i];
                    ASSERT_TRUE(std::isnan(a)
                                    ? std::isnan(b)
                                    : std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b))
                        << text << printModule(*after) << "output " << o << " element " << i;
                  }
              }
  EXPECT_GE(cases, 300);
  // A pad of another value than the identity stays (a sum over a pad of 1 counts the padding).
  auto m = parse(poolOfPad("sum", "1.0", 4, 1, 1, 3, 1, 0, 1));
  ASSERT_TRUE(m && algebraicSimplify(*m).isOk());
  EXPECT_EQ(countOp(*m->entry(), OpCode::Pad), 1u) << printModule(*m);
}

// dot_general(transpose(x, p), y) -> transpose(dot_general(x, y), q): for every permutation of a
// rank-4 lhs whose result meets a transpose, with and without a batch dim (dim 0 of the
// transposed lhs) and contracting its last dim, the product reads x itself and the values are
// bit-identical (the same products and sums, in the same order).
TEST(AlgebraicSimplify, ProductsOfTransposesKeepTheirValues) {
  const int64_t ext[4] = {2, 3, 4, 5};
  std::vector<int64_t> p = {0, 1, 2, 3};
  int rewritten = 0;
  do {
    for (bool batch : {false, true}) {
      auto dims = [&](const std::vector<int64_t>& d) {
        std::string s;
        for (int64_t v : d) s += (s.empty() ? "" : ",") + std::to_string(v);
        return s;
      };
      std::vector<int64_t> t = {ext[p[0]], ext[p[1]], ext[p[2]], ext[p[3]]};
      // y: [batch?, K, 6]; result: [batch?, lhs free..., 6].
      std::vector<int64_t> y =
          batch ? std::vector<int64_t>{t[0], t[3], 6} : std::vector<int64_t>{t[3], 6};
      std::vector<int64_t> r = batch ? std::vector<int64_t>{t[0], t[1], t[2], 6}
                                     : std::vector<int64_t>{t[0], t[1], t[2], 6};
      std::vector<int64_t> rt = {r[1], r[0], r[2], r[3]};
      const std::string attrs = batch ? "lhs_batch = [0], rhs_batch = [0], lhs_contracting = [3], "
                                        "rhs_contracting = [1]"
                                      : "lhs_contracting = [3], rhs_contracting = [0]";
      const std::string text = "func @main(%x: f32[2,3,4,5], %y: f32[" + dims(y) + "]) -> (f32[" +
                               dims(rt) +
                               "]) {\n"
                               "  %t = f32[" +
                               dims(t) + "] transpose(%x) {permutation = [" + dims(p) +
                               "]}\n"
                               "  %r = f32[" +
                               dims(r) + "] dot_general(%t, %y) {" + attrs +
                               "}\n"
                               "  %o = f32[" +
                               dims(rt) +
                               "] transpose(%r) {permutation = [1, 0, 2, 3]}\n"
                               "  return %o\n}\n";
      auto before = parse(text), after = parse(text);
      ASSERT_TRUE(before && after) << text;
      ASSERT_TRUE(algebraicSimplify(*after).isOk()) << text;
      const Function& f = *after->entry();
      bool direct = false;
      for (const auto& n : f.nodes())
        direct |= n->op() == OpCode::DotGeneral && n->operand(0) == f.parameter(0);
      rewritten += direct;
      EXPECT_TRUE(direct || rewrite::isIdentityPermutation(p)) << printModule(*after);
      std::vector<Tensor> in = {Tensor(DType::F32, {2, 3, 4, 5}), Tensor(DType::F32, y)};
      for (Tensor& x : in)
        for (int64_t i = 0; i < x.numElements(); ++i)
          x.mutableData<float>()[i] = static_cast<float>(std::sin(0.37 * double(i) + 1.0));
      auto ref = interpret(*before->entry(), in);
      auto got = interpret(f, in);
      ASSERT_TRUE(ref.isOk() && got.isOk()) << text << printModule(*after);
      for (int64_t i = 0; i < (*ref)[0].numElements(); ++i)
        ASSERT_EQ((*ref)[0].data<float>()[i], (*got)[0].data<float>()[i])
            << text << printModule(*after) << "element " << i;
    }
  } while (std::next_permutation(p.begin(), p.end()));
  EXPECT_GE(rewritten, 40);
}

TEST(AlgebraicSimplify, EveryRuleHasAFormula) {
  std::vector<std::string> rules = algebraicSimplifyRules();
  EXPECT_GE(rules.size(), 30u);
  for (const std::string& r : rules) EXPECT_NE(r.find("->"), std::string::npos) << r;
}

TEST(ConstantFold, OptionsBoundTheResultSize) {
  const char* text = R"(func @main() -> (f32[64]) {
  %a = f32[64] constant() {value = splat(2.0)}
  %b = f32[64] constant() {value = splat(3.0)}
  %c = f32[64] mul(%a, %b)
  return %c
}
)";
  auto m = parse(text);
  ConstantFoldOptions tight;
  tight.maxResultElements = 32;
  auto r = constantFold(*m, tight);
  ASSERT_TRUE(r.isOk());
  EXPECT_FALSE(*r) << "64 elements are above the cap of 32";
  auto r2 = constantFold(*m);
  ASSERT_TRUE(r2.isOk());
  EXPECT_TRUE(*r2);
  const Tensor& t = m->entry()->outputs()[0]->def()->constantData().tensor;
  EXPECT_EQ(t.getDouble(63), 6.0);
}

TEST(Cse, EqualConstantsMergeWhateverTheirNames) {
  // Two out-of-line entries with the same bytes (pool names differ): one constant remains.
  std::string hex(64 * 8, '0');
  std::string text = "func @main() -> (f32[64]) {\n"
                     "  %a = f32[64] constant() {value = @w1}\n"
                     "  %b = f32[64] constant() {value = @w2}\n"
                     "  %c = f32[64] add(%a, %b)\n"
                     "  return %c\n}\n"
                     "data @w1 = f32[64] 0x" +
                     hex + "\ndata @w2 = f32[64] 0x" + hex + "\n";
  auto m = parse(text);
  auto r = eliminateCommonSubexpressions(*m);
  ASSERT_TRUE(r.isOk());
  EXPECT_TRUE(*r);
  EXPECT_EQ(countOp(*m->entry(), OpCode::Constant), 1u) << printModule(*m);
  auto again = eliminateCommonSubexpressions(*m);
  ASSERT_TRUE(again.isOk());
  EXPECT_FALSE(*again);
}

TEST(Cse, LargeConstantsMergeOnlyWhenEveryByteIsEqual) {
  // Constants over 64 KiB are hashed by samples of their bytes; the merge still compares them
  // whole. Two equal weights merge; one that differs from them in a single element between the
  // sampled words stays.
  const int64_t n = 40000;  // 160 KB
  Tensor w(DType::F32, {n});
  for (int64_t i = 0; i < n; ++i) w.setDouble(i, static_cast<double>(i % 977) * 0.5);
  Tensor other = w.clone();
  other.setDouble(n / 2 + 3, -1.0);
  Module m;
  Function* f = m.addFunction("main");
  Builder b(f);
  Value* a = b.constant(w.clone());
  Value* twin = b.constant(w.clone());
  Value* differs = b.constant(other);
  f->setOutputs({b.add(b.add(a, twin), differs)});
  ASSERT_TRUE(b.ok()) << b.status().str();
  auto r = eliminateCommonSubexpressions(m);
  ASSERT_TRUE(r.isOk());
  EXPECT_TRUE(*r);
  EXPECT_EQ(countOp(*f, OpCode::Constant), 2u) << printModule(m);
}

}  // namespace
}  // namespace kiln
