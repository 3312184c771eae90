// Reference interpreter: elementwise unary, binary and ternary ops, convert and iota.
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
constexpr int64_t kI32Min = std::numeric_limits<int32_t>::min();
constexpr int64_t kI32Max = std::numeric_limits<int32_t>::max();

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

// Builds a function of one `op` node over parameters typed like `inputs`, and interprets it.
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

// Checks dtype, dims and values. NaN matches NaN; with relTol 0 the match is exact, and the sign
// of a zero must match too.
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
      if (want[i] == 0) {
        EXPECT_EQ(std::signbit(got), std::signbit(want[i])) << "sign of zero, element " << i;
      }
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

void expectBools(const Tensor& t, const std::vector<int64_t>& dims, const std::vector<int>& want) {
  std::vector<int64_t> w(want.begin(), want.end());
  expectInts(t, DType::Bool, dims, w);
}

AttrMap direction(const std::string& d) { return {{"direction", enumAttr(d)}}; }

// Unsigned values set and checked through the exact uint64 accessors (u64 elements above
// INT64_MAX do not fit makeInts/expectInts).
Tensor makeUInts(DType t, std::vector<int64_t> dims, const std::vector<uint64_t>& values) {
  Tensor x(t, std::move(dims));
  EXPECT_EQ(static_cast<size_t>(x.numElements()), values.size());
  for (size_t i = 0; i < values.size() && i < size_t(x.numElements()); ++i)
    x.setUInt(static_cast<int64_t>(i), values[i]);
  return x;
}

