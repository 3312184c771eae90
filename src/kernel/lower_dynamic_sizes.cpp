// Loop lowering of unique and non_max_suppression (lower_opaque.h): one serial nest each, with
// the few running values (a comparison, a count, the last candidate) in local scratch, so the
// kernel needs no sort and no scratch that grows with the input. Both mirror their reference
// kernels (src/interp/eval_dynamic_sizes.cpp) to the last bit: the same comparisons, the
// overlap test in the same arithmetic type and order.
#include <algorithm>
#include <limits>
#include <optional>

#include "kernel/lower_opaque.h"

namespace kiln::kernel {
namespace {

constexpr int64_t kMaxSerialLength = 4096;

ExprRef i64(int64_t v) { return intConst(v); }
ExprRef add(ExprRef a, ExprRef b) { return binary(BinaryOp::Add, std::move(a), std::move(b)); }
ExprRef sub(ExprRef a, ExprRef b) { return binary(BinaryOp::Sub, std::move(a), std::move(b)); }
ExprRef mul(ExprRef a, ExprRef b) { return binary(BinaryOp::Mul, std::move(a), std::move(b)); }
ExprRef lt(ExprRef a, ExprRef b) { return binary(BinaryOp::Lt, std::move(a), std::move(b)); }
ExprRef gt(ExprRef a, ExprRef b) { return binary(BinaryOp::Gt, std::move(a), std::move(b)); }
ExprRef ge(ExprRef a, ExprRef b) { return binary(BinaryOp::Ge, std::move(a), std::move(b)); }
ExprRef eq(ExprRef a, ExprRef b) { return binary(BinaryOp::Eq, std::move(a), std::move(b)); }
ExprRef ne(ExprRef a, ExprRef b) { return binary(BinaryOp::Ne, std::move(a), std::move(b)); }
ExprRef both(ExprRef a, ExprRef b) { return binary(BinaryOp::And, std::move(a), std::move(b)); }
ExprRef either(ExprRef a, ExprRef b) { return binary(BinaryOp::Or, std::move(a), std::move(b)); }
ExprRef isNan(ExprRef a) { return unary(UnaryOp::IsNan, std::move(a)); }
// std::max and std::min: the first operand unless the second is strictly beyond it.
ExprRef maxOf(const ExprRef& a, const ExprRef& b) { return select(lt(a, b), b, a); }
ExprRef minOf(const ExprRef& a, const ExprRef& b) { return select(lt(b, a), b, a); }

DType computeType(DType t) { return t == DType::F16 || t == DType::BF16 ? DType::F32 : t; }

class DynamicSizeLowerer {
 public:
  DynamicSizeLowerer(const Node& n, const std::vector<std::string>& operands,
                     const std::vector<std::string>& results)
      : n_(n), in_(operands), out_(results), names_(operands, results) {}

  StatusOr<StmtRef> unique();
  StatusOr<StmtRef> nonMaxSuppression();

 private:
  std::string fresh(const char* prefix) { return names_.fresh(prefix); }
  std::string local(const char* base) { return names_.local(base); }
  StmtRef loop(const std::string& v, int64_t extent, StmtRef body) {
    return forLoop(v, i64(extent), LoopKind::Serial, std::move(body));
  }
  // out = 0 over `elements` elements.
  StmtRef zero(const std::string& out, DType t, int64_t elements) {
    const std::string z = fresh("z");
    return loop(z, elements, store(out, var(z), constOf(0, t)));
  }

  // ---- unique ----
  struct View {
    int64_t outer = 1, k = 1, inner = 1;
  };
  View view() const;
  ExprRef at(const View& v, const ExprRef& slice, const ExprRef& o, const ExprRef& q) const {
    return add(mul(add(mul(o, i64(v.k)), slice), i64(v.inner)), q);
  }
  ExprRef elementOrder(const ExprRef& a, const ExprRef& b) const;
  StmtRef compareSlices(const View& v, const std::string& s, int64_t slot, const ExprRef& i,
                        const ExprRef& j);

  // ---- non_max_suppression ----
  StmtRef boxSpans(const ExprRef& box, const std::string& spans, int64_t at, DType t);
  ExprRef suppresses(const std::string& spans, DType t, const ExprRef& threshold) const;

