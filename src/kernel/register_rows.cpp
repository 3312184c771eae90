// registerRows (schedule.h): a scratch row of accumulators too long for registers computed in
// blocks of channels that fit.
#include <algorithm>
#include <functional>
#include <string>
#include <unordered_map>

#include "kernel/schedule.h"
#include "kernel/schedule_util.h"

namespace kiln::kernel {
namespace {

// A row updated at more points than this (a global pool, not a window) keeps its one pass: each
// block would walk the whole input with a stride, where the row's own loop streams it once
// (a global average pool over 7x7x2048: 1.8x slower blocked; a 3x3 window: 1.2-1.7x faster).
constexpr int64_t kMaxWindowPoints = 32;

bool isLoop(const Stmt& s) {
  return s.kind == Stmt::Kind::For &&
         (s.loop == LoopKind::Serial || s.loop == LoopKind::Vectorized ||
          s.loop == LoopKind::Unrolled);
}

// What the statements inside one scratch row's declaration are: the loops along the row and
// whether the rest keeps to the rule (registerRows' conditions).
struct RowUses {
  RowUses(const std::string& r, int64_t n) : row(r), length(n) {}
  const std::string& row;
  int64_t length;
  std::vector<const Stmt*> rowLoops;
  int64_t points = 1;            // the most iterations of the loops around a loop along the row
  std::set<std::string> stored;  // buffers other than the row stored in the declaration
  std::set<std::string> loaded;
  bool ok = true;

