// Indexing ONNX ops lowered to StableHLO-style gather and scatter: Gather, GatherElements,
// GatherND, Scatter/ScatterElements, ScatterND, plus ReverseSequence (a gather with computed
// indices) and TopK.
#include "frontend/onnx/ops_common.h"

namespace kiln::onnx {

StatusOr<Value*> wrapNegative(OpContext& c, Value* indices, const Dim& dim) {
  ONNX_BUILT(c, indices);
  Value* idx = indices->type().dtype() == DType::I64 ? indices : c.b.convert(indices, DType::I64);
  ONNX_BUILT(c, idx);
  // Indices known to be non-negative need no wrapping.
  KILN_ASSIGN_OR_RETURN(const KnownValue* k, c.known(idx));
  if (k && !k->symbolic) {
    bool anyNegative = false;
    for (int64_t i = 0; i < k->tensor.numElements() && !anyNegative; ++i)
      anyNegative = k->tensor.getInt(i) < 0;
    if (!anyNegative) return idx;
  }
  if (!dim.isStatic())
    return c.unsupported("negative indices into symbolic dimension " + dim.str());
  Value* zero = splat(c.b, idx, 0);
  Value* r = c.b.select(c.b.compare("lt", idx, zero),
                        c.b.add(idx, splat(c.b, idx, double(dim.value()))), idx);
  ONNX_BUILT(c, r);
  return r;
}

namespace {

std::vector<int64_t> upTo(int64_t n, int64_t from = 0) {
  std::vector<int64_t> v;
  for (int64_t i = from; i < n; ++i) v.push_back(i);
  return v;
}

// Static extents of x, with 1 at `axis`; error for a symbolic extent elsewhere.
StatusOr<std::vector<int64_t>> sliceSizes(OpContext& c, Value* x,
                                          const std::vector<int64_t>& unitAxes) {
  std::vector<int64_t> s;
  for (int64_t i = 0; i < x->type().rank(); ++i) {
    if (std::find(unitAxes.begin(), unitAxes.end(), i) != unitAxes.end()) {
      s.push_back(1);
      continue;
    }
    const Dim& d = x->type().dim(i);
    if (!d.isStatic()) return c.unsupported("gathering from symbolic dimension " + d.str());
    s.push_back(d.value());
  }
  return s;
}

Value* gatherOp(OpContext& c, Value* x, Value* idx, std::vector<int64_t> offsetDims,
                std::vector<int64_t> collapsed, std::vector<int64_t> startMap, int64_t ivd,
                std::vector<int64_t> sizes) {
  return c.b.op(OpCode::Gather, {x, idx},
                {{"offset_dims", intsAttr(std::move(offsetDims))},
                 {"collapsed_slice_dims", intsAttr(std::move(collapsed))},
                 {"start_index_map", intsAttr(std::move(startMap))},
                 {"index_vector_dim", intAttr(ivd)},
                 {"slice_sizes", intsAttr(std::move(sizes))}});
}

// Full coordinates for element-wise indexing: [idx.shape..., rank], with idx along `axis` and
// the element's own position along every other dim.
Value* fullCoordinates(OpContext& c, Value* idx, int64_t axis, int64_t rank) {
  Shape s = idx->type().dims();
  TensorType t(DType::I64, s);
  Shape s1 = s;
  s1.push_back(Dim(1));
  std::vector<Value*> parts;
  for (int64_t k = 0; k < rank; ++k) {
    Value* coord = k == axis ? idx : c.b.iota(t, k);
    parts.push_back(c.b.reshape(coord, s1));
  }
  return parts.size() == 1 ? parts[0] : c.b.concatenate(parts, rank);
}

}  // namespace

StatusOr<Value*> gatherAxis(OpContext& c, Value* x, Value* indices, int64_t axis) {
  ONNX_BUILT(c, x);
  ONNX_BUILT(c, indices);
  int64_t r = x->type().rank(), q = indices->type().rank();
  KILN_ASSIGN_OR_RETURN(auto sizes, sliceSizes(c, x, {axis}));
  std::vector<int64_t> offset = upTo(axis);
  for (int64_t i = axis + q; i < r + q - 1; ++i) offset.push_back(i);
  Value* g = gatherOp(c, x, indices, offset, {axis}, {axis}, q, sizes);
  ONNX_BUILT(c, g);
  return g;
}

StatusOr<Value*> gatherElements(OpContext& c, Value* x, Value* idx, int64_t axis) {
  ONNX_BUILT(c, x);
  ONNX_BUILT(c, idx);
  int64_t r = x->type().rank();
  if (idx->type().rank() != r) return c.err("indices must have the rank of the data");
  Value* coords = fullCoordinates(c, idx, axis, r);
  ONNX_BUILT(c, coords);
  Value* g = gatherOp(c, x, coords, {}, upTo(r), upTo(r), r, std::vector<int64_t>(r, 1));
  ONNX_BUILT(c, g);
  return g;
}

namespace {

Status gather(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  KILN_ASSIGN_OR_RETURN(Value * idx, c.req(1));
  KILN_ASSIGN_OR_RETURN(int64_t axis, normAxis(c.attrInt("axis", 0), x->type().rank()));
  KILN_ASSIGN_OR_RETURN(idx, wrapNegative(c, idx, x->type().dim(axis)));
  // One known index into a static axis of a tensor with symbolic dims elsewhere (x[:, 0] of a
  // batch): a slice and a reshape, which take symbols, rather than a gather, which does not.
  const Dim& along = x->type().dim(axis);
  KILN_ASSIGN_OR_RETURN(const KnownValue* k, c.known(idx));
  if (!x->type().isStatic() && along.isStatic() && idx->type().rank() == 0 && k && !k->symbolic) {
    int64_t i = k->tensor.getInt(0);
    if (i < 0 || i >= along.value())
      return c.err("index " + std::to_string(i) + " is out of range for dimension " +
                   std::to_string(axis) + " of " + x->type().str());
    Shape dims = x->type().dims();
    dims.erase(dims.begin() + axis);
    c.setOutput(0, c.b.reshape(sliceAxis(c.b, x, axis, i, i + 1, 1), dims));
    return Status::ok();
  }
  KILN_ASSIGN_OR_RETURN(Value * r, gatherAxis(c, x, idx, axis));
  c.setOutput(0, r);
  return Status::ok();
}

Status gatherElementsOp(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  KILN_ASSIGN_OR_RETURN(Value * idx, c.req(1));
  KILN_ASSIGN_OR_RETURN(int64_t axis, normAxis(c.attrInt("axis", 0), x->type().rank()));
  KILN_ASSIGN_OR_RETURN(idx, wrapNegative(c, idx, x->type().dim(axis)));
  KILN_ASSIGN_OR_RETURN(Value * r, gatherElements(c, x, idx, axis));
  c.setOutput(0, r);
  return Status::ok();
}

// GatherND / ScatterND index tuples [..., k]: batch coordinates prepended for batch_dims, and
// negative components wrapped by the extents they index.
StatusOr<Value*> ndIndices(OpContext& c, Value* data, Value* idx, int64_t batchDims, int64_t& k) {
  int64_t q = idx->type().rank();
  if (q < 1) return c.err("indices must have rank >= 1");
  const Dim& kd = idx->type().dim(q - 1);
  if (!kd.isStatic()) return c.unsupported("a symbolic index tuple length");
  k = kd.value();
  if (batchDims < 0 || batchDims >= q || batchDims > data->type().rank() ||
      k > data->type().rank() - batchDims)
    return c.err("batch_dims " + std::to_string(batchDims) + " and index tuples of length " +
                 std::to_string(k) + " do not fit data " + data->type().str() + " and indices " +
                 idx->type().str());
  Value* i64 = idx->type().dtype() == DType::I64 ? idx : c.b.convert(idx, DType::I64);
  ONNX_BUILT(c, i64);
  KILN_ASSIGN_OR_RETURN(const KnownValue* kv, c.known(i64));
  bool wrap = !kv || kv->symbolic;
  for (int64_t i = 0; kv && !kv->symbolic && i < kv->tensor.numElements(); ++i)
    wrap |= kv->tensor.getInt(i) < 0;
  if (wrap) {
    std::vector<int64_t> ext;
    for (int64_t j = 0; j < k; ++j) {
      const Dim& d = data->type().dim(batchDims + j);
      if (!d.isStatic())
        return c.unsupported("negative indices into symbolic dimension " + d.str());
      ext.push_back(d.value());
    }
    Value* extB = c.b.broadcastInDim(i64Const(c.b, ext), i64->type().dims(), {q - 1});
    Value* neg = c.b.compare("lt", i64, splat(c.b, i64, 0));
    i64 = c.b.select(neg, c.b.add(i64, extB), i64);
    ONNX_BUILT(c, i64);
  }
  if (batchDims == 0) return i64;
  Shape s = i64->type().dims();
  s.back() = Dim(1);
  std::vector<Value*> parts;
  for (int64_t i = 0; i < batchDims; ++i) parts.push_back(c.b.iota(TensorType(DType::I64, s), i));
  parts.push_back(i64);
  Value* r = c.b.concatenate(parts, q - 1);
  ONNX_BUILT(c, r);
  k += batchDims;
  return r;
}

Status gatherND(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  KILN_ASSIGN_OR_RETURN(Value * idx, c.req(1));
  int64_t b = c.attrInt("batch_dims", 0), k = 0;
  KILN_ASSIGN_OR_RETURN(idx, ndIndices(c, x, idx, b, k));
  int64_t r = x->type().rank(), q = idx->type().rank();
  KILN_ASSIGN_OR_RETURN(auto sizes, sliceSizes(c, x, upTo(k)));
  std::vector<int64_t> offset;
  for (int64_t i = 0; i < r - k; ++i) offset.push_back(q - 1 + i);
  c.setOutput(0, gatherOp(c, x, idx, offset, upTo(k), upTo(k), q - 1, sizes));
  return Status::ok();
}

StatusOr<std::string> reduction(OpContext& c) {
  std::string r = c.attrString("reduction", "none");
  if (r == "none" || r == "add" || r == "mul" || r == "max" || r == "min") return r;
  return c.unsupported("reduction '" + r + "'");
}

Value* scatterOp(OpContext& c, Value* x, Value* idx, Value* upd, std::vector<int64_t> window,
                 std::vector<int64_t> inserted, int64_t ivd, const std::string& red) {
  std::vector<int64_t> map = inserted;
  return c.b.op(OpCode::Scatter, {x, idx, upd},
                {{"update_window_dims", intsAttr(std::move(window))},
                 {"inserted_window_dims", intsAttr(std::move(inserted))},
                 {"scatter_dims_to_operand_dims", intsAttr(std::move(map))},
                 {"index_vector_dim", intAttr(ivd)},
                 {"reduction", enumAttr(red)}});
}

Status scatterElements(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  KILN_ASSIGN_OR_RETURN(Value * idx, c.req(1));
  KILN_ASSIGN_OR_RETURN(Value * upd, c.req(2));
  KILN_ASSIGN_OR_RETURN(std::string red, reduction(c));
  int64_t r = x->type().rank();
  KILN_ASSIGN_OR_RETURN(int64_t axis, normAxis(c.attrInt("axis", 0), r));
  if (idx->type().dims() != upd->type().dims())
    return c.err("indices and updates must have one shape");
  KILN_ASSIGN_OR_RETURN(idx, wrapNegative(c, idx, x->type().dim(axis)));
  Value* coords = fullCoordinates(c, idx, axis, r);
  c.setOutput(0, scatterOp(c, x, coords, upd, {}, upTo(r), r, red));
  return Status::ok();
}

Status scatterND(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  KILN_ASSIGN_OR_RETURN(Value * idx, c.req(1));
  KILN_ASSIGN_OR_RETURN(Value * upd, c.req(2));
  KILN_ASSIGN_OR_RETURN(std::string red, reduction(c));
  int64_t k = 0;
  KILN_ASSIGN_OR_RETURN(idx, ndIndices(c, x, idx, 0, k));
  int64_t r = x->type().rank(), q = idx->type().rank();
  std::vector<int64_t> window;
  for (int64_t i = 0; i < r - k; ++i) window.push_back(q - 1 + i);
  c.setOutput(0, scatterOp(c, x, idx, upd, window, upTo(k), q - 1, red));
  return Status::ok();
}

// Reverses the first seq_lens[b] steps of each batch entry: a gather along the time axis with
// index len-1-t for t < len and t otherwise.
Status reverseSequence(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  KILN_ASSIGN_OR_RETURN(Value * lens, c.req(1));
  int64_t r = x->type().rank();
  if (r < 2) return c.err("the input must have rank >= 2");
  KILN_ASSIGN_OR_RETURN(int64_t ta, normAxis(c.attrInt("time_axis", 0), r, "time_axis"));
  KILN_ASSIGN_OR_RETURN(int64_t ba, normAxis(c.attrInt("batch_axis", 1), r, "batch_axis"));
  TensorType t(DType::I64, x->type().dims());
  Value* time = c.b.iota(t, ta);
  Value* len = c.b.broadcastInDim(c.b.convert(lens, DType::I64), t.dims(), {ba});
  Value* rev = c.b.sub(c.b.sub(len, splatType(c.b, t, 1)), time);
  Value* idx = c.b.select(c.b.compare("lt", time, len), rev, time);
  ONNX_BUILT(c, idx);
  KILN_ASSIGN_OR_RETURN(Value * out, gatherElements(c, x, idx, ta));
  c.setOutput(0, out);
  return Status::ok();
}

Status topKWith(OpContext& c, int64_t k) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  KILN_ASSIGN_OR_RETURN(int64_t axis, normAxis(c.attrInt("axis", -1), x->type().rank()));
  bool largest = c.attrInt("largest", 1) != 0;
  c.ignoreAttr("sorted");  // sorted output is a valid order for sorted = 0 too
  auto rs = c.b.opN(OpCode::TopK, {x},
                    {{"k", intAttr(k)}, {"axis", intAttr(axis)}, {"largest", boolAttr(largest)}});
  if (rs.size() != 2) return c.builderError();
  c.setOutput(0, rs[0]);
  c.setOutput(1, rs[1]);
  return Status::ok();
}

Status topKAttr(OpContext& c) { return topKWith(c, c.attrInt("k", 0)); }

Status topK(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(auto k, c.knownInts(1, "k"));
  if (k.size() != 1) return c.err("K must hold one value");
  return topKWith(c, k[0]);
}

}  // namespace

void addIndexOps(OpTable& t) {
  t.add("Gather", 1, gather);
  t.add("GatherElements", 11, gatherElementsOp);
  t.add("GatherND", 11, gatherND);
  t.add("Scatter", 9, scatterElements);
  t.add("ScatterElements", 11, scatterElements);
  t.add("ScatterND", 11, scatterND);
  t.add("ReverseSequence", 10, reverseSequence);
  t.add("TopK", 1, topKAttr);
  t.add("TopK", 10, topK);
}

}  // namespace kiln::onnx
