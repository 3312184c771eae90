// Kernels over sizes known only when they run (kernel IR's symbols): a loop kernel lowered from
// a function with a symbolic dim over a range, scheduled by the CPU target and compiled once,
// runs at several sizes of the range and agrees with the interpreter on the function specialised
// to each size. Elementwise f32 with libm math (approximateMath off): bit for bit.
#include <gtest/gtest.h>

#include <random>

#include "codegen/cpu/cpu_codegen.h"
#include "compiler/compile.h"
#include "interp/interpreter.h"
#include "ir/text/text.h"
#include "kernel/parse.h"
#include "kernel/schedule.h"
#include "kernel/verify.h"
#include "passes/specialize_shapes.h"
#include "runtime/executable.h"
#include "runtime/target.h"
#include "two_host_threads.h"

namespace kiln {
namespace {

// A bias add and tanh over [N,16], stored as it is and transposed ([16,N]: N is the row pitch).
constexpr const char* kModule = R"(
func @main(%x: f32[N,16], %b: f32[16]) -> (f32[N,16], f32[16,N]) {
  %bb = f32[N,16] broadcast_in_dim(%b) {dims = [1]}
  %s = f32[N,16] add(%x, %bb)
  %t = f32[N,16] tanh(%s)
  %r = f32[16,N] transpose(%t) {permutation = [1, 0]}
  return %t, %r
}
)";

StatusOr<std::vector<kernel::Kernel>> lowerForCpu(const Function& f,
                                                  const runtime::CompileOptions& options) {
  runtime::registerBuiltinTargets();
  KILN_ASSIGN_OR_RETURN(const runtime::Target* cpu, runtime::findTarget("cpu"));
  runtime::CompileTimes times;
  fusion::FusionPlan plan = compiler::fuse(f, cpu, options, times);
  KILN_ASSIGN_OR_RETURN(std::vector<kernel::Kernel> kernels,
                        compiler::lower(f, plan, options, times));
  KILN_RETURN_IF_ERROR(compiler::schedule(*cpu, kernels, options, times));
  return kernels;
}

// `text` compiled for the CPU at 2 threads, its symbols over `ranges`.
StatusOr<std::unique_ptr<runtime::Executable>>
compileOver(const std::string& text, const SymbolRanges& ranges, bool recompile = true) {
  runtime::registerBuiltinTargets();
  runtime::CompileOptions options;
  options.ranges = ranges;
  options.threads = 2;
  options.recompile = recompile;
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Module> m, parseModule(text, "module.kir"));
  return runtime::Executable::compile(std::move(m), options);
}

// The reference: `text` specialised to `sizes`, interpreted on `in`.
std::vector<Tensor> reference(const std::string& text, const SymbolBindings& sizes,
                              const std::vector<Tensor>& in) {
  auto m = parseModule(text, "module.kir");
  EXPECT_TRUE(m.isOk()) << m.status().str();
  if (!m.isOk()) return {};
  EXPECT_TRUE(specializeShapes(**m, sizes).isOk());
  auto want = interpret(*(*m)->entry(), in);
  EXPECT_TRUE(want.isOk()) << want.status().str();
  return want.isOk() ? *want : std::vector<Tensor>{};
}

// f32 tensors of these shapes, uniform in [-2, 2).
std::vector<Tensor> uniformInputs(const std::vector<std::vector<int64_t>>& shapes,
                                  std::mt19937& rng) {
  std::uniform_real_distribution<double> u(-2.0, 2.0);
  std::vector<Tensor> out;
  for (const std::vector<int64_t>& shape : shapes) {
    Tensor t(DType::F32, shape);
    for (int64_t i = 0; i < t.numElements(); ++i) t.setDouble(i, u(rng));
    out.push_back(std::move(t));
  }
  return out;
}

// Each output of `got` has the reference's type and is within `tol` of it, element by element.
void expectClose(const std::vector<Tensor>& got, const std::vector<Tensor>& want, double tol,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t o = 0; o < want.size(); ++o) {
    ASSERT_EQ(got[o].type(), want[o].type()) << what << " output " << o;
    for (int64_t i = 0; i < want[o].numElements(); ++i)
      ASSERT_NEAR(got[o].getDouble(i), want[o].getDouble(i), tol)
          << what << " output " << o << " element " << i;
  }
}