  const Node& n_;
  const std::vector<std::string>& in_;
  const std::vector<std::string>& out_;
  OpaqueNames names_;
};

DynamicSizeLowerer::View DynamicSizeLowerer::view() const {
  const std::vector<int64_t> dims = n_.operand(0)->type().staticDims();
  View v;
  if (!hasAttr(n_.attrs(), "axis")) {
    v.k = elementCount(dims);
    return v;
  }
  const auto axis = static_cast<size_t>(n_.attrInt("axis"));
  for (size_t d = 0; d < dims.size(); ++d) {
    if (d < axis) v.outer *= dims[d];
    if (d > axis) v.inner *= dims[d];
  }
  v.k = dims[axis];
  return v;
}

// -1, 0 or 1 as element a is before, equal to or after b: NaN after every number and equal to
// NaN; integers (and bool) compared exactly in i64.
ExprRef DynamicSizeLowerer::elementOrder(const ExprRef& a, const ExprRef& b) const {
  const DType dt = n_.operand(0)->type().dtype();
  if (!isFloat(dt)) {
    ExprRef x = cast(a, DType::I64), y = cast(b, DType::I64);
    return select(lt(x, y), i64(-1), select(gt(x, y), i64(1), i64(0)));
  }
  ExprRef x = cast(a, computeType(dt)), y = cast(b, computeType(dt));
  ExprRef byValue = select(lt(x, y), i64(-1), select(gt(x, y), i64(1), i64(0)));
  return select(ne(isNan(x), isNan(y)), select(isNan(x), i64(1), i64(-1)), byValue);
}

// s[slot] = the lexicographic order of slice i against slice j (-1, 0, 1).
StmtRef DynamicSizeLowerer::compareSlices(const View& v, const std::string& s, int64_t slot,
                                          const ExprRef& i, const ExprRef& j) {
  const DType dt = n_.operand(0)->type().dtype();
  const std::string o = fresh("o"), q = fresh("q");
  ExprRef cmp = load(s, DType::I64, i64(slot));
  ExprRef order = elementOrder(load(in_[0], dt, at(v, i, var(o), var(q))),
                               load(in_[0], dt, at(v, j, var(o), var(q))));
  StmtRef step = store(s, i64(slot), select(ne(cmp, i64(0)), cmp, order));
  return block({store(s, i64(slot), i64(0)), loop(o, v.outer, loop(q, v.inner, step))});
}

// Three serial passes over the K slices, with the inverse result as working memory:
//   1. inverse[i] = the first slice equal to slice i;
//   2. each first occurrence i (inverse[i] == i) goes to position u = the number of first
//      occurrences before it (in slice order when sorted, in index order otherwise):
//      y[:, u, :] = x[:, i, :], indices[u] = i, counts[u] = #{j : inverse[j] == i};
//   3. inverse[i] = the position u with indices[u] == inverse[i].
// O(K^2) slice comparisons; y, indices and counts are 0 past the count.
StatusOr<StmtRef> DynamicSizeLowerer::unique() {
  const View v = view();
  const DType dt = n_.operand(0)->type().dtype();
  const bool sorted = n_.attrBool("sorted");
  const std::string s = local("u");  // 0 cmp, 1 first, 2 position, 3 count, 4 occurrences
  auto slot = [&](int64_t k) { return load(s, DType::I64, i64(k)); };
  auto set = [&](int64_t k, ExprRef e) { return store(s, i64(k), std::move(e)); };
  const std::string &y = out_[0], &indices = out_[1], &inverse = out_[2], &counts = out_[3];
  const std::string i = fresh("i"), j = fresh("j");
  auto inv = [&](const ExprRef& at) { return load(inverse, DType::I64, at); };
  // Pass 1.
  StmtRef findFirst = ifThen(
      both(lt(var(j), var(i)), eq(slot(1), var(i))),
      block({compareSlices(v, s, 0, var(j), var(i)), ifThen(eq(slot(0), i64(0)), set(1, var(j)))}));
  StmtRef pass1 = loop(
      i, v.k, block({set(1, var(i)), loop(j, v.k, findFirst), store(inverse, var(i), slot(1))}));
  // Pass 2.
  const std::string j2 = fresh("j"), o = fresh("o"), q = fresh("q"), j3 = fresh("j");
  StmtRef before = sorted ? block({compareSlices(v, s, 0, var(j2), var(i)),
                                   ifThen(lt(slot(0), i64(0)), set(2, add(slot(2), i64(1))))})
                          : ifThen(lt(var(j2), var(i)), set(2, add(slot(2), i64(1))));
  StmtRef position =
      loop(j2, v.k, ifThen(both(eq(inv(var(j2)), var(j2)), ne(var(j2), var(i))), before));
  StmtRef copy = loop(o, v.outer,
                      loop(q, v.inner,
                           store(y, at(v, slot(2), var(o), var(q)),
                                 load(in_[0], dt, at(v, var(i), var(o), var(q))))));
  StmtRef occurrences =
      block({set(4, i64(0)),
             loop(j3, v.k, ifThen(eq(inv(var(j3)), var(i)), set(4, add(slot(4), i64(1)))))});
  StmtRef place =
      ifThen(eq(inv(var(i)), var(i)),
             block({set(2, i64(0)), position, copy, store(indices, slot(2), var(i)), occurrences,
                    store(counts, slot(2), slot(4)), set(3, add(slot(3), i64(1)))}));
  StmtRef pass2 =
      block({set(3, i64(0)), zero(y, dt, v.outer * v.k * v.inner), zero(indices, DType::I64, v.k),
             zero(counts, DType::I64, v.k), loop(i, v.k, place)});
  // Pass 3.
  const std::string i3 = fresh("i"), u = fresh("u");
  StmtRef pass3 = loop(
      i3, v.k,
      block({set(1, inv(var(i3))),
             loop(u, v.k,
                  ifThen(both(lt(var(u), slot(3)), eq(load(indices, DType::I64, var(u)), slot(1))),
                         store(inverse, var(i3), var(u))))}));
  StmtRef body = block({pass1, pass2, pass3, store(out_[4], i64(0), slot(3))});
  return alloc(s, DType::I64, 5, MemoryScope::Local, body);
}

// spans[at .. at+3] = x0, x1, y0, y1 of `box` (the index of its first coordinate), in type t:
// corners [y1, x1, y2, x2] in either order, or [x_center, y_center, width, height].
StmtRef DynamicSizeLowerer::boxSpans(const ExprRef& box, const std::string& spans, int64_t at,
                                     DType t) {
  const DType dt = n_.operand(0)->type().dtype();
  auto coord = [&](int64_t c) { return cast(load(in_[0], dt, add(box, i64(c))), t); };
  std::vector<StmtRef> body;
  auto put = [&](int64_t k, ExprRef e) { body.push_back(store(spans, i64(at + k), std::move(e))); };
  const bool centered = n_.attrBool("center_point_box");
  for (int64_t axis = 0; axis < 2; ++axis) {  // x, then y
    if (centered) {
      ExprRef half = binary(BinaryOp::Div, coord(axis + 2), constOf(2, t));
      put(2 * axis, sub(coord(axis), half));
      put(2 * axis + 1, add(coord(axis), half));
    } else {
      ExprRef u = coord(1 - axis), w = coord(3 - axis);
      put(2 * axis, select(ge(u, w), w, u));
      put(2 * axis + 1, select(ge(u, w), u, w));
    }
  }
  return block(std::move(body));
}

// The boxes in spans[0..3] and spans[4..7] overlap by more than `threshold` (IoU).
ExprRef DynamicSizeLowerer::suppresses(const std::string& spans, DType t,
                                       const ExprRef& threshold) const {
  auto sp = [&](int64_t k) { return load(spans, t, i64(k)); };
  ExprRef ix0 = maxOf(sp(0), sp(4)), ix1 = minOf(sp(1), sp(5));
  ExprRef iy0 = maxOf(sp(2), sp(6)), iy1 = minOf(sp(3), sp(7));
  ExprRef inter = mul(sub(ix1, ix0), sub(iy1, iy0));
  ExprRef areaA = mul(sub(sp(1), sp(0)), sub(sp(3), sp(2)));
  ExprRef areaB = mul(sub(sp(5), sp(4)), sub(sp(7), sp(6)));
  ExprRef uni = sub(add(areaA, areaB), inter);
  ExprRef zero = constOf(0, t);
  ExprRef overlap = both(both(gt(ix1, ix0), gt(iy1, iy0)), gt(inter, zero));
  ExprRef valid = both(both(gt(areaA, zero), gt(areaB, zero)), gt(uni, zero));
  return both(both(overlap, valid), gt(binary(BinaryOp::Div, inter, uni), threshold));
}

// Per batch and class, rounds that each take the next candidate in the order (score highest
// first, ties by lower index) after the previous round's: the best box strictly after
// (last score, last index) that passes the score threshold. It is kept unless a box kept
// before in its class overlaps it by more than the IoU threshold, until the class has
// min(max(max_per_class, 0), bound_per_class) boxes. Rows past the count are 0.
StatusOr<StmtRef> DynamicSizeLowerer::nonMaxSuppression() {
  const std::vector<int64_t> bd = n_.operand(0)->type().staticDims();
  const int64_t batches = bd[0], boxes = bd[1], classes = n_.operand(1)->type().staticDims()[1];
  const int64_t bound = n_.attrInt("bound_per_class");
  const DType st = n_.operand(1)->type().dtype(), t = computeType(st);
  const bool thresholded = n_.numOperands() > 4;
  const std::string s = local("n"), f = local("f"), spans = local("box");
  // s: 0 rows, 1 kept in class, 2 last index, 3 best index, 4 suppressed; f: 0 last score, 1 best
  auto si = [&](int64_t k) { return load(s, DType::I64, i64(k)); };
  auto seti = [&](int64_t k, ExprRef e) { return store(s, i64(k), std::move(e)); };
  auto sf = [&](int64_t k) { return load(f, t, i64(k)); };
  auto setf = [&](int64_t k, ExprRef e) { return store(f, i64(k), std::move(e)); };
  const std::string b = fresh("b"), c = fresh("c"), r = fresh("r"), j = fresh("j"), q = fresh("q");
  ExprRef limit = binary(
      BinaryOp::Min, binary(BinaryOp::Max, load(in_[2], DType::I64, i64(0)), i64(0)), i64(bound));
  ExprRef iou = cast(load(in_[3], DType::F32, i64(0)), t);
  ExprRef score = cast(
      load(in_[1], st, add(mul(add(mul(var(b), i64(classes)), var(c)), i64(boxes)), var(j))), t);
  ExprRef after = either(lt(score, sf(0)), both(eq(score, sf(0)), gt(var(j), si(2))));
  ExprRef eligible = after;
  if (thresholded)
    eligible = both(
        after, gt(cast(score, DType::F64), cast(load(in_[4], DType::F32, i64(0)), DType::F64)));
  ExprRef better = either(eq(si(3), i64(-1)), gt(score, sf(1)));
  StmtRef scan =
      loop(j, boxes, ifThen(both(eligible, better), block({seti(3, var(j)), setf(1, score)})));
  auto boxAt = [&](const ExprRef& index) {
    return mul(add(mul(var(b), i64(boxes)), index), i64(4));
  };
  ExprRef keptBox =
      load(out_[0], DType::I64, add(mul(add(sub(si(0), si(1)), var(q)), i64(3)), i64(2)));
  StmtRef check =
      ifThen(lt(var(q), si(1)), block({boxSpans(boxAt(keptBox), spans, 4, t),
                                       ifThen(suppresses(spans, t, iou), seti(4, i64(1)))}));
  StmtRef keep =
      ifThen(eq(si(4), i64(0)), block({store(out_[0], mul(si(0), i64(3)), var(b)),
                                       store(out_[0], add(mul(si(0), i64(3)), i64(1)), var(c)),
                                       store(out_[0], add(mul(si(0), i64(3)), i64(2)), si(3)),
                                       seti(0, add(si(0), i64(1))), seti(1, add(si(1), i64(1)))}));
  StmtRef take = ifThen(ge(si(3), i64(0)),
                        block({seti(2, si(3)), setf(0, sf(1)), seti(4, i64(0)),
                               boxSpans(boxAt(si(3)), spans, 0, t), loop(q, bound, check), keep}));
  StmtRef round =
      ifThen(lt(si(1), limit), block({seti(3, i64(-1)), setf(1, constOf(0, t)), scan, take}));
  const double inf = std::numeric_limits<double>::infinity();
  StmtRef perClass = block(
      {seti(1, i64(0)), seti(2, i64(-1)), setf(0, floatConst(inf, t)), loop(r, boxes, round)});
  StmtRef body =
      block({zero(out_[0], DType::I64, batches * classes * bound * 3), seti(0, i64(0)),
             loop(b, batches, loop(c, classes, perClass)), store(out_[1], i64(0), si(0))});
  body = alloc(spans, t, 8, MemoryScope::Local, body);
  body = alloc(f, t, 2, MemoryScope::Local, body);
  return alloc(s, DType::I64, 5, MemoryScope::Local, body);
}

}  // namespace

StatusOr<std::optional<StmtRef>> lowerDynamicSizeOp(const Node& n,
                                                    const std::vector<std::string>& operands,
                                                    const std::vector<std::string>& results) {
  DynamicSizeLowerer l(n, operands, results);
  // Past this many slices or boxes the quadratic loops cost too much: the reference kernel (a
  // sort) runs instead, as the library call.
  const std::vector<int64_t> dims = n.operand(0)->type().staticDims();
  StatusOr<StmtRef> s = Status::error(n.describe() + ": not an op of run-time size");
  if (n.op() == OpCode::Unique) {
    const int64_t k = hasAttr(n.attrs(), "axis") ? dims[static_cast<size_t>(n.attrInt("axis"))]
                                                 : elementCount(dims);
    if (k > kMaxSerialLength) return std::optional<StmtRef>();
    s = l.unique();
  }
  if (n.op() == OpCode::NonMaxSuppression) {
    if (dims[1] > kMaxSerialLength) return std::optional<StmtRef>();
    s = l.nonMaxSuppression();
  }
  if (!s) return s.status();
  return std::optional<StmtRef>(*s);
}

}  // namespace kiln::kernel