void expectUInts(const Tensor& t, DType dtype, const std::vector<int64_t>& dims,
                 const std::vector<uint64_t>& want) {
  ASSERT_TRUE(t.defined());
  EXPECT_EQ(t.dtype(), dtype);
  ASSERT_EQ(t.dims(), dims);
  ASSERT_EQ(static_cast<size_t>(t.numElements()), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(t.getUInt(static_cast<int64_t>(i)), want[i]) << "element " << i;
}

constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();
constexpr uint64_t k2p63 = uint64_t(1) << 63;

// ---- unary ----

TEST(InterpElementwise, FloatUnaryMathMatchesNumpy) {
  struct Case {
    OpCode op;
    std::vector<double> in, want;
  };
  // numpy: np.float32(f(x.astype(np.float64))) for x = np.array(in, np.float32), with f the
  // numpy function of the op (math.erf for erf, 1/(1+np.exp(-v)) for sigmoid, 1/np.sqrt for
  // rsqrt).
  const std::vector<Case> cases = {
      {OpCode::Exp, {0.5, -1.25, 2.0, 0.75}, {1.64872122, 0.286504805, 7.38905621, 2.1170001}},
      {OpCode::Expm1, {0.5, -1.25, 2.0, 0.75}, {0.648721278, -0.713495195, 6.38905621, 1.11699998}},
      {OpCode::Log, {0.5, 1.25, 2.0, 0.75}, {-0.693147182, 0.223143548, 0.693147182, -0.287682086}},
      {OpCode::Log1p, {0.5, 1.25, 2.0, 0.75}, {0.405465096, 0.810930192, 1.09861231, 0.559615791}},
      {OpCode::Sqrt, {0.5, 1.25, 2.0, 0.75}, {0.707106769, 1.11803401, 1.41421354, 0.866025388}},
      {OpCode::Rsqrt, {0.5, 1.25, 2.0, 0.75}, {1.41421354, 0.89442718, 0.707106769, 1.15470052}},
      {OpCode::Sin, {0.5, -1.25, 2.0, 0.75}, {0.47942555, -0.948984623, 0.909297407, 0.681638777}},
      {OpCode::Cos, {0.5, -1.25, 2.0, 0.75}, {0.87758255, 0.315322369, -0.416146845, 0.731688857}},
      {OpCode::Tan, {0.5, -1.25, 2.0, 0.75}, {0.546302497, -3.00956964, -2.18503976, 0.931596458}},
      {OpCode::Asin, {0.2, -0.5, 0.8, 0.125}, {0.201357931, -0.52359879, 0.927295268, 0.125327826}},
      {OpCode::Acos, {0.2, -0.5, 0.8, 0.125}, {1.36943841, 2.09439516, 0.643501103, 1.44546854}},
      {OpCode::Atan, {0.5, -1.25, 2.0, 0.75}, {0.463647604, -0.8960554, 1.10714877, 0.643501103}},
      {OpCode::Sinh, {0.5, -1.25, 2.0, 0.75}, {0.521095276, -1.60191905, 3.62686038, 0.822316706}},
      {OpCode::Cosh, {0.5, -1.25, 2.0, 0.75}, {1.12762594, 1.88842392, 3.76219559, 1.29468334}},
      {OpCode::Asinh, {0.5, -1.25, 2.0, 0.75}, {0.481211811, -1.047593, 1.44363546, 0.693147182}},
      {OpCode::Acosh, {1.5, 2.25, 3.0, 1.75}, {0.962423623, 1.45057452, 1.76274717, 1.15881038}},
      {OpCode::Atanh,
       {0.2, -0.5, 0.8, 0.125},
       {0.202732563, -0.549306154, 1.09861231, 0.125657216}},
      {OpCode::Tanh,
       {0.5, -1.25, 2.0, 0.75},
       {0.462117165, -0.848283648, 0.964027584, 0.635148942}},
      {OpCode::Erf, {0.5, -1.25, 2.0, 0.75}, {0.520499885, -0.92290014, 0.995322287, 0.711155653}},
      {OpCode::Sigmoid,
       {0.5, -1.25, 2.0, 0.75},
       {0.622459352, 0.222700134, 0.880797088, 0.679178715}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(opName(c.op)));
    expectValues(run1(c.op, {make(DType::F32, {2, 2}, c.in)}), DType::F32, {2, 2}, c.want, 2e-7);
  }
}

TEST(InterpElementwise, F64UnaryKeepsDoublePrecision) {
  // numpy: repr(np.sin(1.0)), repr(np.exp(-0.5))
  Tensor y = run1(OpCode::Sin, {make(DType::F64, {1}, {1.0})});
  expectValues(y, DType::F64, {1}, {0.8414709848078965}, 1e-15);
  y = run1(OpCode::Exp, {make(DType::F64, {1}, {-0.5})});
  expectValues(y, DType::F64, {1}, {0.6065306597126334}, 1e-15);
}

TEST(InterpElementwise, HalfUnaryRoundsOnStore) {
  // numpy: np.float16(np.exp(np.float32(v))) and np.float16(np.tanh(np.float32(v)))
  Tensor x = make(DType::F16, {4}, {1.0, -2.0, 0.5, 3.0});
  expectValues(run1(OpCode::Exp, {x}), DType::F16, {4},
               {2.71875, 0.1353759765625, 1.6484375, 20.078125});
  expectValues(run1(OpCode::Tanh, {x}), DType::F16, {4},
               {0.76171875, -0.9638671875, 0.462158203125, 0.9951171875});
  // bf16 keeps 8 significant bits: sqrt(2) = 1.41421... lies between 1.4140625 and 1.421875,
  // nearer the first.
  expectValues(run1(OpCode::Sqrt, {make(DType::BF16, {1}, {2.0})}), DType::BF16, {1}, {1.4140625});
}

TEST(InterpElementwise, SignAbsNegFloat) {
  Tensor x = make(DType::F32, {6}, {-2.5, -0.0, 0.0, 3.0, kNaN, -kInf});
  expectValues(run1(OpCode::Sign, {x}), DType::F32, {6}, {-1, -0.0, 0.0, 1, kNaN, -1});
  expectValues(run1(OpCode::Abs, {x}), DType::F32, {6}, {2.5, 0.0, 0.0, 3.0, kNaN, kInf});
  expectValues(run1(OpCode::Neg, {x}), DType::F32, {6}, {2.5, 0.0, -0.0, -3.0, kNaN, kInf});
}

TEST(InterpElementwise, SignAbsNegIntegerWrap) {
  // abs and neg of INT_MIN wrap to INT_MIN (two's complement).
  Tensor x = makeInts(DType::I32, {4}, {-7, 0, 9, kI32Min});
  expectInts(run1(OpCode::Sign, {x}), DType::I32, {4}, {-1, 0, 1, -1});
  expectInts(run1(OpCode::Abs, {x}), DType::I32, {4}, {7, 0, 9, kI32Min});
  expectInts(run1(OpCode::Neg, {x}), DType::I32, {4}, {7, 0, -9, kI32Min});
  Tensor b = makeInts(DType::I8, {2}, {-128, 127});
  expectInts(run1(OpCode::Neg, {b}), DType::I8, {2}, {-128, -127});
  // u8: sign is 0 or 1, neg wraps modulo 256 (neg 1 = 255).
  Tensor u = makeInts(DType::U8, {3}, {0, 1, 200});
  expectInts(run1(OpCode::Sign, {u}), DType::U8, {3}, {0, 1, 1});
  expectInts(run1(OpCode::Neg, {u}), DType::U8, {3}, {0, 255, 56});
}

TEST(InterpElementwise, RoundingOps) {
  Tensor x = make(DType::F32, {8}, {0.5, 1.5, 2.5, -0.5, -1.5, 2.4, -2.6, 3.0});
  // Halves go to the even neighbour; -0.5 rounds to -0.
  expectValues(run1(OpCode::RoundNearestEven, {x}), DType::F32, {8}, {0, 2, 2, -0.0, -2, 2, -3, 3});
  expectValues(run1(OpCode::Floor, {x}), DType::F32, {8}, {0, 1, 2, -1, -2, 2, -3, 3});
  expectValues(run1(OpCode::Ceil, {x}), DType::F32, {8}, {1, 2, 3, -0.0, -1, 3, -2, 3});
}

TEST(InterpElementwise, NotOnBoolAndIntegers) {
  expectBools(run1(OpCode::Not, {makeInts(DType::Bool, {2}, {0, 1})}), {2}, {1, 0});
  // ~5 = -6, ~-1 = 0; u8: ~0 = 255, ~0xF0 = 0x0F.
  expectInts(run1(OpCode::Not, {makeInts(DType::I8, {2}, {5, -1})}), DType::I8, {2}, {-6, 0});
  expectInts(run1(OpCode::Not, {makeInts(DType::U8, {2}, {0, 0xF0})}), DType::U8, {2}, {255, 0x0F});
}

TEST(InterpElementwise, FloatClassification) {
  Tensor x = make(DType::F32, {5}, {1.0, kInf, -kInf, kNaN, -0.0});
  expectBools(run1(OpCode::IsFinite, {x}), {5}, {1, 0, 0, 0, 1});
  expectBools(run1(OpCode::IsInf, {x}), {5}, {0, 1, 1, 0, 0});
  expectBools(run1(OpCode::IsNan, {x}), {5}, {0, 0, 0, 1, 0});
  // Same answers through f16 storage.
  Tensor h = make(DType::F16, {5}, {1.0, kInf, -kInf, kNaN, -0.0});
  expectBools(run1(OpCode::IsNan, {h}), {5}, {0, 0, 0, 1, 0});
}

TEST(InterpElementwise, SigmoidSaturates) {
  // 1/(1+e^1000) underflows to 0 and 1/(1+e^-1000) is 1, without NaN.
  Tensor x = make(DType::F32, {3}, {-1000, 0, 1000});
  expectValues(run1(OpCode::Sigmoid, {x}), DType::F32, {3}, {0, 0.5, 1});
}

TEST(InterpElementwise, UnaryOnZeroSizeAndScalar) {
  expectValues(run1(OpCode::Exp, {make(DType::F32, {0, 3}, {})}), DType::F32, {0, 3}, {});
  expectValues(run1(OpCode::Neg, {make(DType::F64, {}, {2.5})}), DType::F64, {}, {-2.5});
}

TEST(InterpElementwise, FloatOnlyOpRejectsIntegers) {
  auto r = tryRun(OpCode::Exp, {makeInts(DType::I32, {1}, {1})});
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("float"), std::string::npos) << r.status().str();
}