// `exe` run on `in` agrees with `text`'s reference at `sizes` within `tol`.
void expectRunMatches(const runtime::Executable& exe, const std::string& text,
                      const SymbolBindings& sizes, const std::vector<Tensor>& in, double tol) {
  std::string what;
  for (const auto& [symbol, size] : sizes) what += symbol + "=" + std::to_string(size) + " ";
  std::vector<Tensor> want = reference(text, sizes, in);
  auto got = exe.run(in);
  ASSERT_TRUE(got.isOk()) << what << ": " << got.status().str();
  expectClose(*got, want, tol, what);
}

TEST(SymbolicKernels, OneCompileRunsEverySizeOfItsRange) {
  auto m = parseModule(kModule, "symbolic.kir");
  ASSERT_TRUE(m.isOk()) << m.status().str();
  runtime::CompileOptions options;
  options.ranges = {{"N", {1, 64}}};
  auto kernels = lowerForCpu(*(*m)->entry(), options);
  ASSERT_TRUE(kernels.isOk()) << kernels.status().str();
  ASSERT_EQ(kernels->size(), 1u);
  const kernel::Kernel& k = (*kernels)[0];
  ASSERT_EQ(k.symbols.size(), 1u);
  EXPECT_EQ(k.symbols[0].hi, 64);
  // Buffers are sized for the largest N.
  EXPECT_EQ(k.find("r")->shape, (std::vector<int64_t>{16, 64}));

  codegen::cpu::CodegenOptions co;
  co.approximateMath = false;
  auto compiler = codegen::cpu::CpuCompiler::create(co);
  ASSERT_TRUE(compiler.isOk()) << compiler.status().str();
  auto compiled = (*compiler)->compile(k);
  ASSERT_TRUE(compiled.isOk()) << compiled.status().str() << "\n" << kernel::printKernel(k);
  codegen::cpu::ThreadPool pool(2);

  std::mt19937 rng(7);
  for (int64_t n : {1, 5, 64}) {
    std::vector<Tensor> in = uniformInputs({{n, 16}, {16}}, rng);
    Tensor &x = in[0], &b = in[1];
    const std::vector<Tensor> want = reference(kModule, {{"N", n}}, in);
    ASSERT_EQ(want.size(), 2u);

    // Outputs at n rows, in buffers of the range's largest size whose tail must stay untouched.
    Tensor t(DType::F32, {64, 16}), r(DType::F32, {16, 64});
    for (int64_t i = 0; i < t.numElements(); ++i) t.setDouble(i, 99.0);
    for (int64_t i = 0; i < r.numElements(); ++i) r.setDouble(i, 99.0);
    int64_t symbols[] = {n};
    void* ptrs[] = {x.mutableBytes(), b.mutableBytes(), t.mutableBytes(), r.mutableBytes(),
                    symbols};
    (*compiled)->run(ptrs, pool, nullptr, nullptr);
    for (int64_t i = 0; i < n * 16; ++i)
      ASSERT_EQ(t.getDouble(i), want[0].getDouble(i)) << "N=" << n << " t[" << i << "]";
    for (int64_t i = 0; i < n * 16; ++i)
      ASSERT_EQ(r.getDouble(i), want[1].getDouble(i)) << "N=" << n << " r[" << i << "]";
    if (n < 64) {
      EXPECT_EQ(t.getDouble(n * 16), 99.0) << "N=" << n << ": past the n rows";
    }
  }
}

