#include "roofline.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <thread>

#include "ir/text/text.h"
#include "kernel/schedule.h"

namespace kiln::cli {
namespace {

using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

double copyBandwidth(int threads) {
  const size_t bytes = size_t{256} << 20;
  std::unique_ptr<char[]> a(new char[bytes]), b(new char[bytes]);
  std::memset(a.get(), 1, bytes);  // touch every page before timing
  std::memset(b.get(), 0, bytes);
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    auto start = Clock::now();
    std::vector<std::thread> pool;
    size_t chunk = bytes / static_cast<size_t>(threads);
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        size_t at = chunk * static_cast<size_t>(t);
        size_t n = t + 1 == threads ? bytes - at : chunk;
        std::memcpy(b.get() + at, a.get() + at, n);
      });
    for (auto& t : pool) t.join();
    best = std::min(best, msSince(start));
  }
  return 2.0 * static_cast<double>(bytes) / (best * 1e6);  // read + write
}

// The best time in ms, over `reps` runs on zero-filled inputs after a warm-up run, of the
// kernels of `exe` of kind `only` (all with nullopt), by each kernel's clock (a device's events
// on a GPU: the copies in and out are not counted); `bytes`: what those kernels move.
StatusOr<double> bestKernels(const runtime::Executable& exe, int reps,
                             std::optional<fusion::KernelKind> only, double* bytes) {
  std::vector<Tensor> inputs;
  const Function& f = exe.function();
  for (size_t i = 0; i < f.numParameters(); ++i)
    inputs.emplace_back(f.parameter(i)->type().dtype(), f.parameter(i)->type().staticDims());
  std::vector<Tensor> outputs;
  KILN_RETURN_IF_ERROR(exe.runInto(inputs, outputs));
  const auto& kernels = exe.plan().kernels;
  auto counted = [&](size_t k) {
    return k < kernels.size() && (!only || kernels[k].kind == *only);
  };
  if (bytes) {
    *bytes = 0;
    for (size_t k = 0; k < kernels.size(); ++k)
      if (counted(k)) *bytes += static_cast<double>(kernels[k].bytesRead + kernels[k].bytesWritten);
  }
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    std::vector<double> ms;
    KILN_RETURN_IF_ERROR(exe.runInto(inputs, outputs, &ms));
    double sum = 0;
    for (size_t k = 0; k < ms.size(); ++k)
      if (counted(k)) sum += ms[k];
    best = std::min(best, sum);
  }
  return best;
}

StatusOr<std::unique_ptr<runtime::Executable>> compileText(const std::string& text,
                                                           const runtime::CompileOptions& o) {
  KILN_ASSIGN_OR_RETURN(auto module, parseModule(text, "roofline.kir"));
  return runtime::Executable::compile(std::move(module), o);
}

std::string square(int64_t n) {
  const std::string d = std::to_string(n);
  return "%a: f32[" + d + "," + d + "], %b: f32[" + d + "," + d + "]) -> (f32[" + d + "," + d +
         "]) {\n  %c = f32[" + d + "," + d + "] dot_general(%a, %b)";
}

// A kernel's ceiling: copy bandwidth for loops and reductions, the matmul rate for contractions
// and whole recurrences (lstm, gru: their steps' matrix products are their work).
const char* kindGroup(const fusion::Kernel& k) {
  switch (k.kind) {
    case fusion::KernelKind::Loop:
    case fusion::KernelKind::Reduction: return "memory";
    case fusion::KernelKind::Contraction: return "compute";
    default:
      if (k.anchor && (k.anchor->op() == OpCode::Lstm || k.anchor->op() == OpCode::Gru))
        return "compute";
      return "other";
  }
}

