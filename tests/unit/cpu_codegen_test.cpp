// The CPU code generator (src/codegen/cpu): hand-built kernel IR compiled by LLVM, linked and
// run, checked against values worked out by hand and against the reference interpreter
// (kiln::interpret) on the equivalent graph op, element by element and bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "codegen/cpu/cpu_codegen.h"
#include "interp/interpreter.h"
#include "ir/builder.h"
#include "ir/tensor.h"
#include "kernel/gpu_schedule.h"
#include "kernel/kernel_ir.h"
#include "kernel/schedule.h"
#include "kernel/verify.h"

namespace kiln {
namespace {

using codegen::cpu::CodegenOptions;
using codegen::cpu::CompiledKernel;
using codegen::cpu::CpuCompiler;
using codegen::cpu::ThreadPool;
using kernel::BinaryOp;
using kernel::Buffer;
using kernel::BufferRole;
using kernel::ExprRef;
using kernel::Kernel;
using kernel::LoopKind;
using kernel::StmtRef;
using kernel::UnaryOp;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// With libm math (approximateMath off), so that results match the interpreter bit for bit;
// tests/unit/fast_math_test.cpp measures the approximations.
CpuCompiler& compiler() {
  static std::unique_ptr<CpuCompiler> c = [] {
    CodegenOptions o;
    o.approximateMath = false;
    auto r = CpuCompiler::create(o);
    KILN_CHECK(r.isOk(), r.status().str());
    return std::move(r).value();
  }();
  return *c;
}

ThreadPool& pool2() {
  static ThreadPool p(2);
  return p;
}

std::unique_ptr<CompiledKernel> compileOrDie(const Kernel& k) {
  auto r = compiler().compile(k);
  EXPECT_TRUE(r.isOk()) << r.status().str() << "\n" << kernel::printKernel(k);
  return r.isOk() ? std::move(r).value() : nullptr;
}

Buffer buf(const std::string& name, DType t, std::vector<int64_t> shape, BufferRole role) {
  Buffer b;
  b.name = name;
  b.type = t;
  b.shape = std::move(shape);
  b.role = role;
  return b;
}

Kernel makeKernel(const std::string& name, std::vector<Buffer> buffers, StmtRef body) {
  Kernel k;
  k.name = name;
  k.buffers = std::move(buffers);
  k.body = std::move(body);
  return k;
}

// out[i] = f(in0[i], in1[i], ...) over n elements in one loop of `kind`.
Kernel elementwise(const std::vector<DType>& ins, DType out, int64_t n,
                   const std::function<ExprRef(const std::vector<ExprRef>&)>& f,
                   LoopKind kind = LoopKind::Vectorized) {
  std::vector<Buffer> buffers;
  std::vector<ExprRef> loads;
  for (size_t j = 0; j < ins.size(); ++j) {
    std::string name = "in" + std::to_string(j);
    buffers.push_back(buf(name, ins[j], {n}, BufferRole::Input));
    loads.push_back(kernel::load(name, ins[j], kernel::var("i")));
  }
  buffers.push_back(buf("out", out, {n}, BufferRole::Output));
  StmtRef body = kernel::forLoop("i", kernel::intConst(n), kind,
                                 kernel::store("out", kernel::var("i"), f(loads)));
  return makeKernel("elementwise", std::move(buffers), body);
}

// Runs k on tensors given for every buffer of k, in order (outputs are written in place).
void runOn(const CompiledKernel& k, std::vector<Tensor>& tensors, ThreadPool& pool = pool2()) {
  std::vector<void*> ptrs;
  for (Tensor& t : tensors) ptrs.push_back(t.mutableBytes());
  k.run(ptrs.data(), pool, nullptr, nullptr);
}

Tensor fromDoubles(DType t, const std::vector<double>& v) {
  Tensor x(t, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) x.setDouble(static_cast<int64_t>(i), v[i]);
  return x;
}

Tensor fromInts(DType t, const std::vector<int64_t>& v) {
  Tensor x(t, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) x.setInt(static_cast<int64_t>(i), v[i]);
  return x;
}

// The reference: one graph op interpreted on the inputs.
Tensor interpretOp(OpCode op, const std::vector<Tensor>& inputs, AttrMap attrs = {},
                   std::vector<TensorType> declared = {}) {
  Module m;
  Function* f = m.addFunction("main");
  Builder b(f);
  std::vector<Value*> params;
  for (const Tensor& t : inputs) params.push_back(b.parameter(t.type()));
  std::vector<Value*> results = b.opN(op, params, std::move(attrs), std::move(declared));
  EXPECT_TRUE(b.ok()) << b.status().str();
  if (!b.ok()) return Tensor();
  f->setOutputs(results);
  auto r = interpret(*f, inputs);
  EXPECT_TRUE(r.isOk()) << r.status().str();
  return r.isOk() ? (*r)[0] : Tensor();
}

// Element-wise equality: floats bit for bit (-0 differs from +0) except that any NaN equals
// any NaN; integers and bool by value.
void expectSame(const Tensor& want, const Tensor& got, const std::string& what,
                const std::vector<Tensor>& inputs) {
  ASSERT_EQ(want.dtype(), got.dtype()) << what;
  ASSERT_EQ(want.numElements(), got.numElements()) << what;
  int mismatches = 0;
  for (int64_t i = 0; i < want.numElements() && mismatches < 5; ++i) {
    std::string args;
    for (const Tensor& in : inputs) args += " " + std::to_string(in.getDouble(i));
    if (isFloat(want.dtype())) {
      double w = want.getDouble(i), g = got.getDouble(i);
      bool same =
          (std::isnan(w) && std::isnan(g)) || (w == g && std::signbit(w) == std::signbit(g));
      if (!same) ++mismatches;
      EXPECT_TRUE(same) << what << " at " << i << " of (" << args << "): want " << w << ", got "
                        << g;
    } else {
      if (want.getInt(i) != got.getInt(i)) ++mismatches;
      EXPECT_EQ(want.getInt(i), got.getInt(i)) << what << " at " << i << " of (" << args << ")";
    }
  }
}

// Compiles f over the inputs' dtypes, runs it, and returns the output.
Tensor runElementwise(const std::vector<Tensor>& inputs, DType out,
                      const std::function<ExprRef(const std::vector<ExprRef>&)>& f) {
  std::vector<DType> types;
  for (const Tensor& t : inputs) types.push_back(t.dtype());
  int64_t n = inputs[0].numElements();
  auto k = compileOrDie(elementwise(types, out, n, f));
  Tensor result(out, {n});
  if (!k) return result;
  std::vector<Tensor> tensors = inputs;
  tensors.push_back(result);
  runOn(*k, tensors);
  return result;
}

const std::vector<double> kFloatValues = {
    0,     -0.0, 0.5,   -0.5, 1,    -1,    1.5,  2.5,   -2.5,  3,     0.1,    -0.7,
    10,    -10,  88.5,  -100, 1e-3, 1e5,   1e30, -1e30, 65504, 70000, kNaN,   kInf,
    -kInf, 0.99, 1e-40, 7.25, 0.25, -3.75, 1e-8, 20,    -20,   0.875, 123.456};

// ---- the brief's hand-built kernels ----

TEST(CpuCodegen, VectorizedAddOf1000Floats) {
  const int64_t n = 1000;
  Kernel k = elementwise({DType::F32, DType::F32}, DType::F32, n,
                         [](const auto& x) { return kernel::binary(BinaryOp::Add, x[0], x[1]); });
  auto ck = compileOrDie(k);
  ASSERT_TRUE(ck);
  std::vector<float> a(n), b(n), y(n, -1.0f);
  for (int64_t i = 0; i < n; ++i) {
    a[i] = 0.5f * static_cast<float>(i) - 3.25f;
    b[i] = 1.0f / static_cast<float>(i + 1);
  }
  void* ptrs[] = {a.data(), b.data(), y.data()};
  ck->run(ptrs, pool2(), nullptr, nullptr);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], a[i] + b[i]) << i;
}