// A parallel loop over a symbolic extent: its outlined body reads the symbol too.
TEST(SymbolicKernels, ParallelLoopsOverASymbol) {
  const char* text = R"(kernel k0_loop(sym N in [1, 1000], in %x: f32[N,3], out %y: f32[N,3]) {
  parallel for i0 in [0, N) {
    serial for i1 in [0, 3) {
      %y[i0 * 3 + i1] = %x[i0 * 3 + i1] * 2.0 + f32(N)
    }
  }
}
)";
  auto ks = kernel::parseKernels(text, "k.txt");
  ASSERT_TRUE(ks.isOk()) << ks.status().str();
  ASSERT_TRUE(kernel::verifyKernel((*ks)[0]).isOk());
  EXPECT_EQ(kernel::printKernel((*ks)[0]), text);
  auto compiler = codegen::cpu::CpuCompiler::create();
  ASSERT_TRUE(compiler.isOk()) << compiler.status().str();
  auto compiled = (*compiler)->compile((*ks)[0]);
  ASSERT_TRUE(compiled.isOk()) << compiled.status().str();
  codegen::cpu::ThreadPool pool(2);
  for (int64_t n : {1, 2, 999}) {
    std::vector<float> x(static_cast<size_t>(n * 3)), y(x.size(), -1.0f);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) * 0.5f;
    int64_t symbols[] = {n};
    void* ptrs[] = {x.data(), y.data(), symbols};
    (*compiled)->run(ptrs, pool, nullptr, nullptr);
    for (size_t i = 0; i < x.size(); ++i)
      ASSERT_EQ(y[i], x[i] * 2.0f + static_cast<float>(n)) << "N=" << n << " y[" << i << "]";
  }
}

// An executable compiled over N = 1..64 runs every size of the range without compiling again,
// sized outputs included; a size outside compiles once for it (or, with recompiling off, is an
// error naming the dim, the size and the range). The CPU's tanh is its vector approximation:
// within 1e-6 of the interpreter's (|tanh| <= 1; docs/codegen.md, "Numerics").
TEST(SymbolicKernels, ExecutableOverARangeRunsEverySize) {
  auto exe = compileOver(kModule, {{"N", {1, 64}}});
  ASSERT_TRUE(exe.isOk()) << exe.status().str();
  std::mt19937 rng(3);
  for (int64_t n : {64, 1, 17, 80}) {
    expectRunMatches(**exe, kModule, {{"N", n}}, uniformInputs({{n, 16}, {16}}, rng), 1e-6);
    EXPECT_EQ((*exe)->recompiles(), n == 80 ? 1 : 0) << "N=" << n;
  }

  // Over a wide range the nests run in parallel or not by this run's size.
  auto wide = compileOver(kModule, {{"N", {1, 4096}}});
  ASSERT_TRUE(wide.isOk()) << wide.status().str();
  for (int64_t n : {3000, 2})
    expectRunMatches(**wide, kModule, {{"N", n}}, uniformInputs({{n, 16}, {16}}, rng), 1e-6);

  auto strict = compileOver(kModule, {{"N", {1, 64}}}, /*recompile=*/false);
  ASSERT_TRUE(strict.isOk()) << strict.status().str();
  auto outside = (*strict)->run(uniformInputs({{65, 16}, {16}}, rng));
  ASSERT_FALSE(outside.isOk());
  EXPECT_NE(outside.status().str().find("dim 0: N is 65, but the executable was compiled for "
                                        "N=1..64, and recompiling is off"),
            std::string::npos)
      << outside.status().str();
}

