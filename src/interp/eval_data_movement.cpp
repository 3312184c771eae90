// Reference kernels of the data-movement ops: broadcast_in_dim, reshape, transpose, slice,
// dynamic_slice, dynamic_update_slice, concatenate, pad, gather, scatter, reverse, resize and
// grid_sample.
//
// Most of these move elements without looking at them, so they copy by element size. The
// strided ops (broadcast, transpose, slice, reverse, dynamic slices, pad, gather windows) all
// reduce to copyBox: walk a box of indices and copy from one affine address to another.
#include <algorithm>
#include <cmath>
#include <string>

#include "interp/eval.h"
#include "interp/eval_util.h"
#include "ir/resize_geometry.h"

namespace kiln::interp {
namespace {

bool contains(const std::vector<int64_t>& v, int64_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// An affine walk: element at box index i is at base + sum(i[k] * steps[k]).
struct Affine {
  int64_t base = 0;
  std::vector<int64_t> steps;
};

// Calls visit(sOffset, dOffset) for every index of the box dims `dims` (an odometer that keeps
// both offsets up to date without recomputing them).
template <typename Visit>
void walkDims(const std::vector<size_t>& dims, const Affine& s, const Affine& d,
              const std::vector<int64_t>& box, Visit visit) {
  std::vector<int64_t> idx(dims.size(), 0);
  int64_t so = s.base, dof = d.base;
  while (true) {
    visit(so, dof);
    size_t k = dims.size();
    for (; k-- > 0;) {
      size_t dim = dims[k];
      if (++idx[k] < box[dim]) {
        so += s.steps[dim];
        dof += d.steps[dim];
        break;
      }
      idx[k] = 0;
      so -= s.steps[dim] * (box[dim] - 1);
      dof -= d.steps[dim] * (box[dim] - 1);
    }
    if (k == static_cast<size_t>(-1)) return;
  }
}

template <typename E>
void copyBoxTyped(const E* src, const Affine& s, E* dst, const Affine& d,
                  const std::vector<int64_t>& box) {
  for (int64_t b : box)
    if (b == 0) return;
  if (box.empty()) {
    dst[d.base] = src[s.base];
    return;
  }
  // The innermost box dim is a tight loop. When the source walks another dim faster (a
  // transpose), those two dims are copied in 32x32 tiles, the tiles outermost, so that the lines
  // read and written stay in cache while the other dims are walked: element by element in the
  // result's order, transposing resnet18's weights (OIHW -> HWIO) took 160 ms. A dim of fewer
  // than 8 elements makes a poor tile (the 3x3 window of a weight).
  size_t inner = box.size() - 1, fast = inner;
  for (size_t k = 0; k < box.size(); ++k)
    if (box[k] >= 8 && std::abs(s.steps[k]) < std::abs(s.steps[fast])) fast = k;
  std::vector<size_t> outer;
  for (size_t k = 0; k < box.size(); ++k)
    if (k != inner && k != fast) outer.push_back(k);
  const int64_t n = box[inner], ss = s.steps[inner], ds = d.steps[inner];
  if (fast == inner) {
    walkDims(outer, s, d, box, [&](int64_t so, int64_t dof) {
      for (int64_t j = 0; j < n; ++j) dst[dof + j * ds] = src[so + j * ss];
    });
    return;
  }
  constexpr int64_t kTile = 32;
  const int64_t m = box[fast], fs = s.steps[fast], fd = d.steps[fast];
  for (int64_t i0 = 0; i0 < m; i0 += kTile)
    for (int64_t j0 = 0; j0 < n; j0 += kTile)
      walkDims(outer, s, d, box, [&](int64_t so, int64_t dof) {
        for (int64_t i = i0; i < std::min(m, i0 + kTile); ++i)
          for (int64_t j = j0; j < std::min(n, j0 + kTile); ++j)
            dst[dof + i * fd + j * ds] = src[so + i * fs + j * ss];
      });
}

// Copies the box of elements from `src` (walk s) to `dst` (walk d); both tensors have one dtype.
void copyBox(const Tensor& src, const Affine& s, Tensor& dst, const Affine& d,
             const std::vector<int64_t>& box) {
  switch (dtypeSize(src.dtype())) {
    case 1: return copyBoxTyped(src.data<uint8_t>(), s, dst.mutableData<uint8_t>(), d, box);
    case 2: return copyBoxTyped(src.data<uint16_t>(), s, dst.mutableData<uint16_t>(), d, box);
    case 4: return copyBoxTyped(src.data<uint32_t>(), s, dst.mutableData<uint32_t>(), d, box);
    case 8: return copyBoxTyped(src.data<uint64_t>(), s, dst.mutableData<uint64_t>(), d, box);
  }
  KILN_CHECK(false, "copyBox: unexpected element size");
}

// Walk of a whole tensor in row-major order.
Affine dense(const std::vector<int64_t>& dims) { return Affine{0, rowMajorStrides(dims)}; }

// Fills every element of `out` with the rank-0 tensor `value`.
void fill(Tensor& out, const Tensor& value) {
  const size_t es = dtypeSize(out.dtype());
  std::byte* dst = out.mutableBytes();
  for (int64_t i = 0; i < out.numElements(); ++i) std::memcpy(dst + i * es, value.bytes(), es);
}

EvalResult one(Tensor t) { return std::vector<Tensor>{std::move(t)}; }

// out = x read through the walk `s` over the result's index space.
EvalResult readThrough(const Tensor& x, const Affine& s, const TensorType& rt) {
  // The copy writes every element: no zero fill first (a second pass over fresh memory).
  Tensor out = Tensor::uninitialized(rt.dtype(), rt.staticDims());
  copyBox(x, s, out, dense(out.dims()), out.dims());
  return one(std::move(out));
}

EvalResult broadcastInDim(const EvalContext& c) {
  const Tensor& x = c.operands[0];
  const auto dims = c.node.attrInts("dims");
  const TensorType& rt = c.resultTypes[0];
  Affine s{0, std::vector<int64_t>(rt.rank(), 0)};
  auto strides = rowMajorStrides(x.dims());
  // A size-1 operand dim repeats (step 0) along its result dim.
  for (size_t i = 0; i < dims.size(); ++i)
    if (x.dims()[i] != 1) s.steps[dims[i]] = strides[i];
  return readThrough(x, s, rt);
}

EvalResult transpose(const EvalContext& c) {
  const Tensor& x = c.operands[0];
  const auto perm = c.node.attrInts("permutation");
  auto strides = rowMajorStrides(x.dims());
  Affine s{0, {}};
  for (int64_t p : perm) s.steps.push_back(strides[p]);
  return readThrough(x, s, c.resultTypes[0]);
}

EvalResult slice(const EvalContext& c) {
  const Tensor& x = c.operands[0];
  const auto start = c.node.attrInts("start");
  const auto stride = c.node.attrInts("stride", std::vector<int64_t>(x.rank(), 1));
  auto strides = rowMajorStrides(x.dims());
  Affine s{0, {}};
  for (int64_t i = 0; i < x.rank(); ++i) {
    s.base += start[i] * strides[i];
    s.steps.push_back(stride[i] * strides[i]);
  }
  return readThrough(x, s, c.resultTypes[0]);
}

EvalResult reverse(const EvalContext& c) {
  const Tensor& x = c.operands[0];
  const auto dims = c.node.attrInts("dims");
  Affine s = dense(x.dims());
  for (int64_t i = 0; i < x.rank(); ++i) {
    if (!contains(dims, i) || x.dims()[i] == 0) continue;
    s.base += (x.dims()[i] - 1) * s.steps[i];
    s.steps[i] = -s.steps[i];
  }
  return readThrough(x, s, c.resultTypes[0]);
}

// The start operands of a dynamic slice, each clamped so that `sizes` fits inside `dims`.
std::vector<int64_t> clampedStarts(std::span<const Tensor> startOperands,
                                   const std::vector<int64_t>& dims,
                                   const std::vector<int64_t>& sizes) {
  std::vector<int64_t> starts;
  for (size_t i = 0; i < dims.size(); ++i)
    starts.push_back(std::clamp<int64_t>(startOperands[i].getInt(0), 0, dims[i] - sizes[i]));
  return starts;
}

EvalResult dynamicSlice(const EvalContext& c) {
  const Tensor& x = c.operands[0];
  const TensorType& rt = c.resultTypes[0];
  auto starts = clampedStarts(c.operands.subspan(1), x.dims(), rt.staticDims());
  Affine s = dense(x.dims());
  s.base = linearOffset(starts, s.steps);
  return readThrough(x, s, rt);
}

EvalResult dynamicUpdateSlice(const EvalContext& c) {
  const Tensor& x = c.operands[0];
  const Tensor& update = c.operands[1];
  Tensor out = x.clone();
  auto starts = clampedStarts(c.operands.subspan(2), x.dims(), update.dims());
  Affine d = dense(x.dims());
  d.base = linearOffset(starts, d.steps);
  copyBox(update, dense(update.dims()), out, d, update.dims());
  return one(std::move(out));
}

EvalResult reshape(const EvalContext& c) {
  // A copy, so that no two values of a run share bytes.
  return one(c.operands[0].clone().reshaped(c.resultTypes[0].staticDims()));
}

EvalResult concatenate(const EvalContext& c) {
  const int64_t dim = c.node.attrInt("dimension");
  Tensor out = makeResult(c.resultTypes[0]);
  Affine d = dense(out.dims());
  for (const Tensor& x : c.operands) {
    copyBox(x, dense(x.dims()), out, d, x.dims());
    d.base += x.dims()[dim] * d.steps[dim];
  }
  return one(std::move(out));
}

// Integer division rounding toward -inf / +inf (b > 0).
int64_t floorDiv(int64_t a, int64_t b) { return a / b - (a % b != 0 && a < 0); }
int64_t ceilDiv(int64_t a, int64_t b) { return -floorDiv(-a, b); }

EvalResult pad(const EvalContext& c) {
  const Tensor& x = c.operands[0];
  const int64_t r = x.rank();
  const auto low = c.node.attrInts("low");
  const auto interior = c.node.attrInts("interior", std::vector<int64_t>(r, 0));
  Tensor out = makeResult(c.resultTypes[0]);
  fill(out, c.operands[1]);
  // Source element s of a dim lands at low + s * (interior + 1); copy the sub-box of sources
  // that land inside the result (negative padding crops).
  Affine s = dense(x.dims()), d = dense(out.dims());
  std::vector<int64_t> box(r);
  for (int64_t i = 0; i < r; ++i) {
    const int64_t step = interior[i] + 1;
    const int64_t first = std::max<int64_t>(0, ceilDiv(-low[i], step));
    const int64_t last =
        std::min<int64_t>(x.dims()[i] - 1, floorDiv(out.dims()[i] - 1 - low[i], step));
    if (last < first) return one(std::move(out));
    box[i] = last - first + 1;
    s.base += first * s.steps[i];
    d.base += (low[i] + first * step) * d.steps[i];
    d.steps[i] *= step;
  }
  copyBox(x, s, out, d, box);
  return one(std::move(out));
}

// Reads component k of the index vector at batch position `batch` of an index tensor whose
// index vector lies along `vectorDim` (== rank: an implicit trailing dim of size 1).
int64_t indexComponent(const Tensor& indices, const std::vector<int64_t>& strides,
                       int64_t vectorDim, const std::vector<int64_t>& batch, int64_t k) {
  int64_t off = 0;
  size_t b = 0;
  for (int64_t i = 0; i < indices.rank(); ++i)
    off += (i == vectorDim ? k : batch[b++]) * strides[i];
  return indices.getInt(off);
}

EvalResult gather(const EvalContext& c) {
  const Tensor& x = c.operands[0];
  const Tensor& indices = c.operands[1];
  const Node& n = c.node;
  const auto offsetDims = n.attrInts("offset_dims");
  const auto collapsed = n.attrInts("collapsed_slice_dims");
  const auto startIndexMap = n.attrInts("start_index_map");
  const auto sliceSizes = n.attrInts("slice_sizes");
  const int64_t vectorDim = n.attrInt("index_vector_dim");
  Tensor out = makeResult(c.resultTypes[0]);
  const auto xStrides = rowMajorStrides(x.dims());
  const auto outStrides = rowMajorStrides(out.dims());
  const auto idxStrides = rowMajorStrides(indices.dims());

  // The window: operand dims not collapsed, in order, land on offset_dims in order.
  Affine s, d;
  std::vector<int64_t> box;
  size_t w = 0;
  for (int64_t i = 0; i < x.rank(); ++i) {
    if (contains(collapsed, i)) continue;
    box.push_back(sliceSizes[i]);
    s.steps.push_back(xStrides[i]);
    d.steps.push_back(outStrides[offsetDims[w++]]);
  }
  std::vector<int64_t> batchDims, batchShape;
  for (int64_t i = 0; i < out.rank(); ++i)
    if (!contains(offsetDims, i)) {
      batchDims.push_back(i);
      batchShape.push_back(out.dims()[i]);
    }
  int64_t batches = 1;
  for (int64_t e : batchShape) batches *= e;
  if (out.numElements() == 0) return one(std::move(out));
  std::vector<int64_t> batch(batchShape.size(), 0), start(x.rank(), 0);
  for (int64_t bi = 0; bi < batches; ++bi, nextIndex(batch, batchShape)) {
    for (size_t k = 0; k < startIndexMap.size(); ++k) {
      const int64_t od = startIndexMap[k];
      const int64_t v = indexComponent(indices, idxStrides, vectorDim, batch, int64_t(k));
      start[od] = std::clamp<int64_t>(v, 0, x.dims()[od] - sliceSizes[od]);  // StableHLO clamps
    }
    s.base = linearOffset(start, xStrides);
    d.base = 0;
    for (size_t j = 0; j < batchDims.size(); ++j) d.base += batch[j] * outStrides[batchDims[j]];
    copyBox(x, s, out, d, box);
  }
  return one(std::move(out));
}

// ---- scatter ----

constexpr bool isFloatD(DType d) {
  return d == DType::F16 || d == DType::BF16 || d == DType::F32 || d == DType::F64;
}

// The scatter combiner `kind` applied to (current, update): integers wrap, float max/min
// propagate NaN, bool add/mul act as or/and.
template <DType D>
Compute<D> combine(const std::string& kind, Compute<D> a, Compute<D> b) {
  using C = Compute<D>;
  if (kind == "none") return b;
  if constexpr (D == DType::Bool) {
    return (kind == "add" || kind == "max") ? (a || b) : (a && b);
  } else if constexpr (isFloatD(D)) {
    if (kind == "add") return a + b;
    if (kind == "mul") return a * b;
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) ? a : b;
    return kind == "max" ? std::max(a, b) : std::min(a, b);
  } else {
    if (kind == "add") return wrapAdd<C>(a, b);
    if (kind == "mul") return wrapMul<C>(a, b);
    return kind == "max" ? std::max(a, b) : std::min(a, b);
  }
}

// Everything scatter needs about its dims, worked out once.
struct ScatterPlan {
  std::vector<int64_t> scatterDims, scatterShape;  // update dims that index the scatter
  std::vector<int64_t> windowOperandDims;          // operand dims of the window, in order
  std::vector<int64_t> windowShape;                // extents of update_window_dims
  std::vector<int64_t> windowUpdateStrides, windowOutStrides;
};

ScatterPlan planScatter(const Node& n, const Tensor& x, const Tensor& updates) {
  const auto windowDims = n.attrInts("update_window_dims");
  const auto inserted = n.attrInts("inserted_window_dims");
  ScatterPlan p;
  const auto uStrides = rowMajorStrides(updates.dims());
  const auto xStrides = rowMajorStrides(x.dims());
  for (int64_t i = 0; i < updates.rank(); ++i)
    if (!contains(windowDims, i)) {
      p.scatterDims.push_back(i);
      p.scatterShape.push_back(updates.dims()[i]);
    }
  size_t w = 0;
  for (int64_t i = 0; i < x.rank(); ++i) {
    if (contains(inserted, i)) continue;
    p.windowOperandDims.push_back(i);
    p.windowShape.push_back(updates.dims()[windowDims[w]]);
    p.windowUpdateStrides.push_back(uStrides[windowDims[w++]]);
    p.windowOutStrides.push_back(xStrides[i]);
  }
  return p;
}

template <DType D>
void scatterTyped(const EvalContext& c, const ScatterPlan& p, Tensor& out) {
  const Tensor& indices = c.operands[1];
  const Tensor& updates = c.operands[2];
  const Node& n = c.node;
  const auto toOperand = n.attrInts("scatter_dims_to_operand_dims");
  const int64_t vectorDim = n.attrInt("index_vector_dim");
  const std::string& kind = n.attrEnum("reduction");
  const auto uStrides = rowMajorStrides(updates.dims());
  const auto xStrides = rowMajorStrides(out.dims());
  const auto idxStrides = rowMajorStrides(indices.dims());
  const auto* u = updates.data<Storage<D>>();
  auto* o = out.mutableData<Storage<D>>();
  int64_t points = 1, windowSize = 1;
  for (int64_t e : p.scatterShape) points *= e;
  for (int64_t e : p.windowShape) windowSize *= e;
  if (windowSize == 0) return;
  std::vector<int64_t> point(p.scatterShape.size(), 0), window(p.windowShape.size(), 0);
  // Scatter points in row-major order, so that with "none" the last duplicate wins.
  for (int64_t pi = 0; pi < points; ++pi, nextIndex(point, p.scatterShape)) {
    std::vector<int64_t> start(out.rank(), 0);
    for (size_t k = 0; k < toOperand.size(); ++k)
      start[toOperand[k]] = indexComponent(indices, idxStrides, vectorDim, point, int64_t(k));
    // A window that does not fit entirely inside the operand is skipped (as XLA does).
    bool inBounds = true;
    for (int64_t i = 0; i < out.rank(); ++i) {
      auto w = std::find(p.windowOperandDims.begin(), p.windowOperandDims.end(), i);
      int64_t extent =
          w == p.windowOperandDims.end() ? 1 : p.windowShape[w - p.windowOperandDims.begin()];
      inBounds &= start[i] >= 0 && start[i] <= out.dims()[i] - extent;
    }
    if (!inBounds) continue;
    int64_t uBase = 0;
    for (size_t j = 0; j < point.size(); ++j) uBase += point[j] * uStrides[p.scatterDims[j]];
    const int64_t oBase = linearOffset(start, xStrides);
    for (int64_t wi = 0; wi < windowSize; ++wi, nextIndex(window, p.windowShape)) {
      const int64_t ui = uBase + linearOffset(window, p.windowUpdateStrides);
      const int64_t oi = oBase + linearOffset(window, p.windowOutStrides);
      store<D>(o, oi, combine<D>(kind, load<D>(o, oi), load<D>(u, ui)));
    }
  }
}

// ---- resize ----

// Per output coordinate of one dim: `taps` source indices (clamped to the input) and weights.
struct Taps {
  int taps = 1;
  std::vector<int64_t> index;
  std::vector<double> weight;
};

// ONNX's cubic convolution weights for the taps at offsets -1, 0, 1, 2 from floor(x).
void cubicWeights(double r, double a, double w[4]) {
  auto far = [a](double t) { return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a; };  // 1 < t < 2
  auto near = [a](double t) { return ((a + 2) * t - (a + 3)) * t * t + 1; };       // t <= 1
  w[0] = far(r + 1);
  w[1] = near(r);
  w[2] = near(1 - r);
  w[3] = far(2 - r);
}

Taps resizeTaps(const Node& n, const ResizeDim& d) {
  const std::string& mode = n.attrEnum("mode");
  const std::string& ctm = n.attrEnum("coordinate_transformation_mode");
  Taps t;
  t.taps = mode == "nearest" ? 1 : mode == "linear" ? 2 : 4;
  auto clampIndex = [&](int64_t i) { return std::clamp<int64_t>(i, 0, d.in - 1); };
  for (int64_t j = 0; j < d.out; ++j) {
    if (mode == "nearest") {
      t.index.push_back(nearestResizeSource(ctm, n.attrEnum("nearest_mode"), d, j));
      t.weight.push_back(1.0);
      continue;
    }
    // Past [-3, in+2] every tap reads the same edge element, so clamping x there changes no
    // result and keeps the integer conversions below in range for any scale.
    const double x = std::clamp(resizeSourceCoordinate(ctm, d, double(j)), -3.0, double(d.in) + 2);
    const double fl = std::floor(x);
    const double r = x - fl;
    const auto base = static_cast<int64_t>(fl);
    double w[4] = {1 - r, r, 0, 0};
    int64_t first = base;
    if (mode == "cubic") {
      cubicWeights(r, n.attrFloat("cubic_coeff_a"), w);
      first = base - 1;
      if (n.attrBool("exclude_outside")) {
        double sum = 0;
        for (int k = 0; k < 4; ++k) {
          if (first + k < 0 || first + k >= d.in) w[k] = 0;
          sum += w[k];
        }
        for (int k = 0; k < 4; ++k) w[k] = sum != 0 ? w[k] / sum : 0;
      }
    }
    // Taps outside the input read the edge (ONNX pads the input with its edge values).
    for (int k = 0; k < t.taps; ++k) {
      t.index.push_back(clampIndex(first + k));
      t.weight.push_back(w[k]);
    }
  }
  return t;
}

// One separable pass: resamples dim `axis` of `cur` (dims `dims`) with `taps`.
std::vector<double> resamplePass(const std::vector<double>& cur, std::vector<int64_t>& dims,
                                 size_t axis, int64_t outLen, const Taps& taps) {
  int64_t outer = 1, inner = 1;
  for (size_t i = 0; i < axis; ++i) outer *= dims[i];
  for (size_t i = axis + 1; i < dims.size(); ++i) inner *= dims[i];
  const int64_t inLen = dims[axis];
  std::vector<double> next(static_cast<size_t>(outer * outLen * inner), 0.0);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < outLen; ++j) {
      double* dst = &next[static_cast<size_t>((o * outLen + j) * inner)];
      for (int k = 0; k < taps.taps; ++k) {
        const size_t tk = static_cast<size_t>(j * taps.taps + k);
        const double w = taps.weight[tk];
        const double* src = &cur[static_cast<size_t>((o * inLen + taps.index[tk]) * inner)];
        for (int64_t e = 0; e < inner; ++e) dst[e] += w * src[e];
      }
    }
  dims[axis] = outLen;
  return next;
}

EvalResult scatterKernel(const EvalContext& c) {
  const Tensor& x = c.operands[0];
  Tensor out = x.clone();
  ScatterPlan p = planScatter(c.node, x, c.operands[2]);
  dispatchDType(x.dtype(), [&](auto tag) { scatterTyped<decltype(tag)::value>(c, p, out); });
  return one(std::move(out));
}

EvalResult resizeKernel(const EvalContext& c) {
  const Tensor& x = c.operands[0];
  const TensorType& rt = c.resultTypes[0];
  const auto outDims = rt.staticDims();
  KILN_ASSIGN_OR_RETURN(std::vector<ResizeDim> dims,
                        resizeDims(x.dims(), outDims, getFloats(c.node.attrs(), "scales")));
  Tensor result = makeResult(rt);
  if (result.numElements() == 0) return one(std::move(result));
  if (c.node.attrEnum("mode") == "nearest") {
    // Nearest is a gather: one source index per output coordinate of each dim.
    std::vector<Taps> taps;
    for (const ResizeDim& d : dims) taps.push_back(resizeTaps(c.node, d));
    const auto inStrides = rowMajorStrides(x.dims());
    const size_t es = dtypeSize(x.dtype());
    std::vector<int64_t> idx(outDims.size(), 0);
    for (int64_t i = 0; i < result.numElements(); ++i, nextIndex(idx, outDims)) {
      int64_t off = 0;
      for (size_t k = 0; k < idx.size(); ++k)
        off += (dims[k].identity() ? idx[k] : taps[k].index[idx[k]]) * inStrides[k];
      std::memcpy(result.mutableBytes() + i * es, x.bytes() + off * es, es);
    }
    return one(std::move(result));
  }
  // Linear and cubic: separable passes in double, rounded once into the result dtype.
  std::vector<double> cur(static_cast<size_t>(x.numElements()));
  for (int64_t i = 0; i < x.numElements(); ++i) cur[i] = x.getDouble(i);
  std::vector<int64_t> curDims = x.dims();
  for (size_t k = 0; k < dims.size(); ++k)
    if (!dims[k].identity())
      cur = resamplePass(cur, curDims, k, dims[k].out, resizeTaps(c.node, dims[k]));
  for (int64_t i = 0; i < result.numElements(); ++i) result.setDouble(i, cur[i]);
  return one(std::move(result));
}

// ---- grid_sample ----
//
// ONNX GridSample (opset 16) as its reference implementation computes it: each grid point
// (x, y) in [-1, 1] is unnormalised to a source coordinate; an out-of-range coordinate
// (outside [-0.5, extent - 0.5], or [0, extent - 1] with align_corners) is clamped into
// [0, extent - 1] (border) or reflected into the range (reflection), one dimension at a time;
// then the taps of the mode are read, each tap outside the input read as 0 (zeros), the edge
// (border) or its reflection (reflection).

// Round half to even (numpy's rint) without depending on the floating-point environment.
double roundHalfEven(double x) {
  const double fl = std::floor(x);
  const double frac = x - fl;
  if (frac > 0.5) return fl + 1;
  if (frac < 0.5) return fl;
  return std::fmod(fl, 2.0) == 0 ? fl : fl + 1;
}

// Reflects x into [lo, hi] the way ONNX's reference does (by the near border, repeatedly).
double gsReflect(double x, double lo, double hi) {
  const double range = hi - lo;
  if (x >= lo && x <= hi) return x;
  if (!(range > 0)) return lo;
  const double dx = x < lo ? lo - x : x - hi;
  const double n = std::floor(dx / range);
  const double r = dx - n * range;
  const bool even = std::fmod(n, 2.0) == 0;
  const double y = x < lo ? (even ? lo + r : hi - r) : (even ? hi - r : lo + r);
  // For huge |x| the remainder above is inexact; stay inside the range regardless.
  return std::clamp(y, lo, hi);
}

struct GridAxis {
  int64_t extent;
  double lo, hi;  // the in-range interval of source coordinates
};

EvalResult gridSampleKernel(const EvalContext& c) {
  const Tensor& x = c.operands[0];
  const Tensor& grid = c.operands[1];
  const std::string& mode = c.node.attrEnum("mode");
  const std::string& padding = c.node.attrEnum("padding_mode");
  const bool alignCorners = c.node.attrBool("align_corners");
  const int64_t n = x.dims()[0], ch = x.dims()[1], hIn = x.dims()[2], wIn = x.dims()[3];
  const int64_t hOut = grid.dims()[1], wOut = grid.dims()[2];
  Tensor result = makeResult(c.resultTypes[0]);
  if (result.numElements() == 0) return one(std::move(result));
  if ((hIn == 0 || wIn == 0) && padding != "zeros")
    return Status::error("grid_sample with padding_mode '" + padding +
                         "' cannot sample an empty input");
  auto axis = [&](int64_t extent) {
    return alignCorners ? GridAxis{extent, 0.0, double(extent - 1)}
                        : GridAxis{extent, -0.5, double(extent) - 0.5};
  };
  const GridAxis ax = axis(wIn), ay = axis(hIn);
  const bool reflect = padding == "reflection", border = padding == "border";
  // The source coordinate of normalised coordinate g along `a`, after the padding mode.
  auto source = [&](double g, const GridAxis& a) {
    double v =
        alignCorners ? (g + 1) / 2 * double(a.extent - 1) : ((g + 1) * double(a.extent) - 1) / 2;
    if (mode == "nearest") v = roundHalfEven(v);
    if (v < a.lo || v > a.hi) {
      if (border) v = std::clamp(v, 0.0, double(a.extent - 1));
      else if (reflect) v = std::isinf(v) ? std::nan("") : gsReflect(v, a.lo, a.hi);
    }
    // Past [-3, extent + 2] every tap is outside the input (zeros), so clamping there changes
    // no result and keeps the integer conversions in range.
    return std::clamp(v, -3.0, double(a.extent) + 2);
  };
  // The source index a tap at integer position i along `a` reads, or -1 for a zero.
  auto tapIndex = [&](int64_t i, const GridAxis& a) -> int64_t {
    if (border) return std::clamp<int64_t>(i, 0, a.extent - 1);
    if (reflect) {
      auto r = static_cast<int64_t>(gsReflect(double(i), a.lo, a.hi));
      return std::clamp<int64_t>(r, 0, a.extent - 1);
    }
    return i >= 0 && i < a.extent ? i : -1;
  };
  const int taps = mode == "nearest" ? 1 : mode == "bilinear" ? 2 : 4;
  // Taps and weights of coordinate v along `a`.
  auto weights = [&](double v, const GridAxis& a, int64_t idx[4], double w[4]) {
    const double fl = std::floor(v);
    const auto base = static_cast<int64_t>(fl);
    const double r = v - fl;
    int64_t first = base;
    if (taps == 1) {
      w[0] = 1;
    } else if (taps == 2) {
      w[0] = 1 - r;
      w[1] = r;
    } else {
      cubicWeights(r, -0.75, w);
      first = base - 1;
    }
    for (int k = 0; k < taps; ++k) idx[k] = tapIndex(first + k, a);
  };
  std::vector<double> in(static_cast<size_t>(x.numElements()));
  for (int64_t i = 0; i < x.numElements(); ++i) in[i] = x.getDouble(i);
  const int64_t plane = hIn * wIn;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oy = 0; oy < hOut; ++oy)
      for (int64_t ox = 0; ox < wOut; ++ox) {
        const int64_t g = ((b * hOut + oy) * wOut + ox) * 2;
        const double sx = source(grid.getDouble(g), ax);
        const double sy = source(grid.getDouble(g + 1), ay);
        const bool nan = std::isnan(sx) || std::isnan(sy);
        int64_t ix[4] = {}, iy[4] = {};
        double wx[4] = {}, wy[4] = {};
        if (!nan) {
          weights(sx, ax, ix, wx);
          weights(sy, ay, iy, wy);
        }
        for (int64_t k = 0; k < ch; ++k) {
          const double* src = in.data() + (b * ch + k) * plane;
          double v = 0;
          if (nan) v = std::nan("");
          else
            for (int i = 0; i < taps; ++i) {
              if (iy[i] < 0) continue;
              double row = 0;
              for (int j = 0; j < taps; ++j)
                if (ix[j] >= 0) row += wx[j] * src[iy[i] * wIn + ix[j]];
              v += wy[i] * row;
            }
          result.setDouble(((b * ch + k) * hOut + oy) * wOut + ox, v);
        }
      }
  return one(std::move(result));
}

}  // namespace

