// Reference kernels of the reductions and scans: reduce, argmax/argmin, reduce_window, cumsum,
// sort and top_k (semantics in docs/ops.md).
//
// Sums and products of f16/bf16 accumulate in f32 and f32 in double; integers wrap. Max and min
// propagate NaN. Selection kernels (argmax, sort, top_k) compare values exactly as stored.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "interp/eval.h"
#include "interp/eval_util.h"

namespace kiln::interp {
namespace {

// Accumulator of sums and products: f32 in double, f16/bf16 in f32, integers in their own type.
template <DType D>
using Acc = std::conditional_t<D == DType::F32, double, Compute<D>>;

template <typename T>
bool isNaN(T v) {
  if constexpr (std::is_floating_point_v<T>) return std::isnan(v);
  else return false;
}

template <typename T>
T addWrap(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) return a || b;
  else if constexpr (std::is_integral_v<T>) return wrapAdd(a, b);
  else return a + b;
}

template <typename T>
T mulWrap(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) return a && b;
  else if constexpr (std::is_integral_v<T>) return wrapMul(a, b);
  else return a * b;
}

// NaN-propagating max/min: once the running value is NaN it stays NaN.
template <typename T>
T maxNaN(T a, T b) {
  if (isNaN(a)) return a;
  return isNaN(b) || b > a ? b : a;
}
template <typename T>
T minNaN(T a, T b) {
  if (isNaN(a)) return a;
  return isNaN(b) || b < a ? b : a;
}

// A kernel error; the driver puts the node's name and location in front.
Status fail(const EvalContext&, const std::string& msg) { return Status::error(msg); }

// The kernels compute result dims from the operand values; a result type that disagrees (possible
// only when symbolic dims were bound inconsistently) is reported rather than trusted.
StatusOr<Tensor> newResult(const EvalContext& c, size_t i, DType dtype,
                           const std::vector<int64_t>& dims) {
  TensorType t = TensorType::of(dtype, dims);
  if (i < c.resultTypes.size() && c.resultTypes[i] != t)
    return fail(c, "operands give result type " + t.str() + " but the node declares " +
                       c.resultTypes[i].str());
  return Tensor::create(dtype, dims);
}

int64_t product(const std::vector<int64_t>& d, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= d[i];
  return p;
}

// A tensor viewed as [outer, n, inner] around one axis.
struct AxisView {
  int64_t outer, n, inner;
};
AxisView viewAround(const std::vector<int64_t>& dims, int64_t axis) {
  size_t a = static_cast<size_t>(axis);
  return {product(dims, 0, a), dims[a], product(dims, a + 1, dims.size())};
}

// ---------------------------------------------------------------------------------------------
// reduce

enum class ReduceKind { Sum, Prod, Max, Min, And, Or };

ReduceKind reduceKind(const std::string& s) {
  if (s == "sum") return ReduceKind::Sum;
  if (s == "prod") return ReduceKind::Prod;
  if (s == "max") return ReduceKind::Max;
  if (s == "min") return ReduceKind::Min;
  if (s == "and") return ReduceKind::And;
  KILN_CHECK(s == "or", "unknown reduce kind " + s);
  return ReduceKind::Or;
}

// Identity of `kind` in accumulator type T (lowest/highest finite for integer max/min).
template <typename T>
T reduceIdentity(ReduceKind kind) {
  using L = std::numeric_limits<T>;
  switch (kind) {
    case ReduceKind::Sum:
    case ReduceKind::Or: return T(0);
    case ReduceKind::Prod:
    case ReduceKind::And: return T(1);
    case ReduceKind::Max: return L::has_infinity ? -L::infinity() : L::lowest();
    case ReduceKind::Min: return L::has_infinity ? L::infinity() : L::max();
  }
  return T(0);
}

