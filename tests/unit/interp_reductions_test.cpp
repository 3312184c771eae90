// Reference interpreter: reduce, argmax/argmin, reduce_window, cumsum, sort and top_k.
//
// Expected values are worked out by hand (the reasoning is next to each case) or computed with
// numpy by /usr/bin/python3 (the expression is next to the numbers).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "interp/interpreter.h"
#include "ir/builder.h"

namespace kiln {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

Tensor make(DType t, std::vector<int64_t> dims, const std::vector<double>& values) {
  Tensor x(t, std::move(dims));
  EXPECT_EQ(static_cast<size_t>(x.numElements()), values.size());
  for (size_t i = 0; i < values.size(); ++i) x.setDouble(static_cast<int64_t>(i), values[i]);
  return x;
}

Tensor makeInts(DType t, std::vector<int64_t> dims, const std::vector<int64_t>& values) {
  Tensor x(t, std::move(dims));
  EXPECT_EQ(static_cast<size_t>(x.numElements()), values.size());
  for (size_t i = 0; i < values.size(); ++i) x.setInt(static_cast<int64_t>(i), values[i]);
  return x;
}

// Builds a function of one `op` node over parameters typed like `inputs`, and interprets it.
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

std::vector<Tensor> run(OpCode op, const std::vector<Tensor>& inputs, AttrMap attrs) {
  auto r = tryRun(op, inputs, std::move(attrs));
  EXPECT_TRUE(r.isOk()) << r.status().str();
  return r.isOk() ? *r : std::vector<Tensor>{};
}

Tensor run1(OpCode op, const std::vector<Tensor>& inputs, AttrMap attrs) {
  std::vector<Tensor> r = run(op, inputs, std::move(attrs));
  return r.empty() ? Tensor() : r[0];
}

// Checks dtype, dims and values (NaN matches NaN; infinities must match exactly).
void expectTensor(const Tensor& got, DType t, const std::vector<int64_t>& dims,
                  const std::vector<double>& want, double tol = 0) {
  ASSERT_TRUE(got.defined());
  ASSERT_EQ(got.dtype(), t);
  ASSERT_EQ(got.dims(), dims);
  ASSERT_EQ(static_cast<size_t>(got.numElements()), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    double g = got.getDouble(static_cast<int64_t>(i)), w = want[i];
    if (std::isnan(w)) EXPECT_TRUE(std::isnan(g)) << "element " << i << " is " << g;
    else if (std::isinf(w)) EXPECT_EQ(g, w) << "element " << i;
    else EXPECT_NEAR(g, w, tol) << "element " << i;
  }
}

void expectInts(const Tensor& got, DType t, const std::vector<int64_t>& dims,
                const std::vector<int64_t>& want) {
  ASSERT_TRUE(got.defined());
  ASSERT_EQ(got.dtype(), t);
  ASSERT_EQ(got.dims(), dims);
  ASSERT_EQ(static_cast<size_t>(got.numElements()), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(got.getInt(static_cast<int64_t>(i)), want[i]) << "element " << i;
}

// Unsigned values through the exact uint64 accessors (u64 elements above INT64_MAX).
Tensor makeUInts(DType t, std::vector<int64_t> dims, const std::vector<uint64_t>& values) {
  Tensor x(t, std::move(dims));
  EXPECT_EQ(static_cast<size_t>(x.numElements()), values.size());
  for (size_t i = 0; i < values.size(); ++i) x.setUInt(static_cast<int64_t>(i), values[i]);
  return x;
}

void expectUInts(const Tensor& got, DType t, const std::vector<int64_t>& dims,
                 const std::vector<uint64_t>& want) {
  ASSERT_TRUE(got.defined());
  ASSERT_EQ(got.dtype(), t);
  ASSERT_EQ(got.dims(), dims);
  ASSERT_EQ(static_cast<size_t>(got.numElements()), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(got.getUInt(static_cast<int64_t>(i)), want[i]) << "element " << i;
}

constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();
constexpr uint64_t k2p63 = uint64_t(1) << 63;

AttrMap reduceAttrs(std::vector<int64_t> dims, const char* kind) {
  return {{"dims", intsAttr(std::move(dims))}, {"kind", enumAttr(kind)}};
}

// --- reduce ------------------------------------------------------------------------------------

TEST(InterpReduce, SumOverOuterAndInnerDims) {
  // x[i,j,k] = 6i + 2j + k; summing over i and k gives 8j + 14.
  std::vector<double> v(12);
  for (int i = 0; i < 12; ++i) v[i] = i;
  Tensor x = make(DType::F32, {2, 3, 2}, v);
  expectTensor(run1(OpCode::Reduce, {x}, reduceAttrs({0, 2}, "sum")), DType::F32, {3},
               {14, 22, 30});
  // Every dim: 0 + 1 + ... + 11 = 66. No dim: the operand itself.
  expectTensor(run1(OpCode::Reduce, {x}, reduceAttrs({2, 0, 1}, "sum")), DType::F32, {}, {66});
  expectTensor(run1(OpCode::Reduce, {x}, reduceAttrs({}, "max")), DType::F32, {2, 3, 2}, v);
}

TEST(InterpReduce, ProdMaxMinAlongOneDim) {
  Tensor x = make(DType::F64, {2, 3}, {1, -2, 3, 0.5, 4, -1});
  expectTensor(run1(OpCode::Reduce, {x}, reduceAttrs({1}, "prod")), DType::F64, {2}, {-6, -2});
  expectTensor(run1(OpCode::Reduce, {x}, reduceAttrs({0}, "max")), DType::F64, {3}, {1, 4, 3});
  expectTensor(run1(OpCode::Reduce, {x}, reduceAttrs({0}, "min")), DType::F64, {3}, {0.5, -2, -1});
}

TEST(InterpReduce, IntegersWrapAround) {
  // i8: 100 + 100 = 200 = -56 (mod 256); i32: 65536 * 65536 = 2^32 = 0 (mod 2^32).
  expectInts(run1(OpCode::Reduce, {makeInts(DType::I8, {2}, {100, 100})}, reduceAttrs({0}, "sum")),
             DType::I8, {}, {-56});
  expectInts(
      run1(OpCode::Reduce, {makeInts(DType::I32, {2}, {65536, 65536})}, reduceAttrs({0}, "prod")),
      DType::I32, {}, {0});
  // i64 max/min keep full 64-bit values.
  Tensor big = makeInts(DType::I64, {3}, {INT64_MIN, INT64_MAX, -1});
  expectInts(run1(OpCode::Reduce, {big}, reduceAttrs({0}, "max")), DType::I64, {}, {INT64_MAX});
  expectInts(run1(OpCode::Reduce, {big}, reduceAttrs({0}, "min")), DType::I64, {}, {INT64_MIN});
  // u8 compares unsigned: 200 > 100.
  expectInts(run1(OpCode::Reduce, {makeInts(DType::U8, {2}, {100, 200})}, reduceAttrs({0}, "max")),
             DType::U8, {}, {200});
}

TEST(InterpReduce, MaxAndMinPropagateNaN) {
  Tensor x = make(DType::F32, {2, 3}, {1, kNaN, 3, -kInf, 2, 0});
  expectTensor(run1(OpCode::Reduce, {x}, reduceAttrs({1}, "max")), DType::F32, {2}, {kNaN, 2});
  expectTensor(run1(OpCode::Reduce, {x}, reduceAttrs({1}, "min")), DType::F32, {2}, {kNaN, -kInf});
  expectTensor(run1(OpCode::Reduce, {x}, reduceAttrs({1}, "sum")), DType::F32, {2}, {kNaN, -kInf});
}

TEST(InterpReduce, ZeroSizeReductionGivesTheIdentity) {
  Tensor f = Tensor(DType::F32, {0, 3});
  expectTensor(run1(OpCode::Reduce, {f}, reduceAttrs({0}, "sum")), DType::F32, {3}, {0, 0, 0});
  expectTensor(run1(OpCode::Reduce, {f}, reduceAttrs({0}, "prod")), DType::F32, {3}, {1, 1, 1});
  expectTensor(run1(OpCode::Reduce, {f}, reduceAttrs({0}, "max")), DType::F32, {3},
               {-kInf, -kInf, -kInf});
  expectTensor(run1(OpCode::Reduce, {f}, reduceAttrs({0}, "min")), DType::F32, {3},
               {kInf, kInf, kInf});
  // Integer max/min start from the dtype's lowest/highest value.
  expectInts(run1(OpCode::Reduce, {Tensor(DType::I8, {2, 0})}, reduceAttrs({1}, "max")), DType::I8,
             {2}, {-128, -128});
  expectInts(run1(OpCode::Reduce, {Tensor(DType::I32, {0})}, reduceAttrs({0}, "min")), DType::I32,
             {}, {INT32_MAX});
  expectInts(run1(OpCode::Reduce, {Tensor(DType::U8, {0})}, reduceAttrs({0}, "min")), DType::U8, {},
             {255});
  Tensor b = Tensor(DType::Bool, {0});
  expectInts(run1(OpCode::Reduce, {b}, reduceAttrs({0}, "and")), DType::Bool, {}, {1});
  expectInts(run1(OpCode::Reduce, {b}, reduceAttrs({0}, "or")), DType::Bool, {}, {0});
  expectInts(run1(OpCode::Reduce, {b}, reduceAttrs({0}, "max")), DType::Bool, {}, {0});
  expectInts(run1(OpCode::Reduce, {b}, reduceAttrs({0}, "min")), DType::Bool, {}, {1});
}

TEST(InterpReduce, BoolAndOr) {
  Tensor x = makeInts(DType::Bool, {2, 3}, {1, 1, 1, 0, 1, 0});
  expectInts(run1(OpCode::Reduce, {x}, reduceAttrs({1}, "and")), DType::Bool, {2}, {1, 0});
  expectInts(run1(OpCode::Reduce, {x}, reduceAttrs({0}, "or")), DType::Bool, {3}, {1, 1, 1});
  expectInts(run1(OpCode::Reduce, {x}, reduceAttrs({0}, "and")), DType::Bool, {3}, {0, 1, 0});
  expectInts(run1(OpCode::Reduce, {x}, reduceAttrs({1}, "min")), DType::Bool, {2}, {1, 0});
}

TEST(InterpReduce, HalfSumsAccumulateInF32) {
  // In f16 2048 + 1 rounds back to 2048 (the spacing there is 2), so an f16 accumulator would
  // stay at 2048; accumulating in f32 gives 2052, which f16 holds exactly.
  Tensor h = make(DType::F16, {5}, {2048, 1, 1, 1, 1});
  expectTensor(run1(OpCode::Reduce, {h}, reduceAttrs({0}, "sum")), DType::F16, {}, {2052});
  // bf16 spacing at 256 is 2: the same argument gives 260.
  Tensor bf = make(DType::BF16, {5}, {256, 1, 1, 1, 1});
  expectTensor(run1(OpCode::Reduce, {bf}, reduceAttrs({0}, "sum")), DType::BF16, {}, {260});
  expectTensor(run1(OpCode::Reduce, {bf}, reduceAttrs({0}, "max")), DType::BF16, {}, {256});
}

TEST(InterpReduce, SymbolicDimBoundByEachRun) {
  // f32[N,3]: row sums and the argmax down each column, for two values of N.
  Module m;
  Function* f = m.addFunction("main");
  Builder b(f);
  Value* x = b.parameter(TensorType(DType::F32, {Dim::symbol("N"), Dim(3)}));
  Value* sums = b.reduce(x, {1}, "sum");
  Value* arg = b.op(OpCode::ArgMax, {x}, {{"axis", intAttr(0)}});
  ASSERT_TRUE(b.ok()) << b.status().str();
  f->setOutputs({sums, arg});
  for (int64_t n : {1, 4}) {
    // x[i,j] = 3i + j: row i sums to 9i + 3; every column rises, so its argmax is n - 1.
    std::vector<double> v, wantSums;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < 3; ++j) v.push_back(static_cast<double>(3 * i + j));
      wantSums.push_back(static_cast<double>(9 * i + 3));
    }
    auto r = interpret(*f, std::vector<Tensor>{make(DType::F32, {n, 3}, v)});
    ASSERT_TRUE(r.isOk()) << r.status().str();
    expectTensor((*r)[0], DType::F32, {n}, wantSums);
    expectInts((*r)[1], DType::I64, {3}, {n - 1, n - 1, n - 1});
  }
}

// --- argmax / argmin ---------------------------------------------------------------------------

TEST(InterpArgReduce, TiesNaNAndSelectLastIndex) {
  // x[0] = [[1,5],[3,5],[3,2]], x[1] = [[nan,0],[1,nan],[nan,0]]; reduce along axis 1.
  Tensor x = make(DType::F32, {2, 3, 2}, {1, 5, 3, 5, 3, 2, kNaN, 0, 1, kNaN, kNaN, 0});
  auto attrs = [](bool last) {
    return AttrMap{{"axis", intAttr(1)}, {"select_last_index", boolAttr(last)}};
  };
  // argmax: column (0,0) = 1,3,3 -> 1 (last: 2); (0,1) = 5,5,2 -> 0 (last: 1);
  // (1,0) = nan,1,nan -> 0, the first NaN; (1,1) = 0,nan,0 -> 1.
  expectInts(run1(OpCode::ArgMax, {x}, attrs(false)), DType::I64, {2, 2}, {1, 0, 0, 1});
  expectInts(run1(OpCode::ArgMax, {x}, attrs(true)), DType::I64, {2, 2}, {2, 1, 0, 1});
  // argmin: (0,0) -> 0; (0,1) -> 2; NaN counts as the minimum: (1,0) -> 0, (1,1) -> 1.
  expectInts(run1(OpCode::ArgMin, {x}, attrs(false)), DType::I64, {2, 2}, {0, 2, 0, 1});
  expectInts(run1(OpCode::ArgMin, {x}, attrs(true)), DType::I64, {2, 2}, {0, 2, 0, 1});
}

TEST(InterpArgReduce, IntegerAndBoolOperands) {
  Tensor i = makeInts(DType::I32, {3}, {7, -3, 7});
  AttrMap first{{"axis", intAttr(0)}};
  AttrMap last{{"axis", intAttr(0)}, {"select_last_index", boolAttr(true)}};
  expectInts(run1(OpCode::ArgMax, {i}, first), DType::I64, {}, {0});
  expectInts(run1(OpCode::ArgMax, {i}, last), DType::I64, {}, {2});
  expectInts(run1(OpCode::ArgMin, {i}, first), DType::I64, {}, {1});
  Tensor b = makeInts(DType::Bool, {3}, {0, 1, 1});
  expectInts(run1(OpCode::ArgMax, {b}, first), DType::I64, {}, {1});
  expectInts(run1(OpCode::ArgMax, {b}, last), DType::I64, {}, {2});
  // Rows along axis 0 of a [3,2] matrix [[4,9],[8,1],[8,9]]: argmax -> [1,0], argmin -> [0,1].
  Tensor m = makeInts(DType::I64, {3, 2}, {4, 9, 8, 1, 8, 9});
  expectInts(run1(OpCode::ArgMax, {m}, first), DType::I64, {2}, {1, 0});
  expectInts(run1(OpCode::ArgMin, {m}, first), DType::I64, {2}, {0, 1});
}

TEST(InterpArgReduce, EmptyAxisIsAnErrorUnlessTheResultIsEmpty) {
  auto r = tryRun(OpCode::ArgMax, {Tensor(DType::F32, {2, 0})}, {{"axis", intAttr(1)}});
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("extent 0"), std::string::npos) << r.status().str();
  expectInts(run1(OpCode::ArgMax, {Tensor(DType::F32, {0, 0})}, {{"axis", intAttr(1)}}), DType::I64,
             {0}, {});
}

