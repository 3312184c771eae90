// Tests of the ONNX importer on small models built in C++ with the protobuf API: mapping and
// values (through the reference interpreter), broadcasting and symbolic dims, shape-computing
// subgraphs, opset selection, functions, initializer data (typed fields, external files) and
// the errors for bad models.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include "frontend/onnx/import_options.h"
#include "interp/interpreter.h"

namespace {

namespace fs = std::filesystem;
namespace ko = kiln::onnx;
using kiln::DType;
using kiln::Tensor;

// A model under construction.
struct ModelBuilder {
  ::onnx::ModelProto m;
  ::onnx::GraphProto* g;

  explicit ModelBuilder(int opset = 13) {
    m.set_ir_version(8);
    auto* op = m.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
    g = m.mutable_graph();
    g->set_name("g");
  }

  // dims: >= 0 static, -1 a dim_param named `sym`, -2 no value at all.
  static void setType(::onnx::ValueInfoProto* vi, int elem, const std::vector<int64_t>& dims,
                      const std::string& sym = "N") {
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem);
    auto* shape = tt->mutable_shape();
    for (int64_t d : dims) {
      auto* dim = shape->add_dim();
      if (d >= 0) dim->set_dim_value(d);
      else if (d == -1) dim->set_dim_param(sym);
    }
  }
  void input(const std::string& name, const std::vector<int64_t>& dims,
             int elem = ::onnx::TensorProto::FLOAT, const std::string& sym = "N") {
    auto* vi = g->add_input();
    vi->set_name(name);
    setType(vi, elem, dims, sym);
  }
  void output(const std::string& name) { g->add_output()->set_name(name); }
  ::onnx::NodeProto* node(const std::string& op, std::vector<std::string> ins,
                          std::vector<std::string> outs, const std::string& name = "") {
    auto* n = g->add_node();
    n->set_op_type(op);
    if (!name.empty()) n->set_name(name);
    for (auto& i : ins) n->add_input(i);
    for (auto& o : outs) n->add_output(o);
    return n;
  }
  ::onnx::TensorProto* floatInit(const std::string& name, const std::vector<int64_t>& dims,
                                 const std::vector<float>& v) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(::onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    t->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4));
    return t;
  }
  ::onnx::TensorProto* i64Init(const std::string& name, const std::vector<int64_t>& v) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(::onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(v.size()));
    for (int64_t x : v) t->add_int64_data(x);
    return t;
  }
  std::string bytes() const { return m.SerializeAsString(); }
  auto import(const std::string& dir = ".", const ko::ImportOptions& o = {}) const {
    return ko::importModelBytes(bytes(), dir, o);
  }
};

void addAttrInt(::onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::INT);
  a->set_i(v);
}

Tensor f32(std::vector<int64_t> dims, const std::vector<float>& v) {
  Tensor t(DType::F32, std::move(dims));
  std::memcpy(t.mutableBytes(), v.data(), v.size() * 4);
  return t;
}

std::vector<float> values(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numElements()));
  for (int64_t i = 0; i < t.numElements(); ++i)
    v[static_cast<size_t>(i)] = static_cast<float>(t.getDouble(i));
  return v;
}

std::vector<Tensor> run(const kiln::Module& m, const std::vector<Tensor>& in) {
  auto r = kiln::interpret(*m.entry(), in);
  EXPECT_TRUE(r.isOk()) << r.status().message();
  return r ? *r : std::vector<Tensor>{};
}

TEST(OnnxImport, AddReluWithInitializerBroadcast) {
  ModelBuilder mb;
  mb.input("x", {2, 3});
  mb.floatInit("b", {3}, {1.0f, -2.0f, 0.5f});
  mb.node("Add", {"x", "b"}, {"s"});
  mb.node("Relu", {"s"}, {"y"});
  mb.output("y");
  auto m = mb.import();
  ASSERT_TRUE(m.isOk()) << m.status().message();
  kiln::Function* f = (*m)->entry();
  ASSERT_EQ(f->numParameters(), 1u);
  EXPECT_EQ(f->parameter(0)->name(), "x");
  ASSERT_EQ(f->outputs().size(), 1u);
  EXPECT_EQ(f->outputs()[0]->name(), "y");
  EXPECT_EQ(f->outputs()[0]->type().str(), "f32[2,3]");
  // relu(x + b) by hand: row 0: (-1+1, 1-2, 2+0.5) -> (0, 0, 2.5); row 1: (3+1, 4-2, -3+0.5).
  auto out = run(**m, {f32({2, 3}, {-1, 1, 2, 3, 4, -3})});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(values(out[0]), (std::vector<float>{0, 0, 2.5f, 4, 2, 0}));
}

TEST(OnnxImport, SymbolicDimsBroadcastAndUnnamedDims) {
  ModelBuilder mb;
  mb.input("x", {-1, 3});
  mb.input("y", {1, 3});
  mb.input("z", {-2, 3});
  mb.node("Mul", {"x", "y"}, {"p"});
  mb.output("p");
  mb.output("z");
  auto m = mb.import();
  ASSERT_TRUE(m.isOk()) << m.status().message();
  kiln::Function* f = (*m)->entry();
  EXPECT_EQ(f->outputs()[0]->type().str(), "f32[N,3]");
  EXPECT_EQ(f->parameter(2)->type().str(), "f32[unk0,3]");
}