template <DType D>
void reduceKernel(const Tensor& x, Tensor& out, ReduceKind kind,
                  const std::vector<int64_t>& outStride) {
  using T = Acc<D>;
  std::vector<T> acc(static_cast<size_t>(out.numElements()), reduceIdentity<T>(kind));
  const Storage<D>* in = x.data<Storage<D>>();
  auto run = [&](auto combine) {
    const std::vector<int64_t>& dims = x.dims();
    std::vector<int64_t> idx(dims.size(), 0);
    int64_t o = 0;
    for (int64_t i = 0; i < x.numElements(); ++i) {
      acc[o] = combine(acc[o], static_cast<T>(load<D>(in, i)));
      // Odometer step that keeps the output offset `o` in sync with idx.
      for (size_t d = dims.size(); d-- > 0;) {
        o += outStride[d];
        if (++idx[d] < dims[d]) break;
        o -= outStride[d] * dims[d];
        idx[d] = 0;
      }
    }
  };
  switch (kind) {
    case ReduceKind::Sum: run([](T a, T b) { return addWrap(a, b); }); break;
    case ReduceKind::Prod: run([](T a, T b) { return mulWrap(a, b); }); break;
    case ReduceKind::Max: run([](T a, T b) { return maxNaN(a, b); }); break;
    case ReduceKind::Min: run([](T a, T b) { return minNaN(a, b); }); break;
    case ReduceKind::And: run([](T a, T b) { return T(a && b); }); break;
    case ReduceKind::Or: run([](T a, T b) { return T(a || b); }); break;
  }
  Storage<D>* o = out.mutableData<Storage<D>>();
  for (size_t i = 0; i < acc.size(); ++i)
    store<D>(o, static_cast<int64_t>(i), static_cast<Compute<D>>(acc[i]));
}

EvalResult evalReduce(const EvalContext& c) {
  const Tensor& x = c.operands[0];
  std::vector<int64_t> dims = c.node.attrInts("dims");
  std::vector<bool> reduced(static_cast<size_t>(x.rank()), false);
  for (int64_t d : dims) {
    if (d < 0 || d >= x.rank()) return fail(c, "dims entry " + std::to_string(d) + " out of range");
    reduced[static_cast<size_t>(d)] = true;
  }
  std::vector<int64_t> outDims;
  for (int64_t i = 0; i < x.rank(); ++i)
    if (!reduced[static_cast<size_t>(i)]) outDims.push_back(x.dims()[static_cast<size_t>(i)]);
  KILN_ASSIGN_OR_RETURN(Tensor out, newResult(c, 0, x.dtype(), outDims));
  // Offset step in the output for each operand dim: 0 along reduced dims.
  std::vector<int64_t> outRowStrides = rowMajorStrides(outDims), outStride(reduced.size(), 0);
  for (size_t i = 0, j = 0; i < reduced.size(); ++i)
    if (!reduced[i]) outStride[i] = outRowStrides[j++];
  ReduceKind kind = reduceKind(c.node.attrEnum("kind"));
  dispatchDType(x.dtype(),
                [&](auto tag) { reduceKernel<decltype(tag)::value>(x, out, kind, outStride); });
  return std::vector<Tensor>{std::move(out)};
}

// ---------------------------------------------------------------------------------------------
// argmax / argmin

// Index of the best element of a strided line: ties go to the first (last with selectLast); a NaN
// is better than any number and the first NaN wins.
template <typename T>
int64_t bestIndex(const std::vector<T>& line, bool isMax, bool selectLast) {
  int64_t best = 0;
  for (int64_t j = 1; j < static_cast<int64_t>(line.size()); ++j) {
    T b = line[static_cast<size_t>(best)], v = line[static_cast<size_t>(j)];
    if (isNaN(b)) break;
    if (isNaN(v) || (isMax ? v > b : v < b) || (selectLast && v == b)) best = j;
  }
  return best;
}

EvalResult evalArgReduce(const EvalContext& c) {
  const Tensor& x = c.operands[0];
  int64_t axis = c.node.attrInt("axis");
  if (axis < 0 || axis >= x.rank()) return fail(c, "axis out of range");
  std::vector<int64_t> outDims = x.dims();
  outDims.erase(outDims.begin() + axis);
  KILN_ASSIGN_OR_RETURN(Tensor out, newResult(c, 0, DType::I64, outDims));
  AxisView v = viewAround(x.dims(), axis);
  if (v.n == 0 && out.numElements() > 0)
    return fail(c,
                "axis " + std::to_string(axis) + " has extent 0, so there is no index to return");
  bool isMax = c.node.op() == OpCode::ArgMax;
  bool selectLast = c.node.attrBool("select_last_index");
  int64_t* o = out.mutableData<int64_t>();
  dispatchDType(x.dtype(), [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    const Storage<D>* in = x.data<Storage<D>>();
    std::vector<Compute<D>> line(static_cast<size_t>(v.n));
    for (int64_t a = 0; a < v.outer; ++a)
      for (int64_t i = 0; i < v.inner; ++i) {
        for (int64_t j = 0; j < v.n; ++j)
          line[static_cast<size_t>(j)] = load<D>(in, (a * v.n + j) * v.inner + i);
        o[a * v.inner + i] = bestIndex(line, isMax, selectLast);
      }
  });
  return std::vector<Tensor>{std::move(out)};
}

// ---------------------------------------------------------------------------------------------
// reduce_window