// ---- binary ----

TEST(InterpElementwise, FloatArithmetic) {
  Tensor a = make(DType::F32, {2, 3}, {1.5, -2, 7, 0, 1, -1});
  Tensor b = make(DType::F32, {2, 3}, {0.25, 4, -2, 0, 0, 0});
  expectValues(run1(OpCode::Add, {a, b}), DType::F32, {2, 3}, {1.75, 2, 5, 0, 1, -1});
  expectValues(run1(OpCode::Sub, {a, b}), DType::F32, {2, 3}, {1.25, -6, 9, 0, 1, -1});
  expectValues(run1(OpCode::Mul, {a, b}), DType::F32, {2, 3}, {0.375, -8, -14, 0, 0, -0.0});
  // IEEE division: 0/0 = NaN, 1/0 = inf, -1/0 = -inf.
  expectValues(run1(OpCode::Div, {a, b}), DType::F32, {2, 3}, {6, -0.5, -3.5, kNaN, kInf, -kInf});
}

TEST(InterpElementwise, FloatRemPowAtan2) {
  // fmod keeps the sign of the dividend: fmod(-7, 2) = -1, fmod(7, -2) = 1, fmod(5.5, -2) = 1.5.
  Tensor a = make(DType::F32, {3}, {-7, 7, 5.5});
  Tensor b = make(DType::F32, {3}, {2, -2, -2});
  expectValues(run1(OpCode::Rem, {a, b}), DType::F32, {3}, {-1, 1, 1.5});
  // numpy: np.float32(np.power(1.5, 2.5)) = 2.755676; 2^-1 = 0.5; (-8)^(1/3) is NaN in pow.
  Tensor x = make(DType::F32, {3}, {1.5, 2, -8});
  Tensor y = make(DType::F32, {3}, {2.5, -1, 1.0 / 3});
  expectValues(run1(OpCode::Pow, {x, y}), DType::F32, {3}, {2.755676, 0.5, kNaN}, 2e-7);
  // numpy: np.arctan2([1, -1, 0, 1.5], [-1, -1, 2, 0.5]).astype(np.float32)
  Tensor p = make(DType::F32, {4}, {1, -1, 0, 1.5});
  Tensor q = make(DType::F32, {4}, {-1, -1, 2, 0.5});
  expectValues(run1(OpCode::Atan2, {p, q}), DType::F32, {4},
               {2.356194496154785, -2.356194496154785, 0.0, 1.249045729637146}, 2e-7);
}

TEST(InterpElementwise, MaxMinPropagateNaN) {
  Tensor a = make(DType::F32, {4}, {1, kNaN, 3, -0.0});
  Tensor b = make(DType::F32, {4}, {kNaN, 2, 1, 0.0});
  expectValues(run1(OpCode::Max, {a, b}), DType::F32, {4}, {kNaN, kNaN, 3, 0.0});
  expectValues(run1(OpCode::Min, {a, b}), DType::F32, {4}, {kNaN, kNaN, 1, -0.0});
  Tensor i = makeInts(DType::I64, {2}, {-5, 9});
  Tensor j = makeInts(DType::I64, {2}, {3, -9});
  expectInts(run1(OpCode::Max, {i, j}), DType::I64, {2}, {3, 9});
  expectInts(run1(OpCode::Min, {i, j}), DType::I64, {2}, {-5, -9});
  // bool: max is or, min is and.
  Tensor p = makeInts(DType::Bool, {4}, {0, 0, 1, 1});
  Tensor q = makeInts(DType::Bool, {4}, {0, 1, 0, 1});
  expectBools(run1(OpCode::Max, {p, q}), {4}, {0, 1, 1, 1});
  expectBools(run1(OpCode::Min, {p, q}), {4}, {0, 0, 0, 1});
}

TEST(InterpElementwise, IntegerArithmeticWraps) {
  // i8: 127+1 = -128, 16*16 = 256 = 0 (mod 256), -128-1 = 127, 100*3 = 300-256 = 44.
  Tensor a = makeInts(DType::I8, {4}, {127, 16, -128, 100});
  Tensor b = makeInts(DType::I8, {4}, {1, 16, 1, 3});
  expectInts(run1(OpCode::Add, {a, b}), DType::I8, {4}, {-128, 32, -127, 103});
  expectInts(run1(OpCode::Mul, {a, b}), DType::I8, {4}, {127, 0, -128, 44});
  expectInts(run1(OpCode::Sub, {a, b}), DType::I8, {4}, {126, 0, 127, 97});
  // u8: 200+100 = 300-256 = 44; 3-5 = 254.
  Tensor u = makeInts(DType::U8, {2}, {200, 3});
  Tensor v = makeInts(DType::U8, {2}, {100, 5});
  expectInts(run1(OpCode::Add, {u, v}), DType::U8, {2}, {44, 3 + 5});
  expectInts(run1(OpCode::Sub, {u, v}), DType::U8, {2}, {100, 254});
  // i32 and i64 at their limits.
  Tensor c = makeInts(DType::I32, {2}, {kI32Max, kI32Min});
  Tensor d = makeInts(DType::I32, {2}, {1, 1});
  expectInts(run1(OpCode::Add, {c, d}), DType::I32, {2}, {kI32Min, kI32Min + 1});
  expectInts(run1(OpCode::Sub, {c, d}), DType::I32, {2}, {kI32Max - 1, kI32Max});
  const int64_t i64max = std::numeric_limits<int64_t>::max();
  Tensor e = makeInts(DType::I64, {1}, {i64max});
  Tensor g = makeInts(DType::I64, {1}, {2});
  // (2^63 - 1) * 2 = 2^64 - 2 = -2 (mod 2^64).
  expectInts(run1(OpCode::Mul, {e, g}), DType::I64, {1}, {-2});
}

