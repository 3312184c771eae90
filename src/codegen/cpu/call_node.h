// A library call of kernel IR as a node of its own small module, which the CPU's library kernels
// (onednn.h, rnn_kernel.h, inverted_residual.h) read: the call's op and attributes over operands
// of its buffers' types; an operand whose buffer holds a graph constant (Buffer::value) is that
// constant, sharing its data (or held, ConstantData::held), the others are parameters. The call
// is self-contained (kernel IR has no graph node), so a call parsed from text is made alike;
// only its constants then are parameters. Internal to the CPU target.
#pragma once

#include <memory>
#include <vector>

#include "codegen/cpu/onednn.h"
#include "ir/ir.h"
#include "kernel/kernel_ir.h"
#include "passes/specialize_shapes.h"
#include "support/status.h"

namespace kiln::codegen::cpu {

struct CallNode {
  std::shared_ptr<Module> module;
  const Node* node = nullptr;
  // The call's post-ops, each operand's shape at the sizes the node was made for.
  std::vector<kernel::PostOp> postOps;
};

// Call `call` of `k` as a node. `sizes`: the values of `k`'s symbols, for a call of symbolic
// sizes (an error names the dim without one); null for a static call. `constants`: false gives
// every operand as a parameter (the reference kernel, which reads the buffers).
StatusOr<CallNode> callNode(const kernel::Kernel& k, const kernel::Stmt& call,
                            const SymbolBindings* sizes = nullptr, bool constants = true);

// The graph constant the buffer of operand `i` of `call` holds, or null.
const Node* callConstant(const kernel::Kernel& k, const kernel::Stmt& call, size_t i);

// The arguments of `call` whose buffers hold their value in a blocked layout (Buffer::layout,
// which the CPU schedule set: choose_library_calls.h), and that layout.
struct StoredBlocked {
  std::vector<size_t> positions;
  std::string layout;
};
StoredBlocked storedBlocked(const kernel::Kernel& k, const kernel::Stmt& call);
// Tells library kernel `lk` which of its buffers are stored blocked (LibraryKernel::storeBlocked,
// called on every kernel with blockable buffers, with no positions where none is); an error
// where it cannot read and write them so (it computes in another layout, or on the IR's).
Status tellStoredBlocked(LibraryKernel& lk, const StoredBlocked& stored);

}  // namespace kiln::codegen::cpu
