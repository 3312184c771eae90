// Type rules of leaves, elementwise ops and data movement (see docs/ops.md).
#include "ir/shape_rules.h"

#include <algorithm>
#include <cstdlib>

#include "ir/shape_rules_util.h"

namespace kiln {

using Types = StatusOr<std::vector<TensorType>>;
using namespace rules;

namespace rules {

std::string listStr(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

std::string dimsStr(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + s[i].str();
  return r + "]";
}

StatusOr<TensorType> declared(const InferInput& in, size_t i) {
  if (in.declared.size() <= i) return err("needs its result type to be given");
  return in.declared[i];
}

Status checkAxis(int64_t axis, int64_t rank, const std::string& what) {
  if (axis < 0 || axis >= rank)
    return err(what + " " + std::to_string(axis) + " is out of range for rank " +
               std::to_string(rank));
  return Status::ok();
}

Status checkAxes(const std::vector<int64_t>& axes, int64_t rank, const std::string& what,
                 bool unique) {
  std::vector<bool> seen(static_cast<size_t>(std::max<int64_t>(rank, 0)), false);
  for (int64_t a : axes) {
    KILN_RETURN_IF_ERROR(checkAxis(a, rank, what));
    if (unique && seen[a]) return err(what + " " + listStr(axes) + " repeats " + std::to_string(a));
    seen[a] = true;
  }
  return Status::ok();
}

StatusOr<std::vector<int64_t>> perDim(const InferInput& in, const char* name, int64_t rank,
                                      int64_t fill) {
  auto it = in.attrs.find(name);
  if (it == in.attrs.end()) return std::vector<int64_t>(rank, fill);
  const auto& v = std::get<4>(it->second);
  if (static_cast<int64_t>(v.size()) != rank)
    return err(std::string(name) + " " + listStr(v) + " must have " + std::to_string(rank) +
               " entries");
  return v;
}

Status requireFloat(DType t, const std::string& what) {
  if (!isFloat(t)) return err(what + " must be a float type, got " + std::string(dtypeName(t)));
  return Status::ok();
}

Status requireRank(const TensorType& t, int64_t rank, const std::string& what) {
  if (t.rank() != rank)
    return err(what + " must have rank " + std::to_string(rank) + ", got " + t.str());
  return Status::ok();
}

Status requireSameDType(const TensorType& a, const TensorType& b, const std::string& what) {
  if (a.dtype() != b.dtype())
    return err(what + " must have one dtype, got " + a.str() + " and " + b.str());
  return Status::ok();
}

}  // namespace rules

namespace {

// Which dtypes an elementwise op accepts.
enum class Accepts { Any, Numeric, Float, Integer, BoolOrInteger };

Accepts accepts(OpCode op) {
  switch (op) {
    case OpCode::Abs:
    case OpCode::Neg:
    case OpCode::Sign:
    case OpCode::Add:
    case OpCode::Sub:
    case OpCode::Mul:
    case OpCode::Div:
    case OpCode::Rem:
    case OpCode::Pow: return Accepts::Numeric;
    case OpCode::Not:
    case OpCode::And:
    case OpCode::Or:
    case OpCode::Xor: return Accepts::BoolOrInteger;
    case OpCode::ShiftLeft:
    case OpCode::ShiftRightArithmetic:
    case OpCode::ShiftRightLogical: return Accepts::Integer;
    case OpCode::Max:
    case OpCode::Min:
    case OpCode::Compare: return Accepts::Any;
    default: return Accepts::Float;
  }
}

Status checkAccepts(OpCode op, DType t) {
  bool ok = true;
  const char* want = "";
  switch (accepts(op)) {
    case Accepts::Any: break;
    case Accepts::Numeric:
      ok = isNumeric(t);
      want = "a numeric type";
      break;
    case Accepts::Float:
      ok = isFloat(t);
      want = "a float type";
      break;
    case Accepts::Integer:
      ok = isInteger(t);
      want = "an integer type";
      break;
    case Accepts::BoolOrInteger:
      ok = !isFloat(t);
      want = "bool or an integer type";
      break;
  }
  if (!ok)
    return err("operand must be " + std::string(want) + ", got " + std::string(dtypeName(t)));
  return Status::ok();
}

bool resultIsBool(OpCode op) {
  return op == OpCode::Compare || op == OpCode::IsFinite || op == OpCode::IsInf ||
         op == OpCode::IsNan;
}

}  // namespace

Types inferConstant(const InferInput& in) {
  const auto& data = std::get<8>(in.attrs.at("value"));
  if (data.held) {
    if (in.declared.size() != 1) return err("a held constant needs its result type");
    return std::vector<TensorType>{in.declared[0]};
  }
  if (!data.tensor.defined()) return err("has no data");
  TensorType t = data.tensor.type();
  if (!in.declared.empty() && in.declared[0] != t)
    return err("value is " + t.str() + " but the result type is " + in.declared[0].str());
  return std::vector<TensorType>{t};
}

Types inferDeclared(const InferInput& in) {
  KILN_ASSIGN_OR_RETURN(TensorType t, declared(in));
  return std::vector<TensorType>{t};
}

Types inferIota(const InferInput& in) {
  KILN_ASSIGN_OR_RETURN(TensorType t, declared(in));
  if (!isNumeric(t.dtype())) return err("result must be numeric, got " + t.str());
  KILN_RETURN_IF_ERROR(checkAxis(std::get<0>(in.attrs.at("dimension")), t.rank(), "dimension"));
  return std::vector<TensorType>{t};
}

Types inferUnary(const InferInput& in) {
  const TensorType& x = in.operands[0];
  KILN_RETURN_IF_ERROR(checkAccepts(in.op, x.dtype()));
  return std::vector<TensorType>{resultIsBool(in.op) ? x.withDType(DType::Bool) : x};
}

Types inferConvert(const InferInput& in) {
  KILN_ASSIGN_OR_RETURN(TensorType t, declared(in));
  if (t.dims() != in.operands[0].dims())
    return err("result shape " + dimsStr(t.dims()) + " differs from operand shape " +
               dimsStr(in.operands[0].dims()));
  return std::vector<TensorType>{t};
}

Types inferBinary(const InferInput& in) {
  const TensorType& a = in.operands[0];
  const TensorType& b = in.operands[1];
  if (a != b) return err("operands must have one type, got " + a.str() + " and " + b.str());
  KILN_RETURN_IF_ERROR(checkAccepts(in.op, a.dtype()));
  return std::vector<TensorType>{resultIsBool(in.op) ? a.withDType(DType::Bool) : a};
}

Types inferSelect(const InferInput& in) {
  const TensorType& p = in.operands[0];
  const TensorType& t = in.operands[1];
  const TensorType& f = in.operands[2];
  if (p.dtype() != DType::Bool) return err("predicate must be bool, got " + p.str());
  if (t != f) return err("branches must have one type, got " + t.str() + " and " + f.str());
  if (p.rank() != 0 && p.dims() != t.dims())
    return err("predicate " + p.str() + " must be rank 0 or match " + t.str());
  return std::vector<TensorType>{t};
}

Types inferClamp(const InferInput& in) {
  const TensorType& x = in.operands[1];
  for (size_t i : {size_t(0), size_t(2)}) {
    const TensorType& b = in.operands[i];
    const char* which = i == 0 ? "min" : "max";
    if (b.dtype() != x.dtype() || (b.rank() != 0 && b.dims() != x.dims()))
      return err(std::string(which) + " " + b.str() + " must be rank 0 or match " + x.str());
  }
  if (!isNumeric(x.dtype())) return err("operand must be numeric, got " + x.str());
  return std::vector<TensorType>{x};
}

Types inferBroadcastInDim(const InferInput& in) {
  KILN_ASSIGN_OR_RETURN(TensorType r, declared(in));
  const TensorType& x = in.operands[0];
  const auto& dims = std::get<4>(in.attrs.at("dims"));
  if (r.dtype() != x.dtype()) return err("result dtype differs: " + x.str() + " to " + r.str());
  if (static_cast<int64_t>(dims.size()) != x.rank())
    return err("dims " + listStr(dims) + " must have one entry per operand dimension of " +
               x.str());
  KILN_RETURN_IF_ERROR(checkAxes(dims, r.rank(), "dims"));
  for (size_t i = 0; i < dims.size(); ++i) {
    const Dim& from = x.dim(i);
    const Dim& to = r.dim(dims[i]);
    if (from != to && !(from.isStatic() && from.value() == 1))
      return err("operand dimension " + std::to_string(i) + " (" + from.str() +
                 ") cannot broadcast to result dimension " + std::to_string(dims[i]) + " (" +
                 to.str() + ") of " + r.str());
  }
  return std::vector<TensorType>{r};
}

Types inferReshape(const InferInput& in) {
  KILN_ASSIGN_OR_RETURN(TensorType r, declared(in));
  const TensorType& x = in.operands[0];
  if (r.dtype() != x.dtype()) return err("result dtype differs: " + x.str() + " to " + r.str());
  auto a = x.numElements(), b = r.numElements();
  if (a && b && *a != *b)
    return err("cannot reshape " + x.str() + " (" + std::to_string(*a) + " elements) to " +
               r.str() + " (" + std::to_string(*b) + " elements)");
  if (a.has_value() != b.has_value()) {
    // One side symbolic: the symbols must be the same multiset for the reshape to be checkable.
    return err("cannot reshape " + x.str() + " to " + r.str() +
               ": element counts are not comparable (static on one side only)");
  }
  return std::vector<TensorType>{r};
}

Types inferTranspose(const InferInput& in) {
  const TensorType& x = in.operands[0];
  const auto& perm = std::get<4>(in.attrs.at("permutation"));
  if (static_cast<int64_t>(perm.size()) != x.rank())
    return err("permutation " + listStr(perm) + " must have " + std::to_string(x.rank()) +
               " entries for " + x.str());
  KILN_RETURN_IF_ERROR(checkAxes(perm, x.rank(), "permutation"));
  Shape out;
  for (int64_t p : perm) out.push_back(x.dim(p));
  return std::vector<TensorType>{x.withDims(std::move(out))};
}

Types inferSlice(const InferInput& in) {
  const TensorType& x = in.operands[0];
  int64_t r = x.rank();
  const auto& start = std::get<4>(in.attrs.at("start"));
  const auto& limit = std::get<4>(in.attrs.at("limit"));
  if (static_cast<int64_t>(start.size()) != r || static_cast<int64_t>(limit.size()) != r)
    return err("start and limit must have " + std::to_string(r) + " entries for " + x.str());
  KILN_ASSIGN_OR_RETURN(auto stride, perDim(in, "stride", r, 1));
  Shape out;
  for (int64_t i = 0; i < r; ++i) {
    if (stride[i] < 1) return err("stride " + listStr(stride) + " must be positive");
    if (start[i] < 0 || start[i] > limit[i])
      return err("dimension " + std::to_string(i) + ": need 0 <= start <= limit, got start " +
                 std::to_string(start[i]) + ", limit " + std::to_string(limit[i]));
    const Dim& d = x.dim(i);
    // Limit kMaxElements (start 0, stride 1) takes as many leading elements as the result has:
    // a whole symbolic dimension, or a prefix of symbolic length S of a static one (x[:S]; the
    // compile checks that S's range fits, a run that S fits).
    bool leading = start[i] == 0 && stride[i] == 1 && limit[i] == kMaxElements;
    if (leading && d.isStatic() && in.declared.size() == 1 && in.declared[0].rank() == r) {
      const Dim& e = in.declared[0].dim(i);
      if (e.isSymbolic() || e.value() <= d.value()) {
        out.push_back(e);
        continue;
      }
    }
    if (d.isSymbolic()) {
      if (leading) {
        out.push_back(d);
        continue;
      }
      return err("dimension " + std::to_string(i) + " (" + d.str() +
                 ") is symbolic; only a full slice (start 0, limit " +
                 std::to_string(kMaxElements) + ", stride 1) is allowed");
    }
    if (limit[i] > d.value())
      return err("dimension " + std::to_string(i) + ": limit " + std::to_string(limit[i]) +
                 " exceeds extent " + d.str());
    out.push_back(Dim((limit[i] - start[i] + stride[i] - 1) / stride[i]));
  }
  return std::vector<TensorType>{x.withDims(std::move(out))};
}

namespace {

Status checkStartIndices(const InferInput& in, size_t first, int64_t rank) {
  if (static_cast<int64_t>(in.operands.size() - first) != rank)
    return err("needs " + std::to_string(rank) + " start indices, got " +
               std::to_string(in.operands.size() - first));
  for (size_t i = first; i < in.operands.size(); ++i) {
    const TensorType& s = in.operands[i];
    if (s.rank() != 0 || !isInteger(s.dtype()))
      return err("start index " + std::to_string(i - first) + " must be an integer scalar, got " +
                 s.str());
  }
  return Status::ok();
}

}  // namespace

Types inferDynamicSlice(const InferInput& in) {
  const TensorType& x = in.operands[0];
  KILN_RETURN_IF_ERROR(checkStartIndices(in, 1, x.rank()));
  const auto& sizes = std::get<4>(in.attrs.at("sizes"));
  if (static_cast<int64_t>(sizes.size()) != x.rank())
    return err("sizes " + listStr(sizes) + " must have " + std::to_string(x.rank()) + " entries");
  Shape out;
  for (int64_t i = 0; i < x.rank(); ++i) {
    const Dim& d = x.dim(i);
    if (sizes[i] < 0 || (d.isStatic() && sizes[i] > d.value()))
      return err("size " + std::to_string(sizes[i]) + " does not fit dimension " +
                 std::to_string(i) + " (" + d.str() + ")");
    out.push_back(Dim(sizes[i]));
  }
  return std::vector<TensorType>{x.withDims(std::move(out))};
}

Types inferDynamicUpdateSlice(const InferInput& in) {
  const TensorType& x = in.operands[0];
  const TensorType& u = in.operands[1];
  KILN_RETURN_IF_ERROR(requireSameDType(x, u, "operand and update"));
  if (u.rank() != x.rank()) return err("update " + u.str() + " must have the rank of " + x.str());
  KILN_RETURN_IF_ERROR(checkStartIndices(in, 2, x.rank()));
  for (int64_t i = 0; i < x.rank(); ++i) {
    const Dim& d = x.dim(i);
    const Dim& e = u.dim(i);
    if (d.isStatic() && e.isStatic() && e.value() > d.value())
      return err("update " + u.str() + " does not fit in " + x.str());
    if (d.isStatic() != e.isStatic() && e.isSymbolic())
      return err("update " + u.str() + " has a symbolic extent where " + x.str() + " is static");
  }
  return std::vector<TensorType>{x};
}

Types inferConcatenate(const InferInput& in) {
  const TensorType& first = in.operands[0];
  int64_t dim = std::get<0>(in.attrs.at("dimension"));
  KILN_RETURN_IF_ERROR(checkAxis(dim, first.rank(), "dimension"));
  Shape out = first.dims();
  std::vector<Dim> along;
  for (const TensorType& t : in.operands) {
    if (t.dtype() != first.dtype() || t.rank() != first.rank())
      return err("operands must share dtype and rank, got " + first.str() + " and " + t.str());
    for (int64_t i = 0; i < t.rank(); ++i)
      if (i != dim && t.dim(i) != first.dim(i))
        return err("operands differ outside dimension " + std::to_string(dim) + ": " + first.str() +
                   " and " + t.str());
    along.push_back(t.dim(dim));
  }
  const bool symbolic =
      std::any_of(along.begin(), along.end(), [](const Dim& d) { return d.isSymbolic(); });
  std::optional<Dim> sum = Dim::sum(along);
  if (symbolic && !in.declared.empty()) {
    KILN_ASSIGN_OR_RETURN(TensorType r, declared(in));
    if (r.rank() != first.rank()) return err("result rank differs from operands");
    out[dim] = r.dim(dim);
  } else if (!sum) {
    return err("the operands' extents along dimension " + std::to_string(dim) + " add up to " +
               Dim::sumText(along) + ", which is not a product of symbols: give the result type");
  } else {
    out[dim] = *sum;
  }
  return std::vector<TensorType>{first.withDims(std::move(out))};
}

Types inferPad(const InferInput& in) {
  const TensorType& x = in.operands[0];
  const TensorType& v = in.operands[1];
  if (v.rank() != 0 || v.dtype() != x.dtype())
    return err("padding value must be a rank-0 " + std::string(dtypeName(x.dtype())) + ", got " +
               v.str());
  int64_t r = x.rank();
  KILN_ASSIGN_OR_RETURN(auto low, perDim(in, "low", r, 0));
  KILN_ASSIGN_OR_RETURN(auto high, perDim(in, "high", r, 0));
  KILN_ASSIGN_OR_RETURN(auto interior, perDim(in, "interior", r, 0));
  Shape out;
  for (int64_t i = 0; i < r; ++i) {
    if (interior[i] < 0 || interior[i] > (int64_t(1) << 20))
      return err("interior " + listStr(interior) + " must be in [0, 2^20]");
    if (std::abs(low[i]) > kMaxElements || std::abs(high[i]) > kMaxElements)
      return err("padding " + listStr(low) + ", " + listStr(high) + " is out of range");
    const Dim& d = x.dim(i);
    if (d.isSymbolic()) {
      if (low[i] == 0 && high[i] == 0 && interior[i] == 0) {
        out.push_back(d);
        continue;
      }
      return err("dimension " + std::to_string(i) + " (" + d.str() +
                 ") is symbolic and cannot be padded");
    }
    int64_t n = d.value();
    int64_t e = low[i] + high[i] + (n > 0 ? n + (n - 1) * interior[i] : 0);
    if (e < 0)
      return err("padding makes dimension " + std::to_string(i) + " negative (" +
                 std::to_string(e) + ")");
    out.push_back(Dim(e));
  }
  return std::vector<TensorType>{x.withDims(std::move(out))};
}

Types inferReverse(const InferInput& in) {
  const TensorType& x = in.operands[0];
  KILN_RETURN_IF_ERROR(checkAxes(std::get<4>(in.attrs.at("dims")), x.rank(), "dims"));
  return std::vector<TensorType>{x};
}

}  // namespace kiln
