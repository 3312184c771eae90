// Type rules of gather/scatter/resize/grid_sample, reductions, contractions and composites
// (docs/ops.md).
#include <algorithm>
#include <initializer_list>

#include "ir/shape_rules.h"
#include "ir/shape_rules_util.h"

namespace kiln {

using Types = StatusOr<std::vector<TensorType>>;
using namespace rules;

namespace {

const std::vector<int64_t>& ints(const InferInput& in, const char* name) {
  return std::get<4>(in.attrs.at(name));
}
int64_t intOf(const InferInput& in, const char* name) { return getInt(in.op, in.attrs, name); }

bool contains(const std::vector<int64_t>& v, int64_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

Status checkSorted(const std::vector<int64_t>& v, const std::string& what) {
  if (!std::is_sorted(v.begin(), v.end())) return err(what + " " + listStr(v) + " must be sorted");
  return Status::ok();
}

// Index-space dims of `indices` (all dims but index_vector_dim) and the index vector length.
struct IndexShape {
  Shape batch;
  Dim vectorSize;
};

StatusOr<IndexShape> indexShape(const TensorType& indices, int64_t indexVectorDim) {
  if (!isInteger(indices.dtype())) return err("indices must be integers, got " + indices.str());
  if (indexVectorDim < 0 || indexVectorDim > indices.rank())
    return err("index_vector_dim " + std::to_string(indexVectorDim) + " is out of range for " +
               indices.str());
  IndexShape s{{}, Dim(1)};
  for (int64_t i = 0; i < indices.rank(); ++i) {
    if (i == indexVectorDim) s.vectorSize = indices.dim(i);
    else s.batch.push_back(indices.dim(i));
  }
  return s;
}

Status checkIndexMap(const std::vector<int64_t>& map, const Dim& vectorSize, int64_t rank,
                     const std::string& what) {
  if (!vectorSize.isStatic() || vectorSize.value() != static_cast<int64_t>(map.size()))
    return err(what + " " + listStr(map) + " must have one entry per index vector element (" +
               vectorSize.str() + ")");
  return checkAxes(map, rank, what);
}

// Window sizes, strides and dilations must be in [1, 2^20] and paddings within +-2^40, so the
// extent arithmetic of the rules ((n-1)*dilation + 1 + padding) cannot overflow int64.
Status checkWindowAttrs(std::initializer_list<const std::vector<int64_t>*> positive,
                        std::initializer_list<const std::vector<int64_t>*> paddings) {
  constexpr int64_t kMaxWindow = int64_t(1) << 20;
  for (const auto* v : positive)
    for (int64_t x : *v)
      if (x < 1 || x > kMaxWindow)
        return err("window sizes, strides and dilations must be in [1, 2^20], got " + listStr(*v));
  for (const auto* v : paddings)
    for (int64_t x : *v)
      if (x < -kMaxElements || x > kMaxElements)
        return err("padding " + listStr(*v) + " is out of range");
  return Status::ok();
}

}  // namespace

Types inferGather(const InferInput& in) {
  const TensorType& x = in.operands[0];
  const auto& offsetDims = ints(in, "offset_dims");
  const auto& collapsed = ints(in, "collapsed_slice_dims");
  const auto& startIndexMap = ints(in, "start_index_map");
  const auto& sliceSizes = ints(in, "slice_sizes");
  KILN_ASSIGN_OR_RETURN(IndexShape is, indexShape(in.operands[1], intOf(in, "index_vector_dim")));
  KILN_RETURN_IF_ERROR(checkIndexMap(startIndexMap, is.vectorSize, x.rank(), "start_index_map"));
  KILN_RETURN_IF_ERROR(checkAxes(collapsed, x.rank(), "collapsed_slice_dims"));
  KILN_RETURN_IF_ERROR(checkSorted(collapsed, "collapsed_slice_dims"));
  KILN_RETURN_IF_ERROR(checkSorted(offsetDims, "offset_dims"));
  if (static_cast<int64_t>(sliceSizes.size()) != x.rank())
    return err("slice_sizes " + listStr(sliceSizes) + " must have one entry per operand dimension");
  Shape window;
  for (int64_t i = 0; i < x.rank(); ++i) {
    const Dim& d = x.dim(i);
    if (sliceSizes[i] < 0 || (d.isStatic() && sliceSizes[i] > d.value()))
      return err("slice size " + std::to_string(sliceSizes[i]) + " does not fit dimension " +
                 std::to_string(i) + " of " + x.str());
    if (contains(collapsed, i)) {
      if (sliceSizes[i] != 1)
        return err("collapsed dimension " + std::to_string(i) + " must have slice size 1");
    } else {
      window.push_back(Dim(sliceSizes[i]));
    }
  }
  if (offsetDims.size() != window.size())
    return err("offset_dims " + listStr(offsetDims) + " must have " +
               std::to_string(window.size()) + " entries");
  int64_t outRank = static_cast<int64_t>(is.batch.size() + window.size());
  KILN_RETURN_IF_ERROR(checkAxes(offsetDims, outRank, "offset_dims"));
  Shape out;
  size_t b = 0, w = 0;
  for (int64_t i = 0; i < outRank; ++i)
    out.push_back(contains(offsetDims, i) ? window[w++] : is.batch[b++]);
  return std::vector<TensorType>{x.withDims(std::move(out))};
}

Types inferScatter(const InferInput& in) {
  const TensorType& x = in.operands[0];
  const TensorType& updates = in.operands[2];
  KILN_RETURN_IF_ERROR(requireSameDType(x, updates, "operand and updates"));
  const auto& windowDims = ints(in, "update_window_dims");
  const auto& inserted = ints(in, "inserted_window_dims");
  const auto& toOperand = ints(in, "scatter_dims_to_operand_dims");
  KILN_ASSIGN_OR_RETURN(IndexShape is, indexShape(in.operands[1], intOf(in, "index_vector_dim")));
  KILN_RETURN_IF_ERROR(
      checkIndexMap(toOperand, is.vectorSize, x.rank(), "scatter_dims_to_operand_dims"));
  KILN_RETURN_IF_ERROR(checkAxes(inserted, x.rank(), "inserted_window_dims"));
  KILN_RETURN_IF_ERROR(checkSorted(inserted, "inserted_window_dims"));
  KILN_RETURN_IF_ERROR(checkSorted(windowDims, "update_window_dims"));
  KILN_RETURN_IF_ERROR(checkAxes(windowDims, updates.rank(), "update_window_dims"));
  if (static_cast<int64_t>(windowDims.size() + inserted.size()) != x.rank())
    return err("update_window_dims and inserted_window_dims must together cover the operand's " +
               std::to_string(x.rank()) + " dimensions");
  Shape scatterDims;
  for (int64_t i = 0; i < updates.rank(); ++i)
    if (!contains(windowDims, i)) scatterDims.push_back(updates.dim(i));
  if (scatterDims != is.batch)
    return err("update scatter dimensions " + dimsStr(scatterDims) +
               " must match the index dimensions " + dimsStr(is.batch));
  size_t w = 0;
  for (int64_t i = 0; i < x.rank(); ++i) {
    if (contains(inserted, i)) continue;
    const Dim& u = updates.dim(windowDims[w++]);
    const Dim& d = x.dim(i);
    if (u.isStatic() && d.isStatic() && u.value() > d.value())
      return err("update window " + updates.str() + " does not fit operand " + x.str());
  }
  const std::string& reduction = getEnum(in.op, in.attrs, "reduction");
  if (x.dtype() == DType::Bool && reduction != "none" && reduction != "max" && reduction != "min")
    return err("reduction '" + reduction + "' needs a numeric operand");
  return std::vector<TensorType>{x};
}

Types inferResize(const InferInput& in) {
  KILN_ASSIGN_OR_RETURN(TensorType r, declared(in));
  const TensorType& x = in.operands[0];
  if (r.dtype() != x.dtype() || r.rank() != x.rank())
    return err("result " + r.str() + " must have the dtype and rank of " + x.str());
  if (getEnum(in.op, in.attrs, "mode") != "nearest")
    KILN_RETURN_IF_ERROR(requireFloat(x.dtype(), "operand of linear/cubic resize"));
  auto scales = getFloats(in.attrs, "scales");
  if (hasAttr(in.attrs, "scales") && static_cast<int64_t>(scales.size()) != x.rank())
    return err("scales must have one entry per dimension");
  for (double s : scales)
    if (!(s > 0)) return err("scales must be positive");
  for (int64_t i = 0; i < x.rank(); ++i)
    if (x.dim(i).isSymbolic() && x.dim(i) != r.dim(i))
      return err("symbolic dimension " + x.dim(i).str() + " cannot be resized");
  return std::vector<TensorType>{r};
}

Types inferGridSample(const InferInput& in) {
  const TensorType& x = in.operands[0];
  const TensorType& grid = in.operands[1];
  KILN_RETURN_IF_ERROR(requireRank(x, 4, "input"));
  KILN_RETURN_IF_ERROR(requireRank(grid, 4, "grid"));
  KILN_RETURN_IF_ERROR(requireFloat(x.dtype(), "input"));
  KILN_RETURN_IF_ERROR(requireSameDType(x, grid, "input and grid"));
  if (x.dim(0) != grid.dim(0))
    return err("grid " + grid.str() + " must have the batch dimension of input " + x.str());
  if (grid.dim(3) != Dim(2))
    return err("grid " + grid.str() + " must end in a dimension of 2 (x, y)");
  return std::vector<TensorType>{x.withDims({x.dim(0), x.dim(1), grid.dim(1), grid.dim(2)})};
}

Types inferReduce(const InferInput& in) {
  const TensorType& x = in.operands[0];
  const auto& dims = ints(in, "dims");
  KILN_RETURN_IF_ERROR(checkAxes(dims, x.rank(), "dims"));
  const std::string& kind = getEnum(in.op, in.attrs, "kind");
  bool logical = kind == "and" || kind == "or";
  if (logical != (x.dtype() == DType::Bool) &&
      !(x.dtype() == DType::Bool && (kind == "max" || kind == "min")))
    return err("kind '" + kind + "' does not apply to " + x.str());
  Shape out;
  for (int64_t i = 0; i < x.rank(); ++i)
    if (!contains(dims, i)) out.push_back(x.dim(i));
  return std::vector<TensorType>{x.withDims(std::move(out))};
}

Types inferArgReduce(const InferInput& in) {
  const TensorType& x = in.operands[0];
  int64_t axis = intOf(in, "axis");
  KILN_RETURN_IF_ERROR(checkAxis(axis, x.rank(), "axis"));
  Shape out;
  for (int64_t i = 0; i < x.rank(); ++i)
    if (i != axis) out.push_back(x.dim(i));
  return std::vector<TensorType>{TensorType(DType::I64, std::move(out))};
}

Types inferReduceWindow(const InferInput& in) {
  const TensorType& x = in.operands[0];
  int64_t r = x.rank();
  if (x.dtype() == DType::Bool) return err("operand must be numeric, got " + x.str());
  KILN_ASSIGN_OR_RETURN(auto window, perDim(in, "window_dimensions", r, 1));
  KILN_ASSIGN_OR_RETURN(auto strides, perDim(in, "window_strides", r, 1));
  KILN_ASSIGN_OR_RETURN(auto baseDil, perDim(in, "base_dilations", r, 1));
  KILN_ASSIGN_OR_RETURN(auto winDil, perDim(in, "window_dilations", r, 1));
  KILN_ASSIGN_OR_RETURN(auto lo, perDim(in, "padding_low", r, 0));
  KILN_ASSIGN_OR_RETURN(auto hi, perDim(in, "padding_high", r, 0));
  KILN_RETURN_IF_ERROR(checkWindowAttrs({&window, &strides, &baseDil, &winDil}, {&lo, &hi}));
  Shape out;
  for (int64_t i = 0; i < r; ++i) {
    auto d = computeDim(in, x.dim(i), i, "windowed dimension " + std::to_string(i), [&](int64_t n) {
      int64_t padded = (n > 0 ? (n - 1) * baseDil[i] + 1 : 0) + lo[i] + hi[i];
      int64_t dw = (window[i] - 1) * winDil[i] + 1;
      return Dim(padded < dw ? 0 : (padded - dw) / strides[i] + 1);
    });
    if (!d) return d.status();
    bool identity =
        window[i] == 1 && strides[i] == 1 && baseDil[i] == 1 && lo[i] == 0 && hi[i] == 0;
    out.push_back(x.dim(i).isSymbolic() && identity ? x.dim(i) : *d);
  }
  return std::vector<TensorType>{x.withDims(std::move(out))};
}

Types inferCumsum(const InferInput& in) {
  const TensorType& x = in.operands[0];
  if (!isNumeric(x.dtype())) return err("operand must be numeric, got " + x.str());
  KILN_RETURN_IF_ERROR(checkAxis(intOf(in, "axis"), x.rank(), "axis"));
  return std::vector<TensorType>{x};
}

Types inferSort(const InferInput& in) {
  const TensorType& x = in.operands[0];
  KILN_RETURN_IF_ERROR(checkAxis(intOf(in, "dimension"), x.rank(), "dimension"));
  return std::vector<TensorType>{x, x.withDType(DType::I64)};
}

Types inferTopK(const InferInput& in) {
  const TensorType& x = in.operands[0];
  int64_t axis = intOf(in, "axis");
  int64_t k = intOf(in, "k");
  KILN_RETURN_IF_ERROR(checkAxis(axis, x.rank(), "axis"));
  if (k < 0 || (x.dim(axis).isStatic() && k > x.dim(axis).value()))
    return err("k = " + std::to_string(k) + " does not fit dimension " + x.dim(axis).str());
  Shape out = x.dims();
  out[axis] = Dim(k);
  TensorType values = x.withDims(out);
  return std::vector<TensorType>{values, values.withDType(DType::I64)};
}

// The indices of the nonzero elements, padded to the most there can be (every element), and
// how many there are.
Types inferNonZero(const InferInput& in) {
  const TensorType& x = in.operands[0];
  auto n = x.numElements();
  if (!n) return err("nonzero needs static dimensions (its bound is the element count)");
  return std::vector<TensorType>{TensorType(DType::I64, {Dim(x.rank()), Dim(*n)}),
                                 TensorType(DType::I64, {})};
}

// The distinct slices of x along `axis` (its elements, flattened, without one) padded to the
// number of slices K, the index of each one's first occurrence, the unique slice of each
// slice, how often each one occurs, and how many there are.
Types inferUnique(const InferInput& in) {
  const TensorType& x = in.operands[0];
  if (!x.isStatic()) return err("unique needs static dimensions (its bound is the slice count)");
  TensorType y = x;
  if (hasAttr(in.attrs, "axis")) {
    KILN_RETURN_IF_ERROR(checkAxis(intOf(in, "axis"), x.rank(), "axis"));
  } else {
    y = x.withDims({Dim(*x.numElements())});
  }
  const int64_t k = hasAttr(in.attrs, "axis") ? x.dim(intOf(in, "axis")).value() : *x.numElements();
  TensorType perSlice(DType::I64, {Dim(k)});
  return std::vector<TensorType>{y, perSlice, perSlice, perSlice, TensorType(DType::I64, {})};
}

Status checkStrings(const InferInput& in) {
  auto anyString = [](std::span<const TensorType> ts) {
    return std::any_of(ts.begin(), ts.end(),
                       [](const TensorType& t) { return isString(t.dtype()); });
  };
  switch (in.op) {
    case OpCode::Constant:
    case OpCode::Parameter:
    case OpCode::Convert:
    case OpCode::StringNormalize:
    case OpCode::SetDimensionSize:
    case OpCode::GetDimensionSize: return Status::ok();
    default: break;
  }
  if (anyString(in.operands) || anyString(in.declared))
    return err("does not take strings (only convert and string_normalize compute on them)");
  return Status::ok();
}

// x without the stopwords (a string_normalize of x [C] or [1, C] and stopwords [K]), padded to
// max(C, 1) along its last dim, and how many are kept (1 at least: an empty string when none is).
Types inferStringNormalize(const InferInput& in) {
  const TensorType &x = in.operands[0], &stopwords = in.operands[1];
  if (!isString(x.dtype()) || !isString(stopwords.dtype()))
    return err("operands must be strings, got " + x.str() + " and " + stopwords.str());
  if (stopwords.rank() != 1) return err("stopwords must be 1-D, got " + stopwords.str());
  const bool rowOfOne = x.rank() == 2 && x.dim(0) == Dim(1);
  if (x.rank() != 1 && !rowOfOne) return err("operand must be [C] or [1, C], got " + x.str());
  if (!x.isStatic()) return err("needs static dimensions (its bound is C), got " + x.str());
  Shape bound = x.dims();
  bound.back() = Dim(std::max<int64_t>(bound.back().value(), 1));
  return std::vector<TensorType>{x.withDims(bound), TensorType(DType::I64, {})};
}

// The (batch, class, box) rows of the selected boxes, padded to B * C * bound_per_class rows,
// and how many there are.
Types inferNonMaxSuppression(const InferInput& in) {
  const TensorType &boxes = in.operands[0], &scores = in.operands[1];
  KILN_RETURN_IF_ERROR(requireRank(boxes, 3, "boxes"));
  KILN_RETURN_IF_ERROR(requireRank(scores, 3, "scores"));
  KILN_RETURN_IF_ERROR(requireFloat(boxes.dtype(), "boxes"));
  KILN_RETURN_IF_ERROR(requireSameDType(boxes, scores, "boxes and scores"));
  if (!boxes.isStatic() || !scores.isStatic())
    return err("non_max_suppression needs static dimensions (its bound depends on them)");
  const int64_t b = boxes.dim(0).value(), n = boxes.dim(1).value(), c = scores.dim(1).value();
  if (boxes.dim(2).value() != 4 || scores.dim(0).value() != b || scores.dim(2).value() != n)
    return err("needs boxes [B, N, 4] and scores [B, C, N], got " + boxes.str() + " and " +
               scores.str());
  if (in.operands[2].rank() != 0 || in.operands[2].dtype() != DType::I64)
    return err("max_per_class must be an i64[]");
  for (size_t i = 3; i < in.operands.size(); ++i)
    if (in.operands[i].rank() != 0 || in.operands[i].dtype() != DType::F32)
      return err("the thresholds must be f32[]");
  const int64_t bound = intOf(in, "bound_per_class");
  if (bound < 0 || bound > n)
    return err("bound_per_class = " + std::to_string(bound) + " must be in [0, " +
               std::to_string(n) + "]");
  return std::vector<TensorType>{TensorType(DType::I64, {Dim(b * c * bound), Dim(3)}),
                                 TensorType(DType::I64, {})};
}

// x itself; its dimension `dimension` has the size given at run time (at most its extent).
Types inferSetDimensionSize(const InferInput& in) {
  const TensorType& x = in.operands[0];
  const TensorType& size = in.operands[1];
  KILN_RETURN_IF_ERROR(checkAxis(intOf(in, "dimension"), x.rank(), "dimension"));
  if (size.rank() != 0 || size.dtype() != DType::I64) return err("the size must be an i64[]");
  return std::vector<TensorType>{x};
}

// How many entries dimension `dimension` of x has: its extent, or the size a
// set_dimension_size gave it.
Types inferGetDimensionSize(const InferInput& in) {
  KILN_RETURN_IF_ERROR(checkAxis(intOf(in, "dimension"), in.operands[0].rank(), "dimension"));
  return std::vector<TensorType>{TensorType(DType::I64, {})};
}

Types inferDotGeneral(const InferInput& in) {
  const TensorType& a = in.operands[0];
  const TensorType& b = in.operands[1];
  KILN_RETURN_IF_ERROR(requireSameDType(a, b, "operands"));
  if (a.dtype() == DType::Bool) return err("operands must be numeric");
  auto lb = getInts(in.attrs, "lhs_batch"), rb = getInts(in.attrs, "rhs_batch");
  auto lc = getInts(in.attrs, "lhs_contracting"), rc = getInts(in.attrs, "rhs_contracting");
  if (lb.size() != rb.size() || lc.size() != rc.size())
    return err("lhs and rhs need as many batch and contracting dimensions as each other");
  std::vector<int64_t> lAll = lb, rAll = rb;
  lAll.insert(lAll.end(), lc.begin(), lc.end());
  rAll.insert(rAll.end(), rc.begin(), rc.end());
  KILN_RETURN_IF_ERROR(checkAxes(lAll, a.rank(), "lhs batch/contracting dimension"));
  KILN_RETURN_IF_ERROR(checkAxes(rAll, b.rank(), "rhs batch/contracting dimension"));
  for (size_t i = 0; i < lAll.size(); ++i)
    if (a.dim(lAll[i]) != b.dim(rAll[i]))
      return err("lhs dimension " + std::to_string(lAll[i]) + " (" + a.dim(lAll[i]).str() +
                 ") differs from rhs dimension " + std::to_string(rAll[i]) + " (" +
                 b.dim(rAll[i]).str() + ") in " + a.str() + " x " + b.str());
  Shape out;
  for (int64_t d : lb) out.push_back(a.dim(d));
  for (int64_t i = 0; i < a.rank(); ++i)
    if (!contains(lAll, i)) out.push_back(a.dim(i));
  for (int64_t i = 0; i < b.rank(); ++i)
    if (!contains(rAll, i)) out.push_back(b.dim(i));
  return std::vector<TensorType>{a.withDims(std::move(out))};
}

namespace {

// Result extent of one convolution spatial dimension.
StatusOr<Dim> convSpatial(const InferInput& in, const Dim& d, const Dim& k, size_t outIndex,
                          int64_t lhsDil, int64_t rhsDil, int64_t lo, int64_t hi, int64_t stride) {
  if (!k.isStatic()) return err("kernel spatial extents must be static");
  return computeDim(in, d, outIndex, "input spatial dimension", [&](int64_t n) {
    int64_t dn = n > 0 ? (n - 1) * lhsDil + 1 : 0;
    int64_t dk = (k.value() - 1) * rhsDil + 1;
    int64_t padded = dn + lo + hi;
    return Dim(padded < dk ? 0 : (padded - dk) / stride + 1);
  });
}

}  // namespace

Types inferConvolution(const InferInput& in) {
  const TensorType& x = in.operands[0];
  const TensorType& w = in.operands[1];
  KILN_RETURN_IF_ERROR(requireSameDType(x, w, "input and kernel"));
  if (x.dtype() == DType::Bool) return err("operands must be numeric");
  if (x.rank() < 3 || w.rank() != x.rank())
    return err("input and kernel need one rank of at least 3, got " + x.str() + " and " + w.str());
  KILN_ASSIGN_OR_RETURN(ConvDimensionNumbers dn, convDimensionNumbers(in.attrs, x.rank()));
  int64_t ns = x.rank() - 2;
  KILN_ASSIGN_OR_RETURN(auto strides, perDim(in, "window_strides", ns, 1));
  KILN_ASSIGN_OR_RETURN(auto lo, perDim(in, "padding_low", ns, 0));
  KILN_ASSIGN_OR_RETURN(auto hi, perDim(in, "padding_high", ns, 0));
  KILN_ASSIGN_OR_RETURN(auto lhsDil, perDim(in, "lhs_dilation", ns, 1));
  KILN_ASSIGN_OR_RETURN(auto rhsDil, perDim(in, "rhs_dilation", ns, 1));
  KILN_RETURN_IF_ERROR(checkWindowAttrs({&strides, &lhsDil, &rhsDil}, {&lo, &hi}));
  int64_t groups = intOf(in, "feature_group_count"), batchGroups = intOf(in, "batch_group_count");
  if (groups < 1 || batchGroups < 1) return err("group counts must be positive");
  const Dim &inF = x.dim(dn.inputFeature), &kIn = w.dim(dn.kernelInput),
            &kOut = w.dim(dn.kernelOutput);
  const Dim& batch = x.dim(dn.inputBatch);
  if (!inF.isStatic() || !kIn.isStatic() || !kOut.isStatic())
    return err("feature dimensions must be static");
  if (kIn.value() * groups != inF.value())
    return err("input features (" + inF.str() + ") must equal kernel input features (" + kIn.str() +
               ") x feature_group_count (" + std::to_string(groups) + ")");
  if (kOut.value() % groups != 0 || kOut.value() % batchGroups != 0)
    return err("kernel output features (" + kOut.str() + ") must be divisible by the group counts");
  if (batchGroups > 1 && (!batch.isStatic() || batch.value() % batchGroups != 0))
    return err("batch (" + batch.str() + ") must be divisible by batch_group_count");
  Shape out(x.rank());
  out[dn.outputBatch] = batchGroups > 1 ? Dim(batch.value() / batchGroups) : batch;
  out[dn.outputFeature] = kOut;
  for (int64_t i = 0; i < ns; ++i) {
    auto d = convSpatial(in, x.dim(dn.inputSpatial[i]), w.dim(dn.kernelSpatial[i]),
                         dn.outputSpatial[i], lhsDil[i], rhsDil[i], lo[i], hi[i], strides[i]);
    if (!d) return d.status();
    out[dn.outputSpatial[i]] = *d;
  }
  return std::vector<TensorType>{x.withDims(std::move(out))};
}

Types inferSoftmax(const InferInput& in) {
  const TensorType& x = in.operands[0];
  KILN_RETURN_IF_ERROR(requireFloat(x.dtype(), "operand"));
  KILN_RETURN_IF_ERROR(checkAxis(intOf(in, "axis"), x.rank(), "axis"));
  return std::vector<TensorType>{x};
}

Types inferLayerNorm(const InferInput& in) {
  const TensorType& x = in.operands[0];
  KILN_RETURN_IF_ERROR(requireFloat(x.dtype(), "operand"));
  int64_t axis = intOf(in, "axis");
  KILN_RETURN_IF_ERROR(checkAxis(axis, x.rank(), "axis"));
  Shape normDims(x.dims().begin() + axis, x.dims().end());
  for (size_t i = 1; i < in.operands.size(); ++i) {
    const TensorType& p = in.operands[i];
    if (p.dtype() != x.dtype() || p.dims() != normDims)
      return err(std::string(i == 1 ? "scale " : "bias ") + p.str() + " must be " +
                 TensorType(x.dtype(), normDims).str());
  }
  return std::vector<TensorType>{x};
}

Types inferBatchNorm(const InferInput& in) {
  const TensorType& x = in.operands[0];
  KILN_RETURN_IF_ERROR(requireFloat(x.dtype(), "operand"));
  int64_t fi = intOf(in, "feature_index");
  KILN_RETURN_IF_ERROR(checkAxis(fi, x.rank(), "feature_index"));
  TensorType want(x.dtype(), {x.dim(fi)});
  static const char* names[] = {"", "scale", "offset", "mean", "variance"};
  for (size_t i = 1; i < 5; ++i)
    if (in.operands[i] != want)
      return err(std::string(names[i]) + " " + in.operands[i].str() + " must be " + want.str());
  return std::vector<TensorType>{x};
}

Types inferGelu(const InferInput& in) {
  KILN_RETURN_IF_ERROR(requireFloat(in.operands[0].dtype(), "operand"));
  return std::vector<TensorType>{in.operands[0]};
}

Types inferAttention(const InferInput& in) {
  const TensorType &q = in.operands[0], &k = in.operands[1], &v = in.operands[2];
  KILN_RETURN_IF_ERROR(requireFloat(q.dtype(), "q"));
  if (k.dtype() != q.dtype() || v.dtype() != q.dtype()) return err("q, k and v must share a dtype");
  int64_t r = q.rank();
  if (r < 2 || k.rank() != r || v.rank() != r)
    return err("q, k and v need one rank of at least 2, got " + q.str() + ", " + k.str() + ", " +
               v.str());
  for (int64_t i = 0; i < r - 2; ++i)
    if (q.dim(i) != k.dim(i) || q.dim(i) != v.dim(i))
      return err("q, k and v must share leading dimensions: " + q.str() + ", " + k.str() + ", " +
                 v.str());
  if (q.dim(r - 1) != k.dim(r - 1))
    return err("q and k head sizes differ: " + q.str() + ", " + k.str());
  if (k.dim(r - 2) != v.dim(r - 2))
    return err("k and v sequence lengths differ: " + k.str() + ", " + v.str());
  Shape out = q.dims();
  out[r - 1] = v.dim(r - 1);
  if (in.operands.size() == 4) {
    const TensorType& m = in.operands[3];
    Shape want = q.dims();
    want[r - 1] = k.dim(r - 2);
    if (m.dims() != want || (m.dtype() != DType::Bool && m.dtype() != q.dtype()))
      return err("mask " + m.str() + " must be bool or " + std::string(dtypeName(q.dtype())) +
                 " with shape " + dimsStr(want));
  }
  return std::vector<TensorType>{q.withDims(std::move(out))};
}

// lstm / gru: x [S, B, I], w [D, G*H, I], r [D, G*H, H], b [D, 2*G*H], h0 [D, B, H] (and c0
// for lstm) -> y [S, B, D*H], y_h [D, B, H] (and y_c). G is 4 (lstm) or 3 (gru); D is 2 for
// bidirectional, else 1.
Types inferRecurrence(const InferInput& in) {
  bool lstm = in.op == OpCode::Lstm;
  const int64_t gates = lstm ? 4 : 3;
  const TensorType &x = in.operands[0], &w = in.operands[1], &r = in.operands[2];
  KILN_RETURN_IF_ERROR(requireFloat(x.dtype(), "x"));
  for (const TensorType& t : in.operands)
    if (t.dtype() != x.dtype()) return err("operands must share x's dtype " + x.str());
  if (x.rank() != 3 || w.rank() != 3 || r.rank() != 3)
    return err("x, w and r must be 3-D, got " + x.str() + ", " + w.str() + ", " + r.str());
  const Dim hidden = r.dim(2);
  if (!hidden.isStatic() || !w.dim(1).isStatic() || !w.dim(0).isStatic())
    return err("w's and r's extents must be static, got " + w.str() + ", " + r.str());
  const int64_t dirs = getEnum(in.op, in.attrs, "direction") == "bidirectional" ? 2 : 1;
  const int64_t h = hidden.value();
  const Dim dirsDim(dirs), gatesHidden(gates * h);
  if (w.dim(0) != dirsDim || w.dim(1) != gatesHidden || w.dim(2) != x.dim(2))
    return err("w " + w.str() + " must be [" + std::to_string(dirs) + ", " +
               std::to_string(gates * h) + ", " + x.dim(2).str() + "]");
  if (r.dim(0) != dirsDim || r.dim(1) != gatesHidden)
    return err("r " + r.str() + " must be [" + std::to_string(dirs) + ", " +
               std::to_string(gates * h) + ", " + std::to_string(h) + "]");
  const TensorType& b = in.operands[3];
  if (b.rank() != 2 || b.dim(0) != dirsDim || b.dim(1) != Dim(2 * gates * h))
    return err("b " + b.str() + " must be [" + std::to_string(dirs) + ", " +
               std::to_string(2 * gates * h) + "]");
  TensorType state = x.withDims({dirsDim, x.dim(1), hidden});
  for (size_t i = 4; i < in.operands.size(); ++i)
    if (in.operands[i] != state)
      return err("initial state " + in.operands[i].str() + " must be " + state.str());
  std::vector<TensorType> out{x.withDims({x.dim(0), x.dim(1), Dim(dirs * h)}), state};
  if (lstm) out.push_back(state);
  return out;
}

}  // namespace kiln
