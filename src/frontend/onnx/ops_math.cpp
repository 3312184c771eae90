// Matrix products (MatMul with numpy batching and 1-D promotion, Gemm) and the quantization ops
// (QuantizeLinear, DequantizeLinear, MatMulInteger, QLinearMatMul), lowered to dot_general and
// elementwise ops.
#include "frontend/onnx/ops_common.h"

namespace kiln::onnx {

StatusOr<Value*> matmul(OpContext& c, Value* a, Value* b) {
  ONNX_BUILT(c, a);
  ONNX_BUILT(c, b);
  KILN_RETURN_IF_ERROR(sameDType(c, {a, b}));
  int64_t ra = a->type().rank(), rb = b->type().rank();
  if (ra == 0 || rb == 0) return c.err("MatMul inputs must have rank >= 1");
  const Shape& da = a->type().dims();
  const Shape& db = b->type().dims();
  // A 1-D operand is a row (lhs) or column (rhs) whose unit dim is dropped at the end.
  Value* a2 = ra == 1 ? c.b.reshape(a, {Dim(1), da[0]}) : a;
  Value* b2 = rb == 1 ? c.b.reshape(b, {db[0], Dim(1)}) : b;
  ONNX_BUILT(c, a2);
  ONNX_BUILT(c, b2);
  int64_t ra2 = a2->type().rank(), rb2 = b2->type().rank();
  Value* r = nullptr;
  if (rb2 == 2) {
    // [batch..., M, K] x [K, N] -> [batch..., M, N] without broadcasting the rhs.
    r = c.b.dotGeneral(a2, b2, DotDims{{}, {}, {ra2 - 1}, {0}});
  } else {
    const Shape& sa = a2->type().dims();
    const Shape& sb = b2->type().dims();
    Shape ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
    KILN_ASSIGN_OR_RETURN(Shape batch, broadcastShapes(ba, bb));
    Shape ta = batch, tb = batch;
    ta.insert(ta.end(), sa.end() - 2, sa.end());
    tb.insert(tb.end(), sb.end() - 2, sb.end());
    a2 = c.b.broadcastTo(a2, ta);
    b2 = c.b.broadcastTo(b2, tb);
    auto nb = static_cast<int64_t>(batch.size());
    std::vector<int64_t> bd;
    for (int64_t i = 0; i < nb; ++i) bd.push_back(i);
    r = c.b.dotGeneral(a2, b2, DotDims{bd, bd, {nb + 1}, {nb}});
  }
  ONNX_BUILT(c, r);
  if (ra == 1 || rb == 1) {
    Shape s = r->type().dims();
    if (rb == 1) s.pop_back();
    if (ra == 1) s.erase(s.end() - (rb == 1 ? 1 : 2));
    r = c.b.reshape(r, s);
    ONNX_BUILT(c, r);
  }
  return r;
}

namespace {

Status matmulOp(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * a, c.req(0));
  KILN_ASSIGN_OR_RETURN(Value * b, c.req(1));
  KILN_ASSIGN_OR_RETURN(Value * r, matmul(c, a, b));
  c.setOutput(0, r);
  return Status::ok();
}

// alpha * op(A) op(B) + beta * C, C broadcast to the result.
Status gemm(OpContext& c) {
  c.ignoreAttr("broadcast");  // before opset 7; unidirectional broadcasting covers it
  KILN_ASSIGN_OR_RETURN(Value * a, c.req(0));
  KILN_ASSIGN_OR_RETURN(Value * b, c.req(1));
  KILN_RETURN_IF_ERROR(sameDType(c, {a, b, c.in(2)}));
  if (a->type().rank() != 2 || b->type().rank() != 2)
    return c.err("A and B must be 2-D, got " + a->type().str() + " and " + b->type().str());
  bool ta = c.attrInt("transA", 0) != 0, tb = c.attrInt("transB", 0) != 0;
  double alpha = c.attrFloat("alpha", 1.0), beta = c.attrFloat("beta", 1.0);
  Value* y = c.b.dotGeneral(a, b, DotDims{{}, {}, {ta ? 0 : 1}, {tb ? 1 : 0}});
  ONNX_BUILT(c, y);
  if (alpha != 1.0) y = c.b.mul(y, splat(c.b, y, alpha));
  if (Value* cc = c.in(2); cc && beta != 0.0) {
    ONNX_BUILT(c, y);
    KILN_ASSIGN_OR_RETURN(cc, broadcastUni(c, cc, y->type().dims()));
    if (beta != 1.0) cc = c.b.mul(cc, splat(c.b, cc, beta));
    y = c.b.add(y, cc);
  }
  c.setOutput(0, y);
  return Status::ok();
}

}  // namespace

