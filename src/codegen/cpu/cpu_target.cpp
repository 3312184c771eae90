// The CPU target: its graph passes, and building and loading its programs. See cpu_target.h.
#include "codegen/cpu/cpu_target.h"

#include <charconv>
#include <optional>

#include "codegen/cpu/choose_library_calls.h"
#include "codegen/cpu/cpu_program.h"
#include "codegen/cpu/held_constants.h"
#include "codegen/cpu/inverted_residual.h"
#include "codegen/cpu/panel_product.h"
#include "compiler/compile.h"
#include "ir/text/text.h"
#include "kernel/expand_calls.h"
#include "kernel/schedule.h"
#include "passes/convolution_to_matmul.h"
#include "passes/decompose_composites.h"
#include "passes/pipeline.h"

namespace kiln::codegen::cpu {
namespace {

// A decimal index, or nullopt when `text` is not one.
std::optional<size_t> parseIndex(std::string_view text) {
  size_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

// Packed weights: "K.J LAYOUT" per line, the bytes in "packed.K.J" (call J of kernel K), or
// "K.J same K0.J0" for a call whose kernel is an earlier call's (the same bytes). The kernels
// use them in place from a mapping; from bytes the caller keeps, a copy each (a held constant
// has no other copy).
StatusOr<PackedByCall> packedWeights(const runtime::DecodedArtifact& s, const std::string& source,
                                     const std::shared_ptr<const MappedFile>& mapping) {
  PackedByCall prepacked;
  for (const std::string& l : runtime::sectionLines(s["packed"])) {
    size_t dot = l.find('.'), sp = l.find(' ');
    std::optional<size_t> k, j;
    if (dot < sp && sp != std::string::npos) {
      k = parseIndex(std::string_view(l).substr(0, dot));
      j = parseIndex(std::string_view(l).substr(dot + 1, sp - dot - 1));
    }
    const std::string same = " same ";
    if (k && j && l.compare(sp, same.size(), same) == 0) {
      std::string from = l.substr(sp + same.size());
      size_t fdot = from.find('.');
      std::optional<size_t> fk = parseIndex(std::string_view(from).substr(0, fdot)),
                            fj = fdot == std::string::npos
                                     ? std::nullopt
                                     : parseIndex(std::string_view(from).substr(fdot + 1));
      auto it = fk && fj ? prepacked.find({*fk, *fj}) : prepacked.end();
      if (it == prepacked.end())
        return Status::error(source + ": packed-weights entry '" + l + "' names no earlier entry");
      prepacked[{*k, *j}] = PackedWeights(it->second);
      continue;
    }
    if (!k || !j || !s.has("packed." + l.substr(0, sp)))
      return Status::error(source + ": malformed packed-weights entry '" + l + "'");
    PackedWeights w;
    w.layout = l.substr(sp + 1);
    w.bytes = s["packed." + l.substr(0, sp)];
    w.owner = mapping;
    if (!mapping) {
      auto copy = std::make_shared<const std::string>(w.bytes);
      w.bytes = *copy;
      w.owner = std::move(copy);
    }
    prepacked[{*k, *j}] = w;
  }
  return prepacked;
}

// The object code of each code unit ("object.w", "symbols.w", "units.w").
StatusOr<std::vector<ObjectUnit>> objectUnits(const runtime::DecodedArtifact& s,
                                              const std::string& source) {
  std::vector<ObjectUnit> units;
  for (size_t w = 0; s.has("object." + std::to_string(w)); ++w) {
    ObjectUnit u;
    u.object = std::string(s["object." + std::to_string(w)]);
    u.symbols = runtime::sectionLines(s["symbols." + std::to_string(w)]);
    for (const std::string& k : runtime::sectionLines(s["units." + std::to_string(w)])) {
      std::optional<size_t> index = parseIndex(k);
      if (!index)
        return Status::error(source + ": code unit " + std::to_string(w) + " is malformed");
      u.kernels.push_back(*index);
    }
    if (u.symbols.size() != u.kernels.size())
      return Status::error(source + ": code unit " + std::to_string(w) + " is inconsistent");
    units.push_back(std::move(u));
  }
  if (units.empty()) return Status::error(source + ": the artifact has no code");
  return units;
}

class CpuTarget final : public runtime::Target {
 public:
  std::string name() const override { return "cpu"; }
  std::string machine() const override { return hostTarget(); }
  std::string describeMachine() const override { return hostCpu(); }

  // oneDNN's post-ops (fusion/epilogue.h's default), but no swish after a convolution oneDNN would
  // run as Winograd: its Winograd kernels take a bias, a residual and a relu, and the direct kernel
  // with the swish was slower than Winograd and a loop (efficientnet_v2_s 16.0 -> 17.3 ms at 1
  // thread).
  fusion::EpiloguePolicy epiloguePolicy() const override {
    fusion::EpiloguePolicy p;
    p.refuses = [](const Node& anchor, fusion::PostOpKind kind) -> std::string {
      if (kind == fusion::PostOpKind::Swish && winogradConvolutionFlops(anchor) > 0)
        return "oneDNN's Winograd kernels take no swish";
      return "";
    };
    return p;
  }

  // Loops store strided; oneDNN convolutions and matrix products take a strided destination
  // (else the schedule gives the call a dense temp and a copy, choose_library_calls.cpp).
  bool concatenatesInPlace() const override { return true; }
  bool storesAlongsideReductions() const override { return true; }
  // Rows past these run the host's sort (the reference kernel: std::sort, top_k's partial
  // sort) instead of ranking loops, O(n^2) per row: over 64 rows, top-5 of 64 takes 0.098 ms
  // as loops and 0.052 as the call, of 256 1.60 and 0.15; a sort of 256 1.53 and 1.29 ms.
  fusion::SortRowLimits sortRowLimits() const override { return {.sort = 256, .topK = 32}; }

  // The inverted-residual block (inverted_residual.h), which takes its calls' bias and clamp as
  // post-ops: not without library calls (they become loops) or without post-ops.
  std::vector<fusion::CustomFusion> customFusions(const CompileOptions& options) const override {
    if (!options.libraryCalls || !options.postOps) return {};
    return {invertedResidualFusion()};
  }

  // Each library call runs on oneDNN where oneDNN has a fast kernel for it, else in another
  // formulation, chosen here with its reason (choose_library_calls.h); without library calls,
  // every call becomes Kiln's loops (kernel/expand_calls.h). Then loops split where a
  // concatenate's selects change operand, reductions become vector partial sums, large nests
  // parallel loops, a row reduction too short to run in parallel partial rows over threads
  // (kernel/schedule.h). Last, values between blocked convolutions are stored blocked.
  Status schedule(std::vector<kernel::Kernel>& kernels,
                  const CompileOptions& options) const override {
    const int threads = threadsFor(options.threads);
    std::vector<CallBlocking> blocking(kernels.size());
    for (size_t i = 0; i < kernels.size(); ++i) {
      kernel::Kernel& k = kernels[i];
      // A custom kernel runs its calls in Kiln's own code (cpu_program.cpp): nothing to schedule.
      if (k.kind == "custom") {
        k.notes.push_back("inverted-residual block: its three calls run as Kiln's row-by-row "
                          "kernel (codegen/cpu/inverted_residual.h)");
        continue;
      }
      if (!options.libraryCalls) {
        KILN_ASSIGN_OR_RETURN(k, kernel::expandCalls(k));
      } else {
        KILN_RETURN_IF_ERROR(chooseLibraryCalls(k, options, blocking[i]));
      }
      k = kernel::partitionLoops(k, kernel::kMaxLoopPieces);
      k = kernel::cacheRows(k, kernel::kRowCacheElements);
      k = kernel::splitRowReductions(k, kernel::kRowSplitWork, options.reassociate);
      k = kernel::parallelizeOuter(k, kernel::kParallelThreshold, threads);
      k = kernel::vectorizeInner(k);
      k = kernel::blockTransposes(k, kernel::kTransposeBlock);
      k = kernel::splitReductions(k, kernel::kReductionLanes, options.reassociate);
      k = kernel::lowerReductions(k);
      k = kernel::registerRows(k, kernel::kRegisterRowBytes);
    }
    storeBlockedValues(kernels, blocking);
    return Status::ok();
  }

  Status graphPasses(Module& module, PassManager& pm,
                     const CompileOptions& options) const override {
    // The CPU backend has no fused attention kernel: attention runs as two oneDNN matrix products
    // around a softmax kernel (at every optimisation level: this is lowering, not optimisation).
    KILN_RETURN_IF_ERROR(pm.runPass("split-attention", module).status());
    // lstm and gru stay whole where a library kernel runs the whole sequence (Kiln's lstm
    // kernel, oneDNN's recurrent primitives: constant f32 weights, static shapes); the others
    // unroll over their steps.
    auto recurrences = makePass(
        "decompose-recurrences", "unroll lstm and gru no library kernel runs", [&](Module& m) {
          return decomposeRecurrences(m, [&](const Node& n) {
            Status s = probeOneDnnKernel(n, {}, 1).status();
            if (s) return true;
            std::string why = s.message();  // "<node>: no oneDNN kernel: ..."
            const std::string node = n.describe() + ": ";
            if (why.rfind(node, 0) == 0) why.erase(0, node.size());
            m.addRemark("decompose-recurrences: " + node + "unrolled over its steps, " + why);
            return false;
          });
        });
    KILN_ASSIGN_OR_RETURN(bool unrolled, pm.runPass(*recurrences, module));
    if (unrolled) KILN_RETURN_IF_ERROR(runCleanup(module, pm).status());
    // Convolutions with few output pixels run faster as an im2col and one matrix product than on
    // oneDNN's convolution kernels (passes/convolution_to_matmul.h), except the ones oneDNN runs
    // as Winograd convolutions here; an optimisation, so not at -O0.
    if (options.optLevel > 0) {
      ConvolutionToMatmulOptions c2m;
      c2m.keepWinograd = oneDnnWinograd();
      // Where Kiln's panel product would run the product at the run's threads (on 2 threads,
      // oneDNN's matmul in its place was slower than its 1x1 convolution: mnasnet1_0 2.30 ->
      // 2.45 ms, efficientnet_b0 4.49 -> 4.70).
      c2m.fasterAsProduct = [threads = threadsFor(options.threads)](int64_t rows, int64_t k,
                                                                    int64_t n) {
        return panelProductTakes(rows, k, n, threads);
      };
      KILN_ASSIGN_OR_RETURN(bool rewrote, pm.runPass(*makeConvolutionToMatmulPass(c2m), module));
      if (rewrote) KILN_RETURN_IF_ERROR(pm.runPass("dce", module).status());
    }
    return Status::ok();
  }

  StatusOr<std::unique_ptr<runtime::Program>> build(std::unique_ptr<Module> module,
                                                    fusion::FusionPlan plan,
                                                    std::vector<kernel::Kernel> kernels,
                                                    const CompileOptions& options) const override {
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<CpuProgram> p,
                          CpuProgram::build(std::move(module), std::move(plan), std::move(kernels),
                                            options, nullptr));
    return std::unique_ptr<runtime::Program>(std::move(p));
  }

  // The artifact's module, kernel IR, packed weights and object code (compiler::reload: no
  // passes, lowering, schedule or LLVM); its kernels must be the ones the code was built for.
  StatusOr<std::unique_ptr<runtime::Program>>
  load(const runtime::DecodedArtifact& s, const std::string& source, const CompileOptions& options,
       std::shared_ptr<const MappedFile> mapping) const override {
    KILN_ASSIGN_OR_RETURN(PackedByCall prepacked, packedWeights(s, source, mapping));
    KILN_ASSIGN_OR_RETURN(std::vector<ObjectUnit> units, objectUnits(s, source));
    const std::string hash(s["kernels"]);
    KILN_ASSIGN_OR_RETURN(compiler::Reloaded r, compiler::reload(*this, s, source, mapping));
    StatusOr<std::unique_ptr<CpuProgram>> built = CpuProgram::build(
        std::move(r.module), std::move(r.plan), std::move(r.kernels), options, &units, &prepacked);
    // oneDNN lays some weights out by the threads a primitive runs on (its Winograd kernels): an
    // artifact that does not load at another thread count says which it was made for.
    const std::string made = s.has("threads") ? std::string(s["threads"]) : "";
    const std::string now = std::to_string(ThreadPool(options.threads).numThreads());
    if (!built && !made.empty() && made != now)
      return Status::error(source + ": compiled for " + made + " threads, run with " + now +
                           ", and its library kernels' weights are laid out for the threads " +
                           "they run on; run it with --threads " + made + " or compile it again (" +
                           built.status().message() + ")");
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<CpuProgram> p, std::move(built));
    if (p->kernelsHash() != hash)
      return Status::error(source + ": its kernels (" + hash +
                           ") are not the ones this Kiln builds from its kernel IR (" +
                           p->kernelsHash() + "): compile the model again");
    p->times().fusion = r.times.fusion;
    p->times().lowering = r.times.lowering;
    KILN_RETURN_IF_ERROR(compiler::planProgramBuffers(*p));
    return std::unique_ptr<runtime::Program>(std::move(p));
  }

