// Concatenations written in place: a concatenate whose operands their producers can write
// straight into its buffer needs no kernel and no copy. Each operand's buffer is then a slice of
// the concatenation's (a view: element i of the operand lives at (i / rowLength) * pitch +
// i % rowLength from `offset`), so the producer stores with the concatenation's row pitch (a
// channel concatenation in NHWC is a strided slice). The planner decides it before it places the
// ops, and records for each concatenate why it is in place or why not (`kiln explain`).
//
// A family: the largest concatenate (the root) owns the buffer; a concatenate whose operands
// are a run of the root's (DenseNet's block concatenates are prefixes of the block's last one)
// or that is itself a single-use operand of the root (Inception's nested branches) is a view
// of it too, with the root's pitch. Conditions, each refused with its reason:
//   - every value in the family has static dims, none is a function output, a parameter or a
//     constant (nothing computes those in place), each operand belongs to one family;
//   - each operand's producer computes something and can store strided: an elementwise,
//     reduction, convolution or matrix product kernel (its oneDNN destination then has the
//     concatenation's strides), not an opaque or attention kernel, nor data movement (a slice
//     or pad, which the concatenate's own kernel reads as cheaply: no store to save);
//   - every other reader of a strided value is lowered to loops (elementwise, injective or
//     reduction ops away from library epilogues, whose operands oneDNN reads dense), so that its
//     loads can take the pitch too.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "ir/ir.h"

namespace kiln::fusion {

// A value stored as a slice of another value's buffer (elements, not bytes).
struct StoredView {
  const Value* of = nullptr;  // the root concatenation, which owns the memory
  int64_t offset = 0;         // from the start of `of`'s buffer
  int64_t rowLength = 0;      // elements of one row of this value (its dims from the axis on)
  int64_t pitch = 0;          // elements between two rows in `of`'s buffer
};

struct ConcatViews {
  // Every value stored inside a root: the operands and the concatenates that are views.
  std::map<const Value*, StoredView> views;
  // For each concatenate in place (root or view): the operand values whose writers fill it.
  std::map<const Value*, std::vector<const Value*>> writers;
  // The concatenate nodes no kernel computes.
  std::set<const Node*> inPlace;
  // Each concatenate considered, in program order, with "in place: ..." or "not in place: ...".
  std::vector<std::pair<const Node*, std::string>> notes;
};

ConcatViews planConcatViews(const Function& f,
                            const std::function<std::string(const Value*)>& name);

// The `kiln explain` section: "concatenates written in place:" and a line per note.
std::string explainConcatViews(const ConcatViews& c,
                               const std::function<std::string(const Value*)>& name);

}  // namespace kiln::fusion
