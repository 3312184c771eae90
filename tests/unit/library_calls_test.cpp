// How the CPU runtime prepares library calls: the thread count of small matrix products.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ir/text/text.h"
#include "runtime/executable.h"

namespace kiln {
namespace {

using runtime::CompileOptions;
using runtime::Executable;

TEST(LibraryCalls, SmallProductsRunOnOneThreadExceptMatrixVectorProducts) {
  // Both products are under 1 MFLOP. The 32-row one does 32 multiply-adds per weight and keeps
  // one thread; the one-row one (a classifier's matrix-vector product) is bound by reading its
  // weights and takes every thread.
  auto m = parseModule(R"(
func @main(%x: f32[32,128], %v: f32[1,128], %w: f32[128,64]) -> (f32[32,64], f32[1,64]) {
  %y = f32[32,64] dot_general(%x, %w) {lhs_contracting = [1], rhs_contracting = [0]}
  %z = f32[1,64] dot_general(%v, %w) {lhs_contracting = [1], rhs_contracting = [0]}
  return %y, %z
})",
                       "small-products.kir");
  ASSERT_TRUE(m.isOk()) << m.status().str();
  CompileOptions options;
  options.threads = 2;
  auto exe = Executable::compile(std::move(*m), options);
  ASSERT_TRUE(exe.isOk()) << exe.status().str();
  std::string calls = (*exe)->libraryCallDetails();
  std::vector<std::string> lines;
  for (size_t at = 0, end; (end = calls.find('\n', at)) != std::string::npos; at = end + 1)
    lines.push_back(calls.substr(at, end - at));
  ASSERT_EQ(lines.size(), 2u) << calls;
  for (const std::string& line : lines) {
    bool oneThread = line.find("; one thread (a small product)") != std::string::npos;
    if (line.find("matmul (32x128x64") != std::string::npos) EXPECT_TRUE(oneThread) << line;
    else if (line.find("matmul (1x128x64") != std::string::npos) EXPECT_FALSE(oneThread) << line;
    else ADD_FAILURE() << "unexpected call: " << line;
  }
  // On a pool of one thread there is nothing to keep a call from.
  auto single = parseModule(
      "func @main(%x: f32[32,128], %w: f32[128,64]) -> (f32[32,64]) {\n"
      "  %y = f32[32,64] dot_general(%x, %w) {lhs_contracting = [1], rhs_contracting = [0]}\n"
      "  return %y\n}\n",
      "one.kir");
  ASSERT_TRUE(single.isOk());
  options.threads = 1;
  auto one = Executable::compile(std::move(*single), options);
  ASSERT_TRUE(one.isOk()) << one.status().str();
  EXPECT_EQ((*one)->libraryCallDetails().find("one thread"), std::string::npos)
      << (*one)->libraryCallDetails();
}

}  // namespace
}  // namespace kiln