// --- reduce_window -----------------------------------------------------------------------------

TEST(InterpReduceWindow, MaxPool2x2Stride2) {
  // arange(16).reshape(4,4), 2x2 windows at stride 2: the bottom-right of each block.
  std::vector<double> v(16);
  for (int i = 0; i < 16; ++i) v[i] = i;
  AttrMap a{{"kind", enumAttr("max")},
            {"window_dimensions", intsAttr({2, 2})},
            {"window_strides", intsAttr({2, 2})}};
  expectTensor(run1(OpCode::ReduceWindow, {make(DType::F32, {4, 4}, v)}, a), DType::F32, {2, 2},
               {5, 7, 13, 15});
}

// x = (arange(15)*7 % 11 - 5).reshape(3,5) and a numpy reference that dilates x with
// identity-filled holes, pads (cropping for negative padding) with the identity and reduces each
// (window-dilated) window with np.sum / np.max / np.min.
const std::vector<double> kWindowInput = {-5, 2, -2, 5, 1, -3, 4, 0, -4, 3, -1, -5, 2, -2, 5};

TEST(InterpReduceWindow, SumWithBaseAndWindowDilationAndNegativePadding) {
  AttrMap a{{"kind", enumAttr("sum")},
            {"window_dimensions", intsAttr({2, 3})},
            {"window_strides", intsAttr({2, 1})},
            {"base_dilations", intsAttr({2, 1})},
            {"window_dilations", intsAttr({1, 2})},
            {"padding_low", intsAttr({1, -1})},
            {"padding_high", intsAttr({0, 2})}};
  Tensor x = make(DType::F32, {3, 5}, kWindowInput);
  expectTensor(run1(OpCode::ReduceWindow, {x}, a), DType::F32, {3, 2}, {7, -1, 0, 3, -7, 7});
  // The same in i32: sums are exact integers either way.
  Tensor xi = make(DType::I32, {3, 5}, kWindowInput);
  expectInts(run1(OpCode::ReduceWindow, {xi}, a), DType::I32, {3, 2}, {7, -1, 0, 3, -7, 7});
}

