// Library calls of symbolic sizes (a program compiled over ranges: kernel IR's symbols). A
// oneDNN primitive has fixed shapes, so such a call's kernel is made for each run's sizes on its
// first use, as a node of those sizes (its constant operands shared, not copied), and kept by
// them: a size seen before costs a lookup. Internal to the CPU target.
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

// Whether a call's node has a symbolic dim in an operand or result.
bool isSymbolicCall(const kernel::Stmt& call);

class PerShapeCall {
 public:
  // `call` of `kernel` (both outlive this), its kernels made for `threads`.
  PerShapeCall(const kernel::Kernel& kernel, const kernel::Stmt& call, int threads)
      : kernel_(kernel), call_(call), threads_(threads) {}
  // The kernel for these sizes of the kernel's symbols, made on first use. Thread-safe.
  StatusOr<const LibraryKernel*> kernelFor(const SymbolBindings& sizes);
  // How many sizes it has kernels for.
  size_t sizes() const;

 private:
  struct Made {
    std::unique_ptr<Module> module;  // the node of those sizes
    std::unique_ptr<LibraryKernel> kernel;
  };
  // `shared`: weights an earlier size's kernel holds, used in place when the new kernel lays them
  // out alike.
  StatusOr<Made> make(const SymbolBindings& sizes, const PackedWeights* shared) const;
  // make() with the weights of the layout the kernel chooses, if an earlier size's kernel holds
  // them: one copy of the weights per layout, not per size (a batch rarely changes the layout).
  StatusOr<Made> makeSharing(const SymbolBindings& sizes);

  const kernel::Kernel& kernel_;
  const kernel::Stmt& call_;
  int threads_;
  mutable std::mutex mu_;
  std::map<std::vector<int64_t>, Made> made_;
  std::vector<PackedWeights> layouts_;  // the weights of each layout made (their kernels stay)
};

}  // namespace kiln::codegen::cpu
