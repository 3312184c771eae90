// Index simplification: rewrites the i64 index arithmetic of a kernel with the ranges of its
// loop variables, so that the div and mod a reshape or a flattened dim introduces disappear
// where the bounds make them trivial (the Halide and XLA habit of simplifying with bounds):
//
//   (i0 * 384 + j1) / 384 * 384 + (i0 * 384 + j1) % 384   with j1 in [0, 384)
//   -> i0 * 384 + j1
//
// Rules, for a divisor d > 0 and a dividend whose range is non-negative:
//   x / d -> 0 and x % d -> x             when x < d
//   (d*c*a + r) / d -> c*a + r / d        when r >= 0 (terms whose coefficient d divides)
//   (d*c*a + r) % d -> r % d              when r >= 0
//   (a * c) / d -> a / (d / c)            when c divides d
//   (c*w + r) / d -> w / (d / c)          when c divides d and 0 <= r < c
//   (c*w + r) % d -> w % (d / c) * c + r  when c divides d and 0 <= r < c
//   x / a / b -> x / (a * b)
//   x % m / d -> x / d % (m / d)          when d divides m
//   x % a % b -> x % b                    when b divides a
//   x / d * (c*d) + x % d * c -> x * c
//   x / (a*b) * (c*b) + x / a % b * c -> x / a * c
//   x / (a*D) * D + x / a % D -> x / a    for a symbolic D of positive range and a >= 1
//   min(a, b) -> a and max(a, b) -> b     when a's range lies below b's
//   i -> 0                                for the variable of a loop of extent 1
// Ranges come from the kernel's symbols (sym N in [1, 64]) and the enclosing loops ([0, extent)
// for the largest extent the symbols allow) and propagate through +, -, *, /, %, min and max; an
// expression whose range is unknown is left as it is. Every rewrite is exact for the values the
// ranges allow (truncating division of non-negative numbers), so the simplified kernel computes the
// same results. Results and ranges are memoised per node within a loop scope, so the work is linear
// in the size of the expression DAG.
#pragma once

#include "kernel/kernel_ir.h"

namespace kiln::kernel {

// The kernel with its index expressions simplified (the statements are rebuilt; `k` is not
// changed).
Kernel simplifyIndices(const Kernel& k);

// Whether every i64 expression of `s` and the statements below it, loop variables included,
// has a range within [lo, hi] for the ranges of the loops in `s` and of `symbols` (a variable
// bound outside `s` that is no symbol, a load, a cast or a select of i64 has none): then index
// arithmetic may use a narrower type (the cuda target's 32-bit indices).
bool indicesWithin(const Stmt& s, int64_t lo, int64_t hi, const std::vector<Symbol>& symbols = {});

}  // namespace kiln::kernel
