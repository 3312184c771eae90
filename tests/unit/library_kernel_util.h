// Helpers of the library-kernel tests (onednn_test.cpp, pointwise_conv_kernel_test.cpp,
// panel_product_test.cpp): one op parsed from text, and a kernel run on tensors.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "codegen/cpu/onednn.h"
#include "ir/text/text.h"

namespace kiln::codegen::cpu {

// A parsed one-op function: the module and its dot_general or convolution node.
struct OneOp {
  std::unique_ptr<Module> module;
  const Node* node = nullptr;
};

// `func @main(params) -> (result) { [prelude] %y = result body; return %y }`, parsed.
inline OneOp parseOp(const std::string& params, const std::string& result, const std::string& body,
                     const std::string& prelude = "") {
  std::string text = "func @main(" + params + ") -> (" + result + ") {\n" + prelude +
                     "  %y = " + result + " " + body + "\n  return %y\n}\n";
  auto parsed = parseModule(text, "library_kernel_test.kir");
  EXPECT_TRUE(parsed.isOk()) << parsed.status().str() << "\n" << text;
  OneOp r;
  if (!parsed) return r;
  r.module = std::move(*parsed);
  for (const auto& n : r.module->entry()->nodes())
    if (n->op() == OpCode::DotGeneral || n->op() == OpCode::Convolution) r.node = n.get();
  EXPECT_NE(r.node, nullptr) << text;
  return r;
}

// Runs `k` on the node's operands `ops` and its post-ops' operands `postOpOperands` into a fresh
// result tensor.
inline Tensor runKernel(const LibraryKernel& k, const Node& n, const std::vector<Tensor>& ops,
                        const std::vector<Tensor>& postOpOperands = {}) {
  Tensor out(n.result()->type().dtype(), n.result()->type().staticDims());
  std::vector<void*> buffers;
  for (const Tensor& t : ops) buffers.push_back(const_cast<std::byte*>(t.bytes()));
  buffers.push_back(out.mutableBytes());
  for (const Tensor& t : postOpOperands) buffers.push_back(const_cast<std::byte*>(t.bytes()));
  Status s = k.run(buffers.data());
  EXPECT_TRUE(s.isOk()) << s.str();
  return out;
}

}  // namespace kiln::codegen::cpu
