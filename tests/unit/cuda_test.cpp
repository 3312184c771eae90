// The cuda target. Without a GPU (CI): the GPU schedule's structure, and every kernel of the op
// table's test module printed as CUDA C++ and compiled by NVRTC for sm_90. With one (the tests
// named CudaDevice.*, scripts/test-gpu.sh): programs run and match the interpreter; without one
// they are skipped, saying why.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <thread>

#include "all_ops_module.h"
#include "codegen/cuda/conv.h"
#include "codegen/cuda/cublaslt.h"
#include "codegen/cuda/cuda_source.h"
#include "codegen/cuda/driver.h"
#include "codegen/cuda/gemm.h"
#include "codegen/cuda/nvrtc.h"
#include "compiler/compile.h"
#include "compiler/stored_kernels.h"
#include "cuda_test_util.h"
#include "fusion/fusion.h"
#include "interp/interpreter.h"
#include "ir/text/text.h"
#include "kernel/expand_calls.h"
#include "kernel/gpu_schedule.h"
#include "kernel/lower.h"
#include "kernel/schedule.h"
#include "kernel/verify.h"
#include "passes/pass_manager.h"
#include "passes/specialize_shapes.h"
#include "runtime/executable.h"
#include "special_values.h"

namespace kiln {
namespace {

std::vector<kernel::Kernel> lowerText(const std::string& text, const SymbolBindings& dims = {}) {
  auto module = parseModule(text, "t.kir");
  EXPECT_TRUE(module.isOk()) << module.status().str();
  if (!module) return {};
  PassManager pm;
  if (!dims.empty()) {
    EXPECT_TRUE(pm.runPass(*makeSpecializeShapesPass(dims), **module).isOk());
  }
  std::vector<kernel::Kernel> out;
  for (const auto& f : (*module)->functions()) {
    if (firstStringNode(*f)) continue;  // text has no kernel IR (only the interpreter runs it)
    auto kernels = kernel::lowerPlan(*f, fusion::planFusion(*f));
    EXPECT_TRUE(kernels.isOk()) << kernels.status().str();
    if (kernels) out.insert(out.end(), kernels->begin(), kernels->end());
  }
  return out;
}

// The cuda target's schedule (codegen/cuda/cuda_target.cpp) with `threads` per block.
std::vector<kernel::Kernel> scheduleForGpu(std::vector<kernel::Kernel> ks, int64_t threads) {
  for (kernel::Kernel& k : ks) {
    auto expanded = kernel::expandCalls(k);
    EXPECT_TRUE(expanded.isOk()) << expanded.status().str();
    if (expanded) k = *expanded;
    k = kernel::lowerReductions(kernel::mapToGpu(k, threads));
    EXPECT_TRUE(kernel::verifyKernel(k).isOk()) << kernel::verifyKernel(k).str();
  }
  return ks;
}

TEST(GpuSchedule, FlattensTheNestIntoTheGridWithAGuard) {
  auto ks = lowerText(R"(func @main(%x: f32[3,100]) -> (f32[3,100]) {
  %y = f32[3,100] exp(%x)
  return %y
})");
  ASSERT_EQ(ks.size(), 1u);
  std::string text = kernel::printKernel(scheduleForGpu(ks, 256)[0]);
  // 300 iterations: 2 blocks of 256 threads, the last 212 threads guarded off.
  EXPECT_NE(text.find("gpu_block for blk0 in [0, 2)"), std::string::npos) << text;
  EXPECT_NE(text.find("gpu_thread for thr0 in [0, 256)"), std::string::npos) << text;
  EXPECT_NE(text.find("if (blk0 * 256 + thr0 < 300)"), std::string::npos) << text;
  EXPECT_EQ(text.find("serial for"), std::string::npos) << text;
}

TEST(GpuSchedule, ExactGridHasNoGuardAndSmallNestsOneBlock) {
  auto ks = lowerText(R"(func @main(%x: f32[4,8]) -> (f32[4,8]) {
  %y = f32[4,8] tanh(%x)
  return %y
})");
  std::string text = kernel::printKernel(scheduleForGpu(ks, 256)[0]);
  EXPECT_NE(text.find("gpu_block for blk0 in [0, 1)"), std::string::npos) << text;
  EXPECT_NE(text.find("gpu_thread for thr0 in [0, 32)"), std::string::npos) << text;
  EXPECT_EQ(text.find("if ("), std::string::npos) << text;
}

TEST(GpuSchedule, ScratchAroundTheLaunchesBecomesATempAndStaysSerial) {
  // A reduction over the outer dim keeps a row of accumulators around three nests: each nest is
  // a launch, the row a temp buffer, and the nests that update it run on one thread.
  auto ks = lowerText(R"(func @main(%x: f32[4,16]) -> (f32[16]) {
  %s = f32[16] reduce(%x) {dims = [0], kind = sum}
  return %s
})");
  kernel::Kernel k = scheduleForGpu(ks, 256)[0];
  ASSERT_FALSE(k.buffers.empty());
  EXPECT_EQ(k.buffers.back().role, kernel::BufferRole::Temp);
  EXPECT_EQ(kernel::gpuLaunches(k).size(), 3u);
  auto source = codegen::cuda::emitCuda({k});
  ASSERT_TRUE(source.isOk()) << source.status().str();
  ASSERT_EQ(source->launches[0].size(), 3u);
  EXPECT_EQ(source->launches[0][0].block, 1);   // zeroing the row writes the scratch
  EXPECT_EQ(source->launches[0][1].block, 1);   // the accumulation
  EXPECT_EQ(source->launches[0][2].block, 16);  // the store of the row only reads it
}