// Wide copies (the GPU schedule's wideAccesses) run on the CPU element by element: the lanes of
// a loop through local arrays give what the plain loop gives.
TEST(CpuCodegen, WideCopiesThroughLocalArrays) {
  using namespace kernel;
  const int64_t n = 64;
  const ExprRef i = binary(BinaryOp::Add, binary(BinaryOp::Mul, var("io"), intConst(4)), var("v"));
  StmtRef lanes =
      forLoop("io", intConst(n / 4), LoopKind::Serial,
              forLoop("v", intConst(4), LoopKind::Vectorized,
                      store("out", i, unary(UnaryOp::Exp, load("in0", DType::F32, i)))));
  Kernel plain = makeKernel("plain",
                            {buf("in0", DType::F32, {n}, BufferRole::Input),
                             buf("out", DType::F32, {n}, BufferRole::Output)},
                            lanes);
  Kernel wide = wideAccesses(plain);
  ASSERT_NE(printKernel(wide).find("%ld0[0 : 4] = %in0[io * 4 : 4]"), std::string::npos)
      << printKernel(wide);
  ASSERT_TRUE(verifyKernel(wide).isOk());
  std::vector<float> x(n), want(n, -1.0f), got(n, -1.0f);
  for (int64_t j = 0; j < n; ++j) x[j] = 0.1f * static_cast<float>(j) - 2.0f;
  for (auto [k, y] : {std::pair{&plain, &want}, std::pair{&wide, &got}}) {
    auto ck = compileOrDie(*k);
    ASSERT_TRUE(ck);
    void* ptrs[] = {x.data(), y->data()};
    ck->run(ptrs, pool2(), nullptr, nullptr);
  }
  for (int64_t j = 0; j < n; ++j) ASSERT_EQ(got[j], want[j]) << j;
  EXPECT_EQ(want[5], std::exp(x[5]));
}

// A vectorized loop whose iterations are independent (each reads a stored buffer only at the
// index it stores) carries parallel-access metadata, so LLVM vectorizes it without overlap
// checks: a value written in place (the output buffer is the input) ran the scalar fallback.
// A loop that reads what an earlier iteration stored gets none and keeps its order.
TEST(CpuCodegen, IndependentVectorizedLoopsAreParallelAccesses) {
  using namespace kernel;
  const int64_t n = 1000;
  auto ck = compileOrDie(elementwise({DType::F32}, DType::F32, n, [](const auto& x) {
    return binary(BinaryOp::Mul, x[0], unary(UnaryOp::Sigmoid, x[0]));
  }));
  ASSERT_TRUE(ck);
  EXPECT_NE(compiler().lastLlvmIr().find("llvm.access.group"), std::string::npos);
  std::vector<float> x(n), want(n);
  for (int64_t i = 0; i < n; ++i) {
    x[i] = 0.01f * static_cast<float>(i) - 5.0f;
    want[i] = x[i] / (1.0f + std::exp(-x[i]));
  }
  void* ptrs[] = {x.data(), x.data()};  // written in place
  ck->run(ptrs, pool2(), nullptr, nullptr);
  for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(x[i], want[i], 1e-5f * (1 + std::abs(want[i]))) << i;

  // y[i + 1] = y[i] + 1: a recurrence, however its loop is marked.
  StmtRef body =
      store("y", binary(BinaryOp::Add, var("i"), intConst(1)),
            binary(BinaryOp::Add, load("y", DType::F32, var("i")), floatConst(1.0, DType::F32)));
  Kernel k = makeKernel("recurrence", {buf("y", DType::F32, {n}, BufferRole::Output)},
                        forLoop("i", intConst(n - 1), LoopKind::Vectorized, body));
  auto rk = compileOrDie(k);
  ASSERT_TRUE(rk);
  EXPECT_EQ(compiler().lastLlvmIr().find("llvm.access.group"), std::string::npos);
  std::vector<float> y(n, 0.0f);
  void* yp[] = {y.data()};
  rk->run(yp, pool2(), nullptr, nullptr);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], static_cast<float>(i)) << i;
}

TEST(CpuCodegen, VectorizedLoopEmitsVectorInstructions) {
  std::string host = codegen::cpu::hostCpu();
  if (host.find("+avx2") == std::string::npos && host.find("+avx512f") == std::string::npos)
    GTEST_SKIP() << "host " << host << " has neither AVX2 nor AVX-512";
  auto ck = compileOrDie(elementwise({DType::F32, DType::F32}, DType::F32, 1000, [](const auto& x) {
    return kernel::binary(BinaryOp::Mul, x[0], x[1]);
  }));
  ASSERT_TRUE(ck);
  std::string ir = compiler().lastLlvmIr();
  EXPECT_NE(ir.find("define void @" + ck->symbol()), std::string::npos) << ir;
  bool vector =
      ir.find("<8 x float>") != std::string::npos || ir.find("<16 x float>") != std::string::npos;
  EXPECT_TRUE(vector) << "host " << host << ":\n" << ir;
  EXPECT_EQ(compiler().lastDiagnostics(), "");

  // A libm call without an LLVM intrinsic (erf) keeps the loop scalar, and LLVM says so.
  ASSERT_TRUE(compileOrDie(elementwise({DType::F32}, DType::F32, 64, [](const auto& x) {
    return kernel::unary(UnaryOp::Erf, x[0]);
  })));
  EXPECT_NE(compiler().lastDiagnostics().find("loop not vectorized"), std::string::npos)
      << compiler().lastDiagnostics();

  // With vectorization off, the same loop stays scalar.
  CodegenOptions scalar;
  scalar.vectorize = false;
  auto plain = CpuCompiler::create(scalar);
  ASSERT_TRUE(plain.isOk()) << plain.status().str();
  ASSERT_TRUE((*plain)
                  ->compile(elementwise(
                      {DType::F32, DType::F32}, DType::F32, 1000,
                      [](const auto& x) { return kernel::binary(BinaryOp::Mul, x[0], x[1]); }))
                  .isOk());
  EXPECT_EQ((*plain)->lastLlvmIr().find("x float>"), std::string::npos);
}

