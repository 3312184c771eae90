// A resize's geometry: see resize_geometry.h.
#include "ir/resize_geometry.h"

#include <algorithm>
#include <cmath>

namespace kiln {

StatusOr<std::vector<ResizeDim>> resizeDims(const std::vector<int64_t>& in,
                                            const std::vector<int64_t>& out,
                                            const std::vector<double>& scales) {
  if (!scales.empty() && scales.size() != in.size())
    return Status::error("scales must have one entry per dimension");
  std::vector<ResizeDim> dims;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == 0 && out[i] > 0)
      return Status::error("resize cannot fill dimension " + std::to_string(i) + " of extent " +
                           std::to_string(out[i]) + " from an empty input");
    const bool given = !scales.empty();
    const double scale = given ? scales[i] : (in[i] > 0 ? double(out[i]) / double(in[i]) : 1.0);
    if (!(scale > 0)) return Status::error("scales must be positive");
    dims.push_back(ResizeDim{in[i], out[i], scale, given});
  }
  return dims;
}

double resizeSourceCoordinate(const std::string& mode, const ResizeDim& d, double x) {
  const double outLen = d.scaleGiven ? d.scale * double(d.in) : double(d.out);
  if (mode == "half_pixel") return (x + 0.5) / d.scale - 0.5;
  if (mode == "pytorch_half_pixel") return outLen > 1 ? (x + 0.5) / d.scale - 0.5 : 0.0;
  if (mode == "align_corners") return outLen == 1 ? 0.0 : x * double(d.in - 1) / (outLen - 1);
  if (mode == "asymmetric") return x / d.scale;
  if (mode == "tf_half_pixel_for_nn") return (x + 0.5) / d.scale;
  // half_pixel_symmetric: half_pixel shifted so that the sampled grid is centred.
  const double adjustment = double(d.out) / outLen;
  const double offset = double(d.in) / 2 * (1 - adjustment);
  return offset + (x + 0.5) / d.scale - 0.5;
}

int64_t resizeNearestIndex(const std::string& mode, double x) {
  const double fl = std::floor(x);
  const double frac = x - fl;
  double r;
  if (mode == "floor") r = fl;
  else if (mode == "ceil") r = std::ceil(x);
  else if (frac == 0.5) r = mode == "round_prefer_ceil" ? fl + 1 : fl;
  else r = frac < 0.5 ? fl : fl + 1;
  return static_cast<int64_t>(r);
}

int64_t nearestResizeSource(const std::string& transform, const std::string& rounding,
                            const ResizeDim& d, int64_t o) {
  const double x =
      std::clamp(resizeSourceCoordinate(transform, d, double(o)), -3.0, double(d.in) + 2);
  return std::clamp<int64_t>(resizeNearestIndex(rounding, x), 0, d.in - 1);
}

std::optional<std::vector<NearestAxis>> nearestIndexMap(const Node& n) {
  if (n.op() != OpCode::Resize || n.attrEnum("mode") != "nearest") return std::nullopt;
  const TensorType &x = n.operand(0)->type(), &y = n.result()->type();
  if (!x.isStatic() || !y.isStatic()) return std::nullopt;
  StatusOr<std::vector<ResizeDim>> dims =
      resizeDims(x.staticDims(), y.staticDims(), getFloats(n.attrs(), "scales"));
  if (!dims) return std::nullopt;
  const std::string& transform = n.attrEnum("coordinate_transformation_mode");
  const std::string& rounding = n.attrEnum("nearest_mode");
  std::vector<NearestAxis> map;
  for (const ResizeDim& d : *dims) {
    NearestAxis a;
    if (d.out > 0 && !d.identity()) {
      if (d.out % d.in == 0) a.div = d.out / d.in;
      else if (d.in % d.out == 0) a.mul = d.in / d.out;
      else return std::nullopt;
      for (int64_t o = 0; o < d.out; ++o)
        if (nearestResizeSource(transform, rounding, d, o) != o * a.mul / a.div)
          return std::nullopt;
    }
    map.push_back(a);
  }
  return map;
}

}  // namespace kiln