TEST(InterpReduceWindow, MaxWithPaddingNeverPicksPadding) {
  AttrMap a{{"kind", enumAttr("max")},
            {"window_dimensions", intsAttr({3, 2})},
            {"window_strides", intsAttr({1, 2})},
            {"base_dilations", intsAttr({1, 2})},
            {"window_dilations", intsAttr({2, 1})},
            {"padding_low", intsAttr({2, 0})},
            {"padding_high", intsAttr({1, 1})}};
  Tensor x = make(DType::F32, {3, 5}, kWindowInput);
  expectTensor(run1(OpCode::ReduceWindow, {x}, a), DType::F32, {2, 5},
               {-1, 2, 2, 5, 5, -3, 4, 0, -4, 3});
}

TEST(InterpReduceWindow, MinOverPaddedBorder) {
  AttrMap a{{"kind", enumAttr("min")},
            {"window_dimensions", intsAttr({2, 2})},
            {"padding_low", intsAttr({1, 1})},
            {"padding_high", intsAttr({1, 1})}};
  Tensor x = make(DType::F16, {3, 5}, kWindowInput);
  expectTensor(
      run1(OpCode::ReduceWindow, {x}, a), DType::F16, {4, 6},
      {-5, -5, -2, -2, 1, 1, -5, -5, -2, -4, -4, 1, -3, -5, -5, -4, -4, 3, -1, -5, -5, -2, -2, 5});
}