// y[i, j] = x[i, j] * 2 + i over a 37x129 buffer, rows in a parallel loop.
Kernel parallelRows(int64_t rows, int64_t cols) {
  using namespace kernel;
  ExprRef idx = binary(BinaryOp::Add, binary(BinaryOp::Mul, var("i"), intConst(cols)), var("j"));
  ExprRef value = binary(
      BinaryOp::Add, binary(BinaryOp::Mul, load("x", DType::F32, idx), floatConst(2, DType::F32)),
      cast(var("i"), DType::F32));
  StmtRef inner = forLoop("j", intConst(cols), LoopKind::Vectorized, store("y", idx, value));
  return makeKernel("rows",
                    {buf("x", DType::F32, {rows, cols}, BufferRole::Input),
                     buf("y", DType::F32, {rows, cols}, BufferRole::Output)},
                    forLoop("i", intConst(rows), LoopKind::Parallel, inner));
}

TEST(CpuCodegen, ParallelRowsWithOneTwoAndFourThreads) {
  const int64_t rows = 37, cols = 129;
  auto ck = compileOrDie(parallelRows(rows, cols));
  ASSERT_TRUE(ck);
  EXPECT_NE(compiler().lastLlvmIr().find("kiln_cpu_parallel_for"), std::string::npos);
  std::vector<float> x(rows * cols);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 97) * 0.25f - 7.0f;
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    std::vector<float> y(rows * cols, kNaN);
    void* ptrs[] = {x.data(), y.data()};
    ck->run(ptrs, pool, nullptr, nullptr);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        ASSERT_EQ(y[i * cols + j], x[i * cols + j] * 2.0f + static_cast<float>(i))
            << threads << " threads, element " << i << "," << j;
  }
}

// Per row: sum and max through Local accumulators (one per thread), with NaN in row 2.
TEST(CpuCodegen, RowReductionWithLocalAccumulators) {
  using namespace kernel;
  const int64_t rows = 5, cols = 67;
  ExprRef idx = binary(BinaryOp::Add, binary(BinaryOp::Mul, var("r"), intConst(cols)), var("c"));
  ExprRef x = load("x", DType::F32, idx);
  ExprRef acc = load("acc", DType::F32, intConst(0));
  ExprRef mx = load("mx", DType::F32, intConst(0));
  StmtRef inner = forLoop("c", intConst(cols), LoopKind::Serial,
                          block({store("acc", intConst(0), binary(BinaryOp::Add, acc, x)),
                                 store("mx", intConst(0), binary(BinaryOp::Max, mx, x))}));
  StmtRef row = block({store("acc", intConst(0), floatConst(0, DType::F32)),
                       store("mx", intConst(0), floatConst(-kInf, DType::F32)), inner,
                       store("sum", var("r"), acc), store("max", var("r"), mx)});
  StmtRef body = alloc("acc", DType::F32, 1, MemoryScope::Local,
                       alloc("mx", DType::F32, 1, MemoryScope::Local, row));
  Kernel k = makeKernel("reduce",
                        {buf("x", DType::F32, {rows, cols}, BufferRole::Input),
                         buf("sum", DType::F32, {rows}, BufferRole::Output),
                         buf("max", DType::F32, {rows}, BufferRole::Output)},
                        forLoop("r", intConst(rows), LoopKind::Parallel, body));
  auto ck = compileOrDie(k);
  ASSERT_TRUE(ck);
  std::vector<float> in(rows * cols);
  for (size_t i = 0; i < in.size(); ++i) in[i] = std::sin(static_cast<float>(i)) * 10.0f;
  in[2 * cols + 30] = std::numeric_limits<float>::quiet_NaN();
  for (int threads : {1, 4}) {
    ThreadPool pool(threads);
    std::vector<float> sum(rows, -1), max(rows, -1);
    void* ptrs[] = {in.data(), sum.data(), max.data()};
    ck->run(ptrs, pool, nullptr, nullptr);
    for (int64_t r = 0; r < rows; ++r) {
      float s = 0, m = -std::numeric_limits<float>::infinity();
      bool nan = false;
      for (int64_t c = 0; c < cols; ++c) {
        float v = in[r * cols + c];
        s += v;  // the kernel's order: no reassociation without fast-math
        nan |= std::isnan(v);
        if (v > m) m = v;
      }
      if (nan) {
        EXPECT_TRUE(std::isnan(sum[r])) << r;
        EXPECT_TRUE(std::isnan(max[r])) << r;
      } else {
        EXPECT_EQ(sum[r], s) << r;
        EXPECT_EQ(max[r], m) << r;
      }
    }
  }
}

// A pooling's row of accumulators (128 channels over 9 taps): registerRows computes it in two
// blocks of 64, whose accumulators LLVM keeps in registers (no stack array left), and an
// accumulator's max or min propagates NaN from any tap, first, middle or last, as the
// interpreter's reductions do.
TEST(CpuCodegen, AccumulatorRowsInRegistersPropagateNaN) {
  using namespace kernel;
  const int64_t taps = 9, channels = 128;
  for (BinaryOp op : {BinaryOp::Max, BinaryOp::Min}) {
    const bool max = op == BinaryOp::Max;
    ExprRef c = var("c"), c1 = var("c1"), c2 = var("c2");
    ExprRef x = load("x", DType::F32,
                     binary(BinaryOp::Add, binary(BinaryOp::Mul, var("t"), intConst(channels)), c));
    StmtRef init = forLoop("c1", intConst(channels), LoopKind::Vectorized,
                           store("acc", c1, floatConst(max ? -kInf : kInf, DType::F32)));
    StmtRef update = forLoop("t", intConst(taps), LoopKind::Serial,
                             forLoop("c", intConst(channels), LoopKind::Vectorized,
                                     store("acc", c, binary(op, load("acc", DType::F32, c), x))));
    StmtRef out = forLoop("c2", intConst(channels), LoopKind::Vectorized,
                          store("y", c2, load("acc", DType::F32, c2)));
    Kernel k = makeKernel(
        "pool",
        {buf("x", DType::F32, {taps, channels}, BufferRole::Input),
         buf("y", DType::F32, {channels}, BufferRole::Output)},
        alloc("acc", DType::F32, channels, MemoryScope::Local, block({init, update, out})));
    Kernel blocked = registerRows(k, kRegisterRowBytes);
    ASSERT_NE(printKernel(blocked).find("local %acc: f32[64]"), std::string::npos)
        << printKernel(blocked);
    ASSERT_TRUE(verifyKernel(blocked).isOk());
    auto ck = compileOrDie(blocked);
    ASSERT_TRUE(ck);
    EXPECT_EQ(compiler().lastLlvmIr().find("alloca [64 x float]"), std::string::npos)
        << compiler().lastLlvmIr();
    std::vector<float> in(taps * channels), y(channels, 0.5f);
    for (size_t i = 0; i < in.size(); ++i) in[i] = std::sin(static_cast<float>(i)) * 10.0f;
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (int64_t t : {int64_t{0}, taps / 2, taps - 1}) in[t * channels + 3 + 10 * t] = nan;
    void* ptrs[] = {in.data(), y.data()};
    ck->run(ptrs, pool2(), nullptr, nullptr);
    for (int64_t ch = 0; ch < channels; ++ch) {
      float want =
          max ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
      bool sawNaN = false;
      for (int64_t t = 0; t < taps; ++t) {
        float v = in[t * channels + ch];
        sawNaN |= std::isnan(v);
        if (max ? v > want : v < want) want = v;
      }
      if (sawNaN) ASSERT_TRUE(std::isnan(y[ch])) << ch;
      else ASSERT_EQ(y[ch], want) << ch;
    }
  }
}

