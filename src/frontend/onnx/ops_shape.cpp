// Shape-changing ONNX ops: Reshape (0 and -1, symbolic dims), Flatten, Squeeze, Unsqueeze,
// Transpose, Expand, Tile, Concat, DepthToSpace and SpaceToDepth.
#include <algorithm>
#include <iterator>
#include <set>

#include "frontend/onnx/ops_common.h"

namespace kiln::onnx {

namespace {

// Resolves ONNX's reshape target: 0 copies the input extent (unless allowzero), one -1 is
// inferred from the element count. Element counts are products of dims (4*N*S), so symbols may
// merge and split as long as the counts agree.
StatusOr<Shape> resolveReshape(OpContext& c, const Shape& in,
                               const std::vector<ShapeEntry>& entries, bool allowzero) {
  int inferAt = -1;
  std::vector<Dim> target;
  for (size_t i = 0; i < entries.size(); ++i) {
    const ShapeEntry& e = entries[i];
    if (e.isSymbol()) {
      target.push_back(e.dim());
    } else if (e.value == 0 && !allowzero) {
      if (i >= in.size())
        return c.err("shape entry 0 at position " + std::to_string(i) +
                     " has no input dimension to copy");
      target.push_back(in[i]);
    } else if (e.value == -1) {
      if (inferAt >= 0) return c.err("the shape has more than one -1");
      inferAt = static_cast<int>(i);
      target.push_back(Dim(1));  // replaced below
    } else if (e.value < 0) {
      return c.err("invalid shape entry " + std::to_string(e.value));
    } else {
      target.push_back(Dim(e.value));
    }
  }
  std::optional<Dim> inCount = dimProduct(in), outCount = Dim(1);
  for (size_t i = 0; i < target.size() && outCount; ++i)
    if (static_cast<int>(i) != inferAt) outCount = *outCount * target[i];
  if (!inCount) return c.err("too many elements");
  if (!outCount) return c.err("the target shape has too many elements");
  if (inferAt < 0) {
    if (*inCount != *outCount && inCount->isStatic() && outCount->isStatic())
      return c.err("cannot reshape " + shapeStr(in) + " (" + inCount->str() + " elements) into " +
                   shapeStr(target) + " (" + outCount->str() + ")");
    if (*inCount != *outCount)
      return c.unsupported("reshaping " + shapeStr(in) + " to " + shapeStr(target) +
                           " holds the same elements only at some sizes of its symbols (give "
                           "them with --dim)");
    return Shape(target.begin(), target.end());
  }
  std::optional<Dim> rest = Dim::quotient(*inCount, *outCount);
  if (!rest && inCount->isStatic() && outCount->isStatic())
    return c.err("cannot infer -1: " + inCount->str() + " elements do not divide into " +
                 outCount->str());
  if (!rest)
    return c.unsupported("inferring -1 of " + shapeStr(target) + " from " + shapeStr(in) +
                         " divides " + inCount->str() + " by " + outCount->str() +
                         ", which is exact only at some sizes (give them with --dim)");
  target[static_cast<size_t>(inferAt)] = *rest;
  return Shape(target.begin(), target.end());
}

Status reshapeTo(OpContext& c, Value* x, const std::vector<ShapeEntry>& target, bool allowzero) {
  KILN_ASSIGN_OR_RETURN(Shape s, resolveReshape(c, x->type().dims(), target, allowzero));
  c.setOutput(0, s == x->type().dims() ? x : c.b.reshape(x, s));
  return Status::ok();
}

Status reshapeAttr(OpContext& c) {
  c.ignoreAttr("consumed_inputs");
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  std::vector<ShapeEntry> t;
  for (int64_t v : c.attrInts("shape")) t.push_back(ShapeEntry{v, {}});
  return reshapeTo(c, x, t, false);
}

Status reshape(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  KILN_ASSIGN_OR_RETURN(auto t, c.knownDims(1, "the target shape"));
  return reshapeTo(c, x, t, c.attrInt("allowzero", 0) != 0);
}

Status flatten(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  int64_t rank = x->type().rank();
  int64_t axis = c.attrInt("axis", 1);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis > rank)
    return c.err("axis is out of range for rank " + std::to_string(rank));
  const Shape& d = x->type().dims();
  auto outer = dimProduct(Shape(d.begin(), d.begin() + axis));
  auto inner = dimProduct(Shape(d.begin() + axis, d.end()));
  if (!outer || !inner)
    return c.unsupported("flattening " + x->type().str() + " needs dynamic shape arithmetic");
  c.setOutput(0, c.b.reshape(x, {*outer, *inner}));
  return Status::ok();
}

Status squeezeAxes(OpContext& c, Value* x, std::optional<std::vector<int64_t>> axes) {
  const Shape& d = x->type().dims();
  std::vector<int64_t> drop;
  if (!axes) {
    for (size_t i = 0; i < d.size(); ++i)
      if (d[i].isStatic() && d[i].value() == 1) drop.push_back(static_cast<int64_t>(i));
  } else {
    KILN_ASSIGN_OR_RETURN(drop, normAxes(*axes, x->type().rank()));
    for (int64_t a : drop)
      if (!(d[a].isStatic() && d[a].value() == 1))
        return c.err("cannot squeeze dimension " + std::to_string(a) + " of extent " + d[a].str());
  }
  c.setOutput(0, drop.empty() ? x : c.b.reshape(x, dropAxes(d, drop)));
  return Status::ok();
}

Status squeezeAttr(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  if (!c.hasAttr("axes")) return squeezeAxes(c, x, std::nullopt);
  return squeezeAxes(c, x, c.attrInts("axes"));
}

Status squeeze(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  if (!c.has(1)) return squeezeAxes(c, x, std::nullopt);
  KILN_ASSIGN_OR_RETURN(auto axes, c.knownInts(1, "the axes"));
  return squeezeAxes(c, x, axes);
}

Status unsqueezeAxes(OpContext& c, Value* x, const std::vector<int64_t>& axes) {
  int64_t outRank = x->type().rank() + static_cast<int64_t>(axes.size());
  KILN_ASSIGN_OR_RETURN(auto norm, normAxes(axes, outRank));
  c.setOutput(0, insertUnitDims(c.b, x, norm));
  return Status::ok();
}

Status unsqueezeAttr(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  return unsqueezeAxes(c, x, c.attrInts("axes"));
}

Status unsqueeze(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  KILN_ASSIGN_OR_RETURN(auto axes, c.knownInts(1, "the axes"));
  return unsqueezeAxes(c, x, axes);
}

Status transpose(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  int64_t rank = x->type().rank();
  std::vector<int64_t> perm;
  for (int64_t i = rank - 1; i >= 0; --i) perm.push_back(i);
  perm = c.attrInts("perm", perm);
  if (static_cast<int64_t>(perm.size()) != rank)
    return c.err("perm has " + std::to_string(perm.size()) + " entries for rank " +
                 std::to_string(rank));
  KILN_ASSIGN_OR_RETURN(perm, normAxes(perm, rank, "perm"));
  c.setOutput(0, c.b.transpose(x, perm));
  return Status::ok();
}

Status expand(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  KILN_ASSIGN_OR_RETURN(Shape shape, c.knownShape(1, "the target shape"));
  KILN_ASSIGN_OR_RETURN(Shape s, broadcastShapes(x->type().dims(), shape));
  c.setOutput(0, c.b.broadcastTo(x, s));
  return Status::ok();
}

// Tile: x broadcast to [r0, d0, r1, d1, ...] then merged pairwise into [r0*d0, r1*d1, ...].
Status tile(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  KILN_ASSIGN_OR_RETURN(auto reps, c.knownInts(1, "the repeats"));
  const Shape& d = x->type().dims();
  if (reps.size() != d.size())
    return c.err("repeats has " + std::to_string(reps.size()) + " entries for rank " +
                 std::to_string(d.size()));
  Shape wide, merged;
  std::vector<int64_t> dims;
  for (size_t i = 0; i < d.size(); ++i) {
    if (reps[i] < 0 || reps[i] > kMaxElements) return c.err("repeats must be extents >= 0");
    wide.push_back(Dim(reps[i]));
    wide.push_back(d[i]);
    dims.push_back(static_cast<int64_t>(2 * i + 1));
    auto m = dimProduct({Dim(reps[i]), d[i]});
    if (!m) return c.unsupported("tiling a symbolic dimension needs dynamic shape arithmetic");
    merged.push_back(*m);
  }
  Value* w = c.b.broadcastInDim(x, wide, dims);
  c.setOutput(0, c.b.reshape(w, merged));
  return Status::ok();
}

Status concat(OpContext& c) {
  std::vector<Value*> xs = c.allInputs();
  if (xs.empty()) return c.err("needs at least one input");
  for (Value* x : xs)
    if (!x) return c.err("an input is not defined");
  KILN_RETURN_IF_ERROR(sameDType(c, xs));
  int64_t rank = xs[0]->type().rank();
  KILN_ASSIGN_OR_RETURN(int64_t axis, normAxis(c.attrInt("axis", 1), rank));
  // Dims are products of symbols: N + N is 2*N, but N + 1 has no type (docs/ops.md).
  std::vector<Dim> along;
  for (Value* x : xs) along.push_back(x->type().dim(axis));
  if (xs.size() > 1 && !Dim::sum(along))
    return c.unsupported("concatenating along axis " + std::to_string(axis) + " gives " +
                         Dim::sumText(along) +
                         " entries: a size that is a sum of symbolic sizes is not supported; "
                         "give the sizes (--dim SYMBOL=SIZE or input files)");
  c.setOutput(0, xs.size() == 1 ? xs[0] : c.b.concatenate(xs, axis));
  return Status::ok();
}

// Rearranges [N, C, H, W] blocks: DepthToSpace (DCR or CRD order) and SpaceToDepth.
Status depthToSpace(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  int64_t bs = c.attrInt("blocksize", 0);
  std::string mode = c.attrString("mode", "DCR");
  if (x->type().rank() != 4) return c.err("the input must be 4-D, got " + x->type().str());
  const Shape& d = x->type().dims();
  if (bs <= 0) return c.err("blocksize must be positive");
  if (!d[1].isStatic() || d[1].value() % (bs * bs) != 0)
    return c.err("channels " + d[1].str() + " are not a multiple of blocksize^2");
  Dim ch(d[1].value() / (bs * bs));
  auto h = dimProduct({d[2], Dim(bs)}), w = dimProduct({d[3], Dim(bs)});
  if (!h || !w) return c.unsupported("symbolic spatial dimensions need dynamic shape arithmetic");
  Value* t;
  if (mode == "DCR") {
    t = c.b.transpose(c.b.reshape(x, {d[0], Dim(bs), Dim(bs), ch, d[2], d[3]}), {0, 3, 4, 1, 5, 2});
  } else if (mode == "CRD") {
    t = c.b.transpose(c.b.reshape(x, {d[0], ch, Dim(bs), Dim(bs), d[2], d[3]}), {0, 1, 4, 2, 5, 3});
  } else {
    return c.err("mode must be DCR or CRD, got '" + mode + "'");
  }
  c.setOutput(0, c.b.reshape(t, {d[0], ch, *h, *w}));
  return Status::ok();
}

Status spaceToDepth(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  int64_t bs = c.attrInt("blocksize", 0);
  if (x->type().rank() != 4) return c.err("the input must be 4-D, got " + x->type().str());
  if (bs <= 0) return c.err("blocksize must be positive");
  const Shape& d = x->type().dims();
  for (int i = 2; i < 4; ++i)
    if (!d[i].isStatic() || d[i].value() % bs != 0)
      return c.err("spatial dimension " + d[i].str() + " is not a multiple of blocksize");
  auto ch = dimProduct({d[1], Dim(bs * bs)});
  if (!ch) return c.unsupported("symbolic channels need dynamic shape arithmetic");
  Dim h(d[2].value() / bs), w(d[3].value() / bs);
  Value* t =
      c.b.transpose(c.b.reshape(x, {d[0], d[1], h, Dim(bs), w, Dim(bs)}), {0, 3, 5, 1, 2, 4});
  c.setOutput(0, c.b.reshape(t, {d[0], *ch, h, w}));
  return Status::ok();
}

}  // namespace

void addShapeOps(OpTable& t) {
  t.add("Reshape", 1, reshapeAttr);
  t.add("Reshape", 5, reshape);
  t.add("Flatten", 1, flatten);
  t.add("Squeeze", 1, squeezeAttr);
  t.add("Squeeze", 13, squeeze);
  t.add("Unsqueeze", 1, unsqueezeAttr);
  t.add("Unsqueeze", 13, unsqueeze);
  t.add("Transpose", 1, transpose);
  t.add("Expand", 8, expand);
  t.add("Tile", 6, tile);
  t.add("Concat", 1, concat);
  t.add("DepthToSpace", 1, depthToSpace);
  t.add("SpaceToDepth", 1, spaceToDepth);
}

}  // namespace kiln::onnx