// A range program's arena offsets follow each run's sizes: at N = 2 the buffers of a chain of
// products lie together (each right above those live with it), not a largest size apart, and
// never above the plan's offsets; runs at both ends of the range match the interpreter
// (tolerance 1e-4: four chained layers of 64-term f32 sums in oneDNN's order and its tanh post-op,
// each layer's rounding carried into the next; seen up to 1.1e-5).
TEST(SymbolicKernels, ArenaOffsetsFollowTheRunSizes) {
  constexpr const char* kChain = R"(
func @main(%x: f32[N,64], %w: f32[64,64]) -> (f32[N,64]) {
  %a = f32[N,64] dot_general(%x, %w) {lhs_contracting = [1], rhs_contracting = [0]}
  %ta = f32[N,64] tanh(%a)
  %b = f32[N,64] dot_general(%ta, %w) {lhs_contracting = [1], rhs_contracting = [0]}
  %tb = f32[N,64] tanh(%b)
  %c = f32[N,64] dot_general(%tb, %w) {lhs_contracting = [1], rhs_contracting = [0]}
  %tc = f32[N,64] tanh(%c)
  %d = f32[N,64] dot_general(%tc, %w) {lhs_contracting = [1], rhs_contracting = [0]}
  %td = f32[N,64] tanh(%d)
  return %td
}
)";
  auto exe = compileOver(kChain, {{"N", {1, 1024}}});
  ASSERT_TRUE(exe.isOk()) << exe.status().str();
  const runtime::BufferPlan& plan = (*exe)->buffers();
  ASSERT_GE(plan.arenaBytes, 2 * 1024 * 64 * 4);  // two values live at once, at N = 1024
  std::vector<int64_t> at = plan.offsetsAt({{"N", 2}});
  ASSERT_EQ(at.size(), plan.items.size());
  int64_t top = 0;
  for (size_t i = 0; i < at.size(); ++i) {
    EXPECT_LE(at[i], plan.items[i].offset);
    top = std::max(top, at[i] + 2 * 64 * 4);
  }
  EXPECT_LE(top, 2 * 2 * 64 * 4);  // two rows of 2 x 64 floats
  for (const int64_t offset : plan.offsetsAt({{"N", 1024}}))
    EXPECT_LE(offset + 1024 * 64 * 4, plan.arenaBytes);  // the arena holds the top of the range
  std::mt19937 rng(5);
  for (int64_t n : {2, 1024, 3})
    expectRunMatches(**exe, kChain, {{"N", n}}, uniformInputs({{n, 64}, {64, 64}}, rng), 1e-4);
}

// A nest parallel only at some sizes chooses at run time in a program of several threads; with
// one thread there is nothing to choose (and no second copy of the nest to compile).
TEST(SymbolicKernels, RunTimeParallelChoiceNeedsThreads) {
  const char* text = R"(kernel k0_loop(sym N in [1, 100000], in %x: f32[N,3], out %y: f32[N,3]) {
  serial for i0 in [0, N) {
    serial for i1 in [0, 3) {
      %y[i0 * 3 + i1] = %x[i0 * 3 + i1] * 2.0
    }
  }
}
)";
  auto ks = kernel::parseKernels(text, "k.txt");
  ASSERT_TRUE(ks.isOk()) << ks.status().str();
  std::string two = kernel::printKernel(kernel::parallelizeOuter((*ks)[0], 16384, 2));
  EXPECT_NE(two.find("if (N * 3 >= 16384) {\n    parallel for i0 in [0, N) {"), std::string::npos)
      << two;
  std::string one = kernel::printKernel(kernel::parallelizeOuter((*ks)[0], 16384, 1));
  EXPECT_EQ(one, text);
}

// Data movement over symbols, as CNNs with a symbolic batch and sequence models use it:
// concatenations along a static axis (inception, densenet) and along the symbolic one, padding of
// static dims, a reverse along the symbol, inference batch norm, and a concatenation that is a
// kernel's whole result (written part by part); compiled over N = 1..16 and run at 16, 1 and 5
// against the interpreter within 1e-6 (the moves are exact; tanh is the CPU's approximation,
// docs/codegen.md "Numerics", and batch norm's f32 arithmetic may contract into fused
// multiply-adds).
TEST(SymbolicKernels, MovementOverSymbols) {
  constexpr const char* kMoves = R"(
func @main(%x: f32[N,3,4], %y: f32[N,2,4], %s: f32[3], %m: f32[3]) -> (f32[N,5,4], f32[N,5,4], f32[N,3,6], f32[2*N,3,4], f32[N,3,4]) {
  %c = f32[N,5,4] concatenate(%x, %y) {dimension = 1}
  %t = f32[N,5,4] tanh(%c)
  %z = f32[] constant() {value = [0.5]}
  %p = f32[N,3,6] pad(%x, %z) {low = [0, 0, 1], high = [0, 0, 1]}
  %r = f32[N,3,4] reverse(%x) {dims = [0, 2]}
  %rr = f32[2*N,3,4] concatenate(%x, %r) {dimension = 0}
  %b = f32[N,3,4] batch_norm_inference(%x, %s, %m, %m, %s) {epsilon = 0.001, feature_index = 1}
  return %c, %t, %p, %rr, %b
}
)";
  auto exe = compileOver(kMoves, {{"N", {1, 16}}});
  ASSERT_TRUE(exe.isOk()) << exe.status().str();
  std::mt19937 rng(13);
  for (int64_t n : {16, 1, 5}) {
    std::vector<Tensor> in = uniformInputs({{n, 3, 4}, {n, 2, 4}, {3}, {3}}, rng);
    for (int64_t i = 0; i < 3; ++i) in[2].setDouble(i, 1.0 + 0.25 * double(i));  // scale > 0
    expectRunMatches(**exe, kMoves, {{"N", n}}, in, 1e-6);
  }
  EXPECT_EQ((*exe)->recompiles(), 0);
}

