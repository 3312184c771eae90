// Graph inputs whose values the ONNX importer needs (a Reshape's shape): the import reports them,
// and importOptionsForInputs, which `kiln run` and `kiln conformance` share, binds them to given
// values and fixes the named dims of the given inputs to their sizes.
#include <gtest/gtest.h>

#include <cstdio>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include "frontend/onnx/import_options.h"
#include "interp/interpreter.h"

namespace {

namespace ko = kiln::onnx;
using kiln::DType;
using kiln::Tensor;

// y = Reshape(data, shape) with data: f32[N,3] (N a dim_param) and shape: i64[2], in a file.
std::string reshapeModelFile() {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  ::onnx::GraphProto* g = m.mutable_graph();
  g->set_name("g");
  auto input = [&](const std::string& name, int elem, const std::string& param, int64_t d) {
    auto* tt = g->add_input();
    tt->set_name(name);
    auto* t = tt->mutable_type()->mutable_tensor_type();
    t->set_elem_type(elem);
    if (!param.empty()) t->mutable_shape()->add_dim()->set_dim_param(param);
    t->mutable_shape()->add_dim()->set_dim_value(d);
  };
  input("data", ::onnx::TensorProto::FLOAT, "N", 3);
  input("shape", ::onnx::TensorProto::INT64, "", 2);
  ::onnx::NodeProto* n = g->add_node();
  n->set_op_type("Reshape");
  n->set_name("reshape");
  n->add_input("data");
  n->add_input("shape");
  n->add_output("y");
  g->add_output()->set_name("y");
  // One file per test and process: CTest runs the tests of this file in parallel.
  const testing::TestInfo* test = testing::UnitTest::GetInstance()->current_test_info();
  std::string path = testing::TempDir() + "/kiln_input_values_" + test->name() + "_" +
                     std::to_string(::getpid()) + ".onnx";
  std::string bytes = m.SerializeAsString();
  FILE* f = std::fopen(path.c_str(), "wb");
  EXPECT_NE(f, nullptr);
  if (f) {
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
  }
  return path;
}

Tensor i64(const std::vector<int64_t>& v) {
  Tensor t(DType::I64, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.setInt(static_cast<int64_t>(i), v[i]);
  return t;
}

TEST(OnnxInputValues, ANeededInputWithoutAValueIsReported) {
  std::string path = reshapeModelFile();
  ko::ImportReport report;
  auto m = ko::importModelFile(path, {}, &report);
  ASSERT_FALSE(m.isOk());
  EXPECT_NE(m.status().message().find("input 'shape' (the target shape) must be known while "
                                      "importing"),
            std::string::npos)
      << m.status().message();
  EXPECT_EQ(report.neededInputs, (std::set<std::string>{"shape"}));
  EXPECT_TRUE(report.boundInputs.empty());
  std::remove(path.c_str());
}

TEST(OnnxInputValues, GivenValuesBindTheNeededInputsAndFixNamedDims) {
  std::string path = reshapeModelFile();
  Tensor data(DType::F32, {2, 3});
  for (int64_t i = 0; i < 6; ++i) data.setDouble(i, static_cast<double>(i));
  auto options = ko::importOptionsForInputs(path, {{"data", data}, {"shape", i64({3, 2})}});
  ASSERT_TRUE(options.isOk()) << options.status().message();
  EXPECT_EQ(options->dimValues, (std::map<std::string, int64_t>{{"N", 2}}));
  ko::ImportReport report;
  auto m = ko::importModelFile(path, *options, &report);
  ASSERT_TRUE(m.isOk()) << m.status().message();
  EXPECT_EQ(report.boundInputs, (std::set<std::string>{"shape"}));
  // Only `data` stays a parameter, of the size its value fixed; `shape` is a constant.
  const kiln::Function& f = *(*m)->entry();
  ASSERT_EQ(f.numParameters(), 1u);
  EXPECT_EQ(f.parameter(0)->name(), "data");
  EXPECT_EQ(f.parameter(0)->type().str(), "f32[2,3]");
  std::vector<Tensor> args{data};
  auto out = kiln::interpret(f, args);
  ASSERT_TRUE(out.isOk()) << out.status().message();
  EXPECT_EQ((*out)[0].type().str(), "f32[3,2]");
  EXPECT_EQ((*out)[0].getDouble(5), 5.0);
  std::remove(path.c_str());
}

}  // namespace
