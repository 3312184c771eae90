// Lowering of fusion kernels into kernel IR (see lower.h for the shapes of the loop nests): the
// Lowerer's loop nests and stores, and the entry points.
#include "kernel/lower.h"

#include <algorithm>
#include <cctype>

#include "ir/pool_window.h"
#include "ir/text/text.h"
#include "kernel/lowerer.h"
#include "kernel/simplify.h"

namespace kiln::kernel {
namespace lowering {

Index unflatten(const ExprRef& flat, const std::vector<ExprRef>& extents) {
  Index idx(extents.size());
  ExprRef stride = intConst(1);
  for (size_t i = extents.size(); i-- > 0;) {
    ExprRef q = binary(BinaryOp::Div, flat, stride);
    idx[i] = i == 0 ? q : binary(BinaryOp::Rem, q, extents[i]);
    stride = binary(BinaryOp::Mul, stride, extents[i]);
  }
  return idx;
}

Index unflatten(const ExprRef& flat, const std::vector<int64_t>& shape) {
  return unflatten(flat, constExtents(shape));
}

// Walks the result's dims outermost first as pieces (index, extent) and fills the operand's
// dims: a piece that divides the operand dim's remaining extent becomes its next digit; one the
// remaining extent divides is split (index / q for this dim, index % q carried on). A piece and
// an extent neither of which divides the other make the rest one flat index.
Index reshapeIndex(const Index& idx, const Shape& out, const Shape& in) {
  auto flat = [&] {
    std::vector<ExprRef> o, i;
    for (const Dim& d : out) o.push_back(dimExpr(d));
    for (const Dim& d : in) i.push_back(dimExpr(d));
    return unflatten(flatIndex(idx, o), i);
  };
  Index at(in.size(), intConst(0));
  size_t o = 0, k = 0;
  ExprRef piece = out.empty() ? intConst(0) : idx[0];
  Dim pieceExtent = out.empty() ? Dim(1) : out[0];
  ExprRef digits = intConst(0);
  Dim rest = in.empty() ? Dim(1) : in[0];
  while (k < in.size()) {
    if (rest == Dim(1) || o == out.size()) {  // a unit operand dim, or a unit tail
      at[k++] = digits;
      digits = intConst(0);
      rest = k < in.size() ? in[k] : Dim(1);
      continue;
    }
    if (pieceExtent == Dim(0) || rest == Dim(0)) return flat();
    if (std::optional<Dim> left = Dim::quotient(rest, pieceExtent)) {
      digits = binary(BinaryOp::Add, binary(BinaryOp::Mul, digits, dimExpr(pieceExtent)), piece);
      rest = *left;
      if (++o < out.size()) {
        piece = idx[o];
        pieceExtent = out[o];
      }
    } else if (std::optional<Dim> q = Dim::quotient(pieceExtent, rest)) {
      ExprRef qe = dimExpr(*q);
      digits = binary(BinaryOp::Add, binary(BinaryOp::Mul, digits, dimExpr(rest)),
                      binary(BinaryOp::Div, piece, qe));
      piece = binary(BinaryOp::Rem, piece, qe);
      pieceExtent = *q;
      rest = Dim(1);
    } else {
      return flat();
    }
  }
  return at;
}

bool isConst(const ExprRef& extent, int64_t n) {
  return extent->kind == Expr::Kind::Const && extent->i == n;
}

ExprRef clampIndex(const ExprRef& i, int64_t extent) {
  return binary(BinaryOp::Min, binary(BinaryOp::Max, i, intConst(0)),
                intConst(std::max<int64_t>(extent - 1, 0)));
}

ExprRef clampIndex(const ExprRef& i, const ExprRef& extent) {
  if (extent->kind == Expr::Kind::Const) return clampIndex(i, extent->i);
  return binary(BinaryOp::Min, binary(BinaryOp::Max, i, intConst(0)),
                binary(BinaryOp::Max, binary(BinaryOp::Sub, extent, intConst(1)), intConst(0)));
}

ExprRef andAll(const std::vector<ExprRef>& conds) {
  ExprRef all;
  for (const ExprRef& c : conds) all = all ? binary(BinaryOp::And, all, c) : c;
  return all ? all : intConst(1, DType::Bool);
}

DType computeType(DType t) { return t == DType::F16 || t == DType::BF16 ? DType::F32 : t; }

std::string Lowerer::freshVar(const char* prefix) {
  std::string v;
  do v = prefix + std::to_string(vars_++);
  while (
      std::any_of(symbols_.begin(), symbols_.end(), [&](const Symbol& s) { return s.name == v; }));
  return v;
}

ExprRef dimExpr(const Dim& d) {
  if (d.isStatic()) return intConst(d.value());
  ExprRef e = d.coefficient() == 1 ? ExprRef() : intConst(d.coefficient());
  for (const std::string& f : d.factors()) e = e ? binary(BinaryOp::Mul, e, var(f)) : var(f);
  return e;
}

std::vector<ExprRef> Lowerer::extentsOf(const Value* v) const {
  std::vector<ExprRef> out;
  for (const Dim& d : v->type().dims()) out.push_back(dimExpr(d));
  return out;
}

namespace {

// A reduction anchor that lowers over symbolic dims: reduce, argmax/argmin, softmax,
// log_softmax and layer_norm over any dims, and a pool whose window passes through its
// symbolic ones.
bool reducesOverSymbols(const Node& n) {
  const TensorType& in = n.operand(0)->type();
  switch (n.op()) {
    case OpCode::Reduce:
    case OpCode::ArgMax:
    case OpCode::ArgMin:
    case OpCode::Softmax:
    case OpCode::LogSoftmax:
    case OpCode::LayerNorm: return true;
    case OpCode::ReduceWindow: {
      // A symbolic dim (a batch) must be one the window passes through: window 1, stride 1, no
      // padding or dilation.
      const PoolWindow w = poolWindowOf(n);
      for (size_t d = 0; d < w.window.size() && d < static_cast<size_t>(in.rank()); ++d)
        if (in.dim(d).isSymbolic() &&
            (w.window[d] != 1 || w.strides[d] != 1 || w.baseDilations[d] != 1 ||
             w.windowDilations[d] != 1 || w.low[d] != 0 || w.high[d] != 0))
          return false;
      return true;
    }
    default: return false;
  }
}

}  // namespace

bool Lowerer::lowersWithSymbols(const Node& n) const {
  if (&n == k_.anchor && k_.kind == fusion::KernelKind::Reduction) return reducesOverSymbols(n);
  // A matrix product or convolution is a library call on whole buffers: the target makes its
  // kernel for each run's sizes.
  if (&n == k_.anchor && k_.kind == fusion::KernelKind::Contraction)
    return n.op() == OpCode::DotGeneral || n.op() == OpCode::Convolution;
  if (k_.kind == fusion::KernelKind::Opaque || k_.kind == fusion::KernelKind::Custom) return false;
  if (n.op() == OpCode::Gather) return n.operand(0)->type().isStatic();
  return lowersOverSymbols(n.op());
}

// x[:S] of a static extent (a leading slice of symbolic length) must not read past it at the
// top of S's range.
Status Lowerer::checkSlicePrefix(const Node& n) const {
  const TensorType &x = n.operand(0)->type(), &r = n.result()->type();
  std::vector<int64_t> limit = n.attrInts("limit");
  for (size_t i = 0; i < limit.size(); ++i) {
    if (limit[i] != kMaxElements || !x.dim(i).isStatic() || r.dim(i).isStatic()) continue;
    std::optional<int64_t> hi = upperBound(dimExpr(r.dim(i)), symbols_);
    if (!hi || *hi > x.dim(i).value())
      return Status::error(name(n.result()) + " = slice takes the first " + r.dim(i).str() +
                           " of " + x.dim(i).str() + " elements along dim " + std::to_string(i) +
                           ", but " + r.dim(i).str() + " may be up to " +
                           (hi ? std::to_string(*hi) : std::string("unbounded")) +
                           ": narrow its range");
  }
  return Status::ok();
}

Status Lowerer::checkSymbolic() {
  std::set<std::string> used;
  auto visit = [&](const Value* v) -> Status {
    for (const Dim& d : v->type().dims()) {
      for (const std::string& f : d.factors()) {
        auto it = std::find_if(symbols_.begin(), symbols_.end(),
                               [&](const Symbol& s) { return s.name == f; });
        if (it == symbols_.end())
          return Status::error(name(v) + " has type " + v->type().str() + ": symbol " + f +
                               " needs a size or a range to compile");
        used.insert(f);
      }
    }
    return Status::ok();
  };
  for (const Node* n : k_.nodes) {
    bool symbolic = false;
    for (size_t r = 0; r < n->numResults(); ++r) {
      KILN_RETURN_IF_ERROR(visit(n->result(r)));
      symbolic = symbolic || !n->result(r)->type().isStatic();
    }
    for (size_t i = 0; i < n->numOperands(); ++i) {
      KILN_RETURN_IF_ERROR(visit(n->operand(i)));
      symbolic = symbolic || !n->operand(i)->type().isStatic();
    }
    if (symbolic && n->op() == OpCode::Slice) KILN_RETURN_IF_ERROR(checkSlicePrefix(*n));
    if (symbolic && !lowersWithSymbols(*n)) {
      std::string kind(fusion::kernelKindName(k_.kind));
      return Status::needsSizes(name(n->result(0)) + " = " + std::string(opName(n->op())) +
                                (kind[0] == 'o' ? " in an " : " in a ") + kind +
                                " kernel: lowering it with sizes known only at run time is not "
                                "supported yet" +
                                (n == k_.anchor && k_.kind == fusion::KernelKind::Reduction
                                     ? std::string(" (a window over a symbolic dim)")
                                     : std::string()));
    }
  }
  for (const Symbol& s : symbols_)
    if (used.count(s.name)) out_.symbols.push_back(s);
  return Status::ok();
}

StatusOr<Kernel> Lowerer::run() {
  KILN_RETURN_IF_ERROR(checkSymbolic().prefix("kernel " + out_.name));
  StatusOr<StmtRef> body = Status::error("unreachable");
  switch (k_.kind) {
    case fusion::KernelKind::Loop: body = lowerLoop(); break;
    case fusion::KernelKind::Reduction: body = lowerReduction(); break;
    case fusion::KernelKind::Custom: body = lowerCustom(); break;
    default: body = lowerCall(); break;
  }
  if (!body) return Status(body.status()).prefix("kernel " + out_.name);
  // Inputs, then outputs, then temps, then internal buffers.
  std::vector<Buffer> ordered;
  for (BufferRole role :
       {BufferRole::Input, BufferRole::Output, BufferRole::Temp, BufferRole::Internal})
    for (const Buffer& b : buffers_)
      if (b.role == role) ordered.push_back(b);
  out_.buffers = std::move(ordered);
  out_.body = *body;
  return std::move(out_);
}

std::string Lowerer::name(const Value* v) const {
  auto it = names_.find(v);
  return it == names_.end() ? "%?" : it->second;
}

const Buffer& Lowerer::bufferFor(const Value* v, BufferRole role) {
  for (const Buffer& b : buffers_)
    if (b.value == v && b.role == role) return b;
  std::string base;
  for (char c : name(v)) base += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  while (!base.empty() && base[0] == '_') base.erase(0, 1);
  if (base.empty() || std::isdigit(static_cast<unsigned char>(base[0]))) base = "v" + base;
  if (role == BufferRole::Temp) base += "_tmp";
  std::string n = base;
  for (int i = 1; usedNames_.count(n); ++i) n = base + "_" + std::to_string(i);
  usedNames_.insert(n);
  Buffer b;
  b.name = n;
  b.type = v->type().dtype();
  for (const ExprRef& e : extentsOf(v)) b.shape.push_back(*upperBound(e, symbols_));
  if (!v->type().isStatic()) b.dims = extentsOf(v);
  b.role = role;
  b.value = v;
  buffers_.push_back(b);
  return buffers_.back();
}

bool Lowerer::isStored(const Value* v) const {
  for (const Value* o : k_.outputs)
    if (o == v) return true;
  return false;
}

StmtRef Lowerer::nest(const std::vector<ExprRef>& extents,
                      const std::function<StmtRef(const Index&)>& body, const char* prefix) {
  Index idx;
  std::vector<std::string> names;
  for (const ExprRef& extent : extents) {
    names.push_back(isConst(extent, 1) ? "" : freshVar(prefix));
    idx.push_back(isConst(extent, 1) ? intConst(0) : var(names.back()));
  }
  StmtRef s = body(idx);
  for (size_t i = extents.size(); i-- > 0;)
    if (!names[i].empty()) s = forLoop(names[i], extents[i], LoopKind::Serial, s);
  return s;
}

StatusOr<ExprRef> Lowerer::valueAt(const Value* v, const Index& idx) {
  auto ov = overrides_.find(v);
  if (ov != overrides_.end()) return ov->second(idx);
  std::string key = std::to_string(reinterpret_cast<uintptr_t>(v));
  for (const ExprRef& i : idx) key += "," + std::to_string(reinterpret_cast<uintptr_t>(i.get()));
  auto memo = memo_.find(key);
  if (memo != memo_.end()) return memo->second.first;
  KILN_ASSIGN_OR_RETURN(ExprRef e, compute(v, idx));
  // f16/bf16 values compute in f32 but, as in the graph, each op's result is rounded to its
  // dtype before the next op uses it.
  DType dt = v->type().dtype();
  if ((dt == DType::F16 || dt == DType::BF16) && members_.count(v->def()))
    e = cast(cast(e, dt), computeType(dt));
  // The index is kept with the entry: the key holds its addresses, which must not be reused.
  memo_[key] = {e, idx};
  return e;
}

StatusOr<StmtRef> Lowerer::storeValue(const Value* v, const Index& idx) {
  const Buffer& b = bufferFor(v, BufferRole::Output);
  std::string bname = b.name;
  std::vector<ExprRef> extents = b.extents();
  KILN_ASSIGN_OR_RETURN(ExprRef e, valueAt(v, idx));
  return store(bname, flatIndex(idx, extents), cast(e, v->type().dtype()));
}

StatusOr<StmtRef> Lowerer::storeValues(const std::vector<const Value*>& values, const Index& idx) {
  std::vector<StmtRef> stores;
  for (const Value* v : values) {
    KILN_ASSIGN_OR_RETURN(StmtRef st, storeValue(v, idx));
    stores.push_back(st);
  }
  return block(std::move(stores));
}

StatusOr<StmtRef> Lowerer::storeNest(const std::vector<const Value*>& values,
                                     const std::vector<ExprRef>& extents) {
  if (values.size() == 1 && values[0]->def()->op() == OpCode::Concatenate &&
      members_.count(values[0]->def()) && !overrides_.count(values[0]))
    return storeConcatenate(values[0]);
  Status err = Status::ok();
  StmtRef s = nest(extents, [&](const Index& idx) -> StmtRef {
    auto st = storeValues(values, idx);
    if (st) return *st;
    err = st.status();
    return block({});
  });
  KILN_RETURN_IF_ERROR(err);
  return s;
}

StatusOr<StmtRef> Lowerer::storeConcatenate(const Value* v) {
  const Node* n = v->def();
  size_t d = static_cast<size_t>(n->attrInt("dimension"));
  const Buffer& b = bufferFor(v, BufferRole::Output);
  std::string bname = b.name;
  const std::vector<ExprRef> shape = extentsOf(v);
  // Outer loops of fewer than kMinSharedOuter iterations in all (at the symbols' largest) would
  // leave the threads little to split: each operand's nest then takes all the dims and a
  // parallel loop of its own.
  constexpr int64_t kMinSharedOuter = 16;
  std::vector<ExprRef> outer(shape.begin(), shape.begin() + static_cast<ptrdiff_t>(d));
  if (upperBound(elementCount(outer), symbols_).value_or(0) < kMinSharedOuter) outer.clear();
  std::vector<ExprRef> inner(shape.begin() + static_cast<ptrdiff_t>(outer.size()), shape.end());
  const size_t di = d - outer.size();  // the concatenated dim within `inner`
  Status err = Status::ok();
  // The parts of the result at the outer index `at`, one nest per operand.
  auto parts = [&](const Index& at) -> StmtRef {
    std::vector<StmtRef> nests;
    ExprRef offset = intConst(0);
    for (size_t i = 0; i < n->numOperands() && err.isOk(); ++i) {
      std::vector<ExprRef> part = inner;
      part[di] = dimExpr(n->operand(i)->type().dim(d));
      if (isConst(part[di], 0)) continue;
      memo_.clear();
      nests.push_back(nest(part, [&](const Index& within) -> StmtRef {
        Index idx = at;
        idx.insert(idx.end(), within.begin(), within.end());
        auto x = valueAt(n->operand(i), idx);
        if (!x) {
          err = x.status();
          return block({});
        }
        idx[d] = binary(BinaryOp::Add, idx[d], offset);
        return store(bname, flatIndex(idx, shape), cast(*x, v->type().dtype()));
      }));
      offset = binary(BinaryOp::Add, offset, part[di]);
    }
    return block(std::move(nests));
  };
  StmtRef s = outer.empty() ? parts({}) : nest(outer, parts);
  KILN_RETURN_IF_ERROR(err);
  return s;
}

StatusOr<StmtRef> Lowerer::thenStore(StmtRef s, const std::vector<const Value*>& rest) {
  if (rest.empty()) return s;
  KILN_ASSIGN_OR_RETURN(StmtRef others, storeAll(rest));
  return block({s, others});
}

StatusOr<StmtRef> Lowerer::storeAll(const std::vector<const Value*>& values) {
  std::vector<std::pair<std::vector<ExprRef>, std::vector<const Value*>>> byShape;
  for (const Value* v : values) {
    std::vector<ExprRef> s = extentsOf(v);
    auto it =
        std::find_if(byShape.begin(), byShape.end(), [&](const auto& p) { return p.first == s; });
    if (it == byShape.end()) byShape.push_back({s, {v}});
    else it->second.push_back(v);
  }
  std::vector<StmtRef> nests;
  for (const auto& [shape, vs] : byShape) {
    memo_.clear();
    KILN_ASSIGN_OR_RETURN(StmtRef s, storeNest(vs, shape));
    nests.push_back(s);
  }
  return block(std::move(nests));
}

}  // namespace lowering

namespace {

using lowering::Lowerer;

StatusOr<Kernel> lowerWithNames(const fusion::Kernel& k,
                                const std::map<const Value*, std::string>& names,
                                bool storesAlongsideReductions, const std::vector<Symbol>& symbols,
                                fusion::SortRowLimits sortRows = {}) {
  KILN_ASSIGN_OR_RETURN(Kernel lowered,
                        Lowerer(k, names, storesAlongsideReductions, symbols, sortRows).run());
  return simplifyIndices(lowered);
}

}  // namespace

StatusOr<Kernel> lowerKernel(const Function& f, const fusion::Kernel& k,
                             const std::vector<Symbol>& symbols) {
  return lowerWithNames(k, printedValueNames(f), false, symbols);
}

StatusOr<std::vector<Kernel>> lowerPlan(const Function& f, const fusion::FusionPlan& plan,
                                        const std::vector<Symbol>& symbols) {
  // The value names are computed once: per kernel they cost a walk over the whole function.
  const std::map<const Value*, std::string> names = printedValueNames(f);
  std::vector<Kernel> out;
  for (const fusion::Kernel& k : plan.kernels) {
    KILN_ASSIGN_OR_RETURN(Kernel lowered, lowerWithNames(k, names, plan.storesAlongsideReductions,
                                                         symbols, plan.sortRows));
    out.push_back(std::move(lowered));
  }
  return out;
}

}  // namespace kiln::kernel
