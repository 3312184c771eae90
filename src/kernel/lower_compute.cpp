// The value of a kernel member at an index, by its op: elementwise ops apply at the index, data
// movement rewrites it (see lower.h).
#include <algorithm>
#include <cmath>
#include <limits>

#include "ir/resize_geometry.h"
#include "kernel/lowerer.h"

namespace kiln::kernel::lowering {

namespace {

std::optional<UnaryOp> unaryFor(OpCode op) {
  switch (op) {
#define KILN_UN(x) \
  case OpCode::x: return UnaryOp::x;
    KILN_UN(Neg)
    KILN_UN(Abs)
    KILN_UN(Sign)
    KILN_UN(Floor)
    KILN_UN(Ceil)
    KILN_UN(RoundNearestEven)
    KILN_UN(Exp)
    KILN_UN(Expm1)
    KILN_UN(Log)
    KILN_UN(Log1p)
    KILN_UN(Sqrt)
    KILN_UN(Rsqrt)
    KILN_UN(Sin)
    KILN_UN(Cos)
    KILN_UN(Tan)
    KILN_UN(Asin)
    KILN_UN(Acos)
    KILN_UN(Atan)
    KILN_UN(Sinh)
    KILN_UN(Cosh)
    KILN_UN(Asinh)
    KILN_UN(Acosh)
    KILN_UN(Atanh)
    KILN_UN(Tanh)
    KILN_UN(Erf)
    KILN_UN(Sigmoid)
    KILN_UN(Not)
    KILN_UN(IsFinite)
    KILN_UN(IsInf)
    KILN_UN(IsNan)
#undef KILN_UN
    default: return std::nullopt;
  }
}

std::optional<BinaryOp> binaryFor(OpCode op) {
  switch (op) {
#define KILN_BIN(x) \
  case OpCode::x: return BinaryOp::x;
    KILN_BIN(Add)
    KILN_BIN(Sub)
    KILN_BIN(Mul)
    KILN_BIN(Div)
    KILN_BIN(Rem)
    KILN_BIN(Pow)
    KILN_BIN(Max)
    KILN_BIN(Min)
    KILN_BIN(Atan2)
    KILN_BIN(And)
    KILN_BIN(Or)
    KILN_BIN(Xor)
    KILN_BIN(ShiftLeft)
    KILN_BIN(ShiftRightArithmetic)
    KILN_BIN(ShiftRightLogical)
#undef KILN_BIN
    default: return std::nullopt;
  }
}

BinaryOp compareOp(const std::string& direction) {
  if (direction == "eq") return BinaryOp::Eq;
  if (direction == "ne") return BinaryOp::Ne;
  if (direction == "lt") return BinaryOp::Lt;
  if (direction == "le") return BinaryOp::Le;
  if (direction == "gt") return BinaryOp::Gt;
  return BinaryOp::Ge;
}

}  // namespace

bool lowersOverSymbols(OpCode op) {
  switch (op) {
    case OpCode::BroadcastInDim:
    case OpCode::Reshape:
    case OpCode::Transpose:
    case OpCode::Iota:
    case OpCode::Slice:
    case OpCode::Reverse:
    case OpCode::Pad:
    case OpCode::Concatenate:
    case OpCode::BatchNormInference:
    case OpCode::Convert:
    case OpCode::Select:
    case OpCode::Clamp:
    case OpCode::Compare:
    case OpCode::Gelu: return true;
    default: return unaryFor(op) || binaryFor(op);
  }
}

StatusOr<ExprRef> Lowerer::compute(const Value* v, const Index& idx) {
  const Node* n = v->def();
  DType dt = v->type().dtype();
  if (!members_.count(n)) {
    if (n->op() == OpCode::Constant && v->type().numElements() == 1) {
      const Tensor& t = n->constantData().tensor;
      return constOf(t.getDouble(0), computeType(dt));
    }
    const Buffer& b = bufferFor(v, BufferRole::Input);
    return cast(load(b.name, dt, flatIndex(idx, b.extents())), computeType(dt));
  }
  auto operand = [&](size_t i, const Index& at) { return valueAt(n->operand(i), at); };
  if (auto u = unaryFor(n->op())) {
    KILN_ASSIGN_OR_RETURN(ExprRef a, operand(0, idx));
    return unary(*u, a);
  }
  if (auto b = binaryFor(n->op())) {
    KILN_ASSIGN_OR_RETURN(ExprRef a, operand(0, idx));
    KILN_ASSIGN_OR_RETURN(ExprRef c, operand(1, idx));
    return binary(*b, a, c);
  }
  return computeElementwise(v, idx);
}

StatusOr<ExprRef> Lowerer::computeElementwise(const Value* v, const Index& idx) {
  const Node* n = v->def();
  DType dt = v->type().dtype();
  auto operand = [&](size_t i, const Index& at) { return valueAt(n->operand(i), at); };
  switch (n->op()) {
    case OpCode::Compare: {
      KILN_ASSIGN_OR_RETURN(ExprRef a, operand(0, idx));
      KILN_ASSIGN_OR_RETURN(ExprRef c, operand(1, idx));
      return binary(compareOp(n->attrEnum("direction")), a, c);
    }
    case OpCode::Convert: {
      KILN_ASSIGN_OR_RETURN(ExprRef a, operand(0, idx));
      // Through the stored type, so an f32 -> bf16 -> f32 chain rounds as the graph says.
      return cast(cast(a, dt), computeType(dt));
    }
    case OpCode::Select: {
      KILN_ASSIGN_OR_RETURN(ExprRef c, operand(0, idx));
      KILN_ASSIGN_OR_RETURN(ExprRef a, operand(1, idx));
      KILN_ASSIGN_OR_RETURN(ExprRef b, operand(2, idx));
      return select(c, a, b);
    }
    case OpCode::Clamp: {
      // clamp(min, x, max) = min(max(x, min), max); rank-0 bounds apply everywhere.
      auto bound = [&](size_t i) {
        return n->operand(i)->type().rank() == 0 ? valueAt(n->operand(i), {})
                                                 : valueAt(n->operand(i), idx);
      };
      KILN_ASSIGN_OR_RETURN(ExprRef lo, bound(0));
      KILN_ASSIGN_OR_RETURN(ExprRef x, operand(1, idx));
      KILN_ASSIGN_OR_RETURN(ExprRef hi, bound(2));
      return binary(BinaryOp::Min, binary(BinaryOp::Max, x, lo), hi);
    }
    case OpCode::Gelu: {
      KILN_ASSIGN_OR_RETURN(ExprRef x, operand(0, idx));
      return gelu(x, n->attrEnum("approximate") == "tanh");
    }
    case OpCode::BatchNormInference: {
      size_t fi = static_cast<size_t>(n->attrInt("feature_index"));
      Index ch = {idx[fi]};
      KILN_ASSIGN_OR_RETURN(ExprRef x, operand(0, idx));
      KILN_ASSIGN_OR_RETURN(ExprRef scale, operand(1, ch));
      KILN_ASSIGN_OR_RETURN(ExprRef offset, operand(2, ch));
      KILN_ASSIGN_OR_RETURN(ExprRef mean, operand(3, ch));
      KILN_ASSIGN_OR_RETURN(ExprRef variance, operand(4, ch));
      DType ct = x->type;
      ExprRef inv = binary(BinaryOp::Div, floatConst(1.0, ct),
                           unary(UnaryOp::Sqrt, binary(BinaryOp::Add, variance,
                                                       floatConst(n->attrFloat("epsilon"), ct))));
      return binary(
          BinaryOp::Add,
          binary(BinaryOp::Mul, binary(BinaryOp::Mul, binary(BinaryOp::Sub, x, mean), inv), scale),
          offset);
    }
    default: return computeMovement(v, idx);
  }
}

// A pad: the operand where the index falls on it (past the low padding, on the interior
// stride, before the end), else the padding value.
StatusOr<ExprRef> Lowerer::padAt(const Value* v, const Index& idx) {
  const Node* n = v->def();
  auto low = n->attrInts("low");
  auto interior = n->attrInts("interior", std::vector<int64_t>(low.size(), 0));
  const Shape& in = n->operand(0)->type().dims();
  Index at(idx.size());
  std::vector<ExprRef> valid;
  for (size_t i = 0; i < idx.size(); ++i) {
    if (in[i].isSymbolic()) {  // never padded (the type rule)
      at[i] = idx[i];
      continue;
    }
    ExprRef q = binary(BinaryOp::Sub, idx[i], intConst(low[i]));
    int64_t step = interior[i] + 1;
    ExprRef src = binary(BinaryOp::Div, q, intConst(step));
    valid.push_back(binary(BinaryOp::Ge, q, intConst(0)));
    valid.push_back(binary(BinaryOp::Lt, src, intConst(in[i].value())));
    if (step > 1)
      valid.push_back(binary(BinaryOp::Eq, binary(BinaryOp::Rem, q, intConst(step)), intConst(0)));
    at[i] = clampIndex(src, in[i].value());
  }
  KILN_ASSIGN_OR_RETURN(ExprRef x, valueAt(n->operand(0), at));
  KILN_ASSIGN_OR_RETURN(ExprRef padValue, valueAt(n->operand(1), {}));
  return select(andAll(valid), x, padValue);
}

// A concatenation: each operand's value, clamped into it, selected by where the index falls.
StatusOr<ExprRef> Lowerer::concatenateAt(const Value* v, const Index& idx) {
  const Node* n = v->def();
  size_t d = static_cast<size_t>(n->attrInt("dimension"));
  ExprRef result;
  ExprRef offset = intConst(0);
  std::vector<std::pair<ExprRef, ExprRef>> parts;
  for (size_t i = 0; i < n->numOperands(); ++i) {
    ExprRef extent = dimExpr(n->operand(i)->type().dim(d));
    Index at = idx;
    at[d] = clampIndex(binary(BinaryOp::Sub, idx[d], offset), extent);
    KILN_ASSIGN_OR_RETURN(ExprRef x, valueAt(n->operand(i), at));
    offset = binary(BinaryOp::Add, offset, extent);
    parts.push_back({binary(BinaryOp::Lt, idx[d], offset), x});
  }
  for (size_t i = parts.size(); i-- > 0;)
    result = result ? select(parts[i].first, parts[i].second, result) : parts[i].second;
  return result;
}

StatusOr<ExprRef> Lowerer::computeMovement(const Value* v, const Index& idx) {
  const Node* n = v->def();
  DType dt = v->type().dtype();
  auto operand = [&](size_t i, const Index& at) { return valueAt(n->operand(i), at); };
  switch (n->op()) {
    case OpCode::BroadcastInDim: {
      auto dims = n->attrInts("dims");
      std::vector<ExprRef> in = extentsOf(n->operand(0));
      Index at(in.size());
      for (size_t i = 0; i < in.size(); ++i)
        at[i] = isConst(in[i], 1) ? intConst(0) : idx[static_cast<size_t>(dims[i])];
      return operand(0, at);
    }
    case OpCode::Reshape:
      return operand(0, reshapeIndex(idx, v->type().dims(), n->operand(0)->type().dims()));
    case OpCode::Transpose: {
      auto perm = n->attrInts("permutation");
      Index at(perm.size());
      for (size_t i = 0; i < perm.size(); ++i) at[static_cast<size_t>(perm[i])] = idx[i];
      return operand(0, at);
    }
    case OpCode::Iota: {
      // Iota has no operands: the index along its dimension, as the dtype.
      int64_t d = n->attrInt("dimension");
      return cast(idx[static_cast<size_t>(d)], computeType(dt));
    }
    case OpCode::Slice: {
      auto start = n->attrInts("start");
      auto stride = n->attrInts("stride", std::vector<int64_t>(start.size(), 1));
      Index at(idx.size());
      for (size_t i = 0; i < idx.size(); ++i)
        at[i] = binary(BinaryOp::Add, intConst(start[i]),
                       binary(BinaryOp::Mul, idx[i], intConst(stride[i])));
      return operand(0, at);
    }
    // A nearest resize by whole factors (fusion's patternOf): index o reads o * mul / div.
    case OpCode::Resize: {
      std::optional<std::vector<NearestAxis>> map = nearestIndexMap(*n);
      if (!map) break;
      Index at(idx.size());
      for (size_t i = 0; i < idx.size(); ++i) {
        const NearestAxis& a = (*map)[i];
        at[i] = a.mul == 1 ? idx[i] : binary(BinaryOp::Mul, idx[i], intConst(a.mul));
        if (a.div != 1) at[i] = binary(BinaryOp::Div, at[i], intConst(a.div));
      }
      return operand(0, at);
    }
    // A gather reads its table (operand 0) by static extents only (Lowerer::lowersWithSymbols).
    case OpCode::Gather: return gatherAt(v, idx);
    case OpCode::Reverse: {
      auto dims = n->attrInts("dims");
      std::vector<ExprRef> extents = extentsOf(v);
      Index at = idx;
      for (int64_t d : dims) {
        size_t i = static_cast<size_t>(d);
        at[i] = binary(BinaryOp::Sub, binary(BinaryOp::Sub, extents[i], intConst(1)), idx[i]);
      }
      return operand(0, at);
    }
    case OpCode::Pad: return padAt(v, idx);
    case OpCode::Concatenate: return concatenateAt(v, idx);
    default: break;
  }
  // The ops below lower over static extents only (lowersOverSymbols).
  switch (n->op()) {
    // The data as it is (the size matters only at a program's boundary, where the compile
    // driver has already taken it: passes/expose_dynamic_sizes.h).
    case OpCode::SetDimensionSize: return operand(0, idx);
    // The extent (a sized operand's get_dimension_size is its size, which the compile driver
    // has put in its place).
    case OpCode::GetDimensionSize:
      return intConst(
          n->operand(0)->type().staticDims()[static_cast<size_t>(n->attrInt("dimension"))]);
    case OpCode::DynamicSlice:
    case OpCode::DynamicUpdateSlice: return dynamicSliceAt(v, idx);
    default:
      return Status::error(std::string(opName(n->op())) + " (" + name(v) +
                           ") has no loop lowering");
  }
}

StatusOr<ExprRef> Lowerer::gatherAt(const Value* v, const Index& idx) {
  const Node* n = v->def();
  auto operand = [&](size_t i, const Index& at) { return valueAt(n->operand(i), at); };
  // StableHLO gather: the output's batch dims pick an index vector, whose components
  // (clamped so the slice stays inside) start the slice along start_index_map's dims;
  // the output's offset dims walk the slice's dims that are not collapsed.
  auto offsetDims = n->attrInts("offset_dims");
  auto collapsed = n->attrInts("collapsed_slice_dims");
  auto startMap = n->attrInts("start_index_map");
  auto sizes = n->attrInts("slice_sizes");
  int64_t vectorDim = n->attrInt("index_vector_dim");
  auto has = [](const std::vector<int64_t>& v, int64_t x) {
    return std::find(v.begin(), v.end(), x) != v.end();
  };
  std::vector<int64_t> xd = n->operand(0)->type().staticDims();
  Index batch;
  for (size_t i = 0; i < idx.size(); ++i)
    if (!has(offsetDims, static_cast<int64_t>(i))) batch.push_back(idx[i]);
  std::vector<ExprRef> start(xd.size(), intConst(0));
  for (size_t k = 0; k < startMap.size(); ++k) {
    Index at;
    size_t b = 0;
    for (int64_t i = 0; i < n->operand(1)->type().rank(); ++i)
      at.push_back(i == vectorDim ? intConst(static_cast<int64_t>(k)) : batch[b++]);
    KILN_ASSIGN_OR_RETURN(ExprRef v, valueAt(n->operand(1), at));
    auto od = static_cast<size_t>(startMap[k]);
    start[od] = clampIndex(cast(v, DType::I64), xd[od] - sizes[od] + 1);
  }
  Index at(xd.size());
  size_t w = 0;
  for (size_t d = 0; d < xd.size(); ++d)
    at[d] = has(collapsed, static_cast<int64_t>(d))
                ? start[d]
                : binary(BinaryOp::Add, start[d], idx[static_cast<size_t>(offsetDims[w++])]);
  return operand(0, at);
}

StatusOr<ExprRef> Lowerer::dynamicSliceAt(const Value* v, const Index& idx) {
  const Node* n = v->def();
  auto operand = [&](size_t i, const Index& at) { return valueAt(n->operand(i), at); };
  // Start indices (rank-0 operands after the data) are clamped so the slice or update
  // stays inside, as StableHLO specifies.
  bool update = n->op() == OpCode::DynamicUpdateSlice;
  std::vector<int64_t> xd = n->operand(0)->type().staticDims();
  std::vector<int64_t> window = (update ? n->operand(1) : v)->type().staticDims();
  size_t first = update ? 2 : 1;
  Index start(xd.size());
  for (size_t d = 0; d < xd.size(); ++d) {
    KILN_ASSIGN_OR_RETURN(ExprRef s, valueAt(n->operand(first + d), {}));
    start[d] = clampIndex(cast(s, DType::I64), xd[d] - window[d] + 1);
  }
  if (!update) {
    Index at(xd.size());
    for (size_t d = 0; d < xd.size(); ++d) at[d] = binary(BinaryOp::Add, start[d], idx[d]);
    return operand(0, at);
  }
  Index at(xd.size());
  std::vector<ExprRef> inside;
  for (size_t d = 0; d < xd.size(); ++d) {
    ExprRef rel = binary(BinaryOp::Sub, idx[d], start[d]);
    inside.push_back(binary(BinaryOp::Ge, rel, intConst(0)));
    inside.push_back(binary(BinaryOp::Lt, rel, intConst(window[d])));
    at[d] = clampIndex(rel, window[d]);
  }
  KILN_ASSIGN_OR_RETURN(ExprRef u, operand(1, at));
  KILN_ASSIGN_OR_RETURN(ExprRef x, operand(0, idx));
  return select(andAll(inside), u, x);
}

}  // namespace kiln::kernel::lowering
