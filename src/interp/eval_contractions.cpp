// Reference kernels of the contractions: dot_general and convolution (StableHLO semantics, see
// docs/ops.md).
//
// Both kernels convert the operands once into the accumulator type (double for f32 and f64,
// float for f16/bf16, the integer type itself for integers, whose sums and products wrap) and
// round once on store. The convolution precomputes, per spatial dimension, which input element
// each (kernel tap, output position) pair reads, so the inner loop is a gather-multiply-add
// over one output row with no index arithmetic.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "interp/eval.h"
#include "interp/eval_util.h"

namespace kiln::interp {
namespace {

// Accumulator: f32 in double (allowed by the op contract, and more accurate), f16/bf16 in f32,
// integers in their own type with wrapping arithmetic. Bool operands are refused before any
// kernel runs; uint8_t only keeps std::vector<bool> out of the instantiations.
template <DType D>
using Acc = std::conditional_t<D == DType::F32, double,
                               std::conditional_t<D == DType::Bool, uint8_t, Compute<D>>>;

template <typename T>
T mulAddAcc(T acc, T a, T b) {
  if constexpr (std::is_integral_v<T>) return wrapAdd(acc, wrapMul(a, b));
  else return acc + a * b;
}

template <DType D>
std::vector<Acc<D>> loadAll(const Tensor& t) {
  std::vector<Acc<D>> v(static_cast<size_t>(t.numElements()));
  const Storage<D>* p = t.data<Storage<D>>();
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<Acc<D>>(load<D>(p, static_cast<int64_t>(i)));
  return v;
}

// A kernel error; the driver puts the node's name and location in front.
Status fail(const EvalContext&, const std::string& msg) { return Status::error(msg); }

// The kernels compute result dims from the operand values; a result type that disagrees (possible
// only when symbolic dims were bound inconsistently) is reported rather than trusted.
StatusOr<Tensor> newResult(const EvalContext& c, DType dtype, const std::vector<int64_t>& dims) {
  TensorType t = TensorType::of(dtype, dims);
  if (!c.resultTypes.empty() && c.resultTypes[0] != t)
    return fail(c, "operands give result type " + t.str() + " but the node declares " +
                       c.resultTypes[0].str());
  return Tensor::create(dtype, dims);
}

// Element offsets of every index of the sub-space spanned by `axes` (row-major in the order of
// `axes`) of a tensor with the given dims and strides.
std::vector<int64_t> subspaceOffsets(const std::vector<int64_t>& dims,
                                     const std::vector<int64_t>& strides,
                                     const std::vector<int64_t>& axes) {
  std::vector<int64_t> ext, str;
  int64_t n = 1;
  for (int64_t a : axes) {
    ext.push_back(dims[static_cast<size_t>(a)]);
    str.push_back(strides[static_cast<size_t>(a)]);
    n *= ext.back();
  }
  std::vector<int64_t> offs;
  offs.reserve(static_cast<size_t>(n));
  std::vector<int64_t> idx(ext.size(), 0);
  if (n > 0) {
    do {
      offs.push_back(linearOffset(idx, str));
    } while (nextIndex(idx, ext));
  }
  return offs;
}

// ---------------------------------------------------------------------------------------------
// dot_general

struct DotPlan {
  // Offsets into lhs / rhs of each batch, free and contracting index.
  std::vector<int64_t> lhsBatch, rhsBatch, lhsFree, rhsFree, lhsContract, rhsContract;
};

template <DType D>
void dotKernel(const Tensor& lhs, const Tensor& rhs, const DotPlan& p, Tensor& out) {
  using T = Acc<D>;
  std::vector<T> a = loadAll<D>(lhs), b = loadAll<D>(rhs);
  size_t m = p.lhsFree.size(), n = p.rhsFree.size();
  std::vector<T> row(n);
  Storage<D>* o = out.mutableData<Storage<D>>();
  int64_t flat = 0;
  for (size_t bi = 0; bi < p.lhsBatch.size(); ++bi)
    for (size_t mi = 0; mi < m; ++mi) {
      std::fill(row.begin(), row.end(), T(0));
      const T* aRow = a.data() + p.lhsBatch[bi] + p.lhsFree[mi];
      for (size_t k = 0; k < p.lhsContract.size(); ++k) {
        T av = aRow[p.lhsContract[k]];
        const T* bRow = b.data() + p.rhsBatch[bi] + p.rhsContract[k];
        for (size_t ni = 0; ni < n; ++ni) row[ni] = mulAddAcc(row[ni], av, bRow[p.rhsFree[ni]]);
      }
      for (size_t ni = 0; ni < n; ++ni) store<D>(o, flat++, static_cast<Compute<D>>(row[ni]));
    }
}

// The dims of `rank` that are in neither list.
std::vector<int64_t> freeDims(int64_t rank, const std::vector<int64_t>& a,
                              const std::vector<int64_t>& b) {
  std::vector<int64_t> f;
  for (int64_t i = 0; i < rank; ++i)
    if (std::find(a.begin(), a.end(), i) == a.end() && std::find(b.begin(), b.end(), i) == b.end())
      f.push_back(i);
  return f;
}

Status checkDotDims(const EvalContext& c, const std::vector<int64_t>& l,
                    const std::vector<int64_t>& r) {
  const Tensor &lhs = c.operands[0], &rhs = c.operands[1];
  if (l.size() != r.size()) return fail(c, "lhs and rhs dimension lists differ in length");
  for (size_t i = 0; i < l.size(); ++i) {
    if (l[i] < 0 || l[i] >= lhs.rank() || r[i] < 0 || r[i] >= rhs.rank())
      return fail(c, "batch or contracting dimension out of range");
    if (lhs.dims()[static_cast<size_t>(l[i])] != rhs.dims()[static_cast<size_t>(r[i])])
      return fail(c, "lhs dimension " + std::to_string(l[i]) + " and rhs dimension " +
                         std::to_string(r[i]) + " have different extents");
  }
  return Status::ok();
}

EvalResult evalDotGeneral(const EvalContext& c) {
  const Tensor &lhs = c.operands[0], &rhs = c.operands[1];
  if (lhs.dtype() != rhs.dtype() || lhs.dtype() == DType::Bool)
    return fail(c, "operands must share a numeric dtype");
  const Node& n = c.node;
  std::vector<int64_t> lb = n.attrInts("lhs_batch"), rb = n.attrInts("rhs_batch"),
                       lc = n.attrInts("lhs_contracting"), rc = n.attrInts("rhs_contracting");
  KILN_RETURN_IF_ERROR(checkDotDims(c, lb, rb));
  KILN_RETURN_IF_ERROR(checkDotDims(c, lc, rc));
  std::vector<int64_t> lf = freeDims(lhs.rank(), lb, lc), rf = freeDims(rhs.rank(), rb, rc);
  std::vector<int64_t> outDims;
  for (int64_t d : lb) outDims.push_back(lhs.dims()[static_cast<size_t>(d)]);
  for (int64_t d : lf) outDims.push_back(lhs.dims()[static_cast<size_t>(d)]);
  for (int64_t d : rf) outDims.push_back(rhs.dims()[static_cast<size_t>(d)]);
  KILN_ASSIGN_OR_RETURN(Tensor out, newResult(c, lhs.dtype(), outDims));
  std::vector<int64_t> ls = rowMajorStrides(lhs.dims()), rs = rowMajorStrides(rhs.dims());
  DotPlan p{subspaceOffsets(lhs.dims(), ls, lb), subspaceOffsets(rhs.dims(), rs, rb),
            subspaceOffsets(lhs.dims(), ls, lf), subspaceOffsets(rhs.dims(), rs, rf),
            subspaceOffsets(lhs.dims(), ls, lc), subspaceOffsets(rhs.dims(), rs, rc)};
  dispatchDType(lhs.dtype(), [&](auto tag) { dotKernel<decltype(tag)::value>(lhs, rhs, p, out); });
  return std::vector<Tensor>{std::move(out)};
}

// ---------------------------------------------------------------------------------------------
// convolution

// Tables of one convolution, all offsets in elements. The kernel reads the input in the
// canonical layout [batch, feature, spatial...] and the kernel in [out, in, spatial...] (copies
// made once, so every layout gets the same contiguous inner loop); the output is written in
// its own layout through outOffsets.
struct ConvPlan {
  std::vector<int64_t> inputPerm, kernelPerm;  // operand dim of each canonical dim
  int64_t outBatch = 0, outFeatures = 0, kernelIn = 0, groups = 1, batchGroups = 1;
  // Strides of the batch/feature dims of the canonical input and kernel, and of the output.
  int64_t inB = 0, inF = 0, kO = 0, kI = 0, outB = 0, outF = 0;
  std::vector<int64_t> outSpatial, kernelSpatial;  // extents
  // Per spatial dim s: taps[s][k * outSpatial[s] + y] is the input offset read by kernel tap k at
  // output position y, or -1 where that lands in padding or a dilation hole.
  std::vector<std::vector<int64_t>> taps;
  // The last spatial dim without input dilation reads, for each kernel tap k, the contiguous
  // output range [rowBegin[k], rowEnd[k]) at input offsets rising by rowStep: the inner loop
  // then runs without a branch or a table load (and vectorises when rowStep is 1).
  bool rowAffine = false;
  int64_t rowStep = 0;
  std::vector<int64_t> rowBegin, rowEnd;
  std::vector<int64_t> outOffsets;     // per flat output spatial position
  std::vector<int64_t> kernelOffsets;  // per flat kernel spatial position
};

// Row-major copy of t in the accumulator type, dims reordered: copy dim i is t's dim perm[i].
template <DType D>
std::vector<Acc<D>> loadPermuted(const Tensor& t, const std::vector<int64_t>& perm) {
  std::vector<int64_t> from = rowMajorStrides(t.dims()), dims, strides;
  for (int64_t d : perm) {
    dims.push_back(t.dims()[static_cast<size_t>(d)]);
    strides.push_back(from[static_cast<size_t>(d)]);
  }
  std::vector<Acc<D>> v(static_cast<size_t>(t.numElements()));
  const Storage<D>* src = t.data<Storage<D>>();
  std::vector<int64_t> idx(dims.size(), 0);
  for (size_t i = 0; i < v.size(); ++i, nextIndex(idx, dims))
    v[i] = static_cast<Acc<D>>(load<D>(src, linearOffset(idx, strides)));
  return v;
}

// One spatial dimension's parameters.
struct ConvSpatial {
  int64_t in, kernel, stride, lo, hi, lhsDil, rhsDil, inStride;
};

// Beyond these the arithmetic below could overflow, or a tap table would not fit in memory.
constexpr int64_t kConvLimit = int64_t(1) << 60;
constexpr int64_t kTapTableLimit = int64_t(1) << 32;

std::optional<int64_t> mulAdd(int64_t a, int64_t b, int64_t c) {
  int64_t p, s;
  if (__builtin_mul_overflow(a, b, &p) || __builtin_add_overflow(p, c, &s)) return std::nullopt;
  if (s > kConvLimit || s < -kConvLimit) return std::nullopt;
  return s;
}

// Output extent and tap table of one spatial dim.
StatusOr<int64_t> spatialTaps(const ConvSpatial& s, std::vector<int64_t>& taps) {
  auto dilIn = s.in > 0 ? mulAdd(s.in - 1, s.lhsDil, 1) : std::optional<int64_t>(0);
  auto dk = mulAdd(s.kernel - 1, s.rhsDil, 1);
  std::optional<int64_t> padded;
  if (dilIn) padded = mulAdd(1, *dilIn, s.lo);
  if (padded) padded = mulAdd(1, *padded, s.hi);
  if (!dilIn || !dk || !padded) return Status::error("window arithmetic overflows");
  int64_t out = *padded < *dk ? 0 : (*padded - *dk) / s.stride + 1;
  if (s.kernel > 0 && out > kTapTableLimit / s.kernel)
    return Status::error("kernel and output too large to evaluate");
  taps.assign(static_cast<size_t>(s.kernel * out), -1);
  for (int64_t k = 0; k < s.kernel; ++k)
    for (int64_t y = 0; y < out; ++y) {
      int64_t p = y * s.stride + k * s.rhsDil - s.lo;
      if (p >= 0 && p < *dilIn && p % s.lhsDil == 0)
        taps[static_cast<size_t>(k * out + y)] = (p / s.lhsDil) * s.inStride;
    }
  return out;
}

// acc[y] += w * src[tap(y)] over one output row of the last spatial dim, for kernel tap k.
template <typename T>
void accumulateRow(T* acc, const T* src, T w, const ConvPlan& p, int64_t k) {
  int64_t outRow = p.outSpatial.back();
  const int64_t* taps = p.taps.back().data() + k * outRow;
  if (!p.rowAffine) {
    for (int64_t y = 0; y < outRow; ++y)
      if (taps[y] >= 0) acc[y] = mulAddAcc(acc[y], w, src[taps[y]]);
    return;
  }
  int64_t b = p.rowBegin[static_cast<size_t>(k)], e = p.rowEnd[static_cast<size_t>(k)];
  if (b >= e) return;
  const T* s = src + taps[b];
  T* a = acc + b;
  int64_t n = e - b;
  if (p.rowStep == 1) {
    for (int64_t i = 0; i < n; ++i) a[i] = mulAddAcc(a[i], w, s[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) a[i] = mulAddAcc(a[i], w, s[i * p.rowStep]);
  }
}

// Fills rowAffine/rowStep/rowBegin/rowEnd from the last dim's tap table.
void planRows(ConvPlan& p, const ConvSpatial& last) {
  // A step that overflows can only come with a single output position; the table path is then
  // as fast and needs no step.
  p.rowAffine = last.lhsDil == 1 && !__builtin_mul_overflow(last.stride, last.inStride, &p.rowStep);
  int64_t outRow = p.outSpatial.back();
  for (int64_t k = 0; k < last.kernel; ++k) {
    const int64_t* taps = p.taps.back().data() + k * outRow;
    int64_t b = 0, e = outRow;
    while (b < e && taps[b] < 0) ++b;
    while (e > b && taps[e - 1] < 0) --e;
    p.rowBegin.push_back(b);
    p.rowEnd.push_back(e);
  }
}

template <DType D>
void convKernel(const Tensor& lhs, const Tensor& rhs, const ConvPlan& p, Tensor& out) {
  using T = Acc<D>;
  std::vector<T> in = loadPermuted<D>(lhs, p.inputPerm), w = loadPermuted<D>(rhs, p.kernelPerm);
  Storage<D>* o = out.mutableData<Storage<D>>();
  size_t ns = p.outSpatial.size(), last = ns - 1;
  int64_t outRow = p.outSpatial[last], numY = static_cast<int64_t>(p.outOffsets.size());
  int64_t numOuter = numY / std::max<int64_t>(outRow, 1);  // output positions of dims < last
  std::vector<T> acc(static_cast<size_t>(numY));
  std::vector<int64_t> kIdx(ns, 0), yIdx(ns - 1, 0),
      outerExt(p.outSpatial.begin(), p.outSpatial.end() - 1);
  int64_t perBatchGroup = p.outFeatures / p.batchGroups, perGroup = p.outFeatures / p.groups;
  for (int64_t n = 0; n < p.outBatch; ++n)
    for (int64_t f = 0; f < p.outFeatures; ++f) {
      std::fill(acc.begin(), acc.end(), T(0));
      int64_t inBatch = (f / perBatchGroup) * p.outBatch + n;
      int64_t firstIn = (f / perGroup) * p.kernelIn;
      for (int64_t ci = 0; ci < p.kernelIn; ++ci) {
        const T* src = in.data() + inBatch * p.inB + (firstIn + ci) * p.inF;
        const T* wsrc = w.data() + f * p.kO + ci * p.kI;
        std::fill(kIdx.begin(), kIdx.end(), 0);
        for (int64_t kk = 0; kk < static_cast<int64_t>(p.kernelOffsets.size());
             ++kk, nextIndex(kIdx, p.kernelSpatial)) {
          T wv = wsrc[p.kernelOffsets[static_cast<size_t>(kk)]];
          for (int64_t yo = 0; yo < numOuter; ++yo, nextIndex(yIdx, outerExt)) {
            int64_t off = 0;
            bool inside = true;
            for (size_t s = 0; s < last && inside; ++s) {
              int64_t t = p.taps[s][static_cast<size_t>(kIdx[s] * p.outSpatial[s] + yIdx[s])];
              inside = t >= 0;
              off += t;
            }
            if (!inside) continue;
            accumulateRow(acc.data() + yo * outRow, src + off, wv, p, kIdx[last]);
          }
        }
      }
      int64_t base = n * p.outB + f * p.outF;
      for (int64_t y = 0; y < numY; ++y)
        store<D>(o, base + p.outOffsets[static_cast<size_t>(y)],
                 static_cast<Compute<D>>(acc[static_cast<size_t>(y)]));
    }
}

// Checks the feature and batch extents against the group counts.
Status checkConvGroups(const EvalContext& c, int64_t inBatch, int64_t inFeatures,
                       const ConvPlan& p) {
  if (p.groups < 1 || p.batchGroups < 1) return fail(c, "group counts must be positive");
  if (p.kernelIn * p.groups != inFeatures)
    return fail(c, "input features (" + std::to_string(inFeatures) +
                       ") must equal kernel input features (" + std::to_string(p.kernelIn) +
                       ") x feature_group_count (" + std::to_string(p.groups) + ")");
  if (p.outFeatures % p.groups != 0 || p.outFeatures % p.batchGroups != 0)
    return fail(c, "kernel output features must be divisible by the group counts");
  if (inBatch % p.batchGroups != 0) return fail(c, "batch must be divisible by batch_group_count");
  return Status::ok();
}

// The operand dims in the order `perm` gives.
std::vector<int64_t> permuted(const std::vector<int64_t>& dims, const std::vector<int64_t>& perm) {
  std::vector<int64_t> r;
  for (int64_t d : perm) r.push_back(dims[static_cast<size_t>(d)]);
  return r;
}

// The window attributes, one entry per spatial dim (absent lists give their defaults).
StatusOr<ConvWindow> convWindow(const EvalContext& c, size_t ns) {
  ConvWindow w = convWindow(c.node.attrs(), ns);
  for (const auto* l : {&w.strides, &w.lo, &w.hi, &w.lhsDil, &w.rhsDil})
    if (l->size() != ns) return fail(c, "window attributes need one entry per spatial dimension");
  for (size_t s = 0; s < ns; ++s)
    if (w.strides[s] < 1 || w.lhsDil[s] < 1 || w.rhsDil[s] < 1)
      return fail(c, "strides and dilations must be positive");
  return w;
}

StatusOr<ConvPlan> planConvolution(const EvalContext& c, std::vector<int64_t>& outDims) {
  const Tensor &lhs = c.operands[0], &rhs = c.operands[1];
  int64_t rank = lhs.rank();
  if (rank < 3 || rhs.rank() != rank)
    return fail(c, "input and kernel need one rank of at least 3");
  auto dnOr = convDimensionNumbers(c.node.attrs(), rank);
  if (!dnOr) return fail(c, dnOr.status().message());
  const ConvDimensionNumbers& dn = *dnOr;
  size_t ns = static_cast<size_t>(rank - 2);
  KILN_ASSIGN_OR_RETURN(ConvWindow win, convWindow(c, ns));
  ConvPlan p;
  p.inputPerm = {dn.inputBatch, dn.inputFeature};
  p.inputPerm.insert(p.inputPerm.end(), dn.inputSpatial.begin(), dn.inputSpatial.end());
  p.kernelPerm = {dn.kernelOutput, dn.kernelInput};
  p.kernelPerm.insert(p.kernelPerm.end(), dn.kernelSpatial.begin(), dn.kernelSpatial.end());
  // Canonical dims and strides: [N, C, spatial...] and [O, I, spatial...].
  std::vector<int64_t> xd = permuted(lhs.dims(), p.inputPerm),
                       wd = permuted(rhs.dims(), p.kernelPerm);
  std::vector<int64_t> xs = rowMajorStrides(xd), ws = rowMajorStrides(wd);
  p.groups = c.node.attrInt("feature_group_count");
  p.batchGroups = c.node.attrInt("batch_group_count");
  p.outFeatures = wd[0];
  p.kernelIn = wd[1];
  KILN_RETURN_IF_ERROR(checkConvGroups(c, xd[0], xd[1], p));
  p.outBatch = xd[0] / p.batchGroups;
  p.inB = xs[0];
  p.inF = xs[1];
  p.kO = ws[0];
  p.kI = ws[1];
  outDims.assign(static_cast<size_t>(rank), 0);
  outDims[static_cast<size_t>(dn.outputBatch)] = p.outBatch;
  outDims[static_cast<size_t>(dn.outputFeature)] = p.outFeatures;
  p.taps.resize(ns);
  for (size_t s = 0; s < ns; ++s) {
    ConvSpatial sp{xd[s + 2], wd[s + 2],     win.strides[s], win.lo[s],
                   win.hi[s], win.lhsDil[s], win.rhsDil[s],  xs[s + 2]};
    auto out = spatialTaps(sp, p.taps[s]);
    if (!out)
      return fail(c, "spatial dimension " + std::to_string(s) + ": " + out.status().message());
    p.outSpatial.push_back(*out);
    p.kernelSpatial.push_back(sp.kernel);
    outDims[static_cast<size_t>(dn.outputSpatial[s])] = *out;
    if (s + 1 == ns) planRows(p, sp);
  }
  std::vector<int64_t> os = rowMajorStrides(outDims);
  p.outB = os[static_cast<size_t>(dn.outputBatch)];
  p.outF = os[static_cast<size_t>(dn.outputFeature)];
  p.outOffsets = subspaceOffsets(outDims, os, dn.outputSpatial);
  std::vector<int64_t> kernelSpatialDims(ns);
  for (size_t s = 0; s < ns; ++s) kernelSpatialDims[s] = static_cast<int64_t>(s + 2);
  p.kernelOffsets = subspaceOffsets(wd, ws, kernelSpatialDims);
  return p;
}

EvalResult evalConvolution(const EvalContext& c) {
  const Tensor &lhs = c.operands[0], &rhs = c.operands[1];
  if (lhs.dtype() != rhs.dtype() || lhs.dtype() == DType::Bool)
    return fail(c, "input and kernel must share a numeric dtype");
  std::vector<int64_t> outDims;
  KILN_ASSIGN_OR_RETURN(ConvPlan p, planConvolution(c, outDims));
  KILN_ASSIGN_OR_RETURN(Tensor out, newResult(c, lhs.dtype(), outDims));
  if (out.numElements() == 0) return std::vector<Tensor>{std::move(out)};
  dispatchDType(lhs.dtype(), [&](auto tag) { convKernel<decltype(tag)::value>(lhs, rhs, p, out); });
  return std::vector<Tensor>{std::move(out)};
}

}  // namespace

EvalResult evalContraction(const EvalContext& c) {
  switch (c.node.op()) {
    case OpCode::DotGeneral: return evalDotGeneral(c);
    case OpCode::Convolution: return evalConvolution(c);
    default: break;
  }
  return fail(c, std::string(opName(c.node.op())) + " is not a contraction");
}

}  // namespace kiln::interp