TEST(GpuSchedule, LongRowsRunARowPerBlockWithWarpShufflesThroughSharedMemory) {
  // 1000-element rows: 64 blocks of 256 threads, each thread a strided part of the row, then
  // two rounds of shuffles through a shared slot per warp (8 warps); the whole-tensor sum is
  // one block.
  auto ks = lowerText(R"(func @main(%x: f32[64,1000]) -> (f32[64,1000], f32[]) {
  %z = f32[64,1000] softmax(%x) {axis = 1}
  %t = f32[] reduce(%x) {dims = [0, 1], kind = sum}
  return %z, %t
})");
  ASSERT_EQ(ks.size(), 2u);
  ks = scheduleForGpu(ks, 256);
  std::string softmax = kernel::printKernel(ks[0]);
  EXPECT_NE(softmax.find("gpu_block for blk0 in [0, 64)"), std::string::npos) << softmax;
  EXPECT_NE(softmax.find("gpu_thread for thr0 in [0, 256)"), std::string::npos) << softmax;
  EXPECT_NE(softmax.find("shared %tree0: f32[8]"), std::string::npos) << softmax;
  EXPECT_NE(softmax.find("%x[blk0 * 1000 + (q0 * 256 + thr0)]"), std::string::npos) << softmax;
  EXPECT_NE(softmax.find("warp_max(select(thr0 % 32 < 8, %tree0[min(thr0 % 32, 7)], -inf))"),
            std::string::npos)
      << softmax;
  auto source = codegen::cuda::emitCuda(ks);
  ASSERT_TRUE(source.isOk()) << source.status().str();
  ASSERT_EQ(source->launches[1].size(), 1u);
  EXPECT_EQ(source->launches[1][0].grid, 1);
  EXPECT_EQ(source->launches[1][0].block, 256);
  // Without reassociation a float sum keeps its order: a row per thread.
  auto inOrder = lowerText(R"(func @main(%x: f32[64,1000]) -> (f32[64]) {
  %m = f32[64] reduce(%x) {dims = [1], kind = sum}
  return %m
})");
  std::string text = kernel::printKernel(kernel::mapToGpu(inOrder[0], 256, false));
  EXPECT_EQ(text.find("shared"), std::string::npos) << text;
}

TEST(CudaSource, EveryKernelOfTheOpTableModuleCompilesForSm90) {
  std::ifstream in(std::string(KILN_SOURCE_DIR) + "/tests/lit/Inputs/all-ops.kir");
  std::stringstream text;
  text << in.rdbuf();
  auto ks = scheduleForGpu(lowerText(text.str(), {{"N", 3}, {"B", 2}, {"S", 40}}), 256);
  ASSERT_GE(ks.size(), 20u);
  auto source = codegen::cuda::emitCuda(ks);
  ASSERT_TRUE(source.isOk()) << source.status().str();
  auto cubin = codegen::cuda::compileCuda(source->source, "all-ops.cu", "sm_90");
  ASSERT_TRUE(cubin.isOk()) << cubin.status().str();
  EXPECT_GT(cubin->cubin.size(), 1000u);
  EXPECT_EQ(cubin->arch, "sm_90");
}

// The scheduled kernels of every function of the op table's module, stored as an artifact stores
// them and loaded back (compiler/stored_kernels.h), print the same CUDA source: a cuda artifact
// loads its kernel IR instead of lowering again, and the load checks the source's hash.
TEST(CudaSource, StoredKernelIRPrintsTheSameSource) {
  std::unique_ptr<Module> module = allOpsModule({{"N", 3}, {"B", 2}, {"S", 40}});
  ASSERT_NE(module, nullptr);
  int functions = 0;
  for (const auto& f : module->functions()) {
    if (firstStringNode(*f)) continue;  // text has no kernel IR
    auto lowered = kernel::lowerPlan(*f, fusion::planFusion(*f));
    ASSERT_TRUE(lowered.isOk()) << lowered.status().str();
    std::vector<kernel::Kernel> ks = scheduleForGpu(*lowered, 256);
    compiler::StoredProgram stored = compiler::storeKernels(ks, *f);
    auto loaded = compiler::loadKernels(stored.ir, stored.values, *f, "a.kiln");
    ASSERT_TRUE(loaded.isOk()) << loaded.status().str();
    auto want = codegen::cuda::emitCuda(ks), got = codegen::cuda::emitCuda(*loaded);
    ASSERT_TRUE(want.isOk() && got.isOk());
    EXPECT_EQ(got->source, want->source) << f->name();
    ++functions;
  }
  EXPECT_GE(functions, 10);
  // The cuda target's own schedule, with its library calls (cuDNN, cuBLASLt) and their post-ops.
  auto cuda = runtime::findTarget("cuda");
  ASSERT_TRUE(cuda.isOk()) << cuda.status().str();
  auto conv = parseModule(R"(
func @main(%x: f32[2,8,8,16], %w: f32[3,3,16,16], %m: f32[16,32]) -> (f32[2,8,8,32]) {
  %c = f32[2,8,8,16] convolution(%x, %w) {padding_low = [1, 1], padding_high = [1, 1], dimension_numbers = "b01f_01io->b01f"}
  %r = f32[2,8,8,16] tanh(%c)
  %p = f32[2,8,8,32] dot_general(%r, %m) {lhs_contracting = [3], rhs_contracting = [0]}
  %s = f32[2,8,8,32] softmax(%p) {axis = 3}
  return %s
})",
                          "conv.kir");
  ASSERT_TRUE(conv.isOk()) << conv.status().str();
  runtime::CompileOptions o;
  o.backend = "cuda";
  o.cudaArch = "sm_90";
  auto c = compiler::compile(std::move(*conv), **cuda, o, compiler::Stage::Lowered);
  ASSERT_TRUE(c.isOk()) << c.status().str();
  compiler::StoredProgram stored = compiler::storeKernels(c->kernels, *c->module->entry());
  auto loaded = compiler::loadKernels(stored.ir, stored.values, *c->module->entry(), "a.kiln");
  ASSERT_TRUE(loaded.isOk()) << loaded.status().str();
  size_t calls = 0;
  for (const kernel::Kernel& k : *loaded) calls += kernel::callsOf(k).size();
  EXPECT_EQ(calls, 2u);  // the convolution and the product
  auto want = codegen::cuda::emitCuda(c->kernels), got = codegen::cuda::emitCuda(*loaded);
  ASSERT_TRUE(want.isOk() && got.isOk());
  EXPECT_EQ(got->source, want->source);
  EXPECT_EQ(compiler::storeKernels(*loaded, *c->module->entry()).ir, stored.ir);
}

// The GEMM shape of the one dot_general call of `text`'s first kernel, or why there is none.
std::string gemmOf(const std::string& text) {
  auto ks = lowerText(text);
  if (ks.empty() || kernel::callsOf(ks[0]).empty()) return "no call";
  std::string why;
  auto g = codegen::cuda::gemmShape(ks[0], *kernel::callsOf(ks[0])[0], &why);
  return g ? g->str() : "refused: " + why;
}

