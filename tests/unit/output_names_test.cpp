// Output names belong to a function's outputs, not to their values: one value returned under
// two names, or a parameter returned under a name of its own (ONNX Identity of a graph input),
// keeps every name through the IR, the .kir text, the ONNX importer, and the C++ and C APIs.
#include <gtest/gtest.h>

#include <onnx/onnx_pb.h>
#include <unistd.h>

#include "frontend/onnx/import_options.h"
#include "interp/interpreter.h"
#include "ir/builder.h"
#include "ir/text/text.h"
#include "kiln/kiln.h"
#include "kiln/kiln.hpp"

namespace {

using kiln::DType;
using kiln::Tensor;
using Names = std::vector<std::string>;

// y = Identity(x), m = Max(x), r = Relu(x), r2 = Identity(r), and x itself as an output.
std::string aliasedOutputsModel() {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  ::onnx::GraphProto* g = m.mutable_graph();
  g->set_name("g");
  ::onnx::ValueInfoProto* x = g->add_input();
  x->set_name("x");
  auto* tt = x->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(::onnx::TensorProto::FLOAT);
  tt->mutable_shape()->add_dim()->set_dim_value(3);
  auto node = [&](const std::string& op, const std::string& in, const std::string& out) {
    ::onnx::NodeProto* n = g->add_node();
    n->set_op_type(op);
    n->add_input(in);
    n->add_output(out);
  };
  node("Identity", "x", "y");
  node("Max", "x", "m");
  node("Relu", "x", "r");
  node("Identity", "r", "r2");
  for (const char* out : {"y", "m", "r", "r2", "x"}) g->add_output()->set_name(out);
  return m.SerializeAsString();
}

Tensor f32(const std::vector<float>& v) {
  Tensor t(DType::F32, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.setDouble(static_cast<int64_t>(i), v[i]);
  return t;
}

std::vector<double> values(const Tensor& t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.numElements(); ++i) v.push_back(t.getDouble(i));
  return v;
}

TEST(OutputNames, ReplacingAnOutputsValueKeepsItsName) {
  kiln::Module m;
  kiln::Function* f = m.addFunction("main");
  kiln::Builder b(f);
  kiln::Value* x = b.parameter(kiln::TensorType::of(DType::F32, {3}), "x");
  kiln::Value* n = b.unary(kiln::OpCode::Neg, x);
  n->setName("n");
  f->setOutputs({x, n, n}, {"y", "n", "n2"});
  EXPECT_EQ(f->outputNames(), (Names{"y", "n", "n2"}));
  kiln::Value* a = b.unary(kiln::OpCode::Abs, x);
  a->setName("a");
  f->replaceAllUsesWith(n, a);
  f->setOutput(0, a);
  EXPECT_EQ(f->outputs(), (std::vector<kiln::Value*>{a, a, a}));
  EXPECT_EQ(f->outputNames(), (Names{"y", "n", "n2"}));
  // Without names of their own, outputs are named after their values.
  f->setOutputs({a, x});
  EXPECT_EQ(f->outputNames(), (Names{"a", "x"}));
}

TEST(OutputNames, TextSpellsAnOutputNamedApartFromItsValue) {
  const std::string text = "func @main(%x: f32[3]) -> (f32[3], f32[3], f32[3], f32[3]) {\n"
                           "  %r = f32[3] abs(%x)\n"
                           "  %0 = f32[3] neg(%x)\n"
                           "  return %x as \"y\", %r, %r as \"r 2\", %0\n"
                           "}\n";
  auto m = kiln::parseModule(text, "t.kir");
  ASSERT_TRUE(m.isOk()) << m.status().str();
  EXPECT_EQ((*m)->entry()->outputNames(), (Names{"y", "r", "r 2", "0"}));
  EXPECT_EQ(kiln::printModule(**m), text);
  auto bad =
      kiln::parseModule("func @main(%x: f32[3]) -> (f32[3]) {\n  return %x as y\n}\n", "b.kir");
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().str().find("b.kir:2:16"), std::string::npos) << bad.status().str();
  EXPECT_NE(bad.status().str().find("the output's name as a string"), std::string::npos)
      << bad.status().str();
}

