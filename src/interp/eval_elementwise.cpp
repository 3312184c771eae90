// Reference kernels of the elementwise ops: unary math and logic, binary arithmetic, logic,
// shifts and comparisons, select, clamp, convert and iota.
//
// Each kernel is a template over the element dtype (see eval_util.h). Integer arithmetic wraps
// (it is done in the unsigned type of the same width), integer division by zero and shifts out
// of range have the defined results of docs/ops.md, and f16/bf16 compute in float and round to
// nearest even on store. f32 math runs in double and is rounded once on store.
#include <bit>
#include <cmath>
#include <limits>
#include <string>

#include "interp/eval.h"
#include "interp/eval_util.h"

namespace kiln::interp {
namespace {

// The type float math runs in: f16/bf16 in float (as the semantics ask), f32/f64 in double.
template <DType D>
using MathT = std::conditional_t<D == DType::F16 || D == DType::BF16, float, double>;

constexpr bool isFloatD(DType d) {
  return d == DType::F16 || d == DType::BF16 || d == DType::F32 || d == DType::F64;
}
constexpr bool isIntD(DType d) { return !isFloatD(d) && d != DType::Bool; }

Status unsupported(OpCode op, DType t) {
  return Status::error(std::string(opName(op)) + " is not defined for " +
                       std::string(dtypeName(t)));
}

// out[i] = f(x[i]) with x of dtype In and the result of dtype Out.
template <DType In, DType Out, typename F>
Tensor mapUnary(const Tensor& x, const TensorType& rt, F f) {
  Tensor out = makeResult(rt);
  KILN_CHECK(out.numElements() == x.numElements(), "unary kernel: element counts differ");
  const auto* src = x.data<Storage<In>>();
  auto* dst = out.mutableData<Storage<Out>>();
  const int64_t n = x.numElements();
  for (int64_t i = 0; i < n; ++i) store<Out>(dst, i, f(load<In>(src, i)));
  return out;
}

// out[i] = f(a[i], b[i]); a and b have one shape (the type rule guarantees it).
template <DType In, DType Out, typename F>
Tensor mapBinary(const Tensor& a, const Tensor& b, const TensorType& rt, F f) {
  Tensor out = makeResult(rt);
  KILN_CHECK(out.numElements() == a.numElements() && a.numElements() == b.numElements(),
             "binary kernel: element counts differ");
  const auto* pa = a.data<Storage<In>>();
  const auto* pb = b.data<Storage<In>>();
  auto* dst = out.mutableData<Storage<Out>>();
  const int64_t n = a.numElements();
  for (int64_t i = 0; i < n; ++i) store<Out>(dst, i, f(load<In>(pa, i), load<In>(pb, i)));
  return out;
}

// Round half to even without relying on the floating-point environment's rounding mode.
template <typename M>
M roundHalfEven(M v) {
  M r = std::round(v);  // half away from zero
  if (std::fabs(v - std::trunc(v)) == M(0.5)) r = M(2) * std::round(v / M(2));
  return r;
}

// max/min of the semantics: floats propagate NaN (and order -0 below +0), bool is or/and.
template <DType D>
Compute<D> maxOf(Compute<D> a, Compute<D> b) {
  if constexpr (isFloatD(D)) {
    if (std::isnan(a)) return a;
    if (std::isnan(b)) return b;
    if (a == b) return std::signbit(a) ? b : a;
  }
  return a > b ? a : b;
}
template <DType D>
Compute<D> minOf(Compute<D> a, Compute<D> b) {
  if constexpr (isFloatD(D)) {
    if (std::isnan(a)) return a;
    if (std::isnan(b)) return b;
    if (a == b) return std::signbit(a) ? a : b;
  }
  return a < b ? a : b;
}

// ---- unary ----

template <DType D>
EvalResult floatUnary(OpCode op, const Tensor& x, const TensorType& rt) {
  using C = Compute<D>;
  using M = MathT<D>;
  auto run = [&](auto f) -> EvalResult {
    return std::vector<Tensor>{
        mapUnary<D, D>(x, rt, [&](C v) { return static_cast<C>(f(static_cast<M>(v))); })};
  };
  auto test = [&](auto f) -> EvalResult {
    return std::vector<Tensor>{mapUnary<D, DType::Bool>(x, rt, [&](C v) { return f(v); })};
  };
  switch (op) {
    case OpCode::Abs: return run([](M v) { return std::fabs(v); });
    case OpCode::Neg: return run([](M v) { return -v; });
    // sign(±0) = ±0 and sign(NaN) = NaN: return v itself for those.
    case OpCode::Sign:
      return run([](M v) { return std::isnan(v) || v == M(0) ? v : (v > M(0) ? M(1) : M(-1)); });
    case OpCode::Floor: return run([](M v) { return std::floor(v); });
    case OpCode::Ceil: return run([](M v) { return std::ceil(v); });
    case OpCode::RoundNearestEven: return run([](M v) { return roundHalfEven(v); });
    case OpCode::Exp: return run([](M v) { return std::exp(v); });
    case OpCode::Expm1: return run([](M v) { return std::expm1(v); });
    case OpCode::Log: return run([](M v) { return std::log(v); });
    case OpCode::Log1p: return run([](M v) { return std::log1p(v); });
    case OpCode::Sqrt: return run([](M v) { return std::sqrt(v); });
    case OpCode::Rsqrt: return run([](M v) { return M(1) / std::sqrt(v); });
    case OpCode::Sin: return run([](M v) { return std::sin(v); });
    case OpCode::Cos: return run([](M v) { return std::cos(v); });
    case OpCode::Tan: return run([](M v) { return std::tan(v); });
    case OpCode::Asin: return run([](M v) { return std::asin(v); });
    case OpCode::Acos: return run([](M v) { return std::acos(v); });
    case OpCode::Atan: return run([](M v) { return std::atan(v); });
    case OpCode::Sinh: return run([](M v) { return std::sinh(v); });
    case OpCode::Cosh: return run([](M v) { return std::cosh(v); });
    case OpCode::Asinh: return run([](M v) { return std::asinh(v); });
    case OpCode::Acosh: return run([](M v) { return std::acosh(v); });
    case OpCode::Atanh: return run([](M v) { return std::atanh(v); });
    case OpCode::Tanh: return run([](M v) { return std::tanh(v); });
    case OpCode::Erf: return run([](M v) { return std::erf(v); });
    // 1/(1+e^-v) saturates cleanly: e^-v = inf gives 0, e^-v = 0 gives 1.
    case OpCode::Sigmoid: return run([](M v) { return M(1) / (M(1) + std::exp(-v)); });
    case OpCode::IsFinite: return test([](C v) { return std::isfinite(v); });
    case OpCode::IsInf: return test([](C v) { return std::isinf(v); });
    case OpCode::IsNan: return test([](C v) { return std::isnan(v); });
    default: return unsupported(op, D);
  }
}

template <typename T>
bool isNegative(T v) {
  if constexpr (std::is_signed_v<T>) return v < T(0);
  else return false;
}

template <DType D>
EvalResult intUnary(OpCode op, const Tensor& x, const TensorType& rt) {
  using C = Compute<D>;
  auto run = [&](auto f) -> EvalResult {
    return std::vector<Tensor>{mapUnary<D, D>(x, rt, [&](C v) { return static_cast<C>(f(v)); })};
  };
  switch (op) {
    // abs(INT_MIN) wraps to INT_MIN.
    case OpCode::Abs: return run([](C v) { return isNegative(v) ? wrapNeg<C>(v) : v; });
    case OpCode::Neg: return run([](C v) { return wrapNeg<C>(v); });
    case OpCode::Sign:
      return run([](C v) { return isNegative(v) ? wrapNeg<C>(C(1)) : C(v != C(0)); });
    case OpCode::Not: return run([](C v) { return static_cast<C>(~v); });
    default: return unsupported(op, D);
  }
}

EvalResult boolUnary(OpCode op, const Tensor& x, const TensorType& rt) {
  if (op != OpCode::Not) return unsupported(op, DType::Bool);
  return std::vector<Tensor>{mapUnary<DType::Bool, DType::Bool>(x, rt, [](bool v) { return !v; })};
}

EvalResult unary(OpCode op, const Tensor& x, const TensorType& rt) {
  return dispatchDType(x.dtype(), [&](auto tag) -> EvalResult {
    constexpr DType D = decltype(tag)::value;
    if constexpr (isFloatD(D)) return floatUnary<D>(op, x, rt);
    else if constexpr (isIntD(D)) return intUnary<D>(op, x, rt);
    else return boolUnary(op, x, rt);
  });
}

// ---- binary ----

template <typename T>
T intDiv(T a, T b) {
  if (b == T(0)) return T(0);
  if constexpr (std::is_signed_v<T>)
    if (a == std::numeric_limits<T>::min() && b == T(-1)) return a;
  return static_cast<T>(a / b);
}

template <typename T>
T intRem(T a, T b) {
  if (b == T(0)) return a;
  if constexpr (std::is_signed_v<T>)
    if (a == std::numeric_limits<T>::min() && b == T(-1)) return T(0);
  return static_cast<T>(a % b);
}

// Exponentiation by squaring with wraparound; a negative exponent gives 0 except for bases 1
// and -1, whose powers stay integers.
template <typename T>
T intPow(T base, T exponent) {
  if constexpr (std::is_signed_v<T>) {
    if (exponent < T(0)) {
      if (base == T(1)) return T(1);
      if (base == T(-1)) return (exponent & T(1)) ? T(-1) : T(1);
      return T(0);
    }
  }
  T result = T(1);
  auto e = static_cast<std::make_unsigned_t<T>>(exponent);
  while (e != 0) {
    if (e & 1u) result = wrapMul<T>(result, base);
    base = wrapMul<T>(base, base);
    e = static_cast<decltype(e)>(e >> 1);
  }
  return result;
}

// True when a shift by s is outside [0, bit width).
template <typename T>
bool shiftOutOfRange(T s) {
  if constexpr (std::is_signed_v<T>)
    if (s < T(0)) return true;
  return static_cast<uint64_t>(s) >= sizeof(T) * 8;
}

template <typename T>
T shiftLeft(T a, T s) {
  using U = std::make_unsigned_t<T>;
  if (shiftOutOfRange(s)) return T(0);
  // U promotes to int for 8/16-bit types; the largest such product fits in 31 bits.
  return static_cast<T>(static_cast<U>(static_cast<U>(a) << static_cast<int>(s)));
}

template <typename T>
T shiftRightLogical(T a, T s) {
  using U = std::make_unsigned_t<T>;
  if (shiftOutOfRange(s)) return T(0);
  return static_cast<T>(static_cast<U>(static_cast<U>(a) >> static_cast<int>(s)));
}

// Arithmetic shift of the bit pattern read as signed (so u8 0x80 >> 1 is 0xC0).
template <typename T>
T shiftRightArithmetic(T a, T s) {
  using S = std::make_signed_t<T>;
  S v = static_cast<S>(a);
  if (shiftOutOfRange(s)) return static_cast<T>(v < S(0) ? S(-1) : S(0));
  return static_cast<T>(static_cast<S>(v >> static_cast<int>(s)));
}

template <DType D>
EvalResult compare(const std::string& dir, const Tensor& a, const Tensor& b, const TensorType& rt) {
  using C = Compute<D>;
  constexpr DType B = DType::Bool;
  Tensor out;
  if (dir == "eq") out = mapBinary<D, B>(a, b, rt, [](C x, C y) { return x == y; });
  else if (dir == "ne") out = mapBinary<D, B>(a, b, rt, [](C x, C y) { return x != y; });
  else if (dir == "lt") out = mapBinary<D, B>(a, b, rt, [](C x, C y) { return x < y; });
  else if (dir == "le") out = mapBinary<D, B>(a, b, rt, [](C x, C y) { return x <= y; });
  else if (dir == "gt") out = mapBinary<D, B>(a, b, rt, [](C x, C y) { return x > y; });
  else if (dir == "ge") out = mapBinary<D, B>(a, b, rt, [](C x, C y) { return x >= y; });
  else return Status::error("compare: unknown direction '" + dir + "'");
  return std::vector<Tensor>{std::move(out)};
}

template <DType D>
EvalResult floatBinary(OpCode op, const Tensor& a, const Tensor& b, const TensorType& rt) {
  using C = Compute<D>;
  using M = MathT<D>;
  auto run = [&](auto f) -> EvalResult {
    return std::vector<Tensor>{mapBinary<D, D>(a, b, rt, [&](C x, C y) {
      return static_cast<C>(f(static_cast<M>(x), static_cast<M>(y)));
    })};
  };
  switch (op) {
    case OpCode::Add: return run([](M x, M y) { return x + y; });
    case OpCode::Sub: return run([](M x, M y) { return x - y; });
    case OpCode::Mul: return run([](M x, M y) { return x * y; });
    case OpCode::Div: return run([](M x, M y) { return x / y; });
    case OpCode::Rem: return run([](M x, M y) { return std::fmod(x, y); });
    case OpCode::Pow: return run([](M x, M y) { return std::pow(x, y); });
    case OpCode::Atan2: return run([](M x, M y) { return std::atan2(x, y); });
    case OpCode::Max: return run([](M x, M y) { return static_cast<M>(maxOf<D>(C(x), C(y))); });
    case OpCode::Min: return run([](M x, M y) { return static_cast<M>(minOf<D>(C(x), C(y))); });
    default: return unsupported(op, D);
  }
}

template <DType D>
EvalResult intBinary(OpCode op, const Tensor& a, const Tensor& b, const TensorType& rt) {
  using C = Compute<D>;
  auto run = [&](auto f) -> EvalResult {
    return std::vector<Tensor>{
        mapBinary<D, D>(a, b, rt, [&](C x, C y) { return static_cast<C>(f(x, y)); })};
  };
  switch (op) {
    case OpCode::Add: return run([](C x, C y) { return wrapAdd<C>(x, y); });
    case OpCode::Sub: return run([](C x, C y) { return wrapSub<C>(x, y); });
    case OpCode::Mul: return run([](C x, C y) { return wrapMul<C>(x, y); });
    case OpCode::Div: return run([](C x, C y) { return intDiv<C>(x, y); });
    case OpCode::Rem: return run([](C x, C y) { return intRem<C>(x, y); });
    case OpCode::Pow: return run([](C x, C y) { return intPow<C>(x, y); });
    case OpCode::Max: return run([](C x, C y) { return maxOf<D>(x, y); });
    case OpCode::Min: return run([](C x, C y) { return minOf<D>(x, y); });
    case OpCode::And: return run([](C x, C y) { return static_cast<C>(x & y); });
    case OpCode::Or: return run([](C x, C y) { return static_cast<C>(x | y); });
    case OpCode::Xor: return run([](C x, C y) { return static_cast<C>(x ^ y); });
    case OpCode::ShiftLeft: return run([](C x, C y) { return shiftLeft<C>(x, y); });
    case OpCode::ShiftRightArithmetic:
      return run([](C x, C y) { return shiftRightArithmetic<C>(x, y); });
    case OpCode::ShiftRightLogical: return run([](C x, C y) { return shiftRightLogical<C>(x, y); });
    default: return unsupported(op, D);
  }
}

EvalResult boolBinary(OpCode op, const Tensor& a, const Tensor& b, const TensorType& rt) {
  constexpr DType B = DType::Bool;
  auto run = [&](auto f) -> EvalResult {
    return std::vector<Tensor>{mapBinary<B, B>(a, b, rt, f)};
  };
  switch (op) {
    case OpCode::And:
    case OpCode::Min: return run([](bool x, bool y) { return x && y; });
    case OpCode::Or:
    case OpCode::Max: return run([](bool x, bool y) { return x || y; });
    case OpCode::Xor: return run([](bool x, bool y) { return x != y; });
    default: return unsupported(op, B);
  }
}

EvalResult binary(const Node& n, const Tensor& a, const Tensor& b, const TensorType& rt) {
  const OpCode op = n.op();
  return dispatchDType(a.dtype(), [&](auto tag) -> EvalResult {
    constexpr DType D = decltype(tag)::value;
    if (op == OpCode::Compare) return compare<D>(n.attrEnum("direction"), a, b, rt);
    if constexpr (isFloatD(D)) return floatBinary<D>(op, a, b, rt);
    else if constexpr (isIntD(D)) return intBinary<D>(op, a, b, rt);
    else return boolBinary(op, a, b, rt);
  });
}

// ---- ternary ----

// select(pred, onTrue, onFalse); pred may be rank 0 (one predicate for every element).
EvalResult select(const Tensor& pred, const Tensor& t, const Tensor& f, const TensorType& rt) {
  Tensor out = makeResult(rt);
  const int64_t n = out.numElements();
  KILN_CHECK(t.numElements() == n && f.numElements() == n, "select: element counts differ");
  const int64_t ps = pred.rank() == 0 ? 0 : 1;
  KILN_CHECK(ps == 0 || pred.numElements() == n, "select: predicate shape differs");
  const uint8_t* p = pred.data<uint8_t>();
  const size_t es = dtypeSize(out.dtype());
  const std::byte* pt = t.bytes();
  const std::byte* pf = f.bytes();
  std::byte* dst = out.mutableBytes();
  for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * es, (p[i * ps] ? pt : pf) + i * es, es);
  return std::vector<Tensor>{std::move(out)};
}

// clamp(lo, x, hi) = min(max(x, lo), hi); lo and hi may be rank 0.
EvalResult clamp(const Tensor& lo, const Tensor& x, const Tensor& hi, const TensorType& rt) {
  return dispatchDType(x.dtype(), [&](auto tag) -> EvalResult {
    constexpr DType D = decltype(tag)::value;
    Tensor out = makeResult(rt);
    const int64_t n = out.numElements();
    KILN_CHECK(x.numElements() == n, "clamp: element counts differ");
    const int64_t ls = lo.rank() == 0 ? 0 : 1;
    const int64_t hs = hi.rank() == 0 ? 0 : 1;
    const auto* pl = lo.data<Storage<D>>();
    const auto* px = x.data<Storage<D>>();
    const auto* ph = hi.data<Storage<D>>();
    auto* dst = out.mutableData<Storage<D>>();
    for (int64_t i = 0; i < n; ++i) {
      Compute<D> v = maxOf<D>(load<D>(px, i), load<D>(pl, i * ls));
      store<D>(dst, i, minOf<D>(v, load<D>(ph, i * hs)));
    }
    return std::vector<Tensor>{std::move(out)};
  });
}

// ---- convert and iota ----

// A float carrying v rounded to odd: exact when v fits, otherwise truncated toward zero with
// the lowest mantissa bit set. Rounding that float once more to f16/bf16 (round to nearest
// even) then equals rounding v directly, which a plain double->float->half chain does not.
float roundToOddFloat(long double v) {
  float f = static_cast<float>(v);
  if (std::isnan(f) || static_cast<long double>(f) == v) return f;
  if (std::fabs(static_cast<long double>(f)) > std::fabs(v)) f = std::nextafter(f, 0.0f);
  return std::bit_cast<float>(std::bit_cast<uint32_t>(f) | 1u);
}

// Stores the exactly represented value v (a bool, integer or float source) into dtype T:
// floats round to nearest even once, integers truncate toward zero and saturate (NaN -> 0),
// bool is v != 0.
template <DType T>
Storage<T> fromExact(long double v) {
  if constexpr (T == DType::Bool) {
    return v != 0 ? 1 : 0;
  } else if constexpr (isIntD(T)) {
    using S = Storage<T>;
    if (std::isnan(v)) return S(0);
    if (v <= static_cast<long double>(std::numeric_limits<S>::min()))
      return std::numeric_limits<S>::min();
    if (v >= static_cast<long double>(std::numeric_limits<S>::max()))
      return std::numeric_limits<S>::max();
    return static_cast<S>(v);
  } else if constexpr (T == DType::F16) {
    return floatToHalf(roundToOddFloat(v));
  } else if constexpr (T == DType::BF16) {
    return floatToBf16(roundToOddFloat(v));
  } else {
    return static_cast<Storage<T>>(v);
  }
}

template <DType S, DType T>
void convertElements(const Tensor& x, Tensor& out) {
  const auto* src = x.data<Storage<S>>();
  auto* dst = out.mutableData<Storage<T>>();
  const int64_t n = x.numElements();
  for (int64_t i = 0; i < n; ++i) {
    // Integer to integer keeps the low bits (two's complement wraparound).
    if constexpr (isIntD(S) && isIntD(T)) dst[i] = static_cast<Storage<T>>(src[i]);
    else dst[i] = fromExact<T>(static_cast<long double>(load<S>(src, i)));
  }
}

EvalResult convert(const Tensor& x, const TensorType& rt) {
  if (isString(x.dtype()) || isString(rt.dtype())) return convertStrings(x, rt);
  Tensor out = makeResult(rt);
  KILN_CHECK(out.numElements() == x.numElements(), "convert: element counts differ");
  dispatchDType(x.dtype(), [&](auto st) {
    dispatchDType(rt.dtype(), [&](auto tt) {
      convertElements<decltype(st)::value, decltype(tt)::value>(x, out);
    });
  });
  return std::vector<Tensor>{std::move(out)};
}

// iota: element value = its index along `dimension`, converted like an i64 value.
EvalResult iota(const Node& n, const TensorType& rt) {
  Tensor out = makeResult(rt);
  const int64_t dim = n.attrInt("dimension");
  if (dim < 0 || dim >= out.rank())
    return Status::error("iota dimension " + std::to_string(dim) + " is out of range for " +
                         rt.str());
  const int64_t extent = out.dims()[dim];
  const int64_t stride = rowMajorStrides(out.dims())[dim];
  dispatchDType(rt.dtype(), [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    auto* dst = out.mutableData<Storage<D>>();
    for (int64_t i = 0; i < out.numElements(); ++i) {
      int64_t k = (i / stride) % extent;
      if constexpr (isIntD(D)) dst[i] = static_cast<Storage<D>>(k);
      else dst[i] = fromExact<D>(static_cast<long double>(k));
    }
  });
  return std::vector<Tensor>{std::move(out)};
}

}  // namespace

EvalResult evalElementwise(const EvalContext& c) {
  const OpCode op = c.node.op();
  KILN_CHECK(!c.resultTypes.empty(), "elementwise op without a result type");
  const TensorType& rt = c.resultTypes[0];
  if (op == OpCode::Iota) return iota(c.node, rt);
  if (op == OpCode::Convert) return convert(c.operands[0], rt);
  switch (opInfo(op).opClass) {
    case OpClass::ElementwiseUnary: return unary(op, c.operands[0], rt);
    case OpClass::ElementwiseBinary: return binary(c.node, c.operands[0], c.operands[1], rt);
    case OpClass::ElementwiseTernary:
      if (op == OpCode::Select) return select(c.operands[0], c.operands[1], c.operands[2], rt);
      return clamp(c.operands[0], c.operands[1], c.operands[2], rt);
    default: break;
  }
  return Status::error(std::string(opName(op)) + " is not an elementwise op");
}

}  // namespace kiln::interp