TEST(InterpReduceWindow, WindowOnlyOverPaddingGivesTheIdentity) {
  // A [2] operand padded by 3 on each side has 8 positions, x at 3 and 4. Windows of 2 at
  // stride 3 cover {0,1}, {3,4} and {6,7}: the first and last hold only padding.
  AttrMap a{{"kind", enumAttr("max")},
            {"window_dimensions", intsAttr({2})},
            {"window_strides", intsAttr({3})},
            {"padding_low", intsAttr({3})},
            {"padding_high", intsAttr({3})}};
  expectTensor(run1(OpCode::ReduceWindow, {make(DType::F32, {2}, {4, 9})}, a), DType::F32, {3},
               {-kInf, 9, -kInf});
  a["kind"] = enumAttr("sum");
  expectInts(run1(OpCode::ReduceWindow, {makeInts(DType::I8, {2}, {4, 9})}, a), DType::I8, {3},
             {0, 13, 0});
}

// --- cumsum ------------------------------------------------------------------------------------

TEST(InterpCumsum, ExclusiveAndReverse) {
  Tensor x = make(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6});
  auto attrs = [](int64_t axis, bool exclusive, bool reverse) {
    return AttrMap{{"axis", intAttr(axis)},
                   {"exclusive", boolAttr(exclusive)},
                   {"reverse", boolAttr(reverse)}};
  };
  expectTensor(run1(OpCode::Cumsum, {x}, attrs(1, false, false)), DType::F32, {2, 3},
               {1, 3, 6, 4, 9, 15});
  expectTensor(run1(OpCode::Cumsum, {x}, attrs(1, true, false)), DType::F32, {2, 3},
               {0, 1, 3, 0, 4, 9});
  expectTensor(run1(OpCode::Cumsum, {x}, attrs(1, false, true)), DType::F32, {2, 3},
               {6, 5, 3, 15, 11, 6});
  expectTensor(run1(OpCode::Cumsum, {x}, attrs(1, true, true)), DType::F32, {2, 3},
               {5, 3, 0, 11, 6, 0});
  expectTensor(run1(OpCode::Cumsum, {x}, attrs(0, false, false)), DType::F32, {2, 3},
               {1, 2, 3, 5, 7, 9});
}