// One dimension of a window reduction.
struct WindowDim {
  int64_t in, window, stride, baseDil, winDil, lo, hi;
};

// Extents beyond this are refused: the arithmetic below then cannot overflow int64.
constexpr int64_t kWindowLimit = int64_t(1) << 60;

// Window positions visited per dimension beyond this are refused rather than ground through
// (only reachable with huge base dilations or windows far beyond any model's).
constexpr int64_t kWindowWorkLimit = int64_t(1) << 32;

// a * b + c, or nullopt when it leaves [-kWindowLimit, kWindowLimit].
std::optional<int64_t> mulAdd(int64_t a, int64_t b, int64_t c) {
  int64_t p, s;
  if (__builtin_mul_overflow(a, b, &p) || __builtin_add_overflow(p, c, &s)) return std::nullopt;
  if (s > kWindowLimit || s < -kWindowLimit) return std::nullopt;
  return s;
}

int64_t floorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }
int64_t ceilDiv(int64_t a, int64_t b) { return -floorDiv(-a, b); }

// For each output position o of one dimension, the operand indices its window reads, in window
// order. Padding and base-dilation holes are left out: they hold the identity of the reduction,
// so skipping them gives the same result, and a huge padded window costs nothing.
struct WindowTaps {
  int64_t out = 0;
  std::vector<int64_t> begin;  // out + 1 entries into `index`
  std::vector<int64_t> index;
};

StatusOr<WindowTaps> windowTaps(const WindowDim& w) {
  auto dilIn = w.in > 0 ? mulAdd(w.in - 1, w.baseDil, 1) : std::optional<int64_t>(0);
  auto dw = mulAdd(w.window - 1, w.winDil, 1);
  std::optional<int64_t> padded;
  if (dilIn) padded = mulAdd(1, *dilIn, w.lo);
  if (padded) padded = mulAdd(1, *padded, w.hi);
  if (!dilIn || !dw || !padded) return Status::error("window arithmetic overflows");
  WindowTaps t;
  t.out = *padded < *dw ? 0 : (*padded - *dw) / w.stride + 1;
  t.begin.push_back(0);
  int64_t work = 0;
  for (int64_t o = 0; o < t.out; ++o) {
    // Positions p = o*stride + k*winDil - lo inside [0, dilIn) with p a multiple of baseDil.
    int64_t shift = o * w.stride - w.lo;
    int64_t kLo = std::max<int64_t>(0, ceilDiv(-shift, w.winDil));
    int64_t kHi = std::min<int64_t>(w.window - 1, floorDiv(*dilIn - 1 - shift, w.winDil));
    work += std::max<int64_t>(0, kHi - kLo + 1);
    if (work > kWindowWorkLimit) return Status::error("window too large to evaluate");
    for (int64_t k = kLo; k <= kHi; ++k) {
      int64_t p = shift + k * w.winDil;
      if (p % w.baseDil == 0) t.index.push_back(p / w.baseDil);
    }
    t.begin.push_back(static_cast<int64_t>(t.index.size()));
  }
  return t;
}

template <DType D>
void reduceWindowKernel(const Tensor& x, Tensor& out, ReduceKind kind,
                        const std::vector<WindowTaps>& taps) {
  using T = Acc<D>;
  const Storage<D>* in = x.data<Storage<D>>();
  Storage<D>* o = out.mutableData<Storage<D>>();
  std::vector<int64_t> inStride = rowMajorStrides(x.dims()), outDims = out.dims();
  size_t rank = outDims.size();
  std::vector<int64_t> oi(rank, 0), tap(rank, 0), tapEnd(rank, 0);
  for (int64_t flat = 0; flat < out.numElements(); ++flat, nextIndex(oi, outDims)) {
    T acc = reduceIdentity<T>(kind);
    bool empty = false;
    for (size_t d = 0; d < rank; ++d) {
      tap[d] = taps[d].begin[static_cast<size_t>(oi[d])];
      tapEnd[d] = taps[d].begin[static_cast<size_t>(oi[d]) + 1];
      empty |= tap[d] == tapEnd[d];
    }
    while (!empty) {
      int64_t off = 0;
      for (size_t d = 0; d < rank; ++d)
        off += taps[d].index[static_cast<size_t>(tap[d])] * inStride[d];
      T v = static_cast<T>(load<D>(in, off));
      acc = kind == ReduceKind::Sum   ? addWrap(acc, v)
            : kind == ReduceKind::Max ? maxNaN(acc, v)
                                      : minNaN(acc, v);
      size_t d = rank;
      while (d-- > 0) {  // odometer over the taps of every dim
        if (++tap[d] < tapEnd[d]) break;
        tap[d] = taps[d].begin[static_cast<size_t>(oi[d])];
      }
      if (d == static_cast<size_t>(-1)) break;
    }
    store<D>(o, flat, static_cast<Compute<D>>(acc));
  }
}

