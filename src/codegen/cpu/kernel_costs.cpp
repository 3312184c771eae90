// The CPU's kernel time estimate. See kernel_costs.h.
#include "codegen/cpu/kernel_costs.h"

#include <algorithm>

#include "codegen/cpu/call_node.h"
#include "codegen/cpu/onednn.h"

namespace kiln::codegen::cpu {
namespace {

// The multiplications Winograd convolutions save of a kernel's flops: about half of theirs (they
// do 4/9 or 1/4 of the multiplies, and transform their tiles).
double winogradSavings(const kernel::Kernel& k) {
  double saved = 0;
  for (const kernel::Stmt* c : kernel::callsOf(k)) {
    if (c->op != OpCode::Convolution || kernel::isSymbolicCall(k, *c)) continue;
    StatusOr<CallNode> node = callNode(k, *c);
    if (node) saved += 0.5 * winogradConvolutionFlops(*node->node);
  }
  return saved;
}

}  // namespace

// One thread: a kernel's flops at 150 GFLOP/s (a Winograd convolution's halved) plus its bytes at
// 15 GB/s plus 3 us. More threads speed a kernel up by the parallel work it has, its output
// elements: half of each extra thread at 200K elements for a library call (oneDNN splits a
// convolution's rows and channel blocks: at 2 threads here 7x7x384 outputs ran 0.9-1.0x as fast
// as on one, 28x28x192 1.4x, 56x56x64 1.5-1.9x), at 16K for Kiln's loops (chunks of a parallel
// loop).
runtime::KernelCosts estimateKernelCosts(const fusion::FusionPlan& plan,
                                         const std::vector<kernel::Kernel>& kernels, int threads) {
  runtime::KernelCosts c;
  for (size_t i = 0; i < kernels.size() && i < plan.kernels.size(); ++i) {
    const fusion::Kernel& k = plan.kernels[i];
    double flops = std::max(0.0, k.flops - winogradSavings(kernels[i]));
    double one = flops / 150e9 + double(k.bytesRead + k.bytesWritten) / 15e9 + 3e-6;
    double work = 0;
    for (const Value* v : k.outputs) work += double(v->type().numElements().value_or(0));
    const double halfSpeed = kernel::callsOf(kernels[i]).empty() ? 16e3 : 200e3;
    const double extra = threads - 1;
    c.oneThread.push_back(one);
    c.allThreads.push_back(one / (1.0 + extra * work / (work + extra * halfSpeed)));
  }
  return c;
}

}  // namespace kiln::codegen::cpu