// Concatenating along a symbolic dim: N + N is 2*N; N + 1 has no type (dims are products of
// symbols), which is refused naming the sum rather than as a missing result type.
TEST(OnnxImport, ConcatAlongASymbolicDim) {
  ModelBuilder mb;
  mb.input("x", {-1, 3});
  addAttrInt(mb.node("Concat", {"x", "x"}, {"y"}), "axis", 0);
  mb.output("y");
  auto m = mb.import();
  ASSERT_TRUE(m.isOk()) << m.status().message();
  EXPECT_EQ((*m)->entry()->outputs()[0]->type().str(), "f32[2*N,3]");

  ModelBuilder plusOne;
  plusOne.input("x", {-1, 3});
  plusOne.input("one", {1, 3});
  addAttrInt(plusOne.node("Concat", {"x", "one"}, {"y"}), "axis", 0);
  plusOne.output("y");
  auto refused = plusOne.import();
  ASSERT_FALSE(refused.isOk());
  EXPECT_NE(refused.status().message().find(
                "concatenating along axis 0 gives N + 1 entries: a size that is a sum of "
                "symbolic sizes is not supported"),
            std::string::npos)
      << refused.status().message();
}

TEST(OnnxImport, TwoDifferentSymbolsDoNotBroadcast) {
  ModelBuilder mb;
  mb.input("x", {-1, 3}, ::onnx::TensorProto::FLOAT, "N");
  mb.input("y", {-1, 3}, ::onnx::TensorProto::FLOAT, "M");
  mb.node("Add", {"x", "y"}, {"s"}, "the_add");
  mb.output("s");
  auto m = mb.import();
  ASSERT_FALSE(m.isOk());
  EXPECT_NE(m.status().message().find("node 'the_add' (ai.onnx::Add, opset 13)"), std::string::npos)
      << m.status().message();
  EXPECT_NE(m.status().message().find("N vs M"), std::string::npos) << m.status().message();
}

TEST(OnnxImport, ShapeSubgraphWithSymbolicBatchFeedsReshape) {
  // Reshape(x, Concat(Gather(Shape(x), 0), [-1])): the batch stays symbolic.
  ModelBuilder mb;
  mb.input("x", {-1, 2, 3});
  mb.i64Init("zero", {0});
  mb.i64Init("minus1", {-1});
  mb.node("Shape", {"x"}, {"shp"});
  mb.node("Gather", {"shp", "zero"}, {"n"});
  auto* cat = mb.node("Concat", {"n", "minus1"}, {"target"});
  addAttrInt(cat, "axis", 0);
  mb.node("Reshape", {"x", "target"}, {"y"});
  mb.output("y");
  auto m = mb.import();
  ASSERT_TRUE(m.isOk()) << m.status().message();
  EXPECT_EQ((*m)->entry()->outputs()[0]->type().str(), "f32[N,6]");
  // The shape computation is gone: only the parameter and the reshape remain.
  EXPECT_EQ((*m)->entry()->numNodes(), 2u);
}

TEST(OnnxImport, SymbolicShapeUsedAsDataIsRefused) {
  ModelBuilder mb;
  mb.input("x", {-1, 2});
  mb.node("Shape", {"x"}, {"shp"}, "shape_of_x");
  auto* cast = mb.node("Cast", {"shp"}, {"y"});
  addAttrInt(cast, "to", ::onnx::TensorProto::FLOAT);
  mb.output("y");
  auto m = mb.import();
  ASSERT_FALSE(m.isOk());
  EXPECT_NE(m.status().message().find("symbolic dimensions is used as data"), std::string::npos)
      << m.status().message();
}

TEST(OnnxImport, OpsetSelectsSoftmaxSemantics) {
  // Softmax over axis 1 of [1,2,2]: opset 11 normalises over the flattened [2*2] tail, opset 13
  // over axis 1 alone. Input all zeros: opset 11 gives 1/4 everywhere, opset 13 gives 1/2.
  for (int opset : {11, 13}) {
    ModelBuilder mb(opset);
    mb.input("x", {1, 2, 2});
    auto* n = mb.node("Softmax", {"x"}, {"y"});
    addAttrInt(n, "axis", 1);
    mb.output("y");
    auto m = mb.import();
    ASSERT_TRUE(m.isOk()) << m.status().message();
    auto out = run(**m, {f32({1, 2, 2}, {0, 0, 0, 0})});
    float want = opset == 11 ? 0.25f : 0.5f;
    for (float v : values(out[0])) EXPECT_FLOAT_EQ(v, want) << "opset " << opset;
  }
}

