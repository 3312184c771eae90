// Helpers the schedule passes share (schedule.cpp, gpu_schedule.cpp): statement rewriting and
// the facts about statements their rules ask.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernel/kernel_ir.h"

namespace kiln::kernel::detail {

// Rewrites a statement tree bottom-up, copying each node it visits (lowered kernels may share
// statements with the kernel they came from). `f` sees each rewritten node and returns its
// replacement.
StmtRef rewrite(const StmtRef& s, const std::function<StmtRef(StmtRef)>& f);

// `e` with each node in `replace` replaced (by pointer: expressions are interned); `memo`
// carries the work between calls that share `replace`.
ExprRef replaceAll(const ExprRef& e, const std::unordered_map<const Expr*, ExprRef>& replace,
                   std::unordered_map<const Expr*, ExprRef>& memo);

// `s` (rebuilt) with each expression node in `replace` replaced, in every expression of every
// statement (indices, values, conditions, extents).
StmtRef replaceInStmt(const StmtRef& s, const std::unordered_map<const Expr*, ExprRef>& replace);

// The buffers the loads of `e` read.
std::set<std::string> loadedBuffers(const ExprRef& e);

// The distinct load nodes of `e`, appended to `out` in the order a walk from its root meets
// them.
void loadsIn(const ExprRef& e, std::vector<ExprRef>& out);

// The single statement `s` wraps, through blocks of one statement.
StmtRef unwrap(StmtRef s);

// The loops of the nest `s`, outermost first, appended to `loops` (each loop's body through
// blocks of one statement), and the statement inside the innermost.
StmtRef perfectNest(const StmtRef& s, std::vector<StmtRef>& loops);

// `body` with each statement at its top (through blocks and scratch declarations: a GPU
// target's launches) replaced by f(statement).
StmtRef mapTopLevel(const StmtRef& body, const std::function<StmtRef(const StmtRef&)>& f);

// Whether `s` stores to (or reduces into) any of `buffers`; a library call counts as writing
// anything it names.
bool writesAny(const StmtRef& s, const std::set<std::string>& buffers);

}  // namespace kiln::kernel::detail
