// Buffer assignment over the kernel order: liveness, in-place reuse, greedy-by-size offsets.
#include "runtime/buffer_plan.h"

#include <cstdio>
#include <functional>
#include <limits>
#include <set>
#include <unordered_set>

namespace kiln::runtime {
namespace {

int64_t alignUp(int64_t n, int64_t alignment) {
  return (n + alignment - 1) / alignment * alignment;
}

// The indices of the loads of `buffer` in `e`, each node of the expression DAG visited once.
void collectLoads(const kernel::ExprRef& e, const std::string& buffer,
                  std::vector<kernel::ExprRef>& out) {
  std::unordered_set<const kernel::Expr*> seen;
  std::function<void(const kernel::ExprRef&)> walk = [&](const kernel::ExprRef& x) {
    if (!seen.insert(x.get()).second) return;
    if (x->kind == kernel::Expr::Kind::Load && x->name == buffer) out.push_back(x->args[0]);
    for (const auto& a : x->args) walk(a);
  };
  walk(e);
}

// Whether kernel `k` may write `out` over `in`: `in` is read only inside the values stored to
// `out`, always at the index being stored, and nothing else (a call, another store) reads it;
// or a wide copy (Stmt::Copy) reads a group of it that a later copy of the same block writes to
// `out` (the group is read whole before it is overwritten, and no other step reads it after).
bool elementwiseAccess(const kernel::Kernel& k, const std::string& in, const std::string& out) {
  bool ok = true, stored = false;
  std::set<const kernel::Stmt*> pairedCopies;  // copies of `in` whose block writes the group out
  auto copiedOut = [&](const std::vector<kernel::StmtRef>& steps, size_t i) {
    for (size_t j = i + 1; j < steps.size(); ++j)
      if (steps[j] && steps[j]->kind == kernel::Stmt::Kind::Copy && steps[j]->buffer == out &&
          steps[j]->index == steps[i]->fromIndex && steps[j]->lanes == steps[i]->lanes)
        return true;
    return false;
  };
  std::function<void(const kernel::StmtRef&)> walk = [&](const kernel::StmtRef& s) {
    if (!s || !ok) return;
    using K = kernel::Stmt::Kind;
    switch (s->kind) {
      case K::Store: {
        std::vector<kernel::ExprRef> loads;
        collectLoads(s->value, in, loads);
        collectLoads(s->index, in, loads);
        if (s->buffer == out) {
          stored = true;
          for (const auto& idx : loads)
            if (idx != s->index) ok = false;  // interned: equal means the same node
        } else if (!loads.empty()) {
          ok = false;
        }
        return;
      }
      case K::Call:
        for (const std::string& a : s->args)
          if (a == in || a == out) ok = false;
        return;
      case K::Block:  // its copies of `in` (checked here, where the later steps are seen)
        for (size_t i = 0; i < s->body.size(); ++i)
          if (s->body[i] && s->body[i]->kind == K::Copy && s->body[i]->from == in &&
              copiedOut(s->body, i))
            pairedCopies.insert(s->body[i].get());
        break;
      case K::Copy:
        stored = stored || s->buffer == out;
        if (s->buffer == in || s->from == out) ok = false;
        if (s->from == in && !pairedCopies.count(s.get())) ok = false;
        return;
      case K::Reduce: {
        std::vector<kernel::ExprRef> loads;
        collectLoads(s->value, in, loads);
        collectLoads(s->index, in, loads);
        if (!loads.empty() || s->buffer == out) ok = false;
        return;
      }
      case K::For:
      case K::If: {
        std::vector<kernel::ExprRef> loads;
        if (s->extent) collectLoads(s->extent, in, loads);
        if (s->cond) collectLoads(s->cond, in, loads);
        if (!loads.empty()) ok = false;
        break;
      }
      default: break;
    }
    for (const auto& b : s->body) walk(b);
  };
  walk(k.body);
  return ok && stored;
}

// Slices of a concatenation written in place (kernel::Buffer::view) take no memory of their own:
// the concatenation's buffer is live from the first kernel that writes a slice to the last that
// reads it or any slice.
template <typename SlotFor>
Status planSlices(const std::vector<kernel::Kernel>& kernels, BufferPlan& p, SlotFor&& slotFor) {
  std::map<const Value*, std::pair<int, int>> live;  // root -> first write, last read
  for (const kernel::Kernel& k : kernels)
    for (const kernel::Buffer& b : k.buffers) {
      if (!b.view || !b.value) continue;
      Slot& s = p.values.at(b.value);
      Slot& root = slotFor(b.view->of);
      if (s.storage != Storage::Arena || root.storage != Storage::Arena)
        return Status::error("kernel " + k.name + ": %" + b.name +
                             " is a slice of a concatenation outside the arena");
      s.sliceOf = b.view->of;
      s.sliceBytes = b.view->offset * static_cast<int64_t>(dtypeSize(b.type));
      auto& range = live.try_emplace(b.view->of, std::numeric_limits<int>::max(), 0).first->second;
      if (b.role == kernel::BufferRole::Output) range.first = std::min(range.first, s.first);
      range.second = std::max(range.second, s.last);
    }
  for (const auto& [root, range] : live) {
    Slot& r = p.values.at(root);
    r.first = std::min(range.first, r.last);
    r.last = std::max(r.last, range.second);
  }
  return Status::ok();
}

struct Item {
  const Value* value = nullptr;  // null for a temp
  int kernel = -1, temp = -1;    // a temp: which kernel and which of its temps
  int64_t bytes = 0;
  kernel::ExprRef elements;  // symbolic: the element count's expression
  int64_t elementBytes = 0;
  int first = 0, last = 0;
  // Where the item comes in the function: its node's position and result index (a temp: after
  // every value, by kernel and temp), so that the placement never depends on heap addresses.
  std::pair<size_t, size_t> rank;
};

// The plan's items for offsetsAt: each with its offset, size and the items live at once with it
// that lie below it. Only a plan with symbolic items needs the last.
void recordItems(const std::vector<Item>& items,
                 const std::vector<std::pair<size_t, int64_t>>& placed, int64_t alignment,
                 BufferPlan& p) {
  p.alignment = alignment;
  p.items.resize(items.size());
  for (const auto& [i, offset] : placed) {
    ArenaItem& a = p.items[i];
    a.offset = offset;
    a.first = items[i].first;
    a.last = items[i].last;
    a.elements = items[i].elements;
    a.bytes = alignUp(items[i].bytes, alignment);
    a.elementBytes = items[i].elementBytes;
  }
  if (!p.symbolic()) return;
  for (size_t i = 0; i < p.items.size(); ++i)
    for (size_t j = 0; j < p.items.size(); ++j) {
      const ArenaItem &a = p.items[i], &b = p.items[j];
      if (j != i && b.first <= a.last && a.first <= b.last && b.offset + b.bytes <= a.offset)
        p.items[i].below.push_back(int(j));
    }
}

// planBuffers' steps over one function's kernels, in order: liveness, the concurrent ranges,
// values written in place, the arena's items, then their offsets.
class Planner {
 public:
  Planner(const Function& f, const std::vector<kernel::Kernel>& kernels, int64_t alignment,
          const std::vector<KernelRange>& concurrent)
      : f_(f), kernels_(kernels), alignment_(alignment), rangeOf_(kernels.size(), nullptr) {
    for (const KernelRange& r : concurrent)
      for (int i = std::max(r.first, 0); i <= r.last && i < static_cast<int>(kernels.size()); ++i)
        rangeOf_[static_cast<size_t>(i)] = &r;
    for (size_t i = 0; i < f.outputs().size(); ++i) outputIndex_.emplace(f.outputs()[i], int(i));
  }