  // The constants ("blob") and the weights library kernels hold ("packed.*"): most of the bytes.
  bool isWeightSection(const std::string& name) const override {
    return name == "blob" || name.rfind("packed.", 0) == 0;
  }
};

}  // namespace

std::unique_ptr<runtime::Target> makeCpuTarget() { return std::make_unique<CpuTarget>(); }

// The artifact's sections of a CPU program: "module" (the module after the passes, as .kir text
// whose constants are in "blob"), "kernels" (a hash of the kernels the code was built for, which
// loading checks against the artifact's kernel IR), "threads" (the run's thread count the library
// kernels were made for), "packed" and "packed.K.J" (weights library call J of kernel K holds in
// its own layout; calls sharing a kernel share one), and per code unit w: "object.w" (an ELF
// object), "symbols.w" (its kernel entry symbols) and "units.w" (the distinct kernels they are).
void CpuProgram::artifactParts(runtime::ArtifactParts& parts) const {
  const Impl& m = *impl_;
  // Constants only library kernels read, each holding them in its own layout, are stored once,
  // in that layout (the packed.* sections): the module says `held` instead of their data.
  HeldConstants held(const_cast<Impl&>(m), *m.module->entry(), /*drop=*/false);
  for (const auto& calls : m.calls)
    for (const LibraryCall& c : calls) held.prepared(c);
  PrintOptions po;
  po.blob = &parts.blob;
  po.held = &held.found();
  parts.add("module", printModule(*m.module, po));
  parts.sections["blob"] = parts.blob.pieces;
  parts.add("kernels", m.kernelsHash);
  parts.add("threads", std::to_string(m.pool->numThreads()));
  std::string packed;
  // The weights library kernels hold in layouts of their own, so that loading uses them in place;
  // calls that share a kernel (callKey) share its section: "K.J same K0.J0".
  std::map<const LibraryKernel*, std::string> stored;
  for (size_t i = 0; i < m.calls.size(); ++i)
    for (size_t j = 0; j < m.calls[i].size(); ++j) {
      const LibraryCall& c = m.calls[i][j];
      std::optional<PackedWeights> w;
      if (c.fast) w = c.fast->packedWeights();
      if (!w) continue;
      std::string id = std::to_string(i) + "." + std::to_string(j);
      auto [first, added] = stored.emplace(c.fast.get(), id);
      if (!added) {
        packed += id + " same " + first->second + "\n";
        continue;
      }
      parts.sections["packed." + id] = {w->bytes};
      packed += id + " " + w->layout + "\n";
    }
  if (!packed.empty()) parts.add("packed", packed);
  for (size_t w = 0; w < m.objects.size(); ++w) {
    const ObjectUnit& u = m.objects[w];
    std::string symbols, units;
    for (const std::string& name : u.symbols) symbols += name + "\n";
    for (size_t k : u.kernels) units += std::to_string(k) + "\n";
    parts.sections["object." + std::to_string(w)] = {u.object};
    parts.add("symbols." + std::to_string(w), symbols);
    parts.add("units." + std::to_string(w), units);
  }
}

}  // namespace kiln::codegen::cpu
