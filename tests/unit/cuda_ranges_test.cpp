// The cuda target over ranges of sizes (symbolic dims). Without a GPU (CI): the GPU schedule of
// symbolic extents (grids and trip counts that are expressions of the symbols, guards where a
// block may overhang) and its CUDA C++ compiled by NVRTC for sm_90. With one (CudaDevice.*,
// scripts/test-gpu.sh): one compile serves every size in its ranges, library calls included,
// and matches the interpreter at each size, eager, captured and replayed.
#include <gtest/gtest.h>

#include <cmath>

#include "codegen/cuda/cuda_source.h"
#include "codegen/cuda/driver.h"
#include "codegen/cuda/nvrtc.h"
#include "cuda_test_util.h"
#include "fusion/fusion.h"
#include "interp/interpreter.h"
#include "ir/text/text.h"
#include "kernel/gpu_schedule.h"
#include "kernel/lower.h"
#include "kernel/schedule.h"
#include "kernel/simplify.h"
#include "kernel/verify.h"
#include "runtime/executable.h"

namespace kiln {
namespace {

const std::vector<kernel::Symbol> kSymbols = {{"N", 1, 64}, {"S", 1, 300}};

// `text`'s kernels over kSymbols, scheduled as the cuda target does for loops.
std::vector<kernel::Kernel> scheduledOverRanges(const std::string& text) {
  auto module = parseModule(text, "t.kir");
  EXPECT_TRUE(module.isOk()) << module.status().str();
  if (!module) return {};
  const Function& f = *(*module)->entry();
  auto kernels = kernel::lowerPlan(f, fusion::planFusion(f), kSymbols);
  EXPECT_TRUE(kernels.isOk()) << kernels.status().str();
  if (!kernels) return {};
  for (kernel::Kernel& k : *kernels) {
    k = kernel::vectorizeLanes(kernel::reductionsPerOutput(k, 16), 16);
    k = kernel::simplifyIndices(kernel::lowerReductions(kernel::mapToGpu(k, 256)));
    EXPECT_TRUE(kernel::verifyKernel(k).isOk()) << kernel::verifyKernel(k).str();
  }
  return *kernels;
}

TEST(GpuSchedule, SymbolicExtentsBecomeGridExpressions) {
  // An elementwise nest of N * S * 64 elements in groups of 4 lanes (16-byte accesses): 256
  // threads a block, (N * S * 16 + 255) / 256 blocks, a guard (16 * N * S need not be a multiple
  // of 256), and the flat index recombined from the digits of N and S. A softmax over rows of up
  // to 300 elements: a warp per row at the longest, 8 rows a block, each lane striding over the
  // row's S elements.
  auto ks =
      scheduledOverRanges(R"(func @main(%x: f32[N,S,64], %y: f32[N,S]) -> (f32[N,S,64], f32[N,S]) {
  %e = f32[N,S,64] exp(%x)
  %s = f32[N,S] softmax(%y) {axis = 1}
  return %e, %s
})");
  ASSERT_EQ(ks.size(), 2u);
  const std::string exp = kernel::printKernel(ks[0]);
  EXPECT_NE(exp.find("gpu_block for blk0 in [0, (N * S * 16 + 255) / 256)"), std::string::npos)
      << exp;
  EXPECT_NE(exp.find("gpu_thread for thr0 in [0, 256)"), std::string::npos) << exp;
  EXPECT_NE(exp.find("if (blk0 * 256 + thr0 < N * S * 16)"), std::string::npos) << exp;
  EXPECT_NE(exp.find("%e[blk0 * 1024 + thr0 * 4 + i2v0] = exp(%x[blk0 * 1024 + thr0 * 4 + i2v0])"),
            std::string::npos)
      << exp;
  const std::string softmax = kernel::printKernel(ks[1]);
  EXPECT_NE(softmax.find("gpu_block for blk0 in [0, (N + 7) / 8)"), std::string::npos) << softmax;
  EXPECT_NE(softmax.find("if (blk0 * 8 + thr0 / 32 < N)"), std::string::npos) << softmax;
  EXPECT_NE(softmax.find("for q0 in [0, (S + 31) / 32)"), std::string::npos) << softmax;
  EXPECT_NE(softmax.find("if (q0 * 32 + thr0 % 32 < S)"), std::string::npos) << softmax;