TEST(CpuCodegen, FloatToIntCastsTruncateAndSaturate) {
  Tensor x = fromDoubles(DType::F32, {1.5, -1.5, 3e9, -3e9, kNaN, kInf, -kInf, 2147483520, -0.99});
  Tensor y =
      runElementwise({x}, DType::I32, [](const auto& v) { return kernel::cast(v[0], DType::I32); });
  const int64_t want[] = {1, -1, INT32_MAX, INT32_MIN, 0, INT32_MAX, INT32_MIN, 2147483520, 0};
  for (int64_t i = 0; i < 9; ++i) EXPECT_EQ(y.getInt(i), want[i]) << i;
  Tensor u =
      runElementwise({x}, DType::U8, [](const auto& v) { return kernel::cast(v[0], DType::U8); });
  const int64_t wantU[] = {1, 0, 255, 0, 0, 255, 0, 255, 0};
  for (int64_t i = 0; i < 9; ++i) EXPECT_EQ(u.getInt(i), wantU[i]) << i;
  // i32 -> f32 rounds to nearest even: 2^24 + 1 -> 2^24, 2^24 + 3 -> 2^24 + 4.
  Tensor ints = fromInts(DType::I32, {16777217, 16777219, -5});
  Tensor f = runElementwise({ints}, DType::F32,
                            [](const auto& v) { return kernel::cast(v[0], DType::F32); });
  EXPECT_EQ(f.getDouble(0), 16777216.0);
  EXPECT_EQ(f.getDouble(1), 16777220.0);
  EXPECT_EQ(f.getDouble(2), -5.0);
}

TEST(CpuCodegen, CastsToHalfAndBf16RoundToNearestEven) {
  // 1 + 2^-8 + 2^-9 is above bf16's halfway point; 1 + 2^-8 is a tie that goes to even (1).
  std::vector<double> v = {1 + 0x1p-8 + 0x1p-9,
                           1 + 0x1p-8,
                           1 + 0x1p-7 + 0x1p-8,
                           3.14159,
                           -65519.0,
                           65520.0,
                           1e-7,
                           kNaN,
                           -kInf,
                           0x1p-25};
  Tensor x = fromDoubles(DType::F32, v);
  Tensor b = runElementwise({x}, DType::BF16,
                            [](const auto& e) { return kernel::cast(e[0], DType::BF16); });
  Tensor h =
      runElementwise({x}, DType::F16, [](const auto& e) { return kernel::cast(e[0], DType::F16); });
  for (size_t i = 0; i < v.size(); ++i) {
    float f = static_cast<float>(v[i]);
    uint16_t gotB = b.data<uint16_t>()[i], gotH = h.data<uint16_t>()[i];
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(bf16ToFloat(gotB)));
      EXPECT_TRUE(std::isnan(halfToFloat(gotH)));
    } else {
      EXPECT_EQ(gotB, floatToBf16(f)) << v[i];
      EXPECT_EQ(gotH, floatToHalf(f)) << v[i];
    }
  }
  EXPECT_EQ(b.data<uint16_t>()[1], 0x3f80);  // tie to even: 1.0
  EXPECT_EQ(b.data<uint16_t>()[0], 0x3f81);
  EXPECT_EQ(h.data<uint16_t>()[5], 0x7c00);  // 65520 overflows f16 to inf
  // A f32 value is not silently stored into a bf16 buffer: the kernel must cast.
  Kernel bad = elementwise({DType::F32}, DType::BF16, 1, [](const auto& e) { return e[0]; });
  EXPECT_FALSE(compiler().compile(bad).isOk());
}

// f16/bf16 arithmetic runs in f32 and rounds once, on the store.
TEST(CpuCodegen, HalfAndBf16ArithmeticRoundsOnStore) {
  std::vector<double> num = {1, 2, 10, -7, 0.1, 65504, 3};
  std::vector<double> den = {3, 7, 3, 9, 0.3, 0.5, 1e-4};
  for (DType t : {DType::F16, DType::BF16}) {
    Tensor a = fromDoubles(t, num), d = fromDoubles(t, den);
    Tensor q = runElementwise(
        {a, d}, t, [](const auto& e) { return kernel::binary(BinaryOp::Div, e[0], e[1]); });
    for (size_t i = 0; i < num.size(); ++i) {
      float exact = static_cast<float>(a.getDouble(i)) / static_cast<float>(d.getDouble(i));
      uint16_t want = t == DType::F16 ? floatToHalf(exact) : floatToBf16(exact);
      EXPECT_EQ(q.data<uint16_t>()[i], want) << dtypeName(t) << " " << num[i] << "/" << den[i];
    }
  }
}

TEST(CpuCodegen, F64ToHalfRoundsOnceNotTwice) {
  // 1 + 2^-11 + 2^-40 is just above the f16 midpoint between 1 and 1 + 2^-10; going through a
  // rounded f32 (1 + 2^-11, a tie) would give 1.0.
  Tensor x = fromDoubles(DType::F64, {1 + 0x1p-11 + 0x1p-40, 1 + 0x1p-8 + 0x1p-40});
  Tensor h =
      runElementwise({x}, DType::F16, [](const auto& e) { return kernel::cast(e[0], DType::F16); });
  Tensor b = runElementwise({x}, DType::BF16,
                            [](const auto& e) { return kernel::cast(e[0], DType::BF16); });
  EXPECT_EQ(h.data<uint16_t>()[0], 0x3c01);
  EXPECT_EQ(b.data<uint16_t>()[1], 0x3f81);
}