  StatusOr<BufferPlan> run() {
    KILN_RETURN_IF_ERROR(liveness());
    KILN_RETURN_IF_ERROR(
        planSlices(kernels_, p_, [this](const Value* v) -> Slot& { return slotFor(v); }));
    widenConcurrent();
    writeInPlace();
    std::vector<Item> items = valueItems();
    tempItems(items);
    // The lower bound: the largest sum of live bytes at one kernel.
    for (size_t i = 0; i < kernels_.size(); ++i) {
      int64_t live = 0;
      for (const Item& it : items)
        if (it.first <= int(i) && int(i) <= it.last) live += it.bytes;
      p_.lowerBoundBytes = std::max(p_.lowerBoundBytes, live);
    }
    const std::vector<std::pair<size_t, int64_t>> placed = place(items);
    resolveOffsets();
    recordItems(items, placed, alignment_, p_);
    return std::move(p_);
  }

 private:
  Slot& slotFor(const Value* v) {
    auto it = p_.values.find(v);
    if (it != p_.values.end()) return it->second;
    Slot s;
    s.bytes = static_cast<int64_t>(v->type().numElements().value_or(0) *
                                   static_cast<int64_t>(dtypeSize(v->type().dtype())));
    if (v->def()->op() == OpCode::Parameter) {
      s.storage = Storage::Parameter;
      s.offset = v->def()->attrInt("index");
    } else if (v->def()->op() == OpCode::Constant) {
      s.storage = Storage::Constant;
    } else if (outputIndex_.count(v)) {
      s.storage = Storage::Output;
      s.offset = outputIndex_[v];
    }
    return p_.values.emplace(v, s).first->second;
  }

