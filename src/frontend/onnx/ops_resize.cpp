// Resize (opsets 10, 11 and 13) and its predecessor Upsample, lowered to the IR's resize op
// (ONNX Resize semantics: coordinate transformation, nearest rounding, cubic coefficient), and
// GridSample (opsets 16 and 20, 4-D input), lowered to the IR's grid_sample op.
#include <cmath>

#include "frontend/onnx/ops_common.h"

namespace kiln::onnx {

namespace {

// Builds resize(x) to `out` with the given attributes; `scales` (may be empty) are ONNX's
// per-dim scale factors, which the coordinate transformation uses in place of out/in.
Status emitResize(OpContext& c, Value* x, const Shape& out, const std::string& mode,
                  const std::string& ctm, const std::string& nearest,
                  const std::vector<double>& scales) {
  if (mode != "nearest" && mode != "linear" && mode != "cubic")
    return c.err("mode '" + mode + "' is not nearest, linear or cubic");
  // Every attribute is read first, so that a resize to the same shape (the identity) does not
  // leave one unread, which the importer reports as unsupported.
  AttrMap a{{"mode", enumAttr(mode)},
            {"coordinate_transformation_mode", enumAttr(ctm)},
            {"nearest_mode", enumAttr(nearest)},
            {"cubic_coeff_a", floatAttr(c.attrFloat("cubic_coeff_a", -0.75))},
            {"exclude_outside", boolAttr(c.attrInt("exclude_outside", 0) != 0)}};
  if (out == x->type().dims()) {
    bool unit = true;
    for (double s : scales) unit &= s == 1.0;
    if (unit) {
      c.setOutput(0, x);
      return Status::ok();
    }
  }
  if (!scales.empty()) a["scales"] = floatsAttr(scales);
  c.setOutput(0, c.b.op(OpCode::Resize, {x}, std::move(a), {x->type().withDims(out)}));
  return Status::ok();
}

// Output extents floor(in * scale); a symbolic extent survives only a scale of 1.
StatusOr<Shape> scaledShape(OpContext& c, Value* x, const std::vector<double>& scales) {
  if (static_cast<int64_t>(scales.size()) != x->type().rank())
    return c.err("scales has " + std::to_string(scales.size()) + " entries for rank " +
                 std::to_string(x->type().rank()));
  Shape out;
  for (size_t i = 0; i < scales.size(); ++i) {
    const Dim& d = x->type().dim(i);
    if (!(scales[i] > 0) || !std::isfinite(scales[i])) return c.err("scales must be positive");
    if (d.isSymbolic()) {
      if (scales[i] != 1.0) return c.unsupported("resizing symbolic dimension " + d.str());
      out.push_back(d);
      continue;
    }
    double e = std::floor(static_cast<double>(d.value()) * scales[i]);
    if (e > static_cast<double>(kMaxElements)) return c.err("the resized tensor is too large");
    out.push_back(Dim(static_cast<int64_t>(e)));
  }
  return out;
}

StatusOr<std::vector<double>> knownFloats(OpContext& c, int i, const std::string& what) {
  KILN_ASSIGN_OR_RETURN(Tensor t, c.knownInput(i, what));
  std::vector<double> v;
  for (int64_t j = 0; j < t.numElements(); ++j) v.push_back(t.getDouble(j));
  return v;
}

// Upsample and Resize-10: scales only, asymmetric coordinates, nearest rounds down.
Status upsampleWith(OpContext& c, Value* x, const std::vector<double>& scales) {
  std::string mode = c.attrString("mode", "nearest");
  if (mode == "bilinear") mode = "linear";
  KILN_ASSIGN_OR_RETURN(Shape out, scaledShape(c, x, scales));
  return emitResize(c, x, out, mode, "asymmetric", "floor", scales);
}

Status upsampleAttr(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  return upsampleWith(c, x, c.attrFloats("scales"));
}

Status upsampleInput(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  KILN_ASSIGN_OR_RETURN(auto scales, knownFloats(c, 1, "the scales"));
  return upsampleWith(c, x, scales);
}

Status resize(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  std::string ctm = c.attrString("coordinate_transformation_mode", "half_pixel");
  if (ctm == "tf_crop_and_resize")
    return c.unsupported("coordinate_transformation_mode 'tf_crop_and_resize' is not supported");
  c.ignoreAttr("extrapolation_value");  // used by tf_crop_and_resize only
  std::string nearest = c.attrString("nearest_mode", "round_prefer_floor");
  std::string mode = c.attrString("mode", "nearest");
  std::vector<double> scales;
  if (c.has(2)) {
    KILN_ASSIGN_OR_RETURN(scales, knownFloats(c, 2, "the scales"));
  }
  Shape out;
  if (c.has(3)) {
    if (!scales.empty()) return c.err("only one of scales and sizes may be given");
    KILN_ASSIGN_OR_RETURN(auto sizes, c.knownInts(3, "the sizes"));
    if (static_cast<int64_t>(sizes.size()) != x->type().rank())
      return c.err("sizes has " + std::to_string(sizes.size()) + " entries for rank " +
                   std::to_string(x->type().rank()));
    for (int64_t s : sizes) {
      if (s < 0) return c.err("sizes must not be negative");
      out.push_back(Dim(s));
    }
  } else if (!scales.empty()) {
    KILN_ASSIGN_OR_RETURN(out, scaledShape(c, x, scales));
  } else {
    return c.err("one of scales and sizes is required");
  }
  return emitResize(c, x, out, mode, ctm, nearest, scales);
}

// GridSample: X [N, C, H, W] sampled at grid [N, Ho, Wo, 2] gives [N, C, Ho, Wo]. Opset 16
// spells the modes bilinear/nearest/bicubic; opset 20 spells them linear/nearest/cubic and
// allows N-D inputs, of which only the 4-D case maps to grid_sample.
Status gridSampleWith(OpContext& c, const std::string& linear, const std::string& cubic) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  KILN_ASSIGN_OR_RETURN(Value * grid, c.req(1));
  std::string mode = c.attrString("mode", linear);
  if (mode == linear) mode = "bilinear";
  else if (mode == cubic) mode = "bicubic";
  else if (mode != "nearest")
    return c.err("mode '" + mode + "' is not " + linear + ", nearest or " + cubic);
  std::string padding = c.attrString("padding_mode", "zeros");
  if (padding != "zeros" && padding != "border" && padding != "reflection")
    return c.err("padding_mode '" + padding + "' is not zeros, border or reflection");
  int64_t align = c.attrInt("align_corners", 0);
  if (align != 0 && align != 1)
    return c.err("align_corners must be 0 or 1, got " + std::to_string(align));
  if (x->type().rank() != 4)
    return c.unsupported("GridSample of a rank-" + std::to_string(x->type().rank()) +
                         " input (only 4-D [N, C, H, W] is supported)");
  if (!isFloat(x->type().dtype()))
    return c.unsupported("GridSample of " + std::string(dtypeName(x->type().dtype())) +
                         " input (only float types are supported)");
  AttrMap a{{"mode", enumAttr(mode)},
            {"padding_mode", enumAttr(padding)},
            {"align_corners", boolAttr(align != 0)}};
  Value* y = c.b.op(OpCode::GridSample, {x, grid}, std::move(a));
  ONNX_BUILT(c, y);
  c.setOutput(0, y);
  return Status::ok();
}

Status gridSample16(OpContext& c) { return gridSampleWith(c, "bilinear", "bicubic"); }
Status gridSample20(OpContext& c) { return gridSampleWith(c, "linear", "cubic"); }

}  // namespace

void addResizeOps(OpTable& t) {
  t.add("Upsample", 7, upsampleAttr);
  t.add("Upsample", 9, upsampleInput);
  t.add("Resize", 10, upsampleInput);
  t.add("Resize", 11, resize);
  t.add("GridSample", 16, gridSample16);
  t.add("GridSample", 20, gridSample20);
}

}  // namespace kiln::onnx
