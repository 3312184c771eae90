// pad-conv-channels. See pad_conv_channels.h.
#include "passes/pad_conv_channels.h"

#include <vector>

#include "ir/builder.h"
#include "ir/op.h"
#include "ir/tensor.h"
#include "passes/rewrite_util.h"

namespace kiln {
namespace {

constexpr int64_t kChannelMultiple = 8;

// `v` zero-padded at the high end of dim `dim` by `extra` entries.
Value* padDim(Builder& b, Value* v, size_t dim, int64_t extra) {
  const size_t rank = static_cast<size_t>(v->type().rank());
  std::vector<int64_t> lo(rank, 0), hi(rank, 0), interior(rank, 0);
  hi[dim] = extra;
  return b.pad(v, b.scalar(v->type().dtype(), 0.0), lo, hi, interior);
}

// A constant `t` with `extra` zero entries after the last of dim `dim`: the folded pad (a
// constant grows past constant-fold's caps).
Tensor paddedConstant(const Tensor& t, size_t dim, int64_t extra) {
  std::vector<int64_t> dims = t.dims();
  int64_t inner = 1;
  for (size_t d = dim + 1; d < dims.size(); ++d) inner *= dims[d];
  const int64_t along = dims[dim];
  dims[dim] += extra;
  Tensor out(t.dtype(), dims);  // zero-filled
  for (int64_t i = 0; i < t.numElements(); ++i) {
    const int64_t outer = i / (along * inner), rest = i % (along * inner);
    out.setDouble(outer * (along + extra) * inner + rest, t.getDouble(i));
  }
  return out;
}

// Whether `n` is a convolution this pass pads, and by how many channels.
int64_t missingChannels(const Node& n) {
  if (n.op() != OpCode::Convolution || n.numOperands() != 2 || n.numResults() != 1) return 0;
  const TensorType& xt = n.operand(0)->type();
  const DType t = xt.dtype();
  if ((t != DType::F16 && t != DType::BF16) || !xt.isStatic() || !n.operand(1)->type().isStatic())
    return 0;
  if (n.attrInt("feature_group_count") != 1 || n.attrInt("batch_group_count") != 1) return 0;
  auto dn = convDimensionNumbers(n.attrs(), xt.rank());
  if (!dn) return 0;
  const int64_t c = xt.staticDims()[static_cast<size_t>(dn->inputFeature)];
  return c % kChannelMultiple == 0 ? 0 : kChannelMultiple - c % kChannelMultiple;
}

}  // namespace

StatusOr<bool> padConvChannels(Module& m) {
  bool changed = false;
  for (const auto& f : m.functions()) {
    std::vector<Node*> convs;
    for (const auto& n : f->nodes())
      if (missingChannels(*n)) convs.push_back(n.get());
    for (Node* n : convs) {
      const int64_t extra = missingChannels(*n);
      auto dn = convDimensionNumbers(n->attrs(), n->operand(0)->type().rank());
      Builder b = rewrite::builderBefore(n);
      Value* x = padDim(b, n->operand(0), static_cast<size_t>(dn->inputFeature), extra);
      const size_t wDim = static_cast<size_t>(dn->kernelInput);
      const Tensor* constant = rewrite::constantOf(n->operand(1));
      Value* w = constant ? b.constant(paddedConstant(*constant, wDim, extra))
                          : padDim(b, n->operand(1), wDim, extra);
      if (!b.ok()) return Status(b.status()).prefix("pad-conv-channels on " + n->describe());
      n->setOperand(0, x);
      n->setOperand(1, w);
      changed = true;
    }
  }
  return changed;
}

}  // namespace kiln