// cuBLASLt is not linked (its pages would be resident in every process): the library and each
// function the products use load on the first product. Without a GPU the product then fails at
// its handle or its heuristic, which need a device, and says so.
TEST(CudaGemm, CublasLtLoadsOnFirstUse) {
  codegen::cuda::GemmShape g;
  g.m = g.n = g.k = 64;
  auto made = codegen::cuda::Gemm::create(g);
  if (made.isOk()) return;  // a GPU: the product was made
  const std::string& m = made.status().message();
  EXPECT_EQ(m.rfind("cuBLASLt: ", 0), 0u) << m;
  EXPECT_EQ(m.find("cannot load"), std::string::npos) << m;
  EXPECT_EQ(m.find("has no"), std::string::npos) << m;
}

TEST(CudaGemm, ShapesOfDotGeneralCalls) {
  EXPECT_EQ(gemmOf(R"(func @main(%a: f32[3,4,5], %b: f32[3,5,6]) -> (f32[3,4,6]) {
  %c = f32[3,4,6] dot_general(%a, %b) {lhs_batch = [0], rhs_batch = [0], lhs_contracting = [2], rhs_contracting = [1]}
  return %c
})"),
            "f32 3 x [4 x 5] . [5 x 6]");
  // Free dims flatten: [2, 8, 32] . [32, 16] is one [16 x 32] . [32 x 16] product.
  EXPECT_EQ(gemmOf(R"(func @main(%a: f32[2,8,32], %b: f32[32,16]) -> (f32[2,8,16]) {
  %c = f32[2,8,16] dot_general(%a, %b) {lhs_contracting = [2], rhs_contracting = [0]}
  return %c
})"),
            "f32 [16 x 32] . [32 x 16]");
  // q . k^T of attention: the rhs contracts its last dim.
  EXPECT_EQ(gemmOf(R"(func @main(%a: f32[4,7,8], %b: f32[4,9,8]) -> (f32[4,7,9]) {
  %c = f32[4,7,9] dot_general(%a, %b) {lhs_batch = [0], rhs_batch = [0], lhs_contracting = [2], rhs_contracting = [2]}
  return %c
})"),
            "f32 4 x [7 x 8] . [8 x 9]^T");
  EXPECT_EQ(gemmOf(R"(func @main(%a: f32[5,4], %b: f32[5,6]) -> (f32[4,6]) {
  %c = f32[4,6] dot_general(%a, %b) {lhs_contracting = [0], rhs_contracting = [0]}
  return %c
})"),
            "f32 [4 x 5]^T . [5 x 6]");
  EXPECT_EQ(gemmOf(R"(func @main(%a: f32[2,5,3], %b: f32[5,6]) -> (f32[2,3,6]) {
  %c = f32[2,3,6] dot_general(%a, %b) {lhs_contracting = [1], rhs_contracting = [0]}
  return %c
})"),
            "refused: free dims on both sides of the contracting dim");
  EXPECT_EQ(gemmOf(R"(func @main(%a: i32[4,5], %b: i32[5,6]) -> (i32[4,6]) {
  %c = i32[4,6] dot_general(%a, %b) {lhs_contracting = [1], rhs_contracting = [0]}
  return %c
})"),
            "refused: operands of i32 and i32 (cuBLASLt here takes f32, f16 and bf16)");
}

// The cuDNN shape of the one convolution call of `text`'s first kernel, or why there is none.
std::string convOf(const std::string& text) {
  auto ks = lowerText(text);
  if (ks.empty() || kernel::callsOf(ks[0]).empty()) return "no call";
  std::string why;
  auto c = codegen::cuda::convShape(ks[0], *kernel::callsOf(ks[0])[0], &why);
  return c ? c->str() : "refused: " + why;
}

TEST(CudaConv, ShapesOfConvolutionCalls) {
  EXPECT_EQ(convOf(R"(func @main(%x: f32[2,4,9,9], %w: f32[6,2,3,3]) -> (f32[2,6,5,5]) {
  %y = f32[2,6,5,5] convolution(%x, %w) {window_strides = [2, 2], padding_low = [1, 1], padding_high = [1, 1], feature_group_count = 2}
  return %y
})"),
            "f32 [2, 4, 9, 9] * [6, 2, 3, 3] stride 2, 2 pad 1, 1 groups 2");
  // cuDNN's NHWC: OHWI kernels.
  EXPECT_EQ(convOf(R"(func @main(%x: f16[1,8,8,4], %w: f16[5,3,3,4]) -> (f16[1,6,6,5]) {
  %y = f16[1,6,6,5] convolution(%x, %w) {dimension_numbers = "b01f_o01i->b01f"}
  return %y
})"),
            "f16 NHWC [1, 4, 8, 8] * [5, 4, 3, 3]");
  // A 1-D convolution is a 2-D one of height 1.
  EXPECT_EQ(convOf(R"(func @main(%x: f32[1,2,20], %w: f32[3,2,3]) -> (f32[1,3,16]) {
  %y = f32[1,3,16] convolution(%x, %w) {rhs_dilation = [2]}
  return %y
})"),
            "f32 [1, 2, 1, 20] * [3, 2, 1, 3] dilation 1, 2");
  EXPECT_EQ(convOf(R"(func @main(%x: f32[1,2,5,5], %w: f32[3,2,3,3]) -> (f32[1,3,9,9]) {
  %y = f32[1,3,9,9] convolution(%x, %w) {lhs_dilation = [2, 2], padding_low = [1, 1], padding_high = [1, 1]}
  return %y
})"),
            "refused: lhs dilation (a transposed convolution)");
  EXPECT_EQ(convOf(R"(func @main(%x: f32[1,2,5,5], %w: f32[3,2,2,2]) -> (f32[1,3,5,5]) {
  %y = f32[1,3,5,5] convolution(%x, %w) {padding_low = [0, 0], padding_high = [1, 1]}
  return %y
})"),
            "refused: padding that differs between the two sides of a dim");
  // The CPU's NHWC with HWIO kernels is not a cuDNN layout.
  EXPECT_EQ(convOf(R"(func @main(%x: f32[1,8,8,4], %w: f32[3,3,4,5]) -> (f32[1,6,6,5]) {
  %y = f32[1,6,6,5] convolution(%x, %w) {dimension_numbers = "b01f_01io->b01f"}
  return %y
})"),
            "refused: dimension numbers other than bf01_oi01->bf01 and b01f_o01i->b01f");
}