EvalResult evalReduceWindow(const EvalContext& c) {
  const Tensor& x = c.operands[0];
  size_t r = static_cast<size_t>(x.rank());
  auto list = [&](const char* name, int64_t fill) {
    return c.node.attrInts(name, std::vector<int64_t>(r, fill));
  };
  std::vector<int64_t> window = list("window_dimensions", 1), strides = list("window_strides", 1),
                       baseDil = list("base_dilations", 1), winDil = list("window_dilations", 1),
                       lo = list("padding_low", 0), hi = list("padding_high", 0);
  for (const auto* l : {&window, &strides, &baseDil, &winDil, &lo, &hi})
    if (l->size() != r) return fail(c, "window attributes need one entry per dimension");
  std::vector<WindowTaps> taps;
  std::vector<int64_t> outDims;
  for (size_t d = 0; d < r; ++d) {
    WindowDim w{x.dims()[d], window[d], strides[d], baseDil[d], winDil[d], lo[d], hi[d]};
    if (w.window < 1 || w.stride < 1 || w.baseDil < 1 || w.winDil < 1)
      return fail(c, "window sizes, strides and dilations must be positive");
    auto t = windowTaps(w);
    if (!t) return fail(c, "dimension " + std::to_string(d) + ": " + t.status().message());
    outDims.push_back(t->out);
    taps.push_back(std::move(*t));
  }
  KILN_ASSIGN_OR_RETURN(Tensor out, newResult(c, 0, x.dtype(), outDims));
  ReduceKind kind = reduceKind(c.node.attrEnum("kind"));
  if (kind != ReduceKind::Sum && kind != ReduceKind::Max && kind != ReduceKind::Min)
    return fail(c, "kind must be sum, max or min");
  if (x.dtype() == DType::Bool) return fail(c, "operand must be numeric");
  dispatchDType(x.dtype(),
                [&](auto tag) { reduceWindowKernel<decltype(tag)::value>(x, out, kind, taps); });
  return std::vector<Tensor>{std::move(out)};
}

// ---------------------------------------------------------------------------------------------
// cumsum

EvalResult evalCumsum(const EvalContext& c) {
  const Tensor& x = c.operands[0];
  int64_t axis = c.node.attrInt("axis");
  if (axis < 0 || axis >= x.rank()) return fail(c, "axis out of range");
  if (x.dtype() == DType::Bool) return fail(c, "operand must be numeric");
  KILN_ASSIGN_OR_RETURN(Tensor out, newResult(c, 0, x.dtype(), x.dims()));
  bool exclusive = c.node.attrBool("exclusive"), reverse = c.node.attrBool("reverse");
  AxisView v = viewAround(x.dims(), axis);
  dispatchDType(x.dtype(), [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    const Storage<D>* in = x.data<Storage<D>>();
    Storage<D>* o = out.mutableData<Storage<D>>();
    for (int64_t a = 0; a < v.outer; ++a)
      for (int64_t i = 0; i < v.inner; ++i) {
        Acc<D> acc = 0;
        for (int64_t s = 0; s < v.n; ++s) {
          int64_t j = reverse ? v.n - 1 - s : s;
          int64_t off = (a * v.n + j) * v.inner + i;
          Acc<D> xj = static_cast<Acc<D>>(load<D>(in, off));
          if (!exclusive) acc = addWrap(acc, xj);
          store<D>(o, off, static_cast<Compute<D>>(acc));
          if (exclusive) acc = addWrap(acc, xj);
        }
      }
  });
  return std::vector<Tensor>{std::move(out)};
}

// ---------------------------------------------------------------------------------------------
// sort and top_k

