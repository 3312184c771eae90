#include "roofline.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <thread>

#include "ir/text/text.h"

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

// Best time in ms of `exe` on zero-filled inputs (one warm-up run first).
StatusOr<double> bestRun(const runtime::Executable& exe, int reps) {
  std::vector<Tensor> inputs;
  const Function& f = exe.function();
  for (size_t i = 0; i < f.numParameters(); ++i)
    inputs.emplace_back(f.parameter(i)->type().dtype(), f.parameter(i)->type().staticDims());
  std::vector<Tensor> outputs;
  KILN_RETURN_IF_ERROR(exe.runInto(inputs, outputs));
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    auto start = Clock::now();
    KILN_RETURN_IF_ERROR(exe.runInto(inputs, outputs));
    best = std::min(best, msSince(start));
  }
  return best;
}

StatusOr<std::unique_ptr<runtime::Executable>> compileText(const std::string& text, int threads) {
  KILN_ASSIGN_OR_RETURN(auto module, parseModule(text, "roofline.kir"));
  runtime::CompileOptions o;
  o.threads = threads;
  return runtime::Executable::compile(std::move(module), o);
}

const char* kindGroup(fusion::KernelKind k) {
  switch (k) {
    case fusion::KernelKind::Loop:
    case fusion::KernelKind::Reduction: return "memory";
    case fusion::KernelKind::Contraction: return "compute";
    default: return "other";
  }
}

}  // namespace

StatusOr<Ceilings> measureCeilings(int threads) {
  Ceilings c;
  c.threads = threads;
  c.copyGBs = copyBandwidth(threads);
  KILN_ASSIGN_OR_RETURN(auto mm, compileText(R"(
func @main(%a: f32[2048,2048], %b: f32[2048,2048]) -> (f32[2048,2048]) {
  %c = f32[2048,2048] dot_general(%a, %b) {lhs_contracting = [1], rhs_contracting = [0]}
  return %c
})",
                                             threads));
  KILN_ASSIGN_OR_RETURN(double mmMs, bestRun(*mm, 3));
  c.matmulGFs = 2.0 * 2048.0 * 2048.0 * 2048.0 / (mmMs * 1e6);
  KILN_ASSIGN_OR_RETURN(auto fused, compileText(R"(
func @main(%x: f32[67108864], %w: f32[67108864], %b: f32[67108864], %r: f32[67108864]) -> (f32[67108864]) {
  %m = f32[67108864] mul(%x, %w)
  %a = f32[67108864] add(%m, %b)
  %g = f32[67108864] gelu(%a)
  %o = f32[67108864] add(%g, %r)
  return %o
})",
                                                threads));
  KILN_ASSIGN_OR_RETURN(double fusedMs, bestRun(*fused, 3));
  c.fusedGBs = 5.0 * 4.0 * 67108864.0 / (fusedMs * 1e6);
  return c;
}