// A copy of each memory-bound kernel's bytes (read + written; 0: none) on the host, as a Kiln
// loop compiled with `base` (its threads, its thread pool), best of 5, in ms (-1: none). Sizes
// on a grid of eighth-octaves share one compile; the time is scaled to the bytes.
StatusOr<std::vector<double>> hostCopies(const std::vector<int64_t>& bytes,
                                         const runtime::CompileOptions& base) {
  std::map<int64_t, double> msOf;  // elements of a grid size -> ms
  std::vector<double> out;
  for (int64_t b : bytes) {
    if (b <= 0) {
      out.push_back(-1);
      continue;
    }
    const double n = static_cast<double>(std::max<int64_t>(b / 8, 1));
    const auto grid =
        static_cast<int64_t>(std::llround(std::exp2(std::round(std::log2(n) * 8) / 8)));
    auto it = msOf.find(grid);
    if (it == msOf.end()) {
      const std::string d = std::to_string(grid);
      KILN_ASSIGN_OR_RETURN(auto copy,
                            compileText("func @main(%x: f32[" + d + "]) -> (f32[" + d +
                                            "]) {\n  %y = f32[" + d + "] neg(%x)\n  return %y\n}",
                                        base));
      KILN_ASSIGN_OR_RETURN(double ms, bestKernels(*copy, 5, std::nullopt, nullptr));
      it = msOf.emplace(grid, ms).first;
    }
    out.push_back(it->second * n / static_cast<double>(grid));
  }
  return out;
}

}  // namespace

StatusOr<Ceilings> measureCeilings(const runtime::Executable& exe, runtime::CompileOptions base) {
  base.cacheDir.clear();
  base.sourceKey.clear();
  base.dims = {};
  Ceilings c;
  std::vector<int64_t> copyBytes;
  for (const fusion::Kernel& k : exe.plan().kernels)
    copyBytes.push_back(std::string(kindGroup(k)) == "memory" ? k.bytesRead + k.bytesWritten : 0);
  StatusOr<std::optional<runtime::DeviceCeilings>> measured = exe.measureDevice(20, copyBytes);
  if (!measured) return measured.status();
  const std::optional<runtime::DeviceCeilings>& device = *measured;
  const int threads = exe.threads();
  // A device's product must be large enough to fill it.
  const int64_t n = device ? 8192 : 2048;
  if (device) {
    c.where = base.backend;
    c.copyGBs = device->copyGBs;
    c.aloneMs = device->aloneMs;
    c.aloneEpilogueMs = device->aloneEpilogueMs;
    c.aloneColdMs = device->aloneColdMs;
    c.callsMs = device->callsMs;
    c.copyMs = device->copyMs;
  } else {
    c.where = std::to_string(threads) + (threads == 1 ? " thread" : " threads");
    c.copyGBs = copyBandwidth(threads);
    c.copyOneThreadGBs = threads > 1 ? copyBandwidth(1) : c.copyGBs;
    KILN_ASSIGN_OR_RETURN(c.copyMs, hostCopies(copyBytes, base));
  }
  KILN_ASSIGN_OR_RETURN(auto mm, compileText("func @main(" + square(n) +
                                                 R"( {lhs_contracting = [1], rhs_contracting = [0]}
  return %c
})",
                                             base));
  KILN_ASSIGN_OR_RETURN(double mmMs, bestKernels(*mm, 3, fusion::KernelKind::Contraction, nullptr));
  const double nd = static_cast<double>(n);
  c.matmulGFs = 2.0 * nd * nd * nd / (mmMs * 1e6);
  c.matmul = base.precision + " " + std::to_string(n) + "^3";
  KILN_ASSIGN_OR_RETURN(auto fused, compileText(R"(
func @main(%x: f32[67108864], %w: f32[67108864], %b: f32[67108864], %r: f32[67108864]) -> (f32[67108864]) {
  %m = f32[67108864] mul(%x, %w)
  %a = f32[67108864] add(%m, %b)
  %g = f32[67108864] gelu(%a)
  %o = f32[67108864] add(%g, %r)
  return %o
})",
                                                base));
  double bytes = 0;
  KILN_ASSIGN_OR_RETURN(double fusedMs, bestKernels(*fused, 3, std::nullopt, &bytes));
  c.fusedGBs = bytes / (fusedMs * 1e6);
  return c;
}