  bool touchesRow(const ExprRef& e) {
    std::set<std::string> b = detail::loadedBuffers(e);
    loaded.insert(b.begin(), b.end());
    return b.count(row) > 0;
  }
  // Inside a loop along the row: only stores and conditions, the row read and written at the
  // loop's variable.
  void alongRow(const Stmt& s, const ExprRef& c) {
    if (s.kind == Stmt::Kind::Block) {
      for (const StmtRef& b : s.body)
        if (b) alongRow(*b, c);
    } else if (s.kind == Stmt::Kind::If) {
      touchesRow(s.cond);
      for (const StmtRef& b : s.body)
        if (b) alongRow(*b, c);
    } else if (s.kind == Stmt::Kind::Store) {
      if (s.buffer == row) ok &= s.index == c;
      else stored.insert(s.buffer);
      touchesRow(s.index);
      std::vector<ExprRef> loads;
      detail::loadsIn(s.value, loads);
      for (const ExprRef& l : loads) {
        loaded.insert(l->name);
        if (l->name == row) ok &= l->args[0] == c;
      }
    } else {
      ok = false;
    }
  }
  // Outside them: loops, blocks and conditions that neither read nor write the row.
  void around(const Stmt& s, int64_t outer = 1) {
    if (!ok) return;
    if (isLoop(s) && s.extent->kind == Expr::Kind::Const && s.extent->i == length &&
        s.body.size() == 1 && s.body[0]) {
      rowLoops.push_back(&s);
      points = std::max(points, outer);
      alongRow(*s.body[0], var(s.var));
      return;
    }
    if (s.kind == Stmt::Kind::If) ok &= !touchesRow(s.cond);
    else if (isLoop(s)) ok &= !touchesRow(s.extent) && s.extent->kind == Expr::Kind::Const;
    else if (s.kind != Stmt::Kind::Block) ok = false;
    if (isLoop(s) && ok) outer *= s.extent->i;
    for (const StmtRef& b : s.body)
      if (b) around(*b, outer);
  }
};

// The largest block of a row of `length` elements of `bytes` each that divides it and fits in
// `maxBytes`, a multiple of 8 elements (a vector's); 0 when none.
int64_t blockLength(int64_t length, int64_t bytes, int64_t maxBytes) {
  for (int64_t b = maxBytes / bytes; b >= 8; --b)
    if (length % b == 0 && b % 8 == 0) return b;
  return 0;
}

StmtRef blocked(const StmtRef& decl, FreshNames& names, int64_t maxBytes) {
  const int64_t bytes = static_cast<int64_t>(dtypeSize(decl->type));
  if (decl->kind != Stmt::Kind::Alloc || decl->scope != MemoryScope::Local ||
      decl->size * bytes <= maxBytes || decl->body.empty() || !decl->body[0])
    return decl;
  RowUses uses(decl->buffer, decl->size);
  uses.around(*decl->body[0]);
  for (const std::string& b : uses.stored) uses.ok &= uses.loaded.count(b) == 0;
  int64_t block = blockLength(decl->size, bytes, maxBytes);
  if (!uses.ok || uses.rowLoops.empty() || block == 0 || uses.points > kMaxWindowPoints)
    return decl;
  // Each loop along the row covers one block: element c of the block is cb * block + c of the
  // row everywhere but in the row itself, which becomes the block's.
  std::string cb = names.fresh("cb");
  std::unordered_map<const Stmt*, StmtRef> loops;
  for (const Stmt* l : uses.rowLoops) {
    ExprRef c = var(l->var);
    ExprRef element = binary(BinaryOp::Add, binary(BinaryOp::Mul, var(cb), intConst(block)), c);
    // The row's loads were all at c (RowUses), of its type (the verifier's rule).
    StmtRef body = detail::replaceInStmt(l->body[0], {{c.get(), element}});
    body = detail::replaceInStmt(
        body, {{load(decl->buffer, decl->type, element).get(), load(decl->buffer, decl->type, c)}});
    body = detail::rewrite(body, [&](StmtRef s) {
      if (s->kind == Stmt::Kind::Store && s->buffer == decl->buffer) s->index = c;
      return s;
    });
    loops[l] = forLoop(l->var, intConst(block), l->loop, body);
  }
  std::function<StmtRef(const StmtRef&)> place = [&](const StmtRef& s) -> StmtRef {
    if (!s) return s;
    auto it = loops.find(s.get());
    if (it != loops.end()) return it->second;
    auto out = std::make_shared<Stmt>(*s);
    for (StmtRef& b : out->body) b = place(b);
    return out;
  };
  StmtRef inner = alloc(decl->buffer, decl->type, block, decl->scope, place(decl->body[0]));
  return forLoop(cb, intConst(decl->size / block), LoopKind::Serial, inner);
}

}  // namespace

Kernel registerRows(const Kernel& k, int64_t maxBytes) {
  if (k.kind == "opaque" || !k.body) return k;
  FreshNames names(k);
  Kernel out = k;
  bool changed = false;
  out.body = detail::rewrite(k.body, [&](StmtRef s) {
    StmtRef b = blocked(s, names, maxBytes);
    changed |= b != s;
    return b;
  });
  if (changed)
    out.notes.push_back("accumulator rows in blocks of at most " + std::to_string(maxBytes) +
                        " bytes, each kept in registers over the reduced loops");
  return changed ? out : k;
}

int64_t accumulatorsThroughMemory(const Kernel& k, int64_t registerBytes) {
  std::unordered_map<std::string, int64_t> scratch;  // the buffers counted, by their size
  for (const Buffer& b : k.buffers)
    if (b.role == BufferRole::Temp) scratch[b.name] = b.elements();
  int64_t widest = 0;
  auto visit = [&](auto&& self, const Stmt* s, bool inLoop) -> void {
    if (s->kind == Stmt::Kind::Alloc &&
        s->size * static_cast<int64_t>(dtypeSize(s->type)) > registerBytes)
      scratch[s->buffer] = s->size;
    if (s->kind == Stmt::Kind::Store && inLoop && s->value && scratch.count(s->buffer)) {
      std::vector<ExprRef> loads;
      detail::loadsIn(s->value, loads);
      for (const ExprRef& l : loads)
        if (l->name == s->buffer && l->args[0] == s->index)
          widest = std::max(widest, scratch[s->buffer]);
    }
    for (const StmtRef& b : s->body)
      if (b) self(self, b.get(), inLoop || s->kind == Stmt::Kind::For);
  };
  if (k.body) visit(visit, k.body.get(), false);
  return widest;
}

}  // namespace kiln::kernel
