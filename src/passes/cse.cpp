// cse: one forward sweep per function with a hash table of the nodes seen so far. Because operands
// are replaced by their kept twin before a node is hashed, chains of duplicates merge in one sweep.
#include "passes/cse.h"

#include <bit>
#include <cstring>
#include <functional>
#include <string_view>
#include <unordered_map>

#include "passes/rewrite_util.h"

namespace kiln {
namespace {

size_t mix(size_t h, size_t v) { return h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)); }

size_t hashBytes(const std::byte* p, size_t n) {
  auto bytes = [&](size_t at, size_t count) {
    return std::hash<std::string_view>()(
        std::string_view(reinterpret_cast<const char*>(p) + at, count));
  };
  // Up to 64 KiB every byte counts. A larger constant (a weight) is hashed by its size, both
  // ends and 64 words spread between them: equal constants still hash alike, and a collision
  // only costs the byte comparison that decides. Hashing every weight in full took 10-15 ms of
  // each sweep on resnet18 (44 MB), and the pipeline sweeps five times.
  constexpr size_t kWhole = 64 * 1024, kEnd = 256, kWords = 64;
  if (n <= kWhole) return bytes(0, n);
  size_t h = mix(std::hash<size_t>()(n), mix(bytes(0, kEnd), bytes(n - kEnd, kEnd)));
  size_t step = (n - 8) / kWords;
  for (size_t i = 0; i < kWords; ++i) h = mix(h, bytes(i * step, 8));
  return h;
}

size_t hashType(const TensorType& t) {
  size_t h = static_cast<size_t>(t.dtype());
  for (const Dim& d : t.dims())
    h = mix(h, d.isStatic() ? std::hash<int64_t>()(d.value()) : std::hash<std::string>()(d.str()));
  return h;
}

size_t hashAttr(const AttrValue& v) {
  size_t h = v.index();
  switch (attrKind(v)) {
    case AttrKind::Int: return mix(h, std::hash<int64_t>()(std::get<0>(v)));
    case AttrKind::Float:
      return mix(h, std::hash<uint64_t>()(std::bit_cast<uint64_t>(std::get<1>(v))));
    case AttrKind::Bool: return mix(h, std::get<2>(v));
    case AttrKind::Enum: return mix(h, std::hash<std::string>()(std::get<3>(v)));
    case AttrKind::Ints:
      for (int64_t e : std::get<4>(v)) h = mix(h, std::hash<int64_t>()(e));
      return h;
    case AttrKind::Floats:
      for (double e : std::get<5>(v)) h = mix(h, std::hash<uint64_t>()(std::bit_cast<uint64_t>(e)));
      return h;
    case AttrKind::DType: return mix(h, static_cast<size_t>(std::get<6>(v)));
    case AttrKind::String: return mix(h, std::hash<std::string>()(std::get<7>(v)));
    case AttrKind::Tensor: {
      const Tensor& t = std::get<8>(v).tensor;
      return mix(mix(h, hashType(t.type())), hashBytes(t.bytes(), t.byteSize()));
    }
  }
  return h;
}

bool floatsEqual(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
}

bool attrEqual(const AttrValue& a, const AttrValue& b) {
  if (a.index() != b.index()) return false;
  switch (attrKind(a)) {
    case AttrKind::Int: return std::get<0>(a) == std::get<0>(b);
    case AttrKind::Float:
      return std::bit_cast<uint64_t>(std::get<1>(a)) == std::bit_cast<uint64_t>(std::get<1>(b));
    case AttrKind::Bool: return std::get<2>(a) == std::get<2>(b);
    case AttrKind::Enum: return std::get<3>(a) == std::get<3>(b);
    case AttrKind::Ints: return std::get<4>(a) == std::get<4>(b);
    case AttrKind::Floats: return floatsEqual(std::get<5>(a), std::get<5>(b));
    case AttrKind::DType: return std::get<6>(a) == std::get<6>(b);
    case AttrKind::String: return std::get<7>(a) == std::get<7>(b);
    case AttrKind::Tensor: return std::get<8>(a).tensor.identical(std::get<8>(b).tensor);
  }
  return false;
}

size_t hashNode(const Node& n) {
  size_t h = static_cast<size_t>(n.op());
  for (Value* v : n.operands()) h = mix(h, std::hash<const Value*>()(v));
  for (const auto& [name, value] : n.attrs())
    h = mix(mix(h, std::hash<std::string>()(name)), hashAttr(value));
  for (size_t i = 0; i < n.numResults(); ++i) h = mix(h, hashType(n.result(i)->type()));
  return h;
}

bool nodesEqual(const Node& a, const Node& b) {
  if (a.op() != b.op() || a.operands() != b.operands() || a.numResults() != b.numResults() ||
      a.attrs().size() != b.attrs().size())
    return false;
  for (size_t i = 0; i < a.numResults(); ++i)
    if (a.result(i)->type() != b.result(i)->type()) return false;
  auto ia = a.attrs().begin();
  for (auto ib = b.attrs().begin(); ib != b.attrs().end(); ++ia, ++ib)
    if (ia->first != ib->first || !attrEqual(ia->second, ib->second)) return false;
  return true;
}

bool cseFunction(Function& f) {
  std::unordered_multimap<size_t, Node*> seen;
  std::vector<Node*> order;
  for (const auto& n : f.nodes()) order.push_back(n.get());
  bool changed = false;
  for (Node* n : order) {
    if (n->op() == OpCode::Parameter) continue;
    size_t h = hashNode(*n);
    Node* twin = nullptr;
    auto [lo, hi] = seen.equal_range(h);
    for (auto it = lo; it != hi && !twin; ++it)
      if (nodesEqual(*it->second, *n)) twin = it->second;
    if (!twin) {
      seen.emplace(h, n);
      continue;
    }
    for (size_t i = 0; i < n->numResults(); ++i)
      rewrite::replaceValue(n->result(i), twin->result(i));
    f.erase(n);
    changed = true;
  }
  return changed;
}

}  // namespace

StatusOr<bool> eliminateCommonSubexpressions(Module& m) {
  bool changed = false;
  for (const auto& f : m.functions()) changed = cseFunction(*f) || changed;
  return changed;
}

}  // namespace kiln
