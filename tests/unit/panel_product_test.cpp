// Kiln's panel product (codegen/cpu/panel_product.h): which products it takes, its values against
// the reference interpreter, weights from an artifact in place, and its post-ops left to loops.
// Tolerance 1e-5 of the largest value: f32 sums of up to 2500 products of values in [-1, 1] in
// another order than the reference's (about 1e-6 measured).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "codegen/cpu/onednn.h"
#include "codegen/cpu/panel_product.h"
#include "interp/interpreter.h"
#include "library_kernel_util.h"

namespace kiln::codegen::cpu {
namespace {

// x: f32[rows..., K] times a constant w of `wdims`, contracting w's dim `rc`.
OneOp product(const std::string& lhs, const std::vector<int64_t>& wdims, int rc,
              const std::string& result, std::mt19937& rng) {
  std::uniform_real_distribution<double> u(-1, 1);
  std::string values = "[";
  for (int64_t i = 0; i < wdims[0] * wdims[1]; ++i)
    values += (i ? ", " : "") + std::to_string(std::round(u(rng) * 64) / 64);
  const int lc = int(std::count(lhs.begin(), lhs.end(), ','));
  const std::string w = "  %w = f32[" + std::to_string(wdims[0]) + "," + std::to_string(wdims[1]) +
                        "] constant() {value = " + values + "]}\n";
  return parseOp("%x: " + lhs, result,
                 "dot_general(%x, %w) {lhs_contracting = [" + std::to_string(lc) +
                     "], rhs_contracting = [" + std::to_string(rc) + "]}",
                 w);
}

// The kernel's result for a random lhs against the reference's: the largest difference over the
// largest value.
double error(const LibraryKernel& k, const Node& n, std::mt19937& rng) {
  Tensor x(DType::F32, n.operand(0)->type().staticDims());
  std::uniform_real_distribution<double> u(-1, 1);
  for (int64_t i = 0; i < x.numElements(); ++i) x.setDouble(i, u(rng));
  const Tensor& w = n.operand(1)->def()->constantData().tensor;
  const std::vector<Tensor> operands{x, w};
  auto want = evaluateNode(n, operands);
  EXPECT_TRUE(want.isOk());
  if (!want) return 1;
  Tensor got(DType::F32, n.result()->type().staticDims());
  // The weights buffer is not read: the kernel holds them.
  std::vector<void*> buffers{const_cast<std::byte*>(x.bytes()), nullptr, got.mutableBytes()};
  EXPECT_TRUE(k.run(buffers.data()).isOk());
  double scale = 1, err = 0;
  for (int64_t i = 0; i < got.numElements(); ++i) {
    scale = std::max(scale, std::abs((*want)[0].getDouble(i)));
    err = std::max(err, std::abs(got.getDouble(i) - (*want)[0].getDouble(i)));
  }
  return err / scale;
}

TEST(PanelProduct, ValuesAgainstTheReference) {
  if (!oneDnnAvx512()) GTEST_SKIP() << "the panel product needs AVX-512";
  std::mt19937 rng(11);
  struct Case {
    std::string lhs;
    std::vector<int64_t> w;
    int rc;
    std::string result;
  };
  // Rows 1 (a matrix-vector product), 16 (the least of the others), 17 and 23 (passes of 6 with 5
  // rows left), 50 over two dims, 64 (the most); weights [K, N] and [N, K]; one and several panels;
  // K in chunks (2500: three chunks of 834, 834 and 832 rows; 2048 on 2 threads: two chunks a
  // panel).
  const std::vector<Case> cases = {
      {"f32[16,1024]", {1024, 64}, 0, "f32[16,64]"},
      {"f32[17,1024]", {1024, 128}, 0, "f32[17,128]"},
      {"f32[23,1024]", {192, 1024}, 1, "f32[23,192]"},
      {"f32[2,25,1024]", {1024, 320}, 0, "f32[2,25,320]"},
      {"f32[64,512]", {512, 256}, 0, "f32[64,256]"},
      {"f32[20,1024]", {1024, 640}, 0, "f32[20,640]"},  // 2.5 MiB: also on 2 threads
      {"f32[18,2500]", {2500, 128}, 0, "f32[18,128]"},
      {"f32[16,2048]", {256, 2048}, 1, "f32[16,256]"},  // 2 MiB: also on 2 threads
      // One row, without fetches: several panels, [N, K], chunks of K, and 2 threads.
      {"f32[1,1024]", {1024, 192}, 0, "f32[1,192]"},
      {"f32[1,2500]", {128, 2500}, 1, "f32[1,128]"},
      {"f32[1,4096]", {4096, 256}, 0, "f32[1,256]"},  // 4 MiB: also on 2 threads
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.lhs + " x " + std::to_string(c.w[0]) + "x" + std::to_string(c.w[1]));
    OneOp p = product(c.lhs, c.w, c.rc, c.result, rng);
    ASSERT_NE(p.node, nullptr);
    std::string why;
    ASSERT_TRUE(panelProductTakes(*p.node, 1, &why)) << why;
    if (panelProductTakes(*p.node, 2)) {
      // Each of 2 threads takes a run of the panels.
      auto two = createOneDnnKernel(*p.node, {}, 2);
      ASSERT_TRUE(two.isOk()) << two.status().str();
      EXPECT_NE((*two)->describe().find("Kiln panel product"), std::string::npos);
      EXPECT_LE(error(**two, *p.node, rng), 1e-5);
    }
    auto k = createOneDnnKernel(*p.node, {}, 1);
    ASSERT_TRUE(k.isOk()) << k.status().str();
    EXPECT_NE((*k)->describe().find("Kiln panel product"), std::string::npos) << (*k)->describe();
    const bool oneRow = c.lhs.rfind("f32[1,", 0) == 0;
    EXPECT_NE((*k)->describe().find(oneRow ? "streamed by the hardware's prefetchers"
                                           : "fetched one chunk ahead"),
              std::string::npos)
        << (*k)->describe();
    EXPECT_LE(error(**k, *p.node, rng), 1e-5);
    // Again from the weights it packed, as an artifact holds them: used in place.
    std::optional<PackedWeights> packed = (*k)->packedWeights();
    ASSERT_TRUE(packed.has_value());
    CallForm form;
    form.prepacked = &*packed;
    auto again = createOneDnnKernel(*p.node, {}, 1, form);
    ASSERT_TRUE(again.isOk()) << again.status().str();
    EXPECT_NE((*again)->describe().find("prepacked"), std::string::npos) << (*again)->describe();
    EXPECT_LE(error(**again, *p.node, rng), 1e-5);
  }
}

TEST(PanelProduct, WhatItLeavesToOneDnn) {
  if (!oneDnnAvx512()) GTEST_SKIP() << "the panel product needs AVX-512";
  std::mt19937 rng(12);
  auto takes = [&](const std::string& lhs, std::vector<int64_t> w, const std::string& result,
                   int threads) {
    OneOp p = product(lhs, w, 0, result, rng);
    std::string why;
    const bool t = p.node && panelProductTakes(*p.node, threads, &why);
    return t ? std::string("takes") : why;
  };
  EXPECT_EQ(takes("f32[15,1024]", {1024, 64}, "f32[15,64]", 1),
            "15 rows (it takes 1, or 16 to 64)");
  EXPECT_EQ(takes("f32[65,1024]", {1024, 64}, "f32[65,64]", 1),
            "65 rows (it takes 1, or 16 to 64)");
  EXPECT_EQ(takes("f32[2,1024]", {1024, 64}, "f32[2,64]", 1), "2 rows (it takes 1, or 16 to 64)");
  EXPECT_EQ(takes("f32[1,1024]", {1024, 64}, "f32[1,64]", 1), "takes");
  EXPECT_EQ(takes("f32[16,1024]", {1024, 80}, "f32[16,80]", 1), "N = 80 is not a multiple of 64");
  EXPECT_EQ(takes("f32[16,256]", {256, 64}, "f32[16,64]", 1), "weights that stay in cache");
  EXPECT_EQ(takes("f32[16,9216]", {9216, 64}, "f32[16,64]", 1), "takes");  // in 9 chunks
  EXPECT_EQ(takes("f32[16,1024]", {1024, 64}, "f32[16,64]", 2),
            "256 KiB of weights over 2 threads");
  EXPECT_EQ(takes("f32[16,1024]", {1024, 512}, "f32[16,512]", 2), "takes");
  // On two threads oneDNN's matmul runs the one of 256 KiB.
  OneOp p = product("f32[16,1024]", {1024, 64}, 0, "f32[16,64]", rng);
  ASSERT_NE(p.node, nullptr);
  auto k = createOneDnnKernel(*p.node, {}, 2);
  ASSERT_TRUE(k.isOk()) << k.status().str();
  EXPECT_NE((*k)->describe().find("oneDNN matmul"), std::string::npos) << (*k)->describe();
  // With post-ops it takes the product alone: the schedule runs them as loops after it.
  kernel::PostOp relu;
  relu.kind = kernel::PostOp::Kind::Clamp;
  relu.hi = std::numeric_limits<double>::infinity();
  k = createOneDnnKernel(*p.node, {relu}, 1);
  ASSERT_FALSE(k.isOk());
  EXPECT_NE(k.status().message().find("Kiln's panel product takes it without its post-ops"),
            std::string::npos)
      << k.status().message();
}

}  // namespace
}  // namespace kiln::codegen::cpu
