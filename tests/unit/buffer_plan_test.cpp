// The buffer plan (runtime/buffer_plan.h): kernels that run together keep their values apart.
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "fusion/fusion.h"
#include "ir/text/text.h"
#include "kernel/lower.h"
#include "runtime/buffer_plan.h"

namespace kiln {
namespace {

// Whether the arena ranges of `a` and `b` overlap.
bool overlap(const runtime::Slot& a, const runtime::Slot& b) {
  return a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
}

// A loop kernel and three library calls in a chain (the last with exp as its epilogue): x (k0)
// dies at the first call (k1), so run one by one b (k2's result) may take x's memory. When
// k1..k3 run as one (an inverted-residual block runs its three calls at the first's place,
// writing its result while it still reads its input), x, a and b must each have memory of their
// own.
TEST(BufferPlan, KernelsThatRunTogetherKeepTheirValuesApart) {
  const char* text = R"(
func @main(%p: f32[8,8], %w: f32[8,8]) -> (f32[8,8]) {
  %x = f32[8,8] exp(%p)
  %a = f32[8,8] dot_general(%x, %w) {lhs_contracting = [1], rhs_contracting = [0]}
  %b = f32[8,8] dot_general(%a, %w) {lhs_contracting = [1], rhs_contracting = [0]}
  %c = f32[8,8] dot_general(%b, %w) {lhs_contracting = [1], rhs_contracting = [0]}
  %out = f32[8,8] exp(%c)
  return %out
})";
  auto m = parseModule(text, "together.kir");
  ASSERT_TRUE(m.isOk()) << m.status().str();
  const Function& f = *(*m)->entry();
  fusion::FusionPlan plan = fusion::planFusion(f);
  auto kernels = kernel::lowerPlan(f, plan);
  ASSERT_TRUE(kernels.isOk()) << kernels.status().str();
  ASSERT_EQ(kernels->size(), 4u);
  std::vector<const Value*> values;  // x, a, b: each kernel's output but the last
  for (size_t i = 0; i + 1 < kernels->size(); ++i)
    for (const kernel::Buffer& buffer : (*kernels)[i].buffers)
      if (buffer.role == kernel::BufferRole::Output) values.push_back(buffer.value);
  ASSERT_EQ(values.size(), 3u);

  auto alone = runtime::planBuffers(f, *kernels);
  ASSERT_TRUE(alone.isOk()) << alone.status().str();
  // Run one by one, x and b share memory: the arena is smaller than three values.
  EXPECT_TRUE(overlap(alone->values.at(values[0]), alone->values.at(values[2])));
  EXPECT_LT(alone->arenaBytes, 3 * 256);

  auto together = runtime::planBuffers(f, *kernels, {{1, 3, {}}});
  ASSERT_TRUE(together.isOk()) << together.status().str();
  for (size_t i = 0; i < values.size(); ++i)
    for (size_t j = i + 1; j < values.size(); ++j)
      EXPECT_FALSE(overlap(together->values.at(values[i]), together->values.at(values[j])))
          << i << " " << j;
  EXPECT_GE(together->arenaBytes, 3 * 256);

  // A value they pass among themselves without memory (a block's intermediate) gets none.
  auto unstored = runtime::planBuffers(f, *kernels, {{1, 3, {values[1]}}});
  ASSERT_TRUE(unstored.isOk()) << unstored.status().str();
  EXPECT_EQ(unstored->values.at(values[1]).storage, runtime::Storage::Unstored);
  EXPECT_FALSE(overlap(unstored->values.at(values[0]), unstored->values.at(values[2])));
  EXPECT_EQ(unstored->arenaBytes, together->arenaBytes - 256);
}

}  // namespace
}  // namespace kiln
