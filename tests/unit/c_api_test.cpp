// The C API (include/kiln/kiln.h): compile ONNX backend-test models, run them through
// kiln_run, compare with the test data's expected outputs (ONNX's tolerances: 1e-3 relative,
// 1e-7 absolute); errors come back as messages, not crashes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <onnx/onnx_pb.h>
#include <thread>
#include <unistd.h>

#include "frontend/onnx/onnx_importer.h"
#include "kiln/kiln.h"

namespace {

const std::string kNode = "/usr/share/libonnx-testdata/data/node/";

struct Outputs {
  kiln_tensor* t = nullptr;
  int32_t n = 0;
  ~Outputs() { kiln_free_outputs(t, n); }
};

void expectMatches(const kiln_tensor& got, const kiln::Tensor& want) {
  ASSERT_EQ(got.dtype, KILN_F32);
  ASSERT_EQ(got.rank, want.rank());
  for (int32_t d = 0; d < got.rank; ++d) ASSERT_EQ(got.dims[d], want.dims()[d]);
  const float* g = static_cast<const float*>(got.data);
  for (int64_t i = 0; i < want.numElements(); ++i)
    ASSERT_LE(std::abs(g[i] - want.getDouble(i)), 1e-7 + 1e-3 * std::abs(want.getDouble(i)))
        << "element " << i;
}

TEST(CApi, CompilesAndRunsAnOnnxModel) {
  std::string dir = kNode + "test_softmax_axis_1/";
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << dir << " missing (package libonnx-testdata)";
  char* error = nullptr;
  kiln_options o = kiln_default_options();
  o.threads = 2;
  kiln_executable* exe = kiln_compile_onnx((dir + "model.onnx").c_str(), &o, &error);
  ASSERT_NE(exe, nullptr) << error;
  ASSERT_EQ(kiln_num_inputs(exe), 1);
  ASSERT_EQ(kiln_num_outputs(exe), 1);
  const char* name = nullptr;
  kiln_dtype dtype;
  int32_t rank = 0;
  const int64_t* dims = nullptr;
  ASSERT_EQ(kiln_input_info(exe, 0, &name, &dtype, &rank, &dims), 0);
  EXPECT_STREQ(name, "x");
  EXPECT_EQ(dtype, KILN_F32);
  ASSERT_EQ(rank, 3);
  EXPECT_EQ(kiln_input_info(exe, 1, nullptr, nullptr, nullptr, nullptr), -1);
  auto x = kiln::onnx::readTensorProtoFile(dir + "test_data_set_0/input_0.pb");
  auto y = kiln::onnx::readTensorProtoFile(dir + "test_data_set_0/output_0.pb");
  ASSERT_TRUE(x.isOk() && y.isOk());
  kiln_tensor in{KILN_F32, rank, x->dims().data(), x->mutableBytes()};
  // Two threads at once on one executable.
  auto work = [&](Outputs& out, int32_t& status, std::string& message) {
    char* err = nullptr;
    status = kiln_run(exe, &in, 1, &out.t, &out.n, &err);
    if (err) {
      message = err;
      kiln_free_error(err);
    }
  };
  Outputs a, b;
  int32_t sa = -1, sb = -1;
  std::string ma, mb;
  std::thread ta(work, std::ref(a), std::ref(sa), std::ref(ma));
  std::thread tb(work, std::ref(b), std::ref(sb), std::ref(mb));
  ta.join();
  tb.join();
  ASSERT_EQ(sa, 0) << ma;
  ASSERT_EQ(sb, 0) << mb;
  ASSERT_EQ(a.n, 1);
  expectMatches(a.t[0], *y);
  expectMatches(b.t[0], *y);
  kiln_destroy(exe);
}

// options.precision: f16 computes in f16 with f32 in and out, within docs/gpu.md's 1e-2 of the
// f32 result and not equal to it (the rounding shows); an unknown precision is an error.
TEST(CApi, PrecisionOption) {
  std::string dir = kNode + "test_softmax_axis_1/";
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << dir << " missing (package libonnx-testdata)";
  auto x = kiln::onnx::readTensorProtoFile(dir + "test_data_set_0/input_0.pb");
  auto y = kiln::onnx::readTensorProtoFile(dir + "test_data_set_0/output_0.pb");
  ASSERT_TRUE(x.isOk() && y.isOk());
  char* error = nullptr;
  kiln_options o = kiln_default_options();
  o.precision = "f16";
  kiln_executable* exe = kiln_compile_onnx((dir + "model.onnx").c_str(), &o, &error);
  ASSERT_NE(exe, nullptr) << error;
  kiln_tensor in{KILN_F32, 3, x->dims().data(), x->mutableBytes()};
  Outputs out;
  ASSERT_EQ(kiln_run(exe, &in, 1, &out.t, &out.n, &error), 0) << error;
  ASSERT_EQ(out.t[0].dtype, KILN_F32);
  const float* g = static_cast<const float*>(out.t[0].data);
  double worst = 0;
  for (int64_t i = 0; i < y->numElements(); ++i)
    worst = std::max(worst, std::abs(g[i] - y->getDouble(i)));
  EXPECT_GT(worst, 0.0);
  EXPECT_LE(worst, 1e-2);
  kiln_destroy(exe);
  o.precision = "f8";
  EXPECT_EQ(kiln_compile_onnx((dir + "model.onnx").c_str(), &o, &error), nullptr);
  ASSERT_NE(error, nullptr);
  EXPECT_NE(std::string(error).find("unknown precision 'f8'"), std::string::npos) << error;
  kiln_free_error(error);
}

// y = tanh(x), x: f32[N,4] with N an ONNX dim_param, written to a file of this test and process.
std::string tanhModel() {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  ::onnx::GraphProto* g = m.mutable_graph();
  g->set_name("g");
  auto* x = g->add_input();
  x->set_name("x");
  auto* t = x->mutable_type()->mutable_tensor_type();
  t->set_elem_type(::onnx::TensorProto::FLOAT);
  t->mutable_shape()->add_dim()->set_dim_param("N");
  t->mutable_shape()->add_dim()->set_dim_value(4);
  ::onnx::NodeProto* n = g->add_node();
  n->set_op_type("Tanh");
  n->add_input("x");
  n->add_output("y");
  g->add_output()->set_name("y");
  std::string path =
      testing::TempDir() + "/kiln_c_api_tanh_" + std::to_string(::getpid()) + ".onnx";
  std::string bytes = m.SerializeAsString();
  FILE* f = std::fopen(path.c_str(), "wb");
  EXPECT_NE(f, nullptr);
  if (f) {
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
  }
  return path;
}

// options.num_ranges: one compile for N = 1..16 runs N = 3 and 16 without compiling again (the
// input's dim 0 reads -1), and N = 20 compiles once more; an empty range is an error. The CPU's
// tanh approximation is within 1e-6 of std::tanh.
TEST(CApi, RangesCompileOnce) {
  std::string path = tanhModel();
  const char* names[] = {"N"};
  int64_t lo[] = {1}, hi[] = {16};
  kiln_options o = kiln_default_options();
  o.num_ranges = 1;
  o.range_names = names;
  o.range_lo = lo;
  o.range_hi = hi;
  char* error = nullptr;
  kiln_executable* exe = kiln_compile_onnx(path.c_str(), &o, &error);
  ASSERT_NE(exe, nullptr) << error;
  int32_t rank = 0;
  const int64_t* dims = nullptr;
  ASSERT_EQ(kiln_input_info(exe, 0, nullptr, nullptr, &rank, &dims), 0);
  ASSERT_EQ(rank, 2);
  EXPECT_EQ(dims[0], -1);
  EXPECT_EQ(dims[1], 4);
  for (int64_t n : {3, 16, 20}) {
    std::vector<float> data(static_cast<size_t>(n * 4));
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i) * 0.05f - 1.0f;
    int64_t shape[] = {n, 4};
    kiln_tensor in{KILN_F32, 2, shape, data.data()};
    Outputs out;
    ASSERT_EQ(kiln_run(exe, &in, 1, &out.t, &out.n, &error), 0) << error;
    ASSERT_EQ(out.t[0].dims[0], n);
    const float* y = static_cast<const float*>(out.t[0].data);
    for (size_t i = 0; i < data.size(); ++i)
      ASSERT_NEAR(y[i], std::tanh(data[i]), 1e-6) << "N=" << n << " element " << i;
  }
  kiln_destroy(exe);
  hi[0] = 0;
  EXPECT_EQ(kiln_compile_onnx(path.c_str(), &o, &error), nullptr);
  ASSERT_NE(error, nullptr);
  EXPECT_NE(std::string(error).find("range 0 empty or negative"), std::string::npos) << error;
  kiln_free_error(error);
  std::filesystem::remove(path);
}

