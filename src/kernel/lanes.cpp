// Lane analysis. See lanes.h.
#include "kernel/lanes.h"

#include <numeric>
#include <unordered_map>

#include "kernel/schedule_util.h"

namespace kiln::kernel {
namespace {

constexpr int64_t kMultipleCap = int64_t{1} << 30;

std::optional<int64_t> coefficient(const ExprRef& e, const ExprRef& v,
                                   std::unordered_map<const Expr*, std::optional<int64_t>>& memo) {
  if (e == v) return 1;
  if (e->args.empty()) return 0;
  auto found = memo.find(e.get());
  if (found != memo.end()) return found->second;
  std::optional<int64_t> r;
  std::vector<std::optional<int64_t>> a;
  for (const ExprRef& x : e->args) a.push_back(coefficient(x, v, memo));
  bool uses = false;
  for (const std::optional<int64_t>& x : a) uses = uses || !x || *x != 0;
  if (!uses) r = 0;
  else if (e->kind == Expr::Kind::Binary && a[0] && a[1]) {
    const BinaryOp op = e->binary;
    if (op == BinaryOp::Add) r = *a[0] + *a[1];
    else if (op == BinaryOp::Sub) r = *a[0] - *a[1];
    else if (op == BinaryOp::Mul && *a[1] == 0 && e->args[1]->kind == Expr::Kind::Const)
      r = *a[0] * e->args[1]->i;
    else if (op == BinaryOp::Mul && *a[0] == 0 && e->args[0]->kind == Expr::Kind::Const)
      r = *a[1] * e->args[0]->i;
  }
  memo[e.get()] = r;
  return r;
}

int64_t multiple(const ExprRef& e, std::unordered_map<const Expr*, int64_t>& memo) {
  if (e->kind == Expr::Kind::Const)
    return e->i == 0 ? kMultipleCap : std::gcd(e->i < 0 ? -e->i : e->i, kMultipleCap);
  if (e->kind != Expr::Kind::Binary) return 1;
  auto found = memo.find(e.get());
  if (found != memo.end()) return found->second;
  int64_t r = 1;
  const int64_t a = multiple(e->args[0], memo), b = multiple(e->args[1], memo);
  if (e->binary == BinaryOp::Add || e->binary == BinaryOp::Sub) r = std::gcd(a, b);
  else if (e->binary == BinaryOp::Mul) r = std::gcd(a * b, kMultipleCap);  // a, b <= 2^30
  memo[e.get()] = r;
  return r;
}

}  // namespace

std::optional<int64_t> coefficientOf(const ExprRef& e, const ExprRef& v) {
  std::unordered_map<const Expr*, std::optional<int64_t>> memo;
  return coefficient(e, v, memo);
}

int64_t knownMultiple(const ExprRef& e) {
  std::unordered_map<const Expr*, int64_t> memo;
  return multiple(e, memo);
}

bool storesOnly(const StmtRef& s, std::vector<const Stmt*>& stores) {
  if (!s) return true;
  if (s->kind == Stmt::Kind::Store) {
    stores.push_back(s.get());
    return true;
  }
  if (s->kind != Stmt::Kind::Block) return false;
  for (const StmtRef& b : s->body)
    if (!storesOnly(b, stores)) return false;
  return true;
}

ExprRef laneBase(const ExprRef& index, const std::string& lane, int64_t lanes) {
  const ExprRef v = var(lane);
  std::optional<int64_t> c = coefficientOf(index, v);
  if (!c || *c != 1) return nullptr;
  std::unordered_map<const Expr*, ExprRef> replace{{v.get(), intConst(0)}}, memo;
  ExprRef base = detail::replaceAll(index, replace, memo);
  return knownMultiple(base) % lanes == 0 ? base : nullptr;
}

}  // namespace kiln::kernel
