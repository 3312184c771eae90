// Reference interpreter: dot_general and convolution.
//
// Operands are filled with small integers from a formula (pattern() below) so that every sum is
// exact in f32; expected values come from numpy via /usr/bin/python3, with a reference
// convolution written independently of the kernel: dilate the input with zero holes, pad it
// (cropping for negative padding) with np.pad/np.take, then for each output position take the
// strided, rhs-dilated window of the group's input features and np.sum(window * w[o]). Other
// layouts are transposed to NCHW/OIHW for the reference and the result transposed back.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "interp/interpreter.h"
#include "ir/builder.h"

namespace kiln {
namespace {

// (i * mul) % mod - off for the row-major index i; numpy: (np.arange(n)*mul % mod - off).
Tensor pattern(DType t, std::vector<int64_t> dims, int64_t mul, int64_t mod, int64_t off) {
  Tensor x(t, std::move(dims));
  for (int64_t i = 0; i < x.numElements(); ++i) x.setInt(i, (i * mul) % mod - off);
  return x;
}
// The two fills used throughout: inputs (7, 11, 5) in [-5, 5], kernels (5, 7, 3) in [-3, 3].
Tensor input(std::vector<int64_t> dims, DType t = DType::F32) { return pattern(t, dims, 7, 11, 5); }
Tensor kernel(std::vector<int64_t> dims, DType t = DType::F32) { return pattern(t, dims, 5, 7, 3); }

Tensor make(DType t, std::vector<int64_t> dims, const std::vector<double>& values) {
  Tensor x(t, std::move(dims));
  EXPECT_EQ(static_cast<size_t>(x.numElements()), values.size());
  for (size_t i = 0; i < values.size(); ++i) x.setDouble(static_cast<int64_t>(i), values[i]);
  return x;
}

StatusOr<std::vector<Tensor>> tryRun(OpCode op, const std::vector<Tensor>& inputs, AttrMap attrs) {
  Module m;
  Function* f = m.addFunction("main");
  Builder b(f);
  std::vector<Value*> params;
  for (const Tensor& t : inputs) params.push_back(b.parameter(t.type()));
  std::vector<Value*> results = b.opN(op, params, std::move(attrs));
  if (!b.ok()) return b.status();
  f->setOutputs(results);
  return interpret(*f, inputs);
}

Tensor run1(OpCode op, const std::vector<Tensor>& inputs, AttrMap attrs) {
  auto r = tryRun(op, inputs, std::move(attrs));
  EXPECT_TRUE(r.isOk()) << r.status().str();
  return r.isOk() ? (*r)[0] : Tensor();
}

// Exact comparison: every expected value here is an integer the result must hold exactly.
void expectValues(const Tensor& got, DType t, const std::vector<int64_t>& dims,
                  const std::vector<double>& want) {
  ASSERT_TRUE(got.defined());
  ASSERT_EQ(got.dtype(), t);
  ASSERT_EQ(got.dims(), dims);
  ASSERT_EQ(static_cast<size_t>(got.numElements()), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(got.getDouble(static_cast<int64_t>(i)), want[i]) << "element " << i;
}

// --- dot_general -------------------------------------------------------------------------------

AttrMap dotAttrs(std::vector<int64_t> lb, std::vector<int64_t> rb, std::vector<int64_t> lc,
                 std::vector<int64_t> rc) {
  AttrMap a;
  if (!lb.empty()) a["lhs_batch"] = intsAttr(std::move(lb));
  if (!rb.empty()) a["rhs_batch"] = intsAttr(std::move(rb));
  if (!lc.empty()) a["lhs_contracting"] = intsAttr(std::move(lc));
  if (!rc.empty()) a["rhs_contracting"] = intsAttr(std::move(rc));
  return a;
}

TEST(InterpDot, MatrixProduct) {
  // numpy: L @ R with L = input([2,3]), R = kernel([3,4]).
  const std::vector<double> want = {17, -8, 2, -2, -18, 11, 5, -22};
  expectValues(
      run1(OpCode::DotGeneral, {input({2, 3}), kernel({3, 4})}, dotAttrs({}, {}, {1}, {0})),
      DType::F32, {2, 4}, want);
  // The same values in i32 and f64.
  expectValues(run1(OpCode::DotGeneral, {input({2, 3}, DType::I32), kernel({3, 4}, DType::I32)},
                    dotAttrs({}, {}, {1}, {0})),
               DType::I32, {2, 4}, want);
  expectValues(run1(OpCode::DotGeneral, {input({2, 3}, DType::F64), kernel({3, 4}, DType::F64)},
                    dotAttrs({}, {}, {1}, {0})),
               DType::F64, {2, 4}, want);
}

TEST(InterpDot, BatchDimsAndTwoContractingDimsInAnyOrder) {
  // lhs [b=2, c=3, f=4, k=5], rhs [k=5, b=2, g=6, c=3]; result [b, f, g].
  // numpy: np.einsum('bcfk,kbgc->bfg', input([2,3,4,5]), kernel([5,2,6,3])).
  const std::vector<double> want = {53,  2,   -42, -30, -18, 8,   85,  11,  -42, -39, -50, -19,
                                    -15, 9,   68,  29,  -38, -35, -38, 29,  68,  9,   -15, -18,
                                    54,  85,  11,  -42, -39, -50, -18, -15, 9,   68,  29,  -38,
                                    -35, -38, 29,  68,  9,   -15, -19, -50, -39, -42, 11,  85};
  AttrMap a = dotAttrs({0}, {1}, {1, 3}, {3, 0});
  expectValues(run1(OpCode::DotGeneral, {input({2, 3, 4, 5}), kernel({5, 2, 6, 3})}, a), DType::F32,
               {2, 4, 6}, want);
  expectValues(run1(OpCode::DotGeneral,
                    {input({2, 3, 4, 5}, DType::I16), kernel({5, 2, 6, 3}, DType::I16)}, a),
               DType::I16, {2, 4, 6}, want);
}

TEST(InterpDot, OuterProductAndEmptyContraction) {
  // No contracting dims: [1,2] x [3,-1,0] -> every product.
  expectValues(run1(OpCode::DotGeneral,
                    {make(DType::F32, {2}, {1, 2}), make(DType::F32, {3}, {3, -1, 0})}, {}),
               DType::F32, {2, 3}, {3, -1, 0, 6, -2, 0});
  // A contracting dim of extent 0 sums nothing: zeros.
  expectValues(run1(OpCode::DotGeneral, {Tensor(DType::F32, {2, 0}), Tensor(DType::F32, {0, 3})},
                    dotAttrs({}, {}, {1}, {0})),
               DType::F32, {2, 3}, {0, 0, 0, 0, 0, 0});
}

TEST(InterpDot, IntegersWrapAndHalfAccumulatesInF32) {
  // i8: 100*1 + 100*1 = 200 = -56 (mod 256); i64: 2^62 * 4 = 2^64 = 0 (mod 2^64).
  expectValues(run1(OpCode::DotGeneral,
                    {make(DType::I8, {2}, {100, 100}), make(DType::I8, {2}, {1, 1})},
                    dotAttrs({}, {}, {0}, {0})),
               DType::I8, {}, {-56});
  Tensor big(DType::I64, {1}), four(DType::I64, {1});
  big.setInt(0, int64_t(1) << 62);
  four.setInt(0, 4);
  expectValues(run1(OpCode::DotGeneral, {big, four}, dotAttrs({}, {}, {0}, {0})), DType::I64, {},
               {0});
  // f16: 2048 + 1 + 1 + 1 + 1 = 2052 with an f32 accumulator; an f16 one would stay at 2048.
  expectValues(
      run1(OpCode::DotGeneral,
           {make(DType::F16, {5}, {2048, 1, 1, 1, 1}), make(DType::F16, {5}, {1, 1, 1, 1, 1})},
           dotAttrs({}, {}, {0}, {0})),
      DType::F16, {}, {2052});
  // bf16: 256 + 4 = 260 the same way (bf16 spacing at 256 is 2).
  expectValues(
      run1(OpCode::DotGeneral,
           {make(DType::BF16, {5}, {256, 1, 1, 1, 1}), make(DType::BF16, {5}, {1, 1, 1, 1, 1})},
           dotAttrs({}, {}, {0}, {0})),
      DType::BF16, {}, {260});
}

TEST(InterpDot, SymbolicBatchBoundByEachRun) {
  // f32[N,2] x f32[2,2] with rhs [[1,2],[3,4]]: row (a,b) maps to (a + 3b, 2a + 4b).
  Module m;
  Function* f = m.addFunction("main");
  Builder b(f);
  Value* x = b.parameter(TensorType(DType::F32, {Dim::symbol("N"), Dim(2)}));
  Value* w = b.parameter(TensorType::of(DType::F32, {2, 2}));
  Value* r = b.dotGeneral(x, w, DotDims{{}, {}, {1}, {0}});
  ASSERT_TRUE(b.ok()) << b.status().str();
  f->setOutputs({r});
  Tensor rhs = make(DType::F32, {2, 2}, {1, 2, 3, 4});
  auto one = interpret(*f, std::vector<Tensor>{make(DType::F32, {1, 2}, {1, 1}), rhs});
  ASSERT_TRUE(one.isOk()) << one.status().str();
  expectValues((*one)[0], DType::F32, {1, 2}, {4, 6});
  auto three =
      interpret(*f, std::vector<Tensor>{make(DType::F32, {3, 2}, {1, 0, 0, 1, 2, -1}), rhs});
  ASSERT_TRUE(three.isOk()) << three.status().str();
  expectValues((*three)[0], DType::F32, {3, 2}, {1, 2, 3, 4, -1, 0});
}

// --- convolution -------------------------------------------------------------------------------

AttrMap convAttrs(std::vector<std::pair<const char*, std::vector<int64_t>>> lists,
                  int64_t groups = 1, int64_t batchGroups = 1, const char* dimNumbers = nullptr) {
  AttrMap a;
  for (auto& [name, v] : lists) a[name] = intsAttr(v);
  if (groups != 1) a["feature_group_count"] = intAttr(groups);
  if (batchGroups != 1) a["batch_group_count"] = intAttr(batchGroups);
  if (dimNumbers) a["dimension_numbers"] = stringAttr(dimNumbers);
  return a;
}

TEST(InterpConv, NchwWithStrideAndAsymmetricPadding) {
  // conv(input([1,2,5,5]), kernel([3,2,3,3]), strides=[2,1], lo=[1,0], hi=[1,2])
  const std::vector<double> want = {12,  -9,  25,  -18, -1, -3,  -13, -1,  36,  -21, -17, -13,
                                    2,   -4,  13,  22,  15, -3,  -3,  -7,  -38, 28,  28,  -10,
                                    -5,  22,  -26, 14,  8,  -1,  -17, -10, -3,  26,  -6,  -3,
                                    -15, -27, 0,   25,  12, -11, -23, -1,  -1};
  AttrMap a =
      convAttrs({{"window_strides", {2, 1}}, {"padding_low", {1, 0}}, {"padding_high", {1, 2}}});
  expectValues(run1(OpCode::Convolution, {input({1, 2, 5, 5}), kernel({3, 2, 3, 3})}, a),
               DType::F32, {1, 3, 3, 5}, want);
  expectValues(run1(OpCode::Convolution,
                    {input({1, 2, 5, 5}, DType::I32), kernel({3, 2, 3, 3}, DType::I32)}, a),
               DType::I32, {1, 3, 3, 5}, want);
}

TEST(InterpConv, NhwcWithHwioKernel) {
  // NHWC input([2,4,4,3]) and HWIO kernel([2,2,3,2]); numpy transposes to NCHW/OIHW, convolves
  // and transposes the result back to NHWC.
  const std::vector<double> want = {34, -46, 0,  -22, -1, -20, -36, 17,  -37, 19,  -38, 21,
                                    26, 3,   25, 5,   46, 7,   -37, 19,  -38, 21,  16,  34,
                                    25, 5,   46, 7,   34, -46, -1,  -20, -35, -18, -36, 17};
  expectValues(run1(OpCode::Convolution, {input({2, 4, 4, 3}), kernel({2, 2, 3, 2})},
                    convAttrs({}, 1, 1, "b01f_01io->b01f")),
               DType::F32, {2, 3, 3, 2}, want);
}

TEST(InterpConv, ScrambledDimensionNumbers) {
  // Input (H, C, N, W) = [3,2,2,4], kernel (kW, O, kH, I) = [2,3,2,2], output (F, W, H, N),
  // strides (H 1, W 2); numpy transposes to NCHW/OIHW and back.
  const std::vector<double> want = {8,   -5, 11,  9, 18,  5,  -1,  8,   1, -9, -39, 28,
                                    -15, 41, -11, 1, -13, 15, -33, -16, 1, 7,  14,  -13};
  expectValues(run1(OpCode::Convolution, {input({3, 2, 2, 4}), kernel({2, 3, 2, 2})},
                    convAttrs({{"window_strides", {1, 2}}}, 1, 1, "0fb1_1o0i->f10b")),
               DType::F32, {3, 2, 2, 2}, want);
}

TEST(InterpConv, FeatureGroups) {
  // conv(input([1,4,4,4]), kernel([4,2,3,3]), lo=[1,1], hi=[1,1], feature_group_count=2)
  const std::vector<double> want = {-29, 39, -4,  9,   16, 10,  0,   27,  -39, 14, 15,  -41, 11,
                                    22,  -7, -15, 8,   23, -6,  9,   -19, -36, 19, -14, 4,   8,
                                    8,   -4, 5,   -41, 32, -19, 22,  -16, -42, 27, 22,  10,  9,
                                    -6,  -9, 50,  -61, 5,  22,  -31, 1,   10,  32, -1,  -2,  7,
                                    1,   28, -23, -27, 6,  0,   -18, -4,  7,   -3, -6,  -25};
  expectValues(run1(OpCode::Convolution, {input({1, 4, 4, 4}), kernel({4, 2, 3, 3})},
                    convAttrs({{"padding_low", {1, 1}}, {"padding_high", {1, 1}}}, 2)),
               DType::F32, {1, 4, 4, 4}, want);
}

TEST(InterpConv, DepthwiseWithKernelDilation) {
  // conv(input([1,3,5,5]), kernel([3,1,3,3]), lo=[2,2], hi=[2,2], rhs_dil=[2,2], G=3)
  const std::vector<double> want = {
      -10, 22, 10,  22,  -10, -4, 17,  -12, -17, 17,  -30, -6, 32, 3,  30,  1,   -1,  15,  -14,
      -14, 2,  -11, -16, 19,  8,  2,   -7,  -4,  7,   -1,  1,  14, 1,  0,   3,   -30, 12,  1,
      -4,  7,  -4,  -14, 20,  7,  4,   -10, -20, 16,  3,   0,  -1, 8,  -11, -14, 19,  -11, -13,
      24,  8,  19,  9,   -4,  24, -11, -27, -5,  -13, -11, 22, -1, -1, 2,   -7,  17,  -17};
  expectValues(
      run1(OpCode::Convolution, {input({1, 3, 5, 5}), kernel({3, 1, 3, 3})},
           convAttrs({{"padding_low", {2, 2}}, {"padding_high", {2, 2}}, {"rhs_dilation", {2, 2}}},
                     3)),
      DType::F32, {1, 3, 5, 5}, want);
}

TEST(InterpConv, InputDilationAsInATransposedConvolution) {
  // conv(input([1,1,2,3]), kernel([2,1,2,2]), lo=[1,1], hi=[1,1], lhs_dil=[2,2])
  const std::vector<double> want = {
      10, 0, -4, 0,  4, 0, -10, 15,  4, -6, -4, 6,  -10, 0,  -2, 0,  6, 0, 10, -15, 2, -3, -6, 9,
      15, 5, -6, -2, 6, 2, -5,  -15, 2, 6,  -2, -6, -15, -5, -3, -1, 9, 3, 5,  15,  1, 3,  -3, -9};
  expectValues(
      run1(
          OpCode::Convolution, {input({1, 1, 2, 3}), kernel({2, 1, 2, 2})},
          convAttrs({{"padding_low", {1, 1}}, {"padding_high", {1, 1}}, {"lhs_dilation", {2, 2}}})),
      DType::F32, {1, 2, 4, 6}, want);
}

TEST(InterpConv, NegativePaddingCrops) {
  // conv(input([1,1,4,4]), kernel([1,1,2,2]), lo=[-1,0], hi=[0,-1]): a 3x3 crop, 2x2 result.
  expectValues(run1(OpCode::Convolution, {input({1, 1, 4, 4}), kernel({1, 1, 2, 2})},
                    convAttrs({{"padding_low", {-1, 0}}, {"padding_high", {0, -1}}})),
               DType::F32, {1, 1, 2, 2}, {-15, 19, 22, -21});
}

TEST(InterpConv, OneDimensional) {
  // conv(input([2,2,7]), kernel([3,2,3]), strides=[2], lo=[1], hi=[1], rhs_dil=[2])
  expectValues(run1(OpCode::Convolution, {input({2, 2, 7}), kernel({3, 2, 3})},
                    convAttrs({{"window_strides", {2}},
                               {"padding_low", {1}},
                               {"padding_high", {1}},
                               {"rhs_dilation", {2}}})),
               DType::F32, {2, 3, 3},
               {-9, 11, -13, 9, -15, 0, -15, -6, 6, -15, 10, -13, 9, -14, 6, -9, -3, 4});
}

TEST(InterpConv, ThreeDimensional) {
  // conv(input([1,2,3,4,3]), kernel([2,2,2,2,2]))
  expectValues(run1(OpCode::Convolution, {input({1, 2, 3, 4, 3}), kernel({2, 2, 2, 2, 2})}, {}),
               DType::F32, {1, 2, 2, 3, 2},
               {27, -13, -5, -12, 18, -11, -13, 24,  -12, 25,  -11, 4,
                14, -11, 16, -9,  -4, -18, -11, -14, -9,  -12, -18, 1});
}

TEST(InterpConv, BatchGroups) {
  // conv(input([4,2,3,3]), kernel([4,2,2,2]), BG=2): output features 0-1 read batches 0-1,
  // features 2-3 read batches 2-3.
  expectValues(
      run1(OpCode::Convolution, {input({4, 2, 3, 3}), kernel({4, 2, 2, 2})}, convAttrs({}, 1, 2)),
      DType::F32, {2, 4, 2, 2},
      {29, -25, -1,  -11, -23, 13, -3, 0,   16, -17, 16, -17, -7, 1,  -5, 3,
       -8, 26,  -27, 29,  -2,  1,  29, -23, -6, 16,  -6, 16,  -6, 13, 29, -7});
}

TEST(InterpConv, IntegersWrapAndHalfAccumulatesInF32) {
  // i8: 100 + 100 = -56 (mod 256); f16: 2048 + 4 * 1 = 2052 with an f32 accumulator.
  expectValues(run1(OpCode::Convolution,
                    {make(DType::I8, {1, 1, 2}, {100, 100}), make(DType::I8, {1, 1, 2}, {1, 1})},
                    {}),
               DType::I8, {1, 1, 1}, {-56});
  expectValues(run1(OpCode::Convolution,
                    {make(DType::F16, {1, 1, 5}, {2048, 1, 1, 1, 1}),
                     make(DType::F16, {1, 1, 5}, {1, 1, 1, 1, 1})},
                    {}),
               DType::F16, {1, 1, 1}, {2052});
}

TEST(InterpConv, EmptyOutputAndEmptyWindow) {
  // A kernel wider than the padded input gives an empty spatial extent.
  expectValues(run1(OpCode::Convolution, {input({1, 1, 2}), kernel({1, 1, 3})}, {}), DType::F32,
               {1, 1, 0}, {});
  // Padding only: every tap reads padding, so the sums are 0.
  expectValues(run1(OpCode::Convolution, {Tensor(DType::F32, {1, 1, 0}), kernel({2, 1, 1})},
                    convAttrs({{"padding_low", {1}}, {"padding_high", {1}}})),
               DType::F32, {1, 2, 2}, {0, 0, 0, 0});
}

}  // namespace
}  // namespace kiln