// options.range_pow2: N = 1..16 in power-of-two buckets compiles, once each, the bucket of a
// run's size (3 and 4 share 3..4; 6 gets 5..8), says so on stderr, and computes tanh within
// 1e-6 at each size.
TEST(CApi, RangesInPowerOfTwoBuckets) {
  std::string path = tanhModel();
  const char* names[] = {"N"};
  int64_t lo[] = {1}, hi[] = {16};
  int32_t pow2[] = {1};
  kiln_options o = kiln_default_options();
  o.num_ranges = 1;
  o.range_names = names;
  o.range_lo = lo;
  o.range_hi = hi;
  o.range_pow2 = pow2;
  char* error = nullptr;
  testing::internal::CaptureStderr();
  kiln_executable* exe = kiln_compile_onnx(path.c_str(), &o, &error);
  bool ran = exe != nullptr;
  for (int64_t n : {3, 4, 6}) {
    std::vector<float> data(static_cast<size_t>(n * 4));
    for (size_t i = 0; ran && i < data.size(); ++i) data[i] = static_cast<float>(i) * 0.05f - 1.0f;
    int64_t shape[] = {n, 4};
    kiln_tensor in{KILN_F32, 2, shape, data.data()};
    Outputs out;
    ran = ran && kiln_run(exe, &in, 1, &out.t, &out.n, &error) == 0;
    const float* y = ran ? static_cast<const float*>(out.t[0].data) : nullptr;
    for (size_t i = 0; ran && i < data.size(); ++i)
      EXPECT_NEAR(y[i], std::tanh(data[i]), 1e-6) << "N=" << n << " element " << i;
  }
  const std::string log = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(ran) << (error ? error : "");
  EXPECT_NE(log.find("for N=3..4, the bucket of N=3 in N=1..16:pow2"), std::string::npos) << log;
  EXPECT_NE(log.find("for N=5..8, the bucket of N=6 in N=1..16:pow2"), std::string::npos) << log;
  EXPECT_EQ(log.find("the bucket of N=4"), std::string::npos) << log;
  kiln_destroy(exe);
  std::filesystem::remove(path);
}

