// The buffer plan (runtime/buffer_plan.h) of a custom kernel (fusion/custom_fusion.h): the values
// between its calls are internal and get no memory; its input and output keep theirs apart.
#include <gtest/gtest.h>

#include <span>
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

// A custom fusion that claims every chain of three matrix-product kernels.
fusion::CustomFusion threeProducts() {
  auto match = [](std::span<const fusion::Kernel* const> chain, const fusion::ValueNamer&) {
    for (const fusion::Kernel* k : chain)
      if (k->kind != fusion::KernelKind::Contraction) return fusion::CustomVerdict{};
    return fusion::CustomVerdict{fusion::CustomVerdict::Kind::Claim, "three products"};
  };
  return {"three products", 3, match};
}

// A loop kernel, three library calls in a chain, and a reduction: x (k0) is read by the first
// call only. As one custom kernel the three calls get one place in the kernel order, so x and c
// are live there together and keep their memory apart; a and b, passed between the calls, get
// none.
TEST(BufferPlan, CustomKernelsInternalValuesGetNoMemory) {
  const char* text = R"(
func @main(%p: f32[8,8], %w: f32[8,8]) -> (f32[8]) {
  %x = f32[8,8] exp(%p)
  %a = f32[8,8] dot_general(%x, %w) {lhs_contracting = [1], rhs_contracting = [0]}
  %b = f32[8,8] dot_general(%a, %w) {lhs_contracting = [1], rhs_contracting = [0]}
  %c = f32[8,8] dot_general(%b, %w) {lhs_contracting = [1], rhs_contracting = [0]}
  %out = f32[8] reduce(%c) {dims = [1], kind = sum}
  return %out
})";
  auto m = parseModule(text, "custom.kir");
  ASSERT_TRUE(m.isOk()) << m.status().str();
  const Function& f = *(*m)->entry();
  fusion::FusionOptions options;
  options.custom = {threeProducts()};
  fusion::FusionPlan plan = fusion::planFusion(f, options);
  ASSERT_EQ(plan.kernels.size(), 3u) << fusion::explainPlan(f, plan);
  EXPECT_EQ(plan.kernels[1].kind, fusion::KernelKind::Custom);
  auto kernels = kernel::lowerPlan(f, plan);
  ASSERT_TRUE(kernels.isOk()) << kernels.status().str();
  std::vector<const Value*> internal, stored;  // a, b; x, c
  for (const kernel::Buffer& b : (*kernels)[1].buffers)
    (b.role == kernel::BufferRole::Internal ? internal : stored).push_back(b.value);
  ASSERT_EQ(internal.size(), 2u) << kernel::printKernel((*kernels)[1]);

  auto p = runtime::planBuffers(f, *kernels);
  ASSERT_TRUE(p.isOk()) << p.status().str();
  for (const Value* v : internal) EXPECT_EQ(p->values.count(v), 0u);
  const Value* x = (*kernels)[0].buffers.back().value;
  const Value* c = (*kernels)[2].buffers.front().value;
  ASSERT_EQ(p->values.at(x).storage, runtime::Storage::Arena);
  EXPECT_FALSE(overlap(p->values.at(x), p->values.at(c)));
  EXPECT_EQ(p->arenaBytes, 2 * 256);
}

}  // namespace
}  // namespace kiln