TEST(CpuCodegen, BoolLoadsStoresAndCasts) {
  Tensor flags = fromInts(DType::Bool, {0, 1, 1, 0, 1});
  flags.mutableData<uint8_t>()[2] = 7;  // any nonzero byte reads as true
  Tensor notted = runElementwise({flags}, DType::Bool,
                                 [](const auto& e) { return kernel::unary(UnaryOp::Not, e[0]); });
  Tensor asFloat = runElementwise({flags}, DType::F32,
                                  [](const auto& e) { return kernel::cast(e[0], DType::F32); });
  const uint8_t wantNot[] = {1, 0, 0, 1, 0};
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(notted.data<uint8_t>()[i], wantNot[i]) << i;  // stored as exactly 0 or 1
    EXPECT_EQ(asFloat.getDouble(i), wantNot[i] ? 0.0 : 1.0) << i;
  }
  Tensor x = fromDoubles(DType::F32, {0, -0.0, kNaN, 0.5, -2});
  Tensor b = runElementwise({x}, DType::Bool,
                            [](const auto& e) { return kernel::cast(e[0], DType::Bool); });
  const uint8_t wantB[] = {0, 0, 1, 1, 1};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(b.data<uint8_t>()[i], wantB[i]) << i;
}

TEST(CpuCodegen, IntegerDivisionByZeroAndWraparound) {
  const int64_t mn = INT32_MIN, mx = INT32_MAX;
  Tensor a = fromInts(DType::I32, {7, 7, mn, mn, -7, -7, mx, mn});
  Tensor b = fromInts(DType::I32, {0, 3, -1, 0, 2, -2, 1, -1});
  auto bin = [&](BinaryOp op) {
    return runElementwise({a, b}, DType::I32,
                          [op](const auto& e) { return kernel::binary(op, e[0], e[1]); });
  };
  Tensor div = bin(BinaryOp::Div), rem = bin(BinaryOp::Rem), add = bin(BinaryOp::Add),
         mul = bin(BinaryOp::Mul);
  const int64_t wantDiv[] = {0, 2, mn, 0, -3, 3, mx, mn};
  const int64_t wantRem[] = {7, 1, 0, mn, -1, -1, 0, 0};
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(div.getInt(i), wantDiv[i]) << i;
    EXPECT_EQ(rem.getInt(i), wantRem[i]) << i;
  }
  EXPECT_EQ(add.getInt(6), mn);  // INT_MAX + 1 wraps
  EXPECT_EQ(mul.getInt(7), mn);  // INT_MIN * -1 wraps
  EXPECT_EQ(add.getInt(2), mx);  // INT_MIN + -1 wraps
}

TEST(CpuCodegen, SelectCompareAndMathAgainstStd) {
  std::vector<double> v;
  for (int i = 0; i < 200; ++i) v.push_back(-6.0 + 0.06 * i);
  Tensor x = fromDoubles(DType::F32, v);
  auto unaryOf = [&](UnaryOp op) {
    return runElementwise({x}, DType::F32, [op](const auto& e) { return kernel::unary(op, e[0]); });
  };
  Tensor erf = unaryOf(UnaryOp::Erf), tanh = unaryOf(UnaryOp::Tanh), exp = unaryOf(UnaryOp::Exp);
  // relu through select(x > 0, x, 0)
  Tensor relu = runElementwise({x}, DType::F32, [](const auto& e) {
    ExprRef zero = kernel::floatConst(0, DType::F32);
    return kernel::select(kernel::binary(BinaryOp::Gt, e[0], zero), e[0], zero);
  });
  for (size_t i = 0; i < v.size(); ++i) {
    float f = static_cast<float>(v[i]);
    auto close = [](double want, double got) {
      return std::fabs(want - got) <= 1e-6 * std::max(1.0, std::fabs(want));
    };
    EXPECT_TRUE(close(std::erf(f), erf.getDouble(i))) << f;
    EXPECT_TRUE(close(std::tanh(f), tanh.getDouble(i))) << f;
    EXPECT_TRUE(close(std::exp(f), exp.getDouble(i))) << f;
    EXPECT_EQ(relu.getDouble(i), f > 0 ? f : 0.0f) << f;
  }
  // Ordered comparisons are false on NaN; ne is true.
  Tensor a = fromDoubles(DType::F32, {1, kNaN, 2});
  Tensor b = fromDoubles(DType::F32, {1, kNaN, 3});
  Tensor lt = runElementwise(
      {a, b}, DType::Bool, [](const auto& e) { return kernel::binary(BinaryOp::Lt, e[0], e[1]); });
  Tensor ne = runElementwise(
      {a, b}, DType::Bool, [](const auto& e) { return kernel::binary(BinaryOp::Ne, e[0], e[1]); });
  EXPECT_EQ(lt.getInt(0), 0);
  EXPECT_EQ(lt.getInt(1), 0);
  EXPECT_EQ(lt.getInt(2), 1);
  EXPECT_EQ(ne.getInt(0), 0);
  EXPECT_EQ(ne.getInt(1), 1);
  EXPECT_EQ(ne.getInt(2), 1);
}

// ---- library calls ----

struct CallLog {
  std::mutex mu;
  std::vector<std::pair<int32_t, std::vector<void*>>> calls;
};

void recordCall(void* context, int32_t index, void** buffers) {
  auto* log = static_cast<CallLog*>(context);
  size_t n = index == 0 ? 3 : 1;  // the argument counts of the kernel below
  std::lock_guard<std::mutex> lock(log->mu);
  log->calls.emplace_back(index, std::vector<void*>(buffers, buffers + n));
  if (index == 0) static_cast<float*>(buffers[2])[0] = 42.0f;  // the "library" writes y[0]
}

TEST(CpuCodegen, CallStatementsCallTheHandlerInProgramOrder) {
  using namespace kernel;
  ExprRef y0 = load("y", DType::F32, intConst(0));
  StmtRef body = block({
      call(OpCode::DotGeneral, {}, {"a", "b", "y"}),                                  // call 0
      store("y", intConst(1), binary(BinaryOp::Add, y0, floatConst(1, DType::F32))),  // sees 42
      forLoop("i", intConst(3), LoopKind::Serial, call(OpCode::Abs, {}, {"b"})),      // call 1
      forLoop("p", intConst(8), LoopKind::Parallel, call(OpCode::Neg, {}, {"a"})),    // call 2
  });
  Kernel k = makeKernel("calls",
                        {buf("a", DType::F32, {4}, BufferRole::Input),
                         buf("b", DType::F32, {4}, BufferRole::Input),
                         buf("y", DType::F32, {4}, BufferRole::Output)},
                        body);
  auto ck = compileOrDie(k);
  ASSERT_TRUE(ck);
  float a[4] = {}, b[4] = {}, y[4] = {};
  void* ptrs[] = {a, b, y};
  CallLog log;
  ThreadPool pool(3);
  ck->run(ptrs, pool, &recordCall, &log);
  ASSERT_EQ(log.calls.size(), 1u + 3u + 8u);
  EXPECT_EQ(log.calls[0].first, 0);
  EXPECT_EQ(log.calls[0].second, (std::vector<void*>{a, b, y}));
  for (size_t i = 1; i < 4; ++i) {
    EXPECT_EQ(log.calls[i].first, 1);
    EXPECT_EQ(log.calls[i].second, (std::vector<void*>{b}));
  }
  for (size_t i = 4; i < log.calls.size(); ++i) {
    EXPECT_EQ(log.calls[i].first, 2);
    EXPECT_EQ(log.calls[i].second, (std::vector<void*>{a}));
  }
  EXPECT_EQ(y[1], 43.0f);
}

