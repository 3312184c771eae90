// Helpers shared by the graph rewrites: constants, splats, value replacement, permutations.
#include "passes/rewrite_util.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>

namespace kiln::rewrite {

const Tensor* constantOf(const Value* v) {
  if (!v || v->def()->op() != OpCode::Constant) return nullptr;
  const Tensor& t = v->def()->constantData().tensor;
  return t.defined() ? &t : nullptr;
}

bool isSplatTensor(const Tensor& t) {
  int64_t n = t.numElements();
  if (n == 0) return false;
  size_t es = dtypeSize(t.dtype());
  const std::byte* b = t.bytes();
  for (int64_t i = 1; i < n; ++i)
    if (std::memcmp(b, b + static_cast<size_t>(i) * es, es) != 0) return false;
  return true;
}

std::optional<double> splatValue(const Value* v) {
  // Broadcasts and reshapes only copy elements, so a uniform operand gives a uniform result.
  while (v && (v->def()->op() == OpCode::BroadcastInDim || v->def()->op() == OpCode::Reshape)) {
    auto n = v->type().numElements();
    if (n && *n == 0) return std::nullopt;
    v = v->def()->operand(0);
  }
  const Tensor* t = constantOf(v);
  if (!t || !isSplatTensor(*t)) return std::nullopt;
  return t->getDouble(0);
}

bool isSplat(const Value* v, double x) {
  auto s = splatValue(v);
  return s && *s == x;
}

bool isConstantLike(const Value* v) { return constantOf(v) || splatValue(v).has_value(); }

void replaceValue(Value* from, Value* to) {
  KILN_CHECK(from->type() == to->type(), "replacing " + from->type().str() + " by " +
                                             to->type().str() + " in " + from->def()->describe());
  if (from == to) return;
  if (to->name().empty() && !from->name().empty()) to->setName(from->name());
  from->def()->parent()->replaceAllUsesWith(from, to);
}

void eraseIfDead(Node* n) {
  std::vector<Node*> work{n};
  while (!work.empty()) {
    Node* d = work.back();
    work.pop_back();
    if (d->op() == OpCode::Parameter) continue;
    bool used = false;
    for (size_t i = 0; i < d->numResults(); ++i) used = used || d->result(i)->hasUses();
    if (used) continue;
    std::vector<Node*> producers;
    for (Value* v : d->operands())
      if (std::find(producers.begin(), producers.end(), v->def()) == producers.end())
        producers.push_back(v->def());
    d->parent()->erase(d);
    // A producer is erased only once all of its users are gone, and a user cannot outlive its
    // producer, so nothing is erased twice.
    for (Node* p : producers)
      if (std::find(work.begin(), work.end(), p) == work.end()) work.push_back(p);
  }
}

Builder builderBefore(Node* n) {
  Builder b(n->parent());
  b.setInsertionPoint(n);
  b.setLoc(n->loc());
  b.setOrigin(n->origin());
  return b;
}

Value* splatConstant(Builder& b, const TensorType& type, double v) {
  Value* s = b.scalar(type.dtype(), v);
  if (!s || type.rank() == 0) return s;
  return b.broadcastInDim(s, type.dims(), {});
}

bool isIdentityPermutation(const std::vector<int64_t>& p) {
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != static_cast<int64_t>(i)) return false;
  return true;
}

std::vector<int64_t> inversePermutation(const std::vector<int64_t>& p) {
  std::vector<int64_t> inv(p.size());
  for (size_t i = 0; i < p.size(); ++i) inv[static_cast<size_t>(p[i])] = static_cast<int64_t>(i);
  return inv;
}

std::vector<int64_t> composePermutations(const std::vector<int64_t>& inner,
                                         const std::vector<int64_t>& outer) {
  // Result dim i is outer's source dim outer[i], which is inner's source dim inner[outer[i]].
  std::vector<int64_t> q(outer.size());
  for (size_t i = 0; i < outer.size(); ++i) q[i] = inner[static_cast<size_t>(outer[i])];
  return q;
}

Shape permuteShape(const Shape& s, const std::vector<int64_t>& p) {
  Shape r;
  for (int64_t d : p) r.push_back(s[static_cast<size_t>(d)]);
  return r;
}

double constantTolerance(DType t) {
  switch (t) {
    case DType::F16: return 2e-3;     // 10-bit mantissa: ulp 2^-10 ~ 1e-3
    case DType::BF16: return 1.6e-2;  // 7-bit mantissa: ulp 2^-7 ~ 8e-3
    case DType::F32: return 1e-6;     // 23-bit mantissa: ulp 2^-23 ~ 1.2e-7
    default: return 1e-12;
  }
}

bool approxEqual(double a, double b, double tol) { return std::fabs(a - b) <= tol * std::fabs(b); }

double attributeValue(double v, DType t) {
  if (t != DType::F32 || !std::isfinite(v)) return v;
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, static_cast<float>(v));
  if (ec != std::errc()) return v;
  double shortest = v;
  std::from_chars(buf, end, shortest);
  return static_cast<float>(shortest) == static_cast<float>(v) ? shortest : v;
}

size_t numUsers(const Value* v) { return v->uses().size(); }

int64_t tapReads(int64_t x, int64_t y, int64_t stride, int64_t lo, int64_t dil, int64_t t) {
  const int64_t first = t * dil - lo;  // the input index output 0 reads
  const int64_t begin = first >= 0 ? 0 : (-first + stride - 1) / stride;
  const int64_t end = first > x - 1 ? 0 : std::min(y, (x - 1 - first) / stride + 1);
  return std::max<int64_t>(0, end - begin);
}

}  // namespace kiln::rewrite
