// ONNX ops that make or describe tensors: Constant, ConstantOfShape, Range, EyeLike, Shape,
// Size, Identity, Dropout (inference), OneHot, Trilu, NonZero and Compress (the last two of
// run-time size unless their input is known while importing: passes/expose_dynamic_sizes.h;
// Shape and Size of such a value ask for its sizes with get_dimension_size).
#include <cmath>
#include <set>

#include "frontend/onnx/ops_common.h"
#include "frontend/onnx/tensor_proto.h"

namespace kiln::onnx {

namespace {

// True when x is computed from a value of run-time size (a set_dimension_size): its type has a
// bound where the size may be smaller, so Shape and Size ask for its sizes at run time.
bool mayBeRunTimeSized(const Value* x) {
  std::vector<const Value*> work{x};
  std::set<const Node*> seen;
  while (!work.empty()) {
    const Node* n = work.back()->def();
    work.pop_back();
    if (!seen.insert(n).second) continue;
    if (n->op() == OpCode::SetDimensionSize) return true;
    for (const Value* v : n->operands()) work.push_back(v);
  }
  return false;
}

// get_dimension_size of each dim of x in [start, end), as an i64[end - start].
StatusOr<Value*> runTimeShape(OpContext& c, Value* x, int64_t start, int64_t end) {
  std::vector<Value*> dims;
  for (int64_t d = start; d < end; ++d) {
    Value* size = c.b.op(OpCode::GetDimensionSize, {x}, {{"dimension", intAttr(d)}});
    ONNX_BUILT(c, size);
    dims.push_back(c.b.reshape(size, {Dim(1)}));
    ONNX_BUILT(c, dims.back());
  }
  if (dims.empty()) return i64Const(c.b, {});
  Value* r = dims.size() == 1 ? dims[0] : c.b.concatenate(dims, 0);
  ONNX_BUILT(c, r);
  return r;
}

Status constant(OpContext& c) {
  for (const char* s : {"value_string", "value_strings"})
    if (c.hasAttr(s)) return c.unsupported("string constants are not supported");
  if (c.hasAttr("sparse_value")) return c.unsupported("sparse constants are not supported");
  Tensor t;
  if (c.hasAttr("value")) {
    KILN_ASSIGN_OR_RETURN(t, c.attrTensor("value"));
  } else if (c.hasAttr("value_float")) {
    t = Tensor(DType::F32, {});
    t.setDouble(0, c.attrFloat("value_float", 0));
  } else if (c.hasAttr("value_int")) {
    t = Tensor(DType::I64, {});
    t.setInt(0, c.attrInt("value_int", 0));
  } else if (c.hasAttr("value_floats")) {
    auto v = c.attrFloats("value_floats");
    t = Tensor(DType::F32, {static_cast<int64_t>(v.size())});
    for (size_t i = 0; i < v.size(); ++i) t.setDouble(static_cast<int64_t>(i), v[i]);
  } else if (c.hasAttr("value_ints")) {
    auto v = c.attrInts("value_ints");
    t = Tensor(DType::I64, {static_cast<int64_t>(v.size())});
    for (size_t i = 0; i < v.size(); ++i) t.setInt(static_cast<int64_t>(i), v[i]);
  } else {
    return c.err("no value attribute");
  }
  c.setOutput(0, c.b.constant(std::move(t)));
  return Status::ok();
}

Status constantOfShape(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Shape shape, c.knownShape(0, "the shape"));
  Tensor v(DType::F32, {});
  if (c.hasAttr("value")) {
    KILN_ASSIGN_OR_RETURN(v, c.attrTensor("value"));
    if (v.numElements() != 1) return c.err("attribute 'value' must hold one element");
    v = v.reshaped({});
  }
  Value* s = c.b.constant(v);
  c.setOutput(0, shape.empty() ? s : c.b.broadcastInDim(s, shape, {}));
  return Status::ok();
}

// Largest Range computed while importing.
constexpr int64_t kMaxRange = int64_t(1) << 24;

// Range's inputs are known, so its result is computed here (its length depends on them).
Status range(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Tensor start, c.knownInput(0, "the start"));
  KILN_ASSIGN_OR_RETURN(Tensor limit, c.knownInput(1, "the limit"));
  KILN_ASSIGN_OR_RETURN(Tensor delta, c.knownInput(2, "the delta"));
  for (const Tensor* t : {&start, &limit, &delta})
    if (t->numElements() != 1) return c.err("start, limit and delta must be scalars");
  DType dt = start.dtype();
  int64_t n = 0;
  if (isFloat(dt)) {
    double s = start.getDouble(0), l = limit.getDouble(0), d = delta.getDouble(0);
    if (d == 0 || !std::isfinite(s) || !std::isfinite(l) || !std::isfinite(d))
      return c.err("delta must be non-zero and the inputs finite");
    double count = std::max(std::ceil((l - s) / d), 0.0);
    if (count > static_cast<double>(kMaxRange))
      return c.unsupported("a range of more than " + std::to_string(kMaxRange) + " elements");
    n = static_cast<int64_t>(count);
    Tensor r(dt, {n});
    for (int64_t i = 0; i < n; ++i) r.setDouble(i, s + static_cast<double>(i) * d);
    c.setOutput(0, c.b.constant(std::move(r)));
    return Status::ok();
  }
  int64_t s = start.getInt(0), l = limit.getInt(0), d = delta.getInt(0);
  if (d == 0) return c.err("delta must be non-zero");
  if ((d > 0 && l > s) || (d < 0 && l < s)) {
    // ceil((l - s) / d) with both of one sign, without overflow for sane ranges.
    long double span = static_cast<long double>(l) - static_cast<long double>(s);
    long double count = std::ceil(span / static_cast<long double>(d));
    if (count > static_cast<long double>(kMaxRange))
      return c.unsupported("a range of more than " + std::to_string(kMaxRange) + " elements");
    n = static_cast<int64_t>(count);
  }
  Tensor r(dt, {n});
  for (int64_t i = 0; i < n; ++i)  // in the range by construction; unsigned to rule out UB
    r.setInt(i, static_cast<int64_t>(static_cast<uint64_t>(s) +
                                     static_cast<uint64_t>(i) * static_cast<uint64_t>(d)));
  c.setOutput(0, c.b.constant(std::move(r)));
  return Status::ok();
}

