// lstm and gru on the CPU target: oneDNN's recurrent primitives (constant weights) against the
// interpreter's reference kernel, every direction and both GRU variants, 1 and 2 threads; and a
// recurrence whose weights are not constants, which unrolls instead.
//
// Tolerance: |cpu - reference| <= 1e-5 * max(1, max|reference|). oneDNN computes in f32 and sums
// the products in its own order where the reference computes in double; the gates pass through
// sigmoid and tanh (slopes at most 1), so over these 7 steps the error stays a few f32 ulps of
// the largest state (measured: under 1e-6).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "interp/interpreter.h"
#include "ir/builder.h"
#include "runtime/executable.h"

namespace kiln::runtime {
namespace {

constexpr int64_t kSteps = 7, kBatch = 2, kInput = 5, kHidden = 6;

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
Built build(OpCode op, const std::string& direction, bool lbr, bool weightsAsInputs,
            unsigned seed) {
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
void check(OpCode op, const std::string& direction, bool lbr, bool weightsAsInputs) {
  const std::string what = std::string(opName(op)) + " " + direction + (lbr ? " lbr" : "") +
                           (weightsAsInputs ? " weights as inputs" : "");
  SCOPED_TRACE(what);
  for (int threads : {1, 2}) {
    Built m = build(op, direction, lbr, weightsAsInputs, 7);
    auto want = interpret(*m.module->entry(), m.inputs);
    ASSERT_TRUE(want.isOk()) << want.status().str();
    CompileOptions o;
    o.threads = threads;
    auto exe = Executable::compile(std::move(m.module), o);
    ASSERT_TRUE(exe.isOk()) << exe.status().str();
    const std::string calls = (*exe)->libraryCallDetails();
    const std::string kernel = op == OpCode::Lstm ? "oneDNN lstm ("
                               : lbr              ? "oneDNN lbr_gru ("
                                                  : "oneDNN gru (";
    if (weightsAsInputs) EXPECT_EQ(calls.find("oneDNN l"), std::string::npos) << calls;
    else
      EXPECT_NE(calls.find(kernel + direction + ", 7 steps, batch 2, hidden 6"), std::string::npos)
          << calls;
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
