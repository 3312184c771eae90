// Data-dependent output sizes: nonzero's padded result and count, set_dimension_size,
// get_dimension_size, unique, non_max_suppression, and the outputs of their true sizes through
// the interpreter, the Executable on every target built (an artifact included), with values from
// numpy (np.nonzero, np.unique) and the ONNX node tests.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "interp/interpreter.h"
#include "ir/text/text.h"
#include "passes/expose_dynamic_sizes.h"
#include "runtime/executable.h"
#include "runtime/target.h"

namespace kiln {
namespace {

const bool kRegistered = [] {
  runtime::registerBuiltinTargets();
  return true;
}();

std::unique_ptr<Module> parse(const char* text) {
  auto m = parseModule(text, "dynamic.kir");
  KILN_CHECK(m.isOk(), m.status().str());
  return std::move(*m);
}

Tensor tensor(DType t, std::vector<int64_t> dims, const std::vector<double>& v) {
  Tensor r(t, std::move(dims));
  for (size_t i = 0; i < v.size(); ++i) r.setDouble(static_cast<int64_t>(i), v[i]);
  return r;
}

std::vector<double> values(const Tensor& t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.numElements(); ++i) v.push_back(t.getDouble(i));
  return v;
}

// The targets of this build that run code: interp always, cpu where built.
std::vector<std::string> backends() {
  std::vector<std::string> b{"interp"};
  if (runtime::findTarget("cpu").isOk()) b.push_back("cpu");
  return b;
}

// ONNX test_nonzero_example: NonZero([[1, 0], [1, 1]]) = [[0, 1, 1], [0, 0, 1]]; np.nonzero gives
// the same rows.
constexpr const char* kNonZero = R"(func @main(%x: bool[2,2]) -> (i64[2,4]) {
  %nz, %n = (i64[2,4], i64[]) nonzero(%x)
  %s = i64[2,4] set_dimension_size(%nz, %n) {dimension = 1}
  return %s
}
)";