namespace {

struct Group {
  int kernels = 0;
  double bytes = 0, flops = 0, ms = 0;
};

// Each kernel's median over the runs.
std::vector<double> medians(size_t kernels, const std::vector<std::vector<double>>& kernelMs) {
  std::vector<double> med(kernels, 0);
  for (size_t k = 0; k < kernels; ++k) {
    std::vector<double> t;
    for (const auto& run : kernelMs)
      if (k < run.size()) t.push_back(run[k]);
    if (t.empty()) continue;
    std::sort(t.begin(), t.end());
    med[k] = t[t.size() / 2];
  }
  return med;
}

std::string sprint(const char* fmt, auto... args) {
  char buf[1024];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

// The kernels with library calls against those calls made alone (Ceilings::aloneMs, bare;
// aloneEpilogueMs, with the library's epilogues; aloneColdMs, the same with operands read from
// memory, as the program's weights are): totals, then the kernels furthest from their calls
// alone (from memory where timed so), at most 8. Where the program's calls were also timed
// without the kernels' loops (Ceilings::callsMs), a kernel's time splits into its calls (with the
// library's epilogue) and the loops after them, and the calls are compared with the same calls
// alone: the product's own cost in the program against the library's, apart from Kiln's loops.
std::string aloneLines(const std::vector<fusion::Kernel>& kernels, const std::vector<double>& med,
                       const Ceilings& c, bool json) {
  double kiln = 0, alone = 0, same = 0, cold = 0, calls = 0;
  int count = 0;
  std::vector<size_t> order;
  const bool split = c.callsMs.size() >= kernels.size();
  const bool withEpilogue = c.aloneEpilogueMs.size() >= c.aloneMs.size();
  const bool fromMemory = withEpilogue && c.aloneColdMs.size() >= c.aloneMs.size();
  auto callsOf = [&](size_t k) { return split ? std::max(c.callsMs[k], 0.0) : med[k]; };
  auto sameOf = [&](size_t k) { return withEpilogue ? c.aloneEpilogueMs[k] : c.aloneMs[k]; };
  auto refOf = [&](size_t k) { return fromMemory ? c.aloneColdMs[k] : sameOf(k); };
  for (size_t k = 0; k < kernels.size() && k < c.aloneMs.size(); ++k) {
    if (c.aloneMs[k] <= 0) continue;
    ++count;
    kiln += med[k];
    alone += c.aloneMs[k];
    same += sameOf(k);
    cold += refOf(k);
    calls += callsOf(k);
    order.push_back(k);
  }
  if (json)
    return sprint(", \"library_alone\": {\"count\": %d, \"kiln_ms\": %.4f, \"alone_ms\": "
                  "%.4f, \"alone_epilogue_ms\": %.4f%s%s}",
                  count, kiln, alone, same,
                  fromMemory ? sprint(", \"alone_cold_ms\": %.4f", cold).c_str() : "",
                  split ? sprint(", \"calls_ms\": %.4f", calls).c_str() : "");
  if (!count) return "";
  std::string out = sprint("  kernels with library calls: %d, %.3f ms; the calls alone (same "
                           "shapes): %.3f ms bare, %.3f ms with their epilogues",
                           count, kiln, alone, same);
  if (fromMemory) out += sprint(", %.3f ms so with operands from memory", cold);
  out += sprint("; Kiln / alone %.3f, %.3f", kiln / alone, kiln / same);
  out += fromMemory ? sprint(", %.3f\n", kiln / cold) : "\n";
  if (split) {
    out += sprint("    of which their calls (with the library's epilogues) %.3f ms, calls / alone "
                  "with epilogues %.3f",
                  calls, calls / same);
    if (fromMemory) out += sprint(" (from memory %.3f)", calls / cold);
    out += sprint("; the loops after the calls %.3f ms\n", kiln - calls);
  }
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return callsOf(a) / refOf(a) > callsOf(b) / refOf(b); });
  out += sprint("  %s furthest from their calls alone (kernel ms;%s alone ms bare, with "
                "epilogues%s; %s / the last):\n",
                split ? "calls" : "kernels", split ? " its calls ms;" : "",
                fromMemory ? ", from memory" : "", split ? "calls" : "kernel");
  for (size_t i = 0; i < order.size() && i < 8; ++i) {
    const size_t k = order[i];
    const fusion::Kernel& kk = kernels[k];
    out += sprint("    k%-3d %-12s %8.3f ms", kk.id,
                  std::string(fusion::kernelKindName(kk.kind)).c_str(), med[k]);
    if (split) out += sprint("  %8.3f ms", callsOf(k));
    out += sprint("  %8.3f %8.3f", c.aloneMs[k], sameOf(k));
    if (fromMemory) out += sprint(" %8.3f", refOf(k));
    out += sprint(" ms  %5.2f  %s\n", callsOf(k) / refOf(k),
                  std::string(opName(kk.anchor->op())).c_str());
  }
  return out;
}