TEST(CApi, ErrorsAreMessages) {
  char* error = nullptr;
  EXPECT_EQ(kiln_compile_onnx("/nonexistent/model.onnx", nullptr, &error), nullptr);
  ASSERT_NE(error, nullptr);
  EXPECT_NE(std::string(error).find("/nonexistent/model.onnx"), std::string::npos) << error;
  kiln_free_error(error);

  std::string dir = kNode + "test_softmax_axis_1/";
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << dir << " missing (package libonnx-testdata)";
  kiln_executable* exe = kiln_compile_onnx((dir + "model.onnx").c_str(), nullptr, &error);
  ASSERT_NE(exe, nullptr) << error;
  int64_t dims[] = {2, 2};
  float data[4] = {0, 1, 2, 3};
  kiln_tensor wrong{KILN_F32, 2, dims, data};
  Outputs out;
  error = nullptr;
  EXPECT_NE(kiln_run(exe, &wrong, 1, &out.t, &out.n, &error), 0);
  ASSERT_NE(error, nullptr);
  EXPECT_NE(std::string(error).find("expected f32[3,4,5]"), std::string::npos) << error;
  kiln_free_error(error);
  error = nullptr;
  EXPECT_NE(kiln_run(exe, nullptr, 1, &out.t, &out.n, &error), 0);
  kiln_free_error(error);
  kiln_destroy(exe);
}

}  // namespace

