// The default pipeline: it keeps results (interpreter before vs after on random inputs), reaches
// a fixed point (a second run changes nothing), and does what each stage is for on small models
// written the way exporters write them.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "frontend/onnx/onnx_importer.h"
#include "interp/interpreter.h"
#include "ir/text/text.h"
#include "ir/verifier.h"
#include "passes/pipeline.h"

namespace kiln {
namespace {

std::unique_ptr<Module> parse(const std::string& text) {
  auto m = parseModule(text, "test.kir");
  EXPECT_TRUE(m.isOk()) << m.status().str();
  return m ? std::move(*m) : nullptr;
}

size_t countOp(const Function& f, OpCode op) {
  size_t n = 0;
  for (const auto& node : f.nodes()) n += node->op() == op ? 1 : 0;
  return n;
}

// "[v0, v1, ...]" with v_i = f(i), for inline constants.
template <typename F>
std::string list(int n, F f) {
  std::ostringstream s;
  s << "[";
  for (int i = 0; i < n; ++i) s << (i ? ", " : "") << f(i);
  s << "]";
  return s.str();
}

Tensor randomTensor(const TensorType& t, std::mt19937& rng) {
  Tensor out(t.dtype(), t.staticDims());
  std::uniform_real_distribution<double> u(-1, 1);
  std::uniform_int_distribution<int> small(0, 9);
  for (int64_t i = 0; i < out.numElements(); ++i) {
    if (isFloat(t.dtype())) out.setDouble(i, u(rng));
    else if (t.dtype() == DType::Bool) out.setInt(i, small(rng) % 2);
    else out.setInt(i, small(rng));
  }
  return out;
}

// Runs both modules' entry functions on the same random inputs and compares every output.
// Tolerance: |a - b| <= 1e-5 * max(1, max|ref|). Composites, folded batch norms and reordered
// products round differently from the chains they replace (summation order, weights scaled and
// rounded once), by a few f32 ulps of the largest magnitude involved; 1e-5 leaves a margin of
// about 100 ulps while any real change of meaning is far larger.
void expectSameResults(const Module& before, const Module& after, unsigned seed) {
  const Function& f = *before.entry();
  std::mt19937 rng(seed);
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < f.numParameters(); ++i)
    inputs.push_back(randomTensor(f.parameter(i)->type(), rng));
  auto ref = interpret(f, inputs);
  auto got = interpret(*after.entry(), inputs);
  ASSERT_TRUE(ref.isOk()) << ref.status().str();
  ASSERT_TRUE(got.isOk()) << got.status().str();
  ASSERT_EQ(ref->size(), got->size());
  for (size_t o = 0; o < ref->size(); ++o) {
    const Tensor &a = (*ref)[o], &b = (*got)[o];
    ASSERT_EQ(a.type(), b.type()) << "output " << o;
    double scale = 1;
    for (int64_t i = 0; i < a.numElements(); ++i)
      if (std::isfinite(a.getDouble(i))) scale = std::max(scale, std::fabs(a.getDouble(i)));
    for (int64_t i = 0; i < a.numElements(); ++i) {
      double x = a.getDouble(i), y = b.getDouble(i);
      if (std::isnan(x) || std::isinf(x)) {
        EXPECT_EQ(std::isnan(x), std::isnan(y)) << "output " << o << " element " << i;
        if (std::isinf(x)) {
          EXPECT_EQ(x, y) << "output " << o << " element " << i;
        }
        continue;
      }
      ASSERT_LE(std::fabs(x - y), 1e-5 * scale)
          << "output " << o << " element " << i << ": " << x << " vs " << y;
    }
  }
}

// Runs the pipeline (verifying after every pass), checks the results against the original, and
// that a second run changes nothing. Returns the optimised module.
std::unique_ptr<Module> optimiseAndCheck(const std::string& text, bool compareResults = true) {
  auto original = parse(text);
  auto m = parse(text);
  if (!m) return nullptr;
  PassManagerOptions checks;
  checks.verifyEach = true;
  PassManager pm(checks);
  auto first = runDefaultPipeline(*m, pm);
  EXPECT_TRUE(first.isOk()) << first.status().str();
  std::string once = printModule(*m);
  auto second = runDefaultPipeline(*m, pm);
  EXPECT_TRUE(second.isOk()) << second.status().str();
  EXPECT_FALSE(second.isOk() && *second) << "the second run changed the module:\n"
                                         << once << "\n---\n"
                                         << printModule(*m);
  EXPECT_EQ(printModule(*m), once);
  if (compareResults) {
    for (unsigned seed : {1u, 2u, 3u}) expectSameResults(*original, *m, seed);
  }
  return m;
}

// A pre-norm transformer block as exporters write it: layer norm from ReduceMean/Sub/Pow/Sqrt/Div
// (with the importer's keepdims reshapes), q k^T with an exporter's transpose of k, a scale, a
// causal mask from iota/compare with select(-inf), softmax from ReduceMax/Exp/ReduceSum/Div,
// and a GELU (tanh form) MLP.
const char* kTransformerBlock =
    R"(func @main(%x: f32[2,4,8], %wq: f32[8,8], %wk: f32[8,8], %wv: f32[8,8], %w1: f32[8,16], %w2: f32[16,8]) -> (f32[2,4,8]) {
  %s = f32[2,4] reduce(%x) {dims = [2], kind = sum}
  %sk = f32[2,4,1] reshape(%s)
  %n = f32[] constant() {value = [8.0]}
  %nb = f32[2,4,1] broadcast_in_dim(%n) {dims = []}
  %mean = f32[2,4,1] div(%sk, %nb)
  %meanb = f32[2,4,8] broadcast_in_dim(%mean) {dims = [0, 1, 2]}
  %d = f32[2,4,8] sub(%x, %meanb)
  %two = f32[] constant() {value = [2.0]}
  %twob = f32[2,4,8] broadcast_in_dim(%two) {dims = []}
  %sq = f32[2,4,8] pow(%d, %twob)
  %s2 = f32[2,4] reduce(%sq) {dims = [2], kind = sum}
  %s2k = f32[2,4,1] reshape(%s2)
  %nb2 = f32[2,4,1] broadcast_in_dim(%n) {dims = []}
  %var = f32[2,4,1] div(%s2k, %nb2)
  %eps = f32[] constant() {value = [1.0e-05]}
  %epsb = f32[2,4,1] broadcast_in_dim(%eps) {dims = []}
  %ve = f32[2,4,1] add(%var, %epsb)
  %sd = f32[2,4,1] sqrt(%ve)
  %sdb = f32[2,4,8] broadcast_in_dim(%sd) {dims = [0, 1, 2]}
  %nrm = f32[2,4,8] div(%d, %sdb)
  %g = f32[8] constant() {value = [0.5, 0.625, 0.75, 0.875, 1.0, 1.125, 1.25, 1.375]}
  %gb = f32[2,4,8] broadcast_in_dim(%g) {dims = [2]}
  %sc = f32[2,4,8] mul(%nrm, %gb)
  %beta = f32[8] constant() {value = [-0.25, -0.1875, -0.125, -0.0625, 0.0, 0.0625, 0.125, 0.1875]}
  %betab = f32[2,4,8] broadcast_in_dim(%beta) {dims = [2]}
  %ln = f32[2,4,8] add(%sc, %betab)
  %q = f32[2,4,8] dot_general(%ln, %wq) {lhs_contracting = [2], rhs_contracting = [0]}
  %k = f32[2,4,8] dot_general(%ln, %wk) {lhs_contracting = [2], rhs_contracting = [0]}
  %v = f32[2,4,8] dot_general(%ln, %wv) {lhs_contracting = [2], rhs_contracting = [0]}
  %kt = f32[2,8,4] transpose(%k) {permutation = [0, 2, 1]}
  %scores = f32[2,4,4] dot_general(%q, %kt) {lhs_batch = [0], rhs_batch = [0], lhs_contracting = [2], rhs_contracting = [1]}
  %c = f32[] constant() {value = [0.35355338]}
  %cb = f32[2,4,4] broadcast_in_dim(%c) {dims = []}
  %scaled = f32[2,4,4] mul(%scores, %cb)
  %row = i32[4,4] iota() {dimension = 0}
  %col = i32[4,4] iota() {dimension = 1}
  %tril = bool[4,4] compare(%col, %row) {direction = le}
  %mask = bool[2,4,4] broadcast_in_dim(%tril) {dims = [1, 2]}
  %ninf = f32[] constant() {value = [-inf]}
  %ninfb = f32[2,4,4] broadcast_in_dim(%ninf) {dims = []}
  %masked = f32[2,4,4] select(%mask, %scaled, %ninfb)
  %mx = f32[2,4] reduce(%masked) {dims = [2], kind = max}
  %mxk = f32[2,4,1] reshape(%mx)
  %mxb = f32[2,4,4] broadcast_in_dim(%mxk) {dims = [0, 1, 2]}
  %sh = f32[2,4,4] sub(%masked, %mxb)
  %e = f32[2,4,4] exp(%sh)
  %es = f32[2,4] reduce(%e) {dims = [2], kind = sum}
  %esk = f32[2,4,1] reshape(%es)
  %esb = f32[2,4,4] broadcast_in_dim(%esk) {dims = [0, 1, 2]}
  %p = f32[2,4,4] div(%e, %esb)
  %o = f32[2,4,8] dot_general(%p, %v) {lhs_batch = [0], rhs_batch = [0], lhs_contracting = [2], rhs_contracting = [1]}
  %res = f32[2,4,8] add(%x, %o)
  %h = f32[2,4,16] dot_general(%res, %w1) {lhs_contracting = [2], rhs_contracting = [0]}
  %three = f32[] constant() {value = [3.0]}
  %threeb = f32[2,4,16] broadcast_in_dim(%three) {dims = []}
  %h3 = f32[2,4,16] pow(%h, %threeb)
  %k1 = f32[] constant() {value = [0.044715]}
  %k1b = f32[2,4,16] broadcast_in_dim(%k1) {dims = []}
  %t1 = f32[2,4,16] mul(%h3, %k1b)
  %t2 = f32[2,4,16] add(%h, %t1)
  %k2 = f32[] constant() {value = [0.7978846]}
  %k2b = f32[2,4,16] broadcast_in_dim(%k2) {dims = []}
  %t3 = f32[2,4,16] mul(%t2, %k2b)
  %t4 = f32[2,4,16] tanh(%t3)
  %one = f32[] constant() {value = [1.0]}
  %oneb = f32[2,4,16] broadcast_in_dim(%one) {dims = []}
  %t5 = f32[2,4,16] add(%t4, %oneb)
  %half = f32[] constant() {value = [0.5]}
  %halfb = f32[2,4,16] broadcast_in_dim(%half) {dims = []}
  %t6 = f32[2,4,16] mul(%h, %halfb)
  %gelu = f32[2,4,16] mul(%t6, %t5)
  %m = f32[2,4,8] dot_general(%gelu, %w2) {lhs_contracting = [2], rhs_contracting = [0]}
  %y = f32[2,4,8] add(%res, %m)
  return %y
}
)";

