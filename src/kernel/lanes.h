// Lanes: the loads and stores of consecutive iterations of a loop that touch consecutive
// elements, the first of each group aligned to the group, so that a target may move a group as
// one wide access (the GPU's 16-byte loads and stores).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernel/kernel_ir.h"

namespace kiln::kernel {

// The coefficient of `v` in the index `e` when e is affine in v (0 when e does not use v);
// nullopt when v appears under a division, a remainder, a min, a select, ...
std::optional<int64_t> coefficientOf(const ExprRef& e, const ExprRef& v);

// A positive number that divides every value of the i64 expression `e`: constant factors
// multiply, sums keep their terms' greatest common divisor; 1 when none is known. Capped at
// 2^30 (a constant 0 is divisible by anything).
int64_t knownMultiple(const ExprRef& e);

// Whether `s` is made only of stores (and blocks of them), appending them to `stores`: the body
// of a loop whose iterations may split into lanes.
bool storesOnly(const StmtRef& s, std::vector<const Stmt*>& stores);

// For an index `index` of the loop variable `lane` in [0, lanes): the index at lane 0 when the
// index is base + lane and base is a multiple of `lanes` (the lanes' elements are consecutive
// and the first is aligned to the group); else null.
ExprRef laneBase(const ExprRef& index, const std::string& lane, int64_t lanes);

}  // namespace kiln::kernel
