// Output comparison for `kiln conformance`, with the tolerances of ONNX's backend tests
// (numpy.testing.assert_allclose with rtol 1e-3, atol 1e-7 and NaN equal to NaN).
#include "conformance_compare.h"

#include <cmath>
#include <cstdio>
#include <limits>

namespace kiln::conformance {

namespace {

// The multi-index of row-major element `flat` in `dims`.
std::vector<int64_t> unflatten(int64_t flat, const std::vector<int64_t>& dims) {
  std::vector<int64_t> idx(dims.size());
  for (size_t d = dims.size(); d-- > 0;) {
    if (dims[d] == 0) continue;
    idx[d] = flat % dims[d];
    flat /= dims[d];
  }
  return idx;
}

std::string formatDouble(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

bool floatsMatch(double a, double b, double rtol, double atol) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  if (a == b) return true;  // covers equal infinities
  if (std::isinf(a) || std::isinf(b)) return false;
  return std::fabs(a - b) <= atol + rtol * std::fabs(b);
}

Comparison compareFloats(const Tensor& a, const Tensor& b, double rtol, double atol) {
  Comparison c;
  int64_t mismatches = 0, worst = -1;
  double worstErr = -1;
  for (int64_t i = 0; i < b.numElements(); ++i) {
    double x = a.getDouble(i), y = b.getDouble(i);
    bool bothNan = std::isnan(x) && std::isnan(y);
    double err = bothNan || x == y ? 0.0 : std::fabs(x - y);
    if (std::isnan(err)) err = std::numeric_limits<double>::infinity();
    if (err > c.maxAbsError) c.maxAbsError = err;
    if (floatsMatch(x, y, rtol, atol)) continue;
    ++mismatches;
    if (err > worstErr) {
      worstErr = err;
      worst = i;
    }
  }
  if (mismatches == 0) return c;
  c.ok = false;
  c.message = std::to_string(mismatches) + " of " + std::to_string(b.numElements()) +
              " elements differ; largest |error| " + formatDouble(worstErr) + " at " +
              formatDims(unflatten(worst, b.dims())) + ": got " + formatDouble(a.getDouble(worst)) +
              ", expected " + formatDouble(b.getDouble(worst));
  return c;
}

// An integer or bool element as decimal text; u64 elements above INT64_MAX print unsigned.
std::string elementText(const Tensor& t, int64_t i) {
  return t.dtype() == DType::U64 ? std::to_string(t.getUInt(i)) : std::to_string(t.getInt(i));
}

double elementDouble(const Tensor& t, int64_t i) {
  return t.dtype() == DType::U64 ? static_cast<double>(t.getUInt(i))
                                 : static_cast<double>(t.getInt(i));
}

Comparison compareExact(const Tensor& a, const Tensor& b) {
  Comparison c;
  int64_t mismatches = 0, first = -1;
  for (int64_t i = 0; i < b.numElements(); ++i) {
    int64_t x = a.getInt(i), y = b.getInt(i);  // u64: the bit patterns, equal iff the values are
    if (x == y) continue;
    double err = std::fabs(elementDouble(a, i) - elementDouble(b, i));
    if (err > c.maxAbsError) c.maxAbsError = err;
    if (mismatches++ == 0) first = i;
  }
  if (mismatches == 0) return c;
  c.ok = false;
  c.message = std::to_string(mismatches) + " of " + std::to_string(b.numElements()) +
              " elements differ; first at " + formatDims(unflatten(first, b.dims())) + ": got " +
              elementText(a, first) + ", expected " + elementText(b, first);
  return c;
}

// Strings match byte for byte.
Comparison compareStrings(const Tensor& a, const Tensor& b) {
  Comparison c;
  int64_t mismatches = 0, first = -1;
  for (int64_t i = 0; i < b.numElements(); ++i)
    if (a.str(i) != b.str(i) && mismatches++ == 0) first = i;
  if (mismatches == 0) return c;
  c.ok = false;
  c.message = std::to_string(mismatches) + " of " + std::to_string(b.numElements()) +
              " elements differ; first at " + formatDims(unflatten(first, b.dims())) + ": got '" +
              a.str(first) + "', expected '" + b.str(first) + "'";
  return c;
}

}  // namespace

std::string formatDims(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

Comparison compareTensors(const Tensor& actual, const Tensor& expected, double rtol, double atol) {
  Comparison c;
  if (actual.dtype() != expected.dtype()) {
    c.ok = false;
    c.message = "dtype " + std::string(dtypeName(actual.dtype())) + ", expected " +
                std::string(dtypeName(expected.dtype()));
    return c;
  }
  if (actual.dims() != expected.dims()) {
    c.ok = false;
    c.message = "shape " + formatDims(actual.dims()) + ", expected " + formatDims(expected.dims());
    return c;
  }
  if (isFloat(expected.dtype())) return compareFloats(actual, expected, rtol, atol);
  if (isString(expected.dtype())) return compareStrings(actual, expected);
  return compareExact(actual, expected);
}

}  // namespace kiln::conformance
