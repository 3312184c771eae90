// Tests of fold-batch-norm's weights: scaled in place only where no other tensor shares them.
#include <gtest/gtest.h>

#include "ir/text/text.h"
#include "passes/fold_batch_norm.h"

namespace kiln {
namespace {

const char* kDotScale = R"(func @main(%x: f32[3,2]) -> (f32[3,2]) {
  %w = f32[2,2] constant() {value = [1.0, 2.0, 3.0, 4.0]}
  %d = f32[3,2] dot_general(%x, %w) {lhs_contracting = [1], rhs_contracting = [0]}
  %s = f32[2] constant() {value = [10.0, 0.5]}
  %sb = f32[3,2] broadcast_in_dim(%s) {dims = [1]}
  %y = f32[3,2] mul(%d, %sb)
  return %y
}
)";

// The constant weights of the function's only dot_general.
const Tensor& dotWeights(const Module& m) {
  for (const auto& n : m.entry()->nodes())
    if (n->op() == OpCode::DotGeneral) return n->operand(1)->def()->constantData().tensor;
  ADD_FAILURE() << "no dot_general";
  static Tensor none;
  return none;
}

std::vector<float> floats(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numElements());
}

TEST(FoldBatchNorm, ScalesUnsharedWeightsInPlace) {
  auto m = parseModule(kDotScale, "test.kir");
  ASSERT_TRUE(m.isOk()) << m.status().str();
  const std::byte* before = dotWeights(**m).bytes();
  ASSERT_TRUE(foldBatchNorm(**m).value());
  EXPECT_EQ(floats(dotWeights(**m)), (std::vector<float>{10, 1, 30, 2}));
  EXPECT_EQ(dotWeights(**m).bytes(), before);
}

TEST(FoldBatchNorm, CopiesWeightsThatAnotherTensorShares) {
  auto m = parseModule(kDotScale, "test.kir");
  ASSERT_TRUE(m.isOk()) << m.status().str();
  Tensor held = dotWeights(**m);  // shares the bytes
  ASSERT_TRUE(foldBatchNorm(**m).value());
  EXPECT_EQ(floats(dotWeights(**m)), (std::vector<float>{10, 1, 30, 2}));
  EXPECT_EQ(floats(held), (std::vector<float>{1, 2, 3, 4}));
}

}  // namespace
}  // namespace kiln
