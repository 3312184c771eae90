// Input binding for `kiln run`: which file feeds which parameter, checking each array against
// the parameter's type, fixing symbolic dimensions, and seeded random values for the rest.
#include "inputs.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>

#include "support/npy.h"

namespace kiln::cli {
namespace {

// Random inputs larger than this are refused: a typo in --dim should not fill the machine.
constexpr int64_t kMaxRandomBytes = int64_t(1) << 30;

// A symbol's size and where it came from, so a conflict can name both sides.
struct SymbolSize {
  int64_t size;
  std::string source;
};
using Symbols = std::map<std::string, SymbolSize>;

Status inputError(const std::string& name, const std::string& message) {
  return Status::error("input '" + name + "': " + message);
}

std::string inputList(const std::vector<std::string>& names) {
  if (names.empty()) return "the program has no inputs";
  std::string s = "the program's inputs are: ";
  for (size_t i = 0; i < names.size(); ++i) s += (i ? ", " : "") + names[i];
  return s;
}

}  // namespace

StatusOr<std::vector<std::string>> assignFiles(const std::vector<std::string>& names,
                                               const std::vector<InputArg>& args) {
  size_t n = names.size();
  std::vector<std::string> files(n);
  std::vector<bool> named(n, false);
  for (const InputArg& a : args) {
    if (a.name.empty()) continue;
    size_t i = 0;
    while (i < n && names[i] != a.name) ++i;
    if (i == n) return Status::error("unknown input '" + a.name + "' (" + inputList(names) + ")");
    if (named[i]) return Status::error("input '" + a.name + "' is given twice");
    named[i] = true;
    files[i] = a.file;
  }
  size_t next = 0;
  for (const InputArg& a : args) {
    if (!a.name.empty()) continue;
    while (next < n && named[next]) ++next;
    if (next == n)
      return Status::error("too many inputs: no input is left for " + a.file + " (" +
                           inputList(names) + ")");
    files[next++] = a.file;
  }
  return files;
}

namespace {

// Checks an array read from `file` against the parameter type, recording the sizes it gives
// to symbolic dimensions. A bf16 parameter takes f32 data (numpy has no bf16), rounded.
Status checkInput(const std::string& name, const TensorType& want, const std::string& file,
                  Tensor& t, Symbols& symbols) {
  bool bf16FromF32 = want.dtype() == DType::BF16 && t.dtype() == DType::F32;
  Status mismatch =
      inputError(name, "expected " + want.str() + ", got " + t.type().str() + " from " + file);
  if ((t.dtype() != want.dtype() && !bf16FromF32) || t.rank() != want.rank()) return mismatch;
  for (int64_t d = 0; d < t.rank(); ++d) {
    const Dim& dim = want.dim(static_cast<size_t>(d));
    int64_t have = t.dims()[static_cast<size_t>(d)];
    if (dim.isStatic()) {
      if (dim.value() != have) return mismatch;
      continue;
    }
    if (!dim.isSymbol()) continue;  // a product of symbols: the run checks it
    auto [it, inserted] =
        symbols.emplace(dim.symbolName(), SymbolSize{have, "input '" + name + "' (" + file + ")"});
    if (!inserted && it->second.size != have)
      return inputError(name, "dimension " + dim.symbolName() + " is " + std::to_string(have) +
                                  " in " + file + ", but " + std::to_string(it->second.size) +
                                  " from " + it->second.source);
  }
  if (bf16FromF32) {
    Tensor converted(DType::BF16, t.dims());
    for (int64_t i = 0; i < t.numElements(); ++i) converted.setDouble(i, t.getDouble(i));
    t = converted;
  }
  return Status::ok();
}

// The sizes given with --dim, each of which must name a symbol of some parameter.
StatusOr<Symbols> symbolsFromDims(const std::vector<TensorType>& types,
                                  const std::map<std::string, int64_t>& dims) {
  std::set<std::string> known;
  for (const TensorType& t : types) {
    for (const Dim& d : t.dims()) known.insert(d.factors().begin(), d.factors().end());
  }
  Symbols symbols;
  for (const auto& [symbol, size] : dims) {
    std::string flag = "--dim " + symbol + "=" + std::to_string(size);
    if (!known.count(symbol))
      return Status::error(flag + ": the program's inputs have no symbolic dimension '" + symbol +
                           "'");
    symbols.emplace(symbol, SymbolSize{size, flag});
  }
  return symbols;
}

StatusOr<std::vector<int64_t>> concreteDims(const std::string& name, const TensorType& type,
                                            const Symbols& symbols) {
  std::vector<int64_t> dims;
  for (const Dim& d : type.dims()) {
    if (d.isStatic()) {
      dims.push_back(d.value());
      continue;
    }
    for (const std::string& f : d.factors())
      if (!symbols.count(f))
        return inputError(name, "type " + type.str() + " has the symbolic dimension '" + f +
                                    "': give its size with --dim " + f + "=SIZE");
    dims.push_back(*d.evaluate([&](const std::string& f) { return symbols.at(f).size; }));
  }
  return dims;
}

// Floats are k * 2^-(p-1) - 1 for a random k < 2^p, p the significand width of the dtype: every
// such value is exact in the dtype, so rounding never produces 1.0 and the range stays [-1, 1).
int significandBits(DType t) {
  switch (t) {
    case DType::F16: return 11;
    case DType::BF16: return 8;
    case DType::F32: return 24;
    default: return 53;
  }
}

void fillRandom(Tensor& t, std::mt19937_64& rng) {
  DType dt = t.dtype();
  int bits = significandBits(dt);
  for (int64_t i = 0; i < t.numElements(); ++i) {
    uint64_t r = rng();
    if (isFloat(dt))
      t.setDouble(i, std::ldexp(static_cast<double>(r >> (64 - bits)), 1 - bits) - 1);
    else if (isBool(dt)) t.setInt(i, static_cast<int64_t>(r >> 63));
    else if (isString(dt)) t.setStr(i, std::to_string(r % 10));  // text that reads as a number
    else t.setInt(i, static_cast<int64_t>(r % 10));
  }
}

// Parameter i's values depend only on (seed, i), not on which other inputs came from files.
StatusOr<Tensor> randomInput(const std::string& name, const TensorType& type,
                             const Symbols& symbols, uint64_t seed, size_t index) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> dims, concreteDims(name, type, symbols));
  auto count = checkedNumElements(dims);
  if (!count) return inputError(name, count.status().message());
  if (*count > kMaxRandomBytes / static_cast<int64_t>(dtypeSize(type.dtype())))
    return inputError(name, "a random " + TensorType::of(type.dtype(), dims).str() +
                                " would take more than 1 GiB");
  Tensor t(type.dtype(), dims);
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32),
                    static_cast<uint32_t>(index)};
  std::mt19937_64 rng(seq);
  fillRandom(t, rng);
  return t;
}

