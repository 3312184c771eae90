// Helpers shared by the type rules (internal to src/ir).
#pragma once

#include <string>
#include <vector>

#include "ir/op.h"

namespace kiln::rules {

inline Status err(std::string msg) { return Status::error(std::move(msg)); }

std::string listStr(const std::vector<int64_t>& v);
std::string dimsStr(const Shape& s);

// The declared result type i, or an error saying the op needs one.
StatusOr<TensorType> declared(const InferInput& in, size_t i = 0);

// Checks that every entry of `axes` is in [0, rank) and, when `unique`, that none repeats.
Status checkAxes(const std::vector<int64_t>& axes, int64_t rank, const std::string& what,
                 bool unique = true);
Status checkAxis(int64_t axis, int64_t rank, const std::string& what);
// A list attribute that must have `rank` entries when present; absent gives `fill`s.
StatusOr<std::vector<int64_t>> perDim(const InferInput& in, const char* name, int64_t rank,
                                      int64_t fill);

// A dimension computed from a static extent by `f`; a symbolic operand extent takes the declared
// result's extent at `resultIndex` when the program gives one, otherwise it is an error naming
// `what`.
template <typename F>
StatusOr<Dim> computeDim(const InferInput& in, const Dim& d, size_t resultIndex,
                         const std::string& what, F f);

Status requireFloat(DType t, const std::string& what);
Status requireRank(const TensorType& t, int64_t rank, const std::string& what);
Status requireSameDType(const TensorType& a, const TensorType& b, const std::string& what);

template <typename F>
StatusOr<Dim> computeDim(const InferInput& in, const Dim& d, size_t resultIndex,
                         const std::string& what, F f) {
  if (d.isStatic()) return f(d.value());
  if (!in.declared.empty() && resultIndex < static_cast<size_t>(in.declared[0].rank()))
    return in.declared[0].dim(resultIndex);
  return err(what + " needs a static extent, got " + d.str());
}

}  // namespace kiln::rules
