// Reductions: ReduceSum/Mean/Max/Min/Prod/L1/L2/LogSum/LogSumExp/SumSquare (axes as attribute,
// or as input for ReduceSum from opset 13), ArgMax/ArgMin and CumSum.
#include <algorithm>

#include "frontend/onnx/ops_common.h"

namespace kiln::onnx {

Value* reduceKeep(OpContext& c, Value* x, const std::vector<int64_t>& axes, const std::string& kind,
                  bool keepdims) {
  if (!x) return nullptr;
  Value* r = c.b.reduce(x, axes, kind);
  return keepdims ? insertUnitDims(c.b, r, axes) : r;
}

StatusOr<Value*> meanKeep(OpContext& c, Value* x, const std::vector<int64_t>& axes) {
  ONNX_BUILT(c, x);
  Shape reduced;
  for (int64_t a : axes) reduced.push_back(x->type().dim(a));
  auto n = dimProduct(reduced);
  if (!n || !n->isStatic())
    return c.unsupported("the mean over symbolic dimensions needs dynamic shape arithmetic");
  Value* s = reduceKeep(c, x, axes, "sum", true);
  ONNX_BUILT(c, s);
  Value* r = c.b.div(s, splat(c.b, s, static_cast<double>(n->value())));
  ONNX_BUILT(c, r);
  return r;
}

namespace {

enum class Red { Sum, Mean, Max, Min, Prod, L1, L2, LogSum, LogSumExp, SumSquare };

StatusOr<Value*> reduceBy(OpContext& c, Red kind, Value* x, const std::vector<int64_t>& axes,
                          bool keep) {
  switch (kind) {
    case Red::Sum: return reduceKeep(c, x, axes, "sum", keep);
    case Red::Max: return reduceKeep(c, x, axes, "max", keep);
    case Red::Min: return reduceKeep(c, x, axes, "min", keep);
    case Red::Prod: return reduceKeep(c, x, axes, "prod", keep);
    case Red::L1: return reduceKeep(c, c.b.unary(OpCode::Abs, x), axes, "sum", keep);
    case Red::SumSquare: return reduceKeep(c, c.b.mul(x, x), axes, "sum", keep);
    case Red::L2: return c.b.unary(OpCode::Sqrt, reduceKeep(c, c.b.mul(x, x), axes, "sum", keep));
    case Red::LogSum: return c.b.unary(OpCode::Log, reduceKeep(c, x, axes, "sum", keep));
    case Red::Mean: {
      KILN_ASSIGN_OR_RETURN(Value * m, meanKeep(c, x, axes));
      return keep ? m : c.b.reshape(m, dropAxes(m->type().dims(), axes));
    }
    case Red::LogSumExp: {
      // max + log(sum(exp(x - max))), with a non-finite max (all -inf, or inf) replaced by 0 so
      // that the subtraction makes no NaN of its own.
      Value* m = reduceKeep(c, x, axes, "max", true);
      ONNX_BUILT(c, m);
      Value* finite = c.b.unary(OpCode::IsFinite, m);
      m = c.b.select(finite, m, splat(c.b, m, 0));
      ONNX_BUILT(c, m);
      Value* mb = c.b.broadcastInDim(m, x->type().dims(), [&] {
        std::vector<int64_t> d;
        for (int64_t i = 0; i < x->type().rank(); ++i) d.push_back(i);
        return d;
      }());
      Value* s = reduceKeep(c, c.b.unary(OpCode::Exp, c.b.sub(x, mb)), axes, "sum", keep);
      Value* mk = keep ? m : c.b.reshape(m, dropAxes(m->type().dims(), axes));
      return c.b.add(c.b.unary(OpCode::Log, s), mk);
    }
  }
  return c.err("unknown reduction");
}

Status reduceWith(OpContext& c, Red kind, Value* x, std::optional<std::vector<int64_t>> axesIn,
                  bool noopWhenEmpty) {
  bool keep = c.attrInt("keepdims", 1) != 0;
  int64_t rank = x->type().rank();
  std::vector<int64_t> axes;
  if (axesIn && !axesIn->empty()) {
    KILN_ASSIGN_OR_RETURN(axes, normAxes(*axesIn, rank));
    std::sort(axes.begin(), axes.end());
  } else if (noopWhenEmpty) {
    c.setOutput(0, x);
    return Status::ok();
  } else {
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  }
  KILN_ASSIGN_OR_RETURN(Value * r, reduceBy(c, kind, x, axes, keep));
  c.setOutput(0, r);
  return Status::ok();
}

template <Red Kind>
Status reduceAttr(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  std::optional<std::vector<int64_t>> axes;
  if (c.hasAttr("axes")) axes = c.attrInts("axes");
  return reduceWith(c, Kind, x, axes, false);
}

// ReduceSum from opset 13: axes is an optional input.
Status reduceSumInput(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  bool noop = c.attrInt("noop_with_empty_axes", 0) != 0;
  std::optional<std::vector<int64_t>> axes;
  if (c.has(1)) {
    KILN_ASSIGN_OR_RETURN(axes, c.knownInts(1, "the axes"));
  }
  return reduceWith(c, Red::Sum, x, axes, noop);
}

template <OpCode Op>
Status argReduce(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  KILN_ASSIGN_OR_RETURN(int64_t axis, normAxis(c.attrInt("axis", 0), x->type().rank()));
  bool keep = c.attrInt("keepdims", 1) != 0;
  bool last = c.attrInt("select_last_index", 0) != 0;
  Value* r = c.b.op(Op, {x}, {{"axis", intAttr(axis)}, {"select_last_index", boolAttr(last)}});
  c.setOutput(0, keep ? insertUnitDims(c.b, r, {axis}) : r);
  return Status::ok();
}

Status cumsum(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  KILN_ASSIGN_OR_RETURN(auto axisV, c.knownInts(1, "the axis"));
  if (axisV.size() != 1) return c.err("axis must hold one value");
  KILN_ASSIGN_OR_RETURN(int64_t axis, normAxis(axisV[0], x->type().rank()));
  bool exclusive = c.attrInt("exclusive", 0) != 0, reverse = c.attrInt("reverse", 0) != 0;
  c.setOutput(0, c.b.op(OpCode::Cumsum, {x},
                        {{"axis", intAttr(axis)},
                         {"exclusive", boolAttr(exclusive)},
                         {"reverse", boolAttr(reverse)}}));
  return Status::ok();
}

}  // namespace

void addReduceOps(OpTable& t) {
  t.add("ReduceSum", 1, reduceAttr<Red::Sum>);
  t.add("ReduceSum", 13, reduceSumInput);
  t.add("ReduceMean", 1, reduceAttr<Red::Mean>);
  t.add("ReduceMax", 1, reduceAttr<Red::Max>);
  t.add("ReduceMin", 1, reduceAttr<Red::Min>);
  t.add("ReduceProd", 1, reduceAttr<Red::Prod>);
  t.add("ReduceL1", 1, reduceAttr<Red::L1>);
  t.add("ReduceL2", 1, reduceAttr<Red::L2>);
  t.add("ReduceLogSum", 1, reduceAttr<Red::LogSum>);
  t.add("ReduceLogSumExp", 1, reduceAttr<Red::LogSumExp>);
  t.add("ReduceSumSquare", 1, reduceAttr<Red::SumSquare>);
  t.add("ArgMax", 1, argReduce<OpCode::ArgMax>);
  t.add("ArgMin", 1, argReduce<OpCode::ArgMin>);
  t.add("CumSum", 11, cumsum);
}

}  // namespace kiln::onnx