// (x - zero point) in i32; a 1-D zero point applies along `axis` of x.
StatusOr<Value*> minusZeroPoint(OpContext& c, Value* x, Value* zp, int64_t axis) {
  ONNX_BUILT(c, x);
  Value* xi = c.b.convert(x, DType::I32);
  ONNX_BUILT(c, xi);
  if (!zp) return xi;
  Value* zi = c.b.convert(zp, DType::I32);
  ONNX_BUILT(c, zi);
  if (zi->type().rank() == 1 && xi->type().rank() > 1) {
    KILN_ASSIGN_OR_RETURN(axis, normAxis(axis, xi->type().rank()));
    zi = c.b.broadcastInDim(zi, xi->type().dims(), {axis});
  } else {
    KILN_ASSIGN_OR_RETURN(zi, broadcastUni(c, zi, xi->type().dims()));
  }
  Value* r = c.b.sub(xi, zi);
  ONNX_BUILT(c, r);
  return r;
}

// A per-tensor (rank 0 or one element) or per-axis (1-D along `axis`) parameter broadcast to x.
StatusOr<Value*> perAxis(OpContext& c, Value* p, Value* x, int64_t axis) {
  ONNX_BUILT(c, p);
  ONNX_BUILT(c, x);
  const TensorType& t = p->type();
  if (t.rank() == 1 && x->type().rank() > 0 && !(t.dim(0).isStatic() && t.dim(0).value() == 1)) {
    KILN_ASSIGN_OR_RETURN(axis, normAxis(axis, x->type().rank()));
    Value* r = c.b.broadcastInDim(p, x->type().dims(), {axis});
    ONNX_BUILT(c, r);
    return r;
  }
  Value* s = t.rank() == 0 ? p : c.b.reshape(p, {});
  ONNX_BUILT(c, s);
  Value* r = c.b.broadcastInDim(s, x->type().dims(), {});
  ONNX_BUILT(c, r);
  return r;
}

// round_half_even(x / scale) + zero point, saturated to the zero point's integer type.
StatusOr<Value*> quantize(OpContext& c, Value* x, Value* scale, Value* zp, DType out,
                          int64_t axis) {
  ONNX_BUILT(c, x);
  ONNX_BUILT(c, scale);
  KILN_ASSIGN_OR_RETURN(Value * s, perAxis(c, scale, x, axis));
  Value* q = c.b.unary(OpCode::RoundNearestEven, c.b.div(x, s));
  ONNX_BUILT(c, q);
  if (zp) {
    KILN_ASSIGN_OR_RETURN(Value * z, perAxis(c, c.b.convert(zp, x->type().dtype()), x, axis));
    q = c.b.add(q, z);
  }
  q = c.b.clamp(scalarConst(c.b, x->type().dtype(), dtypeLowest(out)), q,
                scalarConst(c.b, x->type().dtype(), dtypeHighest(out)));
  Value* r = c.b.convert(q, out);
  ONNX_BUILT(c, r);
  return r;
}