TEST(InterpElementwise, IntegerDivRemEdgeCases) {
  // Truncating division; x/0 = 0, x%0 = x, INT_MIN/-1 = INT_MIN, INT_MIN%-1 = 0.
  Tensor a = makeInts(DType::I32, {7}, {7, -7, 7, -7, 5, kI32Min, kI32Min});
  Tensor b = makeInts(DType::I32, {7}, {2, 2, -2, -2, 0, -1, 0});
  expectInts(run1(OpCode::Div, {a, b}), DType::I32, {7}, {3, -3, -3, 3, 0, kI32Min, 0});
  expectInts(run1(OpCode::Rem, {a, b}), DType::I32, {7}, {1, -1, 1, -1, 5, 0, kI32Min});
  Tensor u = makeInts(DType::U8, {3}, {250, 9, 4});
  Tensor v = makeInts(DType::U8, {3}, {7, 0, 0});
  expectInts(run1(OpCode::Div, {u, v}), DType::U8, {3}, {35, 0, 0});
  expectInts(run1(OpCode::Rem, {u, v}), DType::U8, {3}, {5, 9, 4});
}

TEST(InterpElementwise, IntegerPow) {
  // Negative exponents: 0 unless the base is 1 or -1; (-1)^-3 = -1, (-1)^-4 = 1; 0^0 = 1.
  Tensor a = makeInts(DType::I32, {9}, {2, 3, -2, 1, -1, -1, 5, 0, 0});
  Tensor b = makeInts(DType::I32, {9}, {10, 3, 3, -5, -3, -4, -1, 0, -2});
  expectInts(run1(OpCode::Pow, {a, b}), DType::I32, {9}, {1024, 27, -8, 1, -1, 1, 0, 1, 0});
  // i8: 3^5 = 243 wraps to 243-256 = -13; 2^8 = 256 wraps to 0.
  Tensor c = makeInts(DType::I8, {2}, {3, 2});
  Tensor d = makeInts(DType::I8, {2}, {5, 8});
  expectInts(run1(OpCode::Pow, {c, d}), DType::I8, {2}, {-13, 0});
}

TEST(InterpElementwise, BitwiseAndLogical) {
  Tensor a = makeInts(DType::I32, {2}, {0b1100, -1});
  Tensor b = makeInts(DType::I32, {2}, {0b1010, 0x0F0F});
  expectInts(run1(OpCode::And, {a, b}), DType::I32, {2}, {0b1000, 0x0F0F});
  expectInts(run1(OpCode::Or, {a, b}), DType::I32, {2}, {0b1110, -1});
  expectInts(run1(OpCode::Xor, {a, b}), DType::I32, {2}, {0b0110, ~0x0F0F});
  Tensor p = makeInts(DType::Bool, {4}, {0, 0, 1, 1});
  Tensor q = makeInts(DType::Bool, {4}, {0, 1, 0, 1});
  expectBools(run1(OpCode::And, {p, q}), {4}, {0, 0, 0, 1});
  expectBools(run1(OpCode::Or, {p, q}), {4}, {0, 1, 1, 1});
  expectBools(run1(OpCode::Xor, {p, q}), {4}, {0, 1, 1, 0});
}

TEST(InterpElementwise, ShiftsIncludingOutOfRangeAmounts) {
  // 1<<31 = INT_MIN; shifts by >= 32 or < 0 give 0 (left/logical) or the sign fill (arithmetic).
  Tensor a = makeInts(DType::I32, {4}, {1, 1, 1, -1});
  Tensor s = makeInts(DType::I32, {4}, {3, 31, 32, -1});
  expectInts(run1(OpCode::ShiftLeft, {a, s}), DType::I32, {4}, {8, kI32Min, 0, 0});
  Tensor b = makeInts(DType::I32, {4}, {-16, -16, 16, -1});
  Tensor t = makeInts(DType::I32, {4}, {2, 40, 40, 31});
  expectInts(run1(OpCode::ShiftRightArithmetic, {b, t}), DType::I32, {4}, {-4, -1, 0, -1});
  // Logical: 0xFFFFFFF0 >> 28 = 0xF; -1 >> 31 = 1.
  Tensor c = makeInts(DType::I32, {4}, {-16, 16, -1, 5});
  Tensor u = makeInts(DType::I32, {4}, {28, 40, 31, -3});
  expectInts(run1(OpCode::ShiftRightLogical, {c, u}), DType::I32, {4}, {15, 0, 1, 0});
  // i8: 0x40 << 1 = 0x80 = -128. u8 arithmetic shift fills with the top bit of the pattern:
  // 0x80 >> 1 = 0xC0 = 192; logical gives 0x40.
  expectInts(
      run1(OpCode::ShiftLeft, {makeInts(DType::I8, {1}, {0x40}), makeInts(DType::I8, {1}, {1})}),
      DType::I8, {1}, {-128});
  Tensor x8 = makeInts(DType::U8, {2}, {0x80, 0x80});
  Tensor s8 = makeInts(DType::U8, {2}, {1, 9});
  expectInts(run1(OpCode::ShiftRightArithmetic, {x8, s8}), DType::U8, {2}, {0xC0, 0xFF});
  expectInts(run1(OpCode::ShiftRightLogical, {x8, s8}), DType::U8, {2}, {0x40, 0});
  // i64 uses the full 64-bit width: 1 << 62 is fine, 1 << 64 is 0.
  Tensor one = makeInts(DType::I64, {2}, {1, 1});
  Tensor by = makeInts(DType::I64, {2}, {62, 64});
  expectInts(run1(OpCode::ShiftLeft, {one, by}), DType::I64, {2}, {int64_t(1) << 62, 0});
}

TEST(InterpElementwise, CompareAllDirectionsWithNaN) {
  Tensor a = make(DType::F32, {4}, {1, 2, kNaN, 3});
  Tensor b = make(DType::F32, {4}, {1, 3, kNaN, 2});
  // NaN compares false, except ne which is true.
  expectBools(run1(OpCode::Compare, {a, b}, direction("eq")), {4}, {1, 0, 0, 0});
  expectBools(run1(OpCode::Compare, {a, b}, direction("ne")), {4}, {0, 1, 1, 1});
  expectBools(run1(OpCode::Compare, {a, b}, direction("lt")), {4}, {0, 1, 0, 0});
  expectBools(run1(OpCode::Compare, {a, b}, direction("le")), {4}, {1, 1, 0, 0});
  expectBools(run1(OpCode::Compare, {a, b}, direction("gt")), {4}, {0, 0, 0, 1});
  expectBools(run1(OpCode::Compare, {a, b}, direction("ge")), {4}, {1, 0, 0, 1});
}