// ---- threads ----

TEST(CpuCodegen, TwoThreadsRunOneKernelAtOnce) {
  const int64_t rows = 37, cols = 129;
  auto ck = compileOrDie(parallelRows(rows, cols));
  ASSERT_TRUE(ck);
  ThreadPool pool(3);
  std::atomic<int> wrong{0};
  auto worker = [&](float scale) {
    std::vector<float> x(rows * cols), y(rows * cols);
    for (size_t i = 0; i < x.size(); ++i) x[i] = scale * static_cast<float>(i % 13);
    for (int rep = 0; rep < 50; ++rep) {
      std::fill(y.begin(), y.end(), -1.0f);
      void* ptrs[] = {x.data(), y.data()};
      ck->run(ptrs, pool, nullptr, nullptr);
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j)
          if (y[i * cols + j] != x[i * cols + j] * 2.0f + static_cast<float>(i)) ++wrong;
    }
  };
  std::thread t1(worker, 1.0f), t2(worker, -3.0f);
  t1.join();
  t2.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST(CpuCodegen, ThreadPoolCoversEveryIndexOnceFromManyCallers) {
  ThreadPool pool(4);
  std::vector<std::thread> callers;
  std::atomic<int> bad{0};
  for (int c = 0; c < 4; ++c)
    callers.emplace_back([&, c] {
      for (int rep = 0; rep < 20; ++rep) {
        int64_t n = 1 + 37 * c + rep;
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        pool.parallelFor(n, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)]++;
        });
        for (auto& h : hits)
          if (h.load() != 1) ++bad;
      }
    });
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(bad.load(), 0);
}

// A Parallel loop inside a serial loop sees the outer variable; a Parallel loop nested in it
// runs serially inside the outlined body (one outlined function).
TEST(CpuCodegen, ParallelLoopsCaptureOuterVariablesAndNestSerially) {
  using namespace kernel;
  ExprRef idx =
      binary(BinaryOp::Add,
             binary(BinaryOp::Mul,
                    binary(BinaryOp::Add, binary(BinaryOp::Mul, var("r"), intConst(5)), var("i")),
                    intConst(4)),
             var("j"));
  ExprRef value = cast(binary(BinaryOp::Add,
                              binary(BinaryOp::Add, binary(BinaryOp::Mul, var("r"), intConst(100)),
                                     binary(BinaryOp::Mul, var("i"), intConst(10))),
                              var("j")),
                       DType::I32);
  StmtRef inner = forLoop("j", intConst(4), LoopKind::Parallel, store("y", idx, value));
  StmtRef mid = forLoop("i", intConst(5), LoopKind::Parallel, inner);
  Kernel k = makeKernel("nest", {buf("y", DType::I32, {3, 5, 4}, BufferRole::Output)},
                        forLoop("r", intConst(3), LoopKind::Unrolled, mid));
  auto ck = compileOrDie(k);
  ASSERT_TRUE(ck);
  std::string ir = compiler().lastLlvmIr();
  EXPECT_NE(ir.find(ck->symbol() + ".par0"), std::string::npos) << ir;
  EXPECT_EQ(ir.find(ck->symbol() + ".par1"), std::string::npos) << ir;
  std::vector<int32_t> y(60, -1);
  void* ptrs[] = {y.data()};
  ThreadPool pool(4);
  ck->run(ptrs, pool, nullptr, nullptr);
  for (int r = 0; r < 3; ++r)
    for (int i = 0; i < 5; ++i)
      for (int j = 0; j < 4; ++j) EXPECT_EQ(y[(r * 5 + i) * 4 + j], r * 100 + i * 10 + j);
}

// Scratch filled before a parallel loop that the loop only reads (a resize's tables) is shared
// by its threads; scratch the loop writes is refused (RejectsWhatACpuCannotRun).
TEST(CpuCodegen, ParallelLoopsShareScratchTheyOnlyRead) {
  using namespace kernel;
  StmtRef fill =
      forLoop("f", intConst(16), LoopKind::Serial,
              store("t", var("f"), cast(binary(BinaryOp::Mul, var("f"), intConst(3)), DType::I32)));
  StmtRef use =
      forLoop("i", intConst(64), LoopKind::Parallel,
              store("y", var("i"),
                    binary(BinaryOp::Add,
                           load("t", DType::I32, binary(BinaryOp::Rem, var("i"), intConst(16))),
                           cast(var("i"), DType::I32))));
  Kernel k = makeKernel("shared", {buf("y", DType::I32, {64}, BufferRole::Output)},
                        alloc("t", DType::I32, 16, MemoryScope::Local, block({fill, use})));
  auto ck = compileOrDie(k);
  ASSERT_TRUE(ck);
  EXPECT_NE(compiler().lastLlvmIr().find(ck->symbol() + ".par0"), std::string::npos);
  std::vector<int32_t> y(64, -1);
  void* ptrs[] = {y.data()};
  ThreadPool pool(4);
  ck->run(ptrs, pool, nullptr, nullptr);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(y[i], (i % 16) * 3 + i) << i;
}

TEST(CpuCodegen, IfStatementBranches) {
  using namespace kernel;
  ExprRef x = load("x", DType::F32, var("i"));
  StmtRef body =
      ifThen(binary(BinaryOp::Gt, x, floatConst(0, DType::F32)), store("y", var("i"), x),
             store("y", var("i"), binary(BinaryOp::Mul, x, floatConst(0.5, DType::F32))));
  Kernel k = makeKernel(
      "leaky",
      {buf("x", DType::F32, {6}, BufferRole::Input), buf("y", DType::F32, {6}, BufferRole::Output)},
      forLoop("i", intConst(6), LoopKind::Serial, body));
  auto ck = compileOrDie(k);
  ASSERT_TRUE(ck);
  float x6[6] = {-4, -1, 0, 1, 2.5f, -0.5f}, y6[6] = {};
  void* ptrs[] = {x6, y6};
  ck->run(ptrs, pool2(), nullptr, nullptr);
  const float want[6] = {-2, -0.5f, 0, 1, 2.5f, -0.25f};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(y6[i], want[i]) << i;
}

