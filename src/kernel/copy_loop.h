// Copy loops: a loop whose body stores consecutive elements of one buffer into consecutive
// elements of another (the inner dim of a slice, a concatenation, a pad or a reshape copy), or a
// constant there when a condition the loop does not change says so (a pad's border). A backend
// moves such a row as one block (memmove / memset on the CPU) instead of compiling a vectorized
// loop that LLVM would fully unroll: an im2col kernel of nine 512-wide copies took 100-150 ms of
// LLVM time as loops.
//
//   for i in [0, n) { %y[a + i] = select(c, %x[b + i], 0.0) }   (a, b, c free of i)
//   -> if (c) copy n elements from %x[b] to %y[a] else fill %y[a .. a + n) with 0.0
#pragma once

#include <optional>
#include <string>

#include "kernel/kernel_ir.h"

namespace kiln::kernel {

struct CopyLoop {
  const Stmt* store = nullptr;  // the loop's store
  std::string dst;              // the stored buffer
  ExprRef dstStart;             // its first element
  std::string src;              // the loaded buffer
  ExprRef srcStart;
  DType type = DType::F32;
  // With a condition: the row is copied where `cond` holds and filled with `fill` elsewhere
  // (`fillWhen` says which way round); without, it is always copied.
  ExprRef cond;
  ExprRef fill;
  bool fillWhen = false;
};

// `loop` (a For) as a copy loop, or nothing. Parallel and GPU loops are not matched: they split
// their iterations over threads.
std::optional<CopyLoop> matchCopyLoop(const Stmt& loop);

// Whether `e` reads loop variable `v`.
bool usesVar(const ExprRef& e, const std::string& v);

// `index` as start + v with start free of v, or null.
ExprRef startOfUnitStride(const ExprRef& index, const std::string& v);

}  // namespace kiln::kernel