TEST(InterpElementwise, CompareIntegersAndBools) {
  Tensor a = makeInts(DType::U8, {3}, {0, 200, 5});
  Tensor b = makeInts(DType::U8, {3}, {255, 100, 5});
  // u8 compares unsigned: 200 > 100, 0 < 255.
  expectBools(run1(OpCode::Compare, {a, b}, direction("lt")), {3}, {1, 0, 0});
  Tensor i = makeInts(DType::I64, {2}, {std::numeric_limits<int64_t>::min(), 7});
  Tensor j = makeInts(DType::I64, {2}, {0, 7});
  expectBools(run1(OpCode::Compare, {i, j}, direction("ge")), {2}, {0, 1});
  // bool: false < true.
  Tensor p = makeInts(DType::Bool, {2}, {0, 1});
  Tensor q = makeInts(DType::Bool, {2}, {1, 1});
  expectBools(run1(OpCode::Compare, {p, q}, direction("lt")), {2}, {1, 0});
}

TEST(InterpElementwise, HalfAndBfloat16RoundToNearestEven) {
  // f16 has 10 fraction bits. 1 + 2^-11 is halfway between 1 and 1+2^-10: ties go to the even
  // mantissa (1). (1+2^-10) + 2^-11 is halfway between 1+2^-10 (odd) and 1+2^-9: rounds up.
  // 65504 + 16 = 65520 is halfway to 65536, which is out of range: inf. 2^-14 + 2^-14 = 2^-13.
  // numpy: (a.astype(np.float32) + b.astype(np.float32)).astype(np.float16)
  Tensor a = make(DType::F16, {4}, {1, 1.0009765625, 65504, 0.00006103515625});
  Tensor b = make(DType::F16, {4}, {0.00048828125, 0.00048828125, 16, 0.00006103515625});
  expectValues(run1(OpCode::Add, {a, b}), DType::F16, {4}, {1, 1.001953125, kInf, 0.0001220703125});
  // bf16 has 7 fraction bits: 1 + 2^-8 ties to 1; (1+2^-7) + 2^-8 ties up to 1 + 2^-6.
  Tensor c = make(DType::BF16, {2}, {1, 1.0078125});
  Tensor d = make(DType::BF16, {2}, {0.00390625, 0.00390625});
  expectValues(run1(OpCode::Add, {c, d}), DType::BF16, {2}, {1, 1.015625});
  // bf16 product: 1.0078125^2 = 1.01568603515625 -> nearest bf16 is 1.015625.
  expectValues(run1(OpCode::Mul, {c, c}), DType::BF16, {2}, {1, 1.015625});
}

TEST(InterpElementwise, BinaryOnZeroSize) {
  Tensor a = makeInts(DType::I32, {2, 0}, {});
  expectInts(run1(OpCode::Add, {a, a}), DType::I32, {2, 0}, {});
  expectBools(run1(OpCode::Compare, {a, a}, direction("eq")), {2, 0}, {});
}

// ---- ternary ----

TEST(InterpElementwise, SelectWithFullAndScalarPredicate) {
  Tensor p = makeInts(DType::Bool, {2, 2}, {1, 0, 0, 1});
  Tensor t = make(DType::F32, {2, 2}, {1, 2, 3, 4});
  Tensor f = make(DType::F32, {2, 2}, {10, 20, 30, 40});
  expectValues(run1(OpCode::Select, {p, t, f}), DType::F32, {2, 2}, {1, 20, 30, 4});
  Tensor yes = makeInts(DType::Bool, {}, {1});
  Tensor no = makeInts(DType::Bool, {}, {0});
  expectValues(run1(OpCode::Select, {yes, t, f}), DType::F32, {2, 2}, {1, 2, 3, 4});
  expectValues(run1(OpCode::Select, {no, t, f}), DType::F32, {2, 2}, {10, 20, 30, 40});
  // Any dtype moves through select unchanged: i64 beyond 2^53.
  const int64_t big = (int64_t(1) << 60) + 1;
  Tensor ti = makeInts(DType::I64, {2}, {big, -big});
  Tensor fi = makeInts(DType::I64, {2}, {0, 0});
  expectInts(run1(OpCode::Select, {makeInts(DType::Bool, {2}, {1, 1}), ti, fi}), DType::I64, {2},
             {big, -big});
}

TEST(InterpElementwise, ClampWithScalarAndFullBounds) {
  Tensor lo = make(DType::F32, {}, {0});
  Tensor hi = make(DType::F32, {}, {6});
  Tensor x = make(DType::F32, {5}, {-1, 3, 7, kNaN, 6});
  // min(max(x, 0), 6); NaN propagates.
  expectValues(run1(OpCode::Clamp, {lo, x, hi}), DType::F32, {5}, {0, 3, 6, kNaN, 6});
  Tensor los = makeInts(DType::I32, {3}, {0, 5, -10});
  Tensor his = makeInts(DType::I32, {3}, {1, 9, -5});
  Tensor xi = makeInts(DType::I32, {3}, {4, 2, -7});
  expectInts(run1(OpCode::Clamp, {los, xi, his}), DType::I32, {3}, {1, 5, -7});
}

// ---- convert and iota ----

TEST(InterpElementwise, ConvertFloatToIntTruncatesAndSaturates) {
  Tensor x = make(DType::F32, {7}, {1.9, -1.9, kNaN, 1e10, -1e10, kInf, -0.5});
  Tensor y = run1(OpCode::Convert, {x}, {}, {TensorType::of(DType::I32, {7})});
  expectInts(y, DType::I32, {7}, {1, -1, 0, kI32Max, kI32Min, kI32Max, 0});
  Tensor u = run1(OpCode::Convert, {make(DType::F64, {4}, {-5, 300, 255.9, 7.5})}, {},
                  {TensorType::of(DType::U8, {4})});
  expectInts(u, DType::U8, {4}, {0, 255, 255, 7});
  // i64 saturates at its limits too (9.3e18 > 2^63).
  Tensor l = run1(OpCode::Convert, {make(DType::F64, {2}, {9.3e18, -9.3e18})}, {},
                  {TensorType::of(DType::I64, {2})});
  expectInts(l, DType::I64, {2},
             {std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()});
}