TEST(OnnxImport, BoundInputBecomesConstantOnlyWhereNeeded) {
  ModelBuilder mb;
  mb.input("x", {2, 3});
  mb.input("shape", {2}, ::onnx::TensorProto::INT64);
  mb.node("Reshape", {"x", "shape"}, {"y"});
  mb.output("y");
  // Without a value the target shape is unknowable while importing.
  auto bad = mb.import();
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find("must be known while importing"), std::string::npos)
      << bad.status().message();
  ko::ImportOptions o;
  Tensor s(DType::I64, {2});
  s.setInt(0, 3);
  s.setInt(1, -1);
  o.inputValues["shape"] = s;
  o.inputValues["x"] = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  auto m = mb.import(".", o);
  ASSERT_TRUE(m.isOk()) << m.status().message();
  kiln::Function* f = (*m)->entry();
  ASSERT_EQ(f->numParameters(), 1u);  // x stays a parameter; shape became a constant
  EXPECT_EQ(f->parameter(0)->name(), "x");
  EXPECT_EQ(f->outputs()[0]->type().str(), "f32[3,2]");
}

TEST(OnnxImport, ModelLocalFunctionExpands) {
  ModelBuilder mb;
  auto* op = mb.m.add_opset_import();
  op->set_domain("my.domain");
  op->set_version(1);
  auto* fn = mb.m.add_functions();
  fn->set_name("Twice");
  fn->set_domain("my.domain");
  fn->add_input("a");
  fn->add_output("b");
  auto* fo = fn->add_opset_import();
  fo->set_domain("");
  fo->set_version(13);
  auto* inner = fn->add_node();
  inner->set_op_type("Add");
  inner->add_input("a");
  inner->add_input("a");
  inner->add_output("b");
  mb.input("x", {2});
  auto* call = mb.node("Twice", {"x"}, {"y"});
  call->set_domain("my.domain");
  mb.output("y");
  auto m = mb.import();
  ASSERT_TRUE(m.isOk()) << m.status().message();
  auto out = run(**m, {f32({2}, {1.5f, -4})});
  EXPECT_EQ(values(out[0]), (std::vector<float>{3, -8}));
}

TEST(OnnxImport, LoopWithConstantTripCountUnrolls) {
  // y = x; 3 times: y = y * 2, scan output y. Final 8x, scans 2x, 4x, 8x.
  ModelBuilder mb;
  mb.input("x", {2});
  mb.i64Init("trips", {3});
  auto* t = mb.g->mutable_initializer(0);
  t->clear_dims();  // a scalar trip count
  auto* loop = mb.node("Loop", {"trips", "", "x"}, {"y", "ys"}, "loop");
  auto* a = loop->add_attribute();
  a->set_name("body");
  a->set_type(::onnx::AttributeProto::GRAPH);
  ::onnx::GraphProto* body = a->mutable_g();
  body->set_name("body");
  for (const char* n : {"i", "c", "v"}) body->add_input()->set_name(n);
  auto* two = body->add_initializer();
  two->set_name("two");
  two->set_data_type(::onnx::TensorProto::FLOAT);
  two->add_float_data(2.0f);
  auto* id = body->add_node();
  id->set_op_type("Identity");
  id->add_input("c");
  id->add_output("c_out");
  auto* mul = body->add_node();
  mul->set_op_type("Mul");
  mul->add_input("v");
  mul->add_input("two");
  mul->add_output("v_out");
  auto* copy = body->add_node();
  copy->set_op_type("Identity");
  copy->add_input("v_out");
  copy->add_output("scan");
  for (const char* n : {"c_out", "v_out", "scan"}) body->add_output()->set_name(n);
  mb.output("y");
  mb.output("ys");
  auto m = mb.import();
  ASSERT_TRUE(m.isOk()) << m.status().message();
  EXPECT_EQ((*m)->entry()->outputs()[1]->type().str(), "f32[3,2]");
  auto out = run(**m, {f32({2}, {1, -0.5f})});
  EXPECT_EQ(values(out[0]), (std::vector<float>{8, -4}));
  EXPECT_EQ(values(out[1]), (std::vector<float>{2, -1, 4, -2, 8, -4}));
}

TEST(OnnxImport, IfWithRunTimeConditionIsUnsupported) {
  ModelBuilder mb;
  mb.input("c", {}, ::onnx::TensorProto::BOOL);
  auto* n = mb.node("If", {"c"}, {"y"}, "branch");
  for (const char* b : {"then_branch", "else_branch"}) {
    auto* a = n->add_attribute();
    a->set_name(b);
    a->set_type(::onnx::AttributeProto::GRAPH);
    a->mutable_g()->set_name(b);
  }
  mb.output("y");
  auto m = mb.import();
  ASSERT_FALSE(m.isOk());
  EXPECT_NE(m.status().message().find("node 'branch' (ai.onnx::If, opset 13): the condition is "
                                      "computed at run time"),
            std::string::npos)
      << m.status().message();
}