TEST(InterpCumsum, IntegersWrapAndHalfAccumulatesInF32) {
  // i8: 100, 200 = -56, 300 = 44 (mod 256).
  expectInts(
      run1(OpCode::Cumsum, {makeInts(DType::I8, {3}, {100, 100, 100})}, {{"axis", intAttr(0)}}),
      DType::I8, {3}, {100, -56, 44});
  // Running f32 sums 2048, 2049, 2050, 2051, 2052 stored as f16 (spacing 2, ties to even):
  // 2049 -> 2048, 2051 -> 2052.
  expectTensor(
      run1(OpCode::Cumsum, {make(DType::F16, {5}, {2048, 1, 1, 1, 1})}, {{"axis", intAttr(0)}}),
      DType::F16, {5}, {2048, 2048, 2050, 2052, 2052});
}

// --- sort / top_k ------------------------------------------------------------------------------

TEST(InterpSort, NaNLastAscendingAndFirstDescending) {
  Tensor x = make(DType::F32, {6}, {3, kNaN, 1, 3, -kInf, 2});
  auto asc = run(OpCode::Sort, {x}, {{"dimension", intAttr(0)}});
  ASSERT_EQ(asc.size(), 2u);
  expectTensor(asc[0], DType::F32, {6}, {-kInf, 1, 2, 3, 3, kNaN});
  expectInts(asc[1], DType::I64, {6}, {4, 2, 5, 0, 3, 1});  // the two 3s keep their order
  auto desc = run(OpCode::Sort, {x}, {{"dimension", intAttr(0)}, {"descending", boolAttr(true)}});
  ASSERT_EQ(desc.size(), 2u);
  expectTensor(desc[0], DType::F32, {6}, {kNaN, 3, 3, 2, 1, -kInf});
  expectInts(desc[1], DType::I64, {6}, {1, 0, 3, 5, 2, 4});
}