TEST(InterpElementwise, ConvertIntegerToIntegerWraps) {
  // Low bits are kept: 300 -> 44 (i8), -129 -> 127, -1 -> 255 (u8).
  Tensor x = makeInts(DType::I32, {3}, {300, -129, -1});
  expectInts(run1(OpCode::Convert, {x}, {}, {TensorType::of(DType::I8, {3})}), DType::I8, {3},
             {44, 127, -1});
  expectInts(run1(OpCode::Convert, {x}, {}, {TensorType::of(DType::U8, {3})}), DType::U8, {3},
             {44, 127, 255});
  expectInts(run1(OpCode::Convert, {makeInts(DType::U8, {1}, {250})}, {},
                  {TensorType::of(DType::I64, {1})}),
             DType::I64, {1}, {250});
}

TEST(InterpElementwise, ConvertToAndFromBool) {
  Tensor x = make(DType::F32, {4}, {0, -0.0, kNaN, 0.1});
  expectBools(run1(OpCode::Convert, {x}, {}, {TensorType::of(DType::Bool, {4})}), {4},
              {0, 0, 1, 1});
  Tensor i = makeInts(DType::I8, {3}, {0, -3, 1});
  expectBools(run1(OpCode::Convert, {i}, {}, {TensorType::of(DType::Bool, {3})}), {3}, {0, 1, 1});
  Tensor b = makeInts(DType::Bool, {2}, {1, 0});
  expectValues(run1(OpCode::Convert, {b}, {}, {TensorType::of(DType::F16, {2})}), DType::F16, {2},
               {1, 0});
  expectInts(run1(OpCode::Convert, {b}, {}, {TensorType::of(DType::I32, {2})}), DType::I32, {2},
             {1, 0});
}

TEST(InterpElementwise, ConvertRoundsOnceToHalfAndBfloat16) {
  // i32 2^24 + 2^16 + 1 to bf16 (8 significant bits, spacing 2^17 there): it is just above the
  // midpoint 2^24 + 2^16, so it rounds up to 2^24 + 2^17 = 16908288. Going through f32 first
  // would round to 2^24 + 2^16 (a tie) and then down to 2^24.
  Tensor x = makeInts(DType::I32, {1}, {(1 << 24) + (1 << 16) + 1});
  expectValues(run1(OpCode::Convert, {x}, {}, {TensorType::of(DType::BF16, {1})}), DType::BF16, {1},
               {16908288});
  // f64 1 + 2^-11 + 2^-40 to f16: above the tie between 1 and 1 + 2^-10, so 1 + 2^-10.
  Tensor d = make(DType::F64, {1}, {1 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40)});
  expectValues(run1(OpCode::Convert, {d}, {}, {TensorType::of(DType::F16, {1})}), DType::F16, {1},
               {1.0009765625});
  // Integer ties to f16 (spacing 2 above 2048): 2049 -> 2048 (even), 2051 -> 2052 (even);
  // 70000 is beyond the f16 range: inf.
  Tensor t = makeInts(DType::I32, {3}, {2049, 2051, 70000});
  expectValues(run1(OpCode::Convert, {t}, {}, {TensorType::of(DType::F16, {3})}), DType::F16, {3},
               {2048, 2052, kInf});
  // numpy: float(np.float32(np.int64(2**53 + 1))) = 9007199254740992
  Tensor big = makeInts(DType::I64, {1}, {(int64_t(1) << 53) + 1});
  expectValues(run1(OpCode::Convert, {big}, {}, {TensorType::of(DType::F32, {1})}), DType::F32, {1},
               {9007199254740992.0});
  // f16 -> f32 is exact, NaN stays NaN.
  Tensor h = make(DType::F16, {2}, {0.1, kNaN});
  expectValues(run1(OpCode::Convert, {h}, {}, {TensorType::of(DType::F32, {2})}), DType::F32, {2},
               {0.0999755859375, kNaN});
}

TEST(InterpElementwise, IotaAlongEachDimension) {
  AttrMap d0{{"dimension", intAttr(0)}}, d1{{"dimension", intAttr(1)}};
  Tensor a = run1(OpCode::Iota, {}, d1, {TensorType::of(DType::I32, {2, 3})});
  expectInts(a, DType::I32, {2, 3}, {0, 1, 2, 0, 1, 2});
  Tensor b = run1(OpCode::Iota, {}, d0, {TensorType::of(DType::F16, {3, 2})});
  expectValues(b, DType::F16, {3, 2}, {0, 0, 1, 1, 2, 2});
  Tensor c = run1(OpCode::Iota, {}, d0, {TensorType::of(DType::I64, {0, 4})});
  expectInts(c, DType::I64, {0, 4}, {});
  // u8 iota past 255 wraps like an integer conversion: 256 -> 0, 257 -> 1.
  Tensor u = run1(OpCode::Iota, {}, d0, {TensorType::of(DType::U8, {258})});
  EXPECT_EQ(u.getInt(255), 255);
  EXPECT_EQ(u.getInt(256), 0);
  EXPECT_EQ(u.getInt(257), 1);
}

// ---- u16 / u32 / u64 ----

