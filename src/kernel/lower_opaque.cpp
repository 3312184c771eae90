// Loop lowering of the opaque anchors (see lower_opaque.h). Each lowering mirrors its reference
// kernel step by step: the same types (f64 where the reference computes in double), the same
// floating-point operations in the same order (no reassociation, no fused multiply-add), the
// same roundings when a value is stored. That is what makes the results agree bit for bit.
#include "kernel/lower_opaque.h"

#include <algorithm>
#include <array>
#include <functional>
#include <limits>

#include "ir/resize_geometry.h"
#include "kernel/lower.h"
#include "kernel/opaque_builders.h"
#include "kernel/schedule.h"

namespace kiln::kernel {

std::string OpaqueNames::local(const char* base) {
  std::string name = base + std::to_string(vars_++);
  auto taken = [&](const std::string& s) {
    return std::find(in_.begin(), in_.end(), s) != in_.end() ||
           std::find(out_.begin(), out_.end(), s) != out_.end();
  };
  while (taken(name)) name += "_";
  return name;
}
namespace {

using namespace opaque;

class OpaqueLowerer {
 public:
  OpaqueLowerer(const Node& n, const std::vector<std::string>& operands,
                const std::vector<std::string>& results, fusion::SortRowLimits sortRows)
      : n_(n), in_(operands), out_(results), names_(operands, results), sortRows_(sortRows) {}

  StatusOr<std::optional<StmtRef>> run() {
    if (in_.size() != n_.numOperands() || out_.size() != n_.numResults())
      return fail("needs a buffer for each operand and result");
    for (const Value* v : n_.operands())
      if (!v->type().isStatic()) return fail("lowering needs static shapes");
    for (size_t r = 0; r < n_.numResults(); ++r)
      if (!n_.result(r)->type().isStatic()) return fail("lowering needs static shapes");
    switch (n_.op()) {
      case OpCode::Cumsum: return wrap(cumsum());
      case OpCode::Sort:
      case OpCode::TopK: return sortOrTopK();
      case OpCode::Scatter: return wrap(scatter());
      case OpCode::Resize: return wrap(resize());
      case OpCode::GridSample: return wrap(gridSample());
      case OpCode::NonZero: return wrap(nonZero());
      case OpCode::Unique:
      case OpCode::NonMaxSuppression: return lowerDynamicSizeOp(n_, in_, out_);
      default: return std::optional<StmtRef>();
    }
  }

 private:
  static StatusOr<std::optional<StmtRef>> wrap(StatusOr<StmtRef> s) {
    if (!s) return s.status();
    return std::optional<StmtRef>(*s);
  }

  Status fail(const std::string& message) const {
    return Status::error(n_.describe() + ": " + message);
  }

  std::vector<int64_t> dimsOf(const Value* v) const { return v->type().staticDims(); }
  DType dtypeOf(const Value* v) const { return v->type().dtype(); }

  // Fresh loop variable names, and local scratch names distinct from the kernel's buffers.
  std::string fresh(const char* prefix) { return names_.fresh(prefix); }
  std::string local(const char* base) { return names_.local(base); }

