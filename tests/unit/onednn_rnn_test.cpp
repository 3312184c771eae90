// lstm and gru on the CPU target against the interpreter's reference kernel, every direction and
// both GRU variants, 1 and 2 threads: the lstm and the linear_before_reset gru on Kiln's kernel
// where the CPU has AVX-512 (shapes with a partial panel of hidden units and batch rows past its
// 3-row passes), else on oneDNN's primitives; the other gru on oneDNN's. And a recurrence whose
// weights are not constants, which unrolls.
//
// Tolerance: |cpu - reference| <= 1e-5 * max(1, max|reference|). The kernels compute in f32 and
// sum the products in their own order where the reference computes in double; Kiln's sigmoid and
// tanh are polynomial approximations of exp within 1e-7; the gates pass through sigmoid and tanh
// (slopes at most 1), so over these steps the error stays a few f32 ulps of the largest state
// (measured: under 1e-6).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "interp/interpreter.h"
#include "ir/builder.h"
#include "runtime/executable.h"

namespace kiln::runtime {
namespace {

struct Sizes {
  int64_t steps = 7, batch = 2, input = 5, hidden = 6;
};

Tensor random(std::vector<int64_t> dims, std::mt19937& rng) {
  Tensor t(DType::F32, std::move(dims));
  std::uniform_real_distribution<double> u(-1, 1);
  for (int64_t i = 0; i < t.numElements(); ++i) t.setDouble(i, u(rng));
  return t;
}

struct Built {
  std::unique_ptr<Module> module;
  std::vector<Tensor> inputs;
};

// x, h0 (and c0) are parameters; w, r and b constants unless `weightsAsInputs`.
Built build(OpCode op, const std::string& direction, bool lbr, bool weightsAsInputs, unsigned seed,
            const Sizes& z) {
  const int64_t kSteps = z.steps, kBatch = z.batch, kInput = z.input, kHidden = z.hidden;
  std::mt19937 rng(seed);
  const int64_t d = direction == "bidirectional" ? 2 : 1, g = op == OpCode::Lstm ? 4 : 3;
  Built out;
  out.module = std::make_unique<Module>();
  Function* f = out.module->addFunction("main");
  Builder b(f);
  auto operand = [&](std::vector<int64_t> dims, bool parameter) {
    Tensor t = random(dims, rng);
    if (!parameter) return b.constant(std::move(t));
    out.inputs.push_back(std::move(t));
    return b.parameter(TensorType::of(DType::F32, dims));
  };
  std::vector<Value*> ops{
      operand({kSteps, kBatch, kInput}, true), operand({d, g * kHidden, kInput}, weightsAsInputs),
      operand({d, g * kHidden, kHidden}, weightsAsInputs),
      operand({d, 2 * g * kHidden}, weightsAsInputs), operand({d, kBatch, kHidden}, true)};
  if (op == OpCode::Lstm) ops.push_back(operand({d, kBatch, kHidden}, true));
  AttrMap attrs{{"direction", enumAttr(direction)}};
  if (op == OpCode::Gru) attrs["linear_before_reset"] = boolAttr(lbr);
  f->setOutputs(b.opN(op, ops, attrs));
  EXPECT_TRUE(b.ok()) << b.status().str();
  return out;
}

// Compiles on the CPU target, checks what runs the recurrence, and compares with the reference.
void check(OpCode op, const std::string& direction, bool lbr, bool weightsAsInputs,
           const Sizes& z = {}) {
  const std::string shape = std::to_string(z.steps) + " steps, batch " + std::to_string(z.batch) +
                            ", hidden " + std::to_string(z.hidden);
  const std::string what = std::string(opName(op)) + " " + direction + (lbr ? " lbr" : "") +
                           (weightsAsInputs ? " weights as inputs" : "") + ", " + shape;
  SCOPED_TRACE(what);
  for (int threads : {1, 2}) {
    Built m = build(op, direction, lbr, weightsAsInputs, 7, z);
    auto want = interpret(*m.module->entry(), m.inputs);
    ASSERT_TRUE(want.isOk()) << want.status().str();
    CompileOptions o;
    o.threads = threads;
    auto exe = Executable::compile(std::move(m.module), o);
    ASSERT_TRUE(exe.isOk()) << exe.status().str();
    const std::string calls = (*exe)->libraryCallDetails();
    const bool kiln = (op == OpCode::Lstm || lbr) && __builtin_cpu_supports("avx512f");
    const std::string kernel = kiln && op == OpCode::Lstm ? "Kiln lstm ("
                               : kiln                     ? "Kiln gru ("
                               : op == OpCode::Lstm       ? "oneDNN lstm ("
                               : lbr                      ? "oneDNN lbr_gru ("
                                                          : "oneDNN gru (";
    if (weightsAsInputs)
      EXPECT_TRUE(calls.find(" lstm (") == std::string::npos &&
                  calls.find(" gru (") == std::string::npos)
          << calls;
    else EXPECT_NE(calls.find(kernel + direction + ", " + shape), std::string::npos) << calls;
    auto got = (*exe)->run(m.inputs);
    ASSERT_TRUE(got.isOk()) << got.status().str();
    ASSERT_EQ(got->size(), want->size());
    for (size_t r = 0; r < got->size(); ++r) {
      const Tensor &g = (*got)[r], &w = (*want)[r];
      ASSERT_EQ(g.type(), w.type()) << "result " << r;
      double scale = 1, worst = 0;
      for (int64_t i = 0; i < w.numElements(); ++i)
        scale = std::max(scale, std::abs(w.getDouble(i)));
      for (int64_t i = 0; i < w.numElements(); ++i)
        worst = std::max(worst, std::abs(g.getDouble(i) - w.getDouble(i)));
      EXPECT_LE(worst, 1e-5 * scale) << "result " << r << ", " << threads << " threads";
    }
  }
}

TEST(OneDnnRecurrence, LstmEveryDirection) {
  for (const char* dir : {"forward", "reverse", "bidirectional"})
    check(OpCode::Lstm, dir, false, false);
}

// Kiln's kernel (lstm, linear_before_reset gru): hidden 40 (a panel of 32 units and one of 8),
// batch 4 (a 3-row pass and one row), hidden 64 with batch 3 (whole panels, one pass), and a
// 1-step sequence.
TEST(OneDnnRecurrence, PanelsAndBatchRows) {
  for (OpCode op : {OpCode::Lstm, OpCode::Gru}) {
    const bool lbr = op == OpCode::Gru;
    for (const char* dir : {"forward", "reverse", "bidirectional"}) {
      check(op, dir, lbr, false, Sizes{5, 4, 33, 40});
      check(op, dir, lbr, false, Sizes{3, 3, 16, 64});
    }
    check(op, "bidirectional", lbr, false, Sizes{1, 1, 7, 32});
  }
}

TEST(OneDnnRecurrence, GruBothVariantsEveryDirection) {
  for (bool lbr : {false, true})
    for (const char* dir : {"forward", "reverse", "bidirectional"})
      check(OpCode::Gru, dir, lbr, false);
}

TEST(OneDnnRecurrence, WeightsThatAreNotConstantsUnroll) {
  check(OpCode::Lstm, "bidirectional", false, true);
  check(OpCode::Gru, "forward", true, true);
}

}  // namespace
}  // namespace kiln::runtime