TEST(OnnxImport, DimValuesMakeSymbolsStatic) {
  ModelBuilder mb;
  mb.input("x", {-1, 4}, ::onnx::TensorProto::FLOAT, "batch");
  mb.node("Shape", {"x"}, {"s"});
  mb.i64Init("four", {4});
  mb.node("Mul", {"s", "four"}, {"t"});  // shape arithmetic: [batch*4, 16]
  mb.i64Init("one", {1});
  auto* sl = mb.node("Slice", {"t", "zero", "one"}, {"n"});
  (void)sl;
  mb.i64Init("zero", {0});
  mb.i64Init("m1", {-1});
  auto* cat = mb.node("Concat", {"n", "m1"}, {"target"});
  addAttrInt(cat, "axis", 0);
  mb.node("Reshape", {"x", "target"}, {"y"});
  mb.output("y");
  // The product stays symbolic: target [4*batch, -1] of x [batch, 4] is [4*batch, 1].
  auto symbolic = mb.import();
  ASSERT_TRUE(symbolic.isOk()) << symbolic.status().message();
  EXPECT_EQ((*symbolic)->entry()->outputs()[0]->type().str(), "f32[4*batch,1]");
  ko::ImportOptions o;
  o.dimValues["batch"] = 2;  // target [8, -1]: 8 elements of x [2,4] -> [8, 1]
  auto m = mb.import(".", o);
  ASSERT_TRUE(m.isOk()) << m.status().message();
  EXPECT_EQ((*m)->entry()->outputs()[0]->type().str(), "f32[8,1]");
}

TEST(OnnxImport, ClassTokenAndExpandKeepTheBatch) {
  // ViT's x[:, 0] of [B, 3, 2] (a slice and a reshape, not a gather over B) and torch's
  // cls.expand(B, -1, -1): Where(Equal(shape, -1), 1, shape), decided for every size of B.
  ModelBuilder mb;
  mb.input("x", {-1, 3, 2}, ::onnx::TensorProto::FLOAT, "B");
  mb.floatInit("cls", {1, 1, 2}, {7, 8});
  auto* zero = mb.g->add_initializer();  // a rank-0 index
  zero->set_name("first");
  zero->set_data_type(::onnx::TensorProto::INT64);
  zero->add_int64_data(0);
  mb.i64Init("zero", {0});
  mb.i64Init("m1", {-1});
  mb.i64Init("m1x3", {-1, -1, -1});
  mb.i64Init("ones", {1, 1, 1});
  auto* g = mb.node("Gather", {"x", "first"}, {"token"});
  addAttrInt(g, "axis", 1);
  mb.node("Shape", {"x"}, {"xs"});
  mb.node("Gather", {"xs", "zero"}, {"b"});
  auto* cat = mb.node("Concat", {"b", "m1", "m1"}, {"target"});
  addAttrInt(cat, "axis", 0);
  mb.node("Equal", {"target", "m1x3"}, {"keep"});
  mb.node("Where", {"keep", "ones", "target"}, {"shape"});
  mb.node("Expand", {"cls", "shape"}, {"tokens"});
  mb.output("token");
  mb.output("tokens");
  auto m = mb.import();
  ASSERT_TRUE(m.isOk()) << m.status().message();
  const auto& outs = (*m)->entry()->outputs();
  EXPECT_EQ(outs[0]->type().str(), "f32[B,2]");
  EXPECT_EQ(outs[1]->type().str(), "f32[B,1,2]");
  std::vector<Tensor> in{f32({2, 3, 2}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11})};
  auto r = kiln::interpret(*(*m)->entry(), in);
  ASSERT_TRUE(r.isOk()) << r.status().str();
  EXPECT_EQ(values((*r)[0]), std::vector<float>({0, 1, 6, 7}));
  EXPECT_EQ(values((*r)[1]), std::vector<float>({7, 8, 7, 8}));
}

TEST(OnnxImport, SumsOfSymbolicDimsAreRefused) {
  // batch + 1 is no product of dims: the error names the symbol and the way out.
  ModelBuilder mb;
  mb.input("x", {-1, 4}, ::onnx::TensorProto::FLOAT, "batch");
  mb.node("Shape", {"x"}, {"s"});
  mb.i64Init("one", {1});
  mb.node("Add", {"s", "one"}, {"t"});
  mb.node("Reshape", {"x", "t"}, {"y"});
  mb.output("y");
  auto bad = mb.import();
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find("from symbolic dimension 'batch', and only products and "
                                        "exact quotients"),
            std::string::npos)
      << bad.status().message();
}