  auto source = codegen::cuda::emitCuda(ks);
  ASSERT_TRUE(source.isOk()) << source.status().str();
  // The sizes follow the buffers as i64 and are read in the launch's (32-bit) index type.
  EXPECT_NE(source->source.find("const i64 N_arg, const i64 S_arg) {\n  const int N = N_arg;\n"
                                "  const int S = S_arg;"),
            std::string::npos)
      << source->source;
  const codegen::cuda::Launch& l = source->launches[1][0];
  ASSERT_TRUE(l.gridExtent);
  EXPECT_EQ(kernel::evaluateExtent(l.gridExtent, {{"N", 17}, {"S", 5}}), 3);
  EXPECT_EQ(l.grid, 8);  // at N = 64
  EXPECT_EQ(l.block, 256);
  auto cubin = codegen::cuda::compileCuda(source->source, "ranges.cu", "sm_90");
  ASSERT_TRUE(cubin.isOk()) << cubin.status().str();
}

// A product with a bias and a residual (cuBLASLt's epilogue) then an erf gelu (a loop nest after
// the call), a softmax over the middle dim S, a batched product of S x S with a softmax over its
// rows, and a convolution with a bias and relu (cuDNN's fused call), all over N in 1..8 and S in
// 1..300: the library calls are made for each run's sizes.
constexpr const char* kRanges =
    R"(func @main(%x: f32[N,S,32], %w: f32[32,48], %b: f32[48], %r: f32[N,S,48], %img: f32[N,4,9,9], %k: f32[6,4,3,3], %kb: f32[6]) -> (f32[N,S,48], f32[N,S,32], f32[N,S,S], f32[N,6,9,9]) {
  %m = f32[N,S,48] dot_general(%x, %w) {lhs_contracting = [2], rhs_contracting = [0]}
  %bb = f32[N,S,48] broadcast_in_dim(%b) {dims = [2]}
  %a = f32[N,S,48] add(%m, %bb)
  %s = f32[N,S,48] add(%a, %r)
  %g = f32[N,S,48] gelu(%s)
  %sm = f32[N,S,32] softmax(%x) {axis = 1}
  %p = f32[N,S,S] dot_general(%x, %x) {lhs_batch = [0], rhs_batch = [0], lhs_contracting = [2], rhs_contracting = [2]}
  %ps = f32[N,S,S] softmax(%p) {axis = 2}
  %c = f32[N,6,9,9] convolution(%img, %k) {padding_low = [1, 1], padding_high = [1, 1]}
  %cb = f32[N,6,9,9] broadcast_in_dim(%kb) {dims = [1]}
  %ca = f32[N,6,9,9] add(%c, %cb)
  %zero = f32[] constant() {value = [0.0]}
  %zb = f32[N,6,9,9] broadcast_in_dim(%zero) {dims = []}
  %cr = f32[N,6,9,9] max(%ca, %zb)
  return %g, %sm, %ps, %cr
})";

std::vector<Tensor> rangeInputs(int64_t n, int64_t s) {
  std::vector<Tensor> in = {Tensor(DType::F32, {n, s, 32}),   Tensor(DType::F32, {32, 48}),
                            Tensor(DType::F32, {48}),         Tensor(DType::F32, {n, s, 48}),
                            Tensor(DType::F32, {n, 4, 9, 9}), Tensor(DType::F32, {6, 4, 3, 3}),
                            Tensor(DType::F32, {6})};
  for (size_t t = 0; t < in.size(); ++t)
    for (int64_t i = 0; i < in[t].numElements(); ++i)
      in[t].setDouble(i, 0.5 * std::sin(0.37 * double(i) + double(t) + double(n * s)));
  return in;
}

TEST(CudaDevice, RangesServeEverySizeAndMatchTheInterpreter) {
  KILN_REQUIRE_GPU();
  auto module = parseModule(kRanges, "ranges.kir");
  ASSERT_TRUE(module.isOk()) << module.status().str();
  runtime::CompileOptions o;
  o.backend = "cuda";
  o.ranges = {{"N", SymbolRange{1, 8}}, {"S", SymbolRange{1, 300}}};
  auto exe = runtime::Executable::compile(std::move(*module), o);
  ASSERT_TRUE(exe.isOk()) << exe.status().str();
  EXPECT_EQ((*exe)->libraryCalls(), "2 cuBLASLt dot_general, 1 cuDNN convolution");
  auto reference = parseModule(kRanges, "ranges.kir");
  ASSERT_TRUE(reference.isOk());
  // Sizes at the ranges' ends and between, one of them again after others (its graph replays).
  const std::vector<std::pair<int64_t, int64_t>> sizes = {{1, 1}, {3, 37}, {8, 300}, {2, 64},
                                                          {5, 1}, {3, 37}, {1, 300}};
  for (const auto& [n, s] : sizes) {
    const std::vector<Tensor> inputs = rangeInputs(n, s);
    auto want = interpret(*(*reference)->entry(), inputs);
    ASSERT_TRUE(want.isOk()) << want.status().str();
    for (int run = 0; run < 3; ++run) {  // eager, captured into a CUDA graph, replayed
      auto got = (*exe)->run(inputs);
      ASSERT_TRUE(got.isOk()) << got.status().str();
      ASSERT_EQ(got->size(), want->size());
      for (size_t out = 0; out < got->size(); ++out) {
        ASSERT_EQ((*got)[out].dims(), (*want)[out].dims()) << "N=" << n << " S=" << s;
        // Relative to the output's largest magnitude: f32 on FMA units, sums of up to 300
        // terms in another order than the interpreter's (about 1e-6 apart).
        double scale = 0, worst = 0;
        for (int64_t i = 0; i < (*want)[out].numElements(); ++i)
          scale = std::max(scale, std::abs((*want)[out].getDouble(i)));
        for (int64_t i = 0; i < (*want)[out].numElements(); ++i)
          worst = std::max(worst, std::abs((*got)[out].getDouble(i) - (*want)[out].getDouble(i)));
        EXPECT_LE(worst, 1e-5 * scale)
            << "N=" << n << " S=" << s << " run " << run << " output " << out;
      }
    }
  }
  EXPECT_EQ((*exe)->recompiles(), 0);
}

}  // namespace
}  // namespace kiln
