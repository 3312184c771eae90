// The buffer plan (runtime/buffer_plan.h) of a custom kernel (fusion/custom_fusion.h): the values
// between its calls are internal and get no memory; its input and output keep theirs apart.
#include <gtest/gtest.h>

#include <span>
#include <utility>
#include <vector>

#include "fusion/fusion.h"
#include "ir/text/text.h"
#include "kernel/gpu_schedule.h"
#include "kernel/lower.h"
#include "kernel/schedule.h"
#include "kernel/simplify.h"
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

namespace kiln {
namespace {

// The kernels of `text` (one per op unless `fuse`) as the GPU schedule leaves them (lanes as wide
// copies), and their plan.
struct GpuPlanned {
  std::unique_ptr<Module> module;
  std::vector<kernel::Kernel> kernels;
  runtime::BufferPlan plan;
};
GpuPlanned gpuPlanned(const char* text, bool fuse = true) {
  GpuPlanned g;
  auto m = parseModule(text, "gpu.kir");
  EXPECT_TRUE(m.isOk()) << m.status().str();
  g.module = std::move(*m);
  const Function& f = *g.module->entry();
  fusion::FusionOptions options;
  options.fuse = fuse;
  auto kernels = kernel::lowerPlan(f, fusion::planFusion(f, options));
  EXPECT_TRUE(kernels.isOk()) << kernels.status().str();
  for (kernel::Kernel& k : *kernels)
    g.kernels.push_back(kernel::wideAccesses(kernel::simplifyIndices(
        kernel::lowerReductions(kernel::mapToGpu(kernel::vectorizeLanes(k, 16), 256)))));
  auto p = runtime::planBuffers(f, g.kernels);
  EXPECT_TRUE(p.isOk()) << p.status().str();
  g.plan = std::move(*p);
  return g;
}

// A wide copy of a group of x that a copy of the same block then writes to y lets y take x's
// memory; a copy of x in a later launch of the kernel (after y's writes) does not (ONNX's
// expanded layer normalisation read its overwritten sum so on the GPU).
TEST(BufferPlan, WideCopiesWriteInPlaceOnlyWhereTheirBlockReadsTheGroupFirst) {
  GpuPlanned same = gpuPlanned(R"(
func @main(%p: f32[64,64]) -> (f32[64]) {
  %x = f32[64,64] exp(%p)
  %two = f32[] constant() {value = [2.0]}
  %tb = f32[64,64] broadcast_in_dim(%two) {dims = []}
  %y = f32[64,64] mul(%x, %tb)
  %s = f32[64] reduce(%y) {dims = [1], kind = sum}
  return %s
})",
                               /*fuse=*/false);
  std::string text = kernel::printKernels(same.kernels);
  ASSERT_NE(text.find(" : 4] = %st"), std::string::npos) << text;
  EXPECT_EQ(same.plan.inPlace, 1) << text;

  // v3 = v0 / 60 and mean = reshape(v3) are two launches of one kernel, each copying v0 in.
  GpuPlanned later = gpuPlanned(R"(
func @main(%p: f32[4,64], %q: f32[4,64]) -> (f32[4,1,1], f32[4,1]) {
  %v0 = f32[4] reduce(%p) {dims = [1], kind = sum}
  %v4 = f32[4] reduce(%q) {dims = [1], kind = sum}
  %c = f32[] constant() {value = [60.0]}
  %cb = f32[4] broadcast_in_dim(%c) {dims = []}
  %v3 = f32[4] div(%v0, %cb)
  %t = f32[4] div(%v4, %cb)
  %m2 = f32[4] mul(%v3, %v3)
  %var = f32[4] sub(%t, %m2)
  %inv = f32[4] sqrt(%var)
  %invr = f32[4,1] reshape(%inv)
  %mean = f32[4,1,1] reshape(%v3)
  return %mean, %invr
})");
  text = kernel::printKernels(later.kernels);
  ASSERT_NE(text.find("%v3[0 : 4] = %st0[0 : 4]"), std::string::npos) << text;
  ASSERT_NE(text.find("%ld1[0 : 4] = %v0[0 : 4]"), std::string::npos) << text;
  EXPECT_EQ(later.plan.inPlace, 0) << text;
}

}  // namespace
}  // namespace kiln
