// Library calls of symbolic sizes (a program compiled over ranges: kernel IR's symbols). A
// oneDNN primitive has fixed shapes, so such a call's kernel is made for each run's sizes on its
// first use, as a node of those sizes (its constant operands shared, not copied), and kept by
// them: a size seen before costs a lookup. A convolution's kernel is also made at the ranges'
// top when the program is built (probe), so that the runtime can store the values between
// blocked convolutions in their blocked layout as a static program does: which buffers a
// convolution computes blocked, and in which layout, follows from its channels, window and the
// machine, not from the sizes; every later size's kernel is told the same (storeBlocked), and
// one that would differ is an error naming the call and the sizes. Internal to the CPU target.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "codegen/cpu/onednn.h"
#include "ir/ir.h"
#include "kernel/kernel_ir.h"
#include "passes/specialize_shapes.h"
#include "support/status.h"

namespace kiln::codegen::cpu {

// What a library kernel reads of call `s`: its op and attributes, its operands' and result's
// types, which constant each constant operand is, and its post-ops. Calls of one key compute
// alike, so they can share one kernel and one copy of its packed weights.
std::string callNodeKey(const kernel::Stmt& s);

class PerShapeCall {
 public:
  // The key under which calls of kernels share one PerShapeCall: callNodeKey, `kernel`'s
  // symbols (its sizes' key), the post-op operands' dims and `threads`. Empty for a
  // convolution: the layout plan stores per call which of its buffers hold blocked data.
  static std::string sharingKey(const kernel::Kernel& kernel, const kernel::Stmt& call,
                                int threads);
  // `call` of `kernel` (both outlive this), its kernels made for `threads`.
  PerShapeCall(const kernel::Kernel& kernel, const kernel::Stmt& call, int threads)
      : kernel_(kernel), call_(call), threads_(threads) {}
  // The kernel for these sizes of the kernel's symbols, made on first use. Thread-safe.
  StatusOr<const LibraryKernel*> kernelFor(const SymbolBindings& sizes);
  // Takes the blockable buffers and blocked layout of its kernel at `sizes` (found without
  // making it: probeOneDnnBlocking) as every size's (a convolution's; other calls have none).
  Status probe(const SymbolBindings& sizes);
  // What the probe found (LibraryKernel's functions of the same names).
  const std::vector<size_t>& blockableBuffers() const { return blockable_; }
  const std::string& blockedLayout() const { return layout_; }
  // The buffers every size's kernel finds stored blocked (LibraryKernel::storeBlocked).
  void storeBlocked(const std::vector<size_t>& positions);
  // "oneDNN, made for each run's sizes (symbolic dims; stored blocked in nChw16c: source, result)".
  std::string describe() const;
  // How many sizes it has kernels for.
  size_t sizes() const;

 private:
  struct Made {
    std::unique_ptr<Module> module;  // the node of those sizes
    std::unique_ptr<LibraryKernel> kernel;
  };
  // The call's node at `sizes` (in m.module) and its post-ops' operands at those sizes.
  StatusOr<const Node*> nodeAt(const SymbolBindings& sizes, Made& m,
                               std::vector<kernel::PostOp>& postOps) const;
  // `shared`: weights an earlier size's kernel holds, used in place when the new kernel lays them
  // out alike.
  StatusOr<Made> make(const SymbolBindings& sizes, const PackedWeights* shared) const;
  // make() with the weights of the layout the kernel chooses, if an earlier size's kernel holds
  // them: one copy of the weights per layout, not per size (a batch rarely changes the layout).
  StatusOr<Made> makeSharing(const SymbolBindings& sizes);
  // A new kernel told the stored positions; an error where it computes blocked otherwise.
  Status agree(LibraryKernel& kernel) const;

  const kernel::Kernel& kernel_;
  const kernel::Stmt& call_;
  int threads_;
  mutable std::mutex mu_;
  std::map<std::vector<int64_t>, Made> made_;
  std::vector<PackedWeights> layouts_;  // the weights of each layout made (their kernels stay)
  std::vector<size_t> blockable_, stored_;
  std::string layout_;
  bool told_ = false;  // storeBlocked was called
};

}  // namespace kiln::codegen::cpu