TEST(DynamicSizes, NonZeroIsPaddedWithItsCount) {
  auto m = parse(kNonZero);
  const Node& nz = *std::next(m->entry()->nodes().begin())->get();
  ASSERT_EQ(nz.op(), OpCode::NonZero);
  auto r = evaluateNode(nz, std::vector<Tensor>{tensor(DType::Bool, {2, 2}, {1, 0, 1, 1})});
  ASSERT_TRUE(r.isOk()) << r.status().str();
  EXPECT_EQ((*r)[0].dims(), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(values((*r)[0]), (std::vector<double>{0, 1, 1, 0, 0, 0, 1, 0}));
  EXPECT_EQ((*r)[1].getInt(0), 3);
}

TEST(DynamicSizes, OutputsHaveTheirTrueSizesOnEveryTarget) {
  std::vector<Tensor> in{tensor(DType::Bool, {2, 2}, {1, 0, 1, 1})};
  auto ref = interpret(*parse(kNonZero)->entry(), in);
  ASSERT_TRUE(ref.isOk()) << ref.status().str();
  ASSERT_EQ(ref->size(), 1u);
  EXPECT_EQ((*ref)[0].dims(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(values((*ref)[0]), (std::vector<double>{0, 1, 1, 0, 0, 1}));
  for (const std::string& backend : backends()) {
    runtime::CompileOptions o;
    o.backend = backend;
    o.threads = 1;
    auto exe = runtime::Executable::compile(parse(kNonZero), o);
    ASSERT_TRUE(exe.isOk()) << backend << ": " << exe.status().str();
    // What run returns: one output, its dim 1 of run-time size (at most 4); the compiled
    // function has the size as a second output.
    EXPECT_EQ((*exe)->outputTypes(), (std::vector<TensorType>{TensorType::of(DType::I64, {2, 4})}));
    EXPECT_EQ((*exe)->runTimeSizes(), (std::vector<DynamicDim>{{0, 1, 1}}));
    EXPECT_EQ((*exe)->function().outputs().size(), 2u);
    // Two runs: the second reuses the first's outputs, of other sizes.
    std::vector<Tensor> out;
    ASSERT_TRUE((*exe)->runInto(in, out).isOk()) << backend;
    ASSERT_EQ(out.size(), 1u) << backend;
    EXPECT_EQ(out[0].dims(), (std::vector<int64_t>{2, 3})) << backend;
    EXPECT_EQ(values(out[0]), (std::vector<double>{0, 1, 1, 0, 0, 1})) << backend;
    std::vector<Tensor> none{tensor(DType::Bool, {2, 2}, {0, 0, 0, 0})};
    ASSERT_TRUE((*exe)->runInto(none, out).isOk()) << backend;
    EXPECT_EQ(out[0].dims(), (std::vector<int64_t>{2, 0})) << backend;
    // An artifact keeps the sizes.
    auto loaded = runtime::Executable::load((*exe)->serialize(), "dynamic.kiln", o);
    ASSERT_TRUE(loaded.isOk()) << backend << ": " << loaded.status().str();
    auto again = (*loaded)->run(in);
    ASSERT_TRUE(again.isOk()) << backend << ": " << again.status().str();
    ASSERT_EQ(again->size(), 1u);
    EXPECT_EQ(values((*again)[0]), (std::vector<double>{0, 1, 1, 0, 0, 1})) << backend;
  }
}

// The size moves past a transpose and an add (padding rows compute padding rows) and through
// the indices of a gather (ONNX test_compress_0: rows 1 and 2 of [[1, 2], [3, 4], [5, 6]]).
constexpr const char* kConsumers =
    R"(func @main(%m: f32[2,3], %c: f32[3], %t: f32[3,2]) -> (i64[6,2], i64[6,2], f32[3,2]) {
  %nz, %n = (i64[2,6], i64[]) nonzero(%m)
  %s = i64[2,6] set_dimension_size(%nz, %n) {dimension = 1}
  %tr = i64[6,2] transpose(%s) {permutation = [1, 0]}
  %one = i64[] constant() {value = [1]}
  %ones = i64[6,2] broadcast_in_dim(%one) {dims = []}
  %p = i64[6,2] add(%tr, %ones)
  %ci, %cn = (i64[1,3], i64[]) nonzero(%c)
  %cs = i64[1,3] set_dimension_size(%ci, %cn) {dimension = 1}
  %g = f32[3,2] gather(%t, %cs) {offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 0, slice_sizes = [1, 2]}
  return %tr, %p, %g
}
)";

TEST(DynamicSizes, SizesFlowThroughElementwiseTransposeAndGatherIndices) {
  // np.transpose(np.nonzero([[0, 2, 0], [3, nan, 0]])) = [[0, 1], [1, 0], [1, 1]].
  std::vector<Tensor> in{tensor(DType::F32, {2, 3}, {0, 2, 0, 3, NAN, 0}),
                         tensor(DType::F32, {3}, {0, 1, 1}),
                         tensor(DType::F32, {3, 2}, {1, 2, 3, 4, 5, 6})};
  for (const std::string& backend : backends()) {
    runtime::CompileOptions o;
    o.backend = backend;
    o.threads = 1;
    auto exe = runtime::Executable::compile(parse(kConsumers), o);
    ASSERT_TRUE(exe.isOk()) << backend << ": " << exe.status().str();
    auto out = (*exe)->run(in);
    ASSERT_TRUE(out.isOk()) << backend << ": " << out.status().str();
    ASSERT_EQ(out->size(), 3u);
    EXPECT_EQ((*out)[0].dims(), (std::vector<int64_t>{3, 2})) << backend;
    EXPECT_EQ(values((*out)[0]), (std::vector<double>{0, 1, 1, 0, 1, 1})) << backend;
    EXPECT_EQ(values((*out)[1]), (std::vector<double>{1, 2, 2, 1, 2, 2})) << backend;
    EXPECT_EQ((*out)[2].dims(), (std::vector<int64_t>{2, 2})) << backend;
    EXPECT_EQ(values((*out)[2]), (std::vector<double>{3, 4, 5, 6})) << backend;
  }
}

TEST(DynamicSizes, AConsumerThatWouldReadThePaddingIsAnErrorNamingIt) {
  auto m = parse(R"(func @main(%m: f32[2,3]) -> (i64[2]) {
  %nz, %n = (i64[2,6], i64[]) nonzero(%m) loc("nz")
  %s = i64[2,6] set_dimension_size(%nz, %n) {dimension = 1}
  %r = i64[2] reduce(%s) {dims = [1], kind = sum} loc("r")
  return %r
}
)");
  auto dims = exposeDynamicSizes(*m->entry());
  ASSERT_FALSE(dims.isOk());
  EXPECT_NE(dims.status().message().find("node 'r' (reduce)"), std::string::npos)
      << dims.status().str();
  EXPECT_NE(dims.status().message().find("node 'nz' (nonzero)"), std::string::npos)
      << dims.status().str();
  EXPECT_NE(dims.status().message().find("reduce would read its padding"), std::string::npos)
      << dims.status().str();
}