TEST(InterpSort, AlongTheFirstDimOfAMatrix) {
  // Columns of [[5,-1],[2,-1],[5,0]]: (5,2,5) -> (2,5,5) from rows (1,0,2); (-1,-1,0) stays.
  Tensor x = makeInts(DType::I32, {3, 2}, {5, -1, 2, -1, 5, 0});
  auto asc = run(OpCode::Sort, {x}, {{"dimension", intAttr(0)}});
  ASSERT_EQ(asc.size(), 2u);
  expectInts(asc[0], DType::I32, {3, 2}, {2, -1, 5, -1, 5, 0});
  expectInts(asc[1], DType::I64, {3, 2}, {1, 0, 0, 1, 2, 2});
  auto desc = run(OpCode::Sort, {x}, {{"dimension", intAttr(0)}, {"descending", boolAttr(true)}});
  ASSERT_EQ(desc.size(), 2u);
  expectInts(desc[0], DType::I32, {3, 2}, {5, 0, 5, -1, 2, -1});
  expectInts(desc[1], DType::I64, {3, 2}, {0, 2, 2, 0, 1, 1});
}

TEST(InterpSort, ValuesKeepTheirBitsAndEqualValuesTheirOrder) {
  // +0 and -0 compare equal, so a stable sort keeps them in input order, signs intact.
  Tensor x = make(DType::F16, {3}, {0.0, -0.0, -1});
  auto r = run(OpCode::Sort, {x}, {{"dimension", intAttr(0)}});
  ASSERT_EQ(r.size(), 2u);
  expectInts(r[1], DType::I64, {3}, {2, 0, 1});
  EXPECT_EQ(r[0].data<uint16_t>()[1], 0x0000);  // +0
  EXPECT_EQ(r[0].data<uint16_t>()[2], 0x8000);  // -0
  Tensor b = makeInts(DType::Bool, {4}, {1, 0, 1, 0});
  auto rb = run(OpCode::Sort, {b}, {{"dimension", intAttr(0)}});
  ASSERT_EQ(rb.size(), 2u);
  expectInts(rb[0], DType::Bool, {4}, {0, 0, 1, 1});
  expectInts(rb[1], DType::I64, {4}, {1, 3, 0, 2});
}

TEST(InterpTopK, TiesKeepTheLowerIndexFirst) {
  Tensor x = make(DType::F32, {5}, {1, 3, 3, 2, 3});
  auto top = run(OpCode::TopK, {x}, {{"k", intAttr(3)}, {"axis", intAttr(0)}});
  ASSERT_EQ(top.size(), 2u);
  expectTensor(top[0], DType::F32, {3}, {3, 3, 3});
  expectInts(top[1], DType::I64, {3}, {1, 2, 4});
  auto low = run(OpCode::TopK, {x},
                 {{"k", intAttr(2)}, {"axis", intAttr(0)}, {"largest", boolAttr(false)}});
  ASSERT_EQ(low.size(), 2u);
  expectTensor(low[0], DType::F32, {2}, {1, 2});
  expectInts(low[1], DType::I64, {2}, {0, 3});
}