// Row reductions whose rows are symbolic (their reduced dims static): a row sum, argmax, softmax
// and layer norm with a fused input and epilogue, compiled over B = 1..32 and run at 1, 7 and 32
// rows against the interpreter. Tolerance 1e-5: 16-element f32 sums of values in [-2, 2] in
// another order (partial vector sums) and the CPU's exp approximation (docs/codegen.md).
TEST(SymbolicKernels, RowReductionsOverSymbolicRows) {
  constexpr const char* kRows = R"(
func @main(%x: f32[B,16], %g: f32[16]) -> (f32[B], i64[B], f32[B,16], f32[B,16]) {
  %t = f32[B,16] tanh(%x)
  %s = f32[B] reduce(%t) {dims = [1], kind = sum}
  %a = i64[B] argmax(%x) {axis = 1}
  %p = f32[B,16] softmax(%t) {axis = 1}
  %q = f32[B,16] neg(%p)
  %l = f32[B,16] layer_norm(%x, %g) {axis = 1}
  return %s, %a, %q, %l
}
)";
  auto exe = compileOver(kRows, {{"B", {1, 32}}});
  ASSERT_TRUE(exe.isOk()) << exe.status().str();
  for (const kernel::Kernel& k : (*exe)->kernels())
    EXPECT_FALSE(k.symbols.empty()) << kernel::printKernel(k);
  std::mt19937 rng(11);
  for (int64_t n : {32, 1, 7})
    expectRunMatches(**exe, kRows, {{"B", n}}, uniformInputs({{n, 16}, {16}}, rng), 1e-5);
  EXPECT_EQ((*exe)->recompiles(), 0);
}

// Matrix products of symbolic rows: oneDNN kernels made for each run's sizes, with the bias and
// relu post-ops, and a residual add of symbolic rows as a post-op too; compiled over N = 1..64
// and run at 64, 1, 7 and 1 again against the interpreter (tolerance 1e-5: f32 products of 6
// terms in another order). Each size makes its kernels once.
TEST(SymbolicKernels, MatrixProductsMadeForEachRunSize) {
  constexpr const char* kMlp = R"(
func @main(%x: f32[N,6]) -> (f32[N,6]) {
  %w = f32[6,6] constant() {value = [0.5, -0.25, 0.125, 1.0, -1.0, 0.75, 0.2, 0.3, -0.4, 0.5, -0.6, 0.7, -0.8, 0.9, 1.0, -1.1, 1.2, -1.3, 0.05, 0.15, -0.25, 0.35, -0.45, 0.55, 1.5, -0.5, 0.25, -0.125, 0.0625, 0.3, -0.7, 0.6, -0.5, 0.4, -0.3, 0.2]}
  %b = f32[6] constant() {value = [0.1, -0.2, 0.3, -0.4, 0.5, -0.6]}
  %zero = f32[] constant() {value = [0.0]}
  %p = f32[N,6] dot_general(%x, %w) {lhs_contracting = [1], rhs_contracting = [0]}
  %bb = f32[N,6] broadcast_in_dim(%b) {dims = [1]}
  %s = f32[N,6] add(%p, %bb)
  %zz = f32[N,6] broadcast_in_dim(%zero) {dims = []}
  %h = f32[N,6] max(%s, %zz)
  %q = f32[N,6] dot_general(%h, %w) {lhs_contracting = [1], rhs_contracting = [0]}
  %y = f32[N,6] add(%q, %x)
  return %y
}
)";
  auto exe = compileOver(kMlp, {{"N", {1, 64}}});
  ASSERT_TRUE(exe.isOk()) << exe.status().str();
  EXPECT_NE((*exe)->libraryCallDetails().find("oneDNN, made for each run's sizes"),
            std::string::npos)
      << (*exe)->libraryCallDetails();
  std::mt19937 rng(5);
  for (int64_t n : {64, 1, 7, 1})
    expectRunMatches(**exe, kMlp, {{"N", n}}, uniformInputs({{n, 6}}, rng), 1e-5);
  EXPECT_EQ((*exe)->recompiles(), 0);
}