TEST(OnnxImport, HeadReshapesKeepProductsOfSymbols) {
  // Attention's head split as torch exports it: x [B, 8] becomes [4*B, 2] by Shape -> Gather -> Mul
  // -> Concat -> Reshape, then [B, -1] again, and the first S rows of a table come from Slice with
  // an end read off x's shape.
  ModelBuilder mb;
  mb.input("x", {-1, 8}, ::onnx::TensorProto::FLOAT, "B");
  mb.input("ids", {1, -1}, ::onnx::TensorProto::INT64, "S");
  mb.floatInit("table", {6, 2}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  mb.i64Init("zero", {0});
  mb.i64Init("one", {1});
  mb.i64Init("four", {4});
  mb.i64Init("two", {2});
  mb.i64Init("m1", {-1});
  mb.node("Shape", {"x"}, {"xs"});
  mb.node("Gather", {"xs", "zero"}, {"b"});
  mb.node("Mul", {"b", "four"}, {"b4"});
  auto* cat = mb.node("Concat", {"b4", "two"}, {"heads"});
  addAttrInt(cat, "axis", 0);
  mb.node("Reshape", {"x", "heads"}, {"h"});
  auto* back = mb.node("Concat", {"b", "m1"}, {"whole"});
  addAttrInt(back, "axis", 0);
  mb.node("Reshape", {"h", "whole"}, {"y"});
  mb.node("Shape", {"ids"}, {"is"});
  mb.node("Gather", {"is", "one"}, {"s"});
  mb.node("Slice", {"table", "zero", "s"}, {"rows"});
  mb.output("h");
  mb.output("y");
  mb.output("rows");
  auto m = mb.import();
  ASSERT_TRUE(m.isOk()) << m.status().message();
  const auto& outs = (*m)->entry()->outputs();
  EXPECT_EQ(outs[0]->type().str(), "f32[4*B,2]");
  EXPECT_EQ(outs[1]->type().str(), "f32[B,8]");
  EXPECT_EQ(outs[2]->type().str(), "f32[S,2]");
  std::vector<float> xv(24);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>(i);
  Tensor ids(DType::I64, {1, 4});
  std::vector<Tensor> in{f32({3, 8}, xv), ids};
  auto r = kiln::interpret(*(*m)->entry(), in);
  ASSERT_TRUE(r.isOk()) << r.status().str();
  EXPECT_EQ((*r)[0].type().str(), "f32[12,2]");
  EXPECT_EQ(values((*r)[1]), xv);
  EXPECT_EQ(values((*r)[2]), std::vector<float>({0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(OnnxImport, TypedFieldsFloat16AndInt64) {
  ModelBuilder mb;
  auto* h = mb.g->add_initializer();
  h->set_name("h");
  h->set_data_type(::onnx::TensorProto::FLOAT16);
  h->add_dims(2);
  h->add_int32_data(0x3c00);  // 1.0 in IEEE half
  h->add_int32_data(0xc000);  // -2.0
  mb.i64Init("i", {7, -9});
  mb.output("h");
  mb.output("i");
  auto m = mb.import();
  ASSERT_TRUE(m.isOk()) << m.status().message();
  auto out = run(**m, {});
  EXPECT_EQ(out[0].dtype(), DType::F16);
  EXPECT_EQ(values(out[0]), (std::vector<float>{1, -2}));
  EXPECT_EQ(out[1].getInt(0), 7);
  EXPECT_EQ(out[1].getInt(1), -9);
}

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            ("kiln_onnx_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
  static inline int counter_ = 0;
};

void writeFile(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

::onnx::TensorProto* externalInit(ModelBuilder& mb, const std::string& location, int64_t offset,
                                  int64_t n) {
  auto* t = mb.g->add_initializer();
  t->set_name("w");
  t->set_data_type(::onnx::TensorProto::FLOAT);
  t->add_dims(n);
  t->set_data_location(::onnx::TensorProto::EXTERNAL);
  auto add = [&](const char* k, const std::string& v) {
    auto* e = t->add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  add("location", location);
  add("offset", std::to_string(offset));
  add("length", std::to_string(n * 4));
  return t;
}

TEST(OnnxImport, ExternalDataIsReadRelativeToTheModel) {
  TempDir dir;
  std::vector<float> data{9, 1.5f, -2, 4};  // the tensor is the last three, at offset 4
  writeFile(dir.path() / "weights.bin",
            std::string(reinterpret_cast<const char*>(data.data()), 16));
  ModelBuilder mb;
  externalInit(mb, "weights.bin", 4, 3);
  mb.output("w");
  writeFile(dir.path() / "model.onnx", mb.bytes());
  auto m = ko::importModelFile((dir.path() / "model.onnx").string());
  ASSERT_TRUE(m.isOk()) << m.status().message();
  auto out = run(**m, {});
  EXPECT_EQ(values(out[0]), (std::vector<float>{1.5f, -2, 4}));
}

TEST(OnnxImport, ExternalDataErrors) {
  TempDir dir;
  writeFile(dir.path() / "weights.bin", std::string(8, '\0'));
  {
    ModelBuilder mb;
    externalInit(mb, "../weights.bin", 0, 2);
    mb.output("w");
    auto m = mb.import(dir.path().string());
    ASSERT_FALSE(m.isOk());
    EXPECT_NE(m.status().message().find("leaves the model's folder"), std::string::npos)
        << m.status().message();
  }
  {
    ModelBuilder mb;
    externalInit(mb, "weights.bin", 4, 2);  // bytes [4, 12) of an 8-byte file
    mb.output("w");
    auto m = mb.import(dir.path().string());
    ASSERT_FALSE(m.isOk());
    EXPECT_NE(m.status().message().find("beyond the end"), std::string::npos)
        << m.status().message();
    EXPECT_NE(m.status().message().find("initializer 'w'"), std::string::npos);
  }
}

TEST(OnnxImport, ExternalDataThroughALinkOutOfTheFolderIsRefused) {
  TempDir dir;
  const fs::path folder = dir.path() / "model", elsewhere = dir.path() / "elsewhere";
  fs::create_directories(folder);
  fs::create_directories(elsewhere);
  std::vector<float> secret{1.5f, -2}, weights{3, 4};
  writeFile(elsewhere / "secret.bin", std::string(reinterpret_cast<const char*>(secret.data()), 8));
  writeFile(folder / "weights.bin", std::string(reinterpret_cast<const char*>(weights.data()), 8));
  fs::create_symlink(elsewhere / "secret.bin", folder / "link.bin");
  fs::create_directory_symlink(elsewhere, folder / "sub");
  fs::create_symlink("weights.bin", folder / "inside.bin");
  fs::create_directory_symlink(folder, dir.path() / "alias");
  auto importFrom = [&](const fs::path& base, const std::string& location) {
    ModelBuilder mb;
    externalInit(mb, location, 0, 2);
    mb.output("w");
    return mb.import(base.string());
  };
  const std::string real = fs::canonical(elsewhere / "secret.bin").string();
  for (const std::string location : {"link.bin", "sub/secret.bin"}) {
    auto m = importFrom(folder, location);
    ASSERT_FALSE(m.isOk()) << location;
    EXPECT_NE(m.status().message().find(
                  "initializer 'w': external data location '" + location + "' resolves to '" +
                  real + "', outside the model's folder '" + fs::canonical(folder).string() + "'"),
              std::string::npos)
        << m.status().message();
  }
  // Links that stay inside the folder are followed, also when the folder is reached by one.
  for (const fs::path& base : {folder, dir.path() / "alias"}) {
    auto m = importFrom(base, "inside.bin");
    ASSERT_TRUE(m.isOk()) << m.status().message();
    EXPECT_EQ(values(run(**m, {})[0]), weights);
  }
}

TEST(OnnxImport, CorruptAndTruncatedBytesAreRejected) {
  auto bad = ko::importModelBytes(std::string("\xff\xff\xff\xff garbage", 13), ".");
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find("not a valid ONNX model"), std::string::npos);
  ModelBuilder mb;
  mb.input("x", {2});
  mb.floatInit("b", {64}, std::vector<float>(64, 1.0f));
  mb.node("Neg", {"x"}, {"y"});
  mb.output("y");
  std::string full = mb.bytes();
  auto cut = ko::importModelBytes(full.substr(0, full.size() / 2), ".");
  EXPECT_FALSE(cut.isOk());
}

TEST(OnnxImport, CycleIsReported) {
  ModelBuilder mb;
  mb.input("x", {2});
  mb.node("Add", {"x", "b"}, {"a"}, "first");
  mb.node("Neg", {"a"}, {"b"}, "second");
  mb.output("b");
  auto m = mb.import();
  ASSERT_FALSE(m.isOk());
  EXPECT_NE(m.status().message().find("graph 'g': cycle through nodes 'first', 'second'"),
            std::string::npos)
      << m.status().message();
}

TEST(OnnxImport, UndefinedInputIsReported) {
  ModelBuilder mb;
  mb.input("x", {2});
  mb.node("Add", {"x", "nowhere"}, {"y"});
  mb.output("y");
  auto m = mb.import();
  ASSERT_FALSE(m.isOk());
  EXPECT_NE(m.status().message().find("node 'Add_0'"), std::string::npos) << m.status().message();
  EXPECT_NE(m.status().message().find("'nowhere' is not produced"), std::string::npos);
}

TEST(OnnxImport, DataLengthMismatchNamesTheTensor) {
  ModelBuilder mb;
  auto* t = mb.floatInit("weights", {3}, {1, 2});  // 8 bytes for 3 floats
  (void)t;
  mb.output("weights");
  auto m = mb.import();
  ASSERT_FALSE(m.isOk());
  EXPECT_NE(m.status().message().find("initializer 'weights'"), std::string::npos);
  EXPECT_NE(m.status().message().find("raw_data has 8 bytes"), std::string::npos)
      << m.status().message();
}

TEST(OnnxImport, AbsurdDimsFailBeforeAllocating) {
  ModelBuilder mb;
  auto* t = mb.g->add_initializer();
  t->set_name("huge");
  t->set_data_type(::onnx::TensorProto::FLOAT);
  t->add_dims(1000000);
  t->add_dims(1000000);  // 1e12 elements, 4 TB
  t->set_raw_data("abcd");
  mb.output("huge");
  auto m = mb.import();
  ASSERT_FALSE(m.isOk());
  EXPECT_NE(m.status().message().find("initializer 'huge'"), std::string::npos)
      << m.status().message();
}

TEST(OnnxImport, UnknownDomainAndCheckListsEverything) {
  ModelBuilder mb;
  mb.input("x", {2});
  mb.input("s", {2}, ::onnx::TensorProto::COMPLEX64);
  auto* n = mb.node("Frobnicate", {"x"}, {"y"}, "frob");
  n->set_domain("com.example");
  mb.node("NoSuchOp", {"x"}, {"z"}, "nosuch");
  mb.node("Neg", {"y"}, {"w"}, "after");  // its input comes from a failed node
  mb.output("w");
  mb.output("z");
  auto m = mb.import();
  ASSERT_FALSE(m.isOk());
  auto list = ko::checkModelBytes(mb.bytes(), ".");
  ASSERT_TRUE(list.isOk()) << list.status().message();
  ASSERT_EQ(list->size(), 3u);
  EXPECT_EQ((*list)[0].node, "graph input 's'");
  EXPECT_NE((*list)[0].reason.find("COMPLEX64"), std::string::npos);
  EXPECT_EQ((*list)[1].node, "frob");
  EXPECT_EQ((*list)[1].opType, "com.example::Frobnicate");
  EXPECT_NE((*list)[1].reason.find("domain 'com.example' is not supported"), std::string::npos);
  EXPECT_EQ((*list)[2].node, "nosuch");
  EXPECT_NE((*list)[2].reason.find("op not supported"), std::string::npos);
}

TEST(OnnxImport, CheckOfASupportedModelIsEmpty) {
  ModelBuilder mb;
  mb.input("x", {2, 2});
  mb.node("MatMul", {"x", "x"}, {"y"});
  mb.output("y");
  auto list = ko::checkModelBytes(mb.bytes(), ".");
  ASSERT_TRUE(list.isOk());
  EXPECT_TRUE(list->empty());
}

TEST(OnnxImport, UnsupportedAttributeValueIsNamed) {
  ModelBuilder mb;
  mb.input("x", {1, 1, 4});
  auto* n = mb.node("Pad", {"x", "pads"}, {"y"}, "pad");
  mb.i64Init("pads", {0, 0, 1, 0, 0, 1});
  auto* a = n->add_attribute();
  a->set_name("mode");
  a->set_type(::onnx::AttributeProto::STRING);
  a->set_s("wrap");
  mb.output("y");
  auto m = mb.import();
  ASSERT_FALSE(m.isOk());
  EXPECT_NE(m.status().message().find("pad mode 'wrap'"), std::string::npos)
      << m.status().message();
}

TEST(OnnxImport, ReadTensorProtoFile) {
  TempDir dir;
  ::onnx::TensorProto t;
  t.set_data_type(::onnx::TensorProto::INT32);
  t.add_dims(2);
  t.add_dims(1);
  t.add_int32_data(-5);
  t.add_int32_data(12);
  writeFile(dir.path() / "t.pb", t.SerializeAsString());
  auto r = ko::readTensorProtoFile((dir.path() / "t.pb").string());
  ASSERT_TRUE(r.isOk()) << r.status().message();
  EXPECT_EQ(r->type().str(), "i32[2,1]");
  EXPECT_EQ(r->getInt(0), -5);
  EXPECT_EQ(r->getInt(1), 12);
  auto missing = ko::readTensorProtoFile((dir.path() / "none.pb").string());
  EXPECT_FALSE(missing.isOk());
}

// ---- Sequences (resolved while importing) ----

void i64Scalar(ModelBuilder& mb, const std::string& name, int64_t v) {
  auto* t = mb.g->add_initializer();
  t->set_name(name);
  t->set_data_type(::onnx::TensorProto::INT64);
  t->add_int64_data(v);
}

TEST(OnnxImport, SequenceConstructAndAt) {
  ModelBuilder mb(12);
  for (const char* n : {"a", "b", "c"}) mb.input(n, {2});
  i64Scalar(mb, "last", -1);
  i64Scalar(mb, "one", 1);
  mb.node("SequenceConstruct", {"a", "b", "c"}, {"seq"});
  mb.node("SequenceAt", {"seq", "last"}, {"y0"});
  mb.node("SequenceAt", {"seq", "one"}, {"y1"});
  mb.output("y0");
  mb.output("y1");
  auto m = mb.import();
  ASSERT_TRUE(m.isOk()) << m.status().message();
  auto out = run(**m, {f32({2}, {1, 2}), f32({2}, {3, 4}), f32({2}, {5, 6})});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(values(out[0]), (std::vector<float>{5, 6}));
  EXPECT_EQ(values(out[1]), (std::vector<float>{3, 4}));
}

TEST(OnnxImport, SequenceInsertEraseNegativePositionsAndLength) {
  ModelBuilder mb(12);
  for (const char* n : {"a", "b", "c"}) mb.input(n, {1});
  i64Scalar(mb, "m1", -1);
  i64Scalar(mb, "m3", -3);
  i64Scalar(mb, "zero", 0);
  mb.node("SequenceConstruct", {"a", "b"}, {"s1"});      // [a, b]
  mb.node("SequenceInsert", {"s1", "c", "m1"}, {"s2"});  // [a, c, b]
  mb.node("SequenceErase", {"s2", "m3"}, {"s3"});        // [c, b]
  mb.node("SequenceInsert", {"s3", "a"}, {"s4"});        // [c, b, a]
  mb.node("SequenceErase", {"s4"}, {"s5"});              // [c, b]
  mb.node("SequenceAt", {"s5", "zero"}, {"y0"});
  mb.node("SequenceAt", {"s5", "m1"}, {"y1"});
  mb.node("SequenceLength", {"s4"}, {"n"});
  mb.output("y0");
  mb.output("y1");
  mb.output("n");
  auto m = mb.import();
  ASSERT_TRUE(m.isOk()) << m.status().message();
  EXPECT_EQ((*m)->entry()->outputs()[2]->type().str(), "i64[]");
  auto out = run(**m, {f32({1}, {1}), f32({1}, {2}), f32({1}, {3})});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(values(out[0]), (std::vector<float>{3}));
  EXPECT_EQ(values(out[1]), (std::vector<float>{2}));
  EXPECT_EQ(out[2].getInt(0), 3);

  // Position 3 in a sequence of 2 is out of range for SequenceInsert ([-2, 2]).
  ModelBuilder bad(12);
  for (const char* n : {"a", "b"}) bad.input(n, {1});
  i64Scalar(bad, "three", 3);
  bad.node("SequenceConstruct", {"a", "b"}, {"s"});
  bad.node("SequenceInsert", {"s", "a", "three"}, {"s2"}, "ins");
  bad.node("SequenceAt", {"s2", "three"}, {"y"});
  bad.output("y");
  auto r = bad.import();
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("node 'ins' (ai.onnx::SequenceInsert, opset 12): sequence "
                                      "position 3 is out of range for a sequence of 2 elements"),
            std::string::npos)
      << r.status().message();
}

TEST(OnnxImport, ConcatFromSequenceWithNewAxis) {
  ModelBuilder mb(12);
  mb.input("a", {2});
  mb.input("b", {2});
  mb.node("SequenceConstruct", {"a", "b"}, {"seq"});
  auto* stacked = mb.node("ConcatFromSequence", {"seq"}, {"y"});
  addAttrInt(stacked, "axis", -1);
  addAttrInt(stacked, "new_axis", 1);
  auto* flat = mb.node("ConcatFromSequence", {"seq"}, {"z"});
  addAttrInt(flat, "axis", 0);
  mb.output("y");
  mb.output("z");
  auto m = mb.import();
  ASSERT_TRUE(m.isOk()) << m.status().message();
  EXPECT_EQ((*m)->entry()->outputs()[0]->type().str(), "f32[2,2]");
  EXPECT_EQ((*m)->entry()->outputs()[1]->type().str(), "f32[4]");
  auto out = run(**m, {f32({2}, {1, 2}), f32({2}, {3, 4})});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(values(out[0]), (std::vector<float>{1, 3, 2, 4}));
  EXPECT_EQ(values(out[1]), (std::vector<float>{1, 2, 3, 4}));
}

TEST(OnnxImport, SplitToSequenceWithScalarSplit) {
  ModelBuilder mb(12);
  mb.input("x", {5, 2});
  i64Scalar(mb, "two", 2);
  i64Scalar(mb, "last", -1);
  mb.node("SplitToSequence", {"x", "two"}, {"seq"});  // rows [0,2), [2,4), [4,5)
  mb.node("SequenceLength", {"seq"}, {"n"});
  mb.node("SequenceAt", {"seq", "last"}, {"tail"});
  auto* back = mb.node("ConcatFromSequence", {"seq"}, {"whole"});
  addAttrInt(back, "axis", 0);
  mb.output("n");
  mb.output("tail");
  mb.output("whole");
  auto m = mb.import();
  ASSERT_TRUE(m.isOk()) << m.status().message();
  EXPECT_EQ((*m)->entry()->outputs()[1]->type().str(), "f32[1,2]");
  std::vector<float> xs{0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  auto out = run(**m, {f32({5, 2}, xs)});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].getInt(0), 3);
  EXPECT_EQ(values(out[1]), (std::vector<float>{8, 9}));
  EXPECT_EQ(values(out[2]), xs);
}

TEST(OnnxImport, SequencePositionComputedAtRunTimeIsUnsupported) {
  ModelBuilder mb(12);
  mb.input("a", {2});
  mb.input("pos", {}, ::onnx::TensorProto::INT64);
  mb.node("SequenceConstruct", {"a", "a"}, {"seq"});
  mb.node("SequenceAt", {"seq", "pos"}, {"y"}, "at");
  mb.node("SequenceConstruct", {"a"}, {"s"}, "single");
  mb.output("y");
  mb.output("s");
  auto m = mb.import();
  ASSERT_FALSE(m.isOk());
  EXPECT_NE(m.status().message().find("node 'at' (ai.onnx::SequenceAt, opset 12): input 'pos' "
                                      "(the sequence position) must be known while importing, "
                                      "but it is computed at run time from graph input 'pos'"),
            std::string::npos)
      << m.status().message();
  // Check mode lists the same problem, and the sequence graph output.
  auto list = ko::checkModelBytes(mb.bytes(), ".");
  ASSERT_TRUE(list.isOk()) << list.status().message();
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].node, "at");
  EXPECT_NE((*list)[0].reason.find("(the sequence position) must be known while importing"),
            std::string::npos)
      << (*list)[0].reason;
  EXPECT_EQ((*list)[1].node, "graph output 's'");
  EXPECT_NE((*list)[1].reason.find("a sequence must be known while importing"), std::string::npos)
      << (*list)[1].reason;
  // With the position given, the import resolves it (the sequence output still fails).
  ko::ImportOptions o;
  Tensor p(DType::I64, {});
  p.setInt(0, -2);
  o.inputValues["pos"] = p;
  auto bound = mb.import(".", o);
  ASSERT_FALSE(bound.isOk());
  EXPECT_NE(bound.status().message().find("sequence graph outputs are not supported"),
            std::string::npos)
      << bound.status().message();
}

}  // namespace
