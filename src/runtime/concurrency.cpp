// The concurrency plan: windows of independent kernel groups over the kernel order, split into
// lanes by estimated cost. See concurrency.h.
#include "runtime/concurrency.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

namespace kiln::runtime {
namespace {

// A stage must beat running its window one kernel after another by this factor, estimated: the
// estimates are rough (resnet50's downsampling blocks as stages were estimated 11-18% faster and
// measured 2-3% slower), and where both are close the sequential order is the safer choice.
constexpr double kRequiredGain = 0.75;

// What a kernel does to memory: the values it reads and writes, a slice of a concatenation
// written in place standing for its concatenation (with the slice's offset, -1 for the whole).
struct Access {
  const Value* value;
  int64_t slice;
  bool write;
};

std::vector<Access> accessesOf(const kernel::Kernel& k) {
  std::vector<Access> out;
  for (const kernel::Buffer& b : k.buffers) {
    if (!b.value) continue;
    if (b.role != kernel::BufferRole::Input && b.role != kernel::BufferRole::Output) continue;
    bool write = b.role == kernel::BufferRole::Output;
    if (b.view) out.push_back({b.view->of, write ? b.view->offset : -1, write});
    else out.push_back({b.value, -1, write});
  }
  return out;
}

// Whether two kernels' accesses conflict: the same memory, one of them writing (different slices
// of one concatenation, both written, do not).
bool conflict(const std::vector<Access>& a, const std::vector<Access>& b) {
  for (const Access& x : a)
    for (const Access& y : b) {
      if (x.value != y.value || (!x.write && !y.write)) continue;
      if (x.write && y.write && x.slice >= 0 && y.slice >= 0 && x.slice != y.slice) continue;
      return true;
    }
  return false;
}

struct Groups {
  std::vector<int> parent;
  int find(int i) {
    while (parent[static_cast<size_t>(i)] != i) i = parent[static_cast<size_t>(i)];
    return i;
  }
};

// The window's groups split over `lanes` lanes, longest first, each to the least loaded lane.
ConcurrentStage split(int first, int last, const std::vector<std::vector<int>>& groups,
                      const std::vector<double>& cost, int lanes) {
  std::vector<std::pair<double, size_t>> order;
  for (size_t g = 0; g < groups.size(); ++g) {
    double c = 0;
    for (int k : groups[g]) c += cost[static_cast<size_t>(k)];
    order.push_back({c, g});
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  ConcurrentStage s;
  s.first = first;
  s.last = last;
  s.groups = static_cast<int>(groups.size());
  s.lanes.resize(static_cast<size_t>(std::min<size_t>(static_cast<size_t>(lanes), groups.size())));
  s.laneCost.assign(s.lanes.size(), 0.0);
  for (const auto& [c, g] : order) {
    size_t lane = static_cast<size_t>(std::min_element(s.laneCost.begin(), s.laneCost.end()) -
                                      s.laneCost.begin());
    s.laneCost[lane] += c;
    s.lanes[lane].insert(s.lanes[lane].end(), groups[g].begin(), groups[g].end());
  }
  for (auto& lane : s.lanes) std::sort(lane.begin(), lane.end());
  return s;
}

// The window [first, last] with its groups becomes a stage when the split pays (see the header).
bool consider(int first, int last, Groups& g, const KernelCosts& cost, int threads,
              ConcurrencyPlan& plan) {
  std::vector<std::vector<int>> groups;
  std::vector<int> groupOf(static_cast<size_t>(last - first + 1), -1);
  for (int k = first; k <= last; ++k) {
    int root = g.find(k) - first;
    if (groupOf[static_cast<size_t>(root)] < 0) {
      groupOf[static_cast<size_t>(root)] = static_cast<int>(groups.size());
      groups.emplace_back();
    }
    groups[static_cast<size_t>(groupOf[static_cast<size_t>(root)])].push_back(k);
  }
  if (groups.size() < 2) return false;
  ConcurrentStage s = split(first, last, groups, cost.oneThread, threads);
  double sequential = 0;
  for (int k = first; k <= last; ++k) sequential += cost.allThreads[static_cast<size_t>(k)];
  double longest = *std::max_element(s.laneCost.begin(), s.laneCost.end());
  char why[200];
  std::snprintf(why, sizeof why,
                "%d independent groups; estimated %.3f ms, one after another on %d threads %.3f ms",
                s.groups, longest * 1e3, threads, sequential * 1e3);
  if (!(longest < kRequiredGain * sequential)) return false;
  s.reason = why;
  for (int k = first; k <= last; ++k)
    plan.stageOf[static_cast<size_t>(k)] = static_cast<int>(plan.stages.size());
  plan.stages.push_back(std::move(s));
  return true;
}

}  // namespace

std::vector<KernelRange> ConcurrencyPlan::ranges() const {
  std::vector<KernelRange> r;
  for (const ConcurrentStage& s : stages) r.push_back({s.first, s.last});
  return r;
}

ConcurrencyPlan planConcurrency(const std::vector<kernel::Kernel>& kernels, const KernelCosts& cost,
                                int threads) {
  ConcurrencyPlan plan;
  const int n = static_cast<int>(kernels.size());
  plan.stageOf.assign(kernels.size(), -1);
  if (threads < 2 || cost.oneThread.size() != kernels.size() ||
      cost.allThreads.size() != kernels.size())
    return plan;
  std::vector<std::vector<Access>> access;
  for (const kernel::Kernel& k : kernels) access.push_back(accessesOf(k));
  Groups g;
  g.parent.resize(kernels.size());
  std::iota(g.parent.begin(), g.parent.end(), 0);
  auto conflicts = [&](int a, int b) {
    return conflict(access[static_cast<size_t>(a)], access[static_cast<size_t>(b)]);
  };
  int first = 0, claimed = -1;  // claimed: the last kernel of the last stage
  for (int k = 1; k <= n; ++k) {
    std::vector<int> roots;  // the groups of the window [first, k)
    for (int j = first; j < k; ++j)
      if (std::find(roots.begin(), roots.end(), g.find(j)) == roots.end())
        roots.push_back(g.find(j));
    if (k < n) {
      std::vector<int> deps;  // those kernel k depends on
      for (int j = first; j < k; ++j)
        if (std::find(deps.begin(), deps.end(), g.find(j)) == deps.end() && conflicts(j, k))
          deps.push_back(g.find(j));
      if (deps.size() < roots.size()) {  // some group is independent of k: the window grows
        for (int r : deps) g.parent[static_cast<size_t>(r)] = k;
        continue;
      }
    }
    // Kernels before a window of several groups that depend on some of its groups but not all
    // (the first step of a branch ordered before the fork's other consumers) join it.
    int start = first;
    while (roots.size() > 1 && start - 1 > claimed) {
      const int p = start - 1;
      std::vector<int> deps;
      for (int j = start; j < k; ++j)
        if (std::find(deps.begin(), deps.end(), g.find(j)) == deps.end() && conflicts(p, j))
          deps.push_back(g.find(j));
      if (deps.size() == roots.size()) break;
      g.parent[static_cast<size_t>(p)] = p;
      for (int r : deps) g.parent[static_cast<size_t>(r)] = p;
      start = p;
      roots.clear();
      for (int j = start; j < k; ++j)
        if (std::find(roots.begin(), roots.end(), g.find(j)) == roots.end())
          roots.push_back(g.find(j));
    }
    if (consider(start, k - 1, g, cost, threads, plan)) claimed = k - 1;
    first = k;
  }
  return plan;
}

std::string describeConcurrency(const ConcurrencyPlan& plan,
                                const std::vector<kernel::Kernel>& kernels, int threads) {
  if (plan.stages.empty()) return "";
  std::string text = "concurrent kernels (" + std::to_string(threads) +
                     " threads, one each): " + std::to_string(plan.stages.size()) + " stages\n";
  for (const ConcurrentStage& s : plan.stages) {
    text += "  " + kernels[static_cast<size_t>(s.first)].name + " .. " +
            kernels[static_cast<size_t>(s.last)].name + ":";
    for (size_t l = 0; l < s.lanes.size(); ++l) {
      text += l ? " |" : "";
      for (int k : s.lanes[l]) text += " " + kernels[static_cast<size_t>(k)].name;
    }
    text += " (" + s.reason + ")\n";
  }
  return text;
}

}  // namespace kiln::runtime
