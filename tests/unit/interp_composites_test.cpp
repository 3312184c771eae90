// Reference interpreter: softmax, log_softmax, layer_norm, batch_norm_inference, gelu and
// attention, computed by their direct kernels (not through the decompositions).
//
// Expected values come from numpy via /usr/bin/python3 in float64 (the expression is next to
// each case); pat(shape, mul, mod, off, scale) = ((np.arange(n)*mul % mod - off)*scale).reshape
// is the fill used for larger operands. Tolerances: f32 results are compared to 2e-6 absolute
// (values are at most a few units, and the kernels work in double before one rounding to f32,
// so the error is within an f32 ulp of the value); f64 to 1e-12.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "interp/interpreter.h"
#include "ir/builder.h"

namespace kiln {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kTolF32 = 2e-6;

Tensor make(DType t, std::vector<int64_t> dims, const std::vector<double>& values) {
  Tensor x(t, std::move(dims));
  EXPECT_EQ(static_cast<size_t>(x.numElements()), values.size());
  for (size_t i = 0; i < values.size(); ++i) x.setDouble(static_cast<int64_t>(i), values[i]);
  return x;
}

// numpy: ((np.arange(n) * mul) % mod - off) * scale
Tensor pat(DType t, std::vector<int64_t> dims, int64_t mul, int64_t mod, int64_t off,
           double scale) {
  Tensor x(t, std::move(dims));
  for (int64_t i = 0; i < x.numElements(); ++i)
    x.setDouble(i, static_cast<double>((i * mul) % mod - off) * scale);
  return x;
}

Tensor run1(OpCode op, const std::vector<Tensor>& inputs, AttrMap attrs) {
  Module m;
  Function* f = m.addFunction("main");
  Builder b(f);
  std::vector<Value*> params;
  for (const Tensor& t : inputs) params.push_back(b.parameter(t.type()));
  Value* r = b.op(op, params, std::move(attrs));
  EXPECT_TRUE(b.ok()) << b.status().str();
  if (!r) return Tensor();
  f->setOutputs({r});
  auto out = interpret(*f, inputs);
  EXPECT_TRUE(out.isOk()) << out.status().str();
  return out.isOk() ? (*out)[0] : Tensor();
}

// Checks dtype, dims and values (NaN matches NaN; infinities must match exactly).
void expectTensor(const Tensor& got, DType t, const std::vector<int64_t>& dims,
                  const std::vector<double>& want, double tol) {
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

// --- softmax / log_softmax ---------------------------------------------------------------------

TEST(InterpSoftmax, AlongEitherAxis) {
  Tensor x = make(DType::F32, {2, 3}, {1, 2, 3, -1, 0, 5});
  // numpy: e = np.exp(x - x.max(axis, keepdims=True)); e / e.sum(axis, keepdims=True)
  expectTensor(run1(OpCode::Softmax, {x}, {{"axis", intAttr(1)}}), DType::F32, {2, 3},
               {0.09003057317038046, 0.24472847105479764, 0.6652409557748218, 0.0024561149044509535,
                0.006676412513376451, 0.9908674725821726},
               kTolF32);
  expectTensor(run1(OpCode::Softmax, {x}, {{"axis", intAttr(0)}}), DType::F32, {2, 3},
               {0.8807970779778823, 0.8807970779778823, 0.11920292202211755, 0.11920292202211755,
                0.11920292202211755, 0.8807970779778823},
               kTolF32);
  // numpy: x - m - np.log(np.exp(x - m).sum(1, keepdims=True)), m = x.max(1, keepdims=True)
  expectTensor(run1(OpCode::LogSoftmax, {x}, {{"axis", intAttr(1)}}), DType::F32, {2, 3},
               {-2.4076059644443806, -1.4076059644443804, -0.4076059644443804, -6.0091744845917345,
                -5.0091744845917345, -0.009174484591734727},
               kTolF32);
  Tensor x64 = make(DType::F64, {2, 3}, {1, 2, 3, -1, 0, 5});
  expectTensor(run1(OpCode::LogSoftmax, {x64}, {{"axis", intAttr(1)}}), DType::F64, {2, 3},
               {-2.4076059644443806, -1.4076059644443804, -0.4076059644443804, -6.0091744845917345,
                -5.0091744845917345, -0.009174484591734727},
               1e-12);
}

TEST(InterpSoftmax, LargeInputsDoNotOverflow) {
  // Subtracting the max first: softmax([1000, 1000]) = [0.5, 0.5], not inf/inf.
  expectTensor(run1(OpCode::Softmax, {make(DType::F32, {2}, {1000, 1000})}, {{"axis", intAttr(0)}}),
               DType::F32, {2}, {0.5, 0.5}, 0);
  // log_softmax of [0, -inf] is [0, -inf].
  expectTensor(
      run1(OpCode::LogSoftmax, {make(DType::F32, {2}, {0, -kInf})}, {{"axis", intAttr(0)}}),
      DType::F32, {2}, {0, -kInf}, 0);
}

TEST(InterpSoftmax, AllMinusInfinityOrNaNGivesNaN) {
  // exp(-inf - -inf) is NaN, as in the decomposition; a NaN anywhere poisons its row only.
  Tensor x = make(DType::F32, {2, 2}, {-kInf, -kInf, 1, kNaN});
  expectTensor(run1(OpCode::Softmax, {x}, {{"axis", intAttr(1)}}), DType::F32, {2, 2},
               {kNaN, kNaN, kNaN, kNaN}, 0);
  Tensor y = make(DType::F32, {2, 2}, {0, 0, 1, kNaN});
  expectTensor(run1(OpCode::Softmax, {y}, {{"axis", intAttr(1)}}), DType::F32, {2, 2},
               {0.5, 0.5, kNaN, kNaN}, 0);
}

TEST(InterpSoftmax, HalfComputesInF32AndRoundsOnce) {
  // numpy: softmax(np.float32 x, 1).astype(np.float16) for x = [[0.5, -1.25, 3, 2]]; the kernel
  // must land on the same f16 values (tolerance: half an f16 ulp at 0.68, 2^-12).
  Tensor x = make(DType::F16, {1, 4}, {0.5, -1.25, 3.0, 2.0});
  expectTensor(run1(OpCode::Softmax, {x}, {{"axis", intAttr(1)}}), DType::F16, {1, 4},
               {0.056060791015625, 0.00974273681640625, 0.68310546875, 0.251220703125},
               std::ldexp(1.0, -12));
}

// --- layer_norm --------------------------------------------------------------------------------

// ln(x, axis, s, b, eps): axes = range(axis, x.ndim); m = x.mean(axes, keepdims=True);
// v = ((x - m)**2).mean(axes, keepdims=True); (x - m) / np.sqrt(v + eps) * s + b.
TEST(InterpLayerNorm, OverTwoTrailingDimsWithBias) {
  Tensor x = pat(DType::F32, {2, 2, 3}, 7, 11, 5, 0.5);
  Tensor s = make(DType::F32, {2, 3}, {0.25, 1.5, 1.0, 0.5, 1.75, 1.25});  // pat(5,7,3,.25) + 1
  Tensor b = pat(DType::F32, {2, 3}, 3, 5, 2, 0.5);
  expectTensor(run1(OpCode::LayerNorm, {x, s, b}, {{"axis", intAttr(1)}}), DType::F32, {2, 2, 3},
               {-1.3482623959083933, 1.5447871877251795, -0.9975177084405616, 1.7960283335048985,
                0.6965247918167863, -1.995035416881123, -0.6595081649951738, 0.7269945566698841,
                -1.5593079311261258, 1.529653965563063, -0.26482698278153144, -2.702459175024131},
               kTolF32);
}

TEST(InterpLayerNorm, LastDimWithoutBiasAndOwnEpsilon) {
  Tensor x = pat(DType::F64, {2, 2, 3}, 7, 11, 5, 0.5);
  Tensor s = make(DType::F64, {3}, {0.25, 1.5, 1.0});
  expectTensor(
      run1(OpCode::LayerNorm, {x, s}, {{"axis", intAttr(2)}, {"epsilon", floatAttr(1e-3)}}),
      DType::F64, {2, 2, 3},
      {-0.29054843151013776, 1.9176196479669094, -0.11621937260405509, 0.30612882407354547, 0.0,
       -1.2245152962941819, 0.30612882407354547, 0.0, -1.2245152962941819, 0.30612882407354547, 0.0,
       -1.2245152962941819},
      1e-12);
}

TEST(InterpLayerNorm, ConstantRowGivesTheBias) {
  // var = 0: (x - mean) = 0, so the result is the bias whatever the scale (eps keeps it finite).
  Tensor x = make(DType::BF16, {1, 4}, {3, 3, 3, 3});
  Tensor s = make(DType::BF16, {4}, {2, 2, 2, 2});
  Tensor b = make(DType::BF16, {4}, {0.5, -1, 0, 7});
  expectTensor(run1(OpCode::LayerNorm, {x, s, b}, {{"axis", intAttr(1)}}), DType::BF16, {1, 4},
               {0.5, -1, 0, 7}, 0);
}

// --- batch_norm_inference ----------------------------------------------------------------------

TEST(InterpBatchNorm, FeatureIndexOneAndLast) {
  Tensor scale = make(DType::F32, {3}, {1, 2, 0.5}), offset = make(DType::F32, {3}, {0, -1, 3}),
         mean = make(DType::F32, {3}, {0.5, -0.5, 1}), var = make(DType::F32, {3}, {1, 4, 0.25});
  // numpy: (x - mu[:,None]) / np.sqrt(var[:,None] + 1e-5) * sc[:,None] + of[:,None] per batch,
  // x = pat([2,3,2], 7, 11, 5, 0.5).
  expectTensor(run1(OpCode::BatchNormInference,
                    {pat(DType::F32, {2, 3, 2}, 7, 11, 5, 0.5), scale, offset, mean, var}, {}),
               DType::F32, {2, 3, 2},
               {-2.999985000112499, 0.4999975000187499, -1.4999993750011718, 1.999996250007031,
                2.5000099997000103, 0.5000499985000504, 1.4999925000562495, -0.4999975000187499,
                -2.4999981250035157, 0.9999975000046875, 1.50002999910003, -0.49993000209992955},
               kTolF32);
  // NHWC: feature_index 3, epsilon 0.1; numpy: (x - mu) / np.sqrt(var + 0.1) * sc + of.
  expectTensor(run1(OpCode::BatchNormInference,
                    {pat(DType::F32, {1, 2, 2, 3}, 7, 11, 5, 0.5), scale, offset, mean, var},
                    {{"feature_index", intAttr(3)}, {"epsilon", floatAttr(0.1)}}),
               DType::F32, {1, 2, 2, 3},
               {-2.8603877677367766, 0.4815943949743846, 1.3096914905429669, 1.9069251784911845,
                -0.012270403350410297, 0.8871143631787084, 1.4301938838683883, -0.5061352016752052,
                0.46453723581445017, 0.9534625892455922, -1.0, 0.041960108450191935},
               kTolF32);
}

// --- gelu --------------------------------------------------------------------------------------

TEST(InterpGelu, ExactAndTanhForms) {
  std::vector<double> xs = {-3, -1, -0.5, 0, 0.5, 1, 3};
  Tensor x = make(DType::F32, {7}, xs);
  // 0.5*v*(1+math.erf(v/math.sqrt(2)))
  expectTensor(run1(OpCode::Gelu, {x}, {}), DType::F32, {7},
               {-0.00404969409489031, -0.15865525393145707, -0.15426876936299344, 0.0,
                0.34573123063700656, 0.8413447460685429, 2.99595030590511},
               kTolF32);
  // 0.5*v*(1+math.tanh(math.sqrt(2/math.pi)*(v+0.044715*v**3)))
  expectTensor(run1(OpCode::Gelu, {x}, {{"approximate", enumAttr("tanh")}}), DType::F32, {7},
               {-0.0036373920817729943, -0.15880800939172324, -0.15428599017485606, 0.0,
                0.34571400982514394, 0.8411919906082768, 2.996362607918227},
               kTolF32);
  // bf16: the exact form in f32, rounded to bf16 by numpy bit arithmetic
  // (u + 0x7fff + ((u >> 16) & 1)) & 0xffff0000 on the f32 bits u.
  expectTensor(run1(OpCode::Gelu, {make(DType::BF16, {7}, xs)}, {}), DType::BF16, {7},
               {-0.004058837890625, -0.158203125, -0.154296875, 0.0, 0.345703125, 0.83984375, 3.0},
               0);
}

// --- attention ---------------------------------------------------------------------------------

// attn(q, k, v, scale=1/sqrt(D), causal, bmask, amask) in numpy:
//   s = scale * q @ swapaxes(k, -1, -2) (+ amask); s = np.where(bmask, s, -inf);
//   causal: s = np.where(j <= i + (Sk - Sq), s, -inf); softmax(s, -1) @ v
// with q = pat([2,3,4], 7,11,5, .25), k = pat([2,5,4], 5,7,3, .5), v = pat([2,5,2], 3,5,2, 1).
struct AttentionInputs {
  Tensor q = pat(DType::F32, {2, 3, 4}, 7, 11, 5, 0.25);
  Tensor k = pat(DType::F32, {2, 5, 4}, 5, 7, 3, 0.5);
  Tensor v = pat(DType::F32, {2, 5, 2}, 3, 5, 2, 1.0);
};

TEST(InterpAttention, DefaultScale) {
  AttentionInputs in;
  expectTensor(run1(OpCode::Attention, {in.q, in.k, in.v}, {}), DType::F32, {2, 3, 2},
               {-0.07890853007824566, -0.5031387302229144, 0.8472688366787409, 0.02556087307507489,
                -1.4045947525478135, 0.9394270246245529, -0.5900053889981349, 0.39678217460632964,
                -0.25933275678632933, -0.23371320151098382, 1.179730872462142, -0.1560634379041227},
               kTolF32);
}

TEST(InterpAttention, CausalIsBottomRightAligned) {
  // Sq = 3, Sk = 5: query i sees keys j <= i + 2, so the last query sees every key (its row
  // equals the unmasked one above) and the first sees keys 0..2.
  AttentionInputs in;
  expectTensor(run1(OpCode::Attention, {in.q, in.k, in.v}, {{"causal", boolAttr(true)}}),
               DType::F32, {2, 3, 2},
               {-1.0, -0.3672035606340849, -0.49645549963576036, 0.05535686393686784,
                -1.4045947525478135, 0.9394270246245529, -1.5413775159704104, 0.7949124642461247,
                -0.3269710213729491, -0.24070993774370728, 1.179730872462142, -0.1560634379041227},
               kTolF32);
}

TEST(InterpAttention, BoolMaskWithAFullyMaskedRow) {
  // bmask = (np.arange(30).reshape(2,3,5) * 7 % 3) != 0, then bmask[1,2,:] = False: that row
  // has no key to attend to and comes out NaN.
  AttentionInputs in;
  Tensor mask = make(DType::Bool, {2, 3, 5}, {0, 1, 1, 0, 1, 1, 0, 1, 1, 0, 1, 1, 0, 1, 1,
                                              0, 1, 1, 0, 1, 1, 0, 1, 1, 0, 0, 0, 0, 0, 0});
  expectTensor(run1(OpCode::Attention, {in.q, in.k, in.v, mask}, {}), DType::F32, {2, 3, 2},
               {0.47187661902629996, -1.1612412099468408, -0.2860239318512599, -0.7573107426145427,
                -1.4510534295085924, 1.0366521426446107, 0.48814617806114813, 0.21614557507567062,
                0.059405440085875505, -1.5270699673922723, kNaN, kNaN},
               kTolF32);
}

TEST(InterpAttention, AdditiveMaskAndExplicitScale) {
  // amask = pat([2,3,5], 3, 4, 1, 0.5), scale = 0.3.
  AttentionInputs in;
  Tensor mask = pat(DType::F32, {2, 3, 5}, 3, 4, 1, 0.5);
  expectTensor(run1(OpCode::Attention, {in.q, in.k, in.v, mask}, {{"scale", floatAttr(0.3)}}),
               DType::F32, {2, 3, 2},
               {-0.052255309261342836, -0.5126214569509027, 0.5860613189382277, 0.2746420102560885,
                -0.8076359910811578, 0.5807608606873608, -0.1059333968711102, -0.35791231239111987,
                -0.4135424230062156, 0.25033766179189587, 0.8276218287772659, 0.16931629096043127},
               kTolF32);
}

TEST(InterpAttention, TwoLeadingDimsAndMoreQueriesThanKeys) {
  // q = pat([1,2,3,2], 7,11,5, .25), k = pat([1,2,2,2], 5,7,3, .5), v = pat([1,2,2,3], 3,5,2, 1),
  // causal with Sq = 3 > Sk = 2: query 0 may see keys j <= -1, none, so its row is NaN; query 1
  // sees key 0 only (its row is v[..., 0, :]).
  Tensor q = pat(DType::F64, {1, 2, 3, 2}, 7, 11, 5, 0.25);
  Tensor k = pat(DType::F64, {1, 2, 2, 2}, 5, 7, 3, 0.5);
  Tensor v = pat(DType::F64, {1, 2, 2, 3}, 3, 5, 2, 1.0);
  expectTensor(run1(OpCode::Attention, {q, k, v}, {{"causal", boolAttr(true)}}), DType::F64,
               {1, 2, 3, 3},
               {kNaN, kNaN, kNaN, -2.0, 1.0, -1.0, 1.1605969514575296, 0.20985076213561765,
                -1.7901492378643824, kNaN, kNaN, kNaN, 1.0, -1.0, 2.0, 0.10704180146517044,
                -1.8929581985348296, 1.1070418014651704},
               1e-12);
}

}  // namespace
}  // namespace kiln
