// Reference kernels of the ops whose results have a run-time size besides nonzero: unique and
// non_max_suppression (semantics in docs/ops.md). Each result is padded with zeros to its bound
// and the true size is a result of its own.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "interp/eval.h"
#include "interp/eval_util.h"

namespace kiln::interp {
namespace {

// x viewed as [outer, k, inner]: slice i is x[:, i, :], compared in row-major order.
struct Slices {
  const Tensor& x;
  int64_t outer = 1, k = 1, inner = 1;

  // Element e of slice i.
  int64_t at(int64_t i, int64_t e) const { return (e / inner * k + i) * inner + e % inner; }
  int64_t size() const { return outer * inner; }

  // -1, 0 or 1 as slice i is before, equal to or after slice j: lexicographic, NaN after every
  // number and equal to NaN (numpy's sort order), integers compared exactly.
  int compare(int64_t i, int64_t j) const {
    const bool fp = isFloat(x.dtype());
    for (int64_t e = 0; e < size(); ++e) {
      const int64_t a = at(i, e), b = at(j, e);
      if (fp) {
        const double u = x.getDouble(a), v = x.getDouble(b);
        const bool un = std::isnan(u), vn = std::isnan(v);
        if (un != vn) return un ? 1 : -1;
        if (!un && u != v) return u < v ? -1 : 1;
      } else {
        const int64_t u = x.getInt(a), v = x.getInt(b);
        if (u != v) return u < v ? -1 : 1;
      }
    }
    return 0;
  }
};

Slices slicesOf(const Node& n, const Tensor& x) {
  Slices s{x};
  if (!hasAttr(n.attrs(), "axis")) {
    s.k = x.numElements();
    return s;
  }
  const auto axis = static_cast<size_t>(n.attrInt("axis"));
  for (size_t d = 0; d < x.dims().size(); ++d) {
    if (d < axis) s.outer *= x.dims()[d];
    if (d > axis) s.inner *= x.dims()[d];
  }
  s.k = x.dims()[axis];
  return s;
}

// The distinct slices in order of first occurrence, or sorted; each slice's first occurrence's
// position among them; how often each occurs. Results padded with zeros past the count.
EvalResult evalUnique(const EvalContext& c) {
  const Tensor& x = c.operands[0];
  const Slices s = slicesOf(c.node, x);
  // The slices in order, equal ones by index: each run of equal slices starts with the first
  // occurrence. O(K log K) comparisons.
  std::vector<int64_t> order(static_cast<size_t>(s.k));
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return s.compare(a, b) < 0; });
  std::vector<int64_t> first(static_cast<size_t>(s.k)), uniques;
  for (size_t o = 0; o < order.size(); ++o) {
    const bool starts = o == 0 || s.compare(order[o - 1], order[o]) != 0;
    if (starts) uniques.push_back(order[o]);
    first[static_cast<size_t>(order[o])] = uniques.back();
  }
  if (!c.node.attrBool("sorted")) std::sort(uniques.begin(), uniques.end());
  std::vector<Tensor> r;
  for (size_t i = 0; i < 4; ++i) r.push_back(makeResult(c.resultTypes[i]));
  std::vector<int64_t> position(static_cast<size_t>(s.k));
  for (size_t u = 0; u < uniques.size(); ++u) {
    const int64_t i = uniques[u];
    position[static_cast<size_t>(i)] = static_cast<int64_t>(u);
    const auto ui = static_cast<int64_t>(u);
    for (int64_t e = 0; e < s.size(); ++e) {
      const int64_t to = (e / s.inner * s.k + ui) * s.inner + e % s.inner;
      if (isFloat(x.dtype())) r[0].setDouble(to, x.getDouble(s.at(i, e)));
      else r[0].setInt(to, x.getInt(s.at(i, e)));
    }
    r[1].setInt(ui, i);
  }
  for (int64_t j = 0; j < s.k; ++j) {
    const int64_t u = position[static_cast<size_t>(first[static_cast<size_t>(j)])];
    r[2].setInt(j, u);
    r[3].setInt(u, r[3].getInt(u) + 1);
  }
  Tensor count(DType::I64, {});
  count.setInt(0, static_cast<int64_t>(uniques.size()));
  r.push_back(std::move(count));
  return r;
}