// Ones where column - row == k over the last two dims.
Value* diagonalMask(OpContext& c, const Shape& dims, int64_t k, const char* dir) {
  int64_t r = static_cast<int64_t>(dims.size());
  TensorType t(DType::I64, dims);
  Value* diff = c.b.sub(c.b.iota(t, r - 1), c.b.iota(t, r - 2));
  return c.b.compare(dir, diff, splatType(c.b, t, static_cast<double>(k)));
}

Status eyeLike(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  if (x->type().rank() != 2) return c.err("the input must be 2-D, got " + x->type().str());
  DType dt = x->type().dtype();
  if (c.hasAttr("dtype")) {
    int code = static_cast<int>(c.attrInt("dtype", 0));
    auto d = dtypeFromOnnx(code);
    if (!d) return c.unsupported("dtype " + onnxDTypeName(code) + " is not supported");
    dt = *d;
  }
  Value* m = diagonalMask(c, x->type().dims(), c.attrInt("k", 0), "eq");
  c.setOutput(0, c.b.convert(m, dt));
  return Status::ok();
}

Status trilu(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  if (x->type().rank() < 2) return c.err("the input must have rank >= 2");
  int64_t k = 0;
  if (c.has(1)) {
    KILN_ASSIGN_OR_RETURN(auto kv, c.knownInts(1, "the diagonal offset k"));
    if (kv.size() != 1) return c.err("k must hold one value");
    k = kv[0];
  }
  bool upper = c.attrInt("upper", 1) != 0;
  Value* keep = diagonalMask(c, x->type().dims(), k, upper ? "ge" : "le");
  c.setOutput(0, c.b.select(keep, x, splat(c.b, x, 0)));
  return Status::ok();
}

