// Guards on an executable's inputs (runtime/guards.h).
#include "runtime/guards.h"

#include <charconv>
#include <map>

namespace kiln::runtime {

std::vector<TensorType> parameterTypes(const Function& f) {
  std::vector<TensorType> types;
  for (size_t i = 0; i < f.numParameters(); ++i) types.push_back(f.parameter(i)->type());
  return types;
}

namespace {

DimGuard& guardFor(Guards& g, const std::string& symbol) {
  for (DimGuard& d : g.dims)
    if (d.symbol == symbol) return d;
  g.dims.push_back({symbol, -1, std::nullopt, {}});
  return g.dims.back();
}

}  // namespace

std::string DimGuard::compiledFor() const {
  if (range) return "for " + symbol + "=" + range->str();
  if (value < 0) return "with " + symbol + " unbound";
  return "for " + symbol + "=" + std::to_string(value);
}

bool Guards::ranged() const {
  for (const DimGuard& d : dims)
    if (d.range) return true;
  return false;
}

Guards guardsOf(const std::vector<TensorType>& sourceTypes, const std::vector<TensorType>& compiled,
                const SymbolRanges& ranges) {
  Guards g;
  for (size_t i = 0; i < sourceTypes.size() && i < compiled.size(); ++i) {
    const TensorType& s = sourceTypes[i];
    const TensorType& c = compiled[i];
    if (s.rank() != c.rank()) continue;
    for (size_t d = 0; d < static_cast<size_t>(s.rank()); ++d) {
      if (!s.dim(d).isSymbol()) continue;  // a product of symbols is checked by its symbols
      DimGuard& guard = guardFor(g, s.dim(d).symbolName());
      guard.checks.push_back({i, d});
      if (c.dim(d).isStatic() && guard.value < 0) guard.value = c.dim(d).value();
      auto r = ranges.find(s.dim(d).symbolName());
      // A range of `each` sizes was compiled at one of them.
      if (r != ranges.end() && (c.dim(d).isSymbolic() || r->second.each)) guard.range = r->second;
    }
  }
  return g;
}

std::string describeGuards(const Guards& g, const std::vector<std::string>& names) {
  std::string s;
  for (const DimGuard& d : g.dims) {
    s += d.symbol +
         (d.range        ? " in " + d.range->str()
          : d.value >= 0 ? " = " + std::to_string(d.value)
                         : " unbound") +
         ": ";
    for (size_t k = 0; k < d.checks.size(); ++k) {
      auto [input, dim] = d.checks[k];
      std::string name = input < names.size() ? names[input] : "#" + std::to_string(input);
      s += (k ? ", input '" : "input '") + name + "' dim " + std::to_string(dim);
    }
    s += "\n";
  }
  return s;
}

std::string guardsText(const Guards& g) {
  std::string s;
  for (const DimGuard& d : g.dims)
    for (auto [input, dim] : d.checks)
      s += std::to_string(input) + " " + std::to_string(dim) + " " + d.symbol + "\n";
  return s;
}

StatusOr<Guards> parseGuards(std::string_view text, const std::vector<TensorType>& compiled,
                             const SymbolRanges& ranges) {
  std::vector<TensorType> source = compiled;
  while (!text.empty()) {
    size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    if (line.empty()) continue;
    size_t input = 0, dim = 0;
    const char* p = line.data();
    const char* e = p + line.size();
    auto r1 = std::from_chars(p, e, input);
    auto r2 = r1.ec == std::errc() && r1.ptr < e ? std::from_chars(r1.ptr + 1, e, dim) : r1;
    if (r1.ec != std::errc() || r2.ec != std::errc() || r2.ptr >= e || *r2.ptr != ' ' ||
        input >= source.size() || dim >= static_cast<size_t>(source[input].rank()))
      return Status::error("its guards section has a malformed line '" + std::string(line) + "'");
    std::vector<Dim> dims = source[input].dims();
    dims[dim] = Dim::symbol(std::string(r2.ptr + 1, e));
    source[input] = TensorType(source[input].dtype(), dims);
  }
  return guardsOf(source, compiled, ranges);
}

StatusOr<SymbolBindings> bindGuards(const Guards& g, const std::vector<TensorType>& compiled,
                                    const std::vector<std::string>& names,
                                    const std::vector<TensorType>& inputs) {
  // Where each guarded (input, dim) is, to tell a guarded difference from another.
  std::map<std::pair<size_t, size_t>, const DimGuard*> guarded;
  for (const DimGuard& d : g.dims)
    for (auto at : d.checks) guarded[at] = &d;
  auto inputName = [&](size_t i) {
    return "input " + std::to_string(i) + " ('" + (i < names.size() ? names[i] : "") + "')";
  };
  SymbolBindings sizes;
  std::map<std::string, size_t> from;  // symbol -> the input its size came from
  for (size_t i = 0; i < inputs.size() && i < compiled.size(); ++i) {
    const TensorType& want = compiled[i];
    const TensorType& have = inputs[i];
    // Built only for an error: a run checks its inputs every time.
    auto mismatch = [&] {
      return Status::error(inputName(i) + ": expected " + want.str() + ", got " + have.str());
    };
    if (have.dtype() != want.dtype() || have.rank() != want.rank()) return mismatch();
    for (size_t d = 0; d < static_cast<size_t>(have.rank()); ++d) {
      auto it = guarded.find({i, d});
      int64_t size = have.dim(d).value();
      if (it == guarded.end()) {
        if (size != want.dim(d).value()) return mismatch();
        continue;
      }
      const std::string& symbol = it->second->symbol;
      auto [at, inserted] = sizes.emplace(symbol, size);
      if (inserted) {
        from[symbol] = i;
      } else if (at->second != size) {
        return Status::error(inputName(i) + ": dim " + symbol + " is " + std::to_string(size) +
                             ", but " + std::to_string(at->second) + " in " +
                             inputName(from[symbol]));
      }
    }
  }
  return sizes;
}

std::string describeChanges(const Guards& g, const SymbolBindings& sizes) {
  std::string s;
  for (const DimGuard& d : g.dims) {
    auto it = sizes.find(d.symbol);
    if (it == sizes.end() || it->second == d.value || d.covers(it->second)) continue;
    s += (s.empty() ? "dim " : ", dim ") + d.symbol + "=" + std::to_string(it->second) +
         " (compiled " + d.compiledFor() + ")";
  }
  return s;
}

std::pair<SymbolBindings, std::string> bucketsOf(const Guards& guards,
                                                 const SymbolBindings& sizes) {
  SymbolBindings lows;
  std::string which;
  for (const DimGuard& g : guards.dims) {
    if (!g.range || !(g.range->pow2 || g.range->each)) continue;
    const int64_t size = sizes.at(g.symbol);
    SymbolRange b = g.range->bucketOf(size);
    lows[g.symbol] = b.lo;
    which += std::string(which.empty() ? "" : ", ") + g.symbol + "=" +
             (b.lo == b.hi ? std::to_string(b.lo) : b.str()) + ", the bucket of " + g.symbol + "=" +
             std::to_string(size) + " in " + g.symbol + "=" + g.range->str();
  }
  return {lows, which};
}

bool Guards::eachSize() const {
  for (const DimGuard& g : dims)
    if (g.range && g.range->each) return true;
  return false;
}

}  // namespace kiln::runtime