// ONNX NonMaxSuppression's overlap test of boxes a and b of one batch: corners [y1, x1, y2, x2]
// in either order, or [x_center, y_center, width, height]; in the boxes' arithmetic type (f32,
// f64 for f64). Boxes that do not overlap, or of zero area, never suppress.
template <typename T>
bool suppresses(const T* a, const T* b, bool centered, T threshold) {
  auto span = [&](const T* box, int coord) {
    if (centered) {
      const T half = box[coord + 2] / T(2);
      return std::pair<T, T>{box[coord] - half, box[coord] + half};
    }
    const T u = box[coord], v = box[coord + 2];
    return u >= v ? std::pair<T, T>{v, u} : std::pair<T, T>{u, v};
  };
  // Centered boxes have x first; corner boxes y first.
  const auto [ax0, ax1] = span(a, centered ? 0 : 1);
  const auto [bx0, bx1] = span(b, centered ? 0 : 1);
  const T ix0 = std::max(ax0, bx0), ix1 = std::min(ax1, bx1);
  if (ix1 <= ix0) return false;
  const auto [ay0, ay1] = span(a, centered ? 1 : 0);
  const auto [by0, by1] = span(b, centered ? 1 : 0);
  const T iy0 = std::max(ay0, by0), iy1 = std::min(ay1, by1);
  if (iy1 <= iy0) return false;
  const T inter = (ix1 - ix0) * (iy1 - iy0);
  if (inter <= 0) return false;
  const T areaA = (ax1 - ax0) * (ay1 - ay0), areaB = (bx1 - bx0) * (by1 - by0);
  const T uni = areaA + areaB - inter;
  if (areaA <= 0 || areaB <= 0 || uni <= 0) return false;
  return inter / uni > threshold;
}

template <typename T>
EvalResult nonMaxSuppression(const EvalContext& c) {
  const Tensor &boxesT = c.operands[0], &scoresT = c.operands[1];
  const int64_t batches = boxesT.dims()[0], boxes = boxesT.dims()[1];
  const int64_t classes = scoresT.dims()[1];
  const int64_t perClass =
      std::clamp<int64_t>(c.operands[2].getInt(0), 0, c.node.attrInt("bound_per_class"));
  const T iou = static_cast<T>(c.operands[3].getDouble(0));
  const bool thresholded = c.operands.size() > 4;
  const double scoreMin = thresholded ? c.operands[4].getDouble(0) : 0;
  const bool centered = c.node.attrBool("center_point_box");
  std::vector<T> box(static_cast<size_t>(boxesT.numElements()));
  for (size_t i = 0; i < box.size(); ++i)
    box[i] = static_cast<T>(boxesT.getDouble(static_cast<int64_t>(i)));
  Tensor selected = makeResult(c.resultTypes[0]);
  int64_t count = 0;
  for (int64_t b = 0; b < batches; ++b)
    for (int64_t k = 0; k < classes; ++k) {
      // Candidates by score, highest first, ties by lower index.
      std::vector<std::pair<double, int64_t>> order;
      for (int64_t i = 0; i < boxes; ++i) {
        const double s = scoresT.getDouble((b * classes + k) * boxes + i);
        if (!thresholded || s > scoreMin) order.emplace_back(s, i);
      }
      std::stable_sort(order.begin(), order.end(),
                       [](const auto& l, const auto& r) { return l.first > r.first; });
      std::vector<int64_t> kept;
      for (size_t o = 0; o < order.size() && static_cast<int64_t>(kept.size()) < perClass; ++o) {
        const T* cand = &box[static_cast<size_t>((b * boxes + order[o].second) * 4)];
        bool keep = true;
        for (int64_t j : kept)
          keep = keep &&
                 !suppresses(cand, &box[static_cast<size_t>((b * boxes + j) * 4)], centered, iou);
        if (!keep) continue;
        kept.push_back(order[o].second);
        for (int64_t v : {b, k, order[o].second}) selected.setInt(count++, v);
      }
    }
  Tensor n(DType::I64, {});
  n.setInt(0, count / 3);
  return std::vector<Tensor>{std::move(selected), std::move(n)};
}

}  // namespace

EvalResult evalDynamicSize(const EvalContext& c) {
  switch (c.node.op()) {
    case OpCode::Unique: return evalUnique(c);
    case OpCode::NonMaxSuppression:
      if (c.operands[0].dtype() == DType::F64) return nonMaxSuppression<double>(c);
      return nonMaxSuppression<float>(c);
    default: break;
  }
  return Status::error(std::string(opName(c.node.op())) + " is not an op of run-time size");
}

}  // namespace kiln::interp