TEST(CudaSource, CodeRecordsItsToolkitAndOlderDriversAreRefused) {
  auto cubin = codegen::cuda::compileCuda("extern \"C\" __global__ void f() {}", "f.cu", "sm_90");
  ASSERT_TRUE(cubin.isOk()) << cubin.status().str();
  EXPECT_GE(cubin->cudaVersion, 12000);  // this toolkit's NVRTC: CUDA 12 or newer
  EXPECT_TRUE(codegen::cuda::checkDriverFor(*cubin, cubin->cudaVersion).isOk());
  codegen::cuda::CompiledModule code;
  code.cudaVersion = 13000;
  Status old = codegen::cuda::checkDriverFor(code, 12040);
  ASSERT_FALSE(old.isOk());
  EXPECT_NE(old.message().find("compiled by NVRTC 13.0, this GPU's driver supports CUDA 12.4"),
            std::string::npos)
      << old.message();
}

TEST(CudaSource, BadArchitectureIsAnError) {
  auto cubin = codegen::cuda::compileCuda("extern \"C\" __global__ void f() {}", "f.cu", "x86");
  ASSERT_FALSE(cubin.isOk());
  EXPECT_NE(cubin.status().message().find("'x86' is not a GPU architecture"), std::string::npos);
}

// ---- on a GPU ----

constexpr const char* kMixed =
    R"(func @main(%x: f32[8,32], %w: f32[32,16]) -> (f32[8,16], f32[8,32], f32[32]) {
  %m = f32[8,16] dot_general(%x, %w) {lhs_contracting = [1], rhs_contracting = [0]}
  %s = f32[8,32] softmax(%x) {axis = 1}
  %r = f32[32] reduce(%x) {dims = [0], kind = max}
  return %m, %s, %r
})";

std::vector<Tensor> mixedInputs() {
  Tensor x(DType::F32, {8, 32}), w(DType::F32, {32, 16});
  for (int64_t i = 0; i < x.numElements(); ++i) x.setDouble(i, std::sin(0.37 * double(i)));
  for (int64_t i = 0; i < w.numElements(); ++i) w.setDouble(i, std::cos(0.11 * double(i)));
  return {x, w};
}

// Relative to the output's largest magnitude: f32 math functions on the GPU differ from the
// interpreter's (double libm) by a few ulp; 1e-5 is far above that and far below any wrong index.
void expectClose(const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t o = 0; o < got.size(); ++o) {
    ASSERT_EQ(got[o].numElements(), want[o].numElements());
    double scale = 0;
    for (int64_t i = 0; i < want[o].numElements(); ++i)
      scale = std::max(scale, std::abs(want[o].getDouble(i)));
    for (int64_t i = 0; i < want[o].numElements(); ++i)
      ASSERT_NEAR(got[o].getDouble(i), want[o].getDouble(i), 1e-5 * scale) << o << " " << i;
  }
}

std::unique_ptr<runtime::Executable> compileMixed() {
  auto module = parseModule(kMixed, "mixed.kir");
  EXPECT_TRUE(module.isOk()) << module.status().str();
  runtime::CompileOptions o;
  o.backend = "cuda";
  auto exe = runtime::Executable::compile(std::move(*module), o);
  EXPECT_TRUE(exe.isOk()) << exe.status().str();
  return exe ? std::move(*exe) : nullptr;
}

std::vector<Tensor> interpretMixed() {
  auto module = parseModule(kMixed, "mixed.kir");
  auto want = interpret(*(*module)->entry(), mixedInputs());
  EXPECT_TRUE(want.isOk()) << want.status().str();
  return want ? *want : std::vector<Tensor>{};
}

TEST(CudaDevice, RunsAndMatchesTheInterpreter) {
  KILN_REQUIRE_GPU();
  auto exe = compileMixed();
  ASSERT_TRUE(exe);
  auto got = exe->run(mixedInputs());
  ASSERT_TRUE(got.isOk()) << got.status().str();
  expectClose(*got, interpretMixed());
  // Later runs reuse the first's device memory and stream; the second captures the launches
  // into a CUDA graph, the third and fourth replay it.
  for (int run = 1; run < 4; ++run) {
    auto again = exe->run(mixedInputs());
    ASSERT_TRUE(again.isOk()) << again.status().str();
    expectClose(*again, interpretMixed());
  }
}

TEST(CudaDevice, FourThreadsRunOneExecutable) {
  KILN_REQUIRE_GPU();
  auto exe = compileMixed();
  ASSERT_TRUE(exe);
  std::vector<Tensor> want = interpretMixed();
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        auto got = exe->run(mixedInputs());
        if (!got) return;
        for (int64_t e = 0; e < want[0].numElements(); ++e)
          if (std::abs((*got)[0].getDouble(e) - want[0].getDouble(e)) > 1e-3) return;
      }
      ok[t] = 1;
    });
  for (std::thread& t : threads) t.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(ok[t], 1) << "thread " << t;
}

TEST(CudaDevice, ArtifactLoadsAndRuns) {
  KILN_REQUIRE_GPU();
  auto exe = compileMixed();
  ASSERT_TRUE(exe);
  auto loaded = runtime::Executable::load(exe->serialize(), "mixed.kiln");
  ASSERT_TRUE(loaded.isOk()) << loaded.status().str();
  auto got = (*loaded)->run(mixedInputs());
  ASSERT_TRUE(got.isOk()) << got.status().str();
  expectClose(*got, interpretMixed());
}

TEST(CudaDevice, ArtifactForAnotherArchitectureIsRefused) {
  KILN_REQUIRE_GPU();
  auto module = parseModule(kMixed, "mixed.kir");
  ASSERT_TRUE(module.isOk());
  runtime::CompileOptions o;
  o.backend = "cuda";
  o.cudaArch = "sm_80";
  auto exe = runtime::Executable::compile(std::move(*module), o);
  ASSERT_TRUE(exe.isOk()) << exe.status().str();
  auto got = (*exe)->run(mixedInputs());
  ASSERT_FALSE(got.isOk());
  EXPECT_NE(got.status().message().find("compiled for sm_80"), std::string::npos)
      << got.status().message();
}