TEST(InterpElementwise, UnsignedArithmeticWraps) {
  // u16: 65535 + 2 = 65537 - 65536 = 1; 3 - 5 = 65534; 300 * 300 = 90000 - 65536 = 24464.
  Tensor a16 = makeUInts(DType::U16, {3}, {65535, 3, 300});
  Tensor b16 = makeUInts(DType::U16, {3}, {2, 5, 300});
  expectUInts(run1(OpCode::Add, {a16, b16}), DType::U16, {3}, {1, 8, 600});
  expectUInts(run1(OpCode::Sub, {a16, b16}), DType::U16, {3}, {65533, 65534, 0});
  expectUInts(run1(OpCode::Mul, {a16, b16}), DType::U16, {3}, {131070 - 65536, 15, 24464});
  // u32: 4294967295 + 1 = 0; 0 - 1 = 4294967295; 65536 * 65537 = 2^32 + 2^16 -> 65536.
  Tensor a32 = makeUInts(DType::U32, {3}, {4294967295u, 0, 65536});
  Tensor b32 = makeUInts(DType::U32, {3}, {1, 1, 65537});
  expectUInts(run1(OpCode::Add, {a32, b32}), DType::U32, {3}, {0, 1, 65536 + 65537});
  expectUInts(run1(OpCode::Sub, {a32, b32}), DType::U32, {3},
              {4294967294u, 4294967295u, 4294967295u});
  expectUInts(run1(OpCode::Mul, {a32, b32}), DType::U32, {3}, {4294967295u, 0, 65536});
  // u64: (2^64 - 1) + 2 = 1; 0 - 1 = 2^64 - 1; 2^63 * 2 = 2^64 -> 0; 2^32 * (2^32 + 3) = 3 * 2^32.
  Tensor a64 = makeUInts(DType::U64, {4}, {kU64Max, 0, k2p63, uint64_t(1) << 32});
  Tensor b64 = makeUInts(DType::U64, {4}, {2, 1, 2, (uint64_t(1) << 32) + 3});
  expectUInts(run1(OpCode::Add, {a64, b64}), DType::U64, {4},
              {1, 1, k2p63 + 2, (uint64_t(2) << 32) + 3});
  expectUInts(run1(OpCode::Sub, {a64, b64}), DType::U64, {4},
              {kU64Max - 2, kU64Max, k2p63 - 2, kU64Max - 2});
  expectUInts(run1(OpCode::Mul, {a64, b64}), DType::U64, {4},
              {kU64Max - 1, 0, 0, uint64_t(3) << 32});
}

TEST(InterpElementwise, UnsignedDivRemAreUnsigned) {
  // Read as signed, 65535 would be -1 and 65535 / 2 would be 0; unsigned it is 32767 rem 1.
  // x / 0 = 0 and x % 0 = x as for the signed types.
  Tensor a16 = makeUInts(DType::U16, {3}, {65535, 7, 9});
  Tensor b16 = makeUInts(DType::U16, {3}, {2, 0, 4});
  expectUInts(run1(OpCode::Div, {a16, b16}), DType::U16, {3}, {32767, 0, 2});
  expectUInts(run1(OpCode::Rem, {a16, b16}), DType::U16, {3}, {1, 7, 1});
  // u32: 4294967295 / 10 = 429496729 rem 5; 3000000000 / 7 = 428571428 rem 4.
  Tensor a32 = makeUInts(DType::U32, {2}, {4294967295u, 3000000000u});
  Tensor b32 = makeUInts(DType::U32, {2}, {10, 7});
  expectUInts(run1(OpCode::Div, {a32, b32}), DType::U32, {2}, {429496729, 428571428});
  expectUInts(run1(OpCode::Rem, {a32, b32}), DType::U32, {2}, {5, 4});
  // u64: (2^64 - 1) / 2^63 = 1 rem 2^63 - 1; (2^64 - 1) / 10 = 1844674407370955161 rem 5;
  // 2^63 / (2^64 - 1) = 0 rem 2^63 (as i64 this would be INT64_MIN / -1).
  Tensor a64 = makeUInts(DType::U64, {4}, {kU64Max, kU64Max, k2p63, 5});
  Tensor b64 = makeUInts(DType::U64, {4}, {k2p63, 10, kU64Max, 0});
  expectUInts(run1(OpCode::Div, {a64, b64}), DType::U64, {4}, {1, 1844674407370955161u, 0, 0});
  expectUInts(run1(OpCode::Rem, {a64, b64}), DType::U64, {4}, {k2p63 - 1, 5, k2p63, 5});
}

TEST(InterpElementwise, UnsignedShiftsIncludingBitWidthAndMore) {
  // u16: 1 << 15 = 32768; a shift by 16 or more gives 0 (logical shifts).
  Tensor x16 = makeUInts(DType::U16, {4}, {1, 1, 0xFFFF, 0x8000});
  Tensor s16 = makeUInts(DType::U16, {4}, {15, 16, 17, 15});
  expectUInts(run1(OpCode::ShiftLeft, {x16, s16}), DType::U16, {4}, {32768, 0, 0, 0});
  expectUInts(run1(OpCode::ShiftRightLogical, {x16, s16}), DType::U16, {4}, {0, 0, 0, 1});
  // Arithmetic shift reads the pattern as signed: 0x8000 >> 15 = 0xFFFF; 0xFFFF >> 17 = 0xFFFF.
  expectUInts(run1(OpCode::ShiftRightArithmetic, {x16, s16}), DType::U16, {4},
              {0, 0, 0xFFFF, 0xFFFF});
  // u32: 3 << 31 = 2^31 (the top bit of 3 falls off); 0x80000000 >> 31 = 1; by 32 -> 0.
  Tensor x32 = makeUInts(DType::U32, {3}, {3, 0x80000000u, 0xFFFFFFFFu});
  Tensor s32 = makeUInts(DType::U32, {3}, {31, 31, 32});
  expectUInts(run1(OpCode::ShiftLeft, {x32, s32}), DType::U32, {3}, {0x80000000u, 0, 0});
  expectUInts(run1(OpCode::ShiftRightLogical, {x32, s32}), DType::U32, {3}, {0, 1, 0});
  // u64: 1 << 63 = 2^63; 2^63 >> 63 = 1; shifts by 64 and by 2^63 (negative as i64) give 0.
  Tensor x64 = makeUInts(DType::U64, {4}, {1, k2p63, kU64Max, kU64Max});
  Tensor s64 = makeUInts(DType::U64, {4}, {63, 63, 64, k2p63});
  expectUInts(run1(OpCode::ShiftLeft, {x64, s64}), DType::U64, {4}, {k2p63, 0, 0, 0});
  expectUInts(run1(OpCode::ShiftRightLogical, {x64, s64}), DType::U64, {4}, {0, 1, 0, 0});
}

