#include "ir/builder.h"

namespace kiln {

StatusOr<Node*> Builder::tryBuild(OpCode op, std::vector<Value*> operands, AttrMap attrs,
                                  std::vector<TensorType> declared) {
  for (Value* v : operands)
    if (!v) return Status::error(std::string(opName(op)) + ": missing operand", loc_);
  std::vector<TensorType> operandTypes;
  operandTypes.reserve(operands.size());
  for (Value* v : operands) operandTypes.push_back(v->type());
  InferInput in{op, operandTypes, attrs, declared};
  auto types = inferResultTypes(in);
  if (!types) {
    Status s = types.status();
    if (!origin_.empty()) s.prefix("node '" + origin_ + "'");
    return s.at(loc_);
  }
  Node* n = f_->createNode(op, std::move(operands), std::move(*types), std::move(attrs), before_);
  n->setLoc(loc_);
  n->setOrigin(origin_);
  return n;
}

bool Builder::anyNull(const std::vector<Value*>& vs) const {
  for (Value* v : vs)
    if (!v) return true;
  return false;
}

Value* Builder::record(StatusOr<Node*> n, size_t result) {
  if (!n) {
    if (status_.isOk()) status_ = n.status();
    return nullptr;
  }
  return (*n)->result(result);
}

Value* Builder::op(OpCode op, std::vector<Value*> operands, AttrMap attrs,
                   std::vector<TensorType> declared) {
  if (anyNull(operands)) return nullptr;
  return record(tryBuild(op, std::move(operands), std::move(attrs), std::move(declared)));
}

std::vector<Value*> Builder::opN(OpCode op, std::vector<Value*> operands, AttrMap attrs,
                                 std::vector<TensorType> declared) {
  if (anyNull(operands)) return {};
  auto n = tryBuild(op, std::move(operands), std::move(attrs), std::move(declared));
  if (!n) {
    record(std::move(n));
    return {};
  }
  std::vector<Value*> out;
  for (size_t i = 0; i < (*n)->numResults(); ++i) out.push_back((*n)->result(i));
  return out;
}

Value* Builder::parameter(TensorType t, std::string name) {
  Value* v = f_->addParameter(std::move(t), std::move(name));
  v->def()->setLoc(loc_);
  v->def()->setOrigin(origin_);
  return v;
}

Value* Builder::constant(Tensor t) {
  TensorType type = t.type();
  AttrMap a;
  a["value"] = tensorAttr(std::move(t));
  return op(OpCode::Constant, {}, std::move(a), {std::move(type)});
}

Value* Builder::scalar(DType t, double v) {
  Tensor s(t, {});
  s.setDouble(0, v);
  return constant(std::move(s));
}

Value* Builder::iota(TensorType t, int64_t dimension) {
  return op(OpCode::Iota, {}, {{"dimension", intAttr(dimension)}}, {std::move(t)});
}

Value* Builder::compare(const std::string& direction, Value* a, Value* b) {
  return op(OpCode::Compare, {a, b}, {{"direction", enumAttr(direction)}});
}

Value* Builder::select(Value* pred, Value* onTrue, Value* onFalse) {
  return op(OpCode::Select, {pred, onTrue, onFalse});
}

Value* Builder::clamp(Value* lo, Value* x, Value* hi) { return op(OpCode::Clamp, {lo, x, hi}); }

Value* Builder::convert(Value* x, DType t) {
  if (!x) return nullptr;
  return op(OpCode::Convert, {x}, {}, {x->type().withDType(t)});
}

Value* Builder::broadcastInDim(Value* x, Shape resultDims, std::vector<int64_t> dims) {
  if (!x) return nullptr;
  TensorType t(x->type().dtype(), std::move(resultDims));
  return op(OpCode::BroadcastInDim, {x}, {{"dims", intsAttr(std::move(dims))}}, {std::move(t)});
}

Value* Builder::broadcastTo(Value* x, const Shape& resultDims) {
  if (!x) return nullptr;
  const Shape& in = x->type().dims();
  if (in == resultDims) return x;
  if (in.size() > resultDims.size()) {
    record(Status::error("cannot broadcast " + x->type().str() + " to rank " +
                             std::to_string(resultDims.size()),
                         loc_));
    return nullptr;
  }
  size_t offset = resultDims.size() - in.size();
  std::vector<int64_t> dims;
  for (size_t i = 0; i < in.size(); ++i) dims.push_back(static_cast<int64_t>(offset + i));
  return broadcastInDim(x, resultDims, std::move(dims));
}

Value* Builder::reshape(Value* x, Shape dims) {
  if (!x) return nullptr;
  return op(OpCode::Reshape, {x}, {}, {TensorType(x->type().dtype(), std::move(dims))});
}

Value* Builder::transpose(Value* x, std::vector<int64_t> perm) {
  return op(OpCode::Transpose, {x}, {{"permutation", intsAttr(std::move(perm))}});
}

Value* Builder::slice(Value* x, std::vector<int64_t> start, std::vector<int64_t> limit,
                      std::vector<int64_t> stride) {
  AttrMap a{{"start", intsAttr(std::move(start))}, {"limit", intsAttr(std::move(limit))}};
  if (!stride.empty()) a["stride"] = intsAttr(std::move(stride));
  return op(OpCode::Slice, {x}, std::move(a));
}

Value* Builder::concatenate(std::vector<Value*> xs, int64_t dimension) {
  return op(OpCode::Concatenate, std::move(xs), {{"dimension", intAttr(dimension)}});
}

Value* Builder::pad(Value* x, Value* padValue, std::vector<int64_t> low, std::vector<int64_t> high,
                    std::vector<int64_t> interior) {
  AttrMap a{{"low", intsAttr(std::move(low))}, {"high", intsAttr(std::move(high))}};
  if (!interior.empty()) a["interior"] = intsAttr(std::move(interior));
  return op(OpCode::Pad, {x, padValue}, std::move(a));
}

Value* Builder::reduce(Value* x, std::vector<int64_t> dims, const std::string& kind) {
  return op(OpCode::Reduce, {x}, {{"dims", intsAttr(std::move(dims))}, {"kind", enumAttr(kind)}});
}

Value* Builder::dotGeneral(Value* lhs, Value* rhs, const DotDims& d) {
  AttrMap a;
  if (!d.lhsBatch.empty()) a["lhs_batch"] = intsAttr(d.lhsBatch);
  if (!d.rhsBatch.empty()) a["rhs_batch"] = intsAttr(d.rhsBatch);
  if (!d.lhsContracting.empty()) a["lhs_contracting"] = intsAttr(d.lhsContracting);
  if (!d.rhsContracting.empty()) a["rhs_contracting"] = intsAttr(d.rhsContracting);
  return op(OpCode::DotGeneral, {lhs, rhs}, std::move(a));
}

}  // namespace kiln
