// The rule tables of algebraic-simplify (internal to src/passes). A rule is data: the op it
// applies to, its formula, and a function that returns the value replacing the node's result, or
// nullptr when the rule does not apply. A rule creates nodes (before the node, through
// rewrite::builderBefore) only when it applies; a failed type check while building counts as
// "does not apply", and anything it built is removed by dce.
#pragma once

#include <span>

#include "ir/ir.h"

namespace kiln::simplify {

using RuleFn = Value* (*)(Node& n);

struct Rule {
  OpCode op;
  const char* formula;
  RuleFn apply;
};

// Elementwise arithmetic, logic, select and convert (simplify_rules_arith.cpp).
std::span<const Rule> arithmeticRules();
// Data movement and reductions (simplify_rules_movement.cpp).
std::span<const Rule> movementRules();
// Windowed ops: convolution taps that read only padding (simplify_rules_window.cpp).
std::span<const Rule> windowRules();

}  // namespace kiln::simplify
