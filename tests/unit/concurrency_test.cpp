// Concurrent kernels (runtime/concurrency.h): the plan finds the independent branches between a
// fork and their join, the buffer plan keeps what a stage touches apart, and a CPU program that
// runs its branches at once computes what the interpreter computes, also from two host threads.
//
// Tolerance: 1e-5 of max(1, max |reference|) against the interpreter: the convolutions sum 288
// f32 products of values in [-2, 2] and weights in [-1, 1] (oneDNN in f32, the interpreter in
// double); the same executable without concurrent kernels within the same bound.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>

#include "fusion/fusion.h"
#include "interp/interpreter.h"
#include "ir/text/text.h"
#include "kernel/lower.h"
#include "runtime/buffer_plan.h"
#include "runtime/concurrency.h"
#include "runtime/executable.h"
#include "two_host_threads.h"

namespace kiln::runtime {
namespace {

// An inception module: three branches from %x (a 1x1 then a 3x3 convolution; a 3x3 convolution
// and tanh; a 1x1 convolution), concatenated, then a 1x1 convolution over the concatenation. The
// weights are parameters (read by several kernels, written by none).
constexpr const char* kModule = R"(
func @main(%x: f32[1,14,14,32], %k3: f32[3,3,32,32], %k1: f32[1,1,32,32], %kc: f32[1,1,32,32], %ko: f32[1,1,96,16]) -> (f32[1,14,14,16]) {
  %a1 = f32[1,14,14,32] convolution(%x, %k1) {dimension_numbers = "b01f_01io->b01f"}
  %a2 = f32[1,14,14,32] convolution(%a1, %k3) {padding_low = [1, 1], padding_high = [1, 1], dimension_numbers = "b01f_01io->b01f"}
  %b1 = f32[1,14,14,32] convolution(%x, %k3) {padding_low = [1, 1], padding_high = [1, 1], dimension_numbers = "b01f_01io->b01f"}
  %b2 = f32[1,14,14,32] tanh(%b1)
  %c1 = f32[1,14,14,32] convolution(%x, %kc) {dimension_numbers = "b01f_01io->b01f"}
  %cat = f32[1,14,14,96] concatenate(%a2, %b2, %c1) {dimension = 3}
  %out = f32[1,14,14,16] convolution(%cat, %ko) {dimension_numbers = "b01f_01io->b01f"}
  return %out
})";

// Inputs in [-2, 2), weights in [-1, 1).
std::vector<Tensor> randomInputs(const Function& f, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<Tensor> in;
  for (size_t p = 0; p < f.numParameters(); ++p) {
    const TensorType& t = f.parameter(p)->type();
    Tensor x(t.dtype(), t.staticDims());
    std::uniform_real_distribution<double> u(p == 0 ? -2.0 : -1.0, p == 0 ? 2.0 : 1.0);
    for (int64_t i = 0; i < x.numElements(); ++i) x.setDouble(i, u(rng));
    in.push_back(std::move(x));
  }
  return in;
}

void expectClose(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.type(), want.type()) << what;
  double scale = 1;
  for (int64_t i = 0; i < want.numElements(); ++i)
    scale = std::max(scale, std::abs(want.getDouble(i)));
  for (int64_t i = 0; i < want.numElements(); ++i)
    ASSERT_LE(std::abs(got.getDouble(i) - want.getDouble(i)), 1e-5 * scale)
        << what << " element " << i << ": " << got.getDouble(i) << " vs " << want.getDouble(i);
}

// The kernels of `kernels` that read or write value `v`.
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

// The CPU program at 2 threads runs the module's branches at once (kiln explain says so), and
// its output agrees with the interpreter and with the same program run one kernel after
// another, also with two host threads running it at once.
TEST(Concurrency, CpuProgramRunsBranchesAtOnce) {
  auto parse = [] { return parseModule(kModule, "module.kir"); };
  auto m = parse();
  ASSERT_TRUE(m.isOk()) << m.status().str();
  const Function& f = *(*m)->entry();
  std::vector<std::vector<Tensor>> inputs = {randomInputs(f, 1), randomInputs(f, 2)};
  std::vector<Tensor> want;
  for (const auto& in : inputs) {
    auto w = interpret(f, in);
    ASSERT_TRUE(w.isOk()) << w.status().str();
    want.push_back((*w)[0]);
  }
  CompileOptions o;
  o.threads = 2;
  auto exe = Executable::compile(std::move(*m), o);
  ASSERT_TRUE(exe.isOk()) << exe.status().str();
  const std::string details = (*exe)->concurrencyDetails();
  EXPECT_NE(details.find("independent groups"), std::string::npos) << details;
  CompileOptions sequential = o;
  sequential.concurrentKernels = false;
  auto m2 = parse();
  ASSERT_TRUE(m2.isOk());
  auto seq = Executable::compile(std::move(*m2), sequential);
  ASSERT_TRUE(seq.isOk()) << seq.status().str();
  EXPECT_EQ((*seq)->concurrencyDetails(), "");
  auto m1 = parse();
  ASSERT_TRUE(m1.isOk());
  CompileOptions single = o;
  single.threads = 1;
  auto one = Executable::compile(std::move(*m1), single);
  ASSERT_TRUE(one.isOk()) << one.status().str();
  EXPECT_EQ((*one)->concurrencyDetails(), "");

  for (size_t t = 0; t < inputs.size(); ++t) {
    auto got = (*exe)->run(inputs[t]);
    ASSERT_TRUE(got.isOk()) << got.status().str();
    expectClose((*got)[0], want[t], "concurrent, input " + std::to_string(t));
    auto base = (*seq)->run(inputs[t]);
    ASSERT_TRUE(base.isOk()) << base.status().str();
    expectClose((*got)[0], (*base)[0], "concurrent against sequential, input " + std::to_string(t));
  }
  std::vector<std::string> errors;
  std::vector<Tensor> got = runOnTwoHostThreads(**exe, inputs, errors);
  for (size_t t = 0; t < 2; ++t) {
    ASSERT_EQ(errors[t], "");
    expectClose(got[t], want[t], "host thread " + std::to_string(t));
  }
}

}  // namespace
}  // namespace kiln::runtime