Status shape(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  int64_t rank = x->type().rank();
  int64_t start = c.attrInt("start", 0), end = c.attrInt("end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, start, rank);
  if (mayBeRunTimeSized(x)) {
    KILN_ASSIGN_OR_RETURN(Value * r, runTimeShape(c, x, start, end));
    c.setOutput(0, r);
    return Status::ok();
  }
  Tensor t(DType::I64, {end - start});
  bool symbolic = false;
  for (int64_t i = start; i < end; ++i) {
    const Dim& d = x->type().dim(i);
    symbolic |= d.isSymbolic();
    t.setInt(i - start, d.isStatic() ? d.value() : c.importer().sentinelFor(d));
  }
  Value* v = c.b.constant(t);
  ONNX_BUILT(c, v);
  // A symbolic shape is a stand-in that may only feed other shapes (checked at the end).
  if (symbolic) c.importer().addSymbolicConstant(v, KnownValue{t, true});
  c.setOutput(0, v);
  return Status::ok();
}

Status size(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  if (mayBeRunTimeSized(x)) {
    Value* n = scalarConst(c.b, DType::I64, 1);
    for (int64_t d = 0; d < x->type().rank() && n; ++d) {
      Value* size = c.b.op(OpCode::GetDimensionSize, {x}, {{"dimension", intAttr(d)}});
      n = size ? c.b.op(OpCode::Mul, {n, size}) : nullptr;
    }
    ONNX_BUILT(c, n);
    c.setOutput(0, n);
    return Status::ok();
  }
  auto n = x->type().numElements();
  if (!n) return c.unsupported("the size of " + x->type().str() + " is not static");
  Tensor t(DType::I64, {});
  t.setInt(0, *n);
  c.setOutput(0, c.b.constant(std::move(t)));
  return Status::ok();
}

Status identity(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  c.setOutput(0, x);
  return Status::ok();
}

// Inference-mode dropout: the input passes through; the mask is all true (ones before opset 10).
Status dropout(OpContext& c) {
  c.ignoreAttr("consumed_inputs");
  c.ignoreAttr("seed");
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  if (c.opset() < 7 && c.attrInt("is_test", 0) == 0)
    return c.unsupported("training-mode dropout (is_test = 0) is not supported");
  double ratio = c.attrFloat("ratio", 0.5);
  if (c.has(1)) {
    KILN_ASSIGN_OR_RETURN(ratio, c.knownScalar(1, "the ratio"));
  }
  if (c.has(2)) {
    KILN_ASSIGN_OR_RETURN(double training, c.knownScalar(2, "training_mode"));
    if (training != 0 && ratio != 0)
      return c.unsupported("training-mode dropout (random) is not supported");
  }
  c.setOutput(0, x);
  if (c.wantsOutput(1)) {
    DType mt = c.opset() >= 10 ? DType::Bool : x->type().dtype();
    c.setOutput(1, splatType(c.b, x->type().withDType(mt), 1.0));
  }
  return Status::ok();
}

Status oneHot(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * indices, c.req(0));
  KILN_ASSIGN_OR_RETURN(double depthD, c.knownScalar(1, "the depth"));
  KILN_ASSIGN_OR_RETURN(Value * values, c.req(2));
  if (!(depthD >= 0 && depthD <= static_cast<double>(kMaxElements)))
    return c.err("depth must be a non-negative extent");
  auto depth = static_cast<int64_t>(depthD);
  int64_t rank = indices->type().rank();
  KILN_ASSIGN_OR_RETURN(int64_t axis, normAxis(c.attrInt("axis", -1), rank + 1));
  Shape out = indices->type().dims();
  out.insert(out.begin() + axis, Dim(depth));
  KILN_ASSIGN_OR_RETURN(Value * idx, wrapNegative(c, indices, Dim(depth)));
  std::vector<int64_t> keep;
  for (int64_t i = 0; i <= rank; ++i)
    if (i != axis) keep.push_back(i);
  Value* idxB = c.b.broadcastInDim(idx, out, keep);
  Value* hot = c.b.compare("eq", c.b.iota(TensorType(DType::I64, out), axis), idxB);
  Value* flat = c.b.reshape(values, {Dim(2)});
  Value* off = c.b.reshape(c.b.slice(flat, {0}, {1}), {});
  Value* on = c.b.reshape(c.b.slice(flat, {1}, {2}), {});
  ONNX_BUILT(c, hot);
  ONNX_BUILT(c, on);
  ONNX_BUILT(c, off);
  c.setOutput(0,
              c.b.select(hot, c.b.broadcastInDim(on, out, {}), c.b.broadcastInDim(off, out, {})));
  return Status::ok();
}

// A value known while importing (a constant, or computed from constants), or nullptr.
const Tensor* knownTensor(OpContext& c, Value* v) {
  StatusOr<const KnownValue*> k = c.known(v);
  return k && *k && !(*k)->symbolic ? &(*k)->tensor : nullptr;
}

