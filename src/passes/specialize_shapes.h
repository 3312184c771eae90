// specialize-shapes: gives symbolic dimensions concrete extents.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ir/ir.h"
#include "passes/pass.h"
#include "support/status.h"

namespace kiln {

// Symbol -> extent, e.g. {N: 1, S: 128}.
using SymbolBindings = std::map<std::string, int64_t>;

// Parses "N=1,S=128" (the option text of --specialize-shapes=N=1,S=128). Errors name the entry.
StatusOr<SymbolBindings> parseSymbolBindings(std::string_view text);

// `t` with each symbolic dim at its size in `sizes` (every symbol of `t` must be bound there).
TensorType atSizes(const TensorType& t, const SymbolBindings& sizes);

// Symbol -> the extents [lo, hi] one compile serves, e.g. {N: 1..64}.
struct SymbolRange {
  int64_t lo = 0, hi = 0;
  // Bucketed (S=1..512:pow2): each run compiles, once, the range of its size's power-of-two
  // bucket (1, 2, 3..4, 5..8, ..., clipped to lo..hi), and a bucket of one size specialises it.
  bool pow2 = false;
  // Each size its own compile, on its first run (N=1..16:each): what a range becomes when its
  // program cannot be compiled over it (Executable::compile says why).
  bool each = false;
  // "1..64", "1..512:pow2", "1..16:each".
  std::string str() const;
  // The bucket of `size` (in lo..hi) under pow2 (under each: the size alone).
  SymbolRange bucketOf(int64_t size) const;
};
using SymbolRanges = std::map<std::string, SymbolRange>;
// Parses "N=1..64,S=1..512:pow2". Errors name the entry.
StatusOr<SymbolRanges> parseSymbolRanges(std::string_view text);
// Each symbol at the top of its range: the sizes a range program's memory is planned for.
SymbolBindings topsOf(const SymbolRanges& ranges);
// Marks every range to compile each size (each, not pow2) and binds `dims` at the ranges' low
// ends: how a program that cannot be compiled over its ranges is compiled first
// (Executable::compileEach, and kiln explain as it).
void eachAtLowEnds(SymbolRanges& ranges, SymbolBindings& dims);

// The bindings that concrete input shapes imply for the parameters of `f` (one shape per
// parameter, in order). Errors: a wrong number of shapes, a rank or static extent that differs
// from the parameter's type, or one symbol given two extents (each names the parameter).
StatusOr<SymbolBindings> bindingsFromInputShapes(const Function& f,
                                                 const std::vector<std::vector<int64_t>>& shapes);

// Substitutes the bound extents for their symbols in every type of every function, then
// re-derives what follows (a "same" convolution's output extent, a reshape's other symbol, a
// concatenation's total, ...) through the type rules, so dims computed from a bound symbol become
// static too. Returns whether any type changed.
//
// Needs: a verified module. Every bound symbol must appear in it (a misspelt symbol is an error
// listing the module's symbols); extents must be >= 0.
// Leaves true: the module verifies; bound symbols appear nowhere; whole-symbol slices have the
// bound extent as limit.
// Symbols the graph equates are merged on the way, as propagate-shapes does.
// Does not: fold the now-static shape arithmetic (run constant-fold and algebraic-simplify
// after); bind symbols that are not given and not implied.
StatusOr<bool> specializeShapes(Module& m, const SymbolBindings& bindings);

// The pass object for a binding set (kiln-opt --specialize-shapes=N=1,S=128).
std::unique_ptr<Pass> makeSpecializeShapesPass(SymbolBindings bindings);

// The registry entry: specialize-shapes needs bindings, so run without them it is an error that
// says how to give them.
StatusOr<bool> specializeShapesWithoutBindings(Module& m);

}  // namespace kiln