TEST(Pipeline, TransformerBlockBecomesComposites) {
  auto m = optimiseAndCheck(kTransformerBlock);
  ASSERT_TRUE(m);
  const Function& f = *m->entry();
  EXPECT_EQ(countOp(f, OpCode::LayerNorm), 1u) << printModule(*m);
  EXPECT_EQ(countOp(f, OpCode::Attention), 1u) << printModule(*m);
  EXPECT_EQ(countOp(f, OpCode::Gelu), 1u) << printModule(*m);
  for (OpCode gone : {OpCode::Softmax, OpCode::Exp, OpCode::Pow, OpCode::Tanh, OpCode::Select,
                      OpCode::Reduce, OpCode::Iota, OpCode::Transpose})
    EXPECT_EQ(countOp(f, gone), 0u) << opName(gone) << "\n" << printModule(*m);
  for (const auto& n : f.nodes()) {
    if (n->op() == OpCode::Attention) {
      EXPECT_TRUE(n->attrBool("causal"));
    }
  }
}

// conv (constant weights) + bias + batch norm + relu + max pool + conv + residual + global mean.
std::string convNet() {
  std::string w1 = list(108, [](int i) { return 0.0625 * ((i * 7) % 11 - 5); });
  return R"(func @main(%x: f32[1,3,6,6], %w2: f32[4,4,3,3]) -> (f32[1,4]) {
  %w1 = f32[4,3,3,3] constant() {value = )" +
         w1 + R"(}
  %c1 = f32[1,4,6,6] convolution(%x, %w1) {padding_low = [1, 1], padding_high = [1, 1]}
  %b1 = f32[4] constant() {value = [0.5, -0.5, 0.25, 0.0]}
  %b1b = f32[1,4,6,6] broadcast_in_dim(%b1) {dims = [1]}
  %a1 = f32[1,4,6,6] add(%c1, %b1b)
  %scale = f32[4] constant() {value = [1.0, 2.0, 0.5, 1.5]}
  %offset = f32[4] constant() {value = [0.0, 0.1, -0.2, 0.3]}
  %mean = f32[4] constant() {value = [0.1, -0.1, 0.2, 0.0]}
  %var = f32[4] constant() {value = [1.0, 0.5, 2.0, 0.25]}
  %bn = f32[1,4,6,6] batch_norm_inference(%a1, %scale, %offset, %mean, %var)
  %z = f32[] constant() {value = [0.0]}
  %zb = f32[1,4,6,6] broadcast_in_dim(%z) {dims = []}
  %r1 = f32[1,4,6,6] max(%bn, %zb)
  %p = f32[1,4,3,3] reduce_window(%r1) {kind = max, window_dimensions = [1, 1, 2, 2], window_strides = [1, 1, 2, 2]}
  %c2 = f32[1,4,3,3] convolution(%p, %w2) {padding_low = [1, 1], padding_high = [1, 1]}
  %r = f32[1,4,3,3] add(%c2, %p)
  %sum = f32[1,4] reduce(%r) {dims = [2, 3], kind = sum}
  %nine = f32[] constant() {value = [9.0]}
  %nineb = f32[1,4] broadcast_in_dim(%nine) {dims = []}
  %y = f32[1,4] div(%sum, %nineb)
  return %y
}
)";
}

