// Lowering of reduction kernels: reduce, argmax/argmin, reduce_window, and the row
// normalisations softmax, log_softmax and layer_norm (see lower.h).
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <set>

#include "ir/pool_window.h"
#include "kernel/lowerer.h"

namespace kiln::kernel::lowering {

ReduceKind Lowerer::reduceKind(const std::string& kind) {
  if (kind == "sum") return ReduceKind::Sum;
  if (kind == "prod") return ReduceKind::Prod;
  if (kind == "max") return ReduceKind::Max;
  if (kind == "min") return ReduceKind::Min;
  if (kind == "and") return ReduceKind::And;
  return ReduceKind::Or;
}

void Lowerer::splitOutputs(const std::vector<ExprRef>& shape, std::vector<const Value*>& main,
                           std::vector<const Value*>& rest) const {
  for (const Value* v : k_.outputs) {
    if (extentsOf(v) == shape) main.push_back(v);
    else rest.push_back(v);
  }
}

// Whether `pred` holds for a member node on the paths from v up to the kernel's inputs (each
// node visited once: fused chains share operands).
namespace {
bool anyMemberAbove(const Value* v, const std::set<const Node*>& members,
                    const std::function<bool(const Node*)>& pred) {
  std::set<const Node*> seen;
  std::vector<const Node*> todo{v->def()};
  while (!todo.empty()) {
    const Node* n = todo.back();
    todo.pop_back();
    if (!members.count(n) || !seen.insert(n).second) continue;
    if (pred(n)) return true;
    for (const Value* o : n->operands()) todo.push_back(o->def());
  }
  return false;
}
}  // namespace

bool Lowerer::dependsOn(const Value* v, const Value* on) const {
  if (v == on) return true;
  return anyMemberAbove(v, members_, [&](const Node* n) {
    for (const Value* o : n->operands())
      if (o == on) return true;
    return false;
  });
}

bool Lowerer::computesArithmetic(const Value* v) const {
  return anyMemberAbove(v, members_, [](const Node* n) {
    OpClass c = n->info().opClass;
    return (c == OpClass::ElementwiseUnary || c == OpClass::ElementwiseBinary ||
            c == OpClass::ElementwiseTernary || c == OpClass::Composite) &&
           n->numResults() == 1 && isFloat(n->result()->type().dtype());
  });
}

void Lowerer::splitVisitedOnce(std::vector<const Value*>& rest,
                               std::vector<const Value*>& visitedOnce) const {
  const Node* a = k_.anchor;
  if (!storesAlongside_ || a->op() != OpCode::Reduce) return;
  const std::vector<ExprRef> in = extentsOf(a->operand(0));
  std::vector<const Value*> others;
  for (const Value* v : rest) {
    if (extentsOf(v) == in && !dependsOn(v, a->result()) && computesArithmetic(v))
      visitedOnce.push_back(v);
    else others.push_back(v);
  }
  rest = std::move(others);
}

StatusOr<ExprRef> Lowerer::reducedValue(const Value* x, const Index& idx,
                                        const std::vector<const Value*>& visitedOnce,
                                        StmtRef& stores) {
  KILN_ASSIGN_OR_RETURN(stores, storeValues(visitedOnce, idx));
  if (std::find(visitedOnce.begin(), visitedOnce.end(), x) == visitedOnce.end())
    return valueAt(x, idx);
  const Buffer& b = bufferFor(x, BufferRole::Output);
  return cast(load(b.name, b.type, flatIndex(idx, b.extents())), computeType(b.type));
}

StatusOr<StmtRef> Lowerer::lowerReduction() {
  const Node* a = k_.anchor;
  switch (a->op()) {
    case OpCode::Reduce:
    case OpCode::ArgMax:
    case OpCode::ArgMin:
    case OpCode::ReduceWindow: return lowerRowReduction();
    case OpCode::Softmax:
    case OpCode::LogSoftmax:
    case OpCode::LayerNorm: return lowerRowNormalization();
    default: return Status::error(std::string(opName(a->op())) + " has no reduction lowering");
  }
}

namespace {

// A max or min pool without dilations whose every window holds an element of the input (padding
// below the window's extent on both sides): a padded tap, clamped to the nearest element, reads
// an element of its own window, which cannot change a max or min. It needs no guard.
bool clampsStayInWindow(const PoolWindow& w) {
  if (!w.undilatedMaxOrMin) return false;
  for (size_t d = 0; d < w.window.size(); ++d)
    if (w.low[d] < 0 || w.low[d] >= w.window[d] || w.high[d] < 0 || w.high[d] >= w.window[d])
      return false;
  return true;
}

}  // namespace

Lowerer::ReductionIndex Lowerer::reductionIndex(const Index& o) {
  const Node* a = k_.anchor;
  std::vector<ExprRef> extents = extentsOf(a->operand(0));
  bool arg = a->op() == OpCode::ArgMax || a->op() == OpCode::ArgMin;
  ReductionIndex ri;
  std::vector<std::string>& rvars = ri.rvars;
  std::vector<ExprRef>& rextents = ri.rextents;
  Index& inIdx = ri.inIdx;
  ExprRef& valid = ri.valid;
  if (a->op() == OpCode::ReduceWindow) {
    // A symbolic dim's window is one element at the output's index (checkSymbolic); the others
    // are static.
    std::vector<int64_t> in;
    for (const ExprRef& e : extents) in.push_back(e->kind == Expr::Kind::Const ? e->i : 0);
    inIdx.resize(in.size());
    const PoolWindow pool = poolWindowOf(*a);
    const std::vector<int64_t>&win = pool.window, &strides = pool.strides,
          &bdil = pool.baseDilations, &wdil = pool.windowDilations, &lo = pool.low;
    size_t r = in.size();
    std::vector<ExprRef> conds;
    for (size_t d = 0; d < r; ++d) {
      rvars.push_back(freshVar("w"));
      rextents.push_back(intConst(win[d]));
      if (extents[d]->kind != Expr::Kind::Const) {
        inIdx[d] = o[d];
        continue;
      }
      ExprRef q = binary(BinaryOp::Sub,
                         binary(BinaryOp::Add, binary(BinaryOp::Mul, o[d], intConst(strides[d])),
                                binary(BinaryOp::Mul, var(rvars.back()), intConst(wdil[d]))),
                         intConst(lo[d]));
      int64_t dilated = in[d] == 0 ? 0 : (in[d] - 1) * bdil[d] + 1;
      if (win[d] != 1 || lo[d] != 0 || strides[d] != 1 || bdil[d] != 1) {
        conds.push_back(binary(BinaryOp::Ge, q, intConst(0)));
        conds.push_back(binary(BinaryOp::Lt, q, intConst(dilated)));
      }
      if (bdil[d] > 1)
        conds.push_back(
            binary(BinaryOp::Eq, binary(BinaryOp::Rem, q, intConst(bdil[d])), intConst(0)));
      inIdx[d] = clampIndex(binary(BinaryOp::Div, q, intConst(bdil[d])), in[d]);
    }
    if (!conds.empty() && !clampsStayInWindow(pool)) valid = andAll(conds);
  } else {
    std::set<int64_t> reduced;
    if (arg) reduced.insert(a->attrInt("axis"));
    else
      for (int64_t d : a->attrInts("dims")) reduced.insert(d);
    size_t oi = 0;
    inIdx.resize(extents.size());
    for (size_t d = 0; d < extents.size(); ++d) {
      if (reduced.count(static_cast<int64_t>(d))) {
        rvars.push_back(freshVar("r"));
        rextents.push_back(extents[d]);
        inIdx[d] = var(rvars.back());
      } else {
        inIdx[d] = o[oi++];
      }
    }
  }
  return ri;
}

bool Lowerer::keepsInnermost() const {
  const Node* a = k_.anchor;
  const TensorType& in = a->operand(0)->type();
  const TensorType& out = a->result()->type();
  if (in.rank() == 0 || out.rank() == 0) return false;
  const Dim& c = out.dims().back();
  if (!c.isStatic() || in.dims().back() != c || c.value() < 8 || c.value() > 4096) return false;
  size_t last = static_cast<size_t>(in.rank()) - 1;
  if (a->op() == OpCode::Reduce) {
    for (int64_t d : a->attrInts("dims"))
      if (d == static_cast<int64_t>(last)) return false;
    return true;
  }
  if (a->op() != OpCode::ReduceWindow) return false;
  auto at = [&](const char* name, int64_t fill) {
    std::vector<int64_t> v = a->attrInts(name, std::vector<int64_t>(last + 1, fill));
    return v.size() == last + 1 ? v[last] : -1;
  };
  return at("window_dimensions", 1) == 1 && at("window_strides", 1) == 1 &&
         at("base_dilations", 1) == 1 && at("window_dilations", 1) == 1 &&
         at("padding_low", 0) == 0 && at("padding_high", 0) == 0;
}

StatusOr<StmtRef> Lowerer::lowerChannelReduction() {
  const Node* a = k_.anchor;
  const Value* x = a->operand(0);
  std::vector<ExprRef> outShape = extentsOf(a->result());
  std::vector<ExprRef> outer(outShape.begin(), outShape.end() - 1);
  int64_t channels = outShape.back()->i;  // static (keepsInnermost)
  DType ct = computeType(x->type().dtype());
  DType resultType = a->result()->type().dtype();
  ReduceKind kind = reduceKind(a->attrEnum("kind"));
  std::vector<const Value*> main, rest, visitedOnce;
  splitOutputs(outShape, main, rest);
  splitVisitedOnce(rest, visitedOnce);
  for (const Value* v : visitedOnce)
    out_.notes.push_back(name(v) +
                         " stored from the reduced loops, which visit each element once (not "
                         "computed again in a nest of its own)");
  std::string acc = "acc" + std::to_string(vars_);
  Status err = Status::ok();
  auto perOuter = [&](const Index& oo) -> StmtRef {
    memo_.clear();
    std::string c = freshVar("c");
    Index o = oo;
    o.push_back(var(c));
    ReductionIndex ri = reductionIndex(o);
    StmtRef alongside;
    auto xv = reducedValue(x, ri.inIdx, visitedOnce, alongside);
    if (!xv) {
      err = xv.status();
      return block({});
    }
    ExprRef cur = load(acc, ct, var(c));
    ExprRef next = reduceCombine(kind, cur, *xv);
    if (ri.valid) next = select(ri.valid, next, cur);
    StmtRef update = store(acc, var(c), next);
    if (!visitedOnce.empty()) update = block({alongside, update});
    update = forLoop(c, intConst(channels), LoopKind::Serial, update);
    for (size_t i = ri.rvars.size(); i-- > 0;)
      update = forLoop(ri.rvars[i], ri.rextents[i], LoopKind::Serial, update);
    std::string c0 = freshVar("c"), c1 = freshVar("c");
    StmtRef init = forLoop(c0, intConst(channels), LoopKind::Serial,
                           store(acc, var(c0), reduceIdentity(kind, ct)));
    memo_.clear();
    overrides_[a->result()] = [acc, ct, resultType](const Index& i) {
      return cast(cast(load(acc, ct, i.back()), resultType), computeType(resultType));
    };
    Index o1 = oo;
    o1.push_back(var(c1));
    auto stores = storeValues(main, o1);
    overrides_.erase(a->result());
    if (!stores) {
      err = stores.status();
      return block({});
    }
    StmtRef out = forLoop(c1, intConst(channels), LoopKind::Serial, *stores);
    return alloc(acc, ct, channels, MemoryScope::Local, block({init, update, out}));
  };
  StmtRef s = nest(outer, perOuter);
  KILN_RETURN_IF_ERROR(err);
  return thenStore(s, rest);
}

StmtRef Lowerer::argUpdate(const std::string& acc, const std::string& accIdx, DType ct, ExprRef v,
                           const std::string& pos) {
  const Node* a = k_.anchor;
  ExprRef cur = load(acc, ct, intConst(0));
  BinaryOp better = a->op() == OpCode::ArgMax ? BinaryOp::Gt : BinaryOp::Lt;
  ExprRef take = binary(better, v, cur);
  if (a->attrBool("select_last_index"))
    take = binary(BinaryOp::Or, take, binary(BinaryOp::Eq, v, cur));
  if (isFloat(ct)) {
    ExprRef curNan = unary(UnaryOp::IsNan, cur);
    take = binary(BinaryOp::And, unary(UnaryOp::Not, curNan),
                  binary(BinaryOp::Or, take, unary(UnaryOp::IsNan, v)));
  }
  ExprRef first = binary(BinaryOp::Lt, load(accIdx, DType::I64, intConst(0)), intConst(0));
  take = binary(BinaryOp::Or, take, first);
  return ifThen(take, block({store(acc, intConst(0), v), store(accIdx, intConst(0), var(pos))}));
}

StatusOr<StmtRef> Lowerer::lowerRowReduction() {
  const Node* a = k_.anchor;
  if (keepsInnermost()) return lowerChannelReduction();
  const Value* x = a->operand(0);
  std::vector<ExprRef> outShape = extentsOf(a->result());
  DType xt = x->type().dtype();
  DType ct = computeType(xt);
  bool arg = a->op() == OpCode::ArgMax || a->op() == OpCode::ArgMin;
  ReduceKind kind = arg ? (a->op() == OpCode::ArgMax ? ReduceKind::Max : ReduceKind::Min)
                        : reduceKind(a->attrEnum("kind"));
  std::vector<const Value*> main, rest;
  splitOutputs(outShape, main, rest);
  std::string acc = "acc" + std::to_string(vars_), accIdx = "arg" + std::to_string(vars_);
  Status err = Status::ok();
  auto perOutput = [&](const Index& o) -> StmtRef {
    memo_.clear();
    std::vector<StmtRef> body;
    body.push_back(store(acc, intConst(0), reduceIdentity(kind, ct)));
    if (arg) body.push_back(store(accIdx, intConst(0), intConst(-1)));
    ReductionIndex ri = reductionIndex(o);
    auto xv = valueAt(x, ri.inIdx);
    if (!xv) {
      err = xv.status();
      return block({});
    }
    StmtRef update;
    if (arg) {
      update = argUpdate(acc, accIdx, ct, *xv, ri.rvars[0]);
      for (size_t i = ri.rvars.size(); i-- > 0;)
        update = forLoop(ri.rvars[i], ri.rextents[i], LoopKind::Serial, update);
    } else {
      // An element outside a padded window counts as the identity.
      ExprRef v = ri.valid ? select(ri.valid, *xv, reduceIdentity(kind, ct)) : *xv;
      const std::vector<ExprRef>& extents = ri.rextents;
      update = ri.rvars.empty()
                   ? store(acc, intConst(0), reduceCombine(kind, load(acc, ct, intConst(0)), v))
                   : reduceInto(acc, intConst(0), kind, ri.rvars, extents, v);
    }
    body.push_back(update);
    // The epilogue at the output index reads the accumulator.
    DType resultType = a->result()->type().dtype();
    std::string accName = arg ? accIdx : acc;
    overrides_[a->result()] = [accName, arg, resultType, ct](const Index&) {
      return arg ? load(accName, DType::I64, intConst(0))
                 : cast(cast(load(accName, ct, intConst(0)), resultType), computeType(resultType));
    };
    auto stores = storeValues(main, o);
    if (!stores) {
      err = stores.status();
      return block({});
    }
    body.push_back(*stores);
    // The accumulators are scratch of this output element (inside any parallel loop, so each
    // thread has its own).
    StmtRef s = alloc(acc, ct, 1, MemoryScope::Local, block(std::move(body)));
    if (arg) s = alloc(accIdx, DType::I64, 1, MemoryScope::Local, s);
    return s;
  };
  StmtRef s = nest(outShape, perOutput);
  overrides_.erase(a->result());
  KILN_RETURN_IF_ERROR(err);
  return thenStore(s, rest);
}

Lowerer::RowLayout Lowerer::rowLayout() const {
  const Node* a = k_.anchor;
  RowLayout rl;
  rl.in = extentsOf(a->operand(0));
  auto axis = static_cast<size_t>(a->attrInt("axis"));
  bool layerNorm = a->op() == OpCode::LayerNorm;
  for (size_t d = 0; d < rl.in.size(); ++d) {
    bool line = layerNorm ? d >= axis : d == axis;
    (line ? rl.lineDims : rl.rowDims).push_back(d);
    (line ? rl.lineShape : rl.rowShape).push_back(rl.in[d]);
  }
  return rl;
}

Index Lowerer::RowLayout::at(const Index& row, const Index& line) const {
  Index full(in.size());
  for (size_t i = 0; i < rowDims.size(); ++i) full[rowDims[i]] = row[i];
  for (size_t i = 0; i < lineDims.size(); ++i) full[lineDims[i]] = line[i];
  return full;
}

StatusOr<StmtRef> Lowerer::reduceLine(const RowLayout& rl, const Index& row, const std::string& acc,
                                      ReduceKind kind, DType ct,
                                      const std::function<StatusOr<ExprRef>(const Index&)>& value) {
  memo_.clear();
  Index line;
  std::vector<std::string> vars;
  std::vector<ExprRef> extents;
  for (const ExprRef& e : rl.lineShape) {
    if (!isConst(e, 1)) vars.push_back(freshVar("j")), extents.push_back(e);
    line.push_back(isConst(e, 1) ? intConst(0) : var(vars.back()));
  }
  KILN_ASSIGN_OR_RETURN(ExprRef v, value(rl.at(row, line)));
  if (vars.empty())
    return store(acc, intConst(0), reduceCombine(kind, load(acc, ct, intConst(0)), v));
  return reduceInto(acc, intConst(0), kind, vars, extents, v);
}

StatusOr<std::vector<StmtRef>> Lowerer::rowStatistics(const RowLayout& rl, const Index& row,
                                                      const std::string& a0, const std::string& a1,
                                                      DType ct) {
  const Node* a = k_.anchor;
  const Value* x = a->operand(0);
  auto xAt = [&](const Index& full) { return valueAt(x, full); };
  ExprRef acc0 = load(a0, ct, intConst(0)), acc1 = load(a1, ct, intConst(0));
  auto c = [&](double v) { return floatConst(v, ct); };
  std::vector<StmtRef> body;
  if (a->op() == OpCode::LayerNorm) {
    // The row's element count (a symbolic one converted when the kernel runs).
    ExprRef count = elementCount(rl.lineShape);
    ExprRef n =
        count->kind == Expr::Kind::Const ? c(static_cast<double>(count->i)) : cast(count, ct);
    body.push_back(store(a0, intConst(0), c(0)));
    KILN_ASSIGN_OR_RETURN(StmtRef mean, reduceLine(rl, row, a0, ReduceKind::Sum, ct, xAt));
    body.push_back(mean);
    body.push_back(store(a0, intConst(0), binary(BinaryOp::Div, acc0, n)));
    body.push_back(store(a1, intConst(0), c(0)));
    KILN_ASSIGN_OR_RETURN(
        StmtRef variance,
        reduceLine(rl, row, a1, ReduceKind::Sum, ct, [&](const Index& full) -> StatusOr<ExprRef> {
          KILN_ASSIGN_OR_RETURN(ExprRef v, xAt(full));
          ExprRef d = binary(BinaryOp::Sub, v, acc0);
          return binary(BinaryOp::Mul, d, d);
        }));
    body.push_back(variance);
    // a1 becomes 1 / sqrt(var + eps).
    ExprRef var = binary(BinaryOp::Div, acc1, n);
    body.push_back(store(
        a1, intConst(0),
        binary(BinaryOp::Div, c(1),
               unary(UnaryOp::Sqrt, binary(BinaryOp::Add, var, c(a->attrFloat("epsilon")))))));
    return body;
  }
  bool logarithm = a->op() == OpCode::LogSoftmax;
  body.push_back(store(a0, intConst(0), c(-std::numeric_limits<double>::infinity())));
  KILN_ASSIGN_OR_RETURN(
      StmtRef max,
      reduceLine(rl, row, a0, logarithm ? ReduceKind::Max : ReduceKind::SelectMax, ct, xAt));
  body.push_back(max);
  body.push_back(store(a1, intConst(0), c(0)));
  KILN_ASSIGN_OR_RETURN(
      StmtRef sum,
      reduceLine(rl, row, a1, ReduceKind::Sum, ct, [&](const Index& full) -> StatusOr<ExprRef> {
        KILN_ASSIGN_OR_RETURN(ExprRef v, xAt(full));
        return unary(UnaryOp::Exp, binary(BinaryOp::Sub, v, acc0));
      }));
  body.push_back(sum);
  // softmax multiplies by 1 / sum (within an ulp of dividing by it, one division a row).
  if (!logarithm) body.push_back(store(a1, intConst(0), binary(BinaryOp::Div, c(1), acc1)));
  return body;
}

StatusOr<ExprRef> Lowerer::normalizedAt(const Index& full, const Index& line, ExprRef acc0,
                                        ExprRef acc1) {
  const Node* a = k_.anchor;
  KILN_ASSIGN_OR_RETURN(ExprRef v, valueAt(a->operand(0), full));
  ExprRef centred = binary(BinaryOp::Sub, v, acc0);
  if (a->op() == OpCode::LogSoftmax)
    return binary(BinaryOp::Sub, centred, unary(UnaryOp::Log, acc1));
  if (a->op() != OpCode::LayerNorm)
    return binary(BinaryOp::Mul, unary(UnaryOp::Exp, centred), acc1);
  KILN_ASSIGN_OR_RETURN(ExprRef scale, valueAt(a->operand(1), line));
  ExprRef y = binary(BinaryOp::Mul, binary(BinaryOp::Mul, centred, acc1), scale);
  if (a->numOperands() <= 2) return y;
  KILN_ASSIGN_OR_RETURN(ExprRef bias, valueAt(a->operand(2), line));
  return binary(BinaryOp::Add, y, bias);
}

StatusOr<StmtRef> Lowerer::lowerRowNormalization() {
  const Node* a = k_.anchor;
  RowLayout rl = rowLayout();
  DType ct = computeType(a->operand(0)->type().dtype());
  DType resultType = a->result()->type().dtype();
  std::vector<const Value*> main, rest;
  splitOutputs(rl.in, main, rest);
  std::string a0 = "acc" + std::to_string(vars_), a1 = "sum" + std::to_string(vars_);
  ExprRef acc0 = load(a0, ct, intConst(0)), acc1 = load(a1, ct, intConst(0));
  Status err = Status::ok();
  auto perRow = [&](const Index& row) -> StmtRef {
    StatusOr<std::vector<StmtRef>> body = rowStatistics(rl, row, a0, a1, ct);
    if (!body) {
      err = body.status();
      return block({});
    }
    // The last pass: the anchor's value at each element, and every stored value of x's shape.
    memo_.clear();
    body->push_back(nest(
        rl.lineShape,
        [&](const Index& line) -> StmtRef {
          Index full = rl.at(row, line);
          StatusOr<ExprRef> y = normalizedAt(full, line, acc0, acc1);
          if (!y) {
            err = y.status();
            return block({});
          }
          ExprRef rounded = cast(cast(*y, resultType), computeType(resultType));
          overrides_[a->result()] = [rounded](const Index&) { return rounded; };
          StatusOr<StmtRef> stores = storeValues(main, full);
          overrides_.erase(a->result());
          if (!stores) err = stores.status();
          return stores ? *stores : block({});
        },
        "j"));
    return alloc(a0, ct, 1, MemoryScope::Local,
                 alloc(a1, ct, 1, MemoryScope::Local, block(std::move(*body))));
  };
  StmtRef rows = nest(rl.rowShape, perRow);
  KILN_RETURN_IF_ERROR(err);
  return thenStore(rows, rest);
}

}  // namespace kiln::kernel::lowering