TEST(DynamicSizes, ExposingAppendsTheSizesAsOutputs) {
  auto m = parse(kNonZero);
  auto dims = exposeDynamicSizes(*m->entry());
  ASSERT_TRUE(dims.isOk()) << dims.status().str();
  ASSERT_EQ(*dims, (std::vector<DynamicDim>{{0, 1, 1}}));
  const Function& f = *m->entry();
  ASSERT_EQ(f.outputs().size(), 2u);
  EXPECT_EQ(f.outputs()[0]->def()->op(), OpCode::NonZero);
  EXPECT_EQ(f.outputs()[1], f.outputs()[0]->def()->result(1));
  auto parsed = parseDynamicDims(dynamicDimsText(*dims), 2);
  ASSERT_TRUE(parsed.isOk());
  EXPECT_EQ(*parsed, *dims);
  EXPECT_FALSE(parseDynamicDims("0 1 5\n", 2).isOk());
}

// Runs `text` on every backend of this build and checks each output's dims and values.
struct Expected {
  std::vector<int64_t> dims;
  std::vector<double> values;
};

void expectOnEveryBackend(const char* text, const std::vector<Tensor>& in,
                          const std::vector<Expected>& want) {
  for (const std::string& backend : backends()) {
    runtime::CompileOptions o;
    o.backend = backend;
    o.threads = 1;
    auto exe = runtime::Executable::compile(parse(text), o);
    ASSERT_TRUE(exe.isOk()) << backend << ": " << exe.status().str();
    auto out = (*exe)->run(in);
    ASSERT_TRUE(out.isOk()) << backend << ": " << out.status().str();
    ASSERT_EQ(out->size(), want.size()) << backend;
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ((*out)[i].dims(), want[i].dims) << backend << " output " << i;
      EXPECT_EQ(values((*out)[i]), want[i].values) << backend << " output " << i;
    }
  }
}

// Shape of a sized value through get_dimension_size: after a transpose, dim 0 is the count and
// dim 1 the extent 2 (np.transpose(np.nonzero(m)).shape).
TEST(DynamicSizes, GetDimensionSizeGivesTheRunTimeSize) {
  const char* text = R"(func @main(%m: f32[2,3]) -> (i64[6,2], i64[], i64[]) {
  %nz, %n = (i64[2,6], i64[]) nonzero(%m)
  %s = i64[2,6] set_dimension_size(%nz, %n) {dimension = 1}
  %t = i64[6,2] transpose(%s) {permutation = [1, 0]}
  %rows = i64[] get_dimension_size(%t) {dimension = 0}
  %cols = i64[] get_dimension_size(%t) {dimension = 1}
  return %t, %rows, %cols
}
)";
  std::vector<Tensor> in{tensor(DType::F32, {2, 3}, {0, 2, 0, 3, 4, 0})};
  expectOnEveryBackend(text, in, {{{3, 2}, {0, 1, 1, 0, 1, 1}}, {{}, {3}}, {{}, {2}}});
  auto m = parse(text);
  ASSERT_TRUE(exposeDynamicSizes(*m->entry()).isOk());
  for (const auto& n : m->entry()->nodes())
    EXPECT_NE(n->op(), OpCode::SetDimensionSize) << n->describe();
  EXPECT_EQ(m->entry()->outputs()[1], m->entry()->outputs()[3]);  // the count itself
}

// ONNX test_unique_not_sorted_without_axis and test_unique_sorted_without_axis: x = [2, 1, 1,
// 3, 4, 3] (np.unique gives the sorted results).
constexpr const char* kUnique = R"(func @main(%x: f32[6]) -> (f32[6], i64[6], i64[6], i64[6]) {
  %y, %i, %inv, %c, %n = (f32[6], i64[6], i64[6], i64[6], i64[]) unique(%x) {sorted = SORTED}
  %ys = f32[6] set_dimension_size(%y, %n) {dimension = 0}
  %is = i64[6] set_dimension_size(%i, %n) {dimension = 0}
  %cs = i64[6] set_dimension_size(%c, %n) {dimension = 0}
  return %ys, %is, %inv, %cs
}
)";