// Convolutions with a bias and relu after them (cuDNN's fused call in f32 and f16, a loop nest
// after the call in bf16), one of them grouped and strided, one also adding a residual, and a
// dilated 1-D one with no epilogue, in every precision: cuDNN runs all three, NCHW in f32, NHWC
// otherwise. Tolerances relative to the output's largest magnitude: f32 on FMA units 1e-5
// (as above); tf32 and f16 round operands to 10 mantissa bits (2^-11 relative each, summed over
// up to 36 products) 1e-2; bf16 to 7 bits, 5e-2 (docs/gpu.md).
constexpr const char* kConvs =
    R"(func @main(%x: f32[2,4,9,9], %w: f32[6,2,3,3], %b: f32[6], %s: f32[1,2,20], %v: f32[3,2,3], %w3: f32[4,4,3,3], %b3: f32[4]) -> (f32[2,6,5,5], f32[1,3,16], f32[2,4,9,9]) {
  %c = f32[2,6,5,5] convolution(%x, %w) {window_strides = [2, 2], padding_low = [1, 1], padding_high = [1, 1], feature_group_count = 2}
  %bb = f32[2,6,5,5] broadcast_in_dim(%b) {dims = [1]}
  %a = f32[2,6,5,5] add(%c, %bb)
  %zero = f32[] constant() {value = [0.0]}
  %zb = f32[2,6,5,5] broadcast_in_dim(%zero) {dims = []}
  %r = f32[2,6,5,5] max(%a, %zb)
  %d = f32[1,3,16] convolution(%s, %v) {rhs_dilation = [2]}
  %c3 = f32[2,4,9,9] convolution(%x, %w3) {padding_low = [1, 1], padding_high = [1, 1]}
  %bb3 = f32[2,4,9,9] broadcast_in_dim(%b3) {dims = [1]}
  %a3 = f32[2,4,9,9] add(%c3, %bb3)
  %s3 = f32[2,4,9,9] add(%a3, %x)
  %zb3 = f32[2,4,9,9] broadcast_in_dim(%zero) {dims = []}
  %r3 = f32[2,4,9,9] max(%s3, %zb3)
  return %r, %d, %r3
})";

std::vector<Tensor> convInputs() {
  std::vector<Tensor> in = {Tensor(DType::F32, {2, 4, 9, 9}), Tensor(DType::F32, {6, 2, 3, 3}),
                            Tensor(DType::F32, {6}),          Tensor(DType::F32, {1, 2, 20}),
                            Tensor(DType::F32, {3, 2, 3}),    Tensor(DType::F32, {4, 4, 3, 3}),
                            Tensor(DType::F32, {4})};
  for (size_t t = 0; t < in.size(); ++t)
    for (int64_t i = 0; i < in[t].numElements(); ++i)
      in[t].setDouble(i, std::sin(0.37 * double(i) + double(t)));
  return in;
}

// `text` compiled for cuda in `precision` runs its library calls as `calls` says and matches the
// interpreter within `tolerance` of each output's largest magnitude, eager, captured and replayed.
void expectOnLibraries(const char* text, const std::vector<Tensor>& inputs, const char* precision,
                       double tolerance, const std::string& calls) {
  auto reference = parseModule(text, "libraries.kir");
  ASSERT_TRUE(reference.isOk()) << reference.status().str();
  auto want = interpret(*(*reference)->entry(), inputs);
  ASSERT_TRUE(want.isOk()) << want.status().str();
  auto module = parseModule(text, "libraries.kir");
  runtime::CompileOptions o;
  o.backend = "cuda";
  o.precision = precision;
  auto exe = runtime::Executable::compile(std::move(*module), o);
  ASSERT_TRUE(exe.isOk()) << exe.status().str();
  EXPECT_EQ((*exe)->libraryCalls(), calls);
  for (int run = 0; run < 3; ++run) {  // eager, captured into a CUDA graph, replayed
    auto got = (*exe)->run(inputs);
    ASSERT_TRUE(got.isOk()) << got.status().str();
    ASSERT_EQ(got->size(), want->size());
    for (size_t o = 0; o < got->size(); ++o) {
      double scale = 0, worst = 0;
      for (int64_t i = 0; i < (*want)[o].numElements(); ++i)
        scale = std::max(scale, std::abs((*want)[o].getDouble(i)));
      for (int64_t i = 0; i < (*want)[o].numElements(); ++i)
        worst = std::max(worst, std::abs((*got)[o].getDouble(i) - (*want)[o].getDouble(i)));
      EXPECT_LE(worst, tolerance * scale) << "run " << run << ", output " << o;
    }
  }
  // Each cuBLASLt call names its algorithm's pick (timed among the heuristic's candidates where
  // it offers several), and `kiln bench --roofline` times every call alone, bare and with its
  // epilogue, on one set of operands and on copies read from memory (sized by argBytes).
  const std::string details = (*exe)->libraryCallDetails();
  for (size_t at = details.find("cuBLASLt "); at != std::string::npos;
       at = details.find("cuBLASLt ", at + 1)) {
    const std::string line = details.substr(at, details.find('\n', at) - at);
    EXPECT_TRUE(line.find(" by time (") != std::string::npos ||
                line.find("the heuristic's first of ") != std::string::npos)
        << line;
  }
  auto ceilings = (*exe)->measureDevice(3, {});
  ASSERT_TRUE(ceilings.isOk()) << ceilings.status().str();
  ASSERT_TRUE(ceilings->has_value());
  const runtime::DeviceCeilings& c = **ceilings;
  ASSERT_EQ(c.aloneEpilogueMs.size(), c.aloneMs.size());
  ASSERT_EQ(c.aloneColdMs.size(), c.aloneMs.size());
  int timed = 0;
  for (size_t k = 0; k < c.aloneMs.size(); ++k) {
    EXPECT_EQ(c.aloneMs[k] > 0, c.aloneEpilogueMs[k] > 0) << "kernel " << k;
    EXPECT_EQ(c.aloneMs[k] > 0, c.aloneColdMs[k] > 0) << "kernel " << k;
    timed += c.aloneMs[k] > 0;
  }
  EXPECT_EQ(timed, calls.rfind("none", 0) == 0 ? 0 : std::stoi(calls));  // "3 cuDNN convolution"
}

