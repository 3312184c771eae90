// ONNX ops that cut and extend tensors: Slice (attribute and input forms, negative steps via
// reverse), Split, and Pad (constant, reflect and edge modes; negative pads crop).
#include <algorithm>
#include <limits>

#include "frontend/onnx/ops_common.h"

namespace kiln::onnx {

Value* sliceAxis(Builder& b, Value* x, int64_t axis, int64_t start, int64_t limit, int64_t stride) {
  if (!x) return nullptr;
  const Shape& d = x->type().dims();
  std::vector<int64_t> lo(d.size(), 0), hi, st(d.size(), 1);
  // A symbolic dim that is not cut is kept whole (the IR's full-slice form).
  for (const Dim& e : d) hi.push_back(e.isStatic() ? e.value() : kMaxElements);
  lo[static_cast<size_t>(axis)] = start;
  hi[static_cast<size_t>(axis)] = limit;
  st[static_cast<size_t>(axis)] = stride;
  return b.slice(x, lo, hi, stride == 1 ? std::vector<int64_t>{} : st);
}

namespace {

// x[:S] along `axis` of a static extent, S symbolic: the IR's leading slice (limit
// kMaxElements) with the result's extent given.
Value* slicePrefix(Builder& b, Value* x, int64_t axis, const Dim& length) {
  const Shape& d = x->type().dims();
  std::vector<int64_t> lo(d.size(), 0), hi;
  for (const Dim& e : d) hi.push_back(e.isStatic() ? e.value() : kMaxElements);
  hi[static_cast<size_t>(axis)] = kMaxElements;
  Shape out = d;
  out[static_cast<size_t>(axis)] = length;
  return b.op(OpCode::Slice, {x}, {{"start", intsAttr(lo)}, {"limit", intsAttr(hi)}},
              {x->type().withDims(out)});
}

// Slices x along `axes` with ONNX's clamping rules; a negative step reverses the axis first.
// `symbolicEnds` (empty, or one per axis) holds ends that are symbolic dims: a whole symbolic
// axis, or a prefix x[:S] of a static one.
Status sliceWith(OpContext& c, Value* x, std::vector<int64_t> starts, std::vector<int64_t> ends,
                 std::optional<std::vector<int64_t>> axesOpt, std::vector<int64_t> steps,
                 const std::vector<Dim>& symbolicEnds = {}) {
  int64_t rank = x->type().rank();
  std::vector<int64_t> axes;
  if (axesOpt) {
    KILN_ASSIGN_OR_RETURN(axes, normAxes(*axesOpt, rank));
  } else {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (starts.size() != ends.size() || starts.size() != axes.size() || steps.size() != axes.size())
    return c.err("starts, ends, axes and steps must have one length");
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = axes[i], s = starts[i], e = ends[i], st = steps[i];
    if (st == 0) return c.err("steps must not be 0");
    const Dim& dim = x->type().dim(a);
    if (i < symbolicEnds.size() && symbolicEnds[i].isSymbolic()) {
      const Dim& end = symbolicEnds[i];
      if (s != 0 || st != 1)
        return c.unsupported("a slice to symbolic end " + end.str() +
                             " must start at 0 with step 1");
      if (end == dim) continue;  // the whole axis
      if (dim.isSymbolic())
        return c.unsupported("slicing symbolic dimension " + dim.str() + " to " + end.str() +
                             " is not supported");
      x = slicePrefix(c.b, x, a, end);
      ONNX_BUILT(c, x);
      continue;
    }
    if (dim.isSymbolic()) {
      if (s == 0 && st == 1 && e >= std::numeric_limits<int32_t>::max()) continue;  // whole axis
      return c.unsupported("slicing symbolic dimension " + dim.str() + " is not supported");
    }
    int64_t d = dim.value();
    if (s < 0) s += d;
    if (e < 0) e += d;
    if (st > 0) {
      s = std::clamp<int64_t>(s, 0, d);
      e = std::clamp<int64_t>(e, 0, d);
      if (s == 0 && e == d && st == 1) continue;
      x = sliceAxis(c.b, x, a, s, std::max(s, e), st);
    } else {
      s = std::clamp<int64_t>(s, 0, d - 1);
      e = std::clamp<int64_t>(e, -1, d - 1);
      // Element i of x is element d-1-i of the reversed axis, read forward.
      int64_t rs = d - 1 - s, re = d - 1 - e;
      if (d == 0) rs = re = 0;
      x = c.b.op(OpCode::Reverse, {x}, {{"dims", intsAttr({a})}});
      x = sliceAxis(c.b, x, a, rs, std::max(rs, re), -st);
    }
    ONNX_BUILT(c, x);
  }
  c.setOutput(0, x);
  return Status::ok();
}

Status sliceAttr(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  std::optional<std::vector<int64_t>> axes;
  if (c.hasAttr("axes")) axes = c.attrInts("axes");
  return sliceWith(c, x, c.attrInts("starts"), c.attrInts("ends"), axes, {});
}

Status slice(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  KILN_ASSIGN_OR_RETURN(auto starts, c.knownInts(1, "the starts"));
  KILN_ASSIGN_OR_RETURN(auto endDims, c.knownDims(2, "the ends"));
  std::vector<int64_t> ends;
  std::vector<Dim> symbolicEnds;
  for (const ShapeEntry& e : endDims) {
    ends.push_back(e.value);
    symbolicEnds.push_back(e.isSymbol() ? e.symbolic : Dim(0));
  }
  std::optional<std::vector<int64_t>> axes;
  std::vector<int64_t> steps;
  if (c.has(3)) {
    KILN_ASSIGN_OR_RETURN(axes, c.knownInts(3, "the axes"));
  }
  if (c.has(4)) {
    KILN_ASSIGN_OR_RETURN(steps, c.knownInts(4, "the steps"));
  }
  return sliceWith(c, x, starts, ends, axes, steps, symbolicEnds);
}

Status splitBy(OpContext& c, Value* x, std::vector<int64_t> sizes) {
  int64_t rank = x->type().rank();
  KILN_ASSIGN_OR_RETURN(int64_t axis, normAxis(c.attrInt("axis", 0), rank));
  const Dim& dim = x->type().dim(axis);
  if (!dim.isStatic()) return c.unsupported("splitting symbolic dimension " + dim.str());
  int64_t d = dim.value(), n = c.numOutputs();
  if (sizes.empty()) {
    if (n == 0 || d % n != 0)
      return c.err("dimension " + std::to_string(d) + " does not split into " + std::to_string(n) +
                   " equal parts");
    sizes.assign(static_cast<size_t>(n), d / n);
  }
  if (static_cast<int64_t>(sizes.size()) != n)
    return c.err("split has " + std::to_string(sizes.size()) + " entries for " + std::to_string(n) +
                 " outputs");
  int64_t at = 0;
  for (int64_t i = 0; i < n; ++i) {
    int64_t s = sizes[static_cast<size_t>(i)];
    if (s < 0 || s > d - at) return c.err("split sizes do not fit dimension " + std::to_string(d));
    if (c.wantsOutput(static_cast<int>(i)))
      c.setOutput(static_cast<int>(i), sliceAxis(c.b, x, axis, at, at + s));
    at += s;
  }
  if (at != d)
    return c.err("split sizes add up to " + std::to_string(at) + ", not " + std::to_string(d));
  return Status::ok();
}

Status splitAttr(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  if (c.has(1)) {
    KILN_ASSIGN_OR_RETURN(auto sizes, c.knownInts(1, "the split sizes"));
    return splitBy(c, x, sizes);
  }
  return splitBy(c, x, c.attrInts("split"));
}

Status split(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  std::vector<int64_t> sizes;
  if (c.has(1)) {
    KILN_ASSIGN_OR_RETURN(sizes, c.knownInts(1, "the split sizes"));
  }
  return splitBy(c, x, sizes);
}

// Edge / reflect padding of one axis by lo and hi (>= 0) elements.
StatusOr<Value*> padAxisCopy(OpContext& c, Value* x, int64_t axis, int64_t lo, int64_t hi,
                             bool reflect) {
  const Dim& dim = x->type().dim(axis);
  if (!dim.isStatic()) return c.unsupported("padding symbolic dimension " + dim.str());
  int64_t d = dim.value();
  if (d == 0)
    return c.err("cannot " + std::string(reflect ? "reflect" : "edge") + "-pad an empty axis");
  if (reflect && (lo > d - 1 || hi > d - 1))
    return c.err("reflect padding of " + std::to_string(std::max(lo, hi)) +
                 " exceeds the axis extent " + std::to_string(d) + " minus 1");
  std::vector<Value*> parts;
  auto rev = [&](Value* v) { return c.b.op(OpCode::Reverse, {v}, {{"dims", intsAttr({axis})}}); };
  auto edge = [&](int64_t at, int64_t count) {
    Value* one = sliceAxis(c.b, x, axis, at, at + 1);
    if (!one) return one;
    Shape s = one->type().dims();
    s[static_cast<size_t>(axis)] = Dim(count);
    return c.b.broadcastTo(one, s);
  };
  if (lo > 0) parts.push_back(reflect ? rev(sliceAxis(c.b, x, axis, 1, lo + 1)) : edge(0, lo));
  parts.push_back(x);
  if (hi > 0)
    parts.push_back(reflect ? rev(sliceAxis(c.b, x, axis, d - 1 - hi, d - 1)) : edge(d - 1, hi));
  Value* r = parts.size() == 1 ? x : c.b.concatenate(parts, axis);
  ONNX_BUILT(c, r);
  return r;
}

Status padWith(OpContext& c, Value* x, std::vector<int64_t> pads, const std::string& mode,
               Value* value) {
  int64_t rank = x->type().rank();
  if (static_cast<int64_t>(pads.size()) != 2 * rank)
    return c.err("pads has " + std::to_string(pads.size()) + " entries for rank " +
                 std::to_string(rank));
  std::vector<int64_t> lo(pads.begin(), pads.begin() + rank), hi(pads.begin() + rank, pads.end());
  if (mode == "constant") {
    if (!value) value = scalarConst(c.b, x->type().dtype(), 0);
    c.setOutput(0, c.b.pad(x, value, lo, hi));
    return Status::ok();
  }
  if (mode != "reflect" && mode != "edge") return c.unsupported("pad mode '" + mode + "'");
  for (int64_t a = 0; a < rank; ++a) {
    // Negative pads crop before anything is copied.
    if (lo[a] < 0 || hi[a] < 0) {
      const Dim& dim = x->type().dim(a);
      if (!dim.isStatic()) return c.unsupported("cropping symbolic dimension " + dim.str());
      int64_t s = std::max<int64_t>(0, -lo[a]), e = dim.value() - std::max<int64_t>(0, -hi[a]);
      if (e < s) return c.err("negative pads remove more than the whole axis");
      x = sliceAxis(c.b, x, a, s, e);
      ONNX_BUILT(c, x);
    }
    if (lo[a] > 0 || hi[a] > 0) {
      KILN_ASSIGN_OR_RETURN(x, padAxisCopy(c, x, a, std::max<int64_t>(lo[a], 0),
                                           std::max<int64_t>(hi[a], 0), mode == "reflect"));
    }
  }
  c.setOutput(0, x);
  return Status::ok();
}

Status padAttr(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  std::vector<int64_t> pads = c.opset() < 2 ? c.attrInts("paddings") : c.attrInts("pads");
  std::string mode = c.attrString("mode", "constant");
  Value* v = scalarConst(c.b, x->type().dtype(), c.attrFloat("value", 0.0));
  return padWith(c, x, pads, mode, v);
}

Status pad(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  KILN_ASSIGN_OR_RETURN(auto pads, c.knownInts(1, "the pads"));
  std::string mode = c.attrString("mode", "constant");
  Value* v = c.in(2);
  if (v) {
    KILN_RETURN_IF_ERROR(sameDType(c, {x, v}));
    if (v->type().rank() != 0) v = c.b.reshape(v, {});
    ONNX_BUILT(c, v);
  }
  return padWith(c, x, pads, mode, v);
}

}  // namespace

void addSliceOps(OpTable& t) {
  t.add("Slice", 1, sliceAttr);
  t.add("Slice", 10, slice);
  t.add("Split", 1, splitAttr);
  t.add("Split", 13, split);
  t.add("Pad", 1, padAttr);
  t.add("Pad", 11, pad);
}

}  // namespace kiln::onnx