namespace {

// An output whose size depends on the data (ONNX test_unique_sorted_with_axis: Y, indices,
// inverse_indices, counts): kiln_output_info describes what kiln_run returns, the sized dim as
// -1, and kiln_run gives the test data's values at their true sizes.
TEST(CApi, OutputsOfRunTimeSizeAreDescribedAsRunReturnsThem) {
  std::string dir = kNode + "test_unique_sorted_with_axis/";
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << dir << " missing (package libonnx-testdata)";
  char* error = nullptr;
  kiln_executable* exe = kiln_compile_onnx((dir + "model.onnx").c_str(), nullptr, &error);
  ASSERT_NE(exe, nullptr) << error;
  ASSERT_EQ(kiln_num_outputs(exe), 4);
  EXPECT_EQ(kiln_output_info(exe, 4, nullptr, nullptr, nullptr, nullptr), -1);
  const char* name = nullptr;
  kiln_dtype dtype;
  int32_t rank = 0;
  const int64_t* dims = nullptr;
  ASSERT_EQ(kiln_output_info(exe, 0, &name, &dtype, &rank, &dims), 0);
  EXPECT_STREQ(name, "Y");
  EXPECT_EQ(dtype, KILN_F32);
  ASSERT_EQ(rank, 2);
  EXPECT_EQ(dims[0], -1);
  EXPECT_EQ(dims[1], 3);
  ASSERT_EQ(kiln_output_info(exe, 2, &name, &dtype, &rank, &dims), 0);
  EXPECT_STREQ(name, "inverse_indices");
  EXPECT_EQ(dtype, KILN_I64);
  ASSERT_EQ(rank, 1);
  EXPECT_EQ(dims[0], 3);  // one per input row: not of run-time size
  auto x = kiln::onnx::readTensorProtoFile(dir + "test_data_set_0/input_0.pb");
  ASSERT_TRUE(x.isOk());
  kiln_tensor in{KILN_F32, static_cast<int32_t>(x->rank()), x->dims().data(), x->mutableBytes()};
  Outputs out;
  ASSERT_EQ(kiln_run(exe, &in, 1, &out.t, &out.n, &error), 0) << error;
  ASSERT_EQ(out.n, 4);
  for (int32_t i = 0; i < 4; ++i) {
    auto want = kiln::onnx::readTensorProtoFile(dir + "test_data_set_0/output_" +
                                                std::to_string(i) + ".pb");
    ASSERT_TRUE(want.isOk());
    ASSERT_EQ(out.t[i].rank, want->rank()) << i;
    for (int32_t d = 0; d < out.t[i].rank; ++d) EXPECT_EQ(out.t[i].dims[d], want->dims()[d]) << i;
    if (i == 0) {
      expectMatches(out.t[0], *want);
      continue;
    }
    const auto* got = static_cast<const int64_t*>(out.t[i].data);
    for (int64_t e = 0; e < want->numElements(); ++e) EXPECT_EQ(got[e], want->getInt(e)) << i;
  }
  kiln_destroy(exe);
}

// Strings have no kiln_dtype: an interp executable of a model over them says so by -1 from the
// info calls, and kiln_run refuses a string output with a message instead of handing out bytes
// of text objects.
TEST(CApi, StringsHaveNoCForm) {
  std::string dir = kNode + "test_cast_FLOAT_to_STRING/";
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << dir << " missing (package libonnx-testdata)";
  char* error = nullptr;
  kiln_options o = kiln_default_options();
  o.backend = "interp";
  kiln_executable* exe = kiln_compile_onnx((dir + "model.onnx").c_str(), &o, &error);
  ASSERT_NE(exe, nullptr) << error;
  kiln_dtype dtype;
  EXPECT_EQ(kiln_input_info(exe, 0, nullptr, &dtype, nullptr, nullptr), 0);
  EXPECT_EQ(dtype, KILN_F32);
  EXPECT_EQ(kiln_output_info(exe, 0, nullptr, &dtype, nullptr, nullptr), -1);
  auto x = kiln::onnx::readTensorProtoFile(dir + "test_data_set_0/input_0.pb");
  ASSERT_TRUE(x.isOk());
  kiln_tensor in{KILN_F32, static_cast<int32_t>(x->rank()), x->dims().data(), x->mutableBytes()};
  Outputs out;
  ASSERT_NE(kiln_run(exe, &in, 1, &out.t, &out.n, &error), 0);
  ASSERT_NE(error, nullptr);
  EXPECT_NE(std::string(error).find("the C API carries numbers only"), std::string::npos) << error;
  kiln_free_error(error);
  kiln_destroy(exe);
}

}  // namespace