// The array in `file`, from `read` when it was read already.
StatusOr<Tensor> readOnce(const std::string& file, const std::map<std::string, Tensor>* read) {
  if (read) {
    auto it = read->find(file);
    if (it != read->end()) return it->second;
  }
  return readNpy(file);
}

}  // namespace

std::string parameterName(const Function& f, size_t i) {
  const std::string& name = f.parameter(i)->name();
  return name.empty() ? "arg" + std::to_string(i) : name;
}

StatusOr<BoundInputs> bindInputs(const Function& f, const RunOptions& o,
                                 const std::map<std::string, Tensor>* read) {
  std::vector<std::string> names;
  std::vector<TensorType> types;
  for (size_t i = 0; i < f.numParameters(); ++i) {
    names.push_back(parameterName(f, i));
    types.push_back(f.parameter(i)->type());
  }
  return bindInputs(names, types, o, read);
}

StatusOr<BoundInputs> bindInputs(const std::vector<std::string>& names,
                                 const std::vector<TensorType>& types, const RunOptions& o,
                                 const std::map<std::string, Tensor>* read,
                                 const SymbolBindings& defaults) {
  KILN_ASSIGN_OR_RETURN(std::vector<std::string> files, assignFiles(names, o.inputs));
  KILN_ASSIGN_OR_RETURN(Symbols symbols, symbolsFromDims(types, o.dims));
  std::vector<BoundInput> bound(types.size());
  // Files first, so that the symbol sizes they fix apply to the random inputs.
  for (size_t i = 0; i < files.size(); ++i) {
    bound[i].name = names[i];
    if (files[i].empty()) continue;
    StatusOr<Tensor> t = readOnce(files[i], read);
    if (!t) return inputError(bound[i].name, files[i] + ": " + t.status().message());
    KILN_RETURN_IF_ERROR(checkInput(bound[i].name, types[i], files[i], *t, symbols));
    bound[i].value = std::move(t).value();
    bound[i].source = files[i];
  }
  // A symbol over a range (--dim N=1..64) that no file fixes: random inputs take its top.
  for (const auto& [symbol, range] : o.ranges) {
    bool known = std::any_of(types.begin(), types.end(), [&](const TensorType& t) {
      return std::any_of(t.dims().begin(), t.dims().end(), [&](const Dim& d) {
        return std::count(d.factors().begin(), d.factors().end(), symbol) > 0;
      });
    });
    if (!known)
      return Status::error("--dim " + symbol + "=" + std::to_string(range.lo) + ".." +
                           std::to_string(range.hi) +
                           ": the program's inputs have no symbolic dimension '" + symbol + "'");
    symbols.emplace(symbol, SymbolSize{range.hi, "the top of its --dim range"});
  }
  for (const auto& [symbol, size] : defaults) symbols.emplace(symbol, SymbolSize{size, "default"});
  for (size_t i = 0; i < files.size(); ++i) {
    if (!files[i].empty()) continue;
    const TensorType& type = types[i];
    if (!o.randomInputs)
      return Status::error("missing input '" + bound[i].name + "' (" + type.str() +
                           "): give it with --input " + bound[i].name +
                           "=FILE.npy, or use --random-inputs");
    KILN_ASSIGN_OR_RETURN(bound[i].value, randomInput(bound[i].name, type, symbols, o.seed, i));
    bound[i].source = "random";
  }
  BoundInputs result{std::move(bound), {}};
  for (const auto& [symbol, size] : symbols) result.symbols[symbol] = size.size;
  return result;
}

}  // namespace kiln::cli
