// Guards: the input dims an executable was specialised on that its source left symbolic (an
// ONNX dim_param, a .kir symbol), each with the size it was compiled for. Executable::run checks
// its inputs against them: a guarded dim of another size compiles the source again for it (or,
// with CompileOptions::recompile false, is an error naming the dim, the size and the compiled
// size); any other difference is an error as before.
//
// A dim the source gave a size, or that --dim / the input shape fixed, is a one-value range:
// it is not a guard, and only a symbolic dim of the source may change from run to run.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ir/ir.h"
#include "passes/specialize_shapes.h"
#include "support/status.h"

namespace kiln::runtime {

// One symbolic dim of the source and the inputs' dims it checks.
struct DimGuard {
  std::string symbol;
  int64_t value = -1;                // the size compiled for; -1: unbound, or compiled over `range`
  std::optional<SymbolRange> range;  // the sizes the program serves as it is
  std::vector<std::pair<size_t, size_t>> checks;  // (input, dim) positions
  bool covers(int64_t size) const { return range && size >= range->lo && size <= range->hi; }
  // "for N=8", "for N=1..64" or "with N unbound".
  std::string compiledFor() const;
};

struct Guards {
  std::vector<DimGuard> dims;  // in the order the inputs first use them
  bool empty() const { return dims.empty(); }
  bool ranged() const;  // some dim was compiled over a range
  // Some range compiles each of its sizes (SymbolRange::each): the program serves only the
  // sizes it was compiled for.
  bool eachSize() const;
};

// The buckets (pow2, or each size) that `sizes` fall in: each bucketed symbol's bucket's lower
// end, and the line that says so ("S=33..64, the bucket of S=40 in S=1..512:pow2").
std::pair<SymbolBindings, std::string> bucketsOf(const Guards& guards, const SymbolBindings& sizes);

// The guards of a function whose parameters the source typed `sourceTypes` (before
// specialisation) and that was compiled with `compiled`'s parameters (after; a dim still
// symbolic there is unbound, or compiled over its range in `ranges`). Inputs past either list
// have none.
Guards guardsOf(const std::vector<TensorType>& sourceTypes, const std::vector<TensorType>& compiled,
                const SymbolRanges& ranges = {});
std::vector<TensorType> parameterTypes(const Function& f);

// "N = 8: input 'x' dim 0, input 'y' dim 0", a line per guard (`names`: the inputs' names).
std::string describeGuards(const Guards& g, const std::vector<std::string>& names);

// An artifact's "guards" section: a line "INPUT DIM SYMBOL" per check (the size is the compiled
// function's); and back, given the compiled parameters' types.
std::string guardsText(const Guards& g);
StatusOr<Guards> parseGuards(std::string_view text, const std::vector<TensorType>& compiled,
                             const SymbolRanges& ranges = {});

// What inputs of types `inputs` need against `compiled` (the parameters' types) and `g`:
// an error for any difference outside a guarded dim (the message names the input, as run()
// always has), or for two sizes of one symbol; otherwise the size of every guarded symbol in
// these inputs (equal to `compiled` when nothing guarded changed). `names`: the inputs' names.
StatusOr<SymbolBindings> bindGuards(const Guards& g, const std::vector<TensorType>& compiled,
                                    const std::vector<std::string>& names,
                                    const std::vector<TensorType>& inputs);

// "dim N=12 (compiled for N=8)", each guard whose size differs (and is outside its range),
// joined by ", ".
std::string describeChanges(const Guards& g, const SymbolBindings& sizes);

}  // namespace kiln::runtime