namespace {

Status quantizeLinear(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  KILN_ASSIGN_OR_RETURN(Value * scale, c.req(1));
  Value* zp = c.in(2);
  DType out = zp ? zp->type().dtype() : DType::U8;
  if (out != DType::U8 && out != DType::I8)
    return c.unsupported("quantizing to " + std::string(dtypeName(out)) + " is not supported");
  int64_t axis = c.attrInt("axis", 1);
  if (scale->type().dtype() != x->type().dtype()) scale = c.b.convert(scale, x->type().dtype());
  ONNX_BUILT(c, scale);
  KILN_ASSIGN_OR_RETURN(Value * r, quantize(c, x, scale, zp, out, axis));
  c.setOutput(0, r);
  return Status::ok();
}

Status dequantizeLinear(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  KILN_ASSIGN_OR_RETURN(Value * scale, c.req(1));
  int64_t axis = c.attrInt("axis", 1);
  DType ft = scale->type().dtype();
  Value* xf = c.b.convert(x, ft);
  ONNX_BUILT(c, xf);
  if (Value* zp = c.in(2)) {
    KILN_ASSIGN_OR_RETURN(Value * z, perAxis(c, c.b.convert(zp, ft), xf, axis));
    xf = c.b.sub(xf, z);
    ONNX_BUILT(c, xf);
  }
  KILN_ASSIGN_OR_RETURN(Value * s, perAxis(c, scale, xf, axis));
  c.setOutput(0, c.b.mul(xf, s));
  return Status::ok();
}

Status matmulInteger(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * a, c.req(0));
  KILN_ASSIGN_OR_RETURN(Value * b, c.req(1));
  // A's zero point is per row (the second-to-last dim), B's per column (the last dim).
  KILN_ASSIGN_OR_RETURN(Value * ai,
                        minusZeroPoint(c, a, c.in(2), std::max<int64_t>(0, a->type().rank() - 2)));
  KILN_ASSIGN_OR_RETURN(Value * bi, minusZeroPoint(c, b, c.in(3), -1));
  KILN_ASSIGN_OR_RETURN(Value * r, matmul(c, ai, bi));
  c.setOutput(0, r);
  return Status::ok();
}

Status qlinearMatmul(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * a, c.req(0));
  KILN_ASSIGN_OR_RETURN(Value * as, c.req(1));
  KILN_ASSIGN_OR_RETURN(Value * b, c.req(3));
  KILN_ASSIGN_OR_RETURN(Value * bs, c.req(4));
  KILN_ASSIGN_OR_RETURN(Value * ys, c.req(6));
  Value* yzp = c.in(7);
  KILN_ASSIGN_OR_RETURN(Value * ai,
                        minusZeroPoint(c, a, c.in(2), std::max<int64_t>(0, a->type().rank() - 2)));
  KILN_ASSIGN_OR_RETURN(Value * bi, minusZeroPoint(c, b, c.in(5), -1));
  KILN_ASSIGN_OR_RETURN(Value * acc, matmul(c, ai, bi));
  // The i32 accumulator rescaled by a_scale * b_scale / y_scale, then requantized.
  Value* accF = c.b.convert(acc, DType::F32);
  Value* scale = c.b.div(c.b.mul(c.b.reshape(as, {}), c.b.reshape(bs, {})), c.b.reshape(ys, {}));
  ONNX_BUILT(c, scale);
  ONNX_BUILT(c, accF);
  Value* one = scalarConst(c.b, DType::F32, 1.0);
  DType out = yzp ? yzp->type().dtype() : a->type().dtype();
  KILN_ASSIGN_OR_RETURN(
      Value * r, quantize(c, c.b.mul(accF, c.b.broadcastInDim(scale, accF->type().dims(), {})), one,
                          yzp, out, 1));
  c.setOutput(0, r);
  return Status::ok();
}

}  // namespace

void addMathOps(OpTable& t) {
  t.add("MatMul", 1, matmulOp);
  t.add("Gemm", 1, gemm);
  t.add("QuantizeLinear", 10, quantizeLinear);
  t.add("DequantizeLinear", 10, dequantizeLinear);
  t.add("MatMulInteger", 10, matmulInteger);
  t.add("QLinearMatMul", 10, qlinearMatmul);
}

}  // namespace kiln::onnx