void expectConvolutionsOnCudnn(const char* precision, double tolerance) {
  expectOnLibraries(kConvs, convInputs(), precision, tolerance, "3 cuDNN convolution");
}

TEST(CudaDevice, ConvolutionsOnCudnnF32) {
  KILN_REQUIRE_GPU();
  expectConvolutionsOnCudnn("f32", 1e-5);
}
TEST(CudaDevice, ConvolutionsOnCudnnTf32) {
  KILN_REQUIRE_GPU();
  expectConvolutionsOnCudnn("tf32", 1e-2);
}
TEST(CudaDevice, ConvolutionsOnCudnnF16) {
  KILN_REQUIRE_GPU();
  expectConvolutionsOnCudnn("f16", 1e-2);
}
TEST(CudaDevice, ConvolutionsOnCudnnBf16) {
  KILN_REQUIRE_GPU();
  expectConvolutionsOnCudnn("bf16", 5e-2);
}

// cuBLASLt's epilogues (gemm.h): bias, a residual read as C and relu on one product; bias and
// tanh gelu on a second; on a batched product a scale by a constant (alpha) and a bias shared by
// the batch, then an erf gelu that cuBLASLt does not take, which runs as a loop nest after the
// call.
constexpr const char* kProducts =
    R"(func @main(%x: f32[2,24,32], %w: f32[32,48], %b: f32[48], %r: f32[2,24,48], %w2: f32[48,40], %b2: f32[40], %c: f32[24]) -> (f32[2,24,48], f32[2,24,40], f32[2,24,24]) {
  %m = f32[2,24,48] dot_general(%x, %w) {lhs_contracting = [2], rhs_contracting = [0]}
  %bb = f32[2,24,48] broadcast_in_dim(%b) {dims = [2]}
  %a = f32[2,24,48] add(%m, %bb)
  %s = f32[2,24,48] add(%a, %r)
  %zero = f32[] constant() {value = [0.0]}
  %zb = f32[2,24,48] broadcast_in_dim(%zero) {dims = []}
  %y = f32[2,24,48] max(%s, %zb)
  %m2 = f32[2,24,40] dot_general(%y, %w2) {lhs_contracting = [2], rhs_contracting = [0]}
  %bb2 = f32[2,24,40] broadcast_in_dim(%b2) {dims = [2]}
  %a2 = f32[2,24,40] add(%m2, %bb2)
  %g = f32[2,24,40] gelu(%a2) {approximate = tanh}
  %p = f32[2,24,24] dot_general(%x, %x) {lhs_batch = [0], rhs_batch = [0], lhs_contracting = [2], rhs_contracting = [2]}
  %eighth = f32[] constant() {value = [0.125]}
  %eighth_b = f32[2,24,24] broadcast_in_dim(%eighth) {dims = []}
  %ps = f32[2,24,24] mul(%p, %eighth_b)
  %cb = f32[2,24,24] broadcast_in_dim(%c) {dims = [2]}
  %pc = f32[2,24,24] add(%ps, %cb)
  %e = f32[2,24,24] gelu(%pc)
  return %y, %g, %e
})";

std::vector<Tensor> productInputs() {
  std::vector<Tensor> in = {Tensor(DType::F32, {2, 24, 32}), Tensor(DType::F32, {32, 48}),
                            Tensor(DType::F32, {48}),        Tensor(DType::F32, {2, 24, 48}),
                            Tensor(DType::F32, {48, 40}),    Tensor(DType::F32, {40}),
                            Tensor(DType::F32, {24})};
  for (size_t t = 0; t < in.size(); ++t)
    for (int64_t i = 0; i < in[t].numElements(); ++i)
      in[t].setDouble(i, 0.5 * std::sin(0.37 * double(i) + double(t)));
  return in;
}

TEST(CudaDevice, ProductEpiloguesOnCublasLtF32) {
  KILN_REQUIRE_GPU();
  expectOnLibraries(kProducts, productInputs(), "f32", 1e-5, "3 cuBLASLt dot_general");
}
TEST(CudaDevice, ProductEpiloguesOnCublasLtF16) {
  KILN_REQUIRE_GPU();
  expectOnLibraries(kProducts, productInputs(), "f16", 1e-2, "3 cuBLASLt dot_general");
}
TEST(CudaDevice, ProductEpiloguesOnCublasLtBf16) {
  KILN_REQUIRE_GPU();
  expectOnLibraries(kProducts, productInputs(), "bf16", 5e-2, "3 cuBLASLt dot_general");
}

// Rows of accumulators in groups of lanes (reductionsPerOutput): a padded 3x3 max pool and a
// 2x2 average pool in NHWC, enough groups for lanes in every precision, and a global sum over the
// spatial dims with too few groups, a thread per output. The input is positive (1 +- 0.5), so
// that no sum cancels and each output's error stays near its precision's rounding.
constexpr const char* kPools =
    R"(func @main(%x: f32[2,64,64,128]) -> (f32[2,32,32,128], f32[2,32,32,128], f32[2,128]) {
  %m = f32[2,32,32,128] reduce_window(%x) {kind = max, window_dimensions = [1, 3, 3, 1], window_strides = [1, 2, 2, 1], padding_low = [0, 1, 1, 0], padding_high = [0, 1, 1, 0]}
  %s = f32[2,32,32,128] reduce_window(%x) {kind = sum, window_dimensions = [1, 2, 2, 1], window_strides = [1, 2, 2, 1], padding_low = [0, 0, 0, 0], padding_high = [0, 0, 0, 0]}
  %q = f32[] constant() {value = [0.25]}
  %qb = f32[2,32,32,128] broadcast_in_dim(%q) {dims = []}
  %a = f32[2,32,32,128] mul(%s, %qb)
  %g = f32[2,128] reduce(%x) {dims = [1, 2], kind = sum}
  return %m, %a, %g
})";

void expectPools(const char* precision, double tolerance) {
  std::vector<Tensor> in = {Tensor(DType::F32, {2, 64, 64, 128})};
  for (int64_t i = 0; i < in[0].numElements(); ++i)
    in[0].setDouble(i, 1.0 + 0.5 * std::sin(0.37 * double(i)));
  expectOnLibraries(kPools, in, precision, tolerance, "none (Kiln's own CUDA kernels)");
}