  // The kernel that defines each value and the last that reads it.
  Status liveness() {
    p_.temps.resize(kernels_.size());
    p_.tempItems.resize(kernels_.size());
    for (size_t i = 0; i < kernels_.size(); ++i) {
      for (const kernel::Buffer& b : kernels_[i].buffers) {
        if (b.role == kernel::BufferRole::Temp || b.role == kernel::BufferRole::Internal) continue;
        if (!b.value)
          return Status::error("kernel " + kernels_[i].name + ": buffer %" + b.name +
                               " holds no graph value");
        Slot& s = slotFor(b.value);
        // A value of symbolic dims takes the most its kernels' buffers can hold.
        if (!b.value->type().isStatic()) {
          s.bytes = std::max(s.bytes, b.elements() * static_cast<int64_t>(dtypeSize(b.type)));
          if (b.isSymbolic() && !elementsOf_.count(b.value))
            elementsOf_[b.value] = kernel::elementCount(b.extents());
        }
        if (b.role == kernel::BufferRole::Output) s.first = static_cast<int>(i);
        s.last = std::max(s.last, static_cast<int>(i));
      }
    }
    return Status::ok();
  }

  // A concurrent range's buffers (and the concatenations of its slices) live over all of it.
  void widenConcurrent() {
    for (size_t i = 0; i < kernels_.size(); ++i) {
      const KernelRange* r = rangeOf_[i];
      if (!r) continue;
      for (const kernel::Buffer& b : kernels_[i].buffers) {
        if (!b.value || b.role == kernel::BufferRole::Temp ||
            b.role == kernel::BufferRole::Internal)
          continue;
        for (const Value* v : {b.value, b.view ? b.view->of : nullptr}) {
          if (!v) continue;
          Slot& s = p_.values.at(v);
          s.first = std::min(s.first, r->first);
          s.last = std::max(s.last, r->last);
        }
      }
    }
  }

  // An arena value written by an elementwise kernel over an arena input that dies there.
  void writeInPlace() {
    for (size_t i = 0; i < kernels_.size(); ++i) {
      const kernel::Kernel& k = kernels_[i];
      if (rangeOf_[i]) continue;
      for (const kernel::Buffer& o : k.buffers) {
        if (o.role != kernel::BufferRole::Output) continue;
        Slot& out = p_.values[o.value];
        if (out.storage != Storage::Arena || out.sharesWith || out.sliceOf) continue;
        for (const kernel::Buffer& in : k.buffers) {
          if (in.role != kernel::BufferRole::Input) continue;
          Slot& src = p_.values[in.value];
          if (src.storage != Storage::Arena || src.sliceOf || src.last != static_cast<int>(i) ||
              src.bytes != out.bytes || dtypeSize(in.type) != dtypeSize(o.type))
            continue;
          bool taken = false;
          for (const auto& [v, s] : p_.values) taken |= s.sharesWith == in.value;
          if (taken || !elementwiseAccess(k, in.name, o.name)) continue;
          out.sharesWith = in.value;
          ++p_.inPlace;
          break;
        }
      }
    }
  }

  // The value a value in place shares its memory with, through chains of them.
  const Value* rootOf(const Value* v) {
    while (p_.values[v].sharesWith) v = p_.values[v].sharesWith;
    return v;
  }

  // The arena's values (a value in place extends its source's interval).
  std::vector<Item> valueItems() {
    std::vector<Item> items;
    std::map<const Node*, size_t> position;
    for (const auto& n : f_.nodes()) position.emplace(n.get(), position.size());
    for (auto& [v, s] : p_.values) {
      if (s.storage != Storage::Arena || s.sharesWith || s.sliceOf) continue;
      itemOf_[v] = items.size();
      auto e = elementsOf_.find(v);
      items.push_back(Item{v,
                           -1,
                           -1,
                           s.bytes,
                           e == elementsOf_.end() ? nullptr : e->second,
                           int64_t(dtypeSize(v->type().dtype())),
                           s.first,
                           s.last,
                           {position.at(v->def()), v->index()}});
    }
    for (auto& [v, s] : p_.values) {
      if (!s.sharesWith) continue;
      Item& it = items[itemOf_.at(rootOf(v))];
      it.last = std::max(it.last, s.last);
    }
    return items;
  }

  // Each kernel's temps, live over the kernel (or its concurrent range).
  void tempItems(std::vector<Item>& items) {
    for (size_t i = 0; i < kernels_.size(); ++i) {
      int t = 0;
      for (const kernel::Buffer& b : kernels_[i].buffers) {
        if (b.role != kernel::BufferRole::Temp) continue;
        int64_t bytes = b.elements() * static_cast<int64_t>(dtypeSize(b.type));
        const KernelRange* r = rangeOf_[i];
        p_.tempItems[i].push_back(int(items.size()));
        items.push_back(Item{nullptr,
                             int(i),
                             t,
                             bytes,
                             b.isSymbolic() ? kernel::elementCount(b.extents()) : nullptr,
                             int64_t(dtypeSize(b.type)),
                             r ? r->first : int(i),
                             r ? r->last : int(i),
                             {f_.nodes().size() + i, static_cast<size_t>(t)}});
        ++t;
        p_.temps[i].push_back(0);
      }
    }
  }

