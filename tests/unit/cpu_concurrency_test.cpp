// The CPU program runs independent kernels at once (runtime/concurrency.h): at 2 threads the
// branches of an inception module run in lanes, and the output agrees with the interpreter and
// with the same program run one kernel after another, also with two host threads running it.
//
// Tolerance: 1e-5 of max(1, max |reference|) against the interpreter: the convolutions sum 288
// f32 products of values in [-2, 2] and weights in [-1, 1] (oneDNN in f32, the interpreter in
// double); the same executable without concurrent kernels within the same bound.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "concurrency_module.h"
#include "interp/interpreter.h"
#include "ir/text/text.h"
#include "runtime/executable.h"
#include "two_host_threads.h"

namespace kiln::runtime {
namespace {

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