// Products of one constant weight over symbolic rows (a model whose layers were copies of one
// layer, as nn.TransformerEncoder's start out) share one per-size kernel and one copy of its
// packed weights, as a static program's calls do: a copy per call read four times the weights
// per run. Compiled over N = 1..16, run at 16, 3 and 1 against the interpreter (tolerance 1e-5:
// f32 products of 6 terms in another order); the first call is not shared with the third,
// whose relu post-op differs.
TEST(SymbolicKernels, ProductsOfOneWeightShareTheirPerSizeKernel) {
  constexpr const char* kShared = R"(
func @main(%x: f32[N,6]) -> (f32[N,6]) {
  %w = f32[6,6] constant() {value = [0.5, -0.25, 0.125, 1.0, -1.0, 0.75, 0.2, 0.3, -0.4, 0.5, -0.6, 0.7, -0.8, 0.9, 1.0, -1.1, 1.2, -1.3, 0.05, 0.15, -0.25, 0.35, -0.45, 0.55, 1.5, -0.5, 0.25, -0.125, 0.0625, 0.3, -0.7, 0.6, -0.5, 0.4, -0.3, 0.2]}
  %zero = f32[] constant() {value = [0.0]}
  %p = f32[N,6] dot_general(%x, %w) {lhs_contracting = [1], rhs_contracting = [0]}
  %t = f32[N,6] tanh(%p)
  %q = f32[N,6] dot_general(%t, %w) {lhs_contracting = [1], rhs_contracting = [0]}
  %u = f32[N,6] tanh(%q)
  %r = f32[N,6] dot_general(%u, %w) {lhs_contracting = [1], rhs_contracting = [0]}
  %zz = f32[N,6] broadcast_in_dim(%zero) {dims = []}
  %y = f32[N,6] max(%r, %zz)
  return %y
}
)";
  auto exe = compileOver(kShared, {{"N", {1, 16}}});
  ASSERT_TRUE(exe.isOk()) << exe.status().str();
  const std::string calls = (*exe)->libraryCallDetails();
  size_t shares = 0;
  for (size_t at = calls.find("; shares "); at != std::string::npos;
       at = calls.find("; shares ", at + 1))
    ++shares;
  EXPECT_EQ(shares, 1u) << calls;
  std::mt19937 rng(9);
  for (int64_t n : {16, 3, 1})
    expectRunMatches(**exe, kShared, {{"N", n}}, uniformInputs({{n, 6}}, rng), 1e-5);
  EXPECT_EQ((*exe)->recompiles(), 0);
}