TEST(CudaDevice, PoolsInLanesF32) {
  KILN_REQUIRE_GPU();
  expectPools("f32", 1e-5);
}
TEST(CudaDevice, PoolsInLanesF16) {
  KILN_REQUIRE_GPU();
  expectPools("f16", 1e-2);
}

// max and min on the GPU (one PTX max.NaN/min.NaN from sm_80) give the interpreter's values bit
// for bit where it matters: a NaN operand gives NaN, -0 orders below +0, infinities; elementwise
// and as a row's reduction (warp shuffles).
constexpr const char* kMaxMin =
    R"(func @main(%x: f32[8,64], %y: f32[8,64]) -> (f32[8,64], f32[8,64], f32[8], f32[8]) {
  %mx = f32[8,64] max(%x, %y)
  %mn = f32[8,64] min(%x, %y)
  %rx = f32[8] reduce(%x) {dims = [1], kind = max}
  %rn = f32[8] reduce(%x) {dims = [1], kind = min}
  return %mx, %mn, %rx, %rn
})";

TEST(CudaDevice, MaxAndMinKeepNanAndTheSignOfZero) {
  KILN_REQUIRE_GPU();
  const double nan = std::nan(""), inf = INFINITY;
  const double special[] = {0.0, -0.0, nan, inf, -inf, 1.5, -1.5, 0.0};
  std::vector<Tensor> in = {Tensor(DType::F32, {8, 64}), Tensor(DType::F32, {8, 64})};
  for (int64_t i = 0; i < 8 * 64; ++i) {
    in[0].setDouble(i, special[i % 8]);
    in[1].setDouble(i, special[(i / 8) % 8]);  // every pair of the special values
  }
  // Rows whose max or min is a zero, whose sign must survive the reduction's tree: -0 over
  // -1.5, all -0, all +0; a NaN in row 3 only. (Not a row of both zeros: the interpreter's
  // reduce keeps the first of equal values, which no parallel order can match.)
  for (int64_t c = 0; c < 64; ++c) {
    const int64_t r = c % 4 == 0 ? 1 : 0;
    in[0].setDouble(0 * 64 + c, c % 2 ? -0.0 : -1.5);
    in[0].setDouble(1 * 64 + c, -0.0);
    in[0].setDouble(2 * 64 + c, 0.0);
    in[0].setDouble(3 * 64 + c, c == 37 ? nan : double(r));
  }
  auto module = parseModule(kMaxMin, "maxmin.kir");
  ASSERT_TRUE(module.isOk()) << module.status().str();
  auto want = interpret(*(*module)->entry(), in);
  ASSERT_TRUE(want.isOk()) << want.status().str();
  runtime::CompileOptions o;
  o.backend = "cuda";
  auto exe = runtime::Executable::compile(std::move(*module), o);
  ASSERT_TRUE(exe.isOk()) << exe.status().str();
  auto got = (*exe)->run(in);
  ASSERT_TRUE(got.isOk()) << got.status().str();
  expectSpecialValuesEqual(*got, *want, "cuda");
}

// A run whose memory does not fit on the device (a 256 GiB intermediate) fails with an error
// naming the size asked for and the memory free, every time, and nothing crashes.
TEST(CudaDevice, OutOfMemoryIsAClearError) {
  KILN_REQUIRE_GPU();
  auto module = parseModule(R"(func @main(%x: f32[262144], %w: f32[262144,1]) -> (f32[262144,1]) {
  %b = f32[262144,262144] broadcast_in_dim(%x) {dims = [1]}
  %y = f32[262144,1] dot_general(%b, %w) {lhs_contracting = [1], rhs_contracting = [0]}
  return %y
})",
                            "huge.kir");
  ASSERT_TRUE(module.isOk()) << module.status().str();
  runtime::CompileOptions o;
  o.backend = "cuda";
  auto exe = runtime::Executable::compile(std::move(*module), o);
  ASSERT_TRUE(exe.isOk()) << exe.status().str();
  std::vector<Tensor> in = {Tensor(DType::F32, {262144}), Tensor(DType::F32, {262144, 1})};
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto got = (*exe)->run(in);
    ASSERT_FALSE(got.isOk());
    const std::string& m = got.status().message();
    EXPECT_NE(m.find("allocating 2749"), std::string::npos) << m;  // 2^38 bytes and a little more
    EXPECT_NE(m.find("bytes free"), std::string::npos) << m;
  }
}

// Device memory the test owns, freed at the end.
struct DeviceBuffers {
  const codegen::cuda::Driver& drv;
  std::vector<codegen::cuda::DevicePtr> ptrs;
  ~DeviceBuffers() {
    for (codegen::cuda::DevicePtr p : ptrs) drv.free(p);
  }
  // `t` at `offset` bytes into fresh memory (an offset off 16 makes a misaligned tensor).
  runtime::DeviceTensor add(const Tensor& t, int64_t offset = 0) {
    auto p = drv.allocate(static_cast<int64_t>(t.byteSize()) + offset);
    EXPECT_TRUE(p.isOk()) << p.status().str();
    ptrs.push_back(*p);
    const codegen::cuda::DevicePtr at = *p + static_cast<codegen::cuda::DevicePtr>(offset);
    EXPECT_TRUE(drv.copyToDevice(at, t.bytes(), static_cast<int64_t>(t.byteSize()), nullptr));
    return {static_cast<uintptr_t>(at), t.type()};
  }
  Tensor read(const runtime::DeviceTensor& d) {
    Tensor t(d.type.dtype(), d.type.staticDims());
    EXPECT_TRUE(drv.copyToHost(t.mutableBytes(), static_cast<codegen::cuda::DevicePtr>(d.data),
                               static_cast<int64_t>(t.byteSize()), nullptr));
    return t;
  }
};

