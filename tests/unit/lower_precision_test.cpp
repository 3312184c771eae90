// passes/lower_precision.h: f32 values become f16 or bf16 while the signature stays f32, and the
// result stays within the low type's tolerance of the f32 one (docs/gpu.md states them).
#include <gtest/gtest.h>

#include <cmath>

#include "interp/interpreter.h"
#include "ir/text/text.h"
#include "ir/verifier.h"
#include "passes/lower_precision.h"

namespace kiln {
namespace {

constexpr const char* kText = R"(func @main(%x: f32[4,8], %i: i32[4]) -> (f32[4,3], i32[4]) {
  %w = f32[8,3] constant() {value = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8, 1.9, 2.0, 2.1, 2.2, 2.3, 2.4]}
  %m = f32[4,3] dot_general(%x, %w) {lhs_contracting = [1], rhs_contracting = [0]}
  %s = f32[4,3] softmax(%m) {axis = 1}
  return %s, %i
})";

std::vector<Tensor> inputs() {
  Tensor x(DType::F32, {4, 8}), i(DType::I32, {4});
  for (int64_t k = 0; k < 32; ++k) x.setDouble(k, std::sin(0.3 * double(k)));
  for (int64_t k = 0; k < 4; ++k) i.setDouble(k, double(k));
  return {x, i};
}

void expectLowered(DType low, double tolerance) {
  auto ref = parseModule(kText, "t.kir");
  auto m = parseModule(kText, "t.kir");
  ASSERT_TRUE(ref.isOk() && m.isOk());
  auto changed = lowerPrecision(**m, low);
  ASSERT_TRUE(changed.isOk()) << changed.status().str();
  EXPECT_TRUE(*changed);
  const Function& f = *(*m)->entry();
  ASSERT_TRUE(verify(f).isOk()) << verify(f).str();
  // The signature stays: f32 in and out, the i32 pass-through untouched.
  EXPECT_EQ(f.parameter(0)->type().dtype(), DType::F32);
  EXPECT_EQ(f.outputs()[0]->type().dtype(), DType::F32);
  EXPECT_EQ(f.outputs()[1]->type().dtype(), DType::I32);
  int lowValues = 0;
  for (const auto& n : f.nodes()) {
    if (n->op() == OpCode::Constant) {
      EXPECT_EQ(n->constantData().tensor.dtype(), low);
      // 0.1 rounded to the low type, not kept at f32.
      EXPECT_NE(n->constantData().tensor.getDouble(0), double(0.1f));
    }
    if (n->op() == OpCode::DotGeneral || n->op() == OpCode::Softmax) {
      EXPECT_EQ(n->result()->type().dtype(), low);
      ++lowValues;
    }
  }
  EXPECT_EQ(lowValues, 2);
  auto want = interpret(*(*ref)->entry(), inputs());
  auto got = interpret(f, inputs());
  ASSERT_TRUE(want.isOk() && got.isOk()) << got.status().str();
  double err = 0;
  for (int64_t k = 0; k < 12; ++k)
    err = std::max(err, std::abs((*got)[0].getDouble(k) - (*want)[0].getDouble(k)));
  EXPECT_LE(err, tolerance);
  EXPECT_GT(err, 0.0);  // the low type did round something
  for (int64_t k = 0; k < 4; ++k) EXPECT_EQ((*got)[1].getDouble(k), double(k));
}

// Softmax outputs lie in (0, 1): absolute errors are relative to the largest output.
TEST(LowerPrecision, F16KeepsTheSignatureAndTheTolerance) { expectLowered(DType::F16, 1e-2); }
TEST(LowerPrecision, Bf16KeepsTheSignatureAndTheTolerance) { expectLowered(DType::BF16, 5e-2); }

TEST(LowerPrecision, OtherTypesAreRefused) {
  auto m = parseModule(kText, "t.kir");
  ASSERT_TRUE(m.isOk());
  auto r = lowerPrecision(**m, DType::F64);
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("f16 or bf16, not f64"), std::string::npos);
}

}  // namespace
}  // namespace kiln