TEST(OutputNames, OnnxOutputsThatAliasInputsOrEachOtherKeepTheirNames) {
  auto m = kiln::onnx::importModelBytes(aliasedOutputsModel(), ".");
  ASSERT_TRUE(m.isOk()) << m.status().str();
  const kiln::Function& f = *(*m)->entry();
  EXPECT_EQ(f.outputNames(), (Names{"y", "m", "r", "r2", "x"}));
  // y, m and x are the parameter; r and r2 one value.
  EXPECT_EQ(f.outputs()[0], f.parameter(0));
  EXPECT_EQ(f.outputs()[2], f.outputs()[3]);
  std::string printed = kiln::printModule(**m);
  EXPECT_NE(printed.find("return %x as \"y\", %x as \"m\", %r, %r as \"r2\", %x\n"),
            std::string::npos)
      << printed;
  auto again = kiln::parseModule(printed, "again.kir");
  ASSERT_TRUE(again.isOk()) << again.status().str();
  EXPECT_EQ((*again)->entry()->outputNames(), f.outputNames());
}

TEST(OutputNames, CppApiExecutableNamesEveryOutput) {
  auto m = kiln::onnx::importModelBytes(aliasedOutputsModel(), ".");
  ASSERT_TRUE(m.isOk()) << m.status().str();
  kiln::CompileOptions o;
  o.backend = "interp";
  auto exe = kiln::compileModule(std::move(*m), o);
  ASSERT_TRUE(exe.isOk()) << exe.status().str();
  EXPECT_EQ((*exe)->outputNames(), (Names{"y", "m", "r", "r2", "x"}));
  std::vector<Tensor> in{f32({-1, 2, -3})};
  auto out = (*exe)->run(in);
  ASSERT_TRUE(out.isOk()) << out.status().str();
  ASSERT_EQ(out->size(), 5u);
  EXPECT_EQ(values((*out)[0]), (std::vector<double>{-1, 2, -3}));
  EXPECT_EQ(values((*out)[3]), (std::vector<double>{0, 2, 0}));
}

TEST(OutputNames, CApiOutputInfoGivesTheModelsNames) {
  const std::string path =
      testing::TempDir() + "/kiln_output_names_" + std::to_string(::getpid()) + ".onnx";
  {
    std::string bytes = aliasedOutputsModel();
    FILE* file = std::fopen(path.c_str(), "wb");
    ASSERT_NE(file, nullptr);
    ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), file), bytes.size());
    std::fclose(file);
  }
  kiln_options o = kiln_default_options();
  o.backend = "interp";
  char* error = nullptr;
  kiln_executable* exe = kiln_compile_onnx(path.c_str(), &o, &error);
  ASSERT_NE(exe, nullptr) << error;
  ASSERT_EQ(kiln_num_outputs(exe), 5);
  Names names;
  for (int32_t i = 0; i < 5; ++i) {
    const char* name = nullptr;
    kiln_dtype dtype;
    int32_t rank = 0;
    const int64_t* dims = nullptr;
    ASSERT_EQ(kiln_output_info(exe, i, &name, &dtype, &rank, &dims), 0);
    names.push_back(name);
    EXPECT_EQ(dtype, KILN_F32);
    ASSERT_EQ(rank, 1);
    EXPECT_EQ(dims[0], 3);
  }
  EXPECT_EQ(names, (Names{"y", "m", "r", "r2", "x"}));
  EXPECT_EQ(kiln_output_info(exe, 5, nullptr, nullptr, nullptr, nullptr), -1);
  kiln_destroy(exe);
  std::remove(path.c_str());
}

}  // namespace
