// Reference interpreter: data-movement ops (broadcast_in_dim, reshape, transpose, slice,
// dynamic_slice, dynamic_update_slice, concatenate, pad, gather, scatter, reverse, resize,
// grid_sample).
//
// Expected values are worked out by hand (the reasoning is next to each case), computed with
// numpy by /usr/bin/python3 (the expression is next to the numbers), or copied from the ONNX
// backend test data (/usr/share/libonnx-testdata/data/node/test_resize_*).
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

Tensor make(DType t, std::vector<int64_t> dims, const std::vector<double>& values) {
  Tensor x(t, std::move(dims));
  EXPECT_EQ(static_cast<size_t>(x.numElements()), values.size());
  for (size_t i = 0; i < values.size() && i < size_t(x.numElements()); ++i)
    x.setDouble(static_cast<int64_t>(i), values[i]);
  return x;
}

Tensor makeInts(DType t, std::vector<int64_t> dims, const std::vector<int64_t>& values) {
  Tensor x(t, std::move(dims));
  EXPECT_EQ(static_cast<size_t>(x.numElements()), values.size());
  for (size_t i = 0; i < values.size() && i < size_t(x.numElements()); ++i)
    x.setInt(static_cast<int64_t>(i), values[i]);
  return x;
}

// 0, 1, 2, ... as dtype t.
Tensor range(DType t, std::vector<int64_t> dims, int64_t first = 0) {
  Tensor x(t, std::move(dims));
  for (int64_t i = 0; i < x.numElements(); ++i) x.setInt(i, first + i);
  return x;
}

Tensor scalarInt(DType t, int64_t v) { return makeInts(t, {}, {v}); }

StatusOr<std::vector<Tensor>> tryRun(OpCode op, const std::vector<Tensor>& inputs,
                                     AttrMap attrs = {}, std::vector<TensorType> declared = {}) {
  Module m;
  Function* f = m.addFunction("main");
  Builder b(f);
  std::vector<Value*> params;
  for (const Tensor& t : inputs) params.push_back(b.parameter(t.type()));
  std::vector<Value*> results = b.opN(op, params, std::move(attrs), std::move(declared));
  if (!b.ok()) return b.status();
  f->setOutputs(results);
  return interpret(*f, inputs);
}

Tensor run1(OpCode op, const std::vector<Tensor>& inputs, AttrMap attrs = {},
            std::vector<TensorType> declared = {}) {
  auto r = tryRun(op, inputs, std::move(attrs), std::move(declared));
  EXPECT_TRUE(r.isOk()) << r.status().str();
  return r.isOk() && !r->empty() ? (*r)[0] : Tensor();
}

void expectValues(const Tensor& t, DType dtype, const std::vector<int64_t>& dims,
                  const std::vector<double>& want, double relTol = 0) {
  ASSERT_TRUE(t.defined());
  EXPECT_EQ(t.dtype(), dtype);
  ASSERT_EQ(t.dims(), dims);
  ASSERT_EQ(static_cast<size_t>(t.numElements()), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    double got = t.getDouble(static_cast<int64_t>(i));
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got)) << "element " << i << ": got " << got;
    } else if (relTol == 0) {
      EXPECT_EQ(got, want[i]) << "element " << i;
    } else {
      EXPECT_NEAR(got, want[i], relTol * std::max(1.0, std::fabs(want[i]))) << "element " << i;
    }
  }
}