TEST(InterpTopK, AlongAxisZeroAndKZero) {
  // Columns of [[1,9],[7,9],[4,2]]: the top 2 of (1,7,4) are 7,4 from rows 1,2; of (9,9,2)
  // they are 9,9 from rows 0,1 (the tie keeps row order).
  Tensor x = makeInts(DType::I64, {3, 2}, {1, 9, 7, 9, 4, 2});
  auto top = run(OpCode::TopK, {x}, {{"k", intAttr(2)}, {"axis", intAttr(0)}});
  ASSERT_EQ(top.size(), 2u);
  expectInts(top[0], DType::I64, {2, 2}, {7, 9, 4, 9});
  expectInts(top[1], DType::I64, {2, 2}, {1, 0, 2, 1});
  auto none = run(OpCode::TopK, {x}, {{"k", intAttr(0)}, {"axis", intAttr(1)}});
  ASSERT_EQ(none.size(), 2u);
  expectInts(none[0], DType::I64, {3, 0}, {});
  expectInts(none[1], DType::I64, {3, 0}, {});
}

TEST(InterpTopK, NaNIsTheLargest) {
  Tensor x = make(DType::F64, {4}, {2, kNaN, 5, -1});
  auto top = run(OpCode::TopK, {x}, {{"k", intAttr(2)}, {"axis", intAttr(0)}});
  ASSERT_EQ(top.size(), 2u);
  expectTensor(top[0], DType::F64, {2}, {kNaN, 5});
  expectInts(top[1], DType::I64, {2}, {1, 2});
  auto low = run(OpCode::TopK, {x},
                 {{"k", intAttr(4)}, {"axis", intAttr(0)}, {"largest", boolAttr(false)}});
  ASSERT_EQ(low.size(), 2u);
  expectTensor(low[0], DType::F64, {4}, {-1, 2, 5, kNaN});
  expectInts(low[1], DType::I64, {4}, {3, 0, 2, 1});
}

// top_k of long rows (sorting only its k first): each row's k first against a stable sort of
// the whole row written here, with many ties and NaNs, both directions, along either axis.
TEST(InterpTopK, LongRowsMatchAStableSort) {
  const int64_t rows = 3, n = 5000;
  std::vector<double> v(static_cast<size_t>(rows * n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = i % 97 == 0 ? kNaN : double((i * 7919) % 61);
  for (bool largest : {true, false})
    for (int64_t axis : {0, 1}) {
      std::vector<int64_t> dims =
          axis == 1 ? std::vector<int64_t>{rows, n} : std::vector<int64_t>{n, rows};
      Tensor x = make(DType::F32, dims, v);
      const int64_t k = 9;
      auto top = run(OpCode::TopK, {x},
                     {{"k", intAttr(k)}, {"axis", intAttr(axis)}, {"largest", boolAttr(largest)}});
      ASSERT_EQ(top.size(), 2u);
      for (int64_t r = 0; r < rows; ++r) {
        auto at = [&](int64_t j) { return axis == 1 ? r * n + j : j * rows + r; };
        std::vector<int64_t> order(static_cast<size_t>(n));
        for (int64_t j = 0; j < n; ++j) order[static_cast<size_t>(j)] = j;
        auto value = [&](int64_t j) { return static_cast<float>(v[static_cast<size_t>(at(j))]); };
        std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
          float p = value(a), q = value(b);
          if (largest) return std::isnan(p) ? !std::isnan(q) : (!std::isnan(q) && p > q);
          return std::isnan(p) ? false : (std::isnan(q) || p < q);
        });
        for (int64_t j = 0; j < k; ++j) {
          const int64_t o = axis == 1 ? r * k + j : j * rows + r;
          EXPECT_EQ(top[1].data<int64_t>()[o], order[static_cast<size_t>(j)])
              << "row " << r << " position " << j << " axis " << axis << " largest " << largest;
        }
      }
    }
}

// --- u16 / u32 / u64 ---------------------------------------------------------------------------