TEST(DynamicSizes, UniqueMatchesTheOnnxTestData) {
  std::vector<Tensor> in{tensor(DType::F32, {6}, {2, 1, 1, 3, 4, 3})};
  std::string unsorted = kUnique, sorted = kUnique;
  unsorted.replace(unsorted.find("SORTED"), 6, "false");
  sorted.replace(sorted.find("SORTED"), 6, "true");
  expectOnEveryBackend(
      unsorted.c_str(), in,
      {{{4}, {2, 1, 3, 4}}, {{4}, {0, 1, 3, 4}}, {{6}, {0, 1, 1, 2, 3, 2}}, {{4}, {1, 2, 2, 1}}});
  expectOnEveryBackend(
      sorted.c_str(), in,
      {{{4}, {1, 2, 3, 4}}, {{4}, {1, 0, 3, 4}}, {{6}, {1, 0, 0, 2, 3, 2}}, {{4}, {2, 1, 2, 1}}});
}

// ONNX test_unique_sorted_with_axis: the distinct rows of [[1, 0, 0], [1, 0, 0], [2, 3, 4]];
// and rows with NaN, which sort after numbers (numpy's sort order) and are equal to each other.
TEST(DynamicSizes, UniqueAlongAnAxis) {
  const char* text = R"(func @main(%x: f32[3,3]) -> (f32[3,3], i64[3], i64[3], i64[3]) {
  %y, %i, %inv, %c, %n = (f32[3,3], i64[3], i64[3], i64[3], i64[]) unique(%x) {axis = 0}
  %ys = f32[3,3] set_dimension_size(%y, %n) {dimension = 0}
  %is = i64[3] set_dimension_size(%i, %n) {dimension = 0}
  %cs = i64[3] set_dimension_size(%c, %n) {dimension = 0}
  return %ys, %is, %inv, %cs
}
)";
  expectOnEveryBackend(
      text, {tensor(DType::F32, {3, 3}, {1, 0, 0, 1, 0, 0, 2, 3, 4})},
      {{{2, 3}, {1, 0, 0, 2, 3, 4}}, {{2}, {0, 2}}, {{3}, {0, 0, 1}}, {{2}, {2, 1}}});
  std::vector<Tensor> nan{tensor(DType::F32, {3, 3}, {NAN, 1, 0, 5, 0, 0, NAN, 1, 0})};
  auto ref = interpret(*parse(text)->entry(), nan);
  ASSERT_TRUE(ref.isOk()) << ref.status().str();
  EXPECT_EQ(values((*ref)[1]), (std::vector<double>{1, 0}));
  EXPECT_EQ(values((*ref)[2]), (std::vector<double>{1, 0, 1}));
  EXPECT_EQ(values((*ref)[3]), (std::vector<double>{1, 2}));
}

// ONNX test_nonmaxsuppression_suppress_by_IOU_and_scores (corners, score threshold 0.4),
// test_nonmaxsuppression_center_point_box_format and test_nonmaxsuppression_limit_output_size
// (max 2), with the ONNX test data's boxes, scores and expected rows.
TEST(DynamicSizes, NonMaxSuppressionMatchesTheOnnxTestData) {
  const char* text =
      R"(func @main(%b: f32[1,6,4], %c: f32[1,6,4], %s: f32[1,1,6], %max: i64[], %two: i64[], %iou: f32[], %thr: f32[]) -> (i64[6,3], i64[6,3], i64[6,3]) {
  %a, %an = (i64[6,3], i64[]) non_max_suppression(%b, %s, %max, %iou, %thr) {bound_per_class = 6}
  %as = i64[6,3] set_dimension_size(%a, %an) {dimension = 0}
  %p, %pn = (i64[6,3], i64[]) non_max_suppression(%c, %s, %max, %iou) {bound_per_class = 6, center_point_box = true}
  %ps = i64[6,3] set_dimension_size(%p, %pn) {dimension = 0}
  %l, %ln = (i64[6,3], i64[]) non_max_suppression(%b, %s, %two, %iou) {bound_per_class = 6}
  %ls = i64[6,3] set_dimension_size(%l, %ln) {dimension = 0}
  return %as, %ps, %ls
}
)";
  std::vector<Tensor> in{
      tensor(DType::F32, {1, 6, 4}, {0, 0,  1, 1,  0, 0.1f,  1, 1.1f,  0, -0.1f, 1, 0.9f,
                                     0, 10, 1, 11, 0, 10.1f, 1, 11.1f, 0, 100,   1, 101}),
      tensor(DType::F32, {1, 6, 4}, {0.5f, 0.5f,  1, 1, 0.5f, 0.6f,  1, 1, 0.5f, 0.4f,   1, 1,
                                     0.5f, 10.5f, 1, 1, 0.5f, 10.6f, 1, 1, 0.5f, 100.5f, 1, 1}),
      tensor(DType::F32, {1, 1, 6}, {0.9f, 0.75f, 0.6f, 0.95f, 0.5f, 0.3f}),
      tensor(DType::I64, {}, {3}),
      tensor(DType::I64, {}, {2}),
      tensor(DType::F32, {}, {0.5}),
      tensor(DType::F32, {}, {0.4f})};
  expectOnEveryBackend(text, in,
                       {{{2, 3}, {0, 0, 3, 0, 0, 0}},
                        {{3, 3}, {0, 0, 3, 0, 0, 0, 0, 0, 5}},
                        {{2, 3}, {0, 0, 3, 0, 0, 0}}});
}