// An op a program over ranges cannot compute (cumsum's opaque kernel needs static sizes) makes
// the compile over N = 1..16 compile each size instead, saying why: the executable is compiled
// at N = 1, runs at 5 and 16 compile once each (5 again reuses its compile) and match the
// interpreter (tolerance 1e-6: cumsum sums in f64 as the reference does, then tanh), none
// counts as a recompile, and 17 (outside) does. With recompiling off the compile is refused
// with the op and the reason.
TEST(SymbolicKernels, OpsNotOverSymbolsCompileEachSize) {
  constexpr const char* kCumsum = R"(
func @main(%x: f32[N,8]) -> (f32[N,8]) {
  %c = f32[N,8] cumsum(%x) {axis = 1, exclusive = false, reverse = false}
  %t = f32[N,8] tanh(%c)
  return %t
}
)";
  testing::internal::CaptureStderr();
  auto exe = compileOver(kCumsum, {{"N", {1, 16}}});
  std::string log = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(exe.isOk()) << exe.status().str();
  EXPECT_NE(
      log.find("cannot be compiled over its ranges (kernel k0_opaque: %c = cumsum in an "
               "opaque kernel: lowering it with sizes known only at run time is not "
               "supported yet): compiling each run's sizes instead, once each (N=1..16:each)"),
      std::string::npos)
      << log;
  ASSERT_EQ((*exe)->guards().dims.size(), 1u);
  EXPECT_EQ((*exe)->guards().dims[0].range->str(), "1..16:each");
  std::mt19937 rng(13);
  testing::internal::CaptureStderr();
  for (int64_t n : {1, 5, 16, 5})
    expectRunMatches(**exe, kCumsum, {{"N", n}}, uniformInputs({{n, 8}}, rng), 1e-6);
  log = testing::internal::GetCapturedStderr();
  size_t compiles = 0;
  for (size_t at = log.find("kiln: compiling"); at != std::string::npos;
       at = log.find("kiln: compiling", at + 1))
    ++compiles;
  EXPECT_EQ(compiles, 2u) << log;  // 5 and 16
  EXPECT_EQ((*exe)->recompiles(), 0) << log;
  EXPECT_NE(log.find("N=5, the bucket of N=5 in N=1..16:each"), std::string::npos) << log;
  expectRunMatches(**exe, kCumsum, {{"N", 17}}, uniformInputs({{17, 8}}, rng), 1e-6);
  EXPECT_EQ((*exe)->recompiles(), 1);

  auto strict = compileOver(kCumsum, {{"N", {1, 16}}}, /*recompile=*/false);
  ASSERT_FALSE(strict.isOk());
  EXPECT_NE(strict.status().str().find("cumsum in an opaque kernel: lowering it with sizes "
                                       "known only at run time is not supported yet"),
            std::string::npos)
      << strict.status().str();
}

// Reductions over symbolic dims: a column sum and a softmax, log_softmax and layer norm along a
// symbolic axis (rows of S elements), compiled over S = 1..40 and run at 1, 9 and 40 against
// the interpreter. Tolerance 1e-5: f32 sums of at most 40 values in [-2, 2] in another order.
TEST(SymbolicKernels, ReductionsOverSymbolicDims) {
  constexpr const char* kAxes = R"(
func @main(%x: f32[S,8], %y: f32[4,S], %g: f32[S]) -> (f32[8], f32[S,8], f32[4,S], f32[4,S]) {
  %c = f32[8] reduce(%x) {dims = [0], kind = sum}
  %p = f32[S,8] softmax(%x) {axis = 0}
  %l = f32[4,S] log_softmax(%y) {axis = 1}
  %n = f32[4,S] layer_norm(%y, %g) {axis = 1}
  return %c, %p, %l, %n
}
)";
  auto exe = compileOver(kAxes, {{"S", {1, 40}}});
  ASSERT_TRUE(exe.isOk()) << exe.status().str();
  std::mt19937 rng(13);
  for (int64_t n : {40, 1, 9})
    expectRunMatches(**exe, kAxes, {{"S", n}}, uniformInputs({{n, 8}, {4, n}, {n}}, rng), 1e-5);
  EXPECT_EQ((*exe)->recompiles(), 0);
}