// Stable order of each line along `axis`: ascending with NaN last, or descending with NaN first.
// Writes the first `k` of each line's order as values (copied bit for bit) and i64 indices.
void sortLines(const Tensor& x, int64_t axis, bool descending, int64_t k, Tensor& values,
               Tensor& indices) {
  AxisView v = viewAround(x.dims(), axis);
  size_t esize = dtypeSize(x.dtype());
  const std::byte* in = x.bytes();
  std::byte* ov = values.mutableBytes();
  int64_t* oi = indices.mutableData<int64_t>();
  dispatchDType(x.dtype(), [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    const Storage<D>* typed = x.data<Storage<D>>();
    // (value, index) pairs ordered by value, then index: the order a stable sort gives, as a
    // total order that std::sort and std::partial_sort (top_k's k first: O(n log k)) keep.
    using Item = std::pair<Compute<D>, int64_t>;
    std::vector<Item> line(static_cast<size_t>(v.n));
    auto before = [&](const Item& a, const Item& b) {
      const Compute<D> p = a.first, q = b.first;
      const bool pq = descending ? (isNaN(p) ? !isNaN(q) : (!isNaN(q) && p > q))
                                 : (isNaN(p) ? false : (isNaN(q) || p < q));
      if (pq) return true;
      const bool qp = descending ? (isNaN(q) ? !isNaN(p) : (!isNaN(p) && q > p))
                                 : (isNaN(q) ? false : (isNaN(p) || q < p));
      return !qp && a.second < b.second;
    };
    for (int64_t a = 0; a < v.outer; ++a)
      for (int64_t i = 0; i < v.inner; ++i) {
        for (int64_t j = 0; j < v.n; ++j)
          line[static_cast<size_t>(j)] = {load<D>(typed, (a * v.n + j) * v.inner + i), j};
        if (k < v.n) std::partial_sort(line.begin(), line.begin() + k, line.end(), before);
        else std::sort(line.begin(), line.end(), before);
        for (int64_t j = 0; j < k; ++j) {
          int64_t src = (a * v.n + line[static_cast<size_t>(j)].second) * v.inner + i;
          int64_t dst = (a * k + j) * v.inner + i;
          std::memcpy(ov + dst * esize, in + src * esize, esize);
          oi[dst] = line[static_cast<size_t>(j)].second;
        }
      }
  });
}

EvalResult evalSortOrTopK(const EvalContext& c) {
  const Tensor& x = c.operands[0];
  bool isSort = c.node.op() == OpCode::Sort;
  int64_t axis = c.node.attrInt(isSort ? "dimension" : "axis");
  if (axis < 0 || axis >= x.rank()) return fail(c, "axis out of range");
  int64_t n = x.dims()[static_cast<size_t>(axis)];
  int64_t k = isSort ? n : c.node.attrInt("k");
  if (k < 0 || k > n)
    return fail(c,
                "k = " + std::to_string(k) + " does not fit dimension extent " + std::to_string(n));
  bool descending = isSort ? c.node.attrBool("descending") : c.node.attrBool("largest");
  std::vector<int64_t> outDims = x.dims();
  outDims[static_cast<size_t>(axis)] = k;
  KILN_ASSIGN_OR_RETURN(Tensor values, newResult(c, 0, x.dtype(), outDims));
  KILN_ASSIGN_OR_RETURN(Tensor indices, newResult(c, 1, DType::I64, outDims));
  sortLines(x, axis, descending, k, values, indices);
  return std::vector<Tensor>{std::move(values), std::move(indices)};
}

// The indices of x's nonzero elements in row-major order, a column each, then zeros up to the
// bound; and their count. NaN is nonzero, as in numpy.
EvalResult evalNonZero(const EvalContext& c) {
  const Tensor& x = c.operands[0];
  const int64_t rank = x.rank(), bound = x.numElements();
  KILN_ASSIGN_OR_RETURN(Tensor idx, newResult(c, 0, DType::I64, {rank, bound}));
  KILN_ASSIGN_OR_RETURN(Tensor count, newResult(c, 1, DType::I64, {}));
  for (int64_t i = 0; i < rank * bound; ++i) idx.setInt(i, 0);
  const std::vector<int64_t> strides = x.strides();
  int64_t n = 0;
  for (int64_t i = 0; i < bound; ++i) {
    if (x.getDouble(i) == 0) continue;
    for (int64_t d = 0; d < rank; ++d) {
      const auto du = static_cast<size_t>(d);
      idx.setInt(d * bound + n, i / strides[du] % x.dims()[du]);
    }
    ++n;
  }
  count.setInt(0, n);
  return std::vector<Tensor>{std::move(idx), std::move(count)};
}

}  // namespace

EvalResult evalReduction(const EvalContext& c) {
  switch (c.node.op()) {
    case OpCode::Reduce: return evalReduce(c);
    case OpCode::ArgMax:
    case OpCode::ArgMin: return evalArgReduce(c);
    case OpCode::ReduceWindow: return evalReduceWindow(c);
    case OpCode::Cumsum: return evalCumsum(c);
    case OpCode::Sort:
    case OpCode::TopK: return evalSortOrTopK(c);
    case OpCode::NonZero: return evalNonZero(c);
    default: break;
  }
  return fail(c, std::string(opName(c.node.op())) + " is not a reduction");
}

}  // namespace kiln::interp