std::string rooflineReport(const runtime::Executable& exe,
                           const std::vector<std::vector<double>>& kernelMs, const Ceilings& c,
                           bool json) {
  const auto& kernels = exe.plan().kernels;
  // Each kernel's median over the runs.
  std::vector<double> med(kernels.size(), 0);
  for (size_t k = 0; k < kernels.size(); ++k) {
    std::vector<double> t;
    for (const auto& run : kernelMs)
      if (k < run.size()) t.push_back(run[k]);
    if (t.empty()) continue;
    std::sort(t.begin(), t.end());
    med[k] = t[t.size() / 2];
  }
  struct Group {
    int kernels = 0;
    double bytes = 0, flops = 0, ms = 0;
  };
  std::map<std::string, Group> groups;
  for (size_t k = 0; k < kernels.size(); ++k) {
    Group& g = groups[kindGroup(kernels[k].kind)];
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
  char buf[1024];
  if (json) {
    std::snprintf(buf, sizeof buf,
                  "{\"threads\": %d, \"copy_gbs\": %.2f, \"matmul_gflops\": %.2f, "
                  "\"fused_gelu_gbs\": %.2f, \"memory_kernels\": {\"count\": %d, \"bytes\": %.0f, "
                  "\"ms\": %.4f, \"gbs\": %.2f}, \"contraction_kernels\": {\"count\": %d, "
                  "\"flops\": %.0f, \"ms\": %.4f, \"gflops\": %.2f}, \"other_kernels\": "
                  "{\"count\": %d, \"ms\": %.4f}}",
                  c.threads, c.copyGBs, c.matmulGFs, c.fusedGBs, mem.kernels, mem.bytes, mem.ms,
                  memGBs, cmp.kernels, cmp.flops, cmp.ms, cmpGFs, oth.kernels, oth.ms);
    return buf;
  }
  std::string out;
  std::snprintf(buf, sizeof buf,
                "roofline (%d thread%s, measured now): copy %.1f GB/s; f32 matmul 2048^3 %.1f "
                "GFLOP/s\n",
                c.threads, c.threads == 1 ? "" : "s", c.copyGBs, c.matmulGFs);
  out += buf;
  std::snprintf(buf, sizeof buf,
                "  gelu(x*w+b)+r over 64M f32, one kernel: %.1f GB/s = %.0f%% of copy\n",
                c.fusedGBs, 100 * c.fusedGBs / c.copyGBs);
  out += buf;
  std::snprintf(buf, sizeof buf,
                "  memory-bound kernels (loop, reduction): %d, %.2f MiB in %.3f ms: %.1f GB/s = "
                "%.0f%% of copy\n",
                mem.kernels, mem.bytes / (1 << 20), mem.ms, memGBs, 100 * memGBs / c.copyGBs);
  out += buf;
  std::snprintf(buf, sizeof buf,
                "  contraction kernels: %d, %.3f GFLOP in %.3f ms: %.1f GFLOP/s = %.0f%% of "
                "matmul\n",
                cmp.kernels, cmp.flops / 1e9, cmp.ms, cmpGFs, 100 * cmpGFs / c.matmulGFs);
  out += buf;
  if (oth.kernels) {
    std::snprintf(buf, sizeof buf, "  other kernels (attention, opaque): %d, %.3f ms\n",
                  oth.kernels, oth.ms);
    out += buf;
  }
  // The kernels that take the most time.
  std::vector<size_t> order(kernels.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return med[a] > med[b]; });
  // The slowest kernels overall, then the slowest memory-bound ones (whose share of the copy
  // bandwidth says which loop nests to look at), each at most 8.
  std::vector<size_t> slowest, slowestMemory;
  for (size_t k : order) {
    if (slowest.size() < 8) slowest.push_back(k);
    if (slowestMemory.size() < 8 && std::string(kindGroup(kernels[k].kind)) == "memory")
      slowestMemory.push_back(k);
  }
  auto line = [&](size_t index) {
    const auto& k = kernels[index];
    double ms = med[index];
    bool compute = k.kind == fusion::KernelKind::Contraction;
    double rate =
        ms > 0 ? (compute ? k.flops : double(k.bytesRead + k.bytesWritten)) / (ms * 1e6) : 0;
    std::snprintf(buf, sizeof buf, "    k%-3d %-12s %8.3f ms  %7.1f %s  %3.0f%%  %s\n", k.id,
                  std::string(fusion::kernelKindName(k.kind)).c_str(), ms, rate,
                  compute ? "GFLOP/s" : "GB/s", 100 * rate / (compute ? c.matmulGFs : c.copyGBs),
                  std::string(opName(k.anchor->op())).c_str());
    out += buf;
  };
  out += "  slowest kernels (median ms; rate; share of its ceiling):\n";
  for (size_t k : slowest) line(k);
  if (!slowestMemory.empty()) {
    out += "  slowest memory-bound kernels:\n";
    for (size_t k : slowestMemory) line(k);
  }
  return out;
}

}  // namespace kiln::cli
