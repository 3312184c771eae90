// A resize's geometry: its per-dim extents and scales, ONNX's coordinate transforms and nearest
// rounding in double (the reference interpreter's), and the index map of a nearest resize that
// repeats or samples elements by whole factors, which fusion and loop lowering read as a movement
// of data like a slice's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/ir.h"
#include "support/status.h"

namespace kiln {

// One dim of a resize: input and output extents, the scale (given, or out / in).
struct ResizeDim {
  int64_t in = 0, out = 0;
  double scale = 1;
  bool scaleGiven = false;
  bool identity() const { return in == out && scale == 1.0; }
};

// The dims of a resize from `in` to `out` (static extents) with the given `scales` (empty:
// out / in), or why not (an empty input dim to fill, a scale that is not positive).
StatusOr<std::vector<ResizeDim>> resizeDims(const std::vector<int64_t>& in,
                                            const std::vector<int64_t>& out,
                                            const std::vector<double>& scales);

// ONNX Resize's coordinate transform `mode`: the source coordinate of output coordinate x. The
// output length in the formulas is scale * in (as in ONNX's reference), which is `out` unless
// scales were given.
double resizeSourceCoordinate(const std::string& mode, const ResizeDim& d, double x);

// x rounded by nearest_mode `mode` (floor, ceil, round_prefer_floor, round_prefer_ceil).
int64_t resizeNearestIndex(const std::string& mode, double x);

// The input index a nearest resize reads for output coordinate o of dim d, by its coordinate
// transform and nearest rounding mode: the source coordinate clamped to [-3, in + 2] (past that
// every tap reads the same edge element), rounded, then clamped to the input.
int64_t nearestResizeSource(const std::string& transform, const std::string& rounding,
                            const ResizeDim& d, int64_t o);

// Along one dim of a nearest resize, output coordinate o reads input index o * mul / div.
struct NearestAxis {
  int64_t mul = 1, div = 1;
};

// The per-dim index map of nearest resize `n` of static shapes when along every dim the source
// index is o (the dim kept), o / k (each element repeated k times) or o * k (every k-th
// element), checked at every output coordinate against nearestResizeSource; else none.
std::optional<std::vector<NearestAxis>> nearestIndexMap(const Node& n);

}  // namespace kiln