// The row-major positions of the nonzero elements of a known tensor.
std::vector<int64_t> nonZeroPositions(const Tensor& x, int64_t limit) {
  std::vector<int64_t> hits;
  for (int64_t i = 0; i < std::min(x.numElements(), limit); ++i)
    if (x.getDouble(i) != 0) hits.push_back(i);
  return hits;
}

// NonZero: a constant when the input is known; else `nonzero`, whose result has at most one
// column per element and as many as its count at run time (set_dimension_size).
Status nonZero(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * xv, c.req(0));
  if (const Tensor* known = knownTensor(c, xv)) {
    const Tensor& x = *known;
    std::vector<int64_t> hits = nonZeroPositions(x, x.numElements());
    int64_t rank = x.rank(), n = static_cast<int64_t>(hits.size());
    std::vector<int64_t> strides = x.strides();
    Tensor r(DType::I64, {rank, n});
    for (int64_t j = 0; j < n; ++j)
      for (int64_t d = 0; d < rank; ++d)
        r.setInt(d * n + j, (hits[static_cast<size_t>(j)] / strides[static_cast<size_t>(d)]) %
                                x.dims()[static_cast<size_t>(d)]);
    c.setOutput(0, c.b.constant(std::move(r)));
    return Status::ok();
  }
  std::vector<Value*> nz = c.b.opN(OpCode::NonZero, {xv});
  if (nz.size() != 2) return c.builderError();
  Value* r = c.b.op(OpCode::SetDimensionSize, {nz[0], nz[1]}, {{"dimension", intAttr(1)}});
  ONNX_BUILT(c, r);
  c.setOutput(0, r);
  return Status::ok();
}

// Compress: a gather of the kept indices along the axis; their number is known at run time
// (nonzero of the condition), or while importing when the condition is.
Status compress(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  KILN_ASSIGN_OR_RETURN(Value * condv, c.req(1));
  if (!c.hasAttr("axis")) {
    auto n = x->type().numElements();
    if (!n) return c.unsupported("flattening " + x->type().str() + " needs static dimensions");
    x = c.b.reshape(x, {Dim(*n)});
    ONNX_BUILT(c, x);
  }
  KILN_ASSIGN_OR_RETURN(int64_t axis, normAxis(c.attrInt("axis", 0), x->type().rank()));
  const Dim& d = x->type().dim(axis);
  if (!d.isStatic()) return c.unsupported("compressing a symbolic dimension is not supported");
  if (const Tensor* cond = knownTensor(c, condv)) {
    KILN_ASSIGN_OR_RETURN(
        Value * r, gatherAxis(c, x, i64Const(c.b, nonZeroPositions(*cond, d.value())), axis));
    c.setOutput(0, r);
    return Status::ok();
  }
  if (condv->type().rank() != 1) return c.err("the condition must be 1-D");
  const Dim& len = condv->type().dim(0);
  if (!len.isStatic()) return c.unsupported("a condition of symbolic length is not supported");
  // Entries past the axis's extent select nothing that exists: they are dropped.
  if (len.value() > d.value()) condv = c.b.slice(condv, {0}, {d.value()});
  std::vector<Value*> nz = c.b.opN(OpCode::NonZero, {condv});
  if (nz.size() != 2) return c.builderError();
  const int64_t bound = nz[0]->type().dim(1).value();
  Value* idx = c.b.reshape(nz[0], {Dim(bound)});
  ONNX_BUILT(c, idx);
  KILN_ASSIGN_OR_RETURN(Value * g, gatherAxis(c, x, idx, axis));
  Value* r = c.b.op(OpCode::SetDimensionSize, {g, nz[1]}, {{"dimension", intAttr(axis)}});
  ONNX_BUILT(c, r);
  c.setOutput(0, r);
  return Status::ok();
}

}  // namespace

void addMiscOps(OpTable& t) {
  t.add("Constant", 1, constant);
  t.add("ConstantOfShape", 9, constantOfShape);
  t.add("Range", 11, range);
  t.add("EyeLike", 9, eyeLike);
  t.add("Trilu", 14, trilu);
  t.add("Shape", 1, shape);
  t.add("Size", 1, size);
  t.add("Identity", 1, identity);
  t.add("Dropout", 1, dropout);
  t.add("OneHot", 9, oneHot);
  t.add("NonZero", 9, nonZero);
  t.add("Compress", 9, compress);
}

}  // namespace kiln::onnx
