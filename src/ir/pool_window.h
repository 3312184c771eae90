// A reduce_window's per-dim attributes, absent ones filled with their defaults (stride and
// dilations 1, padding 0), for the passes and lowerings that read them.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/ir.h"

namespace kiln {

struct PoolWindow {
  std::vector<int64_t> window, strides, baseDilations, windowDilations, low, high;
  // A max or min pool without dilations: idempotent over each window's elements.
  bool undilatedMaxOrMin = false;
};

inline PoolWindow poolWindowOf(const Node& n) {
  PoolWindow w;
  w.window = n.attrInts("window_dimensions");
  auto attr = [&](const char* name, int64_t fill) {
    std::vector<int64_t> v = n.attrInts(name);
    if (v.empty()) v.assign(w.window.size(), fill);
    return v;
  };
  w.strides = attr("window_strides", 1);
  w.baseDilations = attr("base_dilations", 1);
  w.windowDilations = attr("window_dilations", 1);
  w.low = attr("padding_low", 0);
  w.high = attr("padding_high", 0);
  const std::string& kind = n.attrEnum("kind");
  w.undilatedMaxOrMin = kind == "max" || kind == "min";
  for (size_t d = 0; d < w.window.size(); ++d)
    if (w.baseDilations[d] != 1 || w.windowDilations[d] != 1) w.undilatedMaxOrMin = false;
  return w;
}

}  // namespace kiln
