// decompose-composites: each composite, built twice (kept whole / decomposed), is run through the
// reference interpreter on seeded random inputs and the two results are compared.
//
// Tolerances, as a bound on |decomposed - whole| <= tol * max(1, max|whole|):
//  - f32 1e-5: the two sides sum in different orders and may round intermediates differently
//    (the whole kernel may accumulate in double), a few f32 ulps of the largest magnitude.
//  - f16 2e-3: both sides compute in f32 and round once to f16 at the end, so an f32 difference
//    of a few ulps can flip the final rounding: at most about one f16 ulp (2^-10 ~ 9.8e-4 at 1),
//    doubled for margin.
//  - bf16 1.6e-2: the same argument with bf16's ulp of 2^-7 ~ 7.8e-3.
//  - f64 1e-12.
// NaN must match NaN (attention rows whose keys are all masked are NaN on both sides).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <random>

#include "interp/interpreter.h"
#include "ir/builder.h"
#include "ir/verifier.h"
#include "passes/decompose_composites.h"

namespace kiln {
namespace {

using BuildFn = std::function<Value*(Builder&)>;

std::unique_ptr<Module> makeModule(const BuildFn& build) {
  auto m = std::make_unique<Module>();
  Function* f = m->addFunction("main");
  Builder b(f);
  Value* out = build(b);
  EXPECT_TRUE(b.ok()) << b.status().str();
  if (out) f->setOutputs({out});
  return m;
}

int countComposites(const Function& f) {
  int n = 0;
  for (const auto& node : f.nodes()) n += node->info().opClass == OpClass::Composite;
  return n;
}

double tolerance(DType t) {
  switch (t) {
    case DType::F16: return 2e-3;
    case DType::BF16: return 1.6e-2;
    case DType::F64: return 1e-12;
    default: return 1e-5;
  }
}

// Uniform in [lo, hi) (bool: true with probability 0.7), rounded to the dtype.
Tensor randomTensor(DType t, std::vector<int64_t> dims, std::mt19937& rng, double lo = -3,
                    double hi = 3) {
  Tensor x(t, std::move(dims));
  std::uniform_real_distribution<double> u(lo, hi);
  std::bernoulli_distribution coin(0.7);
  for (int64_t i = 0; i < x.numElements(); ++i) x.setDouble(i, isBool(t) ? coin(rng) : u(rng));
  return x;
}

// Builds `build` twice, decomposes one copy, checks it verifies and holds no composite, runs both
// on `inputs` and compares.
void checkDecomposition(const BuildFn& build, const std::vector<Tensor>& inputs) {
  auto whole = makeModule(build);
  auto split = makeModule(build);
  ASSERT_TRUE(verify(*whole).isOk()) << verify(*whole).str();
  ASSERT_EQ(countComposites(*whole->entry()), 1);
  auto changed = decomposeComposites(*split);
  ASSERT_TRUE(changed.isOk()) << changed.status().str();
  EXPECT_TRUE(*changed);
  Status v = verify(*split);
  ASSERT_TRUE(v.isOk()) << v.str();
  EXPECT_EQ(countComposites(*split->entry()), 0);

  auto ref = interpret(*whole->entry(), inputs);
  ASSERT_TRUE(ref.isOk()) << ref.status().str();
  auto got = interpret(*split->entry(), inputs);
  ASSERT_TRUE(got.isOk()) << got.status().str();
  ASSERT_EQ(ref->size(), 1u);
  ASSERT_EQ(got->size(), 1u);
  const Tensor& r = (*ref)[0];
  const Tensor& g = (*got)[0];
  ASSERT_EQ(r.dtype(), g.dtype());
  ASSERT_EQ(r.dims(), g.dims());
  double maxAbs = 1;
  for (int64_t i = 0; i < r.numElements(); ++i)
    if (std::isfinite(r.getDouble(i))) maxAbs = std::max(maxAbs, std::abs(r.getDouble(i)));
  double tol = tolerance(r.dtype()) * maxAbs;
  int bad = 0;
  for (int64_t i = 0; i < r.numElements() && bad < 5; ++i) {
    double a = r.getDouble(i), c = g.getDouble(i);
    if (std::isnan(a) && std::isnan(c)) continue;
    bool ok = std::isinf(a) ? a == c : std::abs(a - c) <= tol;
    if (!ok) {
      ++bad;
      ADD_FAILURE() << "element " << i << ": whole " << a << ", decomposed " << c << " (tol " << tol
                    << ")";
    }
  }
}

TensorType tt(DType t, std::vector<int64_t> dims) { return TensorType::of(t, dims); }

// --- softmax / log_softmax ---------------------------------------------------------------------

void checkSoftmax(OpCode op, DType t, std::vector<int64_t> dims, int64_t axis, unsigned seed) {
  SCOPED_TRACE(std::string(opName(op)) + " " + tt(t, dims).str() + " axis " + std::to_string(axis));
  std::mt19937 rng(seed);
  auto build = [&](Builder& b) {
    return b.op(op, {b.parameter(tt(t, dims), "x")}, {{"axis", intAttr(axis)}});
  };
  checkDecomposition(build, {randomTensor(t, dims, rng, -4, 4)});
}

TEST(DecomposeComposites, Softmax) {
  checkSoftmax(OpCode::Softmax, DType::F32, {4, 7}, 1, 1);
  checkSoftmax(OpCode::Softmax, DType::F32, {4, 7}, 0, 2);
  checkSoftmax(OpCode::Softmax, DType::F32, {2, 3, 5}, 1, 3);
  checkSoftmax(OpCode::Softmax, DType::F32, {6}, 0, 4);
  checkSoftmax(OpCode::Softmax, DType::F16, {3, 8}, 1, 5);
  checkSoftmax(OpCode::Softmax, DType::BF16, {3, 8}, 1, 6);
  checkSoftmax(OpCode::Softmax, DType::F64, {3, 8}, 0, 7);
}

TEST(DecomposeComposites, LogSoftmax) {
  checkSoftmax(OpCode::LogSoftmax, DType::F32, {4, 7}, 1, 11);
  checkSoftmax(OpCode::LogSoftmax, DType::F32, {4, 7}, 0, 12);
  checkSoftmax(OpCode::LogSoftmax, DType::F16, {5, 6}, 1, 13);
}

TEST(DecomposeComposites, SoftmaxSymbolicDims) {
  std::mt19937 rng(21);
  for (int64_t axis : {0, 1}) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    auto build = [&](Builder& b) {
      Value* x = b.parameter(TensorType(DType::F32, {Dim::symbol("N"), Dim::symbol("M")}), "x");
      return b.op(OpCode::Softmax, {x}, {{"axis", intAttr(axis)}});
    };
    checkDecomposition(build, {randomTensor(DType::F32, {3, 5}, rng)});
  }
}

// --- layer_norm --------------------------------------------------------------------------------

struct LayerNormCase {
  DType t;
  std::vector<int64_t> dims;
  int64_t axis;
  bool bias;
  double epsilon;  // < 0: attribute absent (default 1e-5)
};

void checkLayerNorm(const LayerNormCase& c, unsigned seed) {
  SCOPED_TRACE("layer_norm " + tt(c.t, c.dims).str() + " axis " + std::to_string(c.axis));
  std::mt19937 rng(seed);
  std::vector<int64_t> norm(c.dims.begin() + c.axis, c.dims.end());
  std::vector<Tensor> inputs = {randomTensor(c.t, c.dims, rng), randomTensor(c.t, norm, rng)};
  if (c.bias) inputs.push_back(randomTensor(c.t, norm, rng));
  auto build = [&](Builder& b) {
    std::vector<Value*> ops = {b.parameter(tt(c.t, c.dims), "x"),
                               b.parameter(tt(c.t, norm), "scale")};
    if (c.bias) ops.push_back(b.parameter(tt(c.t, norm), "bias"));
    AttrMap a{{"axis", intAttr(c.axis)}};
    if (c.epsilon >= 0) a["epsilon"] = floatAttr(c.epsilon);
    return b.op(OpCode::LayerNorm, ops, a);
  };
  checkDecomposition(build, inputs);
}

TEST(DecomposeComposites, LayerNorm) {
  checkLayerNorm({DType::F32, {3, 8}, 1, true, -1}, 31);
  checkLayerNorm({DType::F32, {2, 3, 4}, 1, true, -1}, 32);  // over two dims
  checkLayerNorm({DType::F32, {2, 3, 4}, 2, false, 1e-3}, 33);
  checkLayerNorm({DType::F32, {3, 4}, 0, true, -1}, 34);  // over every dim
  checkLayerNorm({DType::F16, {4, 16}, 1, true, -1}, 35);
  checkLayerNorm({DType::F16, {2, 3, 4}, 1, false, -1}, 36);
}

TEST(DecomposeComposites, LayerNormSymbolicNormalisedDim) {
  // The element count of the normalised dims is only known at run time here.
  std::mt19937 rng(37);
  auto build = [&](Builder& b) {
    Dim m = Dim::symbol("M");
    Value* x = b.parameter(TensorType(DType::F32, {Dim(2), m}), "x");
    Value* s = b.parameter(TensorType(DType::F32, {m}), "scale");
    Value* o = b.parameter(TensorType(DType::F32, {m}), "bias");
    return b.op(OpCode::LayerNorm, {x, s, o}, {{"axis", intAttr(1)}});
  };
  checkDecomposition(build,
                     {randomTensor(DType::F32, {2, 6}, rng), randomTensor(DType::F32, {6}, rng),
                      randomTensor(DType::F32, {6}, rng)});
}

// --- batch_norm_inference ----------------------------------------------------------------------

void checkBatchNorm(DType t, std::vector<int64_t> dims, int64_t featureIndex, double epsilon,
                    unsigned seed) {
  SCOPED_TRACE("batch_norm " + tt(t, dims).str() + " feature_index " +
               std::to_string(featureIndex));
  std::mt19937 rng(seed);
  int64_t c = dims[static_cast<size_t>(featureIndex)];
  std::vector<Tensor> inputs = {randomTensor(t, dims, rng), randomTensor(t, {c}, rng),
                                randomTensor(t, {c}, rng), randomTensor(t, {c}, rng),
                                randomTensor(t, {c}, rng, 0.1, 2.0)};  // variance > 0
  auto build = [&](Builder& b) {
    std::vector<Value*> ops = {b.parameter(tt(t, dims), "x")};
    for (const char* name : {"scale", "offset", "mean", "variance"})
      ops.push_back(b.parameter(tt(t, {c}), name));
    AttrMap a;
    if (featureIndex != 1) a["feature_index"] = intAttr(featureIndex);
    if (epsilon >= 0) a["epsilon"] = floatAttr(epsilon);
    return b.op(OpCode::BatchNormInference, ops, a);
  };
  checkDecomposition(build, inputs);
}

TEST(DecomposeComposites, BatchNormInference) {
  checkBatchNorm(DType::F32, {2, 3, 4, 4}, 1, -1, 41);    // NCHW
  checkBatchNorm(DType::F32, {2, 4, 4, 3}, 3, 1e-3, 42);  // NHWC
  checkBatchNorm(DType::F32, {5, 3}, 1, -1, 43);
  checkBatchNorm(DType::F16, {2, 3, 4, 4}, 1, -1, 44);
}

// --- gelu --------------------------------------------------------------------------------------

TEST(DecomposeComposites, Gelu) {
  unsigned seed = 51;
  for (DType t : {DType::F32, DType::F16}) {
    for (const char* approx : {"none", "tanh", ""}) {
      SCOPED_TRACE(std::string("gelu ") + std::string(dtypeName(t)) + " approximate '" + approx +
                   "'");
      std::mt19937 rng(seed++);
      auto build = [&](Builder& b) {
        AttrMap a;
        if (*approx) a["approximate"] = enumAttr(approx);
        return b.op(OpCode::Gelu, {b.parameter(tt(t, {4, 9}), "x")}, a);
      };
      checkDecomposition(build, {randomTensor(t, {4, 9}, rng, -5, 5)});
    }
  }
}

// --- attention ---------------------------------------------------------------------------------

enum class Mask { None, Bool, Float };

struct AttentionCase {
  DType t;
  std::vector<int64_t> batch;
  int64_t sq, sk, d, dv;
  Mask mask;
  bool causal;
  double scale;  // < 0: attribute absent (default 1/sqrt(D))
};

std::vector<int64_t> withTail(std::vector<int64_t> v, int64_t a, int64_t b) {
  v.push_back(a);
  v.push_back(b);
  return v;
}

void checkAttention(const AttentionCase& c, unsigned seed) {
  SCOPED_TRACE("attention sq " + std::to_string(c.sq) + " sk " + std::to_string(c.sk) + " mask " +
               std::to_string(static_cast<int>(c.mask)) + " causal " + std::to_string(c.causal) +
               " " + std::string(dtypeName(c.t)));
  std::mt19937 rng(seed);
  auto qd = withTail(c.batch, c.sq, c.d), kd = withTail(c.batch, c.sk, c.d),
       vd = withTail(c.batch, c.sk, c.dv), md = withTail(c.batch, c.sq, c.sk);
  DType maskType = c.mask == Mask::Bool ? DType::Bool : c.t;
  std::vector<Tensor> inputs = {randomTensor(c.t, qd, rng), randomTensor(c.t, kd, rng),
                                randomTensor(c.t, vd, rng)};
  if (c.mask != Mask::None) inputs.push_back(randomTensor(maskType, md, rng, -2, 2));
  auto build = [&](Builder& b) {
    std::vector<Value*> ops = {b.parameter(tt(c.t, qd), "q"), b.parameter(tt(c.t, kd), "k"),
                               b.parameter(tt(c.t, vd), "v")};
    if (c.mask != Mask::None) ops.push_back(b.parameter(tt(maskType, md), "mask"));
    AttrMap a;
    if (c.scale >= 0) a["scale"] = floatAttr(c.scale);
    if (c.causal) a["causal"] = boolAttr(true);
    return b.op(OpCode::Attention, ops, a);
  };
  checkDecomposition(build, inputs);
}

TEST(DecomposeComposites, Attention) {
  unsigned seed = 61;
  for (bool causal : {false, true})
    for (Mask mask : {Mask::None, Mask::Bool, Mask::Float})
      checkAttention({DType::F32, {2, 3}, 4, 6, 8, 5, mask, causal, -1}, seed++);
  checkAttention({DType::F32, {2}, 5, 5, 4, 4, Mask::None, true, 0.3}, seed++);  // scale attr
  checkAttention({DType::F32, {}, 5, 7, 4, 3, Mask::None, false, -1}, seed++);   // no batch dims
  // Sq > Sk: query 0 may see no key under bottom-right alignment, so its row is NaN.
  checkAttention({DType::F32, {2}, 4, 3, 4, 4, Mask::None, true, -1}, seed++);
  checkAttention({DType::F16, {2, 2}, 4, 6, 8, 8, Mask::Float, true, -1}, seed++);
  checkAttention({DType::F16, {2}, 3, 5, 8, 4, Mask::Bool, false, -1}, seed++);
}

TEST(DecomposeComposites, AttentionSymbolicDims) {
  // Sq, Sk and D symbolic: the causal offset and the default scale are computed at run time.
  std::mt19937 rng(71);
  auto build = [&](Builder& b) {
    Dim bt = Dim::symbol("B"), sq = Dim::symbol("SQ"), sk = Dim::symbol("SK"), d = Dim::symbol("D");
    Value* q = b.parameter(TensorType(DType::F32, {bt, sq, d}), "q");
    Value* k = b.parameter(TensorType(DType::F32, {bt, sk, d}), "k");
    Value* v = b.parameter(TensorType(DType::F32, {bt, sk, Dim(3)}), "v");
    return b.op(OpCode::Attention, {q, k, v}, {{"causal", boolAttr(true)}});
  };
  checkDecomposition(build, {randomTensor(DType::F32, {2, 3, 5}, rng),
                             randomTensor(DType::F32, {2, 4, 5}, rng),
                             randomTensor(DType::F32, {2, 4, 3}, rng)});
}

// --- structure ---------------------------------------------------------------------------------

TEST(DecomposeComposites, LeavesNoCompositeAndKeepsNamesAndLocations) {
  Module m;
  Function* f = m.addFunction("main");
  Builder b(f);
  TensorType t = tt(DType::F32, {2, 4});
  Value* x = b.parameter(t, "x");
  Value* s = b.op(OpCode::Softmax, {x}, {{"axis", intAttr(1)}});
  Value* l = b.op(OpCode::LogSoftmax, {s}, {{"axis", intAttr(0)}});
  Value* g = b.op(OpCode::Gelu, {l});
  Value* n = b.op(OpCode::LayerNorm, {g, b.parameter(tt(DType::F32, {4}), "scale")},
                  {{"axis", intAttr(1)}});
  Value* p = b.parameter(tt(DType::F32, {4}), "p");
  Value* bn = b.op(OpCode::BatchNormInference, {n, p, p, p, p});
  Value* a = b.op(OpCode::Attention, {bn, bn, bn});
  ASSERT_TRUE(b.ok()) << b.status().str();
  a->setName("y");
  a->def()->setLoc(Location{"", 7, 3});
  f->setOutputs({a});
  ASSERT_EQ(countComposites(*f), 6);

  auto changed = decomposeComposites(m);
  ASSERT_TRUE(changed.isOk()) << changed.status().str();
  EXPECT_TRUE(*changed);
  EXPECT_EQ(countComposites(*f), 0);
  EXPECT_TRUE(verify(m).isOk()) << verify(m).str();
  // The replacement of the returned attention carries its name and location.
  Value* out = f->outputs()[0];
  EXPECT_EQ(out->name(), "y");
  EXPECT_EQ(out->def()->loc().line, 7);
  EXPECT_EQ(out->def()->op(), OpCode::DotGeneral);  // attention ends with p @ v (f32: no convert)

  auto again = decomposeComposites(m);
  ASSERT_TRUE(again.isOk());
  EXPECT_FALSE(*again);  // nothing left to do
}

TEST(DecomposeComposites, F16ComputesInF32) {
  Module m;
  Function* f = m.addFunction("main");
  Builder b(f);
  Value* x = b.parameter(tt(DType::F16, {2, 4}), "x");
  f->setOutputs({b.op(OpCode::Softmax, {x}, {{"axis", intAttr(1)}})});
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(decomposeComposites(m).isOk());
  // The only f16 values are the parameter and the final convert; the exp runs in f32.
  int f16Values = 0;
  for (const auto& n : f->nodes()) {
    f16Values += n->result()->type().dtype() == DType::F16;
    if (n->op() == OpCode::Exp) {
      EXPECT_EQ(n->result()->type().dtype(), DType::F32);
    }
  }
  EXPECT_EQ(f16Values, 2);
  EXPECT_EQ(f->outputs()[0]->def()->op(), OpCode::Convert);
}

TEST(DecomposeComposites, InvalidCompositeIsAnErrorNamingIt) {
  Module m;
  Function* f = m.addFunction("main");
  Value* x = f->addParameter(tt(DType::F32, {2, 3}), "x");
  // Built without checks: axis 5 is out of range for rank 2.
  Node* s = f->createNode(OpCode::Softmax, {x}, {tt(DType::F32, {2, 3})}, {{"axis", intAttr(5)}});
  s->setLoc(Location{"", 4, 9});
  f->setOutputs({s->result()});
  auto r = decomposeComposites(m);
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("cannot decompose softmax"), std::string::npos)
      << r.status().str();
  EXPECT_EQ(r.status().location().line, 4);
  EXPECT_EQ(f->outputs()[0], s->result());  // left in place
}

}  // namespace
}  // namespace kiln
