// Tests of splitting a model's large initializer payloads out of the message that protobuf parses
// (frontend/onnx/raw_data_split.h), and of importing a model file through it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include "frontend/onnx/import_options.h"
#include "frontend/onnx/raw_data_split.h"
#include "interp/interpreter.h"

namespace {

namespace fs = std::filesystem;
namespace ko = kiln::onnx;

std::string floatBytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

// A model whose output is the sum of three initializers of n floats: `big` in raw_data, `small`
// in raw_data of n bytes and `typed` in float_data. Values differ per initializer and element.
::onnx::ModelProto threeInitializers(int n) {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  auto* g = m.mutable_graph();
  std::vector<float> big(static_cast<size_t>(n)), typed(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) big[static_cast<size_t>(i)] = 0.5f * static_cast<float>(i);
  for (int i = 0; i < n; ++i) typed[static_cast<size_t>(i)] = -1.0f - static_cast<float>(i % 7);
  auto add = [&](const std::string& name) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(::onnx::TensorProto::FLOAT);
    t->add_dims(n);
    return t;
  };
  add("big")->set_raw_data(floatBytes(big));
  add("small")->set_raw_data(floatBytes(std::vector<float>(static_cast<size_t>(n), 3.0f)));
  auto* t = add("typed");
  for (float x : typed) t->add_float_data(x);
  auto* n1 = g->add_node();
  n1->set_op_type("Add");
  n1->add_input("big"), n1->add_input("small"), n1->add_output("s");
  auto* n2 = g->add_node();
  n2->set_op_type("Add");
  n2->add_input("s"), n2->add_input("typed"), n2->add_output("y");
  g->add_output()->set_name("y");
  return m;
}

TEST(OnnxRawDataSplit, CutsLargePayloadsAndKeepsTheRest) {
  ::onnx::ModelProto m = threeInitializers(4096);
  std::string bytes = m.SerializeAsString();
  // small's raw_data (16 KiB) is cut too at a threshold of 4 KiB; not at 32 KiB.
  auto split = ko::splitInitializerData(bytes, 4096);
  ASSERT_TRUE(split.has_value());
  ASSERT_EQ(split->raw.size(), 3u);
  ASSERT_TRUE(split->raw[0] && split->raw[1]);
  EXPECT_FALSE(split->raw[2]);
  EXPECT_EQ(*split->raw[0], m.graph().initializer(0).raw_data());
  EXPECT_EQ(*split->raw[1], m.graph().initializer(1).raw_data());
  ::onnx::ModelProto skeleton;
  ASSERT_TRUE(skeleton.ParseFromString(split->skeleton));
  // The skeleton is the model with those two fields cleared, byte for byte.
  m.mutable_graph()->mutable_initializer(0)->clear_raw_data();
  m.mutable_graph()->mutable_initializer(1)->clear_raw_data();
  EXPECT_EQ(skeleton.SerializeAsString(), m.SerializeAsString());

  auto kept = ko::splitInitializerData(bytes, 32 << 10);
  ASSERT_TRUE(kept.has_value());
  EXPECT_EQ(kept->skeleton, bytes);
  EXPECT_FALSE(kept->raw[0] || kept->raw[1] || kept->raw[2]);
}

TEST(OnnxRawDataSplit, MalformedBytesAreLeftToProtobuf) {
  std::string bytes = threeInitializers(2048).SerializeAsString();
  EXPECT_FALSE(ko::splitInitializerData(bytes.substr(0, bytes.size() - 100), 4096));
  EXPECT_FALSE(ko::splitInitializerData(bytes + bytes, 4096));               // two graph fields
  EXPECT_FALSE(ko::splitInitializerData(std::string("\x0b\x00", 2), 4096));  // a group
  EXPECT_TRUE(ko::splitInitializerData("", 4096).has_value());
}

TEST(OnnxRawDataSplit, ImportedFileHasTheSameValuesAsTheBytes) {
  fs::path path = fs::temp_directory_path() / ("kiln_split_" + std::to_string(::getpid()));
  std::string bytes = threeInitializers(5000).SerializeAsString();
  {
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  auto fromFile = ko::importModelFile(path.string());
  auto fromBytes = ko::importModelBytes(bytes, ".", {});
  fs::remove(path);
  ASSERT_TRUE(fromFile.isOk()) << fromFile.status().message();
  ASSERT_TRUE(fromBytes.isOk()) << fromBytes.status().message();
  auto a = kiln::interpret(*(*fromFile)->entry(), {});
  auto b = kiln::interpret(*(*fromBytes)->entry(), {});
  ASSERT_TRUE(a.isOk() && b.isOk());
  ASSERT_EQ(a->size(), 1u);
  EXPECT_TRUE((*a)[0].identical((*b)[0]));
  EXPECT_EQ((*a)[0].getDouble(4999), 0.5 * 4999 + 3.0 - 1.0 - 4999 % 7);
}

}  // namespace
