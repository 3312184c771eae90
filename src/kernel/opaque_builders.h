// The expression builders and per-op helpers of the opaque lowerings (lower_opaque.cpp), in
// the reference kernels' terms: short arithmetic builders, clamps, the dtype conversions the
// reference makes, resize's and grid_sample's coordinate and tap formulas.
#pragma once

#include <algorithm>
#include <array>
#include <limits>
#include <string>
#include <vector>

#include "ir/resize_geometry.h"
#include "kernel/kernel_ir.h"

namespace kiln::kernel::opaque {

using Index = std::vector<ExprRef>;

inline bool contains(const std::vector<int64_t>& v, int64_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// Short builders, so that the formulas below read like the reference kernels' C++.
inline ExprRef i64(int64_t v) { return intConst(v); }
inline ExprRef f64(double v) { return floatConst(v, DType::F64); }
inline ExprRef add(ExprRef a, ExprRef b) {
  return binary(BinaryOp::Add, std::move(a), std::move(b));
}
inline ExprRef sub(ExprRef a, ExprRef b) {
  return binary(BinaryOp::Sub, std::move(a), std::move(b));
}
inline ExprRef mul(ExprRef a, ExprRef b) {
  return binary(BinaryOp::Mul, std::move(a), std::move(b));
}
inline ExprRef div(ExprRef a, ExprRef b) {
  return binary(BinaryOp::Div, std::move(a), std::move(b));
}
inline ExprRef lt(ExprRef a, ExprRef b) { return binary(BinaryOp::Lt, std::move(a), std::move(b)); }
inline ExprRef gt(ExprRef a, ExprRef b) { return binary(BinaryOp::Gt, std::move(a), std::move(b)); }
inline ExprRef le(ExprRef a, ExprRef b) { return binary(BinaryOp::Le, std::move(a), std::move(b)); }
inline ExprRef ge(ExprRef a, ExprRef b) { return binary(BinaryOp::Ge, std::move(a), std::move(b)); }
inline ExprRef eq(ExprRef a, ExprRef b) { return binary(BinaryOp::Eq, std::move(a), std::move(b)); }
inline ExprRef both(ExprRef a, ExprRef b) {
  return binary(BinaryOp::And, std::move(a), std::move(b));
}
inline ExprRef either(ExprRef a, ExprRef b) {
  return binary(BinaryOp::Or, std::move(a), std::move(b));
}
inline ExprRef negate(ExprRef a) { return unary(UnaryOp::Not, std::move(a)); }
inline ExprRef isNan(ExprRef a) { return unary(UnaryOp::IsNan, std::move(a)); }
inline ExprRef floorOf(ExprRef a) { return unary(UnaryOp::Floor, std::move(a)); }
inline ExprRef toF64(ExprRef a) { return cast(std::move(a), DType::F64); }
inline ExprRef toI64(ExprRef a) { return cast(std::move(a), DType::I64); }  // truncates, saturates

// std::clamp(v, lo, hi) of a double: NaN passes through.
inline ExprRef clampF(const ExprRef& v, double lo, double hi) {
  return select(lt(v, f64(lo)), f64(lo), select(lt(f64(hi), v), f64(hi), v));
}
// std::clamp(i, lo, hi) of an index.
inline ExprRef clampI(const ExprRef& i, int64_t lo, int64_t hi) {
  return binary(BinaryOp::Min, binary(BinaryOp::Max, i, i64(lo)), i64(hi));
}

// The reference's element arithmetic type: f32 for f16/bf16, the dtype otherwise.
inline DType computeType(DType t) { return t == DType::F16 || t == DType::BF16 ? DType::F32 : t; }

// An f64 result into dtype `t` as Tensor::setDouble stores it (f16/bf16 through f32).
inline ExprRef fromF64(const ExprRef& v, DType t) {
  return t == DType::F16 || t == DType::BF16 ? cast(cast(v, DType::F32), t) : cast(v, t);
}

// ONNX's cubic convolution weights of the taps at offsets -1, 0, 1, 2 from floor(x), where
// r = x - floor(x) (interp's cubicWeights).
inline std::array<ExprRef, 4> cubicWeights(const ExprRef& r, double a) {
  auto far = [a](const ExprRef& t) {  // 1 < t < 2: ((a t - 5a) t + 8a) t - 4a
    return sub(mul(add(mul(sub(mul(f64(a), t), f64(5 * a)), t), f64(8 * a)), t), f64(4 * a));
  };
  auto near = [a](const ExprRef& t) {  // t <= 1: ((a + 2) t - (a + 3)) t t + 1
    return add(mul(mul(sub(mul(f64(a + 2), t), f64(a + 3)), t), t), f64(1));
  };
  return {far(add(r, f64(1))), near(r), near(sub(f64(1), r)), far(sub(f64(2), r))};
}

// The scatter combiner (interp's combine) of the current element and an update, as stored:
// integers wrap; float max/min propagate NaN (the current value's first) and keep the current
// value on a tie; bool add/max are or, mul/min are and.
inline ExprRef combine(const std::string& kind, DType dt, const ExprRef& cur, const ExprRef& upd) {
  if (kind == "none") return upd;
  if (dt == DType::Bool)
    return binary(kind == "add" || kind == "max" ? BinaryOp::Or : BinaryOp::And, cur, upd);
  const DType ct = computeType(dt);
  ExprRef a = cast(cur, ct), b = cast(upd, ct), r;
  if (kind == "add") r = add(a, b);
  else if (kind == "mul") r = mul(a, b);
  else if (!isFloat(dt)) r = binary(kind == "max" ? BinaryOp::Max : BinaryOp::Min, a, b);
  else {
    ExprRef pick = kind == "max" ? select(lt(a, b), b, a) : select(lt(b, a), b, a);
    r = select(isNan(a), a, select(isNan(b), b, pick));
  }
  return cast(r, dt);
}

// ONNX Resize's coordinate transform (resizeSourceCoordinate) of output coordinate x (f64).
inline ExprRef sourceCoordinate(const std::string& mode, const ResizeDim& d, const ExprRef& x) {
  const double outLen = d.scaleGiven ? d.scale * double(d.in) : double(d.out);
  ExprRef halfPixel = sub(div(add(x, f64(0.5)), f64(d.scale)), f64(0.5));
  if (mode == "half_pixel") return halfPixel;
  if (mode == "pytorch_half_pixel") return outLen > 1 ? halfPixel : f64(0.0);
  if (mode == "align_corners")
    return outLen == 1 ? f64(0.0) : div(mul(x, f64(double(d.in - 1))), f64(outLen - 1));
  if (mode == "asymmetric") return div(x, f64(d.scale));
  if (mode == "tf_half_pixel_for_nn") return div(add(x, f64(0.5)), f64(d.scale));
  // half_pixel_symmetric
  const double adjustment = double(d.out) / outLen;
  const double offset = double(d.in) / 2 * (1 - adjustment);
  return sub(add(f64(offset), div(add(x, f64(0.5)), f64(d.scale))), f64(0.5));
}

// resizeNearestIndex: x rounded by `mode` (ties by the round_prefer_* mode), as an index.
inline ExprRef nearestIndex(const std::string& mode, const ExprRef& x) {
  if (mode == "floor") return toI64(floorOf(x));
  if (mode == "ceil") return toI64(unary(UnaryOp::Ceil, x));
  ExprRef fl = floorOf(x), up = add(floorOf(x), f64(1));
  ExprRef frac = sub(x, fl);
  ExprRef onTie = mode == "round_prefer_ceil" ? up : fl;
  return toI64(select(eq(frac, f64(0.5)), onTie, select(lt(frac, f64(0.5)), fl, up)));
}

// Round half to even the way interp's roundHalfEven does (floor, fraction, fmod).
inline ExprRef roundHalfEven(const ExprRef& x) {
  ExprRef fl = floorOf(x), up = add(floorOf(x), f64(1));
  ExprRef frac = sub(x, fl);
  ExprRef even = eq(binary(BinaryOp::Rem, fl, f64(2)), f64(0));
  return select(gt(frac, f64(0.5)), up, select(lt(frac, f64(0.5)), fl, select(even, fl, up)));
}

// interp's gsReflect: x reflected into [lo, hi] by the near border, repeatedly.
inline ExprRef reflectInto(const ExprRef& x, double lo, double hi) {
  const double range = hi - lo;
  ExprRef inside = both(ge(x, f64(lo)), le(x, f64(hi)));
  if (!(range > 0)) return select(inside, x, f64(lo));
  ExprRef below = lt(x, f64(lo));
  ExprRef dx = select(below, sub(f64(lo), x), sub(x, f64(hi)));
  ExprRef n = floorOf(div(dx, f64(range)));
  ExprRef r = sub(dx, mul(n, f64(range)));
  ExprRef even = eq(binary(BinaryOp::Rem, n, f64(2)), f64(0));
  ExprRef lor = add(f64(lo), r), hir = sub(f64(hi), r);
  ExprRef y = select(below, select(even, lor, hir), select(even, hir, lor));
  return select(inside, x, clampF(y, lo, hi));
}

// The in-range interval of source coordinates along one grid_sample axis.
struct GridAxis {
  int64_t extent = 0;
  double lo = 0, hi = 0;
};

// grid_sample's per-axis steps, by its mode, padding mode and align_corners; `coord` is the
// scratch of the point's two source coordinates.
struct GridSampling {
  std::string mode, coord;
  bool alignCorners = false, border = false, reflect = false;
  int64_t taps = 1;

  // coord[slot] = the source coordinate of normalised coordinate g along `a`, after the
  // padding mode, clamped to [-3, extent + 2] (past that every tap is outside; the reference
  // clamps too). One store per step keeps the expressions small.
  void source(const ExprRef& g, int64_t slot, const GridAxis& a, std::vector<StmtRef>& body) const {
    ExprRef v = load(coord, DType::F64, i64(slot));
    auto set = [&](ExprRef e) { body.push_back(store(coord, i64(slot), std::move(e))); };
    set(alignCorners ? mul(div(add(g, f64(1)), f64(2)), f64(double(a.extent - 1)))
                     : div(sub(mul(add(g, f64(1)), f64(double(a.extent))), f64(1)), f64(2)));
    if (mode == "nearest") set(roundHalfEven(v));
    ExprRef outside = either(lt(v, f64(a.lo)), gt(v, f64(a.hi)));
    if (border) set(select(outside, clampF(v, 0.0, double(a.extent - 1)), v));
    if (reflect)
      set(select(outside,
                 select(unary(UnaryOp::IsInf, v), f64(std::numeric_limits<double>::quiet_NaN()),
                        reflectInto(v, a.lo, a.hi)),
                 v));
    set(clampF(v, -3.0, double(a.extent) + 2));
  }

  // The index a tap at integer position i reads: clamped (border), reflected (reflection),
  // or -1 for a zero outside the input (zeros).
  ExprRef tapIndex(const ExprRef& i, const GridAxis& a) const {
    if (border) return clampI(i, 0, a.extent - 1);
    if (reflect) return clampI(toI64(reflectInto(toF64(i), a.lo, a.hi)), 0, a.extent - 1);
    return select(both(ge(i, i64(0)), lt(i, i64(a.extent))), i, i64(-1));
  }

  // Taps (into `idx`) and weights (into `w`) of the coordinate in coord[slot] along `a`.
  void weights(int64_t slot, const GridAxis& a, const std::string& w, const std::string& idx,
               std::vector<StmtRef>& body) const {
    ExprRef v = load(coord, DType::F64, i64(slot));
    ExprRef r = sub(v, floorOf(v)), first = toI64(floorOf(v));
    std::vector<ExprRef> ws = {f64(1)};
    if (taps == 2) ws = {sub(f64(1), r), r};
    if (taps == 4) {
      auto cw = cubicWeights(r, -0.75);
      ws.assign(cw.begin(), cw.end());
      first = sub(first, i64(1));
    }
    for (int64_t k = 0; k < taps; ++k) {
      body.push_back(store(w, i64(k), ws[static_cast<size_t>(k)]));
      body.push_back(store(idx, i64(k), tapIndex(add(first, i64(k)), a)));
    }
  }
};

}  // namespace kiln::kernel::opaque
