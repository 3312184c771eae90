// The post-ops of Kiln's own convolution kernels as they apply them. See avx512_conv.h.
#include "codegen/cpu/avx512_conv.h"

#include <string>

namespace kiln::codegen::cpu {

StatusOr<std::vector<Epilogue>> epilogueOf(const std::vector<kernel::PostOp>& postOps,
                                           const std::vector<int64_t>& result) {
  using Kind = kernel::PostOp::Kind;
  std::vector<Epilogue> out;
  int operands = 0;
  for (const kernel::PostOp& p : postOps) {
    Epilogue e;
    e.kind = p.kind;
    if (p.kind == Kind::Clamp) {
      e.lo = static_cast<float>(p.lo);
      e.hi = static_cast<float>(p.hi);
    } else if (p.kind == Kind::Add || p.kind == Kind::Mul) {
      e.operand = operands++;
      e.whole = kernel::postOpReadsWhole(p, result);
      const bool channels = kernel::postOpVectorDim(p) + 1 == static_cast<int>(result.size());
      if (!e.whole && !channels)
        return Status::error("an operand of a post-op that is neither per channel nor whole");
    } else if (p.kind != Kind::Swish) {
      return Status::error(std::string("a ") + kernel::postOpName(p.kind) + " post-op");
    }
    out.push_back(e);
  }
  return out;
}

}  // namespace kiln::codegen::cpu
