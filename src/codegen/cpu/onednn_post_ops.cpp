// oneDNN library kernels: a call's post-ops (kernel_ir.h, PostOp) as oneDNN post-ops, with the
// descriptors of their operands (planPostOps), and the post-ops of a Winograd convolution
// (winogradPostOps). See onednn.h and docs/codegen.md, "Post-ops".
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <string>
#include <vector>

#include "codegen/cpu/onednn_internal.h"

namespace kiln::codegen::cpu::onednn {

namespace {

// The axes of an add/mul post-op operand over the dst's axes (planPostOps's `axisDims`), extent 1
// where it is broadcast, or why it cannot be described so. Sets `nonChannelOperand` when the
// operand varies along a dst axis other than axis 1.
StatusOr<std::vector<Axis>> operandAxes(const kernel::PostOp& p,
                                        const std::vector<int64_t>& resultDims,
                                        const std::vector<std::vector<int64_t>>& axisDims,
                                        bool& nonChannelOperand) {
  // The operand's stride along each result dim (0: broadcast).
  std::vector<int64_t> stride(resultDims.size(), 0);
  int64_t s = 1;
  for (size_t j = p.operandShape.size(); j-- > 0;) {
    auto d = static_cast<size_t>(p.operandDims[j]);
    if (d >= resultDims.size()) return Status::error("post-op operand dims out of range");
    if (p.operandShape[j] != 1) stride[d] = s;
    s *= p.operandShape[j];
  }
  std::vector<Axis> axes;
  for (const std::vector<int64_t>& dims : axisDims) {
    Axis a{1, 1};
    bool broadcast = false, read = false;
    for (int64_t d : dims) {
      int64_t ext = resultDims[static_cast<size_t>(d)];
      if (ext == 1) continue;
      int64_t st = stride[static_cast<size_t>(d)];
      (st == 0 ? broadcast : read) = true;
      if (st == 0) continue;
      if (a.ext > 1 && a.stride != st * ext)
        return Status::error("post-op operand dims do not merge like the result's");
      a = Axis{a.ext * ext, st};
    }
    if (broadcast && read)
      return Status::error("post-op operand is broadcast along part of a merged dim");
    if (a.ext > 1 && axes.size() != 1) nonChannelOperand = true;
    axes.push_back(a);
  }
  return axes;
}

// Appends the eltwise post-op of `p` (clamp, sigmoid, tanh, gelu, swish) to `ops`; add and mul
// append nothing (they are binary post-ops).
void appendEltwise(dnnl::post_ops& ops, const kernel::PostOp& p) {
  using kernel::PostOp;
  auto eltwise = [&](dnnl::algorithm a, float alpha = 0.0f, float beta = 0.0f) {
    ops.append_eltwise(1.0f, a, alpha, beta);
  };
  switch (p.kind) {
    case PostOp::Kind::Add:
    case PostOp::Kind::Mul: break;
    case PostOp::Kind::Clamp:
      if (p.lo == 0 && std::isinf(p.hi) && p.hi > 0) {
        eltwise(dnnl::algorithm::eltwise_relu);
      } else {
        constexpr float kMax = std::numeric_limits<float>::max();
        auto bound = [&](double v) {
          return static_cast<float>(std::clamp(v, -double(kMax), double(kMax)));
        };
        eltwise(dnnl::algorithm::eltwise_clip, bound(p.lo), bound(p.hi));
      }
      break;
    case PostOp::Kind::Sigmoid: eltwise(dnnl::algorithm::eltwise_logistic); break;
    case PostOp::Kind::Tanh: eltwise(dnnl::algorithm::eltwise_tanh); break;
    case PostOp::Kind::Gelu: eltwise(dnnl::algorithm::eltwise_gelu_erf); break;
    case PostOp::Kind::GeluTanh: eltwise(dnnl::algorithm::eltwise_gelu_tanh); break;
    case PostOp::Kind::Swish: eltwise(dnnl::algorithm::eltwise_swish, 1.0f); break;
  }
}

}  // namespace

StatusOr<PostOpsPlan> planPostOps(const std::vector<kernel::PostOp>& postOps,
                                  const std::vector<int64_t>& resultDims,
                                  const std::vector<std::vector<int64_t>>& axisDims,
                                  const DescRemap& remap, int biasAxis) {
  using kernel::PostOp;
  PostOpsPlan plan;
  size_t position = 3;             // the next add/mul operand's buffer
  bool onlyAdds = true;            // so far
  std::vector<std::string> names;  // of the post-ops in `ops`
  for (size_t i = 0; i < postOps.size(); ++i) {
    const PostOp& p = postOps[i];
    names.emplace_back(kernel::postOpName(p.kind));
    if (p.kind != PostOp::Kind::Add) onlyAdds = false;
    if (p.kind != PostOp::Kind::Add && p.kind != PostOp::Kind::Mul) {
      appendEltwise(plan.ops, p);
      continue;
    }
    KILN_ASSIGN_OR_RETURN(std::vector<Axis> axes,
                          operandAxes(p, resultDims, axisDims, plan.nonChannelOperand));
    memory::desc operand = stridedDesc(axes);
    bool alongBiasAxis = biasAxis >= 0;
    for (size_t a = 0; a < axes.size(); ++a)
      if (axes[a].ext > 1 && static_cast<int>(a) != biasAxis) alongBiasAxis = false;
    if (onlyAdds && !plan.bias && p.kind == PostOp::Kind::Add && alongBiasAxis) {
      plan.bias = PostOpsPlan::Binary{0, operand, position++};
      names.pop_back();
      continue;
    }
    if (remap) {
      KILN_ASSIGN_OR_RETURN(operand, remap(position, operand));
    }
    plan.binaries.push_back({plan.ops.len(), operand, position++});
    plan.ops.append_binary(p.kind == PostOp::Kind::Add ? dnnl::algorithm::binary_add
                                                       : dnnl::algorithm::binary_mul,
                           operand);
  }
  if (plan.bias) plan.text = ", bias";
  for (size_t i = 0; i < names.size(); ++i) plan.text += (i ? "+" : ", post-ops ") + names[i];
  return plan;
}

std::optional<WinogradPostOps> winogradPostOps(const std::vector<kernel::PostOp>& postOps,
                                               const PostOpsPlan& plan, const Dims& dstDims) {
  using kernel::PostOp;
  WinogradPostOps w;
  bool relu = false;
  size_t binary = 0;
  size_t position = 3;
  for (const PostOp& p : postOps) {
    if (relu) return std::nullopt;
    if (p.kind == PostOp::Kind::Add) {
      if (plan.bias && plan.bias->position == position++) continue;
      const PostOpsPlan::Binary& b = plan.binaries[binary++];
      if (b.desc.dims() != dstDims || w.sumPosition) return std::nullopt;
      w.sumPosition = b.position;
      w.ops.append_sum(1.0f);
    } else if (p.kind == PostOp::Kind::Clamp && p.lo == 0 && std::isinf(p.hi) && p.hi > 0) {
      w.ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
      relu = true;
    } else {
      return std::nullopt;
    }
  }
  return w;
}

}  // namespace kiln::codegen::cpu::onednn
