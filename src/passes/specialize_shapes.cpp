// specialize-shapes: checks the bindings against the module, then hands them to the shape solver
// (shape_solver.h), function by function.
#include "passes/specialize_shapes.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <set>

#include "passes/shape_solver.h"

namespace kiln {
namespace {

std::set<std::string> moduleSymbols(const Module& m) {
  std::set<std::string> out;
  for (const auto& f : m.functions())
    for (const auto& n : f->nodes())
      for (size_t i = 0; i < n->numResults(); ++i)
        for (const Dim& d : n->result(i)->type().dims())
          out.insert(d.factors().begin(), d.factors().end());
  return out;
}

bool isSymbolName(std::string_view s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

}  // namespace

namespace {

// A whole decimal integer.
bool parseInteger(std::string_view t, int64_t& v) {
  auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  return !t.empty() && ec == std::errc() && end == t.data() + t.size();
}

// "N=...,S=..." into a map by name: `value` reads one entry's text after '=' (false: malformed,
// an error naming the entry as a bad symbol `what` and saying what was `expected`).
template <typename T, typename Read>
StatusOr<std::map<std::string, T>> parseEntries(std::string_view text, Read value, const char* what,
                                                const char* expected, const char* twice) {
  std::map<std::string, T> out;
  for (size_t start = 0; start <= text.size();) {
    size_t comma = std::min(text.find(',', start), text.size());
    std::string_view entry = text.substr(start, comma - start);
    start = comma + 1;
    size_t eq = entry.find('=');
    std::string_view name = entry.substr(0, eq);
    T v{};
    if (eq == std::string_view::npos || !isSymbolName(name) || !value(entry.substr(eq + 1), v))
      return Status::error(std::string("bad symbol ") + what + " '" + std::string(entry) +
                           "': expected " + expected);
    if (!out.emplace(std::string(name), v).second)
      return Status::error("symbol " + std::string(name) + " is " + twice);
  }
  return out;
}

}  // namespace

StatusOr<SymbolBindings> parseSymbolBindings(std::string_view text) {
  if (text.empty()) return Status::error("no symbol bindings given (expected e.g. N=1,S=128)");
  return parseEntries<int64_t>(
      text,
      [](std::string_view t, int64_t& v) {
        return parseInteger(t, v) && v >= 0 && v <= kMaxElements;
      },
      "binding", "NAME=EXTENT with 0 <= EXTENT <= 2^40, e.g. N=8", "bound twice");
}

StatusOr<SymbolRanges> parseSymbolRanges(std::string_view text) {
  if (text.empty()) return Status::error("no symbol ranges given (expected e.g. N=1..64)");
  return parseEntries<SymbolRange>(
      text,
      [](std::string_view t, SymbolRange& r) {
        auto suffix = [&](std::string_view tail) {
          bool has = t.size() > tail.size() && t.substr(t.size() - tail.size()) == tail;
          if (has) t.remove_suffix(tail.size());
          return has;
        };
        r.pow2 = suffix(":pow2");
        r.each = !r.pow2 && suffix(":each");
        size_t dots = t.find("..");
        return dots != std::string_view::npos && parseInteger(t.substr(0, dots), r.lo) &&
               parseInteger(t.substr(dots + 2), r.hi) && r.lo >= 0 && r.hi >= r.lo &&
               r.hi <= kMaxElements;
      },
      "range",
      "NAME=LO..HI (or NAME=LO..HI:pow2, NAME=LO..HI:each) with 0 <= LO <= HI <= 2^40, e.g. "
      "N=1..64",
      "given twice");
}

SymbolBindings topsOf(const SymbolRanges& ranges) {
  SymbolBindings tops;
  for (const auto& [name, range] : ranges) tops[name] = range.hi;
  return tops;
}

void eachAtLowEnds(SymbolRanges& ranges, SymbolBindings& dims) {
  for (auto& [name, range] : ranges) {
    range.each = true;
    range.pow2 = false;
    dims[name] = range.lo;
  }
}

std::string SymbolRange::str() const {
  return std::to_string(lo) + ".." + std::to_string(hi) + (pow2 ? ":pow2" : each ? ":each" : "");
}

SymbolRange SymbolRange::bucketOf(int64_t size) const {
  if (each) return SymbolRange{size, size};
  int64_t top = 1;
  while (top < size) top *= 2;
  SymbolRange b;
  b.lo = std::max(lo, top / 2 + 1);
  b.hi = std::min(hi, top);
  if (size <= 1) b.lo = b.hi = std::max<int64_t>(size, lo);
  return b;
}

TensorType atSizes(const TensorType& t, const SymbolBindings& sizes) {
  if (t.isStatic()) return t;
  std::vector<int64_t> dims;
  for (const Dim& d : t.dims())
    dims.push_back(*d.evaluate([&](const std::string& s) { return sizes.at(s); }));
  return TensorType::of(t.dtype(), dims);
}

StatusOr<SymbolBindings> bindingsFromInputShapes(const Function& f,
                                                 const std::vector<std::vector<int64_t>>& shapes) {
  if (shapes.size() != f.numParameters())
    return Status::error("@" + f.name() + " takes " + std::to_string(f.numParameters()) +
                         " inputs, got " + std::to_string(shapes.size()) + " shapes");
  SymbolBindings out;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const Value* p = f.parameter(i);
    const TensorType& t = p->type();
    std::string who =
        "input " + std::to_string(i) + (p->name().empty() ? "" : " ('" + p->name() + "')");
    std::string got = "[";
    for (size_t j = 0; j < shapes[i].size(); ++j)
      got += (j ? "," : "") + std::to_string(shapes[i][j]);
    got += "]";
    if (static_cast<int64_t>(shapes[i].size()) != t.rank())
      return Status::error(who + ": expected a shape for " + t.str() + ", got " + got);
    for (size_t j = 0; j < shapes[i].size(); ++j) {
      const Dim& d = t.dim(j);
      int64_t e = shapes[i][j];
      if (e < 0 || (d.isStatic() && d.value() != e))
        return Status::error(who + ": expected a shape for " + t.str() + ", got " + got);
      if (d.isStatic()) continue;
      if (!d.isSymbol())
        return Status::error(who + ": dim " + d.str() +
                             " of an input is a product; give its symbols' sizes with --dim");
      auto [it, inserted] = out.emplace(d.symbolName(), e);
      if (!inserted && it->second != e)
        return Status::error(who + ": symbol " + d.symbolName() + " is " + std::to_string(e) +
                             " here but " + std::to_string(it->second) + " in an earlier input");
    }
  }
  return out;
}

StatusOr<bool> specializeShapes(Module& m, const SymbolBindings& bindings) {
  std::set<std::string> known = moduleSymbols(m);
  for (const auto& [symbol, extent] : bindings) {
    if (known.count(symbol)) continue;
    std::string list;
    for (const std::string& s : known) list += (list.empty() ? "" : ", ") + s;
    return Status::error("symbol " + symbol + " does not appear in the module (its symbols: " +
                         (list.empty() ? "none" : list) + ")");
  }
  bool changed = false;
  for (const auto& f : m.functions()) {
    KILN_ASSIGN_OR_RETURN(bool c, shapes::resolveFunctionShapes(*f, bindings));
    changed = changed || c;
  }
  return changed;
}

std::unique_ptr<Pass> makeSpecializeShapesPass(SymbolBindings bindings) {
  return makePass(
      "specialize-shapes", "substitute concrete extents for symbols (specialize-shapes=N=1,S=128)",
      [bindings = std::move(bindings)](Module& m) { return specializeShapes(m, bindings); });
}

StatusOr<bool> specializeShapesWithoutBindings(Module&) {
  return Status::error("specialize-shapes needs bindings: --specialize-shapes=N=1,S=128");
}

}  // namespace kiln
