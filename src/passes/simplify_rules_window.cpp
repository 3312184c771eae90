// algebraic-simplify rules for windowed ops. Exact: a convolution tap that reads only padding
// for every output position adds w * 0 = 0 for a finite weight w, so dropping it changes no value
// (the weights must be constants without NaN or infinity: inf * 0 is NaN); a max or min pool is
// separable by dims; a pool's padding holds its reduction's identity, as a pad of that value
// does; a pool of one repeated value is that value's reduction over the window.
#include <cmath>
#include <limits>

#include "ir/op.h"
#include "ir/pool_window.h"
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

// reduce_window(x) {kind = max or min, a window over two or more dims} -> one reduce_window per
// windowed dim, in dim order, when the window's taps (the product of its extents) are at least
// twice their sum: a 13x13 max pool reads 26 elements an output instead of 169. Max and min over
// a rectangle are the max of the rows' maxes, with padding and strides per dim. Exact but for
// the sign of a zero result: equal zeros of both signs in one window may reduce to the other.
Value* separablePool(Node& n) {
  const PoolWindow pool = poolWindowOf(n);
  const std::vector<int64_t>&win = pool.window, &strides = pool.strides, &lo = pool.low,
        &hi = pool.high;
  int64_t taps = 1, sum = 0, windowed = 0;
  for (int64_t k : win) {
    taps *= k;
    sum += k > 1 ? k : 0;
    windowed += k > 1 ? 1 : 0;
  }
  if (!pool.undilatedMaxOrMin || windowed < 2 || taps < 2 * sum || !n.result()->type().isStatic())
    return nullptr;
  const size_t r = win.size();
  Builder b = rewrite::builderBefore(&n);
  Value* x = n.operand(0);
  bool first = true;
  for (size_t d = 0; d < r; ++d) {
    if (win[d] == 1) continue;
    // This stage: dim d's window, and on the first stage every unwindowed dim's stride and
    // padding too.
    std::vector<int64_t> w(r, 1), st(r, 1), l(r, 0), h(r, 0);
    for (size_t e = 0; e < r; ++e) {
      if (e != d && !(first && win[e] == 1)) continue;
      w[e] = win[e], st[e] = strides[e], l[e] = lo[e], h[e] = hi[e];
    }
    first = false;
    AttrMap attrs = {{"kind", n.attrs().at("kind")},
                     {"window_dimensions", intsAttr(w)},
                     {"window_strides", intsAttr(st)},
                     {"padding_low", intsAttr(l)},
                     {"padding_high", intsAttr(h)}};
    x = b.op(OpCode::ReduceWindow, {x}, std::move(attrs));
    if (!x) return nullptr;
  }
  return x->type() == n.result()->type() ? x : nullptr;
}

// The identity of a pool of `kind` over `type` (what its padding holds), if a pad value can be
// compared with it: 0 for a sum (x + 0 and x + -0 are both x when the sum starts at +0), -inf
// for a float max and +inf for a float min.
std::optional<double> poolIdentity(const std::string& kind, DType type) {
  if (kind == "sum") return 0.0;
  if (!isFloat(type)) return std::nullopt;
  if (kind == "max") return -std::numeric_limits<double>::infinity();
  if (kind == "min") return std::numeric_limits<double>::infinity();
  return std::nullopt;
}

// reduce_window(pad(x, v) {low, high}) -> reduce_window(x) {padding_low + low, padding_high +
// high} when v is the pool's identity: an average pool exported as a Pad and an unpadded
// AveragePool becomes one pool with padding, which layouts and lowerings know (the pad was a
// copy of the input, and its layout change was left in the input's layout).
Value* poolOfPad(Node& n) {
  Value* padded = n.operand(0);
  if (padded->def()->op() != OpCode::Pad) return nullptr;
  const Node& pad = *padded->def();
  const PoolWindow pool = poolWindowOf(n);
  std::optional<double> identity = poolIdentity(n.attrEnum("kind"), padded->type().dtype());
  std::optional<double> value = rewrite::splatValue(pad.operand(1));
  if (!identity || !value || *value != *identity) return nullptr;
  std::vector<int64_t> low = pad.attrInts("low"), high = pad.attrInts("high"),
                       interior = pad.attrInts("interior");
  const size_t r = pool.window.size();
  if (low.size() != r || high.size() != r) return nullptr;
  for (size_t d = 0; d < r; ++d) {
    if (low[d] < 0 || high[d] < 0 || (!interior.empty() && interior[d] != 0)) return nullptr;
    if (pool.baseDilations[d] != 1 || pool.low[d] < 0 || pool.high[d] < 0) return nullptr;
    low[d] += pool.low[d];
    high[d] += pool.high[d];
  }
  AttrMap attrs = n.attrs();
  attrs["padding_low"] = intsAttr(low);
  attrs["padding_high"] = intsAttr(high);
  Builder b = rewrite::builderBefore(&n);
  Value* out = b.op(OpCode::ReduceWindow, {pad.operand(0)}, std::move(attrs));
  return out && out->type() == n.result()->type() ? out : nullptr;
}

// reduce_window(s) -> s reduced over the window, for a uniform f32 s and a pool without padding
// or base dilation (every output reads the whole window): the count of an average pool over a
// padded input. Exact: the interpreter sums f32 in double, where k copies of an f32 add up to
// exactly k * s for k < 2^29, rounded once.
Value* poolOfSplat(Node& n) {
  std::optional<double> s = rewrite::splatValue(n.operand(0));
  const TensorType& t = n.result()->type();
  if (!s || t.dtype() != DType::F32 || !t.isStatic()) return nullptr;
  const PoolWindow pool = poolWindowOf(n);
  int64_t taps = 1;
  for (size_t d = 0; d < pool.window.size(); ++d) {
    if (pool.low[d] != 0 || pool.high[d] != 0 || pool.baseDilations[d] != 1) return nullptr;
    taps *= pool.window[d];
    if (taps >= (int64_t(1) << 29)) return nullptr;
  }
  const std::string& kind = n.attrEnum("kind");
  if (kind != "sum" && kind != "max" && kind != "min") return nullptr;
  double v =
      kind == "sum" ? static_cast<double>(static_cast<float>(*s * static_cast<double>(taps))) : *s;
  Builder b = rewrite::builderBefore(&n);
  return rewrite::splatConstant(b, t, v);
}

const Rule kRules[] = {
    {OpCode::ReduceWindow,
     "reduce_window(pad(x, v) {lo, hi}) -> reduce_window(x) {padding + lo, hi} when v is the "
     "pool's identity",
     poolOfPad},
    {OpCode::ReduceWindow,
     "reduce_window(splat s) -> splat(s reduced over the window) without padding", poolOfSplat},
    {OpCode::ReduceWindow,
     "reduce_window(x) {max or min, k1 x k2 ...} -> reduce_window(reduce_window(x) {k1}) {k2} ... "
     "when the taps are at least twice their sum",
     separablePool},
    {OpCode::Convolution,
     "convolution(x, w) -> convolution(x, slice(w)) without taps that read "
     "only padding",
     convolutionPaddingTaps},
};

}  // namespace

std::span<const Rule> windowRules() { return kRules; }

}  // namespace kiln::simplify
