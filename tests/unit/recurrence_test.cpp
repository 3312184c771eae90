// lstm and gru: the type rule, and the unrolled form (decompose-recurrences) against the
// interpreter's step-by-step reference kernel on seeded random weights and inputs.
//
// Tolerance: |unrolled - whole| <= 1e-5 * max(1, max|whole|) in f32. The reference computes in
// double and rounds once; the unrolled graph rounds every step's gates and states to f32, and a
// state passes through tanh and sigmoid (slopes at most 1), so the error stays within a few f32
// ulps per step over these 5 steps (measured: under 1e-6). f64: 1e-12.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "interp/interpreter.h"
#include "ir/builder.h"
#include "ir/verifier.h"
#include "passes/decompose_composites.h"

namespace kiln {
namespace {

struct Case {
  OpCode op;
  std::string direction;
  bool linearBeforeReset = false;
  DType dtype = DType::F32;
};

constexpr int64_t kSteps = 5, kBatch = 2, kInput = 3, kHidden = 4;

std::string describe(const Case& c) {
  return std::string(opName(c.op)) + " " + c.direction + (c.linearBeforeReset ? " lbr " : " ") +
         std::string(dtypeName(c.dtype));
}

int64_t dirsOf(const Case& c) { return c.direction == "bidirectional" ? 2 : 1; }

std::vector<std::vector<int64_t>> operandDims(const Case& c) {
  const int64_t d = dirsOf(c), g = c.op == OpCode::Lstm ? 4 : 3;
  std::vector<std::vector<int64_t>> dims = {{kSteps, kBatch, kInput},
                                            {d, g * kHidden, kInput},
                                            {d, g * kHidden, kHidden},
                                            {d, 2 * g * kHidden},
                                            {d, kBatch, kHidden}};
  if (c.op == OpCode::Lstm) dims.push_back({d, kBatch, kHidden});
  return dims;
}

std::unique_ptr<Module> build(const Case& c) {
  auto m = std::make_unique<Module>();
  Function* f = m->addFunction("main");
  Builder b(f);
  std::vector<Value*> operands;
  for (const auto& dims : operandDims(c))
    operands.push_back(
        b.parameter(TensorType::of(c.dtype, dims), "p" + std::to_string(operands.size())));
  AttrMap attrs{{"direction", enumAttr(c.direction)}};
  if (c.op == OpCode::Gru) attrs["linear_before_reset"] = boolAttr(c.linearBeforeReset);
  std::vector<Value*> results = b.opN(c.op, operands, attrs);
  EXPECT_TRUE(b.ok()) << b.status().str();
  f->setOutputs(results);
  return m;
}

std::vector<Tensor> randomInputs(const Case& c, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<Tensor> inputs;
  for (const auto& dims : operandDims(c)) {
    Tensor t(c.dtype, dims);
    for (int64_t i = 0; i < t.numElements(); ++i) t.setDouble(i, u(rng));
    inputs.push_back(std::move(t));
  }
  return inputs;
}

void checkUnrolled(const Case& c, unsigned seed) {
  SCOPED_TRACE(describe(c));
  auto whole = build(c);
  auto unrolled = build(c);
  ASSERT_TRUE(verify(*whole).isOk()) << verify(*whole).str();
  StatusOr<bool> changed = decomposeRecurrences(*unrolled);
  ASSERT_TRUE(changed.isOk()) << changed.status().str();
  EXPECT_TRUE(*changed);
  ASSERT_TRUE(verify(*unrolled).isOk()) << verify(*unrolled).str();
  for (const auto& n : unrolled->entry()->nodes())
    EXPECT_NE(n->info().opClass, OpClass::Composite) << n->describe();

  const std::vector<Tensor> inputs = randomInputs(c, seed);
  auto ref = interpret(*whole->entry(), inputs);
  ASSERT_TRUE(ref.isOk()) << ref.status().str();
  auto got = interpret(*unrolled->entry(), inputs);
  ASSERT_TRUE(got.isOk()) << got.status().str();
  ASSERT_EQ(ref->size(), c.op == OpCode::Lstm ? 3u : 2u);
  ASSERT_EQ(got->size(), ref->size());
  const double tol = c.dtype == DType::F64 ? 1e-12 : 1e-5;
  for (size_t r = 0; r < ref->size(); ++r) {
    const Tensor &want = (*ref)[r], &have = (*got)[r];
    ASSERT_EQ(want.type(), have.type()) << "result " << r;
    double scale = 1, worst = 0;
    for (int64_t i = 0; i < want.numElements(); ++i)
      scale = std::max(scale, std::abs(want.getDouble(i)));
    for (int64_t i = 0; i < want.numElements(); ++i)
      worst = std::max(worst, std::abs(want.getDouble(i) - have.getDouble(i)));
    EXPECT_LE(worst, tol * scale) << "result " << r;
    // The states move: a recurrence that ignored its input would still agree with itself.
    EXPECT_GT(std::abs(want.getDouble(0) - want.getDouble(want.numElements() - 1)), 0) << r;
  }
}

TEST(Recurrence, LstmUnrolledMatchesTheReference) {
  unsigned seed = 1;
  for (const char* dir : {"forward", "reverse", "bidirectional"})
    checkUnrolled(Case{OpCode::Lstm, dir}, seed++);
  checkUnrolled(Case{OpCode::Lstm, "bidirectional", false, DType::F64}, seed++);
}

TEST(Recurrence, GruUnrolledMatchesTheReference) {
  unsigned seed = 11;
  for (bool lbr : {false, true})
    for (const char* dir : {"forward", "reverse", "bidirectional"})
      checkUnrolled(Case{OpCode::Gru, dir, lbr}, seed++);
}

// A hand-computed step: one unit, one input, zero initial state, all weights 1 and biases 0.
// LSTM: i = o = f = sigmoid(x), g = tanh(x), c = i*g, h = o*tanh(c).
TEST(Recurrence, LstmOneStepByHand) {
  Case c{OpCode::Lstm, "forward"};
  auto m = std::make_unique<Module>();
  Function* f = m->addFunction("main");
  Builder b(f);
  std::vector<Value*> ops{b.parameter(TensorType::of(DType::F32, {1, 1, 1}), "x"),
                          b.parameter(TensorType::of(DType::F32, {1, 4, 1}), "w"),
                          b.parameter(TensorType::of(DType::F32, {1, 4, 1}), "r"),
                          b.parameter(TensorType::of(DType::F32, {1, 8}), "b"),
                          b.parameter(TensorType::of(DType::F32, {1, 1, 1}), "h0"),
                          b.parameter(TensorType::of(DType::F32, {1, 1, 1}), "c0")};
  f->setOutputs(b.opN(OpCode::Lstm, ops, {{"direction", enumAttr(c.direction)}}));
  ASSERT_TRUE(b.ok()) << b.status().str();
  std::vector<Tensor> in;
  for (Value* v : ops) {
    Tensor t(DType::F32, v->type().staticDims());
    for (int64_t i = 0; i < t.numElements(); ++i) t.setDouble(i, v == ops[1] || v == ops[2]);
    in.push_back(std::move(t));
  }
  in[0].setDouble(0, 0.5);
  auto out = interpret(*f, in);
  ASSERT_TRUE(out.isOk()) << out.status().str();
  const double s = 1 / (1 + std::exp(-0.5)), cell = s * std::tanh(0.5);
  EXPECT_NEAR((*out)[0].getDouble(0), s * std::tanh(cell), 1e-7);
  EXPECT_NEAR((*out)[1].getDouble(0), s * std::tanh(cell), 1e-7);
  EXPECT_NEAR((*out)[2].getDouble(0), cell, 1e-7);
}

TEST(Recurrence, TypeRuleNamesTheMismatch) {
  auto m = std::make_unique<Module>();
  Function* f = m->addFunction("main");
  Builder b(f);
  auto p = [&](std::vector<int64_t> d) { return b.parameter(TensorType::of(DType::F32, d)); };
  // r's gate rows (9) do not match 3 gates of hidden size 4.
  b.opN(OpCode::Gru, {p({5, 2, 3}), p({1, 12, 3}), p({1, 9, 4}), p({1, 24}), p({1, 2, 4})},
        {{"direction", enumAttr("forward")}});
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("r f32[1,9,4] must be [1, 12, 4]"), std::string::npos)
      << b.status().str();
}

}  // namespace
}  // namespace kiln
