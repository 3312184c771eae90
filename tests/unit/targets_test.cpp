// The target registry (runtime/target.h): the targets this build has are found by name (the
// tests register them here, as the tools and APIs do), an unknown name is an error that lists
// them, and a target the build left out says why.
#include <gtest/gtest.h>

#include "interp/interpreter.h"
#include "ir/text/text.h"
#include "runtime/executable.h"
#include "runtime/target.h"

namespace kiln::runtime {
namespace {

// Every test of this binary may compile: register the build's targets before any runs.
const bool kRegistered = [] {
  registerBuiltinTargets();
  return true;
}();

TEST(Targets, FoundByName) {
  ASSERT_TRUE(kRegistered);
#ifdef KILN_HAVE_CUDA
  const std::vector<std::string> others{"cuda", "interp"};  // the targets besides cpu
  const std::string othersText = "cuda, interp";
#else
  const std::vector<std::string> others{"interp"};
  const std::string othersText = "interp";
#endif
#ifdef KILN_HAVE_CPU
  auto cpu = findTarget("cpu");
  ASSERT_TRUE(cpu.isOk()) << cpu.status().str();
  EXPECT_EQ((*cpu)->name(), "cpu");
  EXPECT_FALSE((*cpu)->machine().empty());
  std::vector<std::string> all{"cpu"};
  all.insert(all.end(), others.begin(), others.end());
  EXPECT_EQ(targetNames(), all);
#else
  auto cpu = findTarget("cpu");
  ASSERT_FALSE(cpu.isOk());
  EXPECT_NE(cpu.status().message().find("this build of Kiln has no 'cpu' target ("),
            std::string::npos)
      << cpu.status().str();
  EXPECT_NE(cpu.status().message().find("; its targets: " + othersText), std::string::npos)
      << cpu.status().str();
  EXPECT_EQ(targetNames(), others);
#endif
  auto unknown = findTarget("tpu");
  ASSERT_FALSE(unknown.isOk());
  EXPECT_NE(unknown.status().message().find("unknown backend 'tpu' (this build's targets: "),
            std::string::npos)
      << unknown.status().str();
}

// The interp target behind an Executable: the same values as the interpreter, and an artifact
// that loads and runs (in every build, with or without a code-generating target).
TEST(Targets, InterpreterAsATarget) {
  const char* text = R"(
func @main(%x: f32[2,3], %y: f32[2,3]) -> (f32[2,3]) {
  %s = f32[2,3] add(%x, %y)
  %t = f32[2,3] tanh(%s)
  return %t
})";
  Tensor x(DType::F32, {2, 3}), y(DType::F32, {2, 3});
  for (int64_t i = 0; i < 6; ++i) {
    x.setDouble(i, 0.25 * static_cast<double>(i) - 0.5);
    y.setDouble(i, 1.0 - 0.5 * static_cast<double>(i));
  }
  std::vector<Tensor> inputs{x, y};
  auto module = parseModule(text, "t.kir");
  ASSERT_TRUE(module.isOk()) << module.status().str();
  auto want = interpret(*(*module)->entry(), inputs);
  ASSERT_TRUE(want.isOk()) << want.status().str();
  CompileOptions o;
  o.backend = "interp";
  auto exe = Executable::compile(std::move(*module), o);
  ASSERT_TRUE(exe.isOk()) << exe.status().str();
  EXPECT_EQ((*exe)->target().name(), "interp");
  auto again = Executable::load((*exe)->serialize(), "t.kiln");
  ASSERT_TRUE(again.isOk()) << again.status().str();
  for (const Executable* e : {exe->get(), again->get()}) {
    auto got = e->run(inputs);
    ASSERT_TRUE(got.isOk()) << got.status().str();
    // The interpreter's own arithmetic (the passes change nothing here): the same bits.
    for (int64_t i = 0; i < 6; ++i) EXPECT_EQ((*got)[0].getDouble(i), (*want)[0].getDouble(i)) << i;
    EXPECT_NE((*got)[0].getDouble(0), 0.0);
  }
  // Device pointers are for targets with a device: the interpreter runs on the host.
  std::vector<DeviceTensor> in = {{0x1000, x.type()}, {0x2000, y.type()}},
                            out = {{0x3000, x.type()}};
  Status onDevice = (*exe)->runOnDevice(in, out, 0);
  ASSERT_FALSE(onDevice.isOk());
  EXPECT_NE(onDevice.message().find("runs on the host"), std::string::npos) << onDevice.message();
  // Counts are checked before the target is asked.
  Status count = (*exe)->runOnDevice(std::span(in).first(1), out, 0);
  ASSERT_FALSE(count.isOk());
  EXPECT_NE(count.message().find("expected 2 inputs and 1 outputs, got 1 and 1"), std::string::npos)
      << count.message();
}

}  // namespace
}  // namespace kiln::runtime