// The slowest kernels overall, then the slowest memory-bound ones (whose share of the copy
// bandwidth says which loop nests to look at), each at most 8.
std::string slowestLines(const std::vector<fusion::Kernel>& kernels, const std::vector<double>& med,
                         const Ceilings& c) {
  std::vector<size_t> order(kernels.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return med[a] > med[b]; });
  std::vector<size_t> slowest, slowestMemory;
  for (size_t k : order) {
    if (slowest.size() < 8) slowest.push_back(k);
    if (slowestMemory.size() < 8 && std::string(kindGroup(kernels[k])) == "memory")
      slowestMemory.push_back(k);
  }
  auto line = [&](size_t index) {
    const auto& k = kernels[index];
    double ms = med[index];
    bool compute = std::string(kindGroup(k)) == "compute";
    double rate =
        ms > 0 ? (compute ? k.flops : double(k.bytesRead + k.bytesWritten)) / (ms * 1e6) : 0;
    const double copy = index < c.copyMs.size() ? c.copyMs[index] : -1;
    return sprint("    k%-3d %-12s %8.3f ms  %7.1f %s  %3.0f%%  %s%s\n", k.id,
                  std::string(fusion::kernelKindName(k.kind)).c_str(), ms, rate,
                  compute ? "GFLOP/s" : "GB/s", 100 * rate / (compute ? c.matmulGFs : c.copyGBs),
                  std::string(opName(k.anchor->op())).c_str(),
                  copy > 0 ? sprint("  (a copy of its bytes: %.3f ms)", copy).c_str() : "");
  };
  std::string out = "  slowest kernels (median ms; rate; share of its ceiling):\n";
  for (size_t k : slowest) out += line(k);
  if (!slowestMemory.empty()) {
    out += "  slowest memory-bound kernels:\n";
    for (size_t k : slowestMemory) out += line(k);
  }
  return out;
}