// Convolutions of a symbolic batch, one executable over N = 1..8 run at 1, 4, 2 and 4 again: each
// size's oneDNN kernel takes the weights of an earlier size's kernel where it lays them out
// alike (per_shape_calls.h), and every run agrees with the interpreter; then two host threads
// run a fresh executable at once at batches 3 and 7. Tolerance 1e-4: sums of
// 3 * 3 * 16 f32 products of values in [-2, 2] and weights in [-0.5, 0.5] (Winograd or direct).
TEST(SymbolicKernels, ConvolutionsMadeForEachBatch) {
  std::string w = "[";
  for (int i = 0; i < 3 * 3 * 16 * 16; ++i)
    w += (i ? ", " : "") + std::to_string(((i * 37) % 101) / 100.0 - 0.5);
  w += "]";
  const std::string text = R"(
func @main(%x: f32[N,12,12,16]) -> (f32[N,12,12,16]) {
  %w = f32[3,3,16,16] constant() {value = )" +
                           w + R"(}
  %y = f32[N,12,12,16] convolution(%x, %w) {padding_low = [1, 1], padding_high = [1, 1], dimension_numbers = "b01f_01io->b01f"}
  return %y
}
)";
  auto exe = compileOver(text, {{"N", {1, 8}}});
  ASSERT_TRUE(exe.isOk()) << exe.status().str();
  std::mt19937 rng(17);
  for (int64_t n : {1, 4, 2, 4})
    expectRunMatches(**exe, text, {{"N", n}}, uniformInputs({{n, 12, 12, 16}}, rng), 1e-4);
  EXPECT_EQ((*exe)->recompiles(), 0);

  // Two host threads at once, at different batches (each run binds its own sizes; the first run
  // of a size makes its kernels under the call's lock).
  auto fresh = compileOver(text, {{"N", {1, 8}}});
  ASSERT_TRUE(fresh.isOk()) << fresh.status().str();
  std::vector<std::vector<Tensor>> inputs;
  std::vector<Tensor> want;
  for (int64_t n : {3, 7}) {
    inputs.push_back(uniformInputs({{n, 12, 12, 16}}, rng));
    want.push_back(reference(text, {{"N", n}}, inputs.back())[0]);
  }
  std::vector<std::string> errors;
  std::vector<Tensor> got = runtime::runOnTwoHostThreads(**fresh, inputs, errors);
  for (size_t t = 0; t < 2; ++t) {
    ASSERT_EQ(errors[t], "") << "thread " << t;
    expectClose({got[t]}, {want[t]}, 1e-4, "thread " + std::to_string(t));
  }
  EXPECT_EQ((*fresh)->recompiles(), 0);
}

TEST(SymbolicKernels, BadSymbolsAreErrors) {
  auto errorOf = [](const char* text) -> std::string {
    auto ks = kernel::parseKernels(text, "k.txt");
    if (!ks.isOk()) return ks.status().str();
    Status v = kernel::verifyKernel((*ks)[0]);
    return v.isOk() ? "" : v.str();
  };
  // An undeclared symbol in a dim.
  EXPECT_NE(errorOf("kernel k(in %x: f32[M]) { }").find("a symbol declared before it"),
            std::string::npos);
  // An empty range.
  EXPECT_NE(errorOf("kernel k(sym N in [5, 2], in %x: f32[N]) { }").find("empty or negative range"),
            std::string::npos);
  // A symbol read in an index that the kernel does not declare.
  EXPECT_NE(errorOf("kernel k(sym N in [1, 4], out %y: f32[N]) {\n"
                    "  serial for i0 in [0, N) {\n    %y[i0 + M] = 1.0\n  }\n}\n")
                .find("variable M is not the variable of an enclosing loop or a symbol"),
            std::string::npos);

  // A function whose symbol has no range (or size) does not lower.
  auto m = parseModule(kModule, "symbolic.kir");
  ASSERT_TRUE(m.isOk());
  auto none = lowerForCpu(*(*m)->entry(), runtime::CompileOptions());
  ASSERT_FALSE(none.isOk());
  EXPECT_NE(none.status().str().find("give the sizes of its symbolic dimensions"),
            std::string::npos);
  // An op that does not lower over symbols yet names itself.
  auto r = parseModule(R"(
func @main(%x: f32[N,16]) -> (f32[N,16]) {
  %s = f32[N,16] cumsum(%x) {axis = 0}
  return %s
}
)",
                       "cumsum.kir");
  ASSERT_TRUE(r.isOk()) << r.status().str();
  runtime::CompileOptions options;
  options.ranges = {{"N", {1, 8}}};
  auto reduced = lowerForCpu(*(*r)->entry(), options);
  ASSERT_FALSE(reduced.isOk());
  EXPECT_NE(reduced.status().str().find("%s = cumsum in an opaque kernel: lowering it with sizes "
                                        "known only at run time is not supported yet"),
            std::string::npos)
      << reduced.status().str();
}

}  // namespace
}  // namespace kiln