TEST(InterpElementwise, UnsignedMaxMinCompareAndUnary) {
  // Values with the top bit set are the largest, not negative.
  Tensor a = makeUInts(DType::U64, {3}, {k2p63, 1, kU64Max});
  Tensor b = makeUInts(DType::U64, {3}, {5, k2p63 + 1, 0});
  expectUInts(run1(OpCode::Max, {a, b}), DType::U64, {3}, {k2p63, k2p63 + 1, kU64Max});
  expectUInts(run1(OpCode::Min, {a, b}), DType::U64, {3}, {5, 1, 0});
  expectBools(run1(OpCode::Compare, {a, b}, direction("gt")), {3}, {1, 0, 1});
  Tensor c = makeUInts(DType::U32, {2}, {0x80000000u, 7});
  Tensor d = makeUInts(DType::U32, {2}, {1, 0xFFFFFFFFu});
  expectUInts(run1(OpCode::Max, {c, d}), DType::U32, {2}, {0x80000000u, 0xFFFFFFFFu});
  expectBools(run1(OpCode::Compare, {c, d}, direction("lt")), {2}, {0, 1});
  // abs is the identity, sign is 0 or 1, neg wraps: neg 1 = 65535 (u16), neg 2^63 = 2^63 (u64).
  Tensor u = makeUInts(DType::U16, {3}, {0, 1, 40000});
  expectUInts(run1(OpCode::Abs, {u}), DType::U16, {3}, {0, 1, 40000});
  expectUInts(run1(OpCode::Sign, {u}), DType::U16, {3}, {0, 1, 1});
  expectUInts(run1(OpCode::Neg, {u}), DType::U16, {3}, {0, 65535, 65536 - 40000});
  expectUInts(run1(OpCode::Neg, {makeUInts(DType::U64, {2}, {k2p63, 1})}), DType::U64, {2},
              {k2p63, kU64Max});
  expectUInts(run1(OpCode::Not, {makeUInts(DType::U32, {1}, {0x0000FFFFu})}), DType::U32, {1},
              {0xFFFF0000u});
}

TEST(InterpElementwise, ConvertU64ToAndFromF64AndI64) {
  // u64 -> f64 rounds to nearest: 2^64 - 1 -> 2^64; 2^63 + 1 -> 2^63 (53-bit significand).
  Tensor u = makeUInts(DType::U64, {4}, {kU64Max, k2p63 + 1, 3, 0});
  expectValues(run1(OpCode::Convert, {u}, {}, {TensorType::of(DType::F64, {4})}), DType::F64, {4},
               {18446744073709551616.0, 9223372036854775808.0, 3, 0});
  // u64 -> i64 keeps the bits: 2^64 - 1 -> -1, 2^63 + 1 -> INT64_MIN + 1.
  expectInts(run1(OpCode::Convert, {u}, {}, {TensorType::of(DType::I64, {4})}), DType::I64, {4},
             {-1, std::numeric_limits<int64_t>::min() + 1, 3, 0});
  // f64 -> u64 truncates and saturates: 1.5e19 (> 2^63) is exact, 2^64 saturates, -1 -> 0,
  // NaN -> 0, 7.9 -> 7.
  Tensor f = make(DType::F64, {5}, {1.5e19, 18446744073709551616.0, -1, kNaN, 7.9});
  expectUInts(run1(OpCode::Convert, {f}, {}, {TensorType::of(DType::U64, {5})}), DType::U64, {5},
              {15000000000000000000u, kU64Max, 0, 0, 7});
  // i64 -> u64 keeps the bits: -1 -> 2^64 - 1, INT64_MIN -> 2^63.
  Tensor i = makeInts(DType::I64, {3}, {-1, std::numeric_limits<int64_t>::min(), 42});
  expectUInts(run1(OpCode::Convert, {i}, {}, {TensorType::of(DType::U64, {3})}), DType::U64, {3},
              {kU64Max, k2p63, 42});
  // Between the narrower unsigned types the low bits are kept: u32 70000 -> u16 4464;
  // u16 65535 -> i16 -1; i8 -1 -> u32 4294967295; f32 -3.5 -> u16 0 (saturates).
  expectUInts(run1(OpCode::Convert, {makeUInts(DType::U32, {1}, {70000})}, {},
                   {TensorType::of(DType::U16, {1})}),
              DType::U16, {1}, {4464});
  expectInts(run1(OpCode::Convert, {makeUInts(DType::U16, {1}, {65535})}, {},
                  {TensorType::of(DType::I16, {1})}),
             DType::I16, {1}, {-1});
  expectUInts(run1(OpCode::Convert, {makeInts(DType::I8, {1}, {-1})}, {},
                   {TensorType::of(DType::U32, {1})}),
              DType::U32, {1}, {4294967295u});
  expectUInts(
      run1(OpCode::Convert, {make(DType::F32, {1}, {-3.5})}, {}, {TensorType::of(DType::U16, {1})}),
      DType::U16, {1}, {0});
}

TEST(InterpElementwise, UnsignedTensorAccessors) {
  Tensor t(DType::U64, {3});
  t.setInt(0, -1);       // low bits: 2^64 - 1
  t.setDouble(1, 1e30);  // saturates
  t.setDouble(2, -5);    // saturates at 0
  EXPECT_EQ(t.getUInt(0), kU64Max);
  EXPECT_EQ(t.getInt(0), -1);  // the bit pattern read as i64
  EXPECT_EQ(t.getUInt(1), kU64Max);
  EXPECT_EQ(t.getUInt(2), 0u);
  EXPECT_EQ(t.getDouble(0), 18446744073709551616.0);
  Tensor s(DType::U32, {2});
  s.setInt(0, -1);
  s.setDouble(1, 4294967296.0);  // 2^32 saturates to 2^32 - 1
  EXPECT_EQ(s.getInt(0), 4294967295);
  EXPECT_EQ(s.getInt(1), 4294967295);
}

}  // namespace
}  // namespace kiln
