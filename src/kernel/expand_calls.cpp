// Kiln's own loops for library calls. See expand_calls.h.
#include "kernel/expand_calls.h"

#include <algorithm>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "ir/op.h"
#include "kernel/buffer_views.h"
#include "kernel/lowerer.h"
#include "kernel/post_op_loops.h"

namespace kiln::kernel {
namespace {

using lowering::andAll;
using lowering::clampIndex;
using lowering::computeType;
using Index = std::vector<ExprRef>;

// The interpreter's accumulator type (interp/eval_contractions.cpp, Acc<D>): f32 sums in f64,
// f16/bf16 in f32, f64 and integers in their own type.
DType accumulatorType(DType t) { return t == DType::F32 ? DType::F64 : computeType(t); }

std::string str(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// One call being expanded: its kernel, its statement and its operand and result buffers.
struct Site {
  const Kernel& k;
  const Stmt& call;
  const Buffer* lhs = nullptr;
  const Buffer* rhs = nullptr;
  const Buffer* result = nullptr;

  Status fail(const std::string& why) const {
    return Status::error("kernel " + k.name + ": call " + call.callee() + ": " + why);
  }
};

// What the Reduce of one result element sums: its loops (the last innermost) and the value at a
// point of them, in the accumulator type.
struct Contraction {
  std::vector<std::string> vars;
  std::vector<ExprRef> extents;
  ExprRef value;
};

// The index of a contracted dim of `extent`: a new loop of the Reduce, or 0 when the extent is 1.
ExprRef contractedIndex(int64_t extent, Contraction& c, FreshNames& names) {
  if (extent == 1) return intConst(0);
  c.vars.push_back(names.fresh("r"));
  c.extents.push_back(intConst(extent));
  return var(c.vars.back());
}

// lhs[lhsIdx] * rhs[rhsIdx] in the accumulator type.
ExprRef product(const Site& s, const Index& lhsIdx, const Index& rhsIdx) {
  DType acc = accumulatorType(s.lhs->type);
  ExprRef a = cast(load(s.lhs->name, s.lhs->type, flatIndex(lhsIdx, s.lhs->shape)), acc);
  ExprRef b = cast(load(s.rhs->name, s.rhs->type, flatIndex(rhsIdx, s.rhs->shape)), acc);
  return binary(BinaryOp::Mul, a, b);
}

// ---- dot_general ------------------------------------------------------------------------------

struct DotDims {
  std::vector<int64_t> lb, rb, lc, rc, lf, rf;  // batch, contracting and free dims of each side
};

// The dims of a `rank`-dim operand in neither list.
std::vector<int64_t> freeDims(size_t rank, const std::vector<int64_t>& a,
                              const std::vector<int64_t>& b) {
  std::vector<int64_t> f;
  for (int64_t d = 0; d < static_cast<int64_t>(rank); ++d)
    if (std::find(a.begin(), a.end(), d) == a.end() && std::find(b.begin(), b.end(), d) == b.end())
      f.push_back(d);
  return f;
}

// Paired dims `l` of the lhs and `r` of the rhs: as many, in range, of equal extents, each once.
Status checkPairs(const Site& s, const char* what, const std::vector<int64_t>& l,
                  const std::vector<int64_t>& r, std::set<int64_t>& usedL,
                  std::set<int64_t>& usedR) {
  if (l.size() != r.size())
    return s.fail(std::string(what) + " dims " + str(l) + " and " + str(r) + " differ in number");
  const auto& ls = s.lhs->shape;
  const auto& rs = s.rhs->shape;
  for (size_t i = 0; i < l.size(); ++i) {
    if (l[i] < 0 || l[i] >= static_cast<int64_t>(ls.size()) || r[i] < 0 ||
        r[i] >= static_cast<int64_t>(rs.size()) || !usedL.insert(l[i]).second ||
        !usedR.insert(r[i]).second)
      return s.fail(std::string(what) + " dims " + str(l) + " and " + str(r) +
                    " are out of range or repeated");
    if (ls[static_cast<size_t>(l[i])] != rs[static_cast<size_t>(r[i])])
      return s.fail(std::string(what) + " dim " + std::to_string(l[i]) + " of %" + s.lhs->name +
                    " and " + std::to_string(r[i]) + " of %" + s.rhs->name + " differ in extent");
  }
  return Status::ok();
}

StatusOr<DotDims> dotDims(const Site& s) {
  const AttrMap& a = s.call.attrs;
  DotDims d{getInts(a, "lhs_batch"),
            getInts(a, "rhs_batch"),
            getInts(a, "lhs_contracting"),
            getInts(a, "rhs_contracting"),
            {},
            {}};
  std::set<int64_t> usedL, usedR;
  KILN_RETURN_IF_ERROR(checkPairs(s, "batch", d.lb, d.rb, usedL, usedR));
  KILN_RETURN_IF_ERROR(checkPairs(s, "contracting", d.lc, d.rc, usedL, usedR));
  d.lf = freeDims(s.lhs->shape.size(), d.lb, d.lc);
  d.rf = freeDims(s.rhs->shape.size(), d.rb, d.rc);
  std::vector<int64_t> want;
  for (int64_t x : d.lb) want.push_back(s.lhs->shape[static_cast<size_t>(x)]);
  for (int64_t x : d.lf) want.push_back(s.lhs->shape[static_cast<size_t>(x)]);
  for (int64_t x : d.rf) want.push_back(s.rhs->shape[static_cast<size_t>(x)]);
  if (want != s.result->shape)
    return s.fail("the result %" + s.result->name + " has shape " + str(s.result->shape) +
                  ", the attributes give " + str(want));
  return d;
}

// The result is [batch..., lhs free..., rhs free...]; the contracting dims are summed in the
// order the attributes list them.
StatusOr<Contraction> dotGeneral(const Site& s, const Index& out, FreshNames& names) {
  KILN_ASSIGN_OR_RETURN(DotDims d, dotDims(s));
  Index li(s.lhs->shape.size()), ri(s.rhs->shape.size());
  size_t o = 0;
  for (size_t i = 0; i < d.lb.size(); ++i, ++o)
    li[static_cast<size_t>(d.lb[i])] = ri[static_cast<size_t>(d.rb[i])] = out[o];
  for (int64_t x : d.lf) li[static_cast<size_t>(x)] = out[o++];
  for (int64_t x : d.rf) ri[static_cast<size_t>(x)] = out[o++];
  Contraction c;
  for (size_t i = 0; i < d.lc.size(); ++i)
    li[static_cast<size_t>(d.lc[i])] = ri[static_cast<size_t>(d.rc[i])] =
        contractedIndex(s.lhs->shape[static_cast<size_t>(d.lc[i])], c, names);
  c.value = product(s, li, ri);
  return c;
}

// ---- convolution ------------------------------------------------------------------------------

// One spatial dim: the input's extent, the window's, its attributes and the output's extent.
struct ConvSpatial {
  int64_t in = 0, kernel = 0, stride = 1, lo = 0, hi = 0, lhsDil = 1, rhsDil = 1, out = 0;
  int64_t dilatedIn() const { return in > 0 ? (in - 1) * lhsDil + 1 : 0; }
};

struct ConvGeometry {
  ConvDimensionNumbers dn;
  std::vector<ConvSpatial> spatial;
  int64_t batch = 0, inFeatures = 0, outFeatures = 0, kernelIn = 0, groups = 1, batchGroups = 1;
};

// The output extent of one spatial dim (as the interpreter's spatialTaps computes it), or an
// error when the window arithmetic leaves the range where index arithmetic is exact.
StatusOr<int64_t> spatialExtent(const Site& s, const ConvSpatial& d) {
  using Wide = __int128;
  constexpr Wide kLimit = Wide(1) << 40;
  Wide dilated = d.in > 0 ? Wide(d.in - 1) * d.lhsDil + 1 : 0;
  Wide padded = dilated + d.lo + d.hi, window = Wide(d.kernel - 1) * d.rhsDil + 1;
  Wide out = padded < window ? 0 : (padded - window) / d.stride + 1;
  for (Wide v : {dilated, padded, window, out})
    if (v > kLimit || v < -kLimit) return s.fail("window arithmetic overflows");
  return static_cast<int64_t>(out);
}

Status convGroups(const Site& s, const ConvGeometry& g) {
  constexpr int64_t kLimit = int64_t(1) << 40;
  if (g.groups < 1 || g.batchGroups < 1 || g.groups > kLimit || g.batchGroups > kLimit)
    return s.fail("group counts must be positive (and at most 2^40)");
  if (g.kernelIn * g.groups != g.inFeatures)
    return s.fail("input features (" + std::to_string(g.inFeatures) +
                  ") are not kernel input features x feature_group_count (" +
                  std::to_string(g.kernelIn) + " x " + std::to_string(g.groups) + ")");
  if (g.outFeatures % g.groups != 0 || g.outFeatures % g.batchGroups != 0 ||
      g.batch % g.batchGroups != 0)
    return s.fail("kernel output features or batch not divisible by the group counts");
  return Status::ok();
}

StatusOr<ConvGeometry> convGeometry(const Site& s) {
  const std::vector<int64_t>&x = s.lhs->shape, &w = s.rhs->shape;
  if (x.size() < 3 || w.size() != x.size())
    return s.fail("input and kernel need one rank of at least 3");
  ConvGeometry g;
  StatusOr<ConvDimensionNumbers> dn = convDimensionNumbers(s.call.attrs, int64_t(x.size()));
  if (!dn) return s.fail(dn.status().message());
  g.dn = *dn;
  size_t ns = x.size() - 2;
  ConvWindow win = convWindow(s.call.attrs, ns);
  for (const auto* l : {&win.strides, &win.lo, &win.hi, &win.lhsDil, &win.rhsDil})
    if (l->size() != ns) return s.fail("window attributes need one entry per spatial dim");
  auto at = [](const std::vector<int64_t>& v, int64_t d) { return v[static_cast<size_t>(d)]; };
  g.batch = at(x, g.dn.inputBatch);
  g.inFeatures = at(x, g.dn.inputFeature);
  g.outFeatures = at(w, g.dn.kernelOutput);
  g.kernelIn = at(w, g.dn.kernelInput);
  g.groups = getInt(OpCode::Convolution, s.call.attrs, "feature_group_count");
  g.batchGroups = getInt(OpCode::Convolution, s.call.attrs, "batch_group_count");
  KILN_RETURN_IF_ERROR(convGroups(s, g));
  std::vector<int64_t> want(x.size());
  want[static_cast<size_t>(g.dn.outputBatch)] = g.batch / g.batchGroups;
  want[static_cast<size_t>(g.dn.outputFeature)] = g.outFeatures;
  for (size_t i = 0; i < ns; ++i) {
    ConvSpatial d{.in = at(x, g.dn.inputSpatial[i]),
                  .kernel = at(w, g.dn.kernelSpatial[i]),
                  .stride = win.strides[i],
                  .lo = win.lo[i],
                  .hi = win.hi[i],
                  .lhsDil = win.lhsDil[i],
                  .rhsDil = win.rhsDil[i]};
    if (d.stride < 1 || d.lhsDil < 1 || d.rhsDil < 1)
      return s.fail("strides and dilations must be positive");
    KILN_ASSIGN_OR_RETURN(d.out, spatialExtent(s, d));
    want[static_cast<size_t>(g.dn.outputSpatial[i])] = d.out;
    g.spatial.push_back(d);
  }
  if (want != s.result->shape)
    return s.fail("the result %" + s.result->name + " has shape " + str(s.result->shape) +
                  ", the attributes give " + str(want));
  return g;
}

// The input index along a spatial dim read by output position `y` and window tap `k`, clamped
// into the input; `valid` gets the conditions under which it is an input element (not padding,
// not a hole of the lhs dilation), where some position of the loops needs them.
ExprRef spatialIndex(const ConvSpatial& d, const ExprRef& y, const ExprRef& k, Index& valid) {
  ExprRef p = binary(BinaryOp::Sub,
                     binary(BinaryOp::Add, binary(BinaryOp::Mul, y, intConst(d.stride)),
                            binary(BinaryOp::Mul, k, intConst(d.rhsDil))),
                     intConst(d.lo));
  int64_t last = (d.out - 1) * d.stride + (d.kernel - 1) * d.rhsDil - d.lo;
  bool below = d.lo > 0, above = last >= d.dilatedIn();
  if (below) valid.push_back(binary(BinaryOp::Ge, p, intConst(0)));
  if (above) valid.push_back(binary(BinaryOp::Lt, p, intConst(d.dilatedIn())));
  if (d.lhsDil > 1)
    valid.push_back(
        binary(BinaryOp::Eq, binary(BinaryOp::Rem, p, intConst(d.lhsDil)), intConst(0)));
  ExprRef i = binary(BinaryOp::Div, p, intConst(d.lhsDil));
  return below || above ? clampIndex(i, d.in) : i;
}

// `f` / (count / groups), the group of `f`, when there are groups.
ExprRef groupOf(const ExprRef& f, int64_t count, int64_t groups) {
  return binary(BinaryOp::Div, f, intConst(count / groups));
}

// Summed over the input features of the output feature's group, then the window's taps; the
// input batch of batch group b is b * (batch / batch_group_count) + n, as the interpreter reads.
StatusOr<Contraction> convolution(const Site& s, const Index& out, FreshNames& names) {
  KILN_ASSIGN_OR_RETURN(ConvGeometry g, convGeometry(s));
  const ConvDimensionNumbers& dn = g.dn;
  auto u = [](int64_t d) { return static_cast<size_t>(d); };
  Index xi(s.lhs->shape.size()), wi(s.rhs->shape.size()), valid;
  ExprRef n = out[u(dn.outputBatch)], f = out[u(dn.outputFeature)];
  Contraction c;
  ExprRef ci = contractedIndex(g.kernelIn, c, names);
  xi[u(dn.inputBatch)] =
      g.batchGroups == 1 ? n
                         : binary(BinaryOp::Add,
                                  binary(BinaryOp::Mul, groupOf(f, g.outFeatures, g.batchGroups),
                                         intConst(g.batch / g.batchGroups)),
                                  n);
  xi[u(dn.inputFeature)] =
      g.groups == 1
          ? ci
          : binary(BinaryOp::Add,
                   binary(BinaryOp::Mul, groupOf(f, g.outFeatures, g.groups), intConst(g.kernelIn)),
                   ci);
  wi[u(dn.kernelOutput)] = f;
  wi[u(dn.kernelInput)] = ci;
  for (size_t i = 0; i < g.spatial.size(); ++i) {
    ExprRef k = contractedIndex(g.spatial[i].kernel, c, names);
    wi[u(dn.kernelSpatial[i])] = k;
    xi[u(dn.inputSpatial[i])] = spatialIndex(g.spatial[i], out[u(dn.outputSpatial[i])], k, valid);
  }
  c.value = product(s, xi, wi);
  if (!valid.empty()) c.value = select(andAll(valid), c.value, constOf(0, c.value->type));
  return c;
}

// ---- the loops --------------------------------------------------------------------------------

// The call's buffers, and its post-ops' operands checked against the result.
StatusOr<Site> site(const Kernel& k, const Stmt& call) {
  Site s{k, call};
  size_t operands = 0;
  for (const PostOp& p : call.postOps) operands += !p.operand.empty();
  if (call.args.size() != 3 + operands)
    return s.fail("expected 3 arguments and " + std::to_string(operands) +
                  " post-op operands, got " + std::to_string(call.args.size()) + " arguments");
  s.lhs = k.find(call.args[0]);
  s.rhs = k.find(call.args[1]);
  s.result = k.find(call.args[2]);
  if (!s.lhs || !s.rhs || !s.result) return s.fail("an argument is no buffer of the kernel");
  for (const std::string& a : call.args)
    if (const Buffer* b = k.find(a); b && b->isSymbolic())
      return Status::needsSizes(
          s.fail("%" + a + " has sizes known only when it runs, and a call's loops are " +
                 "written for static shapes: run it on a library")
              .message());
  if (s.lhs->type != s.rhs->type || s.lhs->type == DType::Bool)
    return s.fail("operands must share a numeric type, got " + std::string(dtypeName(s.lhs->type)) +
                  " and " + std::string(dtypeName(s.rhs->type)));
  if (operands > 0 && !isFloat(s.result->type))
    return s.fail("post-ops on a result of type " + std::string(dtypeName(s.result->type)));
  for (const PostOp& p : call.postOps) {
    if (p.operand.empty()) continue;
    const Buffer* b = k.find(p.operand);
    bool fits = b && b->shape == p.operandShape && p.operandDims.size() == p.operandShape.size();
    for (size_t j = 0; fits && j < p.operandDims.size(); ++j) {
      int64_t d = p.operandDims[j];
      fits =
          d >= 0 && d < static_cast<int64_t>(s.result->shape.size()) &&
          (p.operandShape[j] == 1 || p.operandShape[j] == s.result->shape[static_cast<size_t>(d)]);
    }
    if (!fits) return s.fail("post-op operand %" + p.operand + " does not fit the result");
  }
  return s;
}

// The accumulated value rounded to the result's type, then each post-op (computed in the type
// arithmetic on the result's type runs in), rounded likewise, as the graph's ops would round.
ExprRef epilogue(const Site& s, const ExprRef& acc, const Index& out) {
  DType rt = s.result->type, ct = computeType(rt);
  ExprRef x = cast(acc, rt);
  for (const PostOp& p : s.call.postOps)
    x = cast(applyPostOp(p, cast(x, ct), out, p.operand.empty() ? nullptr : s.k.find(p.operand)),
             rt);
  return x;
}

StatusOr<StmtRef> expandCall(const Kernel& k, const Stmt& call, FreshNames& names) {
  KILN_ASSIGN_OR_RETURN(Site s, site(k, call));
  const ShapeNest nest = shapeNest(s.result->shape, names, "o");
  const Index& out = nest.idx;
  StatusOr<Contraction> c =
      call.op == OpCode::DotGeneral ? dotGeneral(s, out, names) : convolution(s, out, names);
  KILN_RETURN_IF_ERROR(c.status());
  std::string acc = names.fresh("acc");
  DType at = c->value->type;
  ExprRef a = load(acc, at, intConst(0));
  StmtRef sum = c->vars.empty()
                    ? store(acc, intConst(0), reduceCombine(ReduceKind::Sum, a, c->value))
                    : reduceInto(acc, intConst(0), ReduceKind::Sum, c->vars, c->extents, c->value);
  StmtRef body =
      alloc(acc, at, 1, MemoryScope::Local,
            block({store(acc, intConst(0), reduceIdentity(ReduceKind::Sum, at)), sum,
                   store(s.result->name, flatIndex(out, s.result->shape), epilogue(s, a, out))}));
  return indexViews(k, nest.wrap(body));
}

// `s` with the calls below it that `which` selects expanded; `s` itself where it has none.
StatusOr<StmtRef> expandIn(const Kernel& k, const StmtRef& s, FreshNames& names,
                           const std::function<bool(const Stmt&)>& which) {
  if (!s) return s;
  if (s->kind == Stmt::Kind::Call &&
      (s->op == OpCode::DotGeneral || s->op == OpCode::Convolution) && (!which || which(*s)))
    return expandCall(k, *s, names);
  std::vector<StmtRef> body;
  bool changed = false;
  for (const StmtRef& b : s->body) {
    KILN_ASSIGN_OR_RETURN(StmtRef e, expandIn(k, b, names, which));
    changed = changed || e != b;
    body.push_back(std::move(e));
  }
  if (!changed) return s;
  auto out = std::make_shared<Stmt>(*s);
  out->body = std::move(body);
  return StmtRef(out);
}

}  // namespace

StatusOr<Kernel> expandCalls(const Kernel& k, const std::function<bool(const Stmt&)>& which) {
  FreshNames names(k);
  Kernel out = k;
  KILN_ASSIGN_OR_RETURN(out.body, expandIn(k, k.body, names, which));
  return out;
}

}  // namespace kiln::kernel