TEST(Pipeline, ConvNetFoldsBatchNormAndKeepsTransposesAtTheEdges) {
  auto m = optimiseAndCheck(convNet());
  ASSERT_TRUE(m);
  const Function& f = *m->entry();
  EXPECT_EQ(countOp(f, OpCode::BatchNormInference), 0u) << printModule(*m);
  EXPECT_EQ(countOp(f, OpCode::Convolution), 2u);
  for (const auto& n : f.nodes()) {
    if (n->op() == OpCode::Convolution) {
      EXPECT_EQ(std::get<7>(n->attrs().at("dimension_numbers")), "b01f_01io->b01f");
    }
  }
  // Transposes: the input into NHWC and the second kernel (an input, so it cannot be folded).
  // The first kernel's was folded into a constant, and the global mean needs none on the way out.
  size_t transposes = 0;
  for (const auto& n : f.nodes())
    if (n->op() == OpCode::Transpose) {
      ++transposes;
      EXPECT_EQ(n->operand(0)->def()->op(), OpCode::Parameter) << printModule(*m);
    }
  EXPECT_EQ(transposes, 2u) << printModule(*m);
}

TEST(Pipeline, ShapeArithmeticAndDuplicatesCollapse) {
  auto m = optimiseAndCheck(R"(func @main(%x: f32[2,3,4]) -> (f32[6,4], f32[6,4]) {
  %r1 = f32[24] reshape(%x)
  %r2 = f32[6,4] reshape(%r1)
  %t = f32[4,6] transpose(%r2) {permutation = [1, 0]}
  %t2 = f32[6,4] transpose(%t) {permutation = [1, 0]}
  %one = f32[] constant() {value = [1.0]}
  %oneb = f32[6,4] broadcast_in_dim(%one) {dims = []}
  %m = f32[6,4] mul(%t2, %oneb)
  %e1 = f32[6,4] exp(%m)
  %e2 = f32[6,4] exp(%m)
  %dims = i64[2] constant() {value = [6, 4]}
  %prod = i64[] reduce(%dims) {dims = [0], kind = prod}
  %cnt = f32[] convert(%prod)
  %inv = f32[] div(%one, %cnt)
  %zero = f32[] sub(%inv, %inv)
  %zb = f32[6,4] broadcast_in_dim(%zero) {dims = []}
  %s = f32[6,4] add(%e1, %zb)
  return %s, %e2
}
)");
  ASSERT_TRUE(m);
  // inv - inv is a float subtraction the simplifier must not touch, but constant folding
  // computes it (1/24 - 1/24 = 0), and then add(x, 0) goes: exp + reshape remain (layout
  // assignment sinks the reshape below the exp). The outputs keep their names (s, e2) on the
  // one value left.
  EXPECT_EQ(printModule(*m), R"(func @main(%x: f32[2,3,4]) -> (f32[6,4], f32[6,4]) {
  %0 = f32[2,3,4] exp(%x)
  %e1 = f32[6,4] reshape(%0)
  return %e1 as "s", %e1 as "e2"
}
)");
}

