// fold-batch-norm: finds a per-channel affine map a * y + c (from batch_norm_inference, or a
// multiplication by a broadcast constant vector) on the output of a contraction with constant
// weights, scales the weights' output-feature slices by a, and adds c as a bias.
#include "passes/fold_batch_norm.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "passes/rewrite_util.h"

namespace kiln {
namespace {

using rewrite::constantOf;

// y = contraction(x, W) [+ broadcast_in_dim(bias, [feature])].
struct Producer {
  Node* contraction = nullptr;
  int64_t weightDim = 0;         // W's dimension that feeds the output feature dim
  const Tensor* bias = nullptr;  // the existing bias vector, if any
};

bool onlyUsedOnce(const Value* v) { return v->uses().size() == 1 && !v->isFunctionOutput(); }

// W's dimension feeding result dimension `feature` of `n`, or nullopt.
std::optional<int64_t> weightDimFor(const Node& n, int64_t feature) {
  const TensorType& w = n.operand(1)->type();
  if (n.op() == OpCode::Convolution) {
    auto dn = convDimensionNumbers(n.attrs(), w.rank());
    if (!dn || dn->outputFeature != feature) return std::nullopt;
    return dn->kernelOutput;
  }
  if (n.op() != OpCode::DotGeneral) return std::nullopt;
  auto lb = n.attrInts("lhs_batch"), lc = n.attrInts("lhs_contracting");
  auto rb = n.attrInts("rhs_batch"), rc = n.attrInts("rhs_contracting");
  int64_t lhsFree = n.operand(0)->type().rank() - static_cast<int64_t>(lb.size() + lc.size());
  int64_t j = feature - static_cast<int64_t>(lb.size()) - lhsFree;
  for (int64_t d = 0; d < w.rank(); ++d) {
    if (std::find(rb.begin(), rb.end(), d) != rb.end() ||
        std::find(rc.begin(), rc.end(), d) != rc.end())
      continue;
    if (j-- == 0) return d;
  }
  return std::nullopt;
}

// A constant vector broadcast along `feature` only: broadcast_in_dim(c, dims = [feature]).
const Tensor* featureVector(const Value* v, int64_t feature) {
  if (v->def()->op() != OpCode::BroadcastInDim) return nullptr;
  if (v->def()->attrInts("dims") != std::vector<int64_t>{feature}) return nullptr;
  return constantOf(v->def()->operand(0));
}

std::optional<Producer> matchProducer(Value* y, int64_t feature) {
  Producer p;
  if (y->def()->op() == OpCode::Add && onlyUsedOnce(y)) {
    for (int side = 0; side < 2 && !p.bias; ++side)
      if ((p.bias = featureVector(y->def()->operand(side), feature)))
        y = y->def()->operand(1 - side);
    if (!p.bias) return std::nullopt;
  }
  Node* n = y->def();
  if ((n->op() != OpCode::Convolution && n->op() != OpCode::DotGeneral) || !onlyUsedOnce(y) ||
      !constantOf(n->operand(1)) || !isFloat(y->type().dtype()))
    return std::nullopt;
  auto wd = weightDimFor(*n, feature);
  if (!wd) return std::nullopt;
  p.contraction = n;
  p.weightDim = *wd;
  return p;
}

// The affine map a * y + c of `root` on y = its first operand, per channel; nullopt if none.
struct Affine {
  Value* y = nullptr;
  int64_t feature = 0;
  std::vector<double> a, c;
};

std::optional<Affine> matchAffine(Node& root) {
  Affine f;
  if (root.op() == OpCode::BatchNormInference) {
    const Tensor *scale = constantOf(root.operand(1)), *offset = constantOf(root.operand(2)),
                 *mean = constantOf(root.operand(3)), *var = constantOf(root.operand(4));
    if (!scale || !offset || !mean || !var) return std::nullopt;
    f.y = root.operand(0);
    f.feature = root.attrInt("feature_index");
    double eps = root.attrFloat("epsilon");
    for (int64_t i = 0; i < scale->numElements(); ++i) {
      double k = scale->getDouble(i) / std::sqrt(var->getDouble(i) + eps);
      f.a.push_back(k);
      f.c.push_back(offset->getDouble(i) - mean->getDouble(i) * k);
    }
    return f;
  }
  if (root.op() != OpCode::Mul) return std::nullopt;
  int64_t rank = root.result()->type().rank();
  for (int side = 0; side < 2; ++side)
    for (int64_t feature = 0; feature < rank; ++feature)
      if (const Tensor* s = featureVector(root.operand(side), feature)) {
        f.y = root.operand(1 - side);
        f.feature = feature;
        for (int64_t i = 0; i < s->numElements(); ++i) f.a.push_back(s->getDouble(i));
        f.c.assign(f.a.size(), 0.0);
        return f;
      }
  return std::nullopt;
}

// Scales the slices of `w` along `dim` by `a`, writing them into `out` (w itself or a tensor of
// its type).
void scaleSlices(const Tensor& w, int64_t dim, const std::vector<double>& a, Tensor& out) {
  int64_t stride = w.strides()[static_cast<size_t>(dim)],
          extent = w.dims()[static_cast<size_t>(dim)];
  // Element i lies in slice (i / stride) % extent: runs of `stride` elements share a factor.
  for (int64_t start = 0, run = 0; start < w.numElements(); start += stride, ++run) {
    double f = a[static_cast<size_t>(run % extent)];
    if (w.dtype() == DType::F32) {
      const float* x = w.data<float>() + start;
      float* y = out.mutableData<float>() + start;
      for (int64_t j = 0; j < stride; ++j) y[j] = static_cast<float>(x[j] * f);
    } else {
      for (int64_t j = start; j < start + stride; ++j) out.setDouble(j, w.getDouble(j) * f);
    }
  }
}

// The weights `wv` with their slices scaled. Weights that only the folded contraction reads and
// whose bytes no other tensor shares are scaled in place: a copy would be a fresh buffer of
// their size, whose page faults cost more than the scaling (wide_resnet50_2: 275 MB).
Tensor scaledWeights(const Value* wv, int64_t dim, const std::vector<double>& a) {
  const Tensor& w = *constantOf(wv);
  bool inPlace =
      w.isUnique() && !w.isBorrowed() && wv->uses().size() == 1 && !wv->isFunctionOutput();
  Tensor out = inPlace ? w : Tensor::uninitialized(w.dtype(), w.dims());
  scaleSlices(w, dim, a, out);
  return out;
}

bool foldAt(Node& root) {
  auto f = matchAffine(root);
  if (!f) return false;
  auto p = matchProducer(f->y, f->feature);
  if (!p) return false;
  const Tensor& w = *constantOf(p->contraction->operand(1));
  if (w.dims()[static_cast<size_t>(p->weightDim)] != static_cast<int64_t>(f->a.size()))
    return false;
  Tensor bias(root.result()->type().dtype(), {static_cast<int64_t>(f->a.size())});
  for (size_t i = 0; i < f->a.size(); ++i) {
    double b0 = p->bias ? p->bias->getDouble(static_cast<int64_t>(i)) : 0.0;
    bias.setDouble(static_cast<int64_t>(i), b0 * f->a[i] + f->c[i]);
  }
  Node* n = p->contraction;
  const TensorType& type = root.result()->type();
  Builder b = rewrite::builderBefore(&root);
  Value* weights = b.constant(scaledWeights(n->operand(1), p->weightDim, f->a));
  Value* y = b.op(n->op(), {n->operand(0), weights}, n->attrs(), {n->result()->type()});
  bool noBias = !p->bias && std::all_of(f->c.begin(), f->c.end(), [](double c) { return c == 0; });
  Value* out =
      noBias ? y
             : b.add(y, b.broadcastInDim(b.constant(std::move(bias)), type.dims(), {f->feature}));
  KILN_CHECK(out, "folding into " + n->describe() + " failed: " + b.status().str());
  rewrite::replaceValue(root.result(), out);
  rewrite::eraseIfDead(&root);
  return true;
}

// A batch norm with constant parameters that folds into no contraction (one after a
// concatenation: densenet's pre-activations) -> (x - mean) * k + offset, k = scale / sqrt(var +
// eps) a constant vector: the kernel then computes no square root and division at each element.
bool normalizeAt(Node& root) {
  if (root.op() != OpCode::BatchNormInference) return false;
  const TensorType& type = root.result()->type();
  auto f32 = [](const Value* v) { return v->type().dtype() == DType::F32; };
  if (!f32(root.result()) || !f32(root.operand(2)) || !f32(root.operand(3))) return false;
  auto f = matchAffine(root);  // k is its factor a
  if (!f) return false;
  Tensor k(DType::F32, {static_cast<int64_t>(f->a.size())});
  for (size_t i = 0; i < f->a.size(); ++i) k.setDouble(static_cast<int64_t>(i), f->a[i]);
  Builder b = rewrite::builderBefore(&root);
  auto along = [&](Value* v) { return b.broadcastInDim(v, type.dims(), {f->feature}); };
  Value* centered = b.sub(root.operand(0), along(root.operand(3)));
  Value* out = b.add(b.mul(centered, along(b.constant(std::move(k)))), along(root.operand(2)));
  KILN_CHECK(out, "normalizing " + root.describe() + " failed: " + b.status().str());
  rewrite::replaceValue(root.result(), out);
  rewrite::eraseIfDead(&root);
  return true;
}

}  // namespace

StatusOr<bool> foldBatchNorm(Module& m) {
  bool changed = false;
  for (const auto& fn : m.functions()) {
    std::vector<Node*> order;
    for (const auto& n : fn->nodes()) order.push_back(n.get());
    // A fold erases the root and the chain before it, which come earlier in `order`; a batch
    // norm that folds into nothing gets its constant factor folded instead.
    for (Node* n : order) changed = (foldAt(*n) || normalizeAt(*n)) || changed;
  }
  return changed;
}

}  // namespace kiln