// Inputs and outputs in device memory (DLPack's CUDA tensors, kiln_run_device): read and
// written in place, ordered on the caller's stream (here the default stream), four runs;
// an output that is an input is copied into its tensor; a wrong output type is refused.
TEST(CudaDevice, RunsOnDevicePointers) {
  KILN_REQUIRE_GPU();
  const codegen::cuda::Driver& drv = **codegen::cuda::Driver::get();
  ASSERT_TRUE(drv.makeCurrent());
  auto exe = compileMixed();
  ASSERT_TRUE(exe);
  DeviceBuffers mem{drv, {}};
  std::vector<runtime::DeviceTensor> in, out;
  for (const Tensor& t : mixedInputs()) in.push_back(mem.add(t));
  const std::vector<Tensor> want = interpretMixed();
  for (const Tensor& t : want) out.push_back(mem.add(Tensor(t.dtype(), t.dims())));
  // Runs 1 to 3 on the same addresses: issued, captured into a graph, replayed; run 4 on other
  // output addresses issues its launches again.
  std::vector<runtime::DeviceTensor> other;
  for (const Tensor& t : want) other.push_back(mem.add(Tensor(t.dtype(), t.dims())));
  for (int run = 0; run < 4; ++run) {
    if (run == 3) out = other;
    Status ran = exe->runOnDevice(in, out, 0);
    ASSERT_TRUE(ran.isOk()) << ran.str();
    ASSERT_TRUE(drv.synchronize(nullptr));
    std::vector<Tensor> got;
    for (const runtime::DeviceTensor& d : out) got.push_back(mem.read(d));
    expectClose(got, want);
  }
  std::vector<runtime::DeviceTensor> wrong = out;
  wrong[0].type = TensorType::of(DType::F32, {8, 15});
  Status refused = exe->runOnDevice(in, wrong, 0);
  ASSERT_FALSE(refused.isOk());
  EXPECT_NE(refused.message().find("output 0"), std::string::npos) << refused.message();
  EXPECT_NE(refused.message().find("expected f32[8,16]"), std::string::npos) << refused.message();

  auto module = parseModule(R"(func @main(%x: f32[5]) -> (f32[5], f32[5]) {
  %y = f32[5] exp(%x)
  return %y, %x
})",
                            "passthrough.kir");
  ASSERT_TRUE(module.isOk()) << module.status().str();
  runtime::CompileOptions o;
  o.backend = "cuda";
  auto pass = runtime::Executable::compile(std::move(*module), o);
  ASSERT_TRUE(pass.isOk()) << pass.status().str();
  Tensor x(DType::F32, {5});
  for (int64_t i = 0; i < 5; ++i) x.setDouble(i, 0.5 * double(i) - 1);
  std::vector<runtime::DeviceTensor> pin = {mem.add(x)}, pout = {mem.add(Tensor(DType::F32, {5})),
                                                                 mem.add(Tensor(DType::F32, {5}))};
  ASSERT_TRUE((*pass)->runOnDevice(pin, pout, 0).isOk());
  ASSERT_TRUE(drv.synchronize(nullptr));
  Tensor y = mem.read(pout[0]), same = mem.read(pout[1]);
  for (int64_t i = 0; i < 5; ++i) {
    EXPECT_NEAR(y.getDouble(i), std::exp(x.getDouble(i)), 1e-6) << i;
    EXPECT_EQ(same.getDouble(i), x.getDouble(i)) << i;
  }
}

// A caller's tensors 4 bytes off the alignment the kernels' 16-byte accesses and cuBLASLt
// assume run through the run memory's own slots: the results are right, in the caller's
// tensors, on every run (the second and third replay a graph).
TEST(CudaDevice, RunsOnMisalignedDevicePointers) {
  KILN_REQUIRE_GPU();
  const codegen::cuda::Driver& drv = **codegen::cuda::Driver::get();
  ASSERT_TRUE(drv.makeCurrent());
  auto module =
      parseModule(R"(func @main(%x: f32[64,32], %w: f32[32,16]) -> (f32[64,16], f32[64,32]) {
  %m = f32[64,16] dot_general(%x, %w) {lhs_contracting = [1], rhs_contracting = [0]}
  %e = f32[64,32] exp(%x)
  return %m, %e
})",
                  "misaligned.kir");
  ASSERT_TRUE(module.isOk()) << module.status().str();
  runtime::CompileOptions o;
  o.backend = "cuda";
  auto exe = runtime::Executable::compile(std::move(*module), o);
  ASSERT_TRUE(exe.isOk()) << exe.status().str();
  Tensor x(DType::F32, {64, 32}), w(DType::F32, {32, 16});
  for (int64_t i = 0; i < x.numElements(); ++i) x.setDouble(i, std::sin(0.1 * double(i)));
  for (int64_t i = 0; i < w.numElements(); ++i) w.setDouble(i, std::cos(0.3 * double(i)));
  DeviceBuffers mem{drv, {}};
  std::vector<runtime::DeviceTensor> in = {mem.add(x, 4), mem.add(w, 4)};
  std::vector<runtime::DeviceTensor> out = {mem.add(Tensor(DType::F32, {64, 16}), 4),
                                            mem.add(Tensor(DType::F32, {64, 32}), 4)};
  for (int run = 0; run < 3; ++run) {
    Status ran = (*exe)->runOnDevice(in, out, 0);
    ASSERT_TRUE(ran.isOk()) << ran.str();
    ASSERT_TRUE(drv.synchronize(nullptr));
    Tensor m = mem.read(out[0]), e = mem.read(out[1]);
    for (int64_t r = 0; r < 64; ++r)
      for (int64_t c = 0; c < 16; ++c) {
        double want = 0;
        for (int64_t k = 0; k < 32; ++k) want += x.getDouble(r * 32 + k) * w.getDouble(k * 16 + c);
        ASSERT_NEAR(m.getDouble(r * 16 + c), want, 1e-4) << run << ": " << r << "," << c;
      }
    for (int64_t i = 0; i < e.numElements(); ++i)
      ASSERT_NEAR(e.getDouble(i), std::exp(x.getDouble(i)), 1e-5 * std::exp(x.getDouble(i))) << i;
  }
}

TEST(CudaTarget, WithoutAGpuRunningIsAClearError) {
  if (codegen::cuda::Driver::get()) GTEST_SKIP() << "this machine has a GPU";
  auto exe = compileMixed();
  ASSERT_TRUE(exe);
  auto got = exe->run(mixedInputs());
  ASSERT_FALSE(got.isOk());
  EXPECT_NE(got.status().message().find("CUDA driver"), std::string::npos)
      << got.status().message();
}

}  // namespace
}  // namespace kiln
