// Chained channel shuffles, as ShuffleNet-v2 has them: each unit splits the channels in two
// (slices), computes on one half, concatenates the halves and shuffles the channels (reshape,
// transpose, reshape). Fused naively, the value at the end of the chain is computed at twice as
// many indices at every unit, and the index expressions nest; the compile never finished.
// These tests check that such a chain compiles on the CPU backend, matches the interpreter, and
// that the kernel IR it produces grows linearly with the chain's length.
//
// Tolerance: 1e-5 * max(1, max |reference|), as in cpu_backend_test.cpp: the data movement is
// exact and tanh differs from the interpreter's double-precision tanh by a few f32 ulps.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <random>
#include <string>

#include "interp/interpreter.h"
#include "ir/text/text.h"
#include "kernel/kernel_ir.h"
#include "runtime/executable.h"

namespace kiln::runtime {
namespace {

// A chain of `units` shuffle units over f32[1,16,6,5]; the branch half goes through tanh.
std::string shuffleChain(int units) {
  const std::string full = "f32[1,16,6,5]", half = "f32[1,8,6,5]";
  std::string t = "func @main(%x: " + full + ") -> (" + full + ") {\n";
  std::string prev = "%x";
  for (int k = 0; k < units; ++k) {
    std::string s = std::to_string(k);
    t += "  %a" + s + " = " + half + " slice(" + prev +
         ") {start = [0, 0, 0, 0], limit = [1, 8, 6, 5]}\n";
    t += "  %b" + s + " = " + half + " slice(" + prev +
         ") {start = [0, 8, 0, 0], limit = [1, 16, 6, 5]}\n";
    t += "  %t" + s + " = " + half + " tanh(%b" + s + ")\n";
    t += "  %c" + s + " = " + full + " concatenate(%a" + s + ", %t" + s + ") {dimension = 1}\n";
    t += "  %r" + s + " = f32[1,2,8,6,5] reshape(%c" + s + ")\n";
    t += "  %p" + s + " = f32[1,8,2,6,5] transpose(%r" + s + ") {permutation = [0, 2, 1, 3, 4]}\n";
    t += "  %v" + s + " = " + full + " reshape(%p" + s + ")\n";
    prev = "%v" + s;
  }
  return t + "  return " + prev + "\n}\n";
}

struct Compiled {
  std::unique_ptr<Executable> exe;
  size_t irBytes = 0;  // the printed kernel IR of all kernels
  double seconds = 0;
};

Compiled compileChain(int units) {
  auto parsed = parseModule(shuffleChain(units), "shuffle-chain.kir");
  EXPECT_TRUE(parsed.isOk()) << parsed.status().str();
  CompileOptions o;
  o.threads = 2;
  auto start = std::chrono::steady_clock::now();
  auto exe = Executable::compile(std::move(*parsed), o);
  Compiled c;
  c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(exe.isOk()) << exe.status().str();
  if (!exe.isOk()) return c;
  c.exe = std::move(*exe);
  for (const kernel::Kernel& k : c.exe->kernels()) c.irBytes += kernel::printKernel(k).size();
  return c;
}

TEST(ShuffleChain, SixteenUnitsMatchTheInterpreter) {
  Compiled c = compileChain(16);
  ASSERT_NE(c.exe, nullptr);
  // Not a speed target (that is bench/): a guard against the exponential compile coming back.
  EXPECT_LT(c.seconds, 30.0);
  // The planner stored the chain's values where fusing on would compute them at too many
  // indices, and said why.
  int stored = 0;
  for (const fusion::Decision& d : c.exe->plan().decisions)
    if (!d.fused && d.reason.find("values again per element") != std::string::npos) ++stored;
  EXPECT_GT(stored, 0);
  EXPECT_GT(c.exe->kernels().size(), 1u);

  auto parsed = parseModule(shuffleChain(16), "shuffle-chain.kir");
  ASSERT_TRUE(parsed.isOk());
  const Function& f = *(*parsed)->entry();
  Tensor x(DType::F32, {1, 16, 6, 5});
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(-2.0, 2.0);
  for (int64_t i = 0; i < x.numElements(); ++i) x.setDouble(i, u(rng));
  std::vector<Tensor> inputs{x};
  auto want = interpret(f, inputs);
  ASSERT_TRUE(want.isOk()) << want.status().str();
  auto got = c.exe->run(inputs);
  ASSERT_TRUE(got.isOk()) << got.status().str();
  const Tensor& g = (*got)[0];
  const Tensor& w = (*want)[0];
  ASSERT_EQ(g.type(), w.type());
  for (int64_t i = 0; i < w.numElements(); ++i)
    ASSERT_NEAR(g.getDouble(i), w.getDouble(i), 1e-5) << "element " << i;
}

TEST(ShuffleChain, KernelIrGrowsLinearlyWithTheChain) {
  // Doubling the chain at most doubles the kernel IR, give or take a kernel's worth (2.25x);
  // unbounded fusion grew it by orders of magnitude per doubling.
  size_t previous = 0;
  for (int units : {8, 16, 32}) {
    Compiled c = compileChain(units);
    ASSERT_NE(c.exe, nullptr) << units << " units";
    if (previous) {
      EXPECT_LE(c.irBytes, previous * 9 / 4) << units << " units";
    }
    previous = c.irBytes;
  }
}

}  // namespace
}  // namespace kiln::runtime