// Every op of the op table, with symbolic dims: the pipeline must handle each one without error,
// keep the module valid and reach a fixed point (results are not compared: N is symbolic).
TEST(Pipeline, AllOpsModuleReachesAFixedPoint) {
  std::ifstream in(KILN_SOURCE_DIR "/tests/lit/Inputs/all-ops.kir");
  ASSERT_TRUE(in) << "missing tests/lit/Inputs/all-ops.kir";
  std::stringstream ss;
  ss << in.rdbuf();
  auto m = optimiseAndCheck(ss.str(), /*compareResults=*/false);
  ASSERT_TRUE(m);
  EXPECT_TRUE(verify(*m).isOk());
}

TEST(Pipeline, InstrumentationThroughTheConvenienceEntry) {
  auto m = parse(convNet());
  PassManagerOptions o;
  o.timePasses = true;
  std::string report;
  auto r = runDefaultPipeline(*m, PipelineOptions{}, o, &report);
  ASSERT_TRUE(r.isOk()) << r.status().str();
  for (const char* pass : {"propagate-shapes", "algebraic-simplify", "constant-fold", "cse", "dce",
                           "recognize-patterns", "fold-batch-norm", "layout-assignment", "total"})
    EXPECT_NE(report.find(pass), std::string::npos) << pass << "\n" << report;
}

