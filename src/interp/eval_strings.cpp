// Reference kernels over strings: string_normalize, and convert to and from strings (semantics in
// docs/ops.md, "Strings"). Text is UTF-8; case maps one code point to one, by the C library's
// wide-character tables under C.UTF-8 (ASCII only where that locale is missing).
#include <charconv>
#include <clocale>
#include <cmath>
#include <cstdlib>
#include <cwctype>
#include <locale>
#include <set>
#include <string>
#include <vector>

#include "interp/eval.h"
#include "interp/eval_util.h"
#include "support/utf8.h"

namespace kiln::interp {
namespace {

// The C.UTF-8 locale's character classes, or null where the system has no such locale.
locale_t utf8Locale() {
  static locale_t loc = newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(nullptr));
  return loc;
}

char32_t mapCase(char32_t c, bool upper) {
  if (locale_t loc = utf8Locale())
    return static_cast<char32_t>(upper ? towupper_l(static_cast<wint_t>(c), loc)
                                       : towlower_l(static_cast<wint_t>(c), loc));
  if (upper) return c >= 'a' && c <= 'z' ? c - 32 : c;
  return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

std::u32string mapCase(std::u32string s, bool upper) {
  for (char32_t& c : s) c = mapCase(c, upper);
  return s;
}

EvalResult stringNormalize(const EvalContext& c) {
  const Tensor &x = c.operands[0], &stop = c.operands[1];
  const bool sensitive = c.node.attrBool("case_sensitive");
  const std::string& change = c.node.attrEnum("case_change");
  auto fail = [](int64_t i, const char* what, const Status& s) {
    return Status::error(std::string(what) + " element " + std::to_string(i) + ": " + s.message());
  };
  std::set<std::u32string> stopwords;
  for (int64_t i = 0; i < stop.numElements(); ++i) {
    StatusOr<std::u32string> w = decodeUtf8(stop.str(i));
    if (!w) return fail(i, "stopwords", w.status());
    stopwords.insert(sensitive ? *w : mapCase(*w, false));
  }
  Tensor out = makeResult(c.resultTypes[0]);
  int64_t kept = 0;
  for (int64_t i = 0; i < x.numElements(); ++i) {
    StatusOr<std::u32string> w = decodeUtf8(x.str(i));
    if (!w) return fail(i, "operand", w.status());
    if (stopwords.count(sensitive ? *w : mapCase(*w, false))) continue;
    out.setStr(kept++, change == "none" ? x.str(i) : encodeUtf8(mapCase(*w, change == "upper")));
  }
  Tensor count(DType::I64, {});
  count.setInt(0, std::max<int64_t>(kept, 1));  // none kept: one empty string
  return std::vector<Tensor>{std::move(out), std::move(count)};
}

// The shortest text that reads back to the same value of x's dtype.
std::string numberText(const Tensor& x, int64_t i) {
  char buf[64];
  const DType t = x.dtype();
  if (isBool(t)) return x.getInt(i) ? "1" : "0";
  if (isUnsignedInteger(t)) return std::to_string(x.getUInt(i));
  if (isInteger(t)) return std::to_string(x.getInt(i));
  const double v = x.getDouble(i);
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "INF" : "-INF";
  if (t == DType::F64) return std::string(buf, std::to_chars(buf, buf + 64, v).ptr);
  if (t == DType::F32) return std::string(buf, std::to_chars(buf, buf + 64, float(v)).ptr);
  auto roundTrip = [t](float f) {  // f16, bf16: the value the dtype stores for f
    return t == DType::F16 ? halfToFloat(floatToHalf(f)) : bf16ToFloat(floatToBf16(f));
  };
  for (int digits = 1;; ++digits) {  // the fewest digits that round to the same value
    std::string s(buf, std::to_chars(buf, buf + 64, v, std::chars_format::general, digits).ptr);
    if (roundTrip(std::strtof(s.c_str(), nullptr)) == v || digits >= 17) return s;
  }
}

// A number in plain or scientific notation, or INF, +INF, -INF, NaN in any case.
StatusOr<double> parseNumber(const std::string& s) {
  const char* begin = s.c_str();
  char* end = nullptr;
  const double v = std::strtod(begin, &end);
  if (s.empty() || end != begin + s.size()) return Status::error("'" + s + "' is not a number");
  return v;
}

}  // namespace

EvalResult evalStrings(const EvalContext& c) {
  if (c.node.op() == OpCode::StringNormalize) return stringNormalize(c);
  return Status::error(std::string(opName(c.node.op())) + " is not an op over strings");
}

EvalResult convertStrings(const Tensor& x, const TensorType& rt) {
  Tensor out = makeResult(rt);
  for (int64_t i = 0; i < x.numElements(); ++i) {
    if (isString(rt.dtype())) {
      out.setStr(i, isString(x.dtype()) ? x.str(i) : numberText(x, i));
      continue;
    }
    const std::string& s = x.str(i);
    int64_t exact = 0;  // integers read exactly, beyond 2^53
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), exact);
    if (isInteger(rt.dtype()) && ec == std::errc() && p == s.data() + s.size()) {
      out.setInt(i, exact);
      continue;
    }
    StatusOr<double> v = parseNumber(s);
    if (!v) return Status::error("element " + std::to_string(i) + ": " + v.status().message());
    out.setDouble(i, *v);
  }
  return std::vector<Tensor>{std::move(out)};
}

}  // namespace kiln::interp