TEST(InterpUnsigned, MaxMinReduceAboveTheSignedRange) {
  // u32: 3000000000 > 2^31 would be negative as i32; it is the max, 5 the min.
  Tensor x32 = makeUInts(DType::U32, {3}, {5, 3000000000u, 2147483648u});
  expectUInts(run1(OpCode::Reduce, {x32}, reduceAttrs({0}, "max")), DType::U32, {}, {3000000000u});
  expectUInts(run1(OpCode::Reduce, {x32}, reduceAttrs({0}, "min")), DType::U32, {}, {5});
  // u64: 2^63 + 5 and 2^64 - 1 are above INT64_MAX.
  Tensor x64 = makeUInts(DType::U64, {2, 2}, {k2p63 + 5, 1, kU64Max, k2p63});
  expectUInts(run1(OpCode::Reduce, {x64}, reduceAttrs({0}, "max")), DType::U64, {2},
              {kU64Max, k2p63});
  expectUInts(run1(OpCode::Reduce, {x64}, reduceAttrs({1}, "min")), DType::U64, {2}, {1, k2p63});
  // u16: 40000 > 32767.
  expectUInts(run1(OpCode::Reduce, {makeUInts(DType::U16, {3}, {40000, 7, 32767})},
                   reduceAttrs({0}, "max")),
              DType::U16, {}, {40000});
}

TEST(InterpUnsigned, SumAndProdWrapAndEmptyGivesTheIdentity) {
  // u16: 65535 + 2 = 1 (mod 2^16); u32: 65536 * 65536 = 0 (mod 2^32);
  // u64: (2^64 - 1) + (2^64 - 1) = 2^64 - 2.
  expectUInts(
      run1(OpCode::Reduce, {makeUInts(DType::U16, {2}, {65535, 2})}, reduceAttrs({0}, "sum")),
      DType::U16, {}, {1});
  expectUInts(
      run1(OpCode::Reduce, {makeUInts(DType::U32, {2}, {65536, 65536})}, reduceAttrs({0}, "prod")),
      DType::U32, {}, {0});
  expectUInts(run1(OpCode::Reduce, {makeUInts(DType::U64, {2}, {kU64Max, kU64Max})},
                   reduceAttrs({0}, "sum")),
              DType::U64, {}, {kU64Max - 1});
  // Empty max starts from 0, empty min from the type's maximum.
  expectUInts(run1(OpCode::Reduce, {Tensor(DType::U16, {0})}, reduceAttrs({0}, "min")), DType::U16,
              {}, {65535});
  expectUInts(run1(OpCode::Reduce, {Tensor(DType::U32, {0})}, reduceAttrs({0}, "min")), DType::U32,
              {}, {4294967295u});
  expectUInts(run1(OpCode::Reduce, {Tensor(DType::U64, {2, 0})}, reduceAttrs({1}, "min")),
              DType::U64, {2}, {kU64Max, kU64Max});
  expectUInts(run1(OpCode::Reduce, {Tensor(DType::U64, {0})}, reduceAttrs({0}, "max")), DType::U64,
              {}, {0});
}

TEST(InterpUnsigned, ArgMaxSortTopKAndCumsumOrderUnsigned) {
  Tensor x = makeUInts(DType::U64, {4}, {7, k2p63 + 1, 0, k2p63});
  AttrMap axis0{{"axis", intAttr(0)}};
  expectInts(run1(OpCode::ArgMax, {x}, axis0), DType::I64, {}, {1});
  expectInts(run1(OpCode::ArgMin, {x}, axis0), DType::I64, {}, {2});
  auto asc = run(OpCode::Sort, {x}, {{"dimension", intAttr(0)}});
  ASSERT_EQ(asc.size(), 2u);
  expectUInts(asc[0], DType::U64, {4}, {0, 7, k2p63, k2p63 + 1});
  expectInts(asc[1], DType::I64, {4}, {2, 0, 3, 1});
  Tensor y = makeUInts(DType::U32, {4}, {4000000000u, 1, 3000000000u, 2});
  auto top = run(OpCode::TopK, {y}, {{"k", intAttr(2)}, {"axis", intAttr(0)}});
  ASSERT_EQ(top.size(), 2u);
  expectUInts(top[0], DType::U32, {2}, {4000000000u, 3000000000u});
  expectInts(top[1], DType::I64, {2}, {0, 2});
  // u16 cumsum wraps: 60000, 60000 + 10000 = 70000 - 65536 = 4464, 4464 + 1 = 4465.
  expectUInts(run1(OpCode::Cumsum, {makeUInts(DType::U16, {3}, {60000, 10000, 1})}, axis0),
              DType::U16, {3}, {60000, 4464, 4465});
}

}  // namespace
}  // namespace kiln