  // A loop nest over `shape` with body(index) innermost; dims of extent 1 get no loop (their
  // index is 0). The outermost loop is parallel when `work` (elements times the work of each)
  // reaches kParallelThreshold; every other loop is serial.
  StmtRef nest(const std::vector<int64_t>& shape, int64_t work,
               const std::function<StmtRef(const Index&)>& body, const char* prefix = "i") {
    Index idx;
    std::vector<std::string> names(shape.size());
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] != 1) names[d] = fresh(prefix);
      idx.push_back(shape[d] == 1 ? i64(0) : var(names[d]));
    }
    StmtRef s = body(idx);
    size_t outermost = shape.size();
    for (size_t d = shape.size(); d-- > 0;) {
      if (names[d].empty()) continue;
      s = forLoop(names[d], i64(shape[d]), LoopKind::Serial, s);
      outermost = d;
    }
    if (outermost < shape.size() && work >= kParallelThreshold) s->loop = LoopKind::Parallel;
    return s;
  }

  // ---- cumsum -----------------------------------------------------------------------------

  // For each position off the axis, a running sum along it (from the end with `reverse`); with
  // `exclusive` an element gets the sum of the elements before it. The sum stays in the
  // reference's accumulator type (f64 for f32, f32 for f16/bf16, integers wrap in their own
  // type) and is rounded to the dtype as it is stored.
  StatusOr<StmtRef> cumsum() {
    const Value* x = n_.operand(0);
    const std::vector<int64_t> dims = dimsOf(x);
    const DType dt = dtypeOf(x);
    const int64_t axis = n_.attrInt("axis");
    if (axis < 0 || axis >= static_cast<int64_t>(dims.size()))
      return fail("axis " + std::to_string(axis) + " is out of range");
    if (dt == DType::Bool) return fail("cumsum needs a numeric operand");
    const DType acc = dt == DType::F32 ? DType::F64 : computeType(dt);
    const bool exclusive = n_.attrBool("exclusive"), reverse = n_.attrBool("reverse");
    const auto a = static_cast<size_t>(axis);
    const int64_t len = dims[a];
    std::vector<int64_t> lines = dims;
    lines[a] = 1;
    const std::string step = fresh("s"), sum = local("sum");
    return nest(lines, elementCount(dims), [&](const Index& line) {
      Index at = line;
      at[a] = reverse ? sub(i64(len - 1), var(step)) : var(step);
      ExprRef off = flatIndex(at, dims);
      ExprRef running = load(sum, acc, i64(0));
      StmtRef accumulate = store(sum, i64(0), add(running, cast(load(in_[0], dt, off), acc)));
      StmtRef write = store(out_[0], off, cast(running, dt));
      StmtRef body = exclusive ? block({write, accumulate}) : block({accumulate, write});
      return alloc(sum, acc, 1, MemoryScope::Local,
                   block({store(sum, i64(0), constOf(0, acc)),
                          forLoop(step, i64(len), LoopKind::Serial, body)}));
    });
  }

  // ---- nonzero ---------------------------------------------------------------------------

  // One serial pass in row-major order, as the reference: the indices of the element go to
  // the next column while a count in local scratch counts them; the columns past the count
  // stay 0, and the count is the second result.
  StatusOr<StmtRef> nonZero() {
    const Value* x = n_.operand(0);
    const std::vector<int64_t> dims = dimsOf(x);
    const DType dt = dtypeOf(x);
    const int64_t rank = static_cast<int64_t>(dims.size()), bound = elementCount(dims);
    const std::string z = fresh("z"), i = fresh("i"), count = local("count");
    ExprRef at = load(count, DType::I64, i64(0));
    ExprRef value = load(in_[0], dt, var(i));
    ExprRef hit = dt == DType::Bool ? value
                                    : binary(BinaryOp::Ne, cast(value, computeType(dt)),
                                             constOf(0, computeType(dt)));
    std::vector<StmtRef> write;
    int64_t stride = bound;
    for (int64_t d = 0; d < rank; ++d) {
      const int64_t extent = dims[static_cast<size_t>(d)];
      stride = extent == 0 ? 0 : stride / extent;
      ExprRef coord =
          stride == 0 ? i64(0) : binary(BinaryOp::Rem, div(var(i), i64(stride)), i64(extent));
      write.push_back(store(out_[0], add(i64(d * bound), at), coord));
    }
    write.push_back(store(count, i64(0), add(at, i64(1))));
    std::vector<StmtRef> body{store(count, i64(0), i64(0))};
    if (rank * bound > 0)
      body.push_back(
          forLoop(z, i64(rank * bound), LoopKind::Serial, store(out_[0], var(z), i64(0))));
    if (bound > 0)
      body.push_back(forLoop(i, i64(bound), LoopKind::Serial, ifThen(hit, block(write))));
    body.push_back(store(out_[1], i64(0), load(count, DType::I64, i64(0))));
    return alloc(count, DType::I64, 1, MemoryScope::Local, block(body));
  }

  // ---- sort and top_k ---------------------------------------------------------------------

  // Element j of a row goes to position rank(j) = #{i < j : not (x_j before x_i)} +
  // #{i > j : x_i before x_j}: the position a stable sort gives it ("before": ascending with
  // NaN last, or descending with NaN first, comparing values as the reference does). Elements
  // whose rank is below k are written: the value as stored, and j.
  StatusOr<std::optional<StmtRef>> sortOrTopK() {
    const bool isSort = n_.op() == OpCode::Sort;
    const Value* x = n_.operand(0);
    const std::vector<int64_t> dims = dimsOf(x);
    const DType dt = dtypeOf(x);
    const int64_t axis = n_.attrInt(isSort ? "dimension" : "axis");
    if (axis < 0 || axis >= static_cast<int64_t>(dims.size()))
      return fail("axis " + std::to_string(axis) + " is out of range");
    const auto a = static_cast<size_t>(axis);
    const int64_t len = dims[a];
    const int64_t k = isSort ? len : n_.attrInt("k");
    if (k < 0 || k > len)
      return fail("k = " + std::to_string(k) + " does not fit dimension extent " +
                  std::to_string(len));
    const bool descending = n_.attrBool(isSort ? "descending" : "largest");
    if (len > sortRows_.of(n_.op())) return std::optional<StmtRef>();
    std::vector<int64_t> outDims = dims;
    outDims[a] = k;
    if (elementCount(outDims) == 0) return std::optional<StmtRef>(block({}));
    const DType ct = computeType(dt);
    auto before = [&](const ExprRef& p, const ExprRef& q) -> ExprRef {
      if (!isFloat(dt)) return binary(descending ? BinaryOp::Gt : BinaryOp::Lt, p, q);
      if (descending) return both(negate(isNan(q)), either(isNan(p), gt(p, q)));
      return both(negate(isNan(p)), either(isNan(q), lt(p, q)));
    };
    const std::string other = fresh("r"), rank = local("rank");
    StmtRef s = nest(dims, elementCount(dims) * len, [&](const Index& at) {
      const ExprRef j = at[a], i = var(other);
      Index atI = at;
      atI[a] = i;
      ExprRef xj = cast(load(in_[0], dt, flatIndex(at, dims)), ct);
      ExprRef xi = cast(load(in_[0], dt, flatIndex(atI, dims)), ct);
      ExprRef ahead = select(lt(i, j), negate(before(xj, xi)), before(xi, xj));
      ExprRef r = load(rank, DType::I64, i64(0));
      StmtRef count = forLoop(other, i64(len), LoopKind::Serial,
                              store(rank, i64(0), add(r, select(ahead, i64(1), i64(0)))));
      Index dst = at;
      dst[a] = r;
      ExprRef o = flatIndex(dst, outDims);
      StmtRef write = ifThen(
          lt(r, i64(k)),
          block({store(out_[0], o, load(in_[0], dt, flatIndex(at, dims))), store(out_[1], o, j)}));
      return alloc(rank, DType::I64, 1, MemoryScope::Local,
                   block({store(rank, i64(0), i64(0)), count, write}));
    });
    return std::optional<StmtRef>(s);
  }

  // ---- scatter ----------------------------------------------------------------------------

  // The result is a copy of the operand. Then, serially over the scatter points in row-major
  // order, the window of each point that lies entirely inside the operand combines its updates
  // into the result; with reduction none the update replaces the element, so the last of
  // duplicate indices wins, and with add/mul/max/min duplicates combine in order.
  // The plan of interp's planScatter: update dims that index the scatter, and the window's
  // operand dims with their extents and update dims.
  struct ScatterPlan {
    std::vector<size_t> scatterDims, windowOperandDims, windowUpdateDims;
    std::vector<int64_t> scatterShape, windowShape;
  };
  StatusOr<ScatterPlan> scatterPlan(const std::vector<int64_t>& xd, const std::vector<int64_t>& id,
                                    const std::vector<int64_t>& ud) {
    const auto windowDims = n_.attrInts("update_window_dims");
    const auto inserted = n_.attrInts("inserted_window_dims");
    const int64_t vectorDim = n_.attrInt("index_vector_dim");
    const auto rank = static_cast<int64_t>(xd.size());
    if (vectorDim < 0 || vectorDim > static_cast<int64_t>(id.size()))
      return fail("index_vector_dim is out of range");
    for (int64_t d : n_.attrInts("scatter_dims_to_operand_dims"))
      if (d < 0 || d >= rank) return fail("scatter_dims_to_operand_dims is out of range");
    for (int64_t d : windowDims)
      if (d < 0 || d >= static_cast<int64_t>(ud.size()))
        return fail("update_window_dims is out of range");
    ScatterPlan p;
    for (size_t i = 0; i < ud.size(); ++i)
      if (!contains(windowDims, static_cast<int64_t>(i))) {
        p.scatterDims.push_back(i);
        p.scatterShape.push_back(ud[i]);
      }
    for (int64_t i = 0; i < rank; ++i) {
      if (contains(inserted, i)) continue;
      if (p.windowOperandDims.size() >= windowDims.size())
        return fail("update_window_dims and inserted_window_dims do not cover the operand");
      auto u = static_cast<size_t>(windowDims[p.windowOperandDims.size()]);
      p.windowOperandDims.push_back(static_cast<size_t>(i));
      p.windowUpdateDims.push_back(u);
      p.windowShape.push_back(ud[u]);
    }
    size_t batchRank = 0;
    for (size_t i = 0; i < id.size(); ++i) batchRank += static_cast<int64_t>(i) != vectorDim;
    if (batchRank != p.scatterDims.size())
      return fail("the update scatter dimensions do not match the index dimensions");
    return p;
  }

  StatusOr<StmtRef> scatter() {
    const std::vector<int64_t> xd = dimsOf(n_.operand(0)), id = dimsOf(n_.operand(1)),
                               ud = dimsOf(n_.operand(2));
    const DType dt = dtypeOf(n_.operand(0)), idt = dtypeOf(n_.operand(1));
    const auto toOperand = n_.attrInts("scatter_dims_to_operand_dims");
    const int64_t vectorDim = n_.attrInt("index_vector_dim");
    const std::string& kind = n_.attrEnum("reduction");
    const auto rank = static_cast<int64_t>(xd.size());
    if (dtypeOf(n_.operand(2)) != dt) return fail("operand and updates differ in dtype");
    if (!isInteger(idt)) return fail("indices must be integers");
    KILN_ASSIGN_OR_RETURN(ScatterPlan plan, scatterPlan(xd, id, ud));
    const auto& [scatterDims, windowOperandDims, windowUpdateDims, scatterShape, windowShape] =
        plan;
    const int64_t total = elementCount(xd);
    const std::string e = fresh("e");
    StmtRef copy = forLoop(e, i64(total),
                           total >= kParallelThreshold ? LoopKind::Parallel : LoopKind::Vectorized,
                           store(out_[0], var(e), load(in_[0], dt, var(e))));
    if (elementCount(scatterShape) == 0 || elementCount(windowShape) == 0) return copy;
    // The window's extent along each operand dim (1 along inserted dims), and the component of
    // the index vector that starts each dim (-1: it starts at 0).
    std::vector<int64_t> extent(xd.size(), 1), component(xd.size(), -1);
    for (size_t w = 0; w < windowOperandDims.size(); ++w)
      extent[windowOperandDims[w]] = windowShape[w];
    for (size_t c = 0; c < toOperand.size(); ++c)
      component[static_cast<size_t>(toOperand[c])] = static_cast<int64_t>(c);
    for (size_t d = 0; d < xd.size(); ++d)
      if (xd[d] < extent[d]) return copy;  // no window fits: nothing is updated
    const std::string start = local("start");
    StmtRef updates = nest(
        scatterShape, 0,
        [&](const Index& point) {
          // The start of this point's window, and whether the window lies inside.
          std::vector<StmtRef> body;
          std::vector<ExprRef> inside;
          Index origin(xd.size(), i64(0));
          for (size_t d = 0; d < xd.size(); ++d) {
            if (component[d] < 0) continue;
            Index at;
            size_t b = 0;
            for (int64_t i = 0; i < static_cast<int64_t>(id.size()); ++i)
              at.push_back(i == vectorDim ? i64(component[d]) : point[b++]);
            body.push_back(store(start, i64(static_cast<int64_t>(d)),
                                 toI64(load(in_[1], idt, flatIndex(at, id)))));
            origin[d] = load(start, DType::I64, i64(static_cast<int64_t>(d)));
            inside.push_back(ge(origin[d], i64(0)));
            inside.push_back(le(origin[d], i64(xd[d] - extent[d])));
          }
          StmtRef window = nest(
              windowShape, 0,
              [&](const Index& w) {
                Index u(ud.size()), o = origin;
                for (size_t j = 0; j < scatterDims.size(); ++j) u[scatterDims[j]] = point[j];
                for (size_t j = 0; j < w.size(); ++j) {
                  u[windowUpdateDims[j]] = w[j];
                  o[windowOperandDims[j]] = add(o[windowOperandDims[j]], w[j]);
                }
                ExprRef oi = flatIndex(o, xd);
                return store(
                    out_[0], oi,
                    combine(kind, dt, load(out_[0], dt, oi), load(in_[2], dt, flatIndex(u, ud))));
              },
              "w");
          ExprRef all;
          for (const ExprRef& c : inside) all = all ? both(all, c) : c;
          body.push_back(all ? ifThen(all, window) : window);
          return alloc(start, DType::I64, std::max<int64_t>(rank, 1), MemoryScope::Local,
                       block(std::move(body)));
        },
        "p");
    return block({copy, updates});
  }

  // ---- resize -----------------------------------------------------------------------------

  // Nearest: each output element copies the input element at the nearest source index of each
  // dim. Linear and cubic: first, per resized dim, a table of each output coordinate's tap
  // indices (clamped to the input: edge padding) and weights in f64, from its clamped source
  // coordinate; then per output element the sum over the taps of all resized dims, read from
  // the tables, nested with the first resized dim innermost. That is the order
  // of the reference's separable passes (one pass per dim, first dim first), so the double
  // sums are the same; the result is rounded once into the dtype.
  StatusOr<StmtRef> resize() {
    const Value* x = n_.operand(0);
    const std::vector<int64_t> inDims = dimsOf(x), outDims = dimsOf(n_.result());
    const DType dt = dtypeOf(x);
    KILN_ASSIGN_OR_RETURN(std::vector<ResizeDim> dims, resizeDims(inDims, outDims, dt));
    const int64_t elements = elementCount(outDims);
    if (elements == 0) return block({});
    const std::string& mode = n_.attrEnum("mode");
    if (mode == "nearest") {
      const std::string& nearestMode = n_.attrEnum("nearest_mode");
      return nest(outDims, elements, [&](const Index& o) {
        Index src(o.size());
        for (size_t d = 0; d < o.size(); ++d)
          src[d] = dims[d].identity()
                       ? o[d]
                       : clampI(nearestIndex(nearestMode, resizeSource(dims[d], o[d])), 0,
                                dims[d].in - 1);
        return store(out_[0], flatIndex(o, outDims), load(in_[0], dt, flatIndex(src, inDims)));
      });
    }
    if (!isFloat(dt)) return fail("linear and cubic resize need a float operand");
    ResizeTaps t;
    t.cubic = mode == "cubic";
    t.taps = t.cubic ? 4 : 2;
    t.a = n_.attrFloat("cubic_coeff_a");
    t.excludeOutside = n_.attrBool("exclude_outside");
    for (size_t d = 0; d < dims.size(); ++d)
      if (!dims[d].identity()) t.resized.push_back(d);
    const auto m = static_cast<int64_t>(t.resized.size());
    if (m == 0)
      return nest(outDims, elements, [&](const Index& o) {
        ExprRef i = flatIndex(o, outDims);
        return store(out_[0], i, fromF64(toF64(load(in_[0], dt, i)), dt));
      });
    // The tables: for each resized dim q and output coordinate oq, its taps' clamped indices and
    // weights at base[q] + oq * taps + k; computed once per dim, not per output element.
    t.coord = local("coord"), t.weight = local("weight"), t.tap = local("tap");
    t.acc = local("acc"), t.total = local("total");
    t.base.assign(static_cast<size_t>(m) + 1, 0);
    for (int64_t q = 0; q < m; ++q)
      t.base[static_cast<size_t>(q) + 1] =
          t.base[static_cast<size_t>(q)] + dims[t.resized[static_cast<size_t>(q)]].out * t.taps;
    std::vector<StmtRef> stmts;
    for (int64_t q = 0; q < m; ++q)
      stmts.push_back(resizeTable(t, q, dims[t.resized[static_cast<size_t>(q)]]));
    const size_t last = inDims.size() - 1;
    const bool rows = t.resized.back() == last && inDims[last] <= outDims[last] * t.taps;
    stmts.push_back(rows ? resizeRows(t, inDims, outDims, dt) : resizeSums(t, inDims, outDims, dt));
    const int64_t entries = t.base[static_cast<size_t>(m)];
    return alloc(t.weight, DType::F64, entries, MemoryScope::Local,
                 alloc(t.tap, DType::I64, entries, MemoryScope::Local, block(std::move(stmts))));
  }

  // resize's dims (each input and output extent and scale), checked.
  StatusOr<std::vector<ResizeDim>> resizeDims(const std::vector<int64_t>& inDims,
                                              const std::vector<int64_t>& outDims, DType dt) {
    if (inDims.size() != outDims.size() || dtypeOf(n_.result()) != dt)
      return fail("the result must have the dtype and rank of the operand");
    StatusOr<std::vector<ResizeDim>> dims =
        kiln::resizeDims(inDims, outDims, getFloats(n_.attrs(), "scales"));
    if (!dims) return fail(dims.status().message());
    return dims;
  }

  // The source coordinate of output coordinate o along dim d, clamped to [-3, in + 2]: past
  // that every tap reads the same edge element (the reference clamps the same way).
  ExprRef resizeSource(const ResizeDim& d, const ExprRef& o) {
    return clampF(sourceCoordinate(n_.attrEnum("coordinate_transformation_mode"), d, toF64(o)),
                  -3.0, double(d.in) + 2);
  }

  // A linear or cubic resize's taps: the dims it resizes, its scratch buffers, and where each
  // resized dim's table starts in them.
  struct ResizeTaps {
    int64_t taps = 2;
    bool cubic = false, excludeOutside = false;
    double a = 0;
    std::vector<size_t> resized;
    std::string coord, weight, tap, acc, total;
    std::vector<int64_t> base;
    ExprRef slot(int64_t q, const ExprRef& oq, const ExprRef& k) const {
      return add(i64(base[static_cast<size_t>(q)]), add(mul(oq, i64(taps)), k));
    }
  };

  // The table of resized dim q: its taps' indices and weights for every output coordinate (the
  // interp's resizeTaps; a few statements per tap).
  StmtRef resizeTable(const ResizeTaps& t, int64_t q, const ResizeDim& d) {
    return nest({d.out}, d.out * t.taps * 8, [&](const Index& o) {
      std::vector<StmtRef> body;
      body.push_back(store(t.coord, i64(0), resizeSource(d, o[0])));
      ExprRef c = load(t.coord, DType::F64, i64(0));
      ExprRef r = sub(c, floorOf(c));
      ExprRef first = toI64(floorOf(c));
      std::vector<ExprRef> w = {sub(f64(1), r), r};
      if (t.cubic) {
        auto cw = cubicWeights(r, t.a);
        w.assign(cw.begin(), cw.end());
        first = sub(first, i64(1));
      }
      const bool renormalise = t.cubic && t.excludeOutside;
      for (int64_t k = 0; k < t.taps; ++k) {
        ExprRef tk = add(first, i64(k));
        ExprRef wk = w[static_cast<size_t>(k)];
        // exclude_outside: taps outside the input weigh 0 (then all renormalise below).
        if (renormalise) wk = select(both(ge(tk, i64(0)), lt(tk, i64(d.in))), wk, f64(0));
        body.push_back(store(t.weight, t.slot(q, o[0], i64(k)), wk));
        body.push_back(store(t.tap, t.slot(q, o[0], i64(k)), clampI(tk, 0, d.in - 1)));
      }
      if (renormalise) {
        // total = ((0 + w0) + w1) + ...; w[k] = total != 0 ? w[k] / total : 0.
        ExprRef sum = f64(0);
        for (int64_t k = 0; k < t.taps; ++k)
          sum = add(sum, load(t.weight, DType::F64, t.slot(q, o[0], i64(k))));
        body.push_back(store(t.total, i64(0), sum));
        ExprRef ts = load(t.total, DType::F64, i64(0));
        for (int64_t k = 0; k < t.taps; ++k)
          body.push_back(
              store(t.weight, t.slot(q, o[0], i64(k)),
                    select(binary(BinaryOp::Ne, ts, f64(0)),
                           div(load(t.weight, DType::F64, t.slot(q, o[0], i64(k))), ts), f64(0))));
      }
      StmtRef s = alloc(t.coord, DType::F64, 1, MemoryScope::Local, block(std::move(body)));
      return renormalise ? alloc(t.total, DType::F64, 1, MemoryScope::Local, s) : s;
    });
  }

  // The nested sums over the taps of resized dims [0, levels): acc[q] = sum over tap t_q of
  // weight * (acc[q - 1], or `value` for q = 0), with the tables' slot of dim q at slot(q).
  StmtRef tapSums(const ResizeTaps& t, int64_t levels, const std::vector<std::string>& tv,
                  const std::function<ExprRef(int64_t)>& slot, const ExprRef& value) {
    StmtRef level;
    for (int64_t q = 0; q < levels; ++q) {
      ExprRef w = load(t.weight, DType::F64, slot(q));
      ExprRef term = q == 0 ? value : load(t.acc, DType::F64, i64(q - 1));
      StmtRef accumulate = store(t.acc, i64(q), add(load(t.acc, DType::F64, i64(q)), mul(w, term)));
      StmtRef loopBody = q == 0 ? accumulate : block({level, accumulate});
      level = block({store(t.acc, i64(q), f64(0)), forLoop(tv[static_cast<size_t>(q)], i64(t.taps),
                                                           LoopKind::Unrolled, loopBody)});
    }
    return level;
  }

  // Per output element the sum over the taps of all resized dims, read from the tables, nested
  // with the first resized dim innermost; rounded once into the dtype.
  StmtRef resizeSums(const ResizeTaps& t, const std::vector<int64_t>& inDims,
                     const std::vector<int64_t>& outDims, DType dt) {
    const auto m = static_cast<int64_t>(t.resized.size());
    int64_t work = elementCount(outDims);
    for (int64_t q = 0; q < m; ++q) work *= t.taps;
    std::vector<std::string> tv;
    for (int64_t q = 0; q < m; ++q) tv.push_back(fresh("t"));
    return nest(outDims, work, [&](const Index& o) {
      // The nested sums: acc[q] = sum over tap t_q of weight * (acc[q - 1], or the input).
      auto at = [&](int64_t q) {
        return t.slot(q, o[t.resized[static_cast<size_t>(q)]], var(tv[static_cast<size_t>(q)]));
      };
      Index src = o;
      for (int64_t q = 0; q < m; ++q)
        src[t.resized[static_cast<size_t>(q)]] = load(t.tap, DType::I64, at(q));
      StmtRef level = tapSums(t, m, tv, at, toF64(load(in_[0], dt, flatIndex(src, inDims))));
      StmtRef body = block({level, store(out_[0], flatIndex(o, outDims),
                                         fromF64(load(t.acc, DType::F64, i64(m - 1)), dt))});
      return alloc(t.acc, DType::F64, m, MemoryScope::Local, body);
    });
  }

  // resizeSums when the last resized dim is the innermost: per output row, first the sums over
  // the other resized dims' taps at every input column (the same sums resizeSums makes per tap,
  // in the same order), kept in a row; then per output element the sum over the last dim's taps
  // read from that row. Bit for bit resizeSums's result, with the input read once per row and
  // column instead of once per element and tap (a 16x bilinear upsample: 32x fewer reads).
  StmtRef resizeRows(const ResizeTaps& t, const std::vector<int64_t>& inDims,
                     const std::vector<int64_t>& outDims, DType dt) {
    const auto m = static_cast<int64_t>(t.resized.size());
    const size_t last = outDims.size() - 1;
    std::vector<int64_t> outer = outDims;
    outer[last] = 1;
    int64_t work = elementCount(outDims);
    for (int64_t q = 0; q < m; ++q) work *= t.taps;
    std::vector<std::string> tv;
    for (int64_t q = 0; q < m; ++q) tv.push_back(fresh("t"));
    const std::string row = local("row"), iw = fresh("i"), ow = fresh("i");
    return nest(outer, work, [&](const Index& base) {
      auto at = [&](int64_t q, const ExprRef& o) {
        return t.slot(q, o, var(tv[static_cast<size_t>(q)]));
      };
      // row[iw]: the nested sums over the resized dims but the last, at input column iw.
      Index src = base;
      src[last] = var(iw);
      for (int64_t q = 0; q + 1 < m; ++q)
        src[t.resized[static_cast<size_t>(q)]] =
            load(t.tap, DType::I64, at(q, base[t.resized[static_cast<size_t>(q)]]));
      ExprRef value = toF64(load(in_[0], dt, flatIndex(src, inDims)));
      StmtRef level = tapSums(
          t, m - 1, tv, [&](int64_t q) { return at(q, base[t.resized[static_cast<size_t>(q)]]); },
          value);
      StmtRef fill = m == 1
                         ? store(row, var(iw), value)
                         : block({level, store(row, var(iw), load(t.acc, DType::F64, i64(m - 2)))});
      // Per output element: the sum over the last dim's taps of weight * row[tap].
      Index o = base;
      o[last] = var(ow);
      const int64_t q = m - 1;
      StmtRef sum = block(
          {store(t.acc, i64(q), f64(0)),
           forLoop(tv[static_cast<size_t>(q)], i64(t.taps), LoopKind::Unrolled,
                   store(t.acc, i64(q),
                         add(load(t.acc, DType::F64, i64(q)),
                             mul(load(t.weight, DType::F64, at(q, var(ow))),
                                 load(row, DType::F64, load(t.tap, DType::I64, at(q, var(ow)))))))),
           store(out_[0], flatIndex(o, outDims), fromF64(load(t.acc, DType::F64, i64(q)), dt))});
      StmtRef body = block({forLoop(iw, i64(inDims[last]), LoopKind::Serial, fill),
                            forLoop(ow, i64(outDims[last]), LoopKind::Serial, sum)});
      return alloc(row, DType::F64, inDims[last], MemoryScope::Local,
                   alloc(t.acc, DType::F64, m, MemoryScope::Local, body));
    });
  }

  // ---- grid_sample ------------------------------------------------------------------------

  // Per output point (batch, y, x): the grid's (x, y) unnormalised to source coordinates, after
  // the padding mode (interp's gridSampleKernel: border clamps, reflection reflects, an
  // infinite coordinate becomes NaN), and the tap indices and weights of each axis; then per
  // channel the sum over the taps (rows outer, as the reference sums), taps outside the input
  // skipped with zeros padding. A NaN coordinate gives NaN.
  StatusOr<StmtRef> gridSample() {
    const Value* x = n_.operand(0);
    const std::vector<int64_t> xd = dimsOf(x), gd = dimsOf(n_.operand(1));
    const DType dt = dtypeOf(x);
    if (xd.size() != 4 || gd.size() != 4 || gd[3] != 2 || gd[0] != xd[0])
      return fail("needs an input [N, C, H, W] and a grid [N, H', W', 2]");
    if (!isFloat(dt) || dtypeOf(n_.operand(1)) != dt)
      return fail("input and grid must have one float dtype");
    const std::string& mode = n_.attrEnum("mode");
    const std::string& padding = n_.attrEnum("padding_mode");
    const bool alignCorners = n_.attrBool("align_corners");
    const int64_t batch = xd[0], channels = xd[1], hIn = xd[2], wIn = xd[3];
    const std::vector<int64_t> outDims = {batch, channels, gd[1], gd[2]};
    if (elementCount(outDims) == 0) return block({});
    if ((hIn == 0 || wIn == 0) && padding != "zeros")
      return fail("grid_sample with padding_mode '" + padding + "' cannot sample an empty input");
    GridSampling gs;
    gs.mode = mode;
    gs.alignCorners = alignCorners;
    gs.reflect = padding == "reflection";
    gs.border = padding == "border";
    const bool zeros = !gs.reflect && !gs.border;
    const int64_t taps = gs.taps = mode == "nearest" ? 1 : mode == "bilinear" ? 2 : 4;
    auto axisOf = [&](int64_t extent) {
      return alignCorners ? GridAxis{extent, 0.0, double(extent - 1)}
                          : GridAxis{extent, -0.5, double(extent) - 0.5};
    };
    const GridAxis ax = axisOf(wIn), ay = axisOf(hIn);
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const std::string coord = gs.coord = local("coord"), wx = local("wx"), wy = local("wy"),
                      ix = local("ix"), iy = local("iy"), sum = local("sum");
    const std::string ch = fresh("c"), ti = fresh("t"), tj = fresh("t");
    const int64_t work = elementCount(outDims) * taps * taps;
    return nest({batch, gd[1], gd[2]}, work, [&](const Index& p) {
      std::vector<StmtRef> body;
      ExprRef g = flatIndex({p[0], p[1], p[2], i64(0)}, gd);
      gs.source(toF64(load(in_[1], dt, g)), 0, ax, body);
      gs.source(toF64(load(in_[1], dt, add(g, i64(1)))), 1, ay, body);
      gs.weights(0, ax, wx, ix, body);
      gs.weights(1, ay, wy, iy, body);
      // Per channel: v = sum over rows i of wy[i] * (sum over columns j of wx[j] * x).
      ExprRef yi = load(iy, DType::I64, var(ti)), xj = load(ix, DType::I64, var(tj));
      ExprRef xv = toF64(load(in_[0], dt, flatIndex({p[0], var(ch), yi, xj}, xd)));
      ExprRef row = load(sum, DType::F64, i64(0)), v = load(sum, DType::F64, i64(1));
      StmtRef column = store(sum, i64(0), add(row, mul(load(wx, DType::F64, var(tj)), xv)));
      if (zeros) column = ifThen(ge(xj, i64(0)), column);
      StmtRef rowSum =
          block({store(sum, i64(0), f64(0)), forLoop(tj, i64(taps), LoopKind::Unrolled, column),
                 store(sum, i64(1), add(v, mul(load(wy, DType::F64, var(ti)), row)))});
      if (zeros) rowSum = ifThen(ge(yi, i64(0)), rowSum);
      ExprRef isNanPoint =
          either(isNan(load(coord, DType::F64, i64(0))), isNan(load(coord, DType::F64, i64(1))));
      ExprRef o = flatIndex({p[0], var(ch), p[1], p[2]}, outDims);
      StmtRef perChannel =
          block({store(sum, i64(1), f64(0)), forLoop(ti, i64(taps), LoopKind::Unrolled, rowSum),
                 store(out_[0], o, fromF64(select(isNanPoint, f64(nan), v), dt))});
      body.push_back(forLoop(ch, i64(channels), LoopKind::Serial, perChannel));
      StmtRef s = block(std::move(body));
      for (const std::string& w : {wx, wy}) s = alloc(w, DType::F64, taps, MemoryScope::Local, s);
      for (const std::string& i : {ix, iy}) s = alloc(i, DType::I64, taps, MemoryScope::Local, s);
      s = alloc(sum, DType::F64, 2, MemoryScope::Local, s);
      return alloc(coord, DType::F64, 2, MemoryScope::Local, s);
    });
  }

  const Node& n_;
  const std::vector<std::string>& in_;
  const std::vector<std::string>& out_;
  OpaqueNames names_;
  fusion::SortRowLimits sortRows_;
};

}  // namespace

StatusOr<std::optional<StmtRef>> lowerOpaqueOp(const Node& n,
                                               const std::vector<std::string>& operands,
                                               const std::vector<std::string>& results,
                                               fusion::SortRowLimits sortRows) {
  return OpaqueLowerer(n, operands, results, sortRows).run();
}

}  // namespace kiln::kernel
