// The target registry (runtime/target.h): the targets this build has are found by name (the
// tests register them here, as the tools and APIs do), an unknown name is an error that lists
// them, and a target the build left out says why.
#include <gtest/gtest.h>

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
#ifdef KILN_HAVE_CPU
  auto cpu = findTarget("cpu");
  ASSERT_TRUE(cpu.isOk()) << cpu.status().str();
  EXPECT_EQ((*cpu)->name(), "cpu");
  EXPECT_FALSE((*cpu)->machine().empty());
  EXPECT_EQ(targetNames(), std::vector<std::string>{"cpu"});
#else
  auto cpu = findTarget("cpu");
  ASSERT_FALSE(cpu.isOk());
  EXPECT_NE(cpu.status().message().find("this build of Kiln has no 'cpu' target ("),
            std::string::npos)
      << cpu.status().str();
#endif
  auto unknown = findTarget("tpu");
  ASSERT_FALSE(unknown.isOk());
  EXPECT_NE(unknown.status().message().find("unknown backend 'tpu' (this build's targets: "),
            std::string::npos)
      << unknown.status().str();
}

}  // namespace
}  // namespace kiln::runtime