// The memory-bound kernels by the op they are built around (softmax, layer_norm, transpose,
// ...), the most time first: which kind of loop nest holds the time and how far it is from
// copies of the same sizes.
std::string memoryByOpLines(const std::vector<fusion::Kernel>& kernels,
                            const std::vector<double>& med, const Ceilings& c) {
  struct Op {
    int kernels = 0;
    double bytes = 0, ms = 0, copiesMs = 0;
  };
  std::map<std::string, Op> ops;
  for (size_t k = 0; k < kernels.size(); ++k) {
    if (std::string(kindGroup(kernels[k])) != "memory") continue;
    Op& o = ops[std::string(opName(kernels[k].anchor->op()))];
    ++o.kernels;
    o.bytes += double(kernels[k].bytesRead + kernels[k].bytesWritten);
    o.ms += med[k];
    if (k < c.copyMs.size()) o.copiesMs += std::max(c.copyMs[k], 0.0);
  }
  if (ops.size() < 2) return "";
  std::vector<std::pair<std::string, Op>> order(ops.begin(), ops.end());
  std::sort(order.begin(), order.end(),
            [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
  std::string out = "  memory-bound kernels by op (kernels; MiB; ms; share of copy; copies of "
                    "their sizes):\n";
  for (const auto& [name, o] : order) {
    const double share = o.ms > 0 ? 100 * o.bytes / (o.ms * 1e6) / c.copyGBs : 0;
    out += sprint("    %-16s %4d  %9.2f  %8.3f  %3.0f%%", name.c_str(), o.kernels,
                  o.bytes / (1 << 20), o.ms, share);
    out += o.copiesMs > 0 ? sprint("  %3.0f%%\n", 100 * o.bytes / (o.copiesMs * 1e6) / c.copyGBs)
                          : std::string("\n");
  }
  return out;
}

// Whether a kernel's code has a parallel loop (else it runs on one thread: a nest under the
// parallel threshold, or one whose iterations share a row of accumulators).
bool parallelLoops(const kernel::Kernel& k) {
  std::vector<const kernel::Stmt*> work = {k.body.get()};
  while (!work.empty()) {
    const kernel::Stmt* s = work.back();
    work.pop_back();
    if (!s) continue;
    if (s->kind == kernel::Stmt::Kind::For && s->loop == kernel::LoopKind::Parallel) return true;
    for (const kernel::StmtRef& b : s->body) work.push_back(b.get());
  }
  return false;
}

// Operations per 4 bytes moved from which a kernel's ceiling is its arithmetic, not its bytes.
constexpr double kArithmeticPerElement = 8;

// Why a memory-bound kernel stays under half the copy bandwidth: its size (a copy of as many
// bytes takes at least half its time, or it runs under 2 us, the scale of a kernel's fixed
// costs), cold caches (run again at once it reaches half a copy, or takes at most half as long:
// in the run its code or operands came from memory or other cores' caches, the copy's are hot),
// the parallel split's fixed costs (run again at once on one thread it takes no longer than on
// all and reaches half a one-thread copy: at this size the parallel region's fixed costs are what
// the split work saves), else what its ops and code do (one thread, windows, a transpose, indexed
// reads, passes over a row, transcendentals, accumulators through memory, many operations per
// byte); "" when none says (a lead: `kiln explain --kernel-ir`).
std::string belowReason(const fusion::Kernel& k, const kernel::Kernel* code, double ms,
                        double copyMs, double hotMs, double hotOneMs, const Ceilings& c,
                        const char* oneThread) {
  if (ms < 0.002 || (copyMs > 0 && ms <= 2 * copyMs)) return "size";
  const double bytes = double(k.bytesRead + k.bytesWritten);
  if (hotMs > 0 && (bytes / (hotMs * 1e6) >= 0.5 * c.copyGBs || hotMs <= 0.5 * ms))
    return sprint("cold caches: run again at once it takes %.3f ms, %.0f%% of copy (in the run "
                  "its code or operands come from memory or other cores' caches)",
                  hotMs, 100 * bytes / (hotMs * 1e6) / c.copyGBs);
  if (hotOneMs > 0 && hotMs > 0 && hotOneMs <= hotMs && c.copyOneThreadGBs > 0 &&
      bytes / (hotOneMs * 1e6) >= 0.5 * c.copyOneThreadGBs)
    return sprint("the parallel split's fixed costs: run again at once it takes %.3f ms on one "
                  "thread and %.3f ms on all, %.0f%% of a one-thread copy",
                  hotOneMs, hotMs, 100 * bytes / (hotOneMs * 1e6) / c.copyOneThreadGBs);
  // A kernel that runs on one thread (a lane of a concurrent stage, or loops none of which is
  // parallel): its ceiling is a one-thread copy.
  const double gbs = bytes / (ms * 1e6);
  if (oneThread && c.copyOneThreadGBs > 0 && gbs >= 0.5 * c.copyOneThreadGBs)
    return sprint("one thread (%s): %.0f%% of a one-thread copy", oneThread,
                  100 * gbs / c.copyOneThreadGBs);
  auto has = [&](std::initializer_list<OpCode> ops) -> const Node* {
    for (const Node* n : k.nodes)
      if (std::find(ops.begin(), ops.end(), n->op()) != ops.end()) return n;
    return nullptr;
  };
  if (const Node* w = has({OpCode::ReduceWindow})) {
    double reads = 1;
    std::vector<int64_t> dims = w->attrInts("window_dimensions"),
                         strides = w->attrInts("window_strides");
    for (size_t d = 0; d < dims.size(); ++d)
      reads *= double(dims[d]) /
               double(d < strides.size() && strides[d] > 0 ? std::min(strides[d], dims[d]) : 1);
    return sprint("windows: each element is read by %.1f windows", reads);
  }
  if (has({OpCode::Transpose})) return "a transpose: strided reads or writes";
  if (const Node* n = has({OpCode::Gather, OpCode::Scatter, OpCode::Resize, OpCode::GridSample,
                           OpCode::DynamicSlice, OpCode::DynamicUpdateSlice}))
    return "indexed reads (" + std::string(opName(n->op())) + ")";
  if (const Node* n = has({OpCode::Softmax, OpCode::LogSoftmax, OpCode::LayerNorm}))
    return "passes over each row (" + std::string(opName(n->op())) + ")";
  if (const Node* n =
          has({OpCode::Exp, OpCode::Log, OpCode::Tanh, OpCode::Erf, OpCode::Sigmoid, OpCode::Gelu,
               OpCode::Pow, OpCode::Sin, OpCode::Cos, OpCode::Sqrt, OpCode::Rsqrt}))
    return "arithmetic: " + std::string(opName(n->op())) + " at each element";
  if (const int64_t row = code ? kernel::accumulatorsThroughMemory(*code) : 0; row > 1)
    return sprint("accumulators in memory: each update loads and stores one of a buffer of %lld "
                  "(rows longer than the registers hold)",
                  static_cast<long long>(row));
  // Many operations per element moved (a reduction over operands it reads again and again, as
  // a one-hot sum): its ceiling is the arithmetic, not the bytes.
  const double elements = bytes / 4;
  if (elements > 0 && k.flops >= kArithmeticPerElement * elements)
    return sprint("arithmetic: %.0f operations per 4 bytes moved", k.flops / elements);
  return "";
}

// The memory-bound kernels under half the copy bandwidth, each with its reason: those a copy of
// their size explains on one line, the others one line each.
std::string belowHalfLines(const std::vector<fusion::Kernel>& kernels,
                           const std::vector<double>& med, const Ceilings& c,
                           const runtime::Executable& exe, int* count, int* unexplained) {
  const std::vector<runtime::KernelRange> stages = exe.concurrentRanges();
  const std::vector<kernel::Kernel>& code = exe.kernels();
  // Why kernel i runs on one thread, or null.
  auto oneThread = [&](size_t i) -> const char* {
    for (const runtime::KernelRange& r : stages)
      if (r.first <= static_cast<int>(i) && static_cast<int>(i) <= r.last)
        return "a lane of a concurrent stage";
    if (i < code.size() && !parallelLoops(code[i]))  // the plan's kernels in the code's order
      return "no parallel loop";
    return nullptr;
  };
  std::string sized, rest;
  int sizedCount = 0;
  double sizedMs = 0, allMs = 0;
  *count = *unexplained = 0;
  for (size_t i = 0; i < kernels.size(); ++i) {
    const fusion::Kernel& k = kernels[i];
    const double ms = med[i];
    if (std::string(kindGroup(k)) != "memory" || ms <= 0) continue;
    const double gbs = double(k.bytesRead + k.bytesWritten) / (ms * 1e6);
    if (gbs >= 0.5 * c.copyGBs) continue;
    ++*count;
    allMs += ms;
    const double copy = i < c.copyMs.size() ? c.copyMs[i] : -1;
    const double hot = i < c.hotMs.size() ? c.hotMs[i] : -1;
    const double hotOne = i < c.hotOneThreadMs.size() ? c.hotOneThreadMs[i] : -1;
    std::string why = belowReason(k, i < code.size() ? &code[i] : nullptr, ms, copy, hot, hotOne, c,
                                  oneThread(i));
    if (why == "size") {
      ++sizedCount;
      sizedMs += ms;
      sized += sprint(" k%d", k.id);
      continue;
    }
    if (why.empty()) {
      ++*unexplained;
      why = "no reason known";
    }
    rest += sprint("    k%-3d %-12s %8.3f ms  %7.1f GB/s  %3.0f%%  %s: %s\n", k.id,
                   std::string(fusion::kernelKindName(k.kind)).c_str(), ms, gbs,
                   100 * gbs / c.copyGBs, std::string(opName(k.anchor->op())).c_str(), why.c_str());
  }
  if (!*count) return "";
  std::string out =
      sprint("  memory-bound kernels under 50%% of copy: %d, %.3f ms\n", *count, allMs);
  if (sizedCount)
    out += sprint("    %d, %.3f ms: their size (under 2 us, or a copy of as many bytes takes at "
                  "least half as long):%s\n",
                  sizedCount, sizedMs, sized.c_str());
  return out + rest;
}

}  // namespace

Status measureHotKernels(const runtime::Executable& exe, std::span<const Tensor> inputs,
                         std::vector<Tensor>& outputs, int repeat, Ceilings& c) {
  const auto& kernels = exe.plan().kernels;
  std::set<int> memory;
  for (size_t k = 0; k < kernels.size(); ++k)
    if (std::string(kindGroup(kernels[k])) == "memory") memory.insert(static_cast<int>(k));
  std::vector<std::vector<double>> runs, oneThread;
  for (int r = 0; r < std::max(repeat, 1); ++r) {
    runtime::HotTimes hot;
    KILN_RETURN_IF_ERROR(exe.runAgain(inputs, outputs, nullptr, memory, &hot));
    if (hot.ms.empty()) return Status::ok();
    runs.push_back(std::move(hot.ms));
    oneThread.push_back(std::move(hot.oneThreadMs));
  }
  c.hotMs = medians(kernels.size(), runs);
  c.hotOneThreadMs = medians(kernels.size(), oneThread);
  return Status::ok();
}

std::string rooflineReport(const runtime::Executable& exe,
                           const std::vector<std::vector<double>>& kernelMs, const Ceilings& c,
                           bool json) {
  const auto& kernels = exe.plan().kernels;
  const std::vector<double> med = medians(kernels.size(), kernelMs);
  std::map<std::string, Group> groups;
  double copiesMs = 0;  // copies of the memory-bound kernels' sizes, one by one
  for (size_t k = 0; k < kernels.size() && k < c.copyMs.size(); ++k)
    copiesMs += std::max(c.copyMs[k], 0.0);
  for (size_t k = 0; k < kernels.size(); ++k) {
    Group& g = groups[kindGroup(kernels[k])];
    ++g.kernels;
    g.bytes += static_cast<double>(kernels[k].bytesRead + kernels[k].bytesWritten);
    g.flops += kernels[k].flops;
    g.ms += med[k];
  }
  const Group& mem = groups["memory"];
  const Group& cmp = groups["compute"];
  const Group& oth = groups["other"];
  double memGBs = mem.ms > 0 ? mem.bytes / (mem.ms * 1e6) : 0;
  double cmpGFs = cmp.ms > 0 ? cmp.flops / (cmp.ms * 1e6) : 0;
  int below = 0, unexplained = 0;
  const std::string belowText = belowHalfLines(kernels, med, c, exe, &below, &unexplained);
  if (json)
    return sprint("{\"threads\": %d, \"where\": \"%s\", \"copy_gbs\": %.2f, "
                  "\"matmul\": \"%s\", \"matmul_gflops\": %.2f, "
                  "\"fused_gelu_gbs\": %.2f, \"memory_kernels\": {\"count\": %d, \"bytes\": %.0f, "
                  "\"ms\": %.4f, \"gbs\": %.2f}, \"contraction_kernels\": {\"count\": %d, "
                  "\"flops\": %.0f, \"ms\": %.4f, \"gflops\": %.2f}, \"other_kernels\": "
                  "{\"count\": %d, \"ms\": %.4f}, \"memory_copies_ms\": %.4f, "
                  "\"memory_under_half\": {\"count\": %d, \"unexplained\": %d}%s}",
                  exe.threads(), c.where.c_str(), c.copyGBs, c.matmul.c_str(), c.matmulGFs,
                  c.fusedGBs, mem.kernels, mem.bytes, mem.ms, memGBs, cmp.kernels, cmp.flops,
                  cmp.ms, cmpGFs, oth.kernels, oth.ms, copiesMs, below, unexplained,
                  aloneLines(kernels, med, c, true).c_str());
  std::string out = sprint("roofline (%s, measured now): copy %.1f GB/s; matmul %s %.1f GFLOP/s\n",
                           c.where.c_str(), c.copyGBs, c.matmul.c_str(), c.matmulGFs);
  out += sprint("  gelu(x*w+b)+r over 64M elements, one kernel: %.1f GB/s = %.0f%% of copy\n",
                c.fusedGBs, 100 * c.fusedGBs / c.copyGBs);
  out += sprint("  memory-bound kernels (loop, reduction): %d, %.2f MiB in %.3f ms: %.1f GB/s = "
                "%.0f%% of copy\n",
                mem.kernels, mem.bytes / (1 << 20), mem.ms, memGBs, 100 * memGBs / c.copyGBs);
  if (copiesMs > 0)
    out += sprint("    the same bytes as a copy of each kernel's size: %.3f ms (%.0f%% of copy); "
                  "Kiln / copies %.2f\n",
                  copiesMs, 100 * mem.bytes / (copiesMs * 1e6) / c.copyGBs, mem.ms / copiesMs);
  out += sprint("  contraction kernels: %d, %.3f GFLOP in %.3f ms: %.1f GFLOP/s = %.0f%% of "
                "matmul\n",
                cmp.kernels, cmp.flops / 1e9, cmp.ms, cmpGFs, 100 * cmpGFs / c.matmulGFs);
  if (oth.kernels)
    out += sprint("  other kernels (attention, opaque): %d, %.3f ms\n", oth.kernels, oth.ms);
  out += aloneLines(kernels, med, c, false);
  return out + memoryByOpLines(kernels, med, c) + slowestLines(kernels, med, c) + belowText;
}

}  // namespace kiln::cli