TEST(CpuCodegen, CompileAllBuildsOneModule) {
  Kernel add = elementwise({DType::I64, DType::I64}, DType::I64, 10,
                           [](const auto& e) { return kernel::binary(BinaryOp::Add, e[0], e[1]); });
  Kernel neg = elementwise({DType::F64}, DType::F64, 10,
                           [](const auto& e) { return kernel::unary(UnaryOp::Neg, e[0]); });
  auto all = compiler().compileAll({&add, &neg});
  ASSERT_TRUE(all.isOk()) << all.status().str();
  ASSERT_EQ(all->size(), 2u);
  std::string ir = compiler().lastLlvmIr();
  EXPECT_NE(ir.find((*all)[0]->symbol()), std::string::npos);
  EXPECT_NE(ir.find((*all)[1]->symbol()), std::string::npos);
  std::vector<int64_t> a(10, 5), b(10), c(10);
  std::vector<double> d(10, 2.5), e(10);
  for (int i = 0; i < 10; ++i) b[i] = i;
  void* p1[] = {a.data(), b.data(), c.data()};
  void* p2[] = {d.data(), e.data()};
  (*all)[0]->run(p1, pool2(), nullptr, nullptr);
  (*all)[1]->run(p2, pool2(), nullptr, nullptr);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(c[i], 5 + i);
    EXPECT_EQ(e[i], -2.5);
  }
}

TEST(CpuCodegen, OptLevelZeroGivesTheSameResults) {
  CodegenOptions o0;
  o0.optLevel = 0;
  auto c = CpuCompiler::create(o0);
  ASSERT_TRUE(c.isOk()) << c.status().str();
  auto k = (*c)->compile(parallelRows(7, 9));
  ASSERT_TRUE(k.isOk()) << k.status().str();
  EXPECT_EQ((*c)->lastLlvmIr().find("x float>"), std::string::npos);  // nothing vectorized
  std::vector<float> x(63), y(63);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) * 0.5f;
  void* ptrs[] = {x.data(), y.data()};
  (*k)->run(ptrs, pool2(), nullptr, nullptr);
  for (int64_t i = 0; i < 7; ++i)
    for (int64_t j = 0; j < 9; ++j)
      EXPECT_EQ(y[i * 9 + j], x[i * 9 + j] * 2.0f + static_cast<float>(i));
}

// ---- errors ----

TEST(CpuCodegen, RejectsWhatACpuCannotRun) {
  using namespace kernel;
  auto rejects = [](const Kernel& k, const std::string& words) {
    auto r = compiler().compile(k);
    ASSERT_FALSE(r.isOk()) << printKernel(k);
    EXPECT_NE(r.status().message().find(words), std::string::npos) << r.status().message();
  };
  std::vector<Buffer> y = {buf("y", DType::F32, {8}, BufferRole::Output)};
  StmtRef st = store("y", var("i"), floatConst(1, DType::F32));
  rejects(makeKernel("g", y, forLoop("i", intConst(8), LoopKind::GpuBlock, st)), "GPU loop");
  rejects(makeKernel("s", y,
                     alloc("t", DType::F32, 8, MemoryScope::Shared,
                           forLoop("i", intConst(8), LoopKind::Serial, st))),
          "shared memory");
  rejects(makeKernel("b", y, block({barrier()})), "barrier");
  rejects(makeKernel("u", y,
                     forLoop("i", intConst(8), LoopKind::Serial,
                             store("z", var("i"), floatConst(1, DType::F32)))),
          "unknown buffer 'z'");
  rejects(makeKernel("v", y, store("y", var("k"), floatConst(1, DType::F32))),
          "unknown loop variable 'k'");
  rejects(makeKernel("a", y,
                     alloc("t", DType::F32, 1, MemoryScope::Local,
                           forLoop("i", intConst(8), LoopKind::Parallel,
                                   store("t", intConst(0), floatConst(1, DType::F32))))),
          "outside parallel loop 'i'");
  rejects(makeKernel("t", y, store("y", intConst(0), intConst(1, DType::I32))), "holds f32");
}

// ---- differential tests against the reference interpreter ----

TEST(CpuCodegenVsInterpreter, FloatUnaryOps) {
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
    Tensor x = fromDoubles(t, kFloatValues);
    for (int u = 0; u <= static_cast<int>(UnaryOp::IsNan); ++u) {
      auto op = static_cast<UnaryOp>(u);
      if (op == UnaryOp::Not) continue;
      auto code = opFromName(kernel::unaryOpName(op));
      ASSERT_TRUE(code.has_value()) << kernel::unaryOpName(op);
      Tensor want = interpretOp(*code, {x});
      if (!want.defined()) continue;
      Tensor got = runElementwise({x}, want.dtype(),
                                  [op](const auto& e) { return kernel::unary(op, e[0]); });
      expectSame(want, got, std::string(kernel::unaryOpName(op)) + " " + std::string(dtypeName(t)),
                 {x});
    }
  }
}

std::optional<std::pair<OpCode, AttrMap>> graphOpOf(BinaryOp op) {
  switch (op) {
    case BinaryOp::ShiftLeft: return std::make_pair(OpCode::ShiftLeft, AttrMap{});
    case BinaryOp::ShiftRightArithmetic:
      return std::make_pair(OpCode::ShiftRightArithmetic, AttrMap{});
    case BinaryOp::ShiftRightLogical: return std::make_pair(OpCode::ShiftRightLogical, AttrMap{});
    case BinaryOp::Lt:
    case BinaryOp::Le:
    case BinaryOp::Gt:
    case BinaryOp::Ge:
    case BinaryOp::Eq:
    case BinaryOp::Ne:
      return std::make_pair(OpCode::Compare,
                            AttrMap{{"direction", enumAttr(kernel::binaryOpName(op))}});
    default: break;
  }
  auto code = opFromName(kernel::binaryOpName(op));
  if (!code) return std::nullopt;
  return std::make_pair(*code, AttrMap{});
}

