// Concurrent kernels (runtime/concurrency.h): the plan finds the independent branches between a
// fork and their join, and the buffer plan keeps what a stage touches apart. The CPU program that
// runs them: cpu_concurrency_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "concurrency_module.h"
#include "fusion/fusion.h"
#include "ir/text/text.h"
#include "kernel/lower.h"
#include "runtime/buffer_plan.h"
#include "runtime/concurrency.h"

namespace kiln::runtime {
namespace {

// Whether kernel `k` reads or writes value `v` (or a slice of it).
bool touches(const kernel::Kernel& k, const Value* v) {
  for (const kernel::Buffer& b : k.buffers)
    if (b.value == v || (b.view && b.view->of == v)) return true;
  return false;
}

// Without a target (no concatenation in place) the module lowers to a kernel per branch step
// (tanh fused into its convolution), the concatenation and the last convolution. The window from
// the first branch kernel to the last is one stage of two lanes; the concatenation (the join) is
// not in it. Every arena value and temp the stage touches gets memory of its own.
TEST(Concurrency, BranchesBetweenForkAndJoinFormOneStage) {
  auto m = parseModule(kModule, "module.kir");
  ASSERT_TRUE(m.isOk()) << m.status().str();
  const Function& f = *(*m)->entry();
  fusion::FusionPlan plan = fusion::planFusion(f);
  auto kernels = kernel::lowerPlan(f, plan);
  ASSERT_TRUE(kernels.isOk()) << kernels.status().str();
  const size_t n = kernels->size();
  // Every kernel as long on two threads as on one (small ones split poorly).
  KernelCosts cost{std::vector<double>(n, 1e-4), std::vector<double>(n, 1e-4)};
  ConcurrencyPlan one = planConcurrency(*kernels, cost, 1);
  EXPECT_TRUE(one.stages.empty());
  ConcurrencyPlan c = planConcurrency(*kernels, cost, 2);
  ASSERT_EQ(c.stages.size(), 1u) << describeConcurrency(c, *kernels, 2);
  const ConcurrentStage& s = c.stages[0];
  EXPECT_EQ(s.groups, 3);
  ASSERT_EQ(s.lanes.size(), 2u);
  // The branches' four kernels; the join (the concatenation) and the last convolution follow.
  EXPECT_EQ(s.last - s.first + 1, 4) << describeConcurrency(c, *kernels, 2);
  EXPECT_EQ(static_cast<size_t>(s.last) + 3, n) << describeConcurrency(c, *kernels, 2);
  std::set<int> inLanes;
  for (const auto& lane : s.lanes) inLanes.insert(lane.begin(), lane.end());
  EXPECT_EQ(inLanes.size(), 4u);
  EXPECT_EQ(*inLanes.begin(), s.first);
  EXPECT_EQ(*inLanes.rbegin(), s.last);
  for (int k = 0; k < static_cast<int>(n); ++k)
    EXPECT_EQ(c.stageOf[static_cast<size_t>(k)], k >= s.first && k <= s.last ? 0 : -1);

  auto buffers = planBuffers(f, *kernels, kBufferAlignment, c.ranges());
  ASSERT_TRUE(buffers.isOk()) << buffers.status().str();
  std::vector<std::pair<int64_t, int64_t>> used;  // [offset, end) of everything the stage touches
  for (const auto& [v, slot] : buffers->values) {
    if (slot.storage != Storage::Arena || slot.sharesWith) continue;
    bool inStage = false;
    for (int k = s.first; k <= s.last; ++k)
      inStage |= touches((*kernels)[static_cast<size_t>(k)], v);
    if (inStage) used.push_back({slot.offset, slot.offset + slot.bytes});
  }
  for (int k = s.first; k <= s.last; ++k) {
    size_t t = 0;
    for (const kernel::Buffer& b : (*kernels)[static_cast<size_t>(k)].buffers)
      if (b.role == kernel::BufferRole::Temp) {
        int64_t at = buffers->temps[static_cast<size_t>(k)][t++];
        used.push_back({at, at + b.elements() * static_cast<int64_t>(dtypeSize(b.type))});
      }
  }
  ASSERT_GE(used.size(), 4u);  // a1, a2, b2 and c1 in the arena
  std::sort(used.begin(), used.end());
  for (size_t i = 1; i < used.size(); ++i)
    EXPECT_LE(used[i - 1].second, used[i].first) << "buffers " << i - 1 << " and " << i;
  EXPECT_EQ(buffers->inPlace, 0);
}

// A kernel that depends on every group of its window ends it; one that depends on some of them
// joins those: two chains that each read the parameter, then a kernel of the first chain, form
// one window of two groups.
TEST(Concurrency, AKernelOfOneBranchKeepsTheWindowOpen) {
  auto m = parseModule(R"(
func @main(%x: f32[64,64], %w: f32[64,64]) -> (f32[64,64], f32[64,64]) {
  %a = f32[64,64] dot_general(%x, %w) {lhs_contracting = [1], rhs_contracting = [0]}
  %b = f32[64,64] dot_general(%w, %x) {lhs_contracting = [1], rhs_contracting = [0]}
  %a2 = f32[64,64] dot_general(%a, %w) {lhs_contracting = [1], rhs_contracting = [0]}
  %b2 = f32[64,64] dot_general(%b, %w) {lhs_contracting = [1], rhs_contracting = [0]}
  return %a2, %b2
})",
                       "chains.kir");
  ASSERT_TRUE(m.isOk()) << m.status().str();
  const Function& f = *(*m)->entry();
  fusion::FusionPlan plan = fusion::planFusion(f);
  auto kernels = kernel::lowerPlan(f, plan);
  ASSERT_TRUE(kernels.isOk()) << kernels.status().str();
  ASSERT_EQ(kernels->size(), 4u);
  std::vector<double> same(4, 1e-4);
  ConcurrencyPlan c = planConcurrency(*kernels, {same, same}, 2);
  ASSERT_EQ(c.stages.size(), 1u);
  EXPECT_EQ(c.stages[0].first, 0);
  EXPECT_EQ(c.stages[0].last, 3);
  EXPECT_EQ(c.stages[0].groups, 2);
  // Lanes so unequal that one thread per lane loses to each kernel on every thread: none.
  ConcurrencyPlan uneven =
      planConcurrency(*kernels, {{1e-2, 1e-5, 1e-2, 1e-5}, {6e-3, 1e-5, 6e-3, 1e-5}}, 2);
  EXPECT_TRUE(uneven.stages.empty()) << describeConcurrency(uneven, *kernels, 2);
  // Kernels that split perfectly over the threads: none either.
  ConcurrencyPlan scaling = planConcurrency(*kernels, {same, std::vector<double>(4, 5e-5)}, 2);
  EXPECT_TRUE(scaling.stages.empty()) << describeConcurrency(scaling, *kernels, 2);
}

}  // namespace
}  // namespace kiln::runtime