EvalResult evalDataMovement(const EvalContext& c) {
  switch (c.node.op()) {
    case OpCode::BroadcastInDim: return broadcastInDim(c);
    case OpCode::Reshape: return reshape(c);
    case OpCode::Transpose: return transpose(c);
    case OpCode::Slice: return slice(c);
    case OpCode::DynamicSlice: return dynamicSlice(c);
    case OpCode::DynamicUpdateSlice: return dynamicUpdateSlice(c);
    case OpCode::Concatenate: return concatenate(c);
    case OpCode::Pad: return pad(c);
    case OpCode::Gather: return gather(c);
    case OpCode::Scatter: return scatterKernel(c);
    case OpCode::Reverse: return reverse(c);
    case OpCode::Resize: return resizeKernel(c);
    case OpCode::GridSample: return gridSampleKernel(c);
    // The data as it is: the size is for the program's boundary (interpret trims outputs).
    case OpCode::SetDimensionSize: return std::vector<Tensor>{c.operands[0]};
    case OpCode::GetDimensionSize: {
      Tensor size(DType::I64, {});
      size.setInt(0, c.operands[0].dims()[static_cast<size_t>(c.node.attrInt("dimension"))]);
      return std::vector<Tensor>{std::move(size)};
    }
    default: break;
  }
  return Status::error(std::string(opName(c.node.op())) + " is not a data-movement op");
}

}  // namespace kiln::interp
