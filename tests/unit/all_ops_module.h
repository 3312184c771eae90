// The op table's test module (tests/lit/Inputs/all-ops.kir: every op in some function), its
// symbols specialised to `dims` as a compile does, for tests that walk every kind of kernel. Null
// (after a failed expectation) when it does not parse or specialise.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "ir/text/text.h"
#include "passes/pass_manager.h"
#include "passes/specialize_shapes.h"

namespace kiln {

inline std::unique_ptr<Module> allOpsModule(const SymbolBindings& dims) {
  std::ifstream in(std::string(KILN_SOURCE_DIR) + "/tests/lit/Inputs/all-ops.kir");
  std::stringstream text;
  text << in.rdbuf();
  auto module = parseModule(text.str(), "all-ops.kir");
  EXPECT_TRUE(module.isOk()) << module.status().str();
  if (!module) return nullptr;
  PassManager pm;
  Status specialized = pm.runPass(*makeSpecializeShapesPass(dims), **module).status();
  EXPECT_TRUE(specialized.isOk()) << specialized.str();
  return specialized ? std::move(*module) : nullptr;
}

}  // namespace kiln
