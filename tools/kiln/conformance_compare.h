// Internal to `kiln conformance`: compares an output tensor with the expected one the way ONNX's
// backend tests do.
#pragma once

#include <string>

#include "ir/tensor.h"

namespace kiln::conformance {

struct Comparison {
  bool ok = true;
  std::string message;  // what differs, when !ok
  double maxAbsError =
      0;  // largest |actual - expected| over the elements (inf for NaN/inf mismatches)
};

// dtype and shape must match. Floats pass when |a - b| <= atol + rtol * |b| (b expected), NaN
// equals NaN and infinities must match exactly; integers, bools and strings must be equal.
Comparison compareTensors(const Tensor& actual, const Tensor& expected, double rtol, double atol);

// "[1,2,3]": a shape or a multi-index.
std::string formatDims(const std::vector<int64_t>& dims);

}  // namespace kiln::conformance