  // Greedy by size: each item at the lowest offset free over its live interval.
  std::vector<std::pair<size_t, int64_t>> place(const std::vector<Item>& items) {
    std::vector<size_t> order(items.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      if (items[a].bytes != items[b].bytes) return items[a].bytes > items[b].bytes;
      return items[a].rank < items[b].rank;
    });
    std::vector<std::pair<size_t, int64_t>> placed;  // item, offset
    for (size_t idx : order) {
      const Item& it = items[idx];
      std::vector<std::pair<int64_t, int64_t>> busy;
      for (const auto& [other, off] : placed) {
        const Item& o = items[other];
        if (o.first <= it.last && it.first <= o.last)
          busy.push_back({off, off + alignUp(o.bytes, alignment_)});
      }
      std::sort(busy.begin(), busy.end());
      int64_t offset = 0;
      for (const auto& [lo, hi] : busy) {
        if (offset + alignUp(it.bytes, alignment_) <= lo) break;
        offset = std::max(offset, hi);
      }
      placed.push_back({idx, offset});
      p_.arenaBytes = std::max(p_.arenaBytes, offset + alignUp(it.bytes, alignment_));
      if (it.value) p_.values[it.value].offset = offset;
      else p_.temps[static_cast<size_t>(it.kernel)][static_cast<size_t>(it.temp)] = offset;
    }
    return placed;
  }

  // Values in place and slices take their root's offset (a slice's plus its own).
  void resolveOffsets() {
    for (auto& [v, s] : p_.values) {
      if (s.storage == Storage::Arena && !s.sharesWith && !s.sliceOf) s.item = int(itemOf_.at(v));
      if (!s.sharesWith) continue;
      const Value* root = rootOf(v);
      s.offset = p_.values[root].offset;
      s.item = int(itemOf_.at(root));
    }
    for (auto& [v, s] : p_.values) {
      if (!s.sliceOf) continue;
      s.offset = p_.values[s.sliceOf].offset + s.sliceBytes;
      s.item = p_.values[s.sliceOf].item;
    }
  }

  const Function& f_;
  const std::vector<kernel::Kernel>& kernels_;
  int64_t alignment_;
  std::vector<const KernelRange*> rangeOf_;  // each kernel's concurrent range, if any
  std::map<const Value*, int> outputIndex_;
  std::map<const Value*, kernel::ExprRef> elementsOf_;  // of values with symbolic dims
  std::map<const Value*, size_t> itemOf_;
  BufferPlan p_;
};

}  // namespace

StatusOr<BufferPlan> planBuffers(const Function& f, const std::vector<kernel::Kernel>& kernels,
                                 int64_t alignment, const std::vector<KernelRange>& concurrent) {
  return Planner(f, kernels, alignment, concurrent).run();
}

bool BufferPlan::symbolic() const {
  return std::any_of(items.begin(), items.end(), [](const ArenaItem& i) { return i.elements; });
}

std::vector<int64_t> BufferPlan::offsetsAt(const std::map<std::string, int64_t>& sizes) const {
  if (!symbolic()) return {};
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return items[a].offset < items[b].offset; });
  std::vector<int64_t> at(items.size(), 0), bytes(items.size(), 0);
  for (size_t i : order) {
    const ArenaItem& it = items[i];
    bytes[i] = it.bytes;
    if (std::optional<int64_t> n =
            it.elements ? kernel::evaluateExtent(it.elements, sizes) : std::nullopt)
      bytes[i] = std::min(it.bytes, alignUp(*n * it.elementBytes, alignment));
    for (int b : it.below) at[i] = std::max(at[i], at[size_t(b)] + bytes[size_t(b)]);
  }
  return at;
}

std::string describeBufferPlan(const BufferPlan& p) {
  auto mib = [](int64_t b) {
    char buf[32];
    if (b < 1024 * 1024) std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
    else std::snprintf(buf, sizeof buf, "%.2f MiB", b / 1048576.0);
    return std::string(buf);
  };
  char ratio[32];
  std::snprintf(ratio, sizeof ratio, "%.2f",
                p.lowerBoundBytes ? double(p.arenaBytes) / double(p.lowerBoundBytes) : 1.0);
  const bool symbolic = p.symbolic();
  return "arena " + mib(p.arenaBytes) + (symbolic ? " at the top of the ranges" : "") +
         " (liveness lower bound " + mib(p.lowerBoundBytes) + ", ratio " + ratio + "; " +
         std::to_string(p.inPlace) + " values written in place" +
         (symbolic ? "; a run packs its buffers at its own sizes" : "") + ")";
}

}  // namespace kiln::runtime