TEST(Pipeline, SpecialisesFirstWhenAsked) {
  auto m = parse(R"(func @main(%x: f32[N,4]) -> (f32[N,4]) {
  %y = f32[N,4] tanh(%x)
  return %y
}
)");
  PipelineOptions o;
  o.specialize = {{"N", 3}};
  PassManager pm;
  ASSERT_TRUE(runDefaultPipeline(*m, pm, o).isOk());
  EXPECT_EQ(m->entry()->outputs()[0]->type(), TensorType::of(DType::F32, {3, 4}));
}

// ONNX models from the ONNX test data, imported: the pipeline keeps their results, which are
// also checked against the outputs stored with the model.
const char* kOnnxNodeTests = "/usr/share/libonnx-testdata/data/node/";

void checkOnnxModel(const std::string& name, OpCode expected) {
  std::string dir = std::string(kOnnxNodeTests) + name;
  if (!std::filesystem::exists(dir + "/model.onnx")) GTEST_SKIP() << "no ONNX test data at " << dir;
  auto original = onnx::importModelFile(dir + "/model.onnx");
  auto m = onnx::importModelFile(dir + "/model.onnx");
  ASSERT_TRUE(m.isOk()) << m.status().str();
  PassManagerOptions checks;
  checks.verifyEach = true;
  PassManager pm(checks);
  auto r = runDefaultPipeline(**m, pm);
  ASSERT_TRUE(r.isOk()) << r.status().str();
  EXPECT_EQ(countOp(*(*m)->entry(), expected), 1u) << name << "\n" << printModule(**m);
  auto again = runDefaultPipeline(**m, pm);
  ASSERT_TRUE(again.isOk());
  EXPECT_FALSE(*again) << name;
  for (unsigned seed : {1u, 2u}) expectSameResults(**original, **m, seed);
  // The stored test case.
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < (*m)->entry()->numParameters(); ++i) {
    auto t = onnx::readTensorProtoFile(dir + "/test_data_set_0/input_" + std::to_string(i) + ".pb");
    ASSERT_TRUE(t.isOk()) << t.status().str();
    inputs.push_back(*t);
  }
  auto got = interpret(*(*m)->entry(), inputs);
  ASSERT_TRUE(got.isOk()) << got.status().str();
  for (size_t o = 0; o < got->size(); ++o) {
    auto want =
        onnx::readTensorProtoFile(dir + "/test_data_set_0/output_" + std::to_string(o) + ".pb");
    ASSERT_TRUE(want.isOk()) << want.status().str();
    ASSERT_EQ(want->numElements(), (*got)[o].numElements());
    // The ONNX runner's tolerance: rtol 1e-3, atol 1e-7.
    for (int64_t i = 0; i < want->numElements(); ++i)
      EXPECT_NEAR((*got)[o].getDouble(i), want->getDouble(i),
                  1e-7 + 1e-3 * std::fabs(want->getDouble(i)))
          << name << " output " << o << " element " << i;
  }
}

TEST(PipelineOnnx, SoftmaxExpanded) {
  checkOnnxModel("test_softmax_axis_1_expanded", OpCode::Softmax);
}
TEST(PipelineOnnx, SoftmaxLargeNumbersExpanded) {
  checkOnnxModel("test_softmax_large_number_expanded", OpCode::Softmax);
}

// ONNX's LayerNormalization function body: flattened to 2-D, var = mean(x^2) - mean(x)^2, and
// the mean and 1/stddev as extra outputs (those keep their chains).
TEST(PipelineOnnx, LayerNormExpanded) {
  checkOnnxModel("test_layer_normalization_3d_axis2_epsilon_expanded", OpCode::LayerNorm);
}
TEST(PipelineOnnx, LayerNormExpandedAllDims) {
  checkOnnxModel("test_layer_normalization_4d_axis0_expanded", OpCode::LayerNorm);
}

}  // namespace
}  // namespace kiln