void expectInts(const Tensor& t, DType dtype, const std::vector<int64_t>& dims,
                const std::vector<int64_t>& want) {
  ASSERT_TRUE(t.defined());
  EXPECT_EQ(t.dtype(), dtype);
  ASSERT_EQ(t.dims(), dims);
  ASSERT_EQ(static_cast<size_t>(t.numElements()), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(t.getInt(static_cast<int64_t>(i)), want[i]) << "element " << i;
}

AttrMap ints(std::initializer_list<std::pair<const char*, std::vector<int64_t>>> kv) {
  AttrMap a;
  for (const auto& [k, v] : kv) a[k] = intsAttr(v);
  return a;
}

// ---- broadcast, reshape, transpose, slice, reverse ----

TEST(InterpDataMovement, BroadcastInDimMapsAndExpands) {
  // f32[3] along result dim 1 of [2,3]: each row is the operand.
  Tensor x = make(DType::F32, {3}, {1, 2, 3});
  Tensor y = run1(OpCode::BroadcastInDim, {x}, ints({{"dims", {1}}}),
                  {TensorType::of(DType::F32, {2, 3})});
  expectValues(y, DType::F32, {2, 3}, {1, 2, 3, 1, 2, 3});
  // i8[3,1] to [3,4]: the size-1 dim repeats.
  Tensor c = makeInts(DType::I8, {3, 1}, {-1, 5, 7});
  Tensor z = run1(OpCode::BroadcastInDim, {c}, ints({{"dims", {0, 1}}}),
                  {TensorType::of(DType::I8, {3, 4})});
  expectInts(z, DType::I8, {3, 4}, {-1, -1, -1, -1, 5, 5, 5, 5, 7, 7, 7, 7});
  // A rank-0 bool to [2,2]; and [2] to [2,0,3] (zero-size result).
  Tensor b = run1(OpCode::BroadcastInDim, {makeInts(DType::Bool, {}, {1})}, ints({{"dims", {}}}),
                  {TensorType::of(DType::Bool, {2, 2})});
  expectInts(b, DType::Bool, {2, 2}, {1, 1, 1, 1});
  Tensor e = run1(OpCode::BroadcastInDim, {make(DType::F32, {2}, {1, 2})}, ints({{"dims", {0}}}),
                  {TensorType::of(DType::F32, {2, 0, 3})});
  expectValues(e, DType::F32, {2, 0, 3}, {});
  // numpy: np.broadcast_to(np.array([[1],[2]])[:, None, :], (2, 2, 3)).transpose(...) is the
  // same as placing operand dim 0 at result dim 2: [2,1] -> [3,1,2] with dims [2,1].
  Tensor t = run1(OpCode::BroadcastInDim, {make(DType::F64, {2, 1}, {1, 2})},
                  ints({{"dims", {2, 1}}}), {TensorType::of(DType::F64, {3, 1, 2})});
  expectValues(t, DType::F64, {3, 1, 2}, {1, 2, 1, 2, 1, 2});
}

TEST(InterpDataMovement, ReshapeKeepsRowMajorOrder) {
  Tensor x = range(DType::I32, {2, 3});
  Tensor y = run1(OpCode::Reshape, {x}, {}, {TensorType::of(DType::I32, {3, 1, 2})});
  expectInts(y, DType::I32, {3, 1, 2}, {0, 1, 2, 3, 4, 5});
  // The result does not share bytes with the input.
  EXPECT_NE(y.bytes(), x.bytes());
  Tensor s = run1(OpCode::Reshape, {make(DType::F16, {1, 1}, {2.5})}, {},
                  {TensorType::of(DType::F16, {})});
  expectValues(s, DType::F16, {}, {2.5});
}

TEST(InterpDataMovement, TransposeMatchesNumpy) {
  // numpy: np.transpose(np.arange(24).reshape(2,3,4), (2,0,1)).flatten()
  Tensor y =
      run1(OpCode::Transpose, {range(DType::I64, {2, 3, 4})}, ints({{"permutation", {2, 0, 1}}}));
  expectInts(y, DType::I64, {4, 2, 3}, {0, 4, 8,  12, 16, 20, 1, 5, 9,  13, 17, 21,
                                        2, 6, 10, 14, 18, 22, 3, 7, 11, 15, 19, 23});
  // bf16 (2-byte elements) and a zero-size dim.
  Tensor h = run1(OpCode::Transpose, {make(DType::BF16, {2, 2}, {1, 2, 3, 4})},
                  ints({{"permutation", {1, 0}}}));
  expectValues(h, DType::BF16, {2, 2}, {1, 3, 2, 4});
  Tensor z =
      run1(OpCode::Transpose, {make(DType::F32, {0, 3}, {})}, ints({{"permutation", {1, 0}}}));
  expectValues(z, DType::F32, {3, 0}, {});
}

TEST(InterpDataMovement, LargeTransposesMatchTheDefinition) {
  // Transposes whose source walks another dim fastest are copied in 32x32 tiles: extents that
  // are not multiples of 32, a 3x3 window (too small to tile), and the OIHW -> HWIO weight
  // transpose; every element is checked against y[i] = x[permuted i].
  struct Case {
    std::vector<int64_t> dims, perm;
  };
  for (const Case& c : {Case{{70, 45}, {1, 0}}, Case{{40, 33, 3, 3}, {2, 3, 1, 0}},
                        Case{{3, 37, 2, 65}, {0, 3, 2, 1}}, Case{{9, 50, 4}, {2, 1, 0}}}) {
    Tensor x = range(DType::I32, c.dims);
    Tensor y = run1(OpCode::Transpose, {x}, ints({{"permutation", c.perm}}));
    std::vector<int64_t> ydims, xs = x.strides();
    for (int64_t p : c.perm) ydims.push_back(c.dims[static_cast<size_t>(p)]);
    ASSERT_EQ(y.dims(), ydims);
    std::vector<int64_t> idx(ydims.size(), 0);
    for (int64_t i = 0; i < y.numElements(); ++i) {
      int64_t at = 0;
      for (size_t k = 0; k < idx.size(); ++k) at += idx[k] * xs[static_cast<size_t>(c.perm[k])];
      ASSERT_EQ(y.getInt(i), x.getInt(at)) << "element " << i;
      for (size_t k = idx.size(); k-- > 0 && ++idx[k] == ydims[k];) idx[k] = 0;
    }
  }
}

TEST(InterpDataMovement, SliceWithStrides) {
  // numpy: np.arange(24).reshape(2,3,4)[:, ::2, 1:4:2] -> shape (2,2,2)
  Tensor y = run1(OpCode::Slice, {range(DType::I32, {2, 3, 4})},
                  ints({{"start", {0, 0, 1}}, {"limit", {2, 3, 4}}, {"stride", {1, 2, 2}}}));
  expectInts(y, DType::I32, {2, 2, 2}, {1, 3, 9, 11, 13, 15, 21, 23});
  // Default stride 1; an empty slice (start == limit).
  Tensor z = run1(OpCode::Slice, {range(DType::F32, {5})}, ints({{"start", {1}}, {"limit", {4}}}));
  expectValues(z, DType::F32, {3}, {1, 2, 3});
  Tensor e = run1(OpCode::Slice, {range(DType::F32, {5})}, ints({{"start", {2}}, {"limit", {2}}}));
  expectValues(e, DType::F32, {0}, {});
}

TEST(InterpDataMovement, ReverseSomeDims) {
  // numpy: np.arange(24).reshape(2,3,4)[::-1, :, ::-1].flatten()
  Tensor y = run1(OpCode::Reverse, {range(DType::U8, {2, 3, 4})}, ints({{"dims", {0, 2}}}));
  expectInts(y, DType::U8, {2, 3, 4}, {15, 14, 13, 12, 19, 18, 17, 16, 23, 22, 21, 20,
                                       3,  2,  1,  0,  7,  6,  5,  4,  11, 10, 9,  8});
  Tensor z = run1(OpCode::Reverse, {make(DType::F32, {0, 2}, {})}, ints({{"dims", {0, 1}}}));
  expectValues(z, DType::F32, {0, 2}, {});
}

// ---- dynamic slices ----

TEST(InterpDataMovement, DynamicSliceClampsStarts) {
  Tensor x = range(DType::F32, {4, 5});
  AttrMap sizes = ints({{"sizes", {2, 3}}});
  // In bounds: rows 1-2, cols 1-3.
  Tensor a =
      run1(OpCode::DynamicSlice, {x, scalarInt(DType::I32, 1), scalarInt(DType::I32, 1)}, sizes);
  expectValues(a, DType::F32, {2, 3}, {6, 7, 8, 11, 12, 13});
  // Row start 5 clamps to 4-2 = 2; column start -3 clamps to 0 (i64 and u8 start types too).
  Tensor b =
      run1(OpCode::DynamicSlice, {x, scalarInt(DType::I64, 5), scalarInt(DType::I64, -3)}, sizes);
  expectValues(b, DType::F32, {2, 3}, {10, 11, 12, 15, 16, 17});
  Tensor c =
      run1(OpCode::DynamicSlice, {x, scalarInt(DType::U8, 200), scalarInt(DType::I8, 4)}, sizes);
  expectValues(c, DType::F32, {2, 3}, {12, 13, 14, 17, 18, 19});
}

TEST(InterpDataMovement, DynamicUpdateSliceClampsStarts) {
  Tensor x = makeInts(DType::I32, {3, 3}, {0, 0, 0, 0, 0, 0, 0, 0, 0});
  Tensor u = makeInts(DType::I32, {2, 2}, {1, 2, 3, 4});
  Tensor a =
      run1(OpCode::DynamicUpdateSlice, {x, u, scalarInt(DType::I32, 0), scalarInt(DType::I32, 1)});
  expectInts(a, DType::I32, {3, 3}, {0, 1, 2, 0, 3, 4, 0, 0, 0});
  // Starts (9, -1) clamp to (1, 0).
  Tensor b =
      run1(OpCode::DynamicUpdateSlice, {x, u, scalarInt(DType::I64, 9), scalarInt(DType::I64, -1)});
  expectInts(b, DType::I32, {3, 3}, {0, 0, 0, 1, 2, 0, 3, 4, 0});
  // The operand itself is not modified.
  expectInts(x, DType::I32, {3, 3}, {0, 0, 0, 0, 0, 0, 0, 0, 0});
}

// ---- concatenate, pad ----

TEST(InterpDataMovement, ConcatenateAlongInnerDimWithEmptyOperand) {
  Tensor a = range(DType::I16, {2, 2}, 0);
  Tensor e = range(DType::I16, {2, 0});
  Tensor b = range(DType::I16, {2, 1}, 10);
  Tensor y = run1(OpCode::Concatenate, {a, e, b}, {{"dimension", intAttr(1)}});
  expectInts(y, DType::I16, {2, 3}, {0, 1, 10, 2, 3, 11});
  Tensor z = run1(OpCode::Concatenate, {a, b.reshaped({1, 2})}, {{"dimension", intAttr(0)}});
  expectInts(z, DType::I16, {3, 2}, {0, 1, 2, 3, 10, 11});
}

TEST(InterpDataMovement, PadLowHighInterior) {
  Tensor x = make(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor v = make(DType::F32, {}, {-1});
  // numpy reference for interior padding: out = np.full((1+2+1+1, 0+1+3+2*1), -1);
  // out[1:4:2, 0:5:2] = x  -> rows 1 and 3, columns 0, 2, 4; result 5 x 6.
  Tensor y =
      run1(OpCode::Pad, {x, v}, ints({{"low", {1, 0}}, {"high", {1, 1}}, {"interior", {1, 1}}}));
  expectValues(y, DType::F32, {5, 6}, {-1, -1, -1, -1, -1, -1, 1,  -1, 2,  -1, 3,  -1, -1, -1, -1,
                                       -1, -1, -1, 4,  -1, 5,  -1, 6,  -1, -1, -1, -1, -1, -1, -1});
}

TEST(InterpDataMovement, PadNegativeCrops) {
  // numpy: np.pad(x, ((0, 0), (0, 2)), constant_values=9)[:, 1:] for low -1, high 2 on dim 1.
  Tensor x = makeInts(DType::I32, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor v = makeInts(DType::I32, {}, {9});
  Tensor y = run1(OpCode::Pad, {x, v}, ints({{"low", {0, -1}}, {"high", {-1, 2}}}));
  expectInts(y, DType::I32, {1, 4}, {2, 3, 9, 9});
  // Negative low with interior: [1,2,3] interior 1 is [1,_,2,_,3]; low -2 drops "1,_";
  // high -1 drops the last element "3": [2, _] with _ = 0.
  Tensor r =
      run1(OpCode::Pad, {makeInts(DType::I64, {3}, {1, 2, 3}), makeInts(DType::I64, {}, {0})},
           ints({{"low", {-2}}, {"high", {-1}}, {"interior", {1}}}));
  expectInts(r, DType::I64, {2}, {2, 0});
  // An empty operand padded: only padding values.
  Tensor e = run1(OpCode::Pad, {make(DType::F16, {0}, {}), make(DType::F16, {}, {0.5})},
                  ints({{"low", {1}}, {"high", {2}}, {"interior", {3}}}));
  expectValues(e, DType::F16, {3}, {0.5, 0.5, 0.5});
}

// ---- gather ----

TEST(InterpDataMovement, GatherStableHloExample) {
  // The example of the StableHLO spec (gather without batching dims), checked with a direct
  // transcription of the spec's formulas in Python.
  Tensor x = range(DType::I32, {3, 4, 2}, 1);
  Tensor idx = makeInts(DType::I64, {2, 3, 2}, {0, 0, 1, 0, 2, 1, 0, 1, 1, 1, 0, 9});
  AttrMap a = ints({{"offset_dims", {2, 3}},
                    {"collapsed_slice_dims", {0}},
                    {"start_index_map", {1, 0}},
                    {"slice_sizes", {1, 2, 2}}});
  a["index_vector_dim"] = intAttr(2);
  Tensor y = run1(OpCode::Gather, {x, idx}, a);
  expectInts(y, DType::I32, {2, 3, 2, 2}, {1, 2,  3,  4,  3,  4,  5,  6,  13, 14, 15, 16,
                                           9, 10, 11, 12, 11, 12, 13, 14, 17, 18, 19, 20});
}

TEST(InterpDataMovement, GatherRowsWithImplicitIndexVectorAndClamping) {
  // Embedding lookup: rows 3, 7 (clamped to 3), -2 (clamped to 0) of a 4x3 table.
  Tensor table = range(DType::F32, {4, 3});
  Tensor idx = makeInts(DType::I32, {3}, {3, 7, -2});
  AttrMap a = ints({{"offset_dims", {1}},
                    {"collapsed_slice_dims", {0}},
                    {"start_index_map", {0}},
                    {"slice_sizes", {1, 3}}});
  a["index_vector_dim"] = intAttr(1);
  Tensor y = run1(OpCode::Gather, {table, idx}, a);
  expectValues(y, DType::F32, {3, 3}, {9, 10, 11, 9, 10, 11, 0, 1, 2});
  // Windows of 3 from [10..14]: start 4 clamps to 2, -1 to 0.
  Tensor v = range(DType::I8, {5}, 10);
  Tensor s = makeInts(DType::U8, {3, 1}, {4, 255, 1});
  AttrMap w = ints({{"offset_dims", {1}},
                    {"collapsed_slice_dims", {}},
                    {"start_index_map", {0}},
                    {"slice_sizes", {3}}});
  w["index_vector_dim"] = intAttr(1);
  expectInts(run1(OpCode::Gather, {v, s}, w), DType::I8, {3, 3},
             {12, 13, 14, 12, 13, 14, 11, 12, 13});
  s = makeInts(DType::I64, {3, 1}, {4, -1, 1});
  expectInts(run1(OpCode::Gather, {v, s}, w), DType::I8, {3, 3},
             {12, 13, 14, 10, 11, 12, 11, 12, 13});
}

TEST(InterpDataMovement, GatherWithNoIndices) {
  Tensor table = range(DType::F32, {4, 3});
  Tensor idx = makeInts(DType::I32, {0}, {});
  AttrMap a = ints({{"offset_dims", {1}},
                    {"collapsed_slice_dims", {0}},
                    {"start_index_map", {0}},
                    {"slice_sizes", {1, 3}}});
  a["index_vector_dim"] = intAttr(1);
  expectValues(run1(OpCode::Gather, {table, idx}, a), DType::F32, {0, 3}, {});
}

// ---- scatter ----

AttrMap scatterAttrs(std::vector<int64_t> windowDims, std::vector<int64_t> inserted,
                     std::vector<int64_t> toOperand, int64_t indexVectorDim,
                     const std::string& reduction) {
  AttrMap a = ints({{"update_window_dims", windowDims},
                    {"inserted_window_dims", inserted},
                    {"scatter_dims_to_operand_dims", toOperand}});
  a["index_vector_dim"] = intAttr(indexVectorDim);
  a["reduction"] = enumAttr(reduction);
  return a;
}

TEST(InterpDataMovement, ScatterStableHloExample) {
  // The StableHLO spec's scatter example with reduction add (checked with a transcription of
  // the spec in Python): the window at start (9, 0) is out of bounds and skipped.
  Tensor x = range(DType::I64, {3, 4, 2}, 1);
  Tensor idx = makeInts(DType::I64, {2, 3, 2}, {0, 2, 1, 0, 2, 1, 0, 1, 1, 0, 0, 9});
  Tensor upd = makeInts(DType::I64, {2, 3, 2, 2}, std::vector<int64_t>(24, 1));
  Tensor y = run1(OpCode::Scatter, {x, idx, upd}, scatterAttrs({2, 3}, {0}, {1, 0}, 2, "add"));
  expectInts(y, DType::I64, {3, 4, 2}, {1,  2,  5,  6,  7,  8,  7,  8,  10, 11, 12, 13,
                                        14, 15, 16, 17, 18, 19, 20, 21, 21, 22, 23, 24});
}

TEST(InterpDataMovement, ScatterDuplicatesAndOutOfBounds) {
  // Operand [2,2,2,2,2]; indices 1, 3, 1 (duplicate), 5 and -1 (out of bounds: skipped);
  // updates 10, 20, 30, 40, 50. Python transcription of the spec gives:
  //   none: [2,30,2,20,2] (the later duplicate wins)   add: [2,42,2,22,2]
  //   mul:  [2,600,2,40,2]   max: [2,30,2,20,2]   min: [2,2,2,2,2]
  Tensor x = makeInts(DType::I32, {5}, {2, 2, 2, 2, 2});
  Tensor idx = makeInts(DType::I32, {5, 1}, {1, 3, 1, 5, -1});
  Tensor upd = makeInts(DType::I32, {5}, {10, 20, 30, 40, 50});
  const std::vector<std::pair<std::string, std::vector<int64_t>>> cases = {
      {"none", {2, 30, 2, 20, 2}},
      {"add", {2, 42, 2, 22, 2}},
      {"mul", {2, 600, 2, 40, 2}},
      {"max", {2, 30, 2, 20, 2}},
      {"min", {2, 2, 2, 2, 2}}};
  for (const auto& [reduction, want] : cases) {
    SCOPED_TRACE(reduction);
    Tensor y = run1(OpCode::Scatter, {x, idx, upd}, scatterAttrs({}, {0}, {0}, 1, reduction));
    expectInts(y, DType::I32, {5}, want);
  }
}

TEST(InterpDataMovement, ScatterWindowsSkipWhenPartlyOutside) {
  // Windows of 2x3 rows into a 4x3 operand at row starts 0, 3 (rows 3-4: does not fit, skipped)
  // and 2. Python transcription: [1..6, 13..18].
  Tensor x = makeInts(DType::I32, {4, 3}, std::vector<int64_t>(12, 0));
  Tensor idx = makeInts(DType::I32, {3, 1}, {0, 3, 2});
  Tensor upd = range(DType::I32, {3, 2, 3}, 1);
  Tensor y = run1(OpCode::Scatter, {x, idx, upd}, scatterAttrs({1, 2}, {}, {0}, 1, "none"));
  expectInts(y, DType::I32, {4, 3}, {1, 2, 3, 4, 5, 6, 13, 14, 15, 16, 17, 18});
}

TEST(InterpDataMovement, ScatterFloatAndWrappingCombiners) {
  // f32 max propagates NaN; add of f16 rounds: 1 + 2^-11 ties to 1, then + 2^-11 again is 1.
  Tensor x = make(DType::F32, {2}, {1, 5});
  Tensor idx = makeInts(DType::I32, {2, 1}, {0, 1});
  Tensor upd = make(DType::F32, {2}, {kNaN, 3});
  expectValues(run1(OpCode::Scatter, {x, idx, upd}, scatterAttrs({}, {0}, {0}, 1, "max")),
               DType::F32, {2}, {kNaN, 5});
  Tensor h = make(DType::F16, {1}, {1});
  Tensor hidx = makeInts(DType::I32, {2, 1}, {0, 0});
  Tensor hupd = make(DType::F16, {2}, {0.00048828125, 0.00048828125});
  expectValues(run1(OpCode::Scatter, {h, hidx, hupd}, scatterAttrs({}, {0}, {0}, 1, "add")),
               DType::F16, {1}, {1});
  // i8 mul wraps: 16 * 16 = 256 = 0 (mod 256); u8 add: 250 + 10 = 4 (mod 256).
  Tensor i = makeInts(DType::I8, {1}, {16});
  expectInts(run1(OpCode::Scatter,
                  {i, makeInts(DType::I32, {1, 1}, {0}), makeInts(DType::I8, {1}, {16})},
                  scatterAttrs({}, {0}, {0}, 1, "mul")),
             DType::I8, {1}, {0});
  Tensor u = makeInts(DType::U8, {1}, {250});
  expectInts(run1(OpCode::Scatter,
                  {u, makeInts(DType::I32, {1, 1}, {0}), makeInts(DType::U8, {1}, {10})},
                  scatterAttrs({}, {0}, {0}, 1, "add")),
             DType::U8, {1}, {4});
  // bool with max (or).
  Tensor b = makeInts(DType::Bool, {2}, {0, 0});
  expectInts(run1(OpCode::Scatter, {b, idx, makeInts(DType::Bool, {2}, {1, 0})},
                  scatterAttrs({}, {0}, {0}, 1, "max")),
             DType::Bool, {2}, {1, 0});
}

// ---- resize ----

struct ResizeCase {
  const char* name;
  const char* mode;
  const char* ctm;
  const char* nearestMode;
  double cubicA;
  bool excludeOutside;
  std::vector<int64_t> inDims;
  std::vector<double> in;
  std::vector<double> scales;  // empty: the ONNX test gave sizes
  std::vector<int64_t> outDims;
  std::vector<double> out;
};

// Copied from the ONNX backend test data (test_resize_<name>, inputs and output_0 of
// test_data_set_0; the leading N=1, C=1 dims are left out here and added back below). Scales are
// the float32 values of the test, widened to double.
const std::vector<ResizeCase>& onnxResizeCases() {
  static const std::vector<ResizeCase> cases = {
      {"downsample_scales_cubic",
       "cubic",
       "half_pixel",
       "round_prefer_floor",
       -0.75,
       false,
       {4, 4},
       {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
       {0.800000011920929, 0.800000011920929},
       {3, 3},
       {1.47119141, 2.78125, 4.08251953, 6.71142578, 8.02148438, 9.32275391, 11.9165039, 13.2265625,
        14.527832}},
      {"downsample_scales_cubic_A_n0p5_exclude_outside",
       "cubic",
       "half_pixel",
       "round_prefer_floor",
       -0.5,
       true,
       {4, 4},
       {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
       {0.800000011920929, 0.800000011920929},
       {3, 3},
       {1.36812675, 2.6695013, 4.01333666, 6.57362509, 7.875, 9.21883488, 11.948966, 13.2503414,
        14.5941763}},
      {"downsample_scales_cubic_align_corners",
       "cubic",
       "align_corners",
       "round_prefer_floor",
       -0.75,
       false,
       {4, 4},
       {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
       {0.800000011920929, 0.800000011920929},
       {3, 3},
       {1, 2.39519167, 3.7903831, 6.5807662, 7.97595787, 9.37114906, 12.1615324, 13.5567236,
        14.9519157}},
      {"downsample_scales_linear",
       "linear",
       "half_pixel",
       "round_prefer_floor",
       -0.75,
       false,
       {2, 4},
       {1, 2, 3, 4, 5, 6, 7, 8},
       {0.6000000238418579, 0.6000000238418579},
       {1, 2},
       {2.66666651, 4.33333302}},
      {"downsample_scales_linear_align_corners",
       "linear",
       "align_corners",
       "round_prefer_floor",
       -0.75,
       false,
       {2, 4},
       {1, 2, 3, 4, 5, 6, 7, 8},
       {0.6000000238418579, 0.6000000238418579},
       {1, 2},
       {1, 3.14285707}},
      {"downsample_scales_nearest",
       "nearest",
       "half_pixel",
       "round_prefer_floor",
       -0.75,
       false,
       {2, 4},
       {1, 2, 3, 4, 5, 6, 7, 8},
       {0.6000000238418579, 0.6000000238418579},
       {1, 2},
       {1, 3}},
      {"downsample_sizes_cubic",
       "cubic",
       "half_pixel",
       "round_prefer_floor",
       -0.75,
       false,
       {4, 4},
       {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
       {},
       {3, 3},
       {1.63078701, 3.00462961, 4.37847233, 7.12615728, 8.5, 9.87384224, 12.6215277, 13.9953699,
        15.3692131}},
      {"downsample_sizes_linear_pytorch_half_pixel",
       "linear",
       "pytorch_half_pixel",
       "round_prefer_floor",
       -0.75,
       false,
       {4, 4},
       {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
       {},
       {3, 1},
       {1.66666663, 7, 12.333333}},
      {"downsample_sizes_nearest",
       "nearest",
       "half_pixel",
       "round_prefer_floor",
       -0.75,
       false,
       {2, 4},
       {1, 2, 3, 4, 5, 6, 7, 8},
       {},
       {1, 3},
       {1, 2, 4}},
      {"downsample_sizes_nearest_tf_half_pixel_for_nn",
       "nearest",
       "tf_half_pixel_for_nn",
       "round_prefer_floor",
       -0.75,
       false,
       {4, 4},
       {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
       {},
       {3, 2},
       {6, 8, 10, 12, 14, 16}},
      {"upsample_scales_cubic",
       "cubic",
       "half_pixel",
       "round_prefer_floor",
       -0.75,
       false,
       {4, 4},
       {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
       {2.0, 2.0},
       {8, 8},
       {0.47265625, 0.76953125, 1.24609375, 1.875,      2.28125,    2.91015625, 3.38671875,
        3.68359375, 1.66015625, 1.95703125, 2.43359375, 3.0625,     3.46875,    4.09765625,
        4.57421875, 4.87109375, 3.56640625, 3.86328125, 4.33984375, 4.96875,    5.375,
        6.00390625, 6.48046875, 6.77734375, 6.08203125, 6.37890625, 6.85546875, 7.484375,
        7.890625,   8.51953125, 8.99609375, 9.29296875, 7.70703125, 8.00390625, 8.48046875,
        9.109375,   9.515625,   10.1445312, 10.6210938, 10.9179688, 10.2226562, 10.5195312,
        10.9960938, 11.625,     12.03125,   12.6601562, 13.1367188, 13.4335938, 12.1289062,
        12.4257812, 12.9023438, 13.53125,   13.9375,    14.5664062, 15.0429688, 15.3398438,
        13.3164062, 13.6132812, 14.0898438, 14.71875,   15.125,     15.7539062, 16.2304688,
        16.5273438}},
      {"upsample_scales_cubic_A_n0p5_exclude_outside",
       "cubic",
       "half_pixel",
       "round_prefer_floor",
       -0.5,
       true,
       {4, 4},
       {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
       {2.0, 2.0},
       {8, 8},
       {0.558823526, 0.814942062, 1.35698247, 1.89705884, 2.39705873, 2.93713522, 3.47917557,
        3.7352941,   1.58329761,  1.83941603, 2.38145661, 2.92153287, 3.42153287, 3.96160913,
        4.50364971,  4.75976801,  3.75145936, 4.0075779,  4.54961824, 5.0896945,  5.5896945,
        6.12977076,  6.67181158,  6.92792988, 5.91176462, 6.1678834,  6.70992374, 7.25,
        7.75,        8.29007626,  8.83211708, 9.0882349,  7.91176462, 8.16788292, 8.70992374,
        9.25,        9.75,        10.2900763, 10.8321171, 11.0882349, 10.0720701, 10.3281889,
        10.8702288,  11.410305,   11.910305,  12.4503813, 12.9924221, 13.2485409, 12.2402315,
        12.4963503,  13.0383911,  13.5784674, 14.0784674, 14.6185436, 15.1605835, 15.4167023,
        13.2647057,  13.5208244,  14.0628653, 14.6029415, 15.1029415, 15.6430178, 16.1850586,
        16.4411774}},
      {"upsample_scales_cubic_align_corners",
       "cubic",
       "align_corners",
       "round_prefer_floor",
       -0.75,
       false,
       {4, 4},
       {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
       {2.0, 2.0},
       {8, 8},
       {1,          1.34110785, 1.80029154, 2.32944608, 2.67055392, 3.19970846, 3.65889215,
        4,          2.36443138, 2.70553946, 3.16472292, 3.69387746, 4.03498554, 4.56413984,
        5.02332354, 5.36443138, 4.20116615, 4.542274,   5.00145769, 5.53061247, 5.87172031,
        6.40087461, 6.86005831, 7.20116615, 6.31778431, 6.65889215, 7.11807585, 7.64723015,
        7.98833799, 8.51749229, 8.97667599, 9.31778431, 7.68221569, 8.02332401, 8.48250771,
        9.01166153, 9.35276985, 9.88192463, 10.3411083, 10.6822157, 9.79883385, 10.1399412,
        10.5991249, 11.1282797, 11.469388,  11.9985418, 12.4577255, 12.7988338, 11.6355686,
        11.976676,  12.4358597, 12.9650145, 13.3061228, 13.8352766, 14.2944603, 14.6355686,
        13,         13.3411083, 13.800292,  14.3294458, 14.6705542, 15.199708,  15.6588917,
        16}},
      {"upsample_scales_cubic_asymmetric",
       "cubic",
       "asymmetric",
       "round_prefer_floor",
       -0.75,
       false,
       {4, 4},
       {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
       {2.0, 2.0},
       {8, 8},
       {1,      1.40625,  2,      2.5,      3,      3.59375,  4,      4.09375,  2.625,  3.03125,
        3.625,  4.125,    4.625,  5.21875,  5.625,  5.71875,  5,      5.40625,  6,      6.5,
        7,      7.59375,  8,      8.09375,  7,      7.40625,  8,      8.5,      9,      9.59375,
        10,     10.09375, 9,      9.40625,  10,     10.5,     11,     11.59375, 12,     12.09375,
        11.375, 11.78125, 12.375, 12.875,   13.375, 13.96875, 14.375, 14.46875, 13,     13.40625,
        14,     14.5,     15,     15.59375, 16,     16.09375, 13.375, 13.78125, 14.375, 14.875,
        15.375, 15.96875, 16.375, 16.46875}},
      {"upsample_scales_linear",
       "linear",
       "half_pixel",
       "round_prefer_floor",
       -0.75,
       false,
       {2, 2},
       {1, 2, 3, 4},
       {2.0, 2.0},
       {4, 4},
       {1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4}},
      {"upsample_scales_linear_align_corners",
       "linear",
       "align_corners",
       "round_prefer_floor",
       -0.75,
       false,
       {2, 2},
       {1, 2, 3, 4},
       {2.0, 2.0},
       {4, 4},
       {1, 1.33333337, 1.66666663, 2, 1.66666663, 2, 2.33333325, 2.66666675, 2.33333325, 2.66666675,
        3, 3.33333325, 3, 3.33333325, 3.66666675, 4}},
      {"upsample_scales_nearest",
       "nearest",
       "half_pixel",
       "round_prefer_floor",
       -0.75,
       false,
       {2, 2},
       {1, 2, 3, 4},
       {2.0, 3.0},
       {4, 6},
       {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4}},
      {"upsample_sizes_cubic",
       "cubic",
       "half_pixel",
       "round_prefer_floor",
       -0.75,
       false,
       {4, 4},
       {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
       {},
       {9, 10},
       {0.455079228, 0.640579224, 0.971579194, 1.42257917, 1.9073292,  2.22332931, 2.7080791,
        3.15907931,  3.49007916,  3.67557931,  1.39437962, 1.57987964, 1.91087961, 2.36187959,
        2.84662962,  3.1626296,   3.64737964,  4.09837961, 4.42937946, 4.61487961, 2.95130682,
        3.13680696,  3.46780682,  3.91880703,  4.40355682, 4.71955681, 5.20430708, 5.65530682,
        5.98630714,  6.17180681,  5.20525074,  5.39075089, 5.72175074, 6.17275047, 6.65750074,
        6.97350073,  7.45825052,  7.90925074,  8.24025059, 8.42575073, 6.88975,    7.07525015,
        7.40625,     7.85725021,  8.34200001,  8.65799999, 9.14274979, 9.59375,    9.92475033,
        10.1102505,  8.57424927,  8.75974941,  9.09074974, 9.541749,   10.0264997, 10.3424997,
        10.8272495,  11.2782497,  11.6092491,  11.7947493, 10.8281927, 11.0136929, 11.3446932,
        11.7956934,  12.2804432,  12.5964432,  13.081193,  13.5321932, 13.8631935, 14.0486927,
        12.3851204,  12.5706205,  12.9016199,  13.3526201, 13.8373699, 14.1533699, 14.6381207,
        15.0891199,  15.4201202,  15.6056204,  13.3244209, 13.5099211, 13.8409204, 14.2919207,
        14.7766705,  15.0926704,  15.5774212,  16.0284214, 16.3594208, 16.54492}},
      {"upsample_sizes_nearest",
       "nearest",
       "half_pixel",
       "round_prefer_floor",
       -0.75,
       false,
       {2, 2},
       {1, 2, 3, 4},
       {},
       {7, 8},
       {1, 1, 1, 1, 2, 2, 2, 2, 1, 1, 1, 1, 2, 2, 2, 2, 1, 1, 1, 1, 2, 2, 2, 2, 1, 1, 1, 1,
        2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 3, 3, 3, 3, 4, 4, 4, 4, 3, 3, 3, 3, 4, 4, 4, 4}},
      {"upsample_sizes_nearest_ceil_half_pixel",
       "nearest",
       "half_pixel",
       "ceil",
       -0.75,
       false,
       {4, 4},
       {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
       {},
       {8, 8},
       {1,  2,  2,  3,  3,  4,  4,  4,  5,  6,  6,  7,  7,  8,  8,  8,  5,  6,  6,  7,  7,  8,
        8,  8,  9,  10, 10, 11, 11, 12, 12, 12, 9,  10, 10, 11, 11, 12, 12, 12, 13, 14, 14, 15,
        15, 16, 16, 16, 13, 14, 14, 15, 15, 16, 16, 16, 13, 14, 14, 15, 15, 16, 16, 16}},
      {"upsample_sizes_nearest_floor_align_corners",
       "nearest",
       "align_corners",
       "floor",
       -0.75,
       false,
       {4, 4},
       {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
       {},
       {8, 8},
       {1,  1,  1,  2,  2, 3, 3, 4,  1,  1,  1,  2,  2,  3,  3,  4,  1,  1,  1,  2, 2, 3,
        3,  4,  5,  5,  5, 6, 6, 7,  7,  8,  5,  5,  5,  6,  6,  7,  7,  8,  9,  9, 9, 10,
        10, 11, 11, 12, 9, 9, 9, 10, 10, 11, 11, 12, 13, 13, 13, 14, 14, 15, 15, 16}},
      {"upsample_sizes_nearest_round_prefer_ceil_asymmetric",
       "nearest",
       "asymmetric",
       "round_prefer_ceil",
       -0.75,
       false,
       {4, 4},
       {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
       {},
       {8, 8},
       {1,  2,  2,  3,  3,  4,  4,  4,  5,  6,  6,  7,  7,  8,  8,  8,  5,  6,  6,  7,  7,  8,
        8,  8,  9,  10, 10, 11, 11, 12, 12, 12, 9,  10, 10, 11, 11, 12, 12, 12, 13, 14, 14, 15,
        15, 16, 16, 16, 13, 14, 14, 15, 15, 16, 16, 16, 13, 14, 14, 15, 15, 16, 16, 16}},
  };
  return cases;
}

Tensor runResize(const ResizeCase& c, DType dtype) {
  std::vector<int64_t> inDims = {1, 1}, outDims = {1, 1};
  inDims.insert(inDims.end(), c.inDims.begin(), c.inDims.end());
  outDims.insert(outDims.end(), c.outDims.begin(), c.outDims.end());
  AttrMap a{{"mode", enumAttr(c.mode)},
            {"coordinate_transformation_mode", enumAttr(c.ctm)},
            {"nearest_mode", enumAttr(c.nearestMode)},
            {"cubic_coeff_a", floatAttr(c.cubicA)},
            {"exclude_outside", boolAttr(c.excludeOutside)}};
  if (!c.scales.empty()) {
    std::vector<double> s = {1.0, 1.0};
    s.insert(s.end(), c.scales.begin(), c.scales.end());
    a["scales"] = floatsAttr(s);
  }
  return run1(OpCode::Resize, {make(dtype, inDims, c.in)}, a, {TensorType::of(dtype, outDims)});
}

TEST(InterpDataMovement, ResizeMatchesOnnxBackendTests) {
  for (const ResizeCase& c : onnxResizeCases()) {
    SCOPED_TRACE(c.name);
    std::vector<int64_t> outDims = {1, 1};
    outDims.insert(outDims.end(), c.outDims.begin(), c.outDims.end());
    expectValues(runResize(c, DType::F32), DType::F32, outDims, c.out, 1e-6);
  }
}

TEST(InterpDataMovement, ResizeNearestOnIntegersAndLinearOnHalf) {
  // The nearest cases again with i32 data: the same picks, exactly.
  for (const ResizeCase& c : onnxResizeCases()) {
    if (std::string(c.mode) != "nearest") continue;
    SCOPED_TRACE(c.name);
    std::vector<int64_t> outDims = {1, 1}, want;
    outDims.insert(outDims.end(), c.outDims.begin(), c.outDims.end());
    for (double v : c.out) want.push_back(static_cast<int64_t>(v));
    expectInts(runResize(c, DType::I32), DType::I32, outDims, want);
  }
  // upsample_scales_linear in f16: every expected value (quarters) is exact in f16.
  for (const ResizeCase& c : onnxResizeCases()) {
    if (std::string(c.name) != "upsample_scales_linear") continue;
    expectValues(runResize(c, DType::F16), DType::F16, {1, 1, 4, 4}, c.out);
  }
}

TEST(InterpDataMovement, ResizeHalfPixelSymmetric) {
  // [1,2,3,4] with scale 0.6 to 2 elements. By hand (ONNX formulas): output width 4*0.6 = 2.4,
  // adjustment = 2/2.4, offset = 2*(1 - adjustment) = 1/3; x_orig = 1/3 + (x+0.5)/0.6 - 0.5
  // = 2/3 and 7/3 -> linear: 1 + 2/3 and 1 + 7/3.
  AttrMap a{{"mode", enumAttr("linear")},
            {"coordinate_transformation_mode", enumAttr("half_pixel_symmetric")},
            {"scales", floatsAttr({0.6})}};
  Tensor y = run1(OpCode::Resize, {make(DType::F64, {4}, {1, 2, 3, 4})}, a,
                  {TensorType::of(DType::F64, {2})});
  expectValues(y, DType::F64, {2}, {1 + 2.0 / 3, 1 + 7.0 / 3}, 1e-12);
}

TEST(InterpDataMovement, ResizeKeepsIdentityDimsAndHandlesEmpty) {
  // tf_half_pixel_for_nn with round_prefer_ceil would shift every index by one on a same-size
  // dim ((x+0.5)/1 rounds up); same-size dims with scale 1 are left as they are instead.
  AttrMap a{{"mode", enumAttr("nearest")},
            {"coordinate_transformation_mode", enumAttr("tf_half_pixel_for_nn")},
            {"nearest_mode", enumAttr("round_prefer_ceil")}};
  Tensor x = range(DType::U8, {2, 3});
  expectInts(run1(OpCode::Resize, {x}, a, {TensorType::of(DType::U8, {2, 3})}), DType::U8, {2, 3},
             {0, 1, 2, 3, 4, 5});
  Tensor e = run1(OpCode::Resize, {make(DType::F32, {0, 2}, {})}, {{"mode", enumAttr("linear")}},
                  {TensorType::of(DType::F32, {0, 4})});
  expectValues(e, DType::F32, {0, 4}, {});
  auto bad = tryRun(OpCode::Resize, {make(DType::F32, {0}, {})}, {{"mode", enumAttr("linear")}},
                    {TensorType::of(DType::F32, {3})});
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find("empty"), std::string::npos) << bad.status().str();
}

// ---- grid_sample ----

// The 1x1x3x3 image [[1, 3, 2], [5, 9, 4], [8, 6, 7]] sampled at six (x, y) grid points:
// the centre, two in-range points, one past the right/top edge, one far past the left edge
// (reflected more than once), and (0.5, -0.5), which with align_corners is the source point
// (1.5, 0.5): nearest rounds both halves to even, to (2, 0).
const std::vector<double> kGsImage = {1, 3, 2, 5, 9, 4, 8, 6, 7};
const std::vector<double> kGsGrid = {0, 0, -0.4, 0.7, 0.9, -0.95, 1.3, -1.6, -2.5, 0.2, 0.5, -0.5};

struct GridSampleCase {
  const char* mode;
  const char* padding;
  bool alignCorners;
  std::vector<double> out;
};

// Computed with numpy by /usr/bin/python3 from the ONNX GridSample-16 definition, written after
// onnx/reference/ops/op_grid_sample.py (unnormalise; rint for nearest; out-of-range coordinates
// clamped to [0, extent-1] (border) or reflected (reflection) per dimension; taps outside read
// as 0 / the edge / their reflection; bicubic with A = -0.75). That script reproduces all eight
// test_gridsample_* outputs of the ONNX backend tests. Checked by hand:
//  - bilinear, zeros, align_corners=0 at (0.5, -0.5): source (1.75, 0.25) ->
//    0.75 * (0.25*3 + 0.75*2) + 0.25 * (0.25*9 + 0.75*4) = 3.
//  - bilinear, reflection, align_corners=1 at (1.3, -1.6): source (2.3, -0.6) reflects to
//    (1.7, 0.6) -> 0.4 * (0.3*3 + 0.7*2) + 0.6 * (0.3*9 + 0.7*4) = 4.22.
//  - nearest, zeros, align_corners=0 at (1.3, -1.6): source x = (2.3*3 - 1)/2 = 2.95 rounds to
//    3, outside [-0.5, 2.5] -> 0.
const std::vector<GridSampleCase>& gridSampleCases() {
  static const std::vector<GridSampleCase> cases = {
      {"bilinear", "zeros", false, {9.0, 6.840000000000002, 0.7475000000000005, 0.0, 0.0, 3.0}},
      {"bilinear", "zeros", true, {9.0, 6.98, 2.22, 0.56, 0.0, 4.5}},
      {"bilinear", "border", false, {9.0, 7.2, 2.0, 2.0, 5.8999999999999995, 3.0}},
      {"bilinear", "border", true, {9.0, 6.98, 2.22, 2.0, 5.6, 4.5}},
      {"bilinear",
       "reflection",
       false,
       {9.0, 7.2, 2.0, 2.8000000000000003, 5.699999999999999, 3.0}},
      {"bilinear", "reflection", true, {9.0, 6.98, 2.22, 4.22, 6.5, 4.5}},
      {"nearest", "zeros", false, {9.0, 8.0, 2.0, 0.0, 0.0, 2.0}},
      {"nearest", "zeros", true, {9.0, 6.0, 2.0, 0.0, 0.0, 2.0}},
      {"nearest", "border", false, {9.0, 8.0, 2.0, 2.0, 5.0, 2.0}},
      {"nearest", "border", true, {9.0, 6.0, 2.0, 2.0, 5.0, 2.0}},
      {"nearest", "reflection", false, {9.0, 8.0, 2.0, 2.0, 4.0, 2.0}},
      {"nearest", "reflection", true, {9.0, 6.0, 2.0, 4.0, 4.0, 2.0}},
      {"bicubic",
       "zeros",
       false,
       {9.0, 7.719958874999999, 0.6207135612792979, -0.008299124999999663, 0.0,
        3.4330902099609375}},
      {"bicubic",
       "zeros",
       true,
       {9.0, 8.631521000000003, 2.3841384140625084, 0.4446469999999999, -0.5722499999999999,
        5.3583984375}},
      {"bicubic",
       "border",
       false,
       {9.0, 7.16012249999999, 1.7250724956054706, 2.0, 6.277999999999992, 2.920989990234375}},
      {"bicubic",
       "border",
       true,
       {9.0, 7.3035260000000015, 2.1831549843750078, 2.0, 5.9120000000000035, 4.833984375}},
      {"bicubic",
       "reflection",
       false,
       {9.0, 7.160549999999991, 1.587901953125002, 2.453694999999991, 6.000486328124994,
        2.920989990234375}},
      {"bicubic",
       "reflection",
       true,
       {9.0, 7.222292000000001, 2.0411816718750075, 3.574747999999997, 6.772250000000002,
        4.142578125}},
  };
  return cases;
}

AttrMap gridSampleAttrs(const char* mode, const char* padding, bool alignCorners) {
  return {{"mode", enumAttr(mode)},
          {"padding_mode", enumAttr(padding)},
          {"align_corners", boolAttr(alignCorners)}};
}

TEST(InterpDataMovement, GridSampleEveryModePaddingAndAlignment) {
  for (const GridSampleCase& c : gridSampleCases()) {
    SCOPED_TRACE(std::string(c.mode) + " " + c.padding + (c.alignCorners ? " aligned" : ""));
    Tensor y =
        run1(OpCode::GridSample,
             {make(DType::F64, {1, 1, 3, 3}, kGsImage), make(DType::F64, {1, 2, 3, 2}, kGsGrid)},
             gridSampleAttrs(c.mode, c.padding, c.alignCorners));
    expectValues(y, DType::F64, {1, 1, 2, 3}, c.out, 1e-12);
    // f32: the grid points are rounded to f32 first, so the results move by ~1e-7.
    Tensor y32 =
        run1(OpCode::GridSample,
             {make(DType::F32, {1, 1, 3, 3}, kGsImage), make(DType::F32, {1, 2, 3, 2}, kGsGrid)},
             gridSampleAttrs(c.mode, c.padding, c.alignCorners));
    expectValues(y32, DType::F32, {1, 1, 2, 3}, c.out, 1e-5);
  }
}

TEST(InterpDataMovement, GridSampleDefaultsBatchesChannelsAndHalfTypes) {
  // No attributes: bilinear, zeros, align_corners=0. Two batches with two channels each; batch
  // 1 channel 1 is the image times 10, batch 0 channel 0 the image, the others the image plus
  // 1 (bilinear weights sum to 1 where every tap is inside). Grid of batch 0 is the first
  // three points above, of batch 1 the last three.
  std::vector<double> img;
  for (int k = 0; k < 4; ++k)
    for (double v : kGsImage) img.push_back(k == 3 ? 10 * v : k == 0 ? v : v + 1);
  const std::vector<double> bilinear = gridSampleCases()[0].out;  // bilinear, zeros, unaligned
  Tensor y = run1(OpCode::GridSample,
                  {make(DType::F64, {2, 2, 3, 3}, img), make(DType::F64, {2, 1, 3, 2}, kGsGrid)});
  // Batch 0 points: the centre has every tap inside; (-0.4, 0.7) has source (0.4, 2.05) whose
  // taps at y = 3 read 0, so +1 adds only the inside weight 0.95; (0.9, -0.95) has source
  // (2.35, -0.425) whose taps at x = 3 and y = -1 read 0: inside weight 0.65 * 0.575. Batch 1:
  // (1.3, -1.6) and (-2.5, 0.2) read only zeros; (0.5, -0.5) has every tap inside.
  expectValues(y, DType::F64, {2, 2, 1, 3},
               {bilinear[0], bilinear[1], bilinear[2],                            // b0 c0
                bilinear[0] + 1, bilinear[1] + 0.95, bilinear[2] + 0.65 * 0.575,  // b0 c1
                0, 0, bilinear[5] + 1,                                            // b1 c0
                0, 0, 10 * bilinear[5]},                                          // b1 c1
               1e-12);
  // f16 and bf16: nearest picks image elements, which are exact in both.
  for (DType t : {DType::F16, DType::BF16}) {
    Tensor h =
        run1(OpCode::GridSample, {make(t, {1, 1, 3, 3}, kGsImage), make(t, {1, 2, 3, 2}, kGsGrid)},
             gridSampleAttrs("nearest", "border", true));
    expectValues(h, t, {1, 1, 2, 3}, {9, 6, 2, 2, 5, 2});
  }
  // bilinear in f16 at the centre and at (0.5, -0.5): 9 and 3, exact.
  Tensor h = run1(OpCode::GridSample, {make(DType::F16, {1, 1, 3, 3}, kGsImage),
                                       make(DType::F16, {1, 1, 2, 2}, {0, 0, 0.5, -0.5})});
  expectValues(h, DType::F16, {1, 1, 1, 2}, {9, 3});
}

TEST(InterpDataMovement, GridSampleNanGridAndEmptyInput) {
  // A NaN grid coordinate gives NaN; a point far outside reads zeros without overflow.
  Tensor y = run1(OpCode::GridSample,
                  {make(DType::F32, {1, 1, 3, 3}, kGsImage),
                   make(DType::F32, {1, 1, 2, 2}, {kNaN, 0, 1e30, -1e30})},
                  gridSampleAttrs("bicubic", "zeros", false));
  expectValues(y, DType::F32, {1, 1, 1, 2}, {kNaN, 0});
  // Far outside with border reads the corner x = W-1, y = 0: 2; reflection stays in range.
  Tensor b = run1(
      OpCode::GridSample,
      {make(DType::F64, {1, 1, 3, 3}, kGsImage), make(DType::F64, {1, 1, 1, 2}, {1e30, -1e30})},
      gridSampleAttrs("bilinear", "border", false));
  expectValues(b, DType::F64, {1, 1, 1, 1}, {2});
  auto r = tryRun(
      OpCode::GridSample,
      {make(DType::F64, {1, 1, 3, 3}, kGsImage), make(DType::F64, {1, 1, 1, 2}, {1e30, -1e30})},
      gridSampleAttrs("bicubic", "reflection", false));
  ASSERT_TRUE(r.isOk()) << r.status().str();
  EXPECT_TRUE(std::isfinite((*r)[0].getDouble(0)));
  // An empty image: zeros padding gives zeros, border has nothing to read.
  Tensor z = run1(OpCode::GridSample,
                  {make(DType::F32, {1, 1, 0, 3}, {}), make(DType::F32, {1, 1, 1, 2}, {0, 0})});
  expectValues(z, DType::F32, {1, 1, 1, 1}, {0});
  auto bad = tryRun(OpCode::GridSample,
                    {make(DType::F32, {1, 1, 0, 3}, {}), make(DType::F32, {1, 1, 1, 2}, {0, 0})},
                    gridSampleAttrs("bilinear", "border", false));
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find("empty"), std::string::npos) << bad.status().str();
}

TEST(InterpDataMovement, GridSampleTypeRule) {
  Module m;
  Function* f = m.addFunction("main");
  Builder b(f);
  // Symbolic N and C pass through; Ho and Wo come from the grid.
  Value* x = b.parameter(TensorType(DType::F32, {Dim::symbol("N"), Dim::symbol("C"), 5, 7}));
  Value* g = b.parameter(TensorType(DType::F32, {Dim::symbol("N"), 2, 3, 2}));
  Value* y = b.op(OpCode::GridSample, {x, g});
  ASSERT_TRUE(b.ok()) << b.status().str();
  EXPECT_EQ(y->type(), TensorType(DType::F32, {Dim::symbol("N"), Dim::symbol("C"), 2, 3}));
  auto fails = [&](TensorType xt, TensorType gt, AttrMap a, const char* what) {
    Module m2;
    Builder b2(m2.addFunction("f"));
    auto n = b2.tryBuild(OpCode::GridSample, {b2.parameter(xt), b2.parameter(gt)}, std::move(a));
    ASSERT_FALSE(n.isOk()) << what;
    EXPECT_NE(n.status().message().find(what), std::string::npos) << n.status().str();
  };
  fails(TensorType::of(DType::F32, {1, 5, 7}), TensorType::of(DType::F32, {1, 2, 3, 2}), {},
        "rank 4");
  fails(TensorType::of(DType::F32, {1, 1, 5, 7}), TensorType::of(DType::F32, {1, 2, 3, 3}), {},
        "dimension of 2");
  fails(TensorType::of(DType::F32, {2, 1, 5, 7}), TensorType::of(DType::F32, {1, 2, 3, 2}), {},
        "batch");
  fails(TensorType(DType::F32, {Dim::symbol("N"), 1, 5, 7}),
        TensorType(DType::F32, {Dim::symbol("M"), 2, 3, 2}), {}, "batch");
  fails(TensorType::of(DType::F32, {1, 1, 5, 7}), TensorType::of(DType::F16, {1, 2, 3, 2}), {},
        "one dtype");
  fails(TensorType::of(DType::I32, {1, 1, 5, 7}), TensorType::of(DType::I32, {1, 2, 3, 2}), {},
        "float");
  fails(TensorType::of(DType::F32, {1, 1, 5, 7}), TensorType::of(DType::F32, {1, 2, 3, 2}),
        {{"mode", enumAttr("linear")}}, "expected one of bilinear, nearest, bicubic");
}

}  // namespace
}  // namespace kiln
