// algebraic-simplify rules for windowed ops. Exact: a convolution tap that reads only padding
// for every output position adds w * 0 = 0 for a finite weight w, so dropping it changes no value
// (the weights must be constants without NaN or infinity: inf * 0 is NaN).
#include <cmath>

#include "ir/op.h"
#include "passes/rewrite_util.h"
#include "passes/simplify_rules.h"

namespace kiln::simplify {
namespace {

// One spatial dim of a convolution: input extent x, kernel extent k, output extent y, stride,
// padding and kernel dilation.
struct Dim {
  int64_t x, k, y, stride, lo, hi, dil;
};

// Whether tap t reads an input element (not padding) for some output position.
bool tapLive(const Dim& d, int64_t t) {
  return rewrite::tapReads(d.x, d.y, d.stride, d.lo, d.dil, t) > 0;
}

// The taps [begin, end) of `d` to keep and the padding that gives the same output extent, with
// the padding non-negative: dead taps at either end go where the padding allows.
struct Kept {
  int64_t begin = 0, end = 0, lo = 0, hi = 0;
};
Kept keptTaps(const Dim& d) {
  int64_t first = 0, last = d.k - 1;
  while (first < last && !tapLive(d, first)) ++first;
  while (last > first && !tapLive(d, last)) --last;
  Kept out;
  out.begin = std::min(first, d.lo / d.dil);  // the new low padding stays >= 0
  out.lo = d.lo - out.begin * d.dil;
  for (int64_t end = last + 1; end <= d.k; ++end) {
    // The extent (y - 1) * stride + window must fit in x + lo + hi, with at most stride - 1
    // elements to spare.
    const int64_t need = (d.y - 1) * d.stride + (end - 1 - out.begin) * d.dil + 1 - d.x - out.lo;
    if (need + d.stride - 1 >= 0) {
      out.end = end;
      out.hi = std::max<int64_t>(need, 0);
      return out;
    }
  }
  return {0, d.k, d.lo, d.hi};
}

// convolution(x, w) -> convolution(x, slice(w)) without the taps that read only padding (a
// dilated 3x3 convolution whose dilation passes the feature map is a 1x1 one)
Value* convolutionPaddingTaps(Node& n) {
  if (n.numOperands() != 2) return nullptr;
  const Tensor* weights = rewrite::constantOf(n.operand(1));
  if (!weights) return nullptr;
  const TensorType &xt = n.operand(0)->type(), &wt = n.operand(1)->type();
  const TensorType& yt = n.result()->type();
  if (!xt.isStatic() || !wt.isStatic() || !yt.isStatic()) return nullptr;
  auto dn = convDimensionNumbers(n.attrs(), xt.rank());
  if (!dn) return nullptr;
  const size_t spatial = dn->inputSpatial.size();
  ConvWindow w = convWindow(n.attrs(), spatial);
  std::vector<int64_t> xd = xt.staticDims(), wd = wt.staticDims(), yd = yt.staticDims();
  std::vector<int64_t> start(wd.size(), 0), limit = wd;
  bool changed = false;
  for (size_t i = 0; i < spatial; ++i) {
    if (w.lhsDil[i] != 1 || w.lo[i] < 0 || w.hi[i] < 0) return nullptr;
    const auto ks = static_cast<size_t>(dn->kernelSpatial[i]);
    Dim d{xd[static_cast<size_t>(dn->inputSpatial[i])],
          wd[ks],
          yd[static_cast<size_t>(dn->outputSpatial[i])],
          w.strides[i],
          w.lo[i],
          w.hi[i],
          w.rhsDil[i]};
    Kept kept = keptTaps(d);
    if (kept.begin == 0 && kept.end == d.k) continue;
    changed = true;
    start[ks] = kept.begin;
    limit[ks] = kept.end;
    w.lo[i] = kept.lo;
    w.hi[i] = kept.hi;
    if (kept.end - kept.begin == 1) w.rhsDil[i] = 1;  // one tap: its dilation means nothing
  }
  if (!changed) return nullptr;
  for (int64_t i = 0; i < weights->numElements(); ++i)
    if (!std::isfinite(weights->getDouble(i))) return nullptr;
  AttrMap attrs = n.attrs();
  attrs["padding_low"] = intsAttr(w.lo);
  attrs["padding_high"] = intsAttr(w.hi);
  attrs["rhs_dilation"] = intsAttr(w.rhsDil);
  Builder b = rewrite::builderBefore(&n);
  return b.op(OpCode::Convolution, {n.operand(0), b.slice(n.operand(1), start, limit)}, attrs);
}

const Rule kRules[] = {
    {OpCode::Convolution,
     "convolution(x, w) -> convolution(x, slice(w)) without taps that read "
     "only padding",
     convolutionPaddingTaps},
};

}  // namespace

std::span<const Rule> windowRules() { return kRules; }

}  // namespace kiln::simplify