// Past 4096 slices unique runs the reference kernel (a sort) as the library call: the values
// of 5000 elements in [0, 97) against std::set, on every backend.
TEST(DynamicSizes, LongUniqueRunsTheReferenceKernel) {
  const char* text = R"(func @main(%x: i32[5000]) -> (i32[5000], i64[5000]) {
  %y, %i, %inv, %c, %n = (i32[5000], i64[5000], i64[5000], i64[5000], i64[]) unique(%x)
  %ys = i32[5000] set_dimension_size(%y, %n) {dimension = 0}
  %cs = i64[5000] set_dimension_size(%c, %n) {dimension = 0}
  return %ys, %cs
}
)";
  std::vector<double> x, distinct;
  std::map<double, double> counts;
  for (int64_t i = 0; i < 5000; ++i) {
    x.push_back(double(i * 7919 % 97));
    counts[x.back()] += 1;
  }
  std::vector<double> howOften;
  for (auto [v, n] : counts) {
    distinct.push_back(v);
    howOften.push_back(n);
  }
  const auto n = static_cast<int64_t>(distinct.size());
  expectOnEveryBackend(text, {tensor(DType::I32, {5000}, x)}, {{{n}, distinct}, {{n}, howOften}});
}

// Bad operands are errors of the type rules, which the parser (and the ONNX importer, naming the
// node) report.
TEST(DynamicSizes, BadOperandsOfUniqueAndNonMaxSuppressionAreErrors) {
  auto nms = parseModule(
      R"(func @main(%b: f32[1,6,3], %s: f32[1,1,6], %m: i64[], %t: f32[]) -> (i64[6,3]) {
  %r, %n = (i64[6,3], i64[]) non_max_suppression(%b, %s, %m, %t) {bound_per_class = 6}
  return %r
}
)",
      "bad.kir");
  ASSERT_FALSE(nms.isOk());
  EXPECT_NE(nms.status().message().find("needs boxes [B, N, 4] and scores [B, C, N]"),
            std::string::npos)
      << nms.status().str();
  auto bound = parseModule(
      R"(func @main(%b: f32[1,6,4], %s: f32[1,1,6], %m: i64[], %t: f32[]) -> (i64[21,3]) {
  %r, %n = (i64[21,3], i64[]) non_max_suppression(%b, %s, %m, %t) {bound_per_class = 7}
  return %r
}
)",
      "bad.kir");
  ASSERT_FALSE(bound.isOk());
  EXPECT_NE(bound.status().message().find("bound_per_class = 7 must be in [0, 6]"),
            std::string::npos)
      << bound.status().str();
  auto uq = parseModule(R"(func @main(%x: f32[N,3]) -> (f32[N,3]) {
  %y, %i, %inv, %c, %n = (f32[N,3], i64[N], i64[N], i64[N], i64[]) unique(%x) {axis = 0}
  return %y
}
)",
                        "bad.kir");
  ASSERT_FALSE(uq.isOk());
  EXPECT_NE(uq.status().message().find("unique needs static dimensions"), std::string::npos)
      << uq.status().str();
}

}  // namespace
}  // namespace kiln