// Every binary op the interpreter defines for t, on all pairs of `values`.
void checkBinaryOps(DType t, const std::vector<double>& values) {
  std::vector<double> as, bs;
  for (double a : values)
    for (double b : values) {
      as.push_back(a);
      bs.push_back(b);
    }
  Tensor a = fromDoubles(t, as), b = fromDoubles(t, bs);
  int checked = 0;
  for (int o = 0; o <= static_cast<int>(BinaryOp::Ne); ++o) {
    auto op = static_cast<BinaryOp>(o);
    auto graph = graphOpOf(op);
    ASSERT_TRUE(graph.has_value()) << kernel::binaryOpName(op);
    // Ask the interpreter first; ops it does not define for t are skipped here.
    Module m;
    Function* f = m.addFunction("main");
    Builder builder(f);
    Value* pa = builder.parameter(a.type());
    Value* pb = builder.parameter(b.type());
    std::vector<Value*> results = builder.opN(graph->first, {pa, pb}, graph->second);
    if (!builder.ok()) continue;
    f->setOutputs(results);
    auto want = interpret(*f, std::vector<Tensor>{a, b});
    if (!want.isOk()) continue;
    Tensor got = runElementwise({a, b}, (*want)[0].dtype(),
                                [op](const auto& e) { return kernel::binary(op, e[0], e[1]); });
    expectSame((*want)[0], got,
               std::string(kernel::binaryOpName(op)) + " " + std::string(dtypeName(t)), {a, b});
    ++checked;
  }
  EXPECT_GE(checked, 8) << dtypeName(t);
}

TEST(CpuCodegenVsInterpreter, FloatBinaryOps) {
  const std::vector<double> v = {0, -0.0, 1, -1.5, 2.5, 3, -7.25, 0.1, 1e30, kNaN, kInf, -kInf};
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16}) checkBinaryOps(t, v);
}

TEST(CpuCodegenVsInterpreter, IntegerAndBoolBinaryOps) {
  checkBinaryOps(DType::I8, {0, 1, -1, 2, 7, -128, 127, 8, 9, -3, 100});
  checkBinaryOps(DType::U8, {0, 1, 2, 7, 8, 9, 128, 200, 255, 3});
  checkBinaryOps(DType::I16, {0, 1, -1, 15, 16, -32768, 32767, 300, -5});
  checkBinaryOps(DType::I32, {0, 1, -1, 31, 32, 5, -2147483648.0, 2147483647, 65536, -9});
  checkBinaryOps(DType::I64, {0, 1, -1, 63, 64, 3, -9.2e18, 9.2e18, 4294967296.0, -17});
  checkBinaryOps(DType::Bool, {0, 1});
}

TEST(CpuCodegenVsInterpreter, IntegerAndBoolUnaryOps) {
  for (DType t : {DType::I8, DType::U8, DType::I32, DType::I64, DType::Bool}) {
    std::vector<double> v = {0, 1, -1, 5, -128, 127, 200, -7};
    if (t == DType::Bool) v = {0, 1};
    Tensor x = fromDoubles(t, v);
    int checked = 0;
    for (UnaryOp op : {UnaryOp::Neg, UnaryOp::Abs, UnaryOp::Sign, UnaryOp::Not}) {
      Module m;
      Function* f = m.addFunction("main");
      Builder builder(f);
      std::vector<Value*> r =
          builder.opN(*opFromName(kernel::unaryOpName(op)), {builder.parameter(x.type())});
      if (!builder.ok()) continue;
      f->setOutputs(r);
      auto want = interpret(*f, std::vector<Tensor>{x});
      if (!want.isOk()) continue;
      Tensor got = runElementwise({x}, t, [op](const auto& e) { return kernel::unary(op, e[0]); });
      expectSame((*want)[0], got,
                 std::string(kernel::unaryOpName(op)) + " " + std::string(dtypeName(t)), {x});
      ++checked;
    }
    EXPECT_GE(checked, 1) << dtypeName(t);
  }
}

TEST(CpuCodegenVsInterpreter, ConvertBetweenEveryPairOfDTypes) {
  const std::vector<double> floats = {0,
                                      -0.0,
                                      0.5,
                                      -0.5,
                                      1.5,
                                      2.5,
                                      -2.5,
                                      127,
                                      128,
                                      255,
                                      256,
                                      -129,
                                      65504,
                                      65520,
                                      1e10,
                                      -1e10,
                                      3e38,
                                      1e-40,
                                      kNaN,
                                      kInf,
                                      -kInf,
                                      1 + 0x1p-11 + 0x1p-40,
                                      16777217,
                                      2147483647.0,
                                      -2147483649.0,
                                      9.3e18,
                                      3.14159265358979};
  const std::vector<int64_t> ints = {
      0,         1,         -1,    127,      -128,       255,         256,
      -32769,    65504,     65520, 16777217, 2147483647, -2147483648, (int64_t(1) << 53) + 1,
      INT64_MAX, INT64_MIN, 12345};
  for (int s = 0; s < kNumDTypes; ++s) {
    auto from = static_cast<DType>(s);
    if (isString(from)) continue;  // no kernel IR for text
    Tensor x = isFloat(from) ? fromDoubles(from, floats) : fromInts(from, ints);
    for (int d = 0; d < kNumDTypes; ++d) {
      auto to = static_cast<DType>(d);
      if (isString(to)) continue;
      Tensor want = interpretOp(OpCode::Convert, {x}, {}, {TensorType::of(to, {x.numElements()})});
      if (!want.defined()) continue;
      Tensor got = runElementwise({x}, to, [to](const auto& e) { return kernel::cast(e[0], to); });
      std::string what =
          "convert " + std::string(dtypeName(from)) + " -> " + std::string(dtypeName(to));
      if (from == DType::I64 && to == DType::BF16) {
        // i64 -> bf16 goes through f64 (docs/codegen.md); exact for |v| < 2^53, checked there.
        const int64_t exact = int64_t(1) << 53;
        for (int64_t i = 0; i < x.numElements(); ++i) {
          if (x.getInt(i) <= -exact || x.getInt(i) >= exact) continue;
          EXPECT_EQ(want.getDouble(i), got.getDouble(i)) << what << " of " << x.getInt(i);
        }
        continue;
      }
      expectSame(want, got, what, {x});
    }
  }
}

TEST(CpuCodegen, CompileTimeOfASimpleKernel) {
  auto fresh = CpuCompiler::create();
  ASSERT_TRUE(fresh.isOk());
  std::vector<double> ms;
  for (int rep = 0; rep < 5; ++rep) {
    Kernel k = elementwise({DType::F32, DType::F32}, DType::F32, 1024,
                           [](const auto& e) { return kernel::binary(BinaryOp::Add, e[0], e[1]); });
    auto t0 = std::chrono::steady_clock::now();
    auto r = (*fresh)->compile(k);
    auto t1 = std::chrono::steady_clock::now();
    ASSERT_TRUE(r.isOk());
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  std::printf("[ compile ] f32[1024] add, emit + O3 + object + link: median %.2f ms (min %.2f, max "
              "%.2f) on %s\n",
              ms[2], ms[0], ms[4], codegen::cpu::hostCpu().c_str());
  EXPECT_LT(ms[2], 2000.0);  // a simple kernel compiles in milliseconds, not seconds
}

}  // namespace
}  // namespace kiln
