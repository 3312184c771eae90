// The CPU program: building it (fusion, lowering, library kernels, code generation, buffer
// planning) and running it. See cpu_program.h.
#include "codegen/cpu/cpu_program.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "codegen/cpu/held_constants.h"
#include "codegen/cpu/kernel_costs.h"
#include "codegen/cpu/object_loader.h"
#include "compiler/compile.h"
#include "interp/interpreter.h"
#include "ir/text/text.h"
#include "kernel/buffer_views.h"
#include "kernel/lower.h"
#include "kernel/post_op_loops.h"
#include "kernel/schedule.h"
#include "kernel/simplify.h"
#include "support/hash.h"
#include "support/large_buffer.h"

namespace kiln::codegen::cpu {

using runtime::kBufferAlignment;
using runtime::Slot;
using runtime::Storage;

namespace {

using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// The kernel IR text with the kernel and its buffers named by position: kernels with the same key
// compile to the same code.
std::string structuralKey(const kernel::Kernel& k) {
  std::map<std::string_view, size_t> position;
  for (size_t i = 0; i < k.buffers.size(); ++i) position.emplace(k.buffers[i].name, i);
  std::string text = kernel::printKernel(k), key;
  key.reserve(text.size());
  auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  // Buffer names are words ([A-Za-z0-9_]); a reference is '%' and the whole word.
  for (size_t at = text.find('('); at < text.size();) {
    if (text[at] != '%') {
      key += text[at++];
      continue;
    }
    size_t end = at + 1;
    while (end < text.size() && word(text[end])) ++end;
    auto it = position.find(std::string_view(text).substr(at + 1, end - at - 1));
    key += it == position.end() ? text.substr(at, end - at) : "%b" + std::to_string(it->second);
    at = end;
  }
  return key;
}

struct CallContext {
  const std::vector<std::vector<LibraryCall>>* calls;  // per kernel, by call index
  size_t kernel;
  Status* error;  // the first failure of a library call (calls must not throw)
  std::mutex* mu;
  std::atomic<bool>* failed;    // set with `error`: lanes of a concurrent stage stop on it
  const SymbolBindings* sizes;  // the run's sizes of the program's symbols
};

// Runs library call `index` of the current kernel: through its oneDNN kernel when it has one,
// else through the reference kernel of its node (operands copied out of the buffers, results
// copied back).
void runLibraryCall(void* context, int32_t index, void** buffers) {
  auto* ctx = static_cast<CallContext*>(context);
  const LibraryCall& call = (*ctx->calls)[ctx->kernel][static_cast<size_t>(index)];
  auto fail = [&](const Status& s) {
    std::lock_guard<std::mutex> lock(*ctx->mu);
    if (*ctx->error) *ctx->error = s;
    ctx->failed->store(true);
  };
  StatusOr<const LibraryKernel*> fast =
      call.perShape ? call.perShape->kernelFor(*ctx->sizes) : call.fast.get();
  if (!fast) return fail(fast.status());
  if (*fast) {
    Status s = (*fast)->run(buffers);
    if (!s) fail(s);
    return;
  }
  if (!call.reference) return fail(Status::error("call " + call.stmt->callee() + " has no kernel"));
  const Node& n = *call.reference->node;
  std::vector<Tensor> operands;
  for (size_t i = 0; i < n.numOperands(); ++i) {
    const TensorType& t = n.operand(i)->type();
    Tensor x(t.dtype(), t.staticDims());
    if (x.byteSize()) std::memcpy(x.mutableBytes(), buffers[i], x.byteSize());
    operands.push_back(std::move(x));
  }
  auto results = evaluateNode(n, operands);
  if (!results) return fail(results.status());
  for (size_t r = 0; r < results->size(); ++r) {
    const Tensor& t = (*results)[r];
    if (t.byteSize()) std::memcpy(buffers[n.numOperands() + r], t.bytes(), t.byteSize());
  }
}

// Tells each library kernel which of its buffers the schedule stores blocked (Buffer::layout,
// choose_library_calls.h); an error where its kernel cannot read and write them so.
Status tellBlockedBuffers(CpuProgram::Impl& impl) {
  for (size_t i = 0; i < impl.calls.size(); ++i)
    for (LibraryCall& c : impl.calls[i]) {
      const StoredBlocked stored = storedBlocked(impl.kernels[i], *c.stmt);
      Status s = Status::ok();
      if (c.perShape) c.perShape->storeBlocked(stored);
      else if (c.fast && !(c.separatePostOps && !stored.positions.empty()))
        s = tellStoredBlocked(*c.fast, stored);
      else if (!stored.positions.empty())
        s = Status::error("its buffers are stored in layout " + stored.layout + ", and " +
                          (c.separatePostOps ? "its post-ops run as loops after it"
                                             : "it has no library kernel (" + c.why + ")"));
      if (!s) return s.prefix("kernel " + impl.kernels[i].name + ": call " + c.stmt->callee());
    }
  return Status::ok();
}

// Threads that compile: CompileOptions::compileThreads, else every hardware thread.
int compileThreads(const CompileOptions& o) {
  if (o.compileThreads > 0) return o.compileThreads;
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

struct Pending {
  LibraryCall* call;
  const kernel::Kernel* kernel;  // the call's
  bool inLane;                   // its kernel runs in a lane of a concurrent stage: on one thread
  double flops;
  const PackedWeights* prepacked;   // from the artifact, or null
  std::vector<int64_t> dstStrides;  // a strided result (onednn.h resultStrides), else empty
};

// Library calls: a oneDNN kernel where oneDNN takes the op (f32 matrix products and
// convolutions), the reference kernel otherwise. Creating a primitive generates its code and
// reorders constant weights, so the calls are prepared on several threads at once.
// A matrix product of fewer than kSmallCallFlops runs on one thread: oneDNN's gemm splits so
// little work worse than one thread does it (at 2 threads: transformer_encoder 0.34 ms with
// this rule, 0.36-0.37 without and 0.39-0.40 with the limit at 8 MFLOP, which was chosen while
// the tool made OpenMP's threads sleep after every region). Not so a product with at most two
// multiply-adds per weight (a classifier's matrix-vector product): reading the weights bounds
// it, and threads share that (1x2048x1000 at 2 threads: 0.92-1.21 -> 0.70-0.79 ms).
// Convolutions, small ones included, take every thread: oneDNN's jit convolutions split even
// mobilenet_v2's 1-8 MFLOP layers well (2 threads: 11.1 -> 9.2-10.2 ms median).
constexpr double kSmallCallFlops = 1e6;

// The library calls of the kernels, each with the weights an artifact holds for it (if any).
std::vector<Pending> listCalls(CpuProgram::Impl& impl, const PackedByCall* prepacked) {
  std::vector<Pending> pending;
  std::map<std::string, std::shared_ptr<PerShapeCall>> perShapeByKey;
  for (size_t i = 0; i < impl.kernels.size(); ++i) {
    std::vector<const kernel::Stmt*> stmts = kernel::callsOf(impl.kernels[i]);
    impl.calls.emplace_back(stmts.size());
    for (size_t j = 0; j < stmts.size(); ++j) {
      impl.calls.back()[j].stmt = stmts[j];
      const codegen::cpu::PackedWeights* packed = nullptr;
      if (prepacked) {
        auto it = prepacked->find({i, j});
        if (it != prepacked->end()) packed = &it->second;
      }
      // A call of symbolic sizes gets its kernels for each run's sizes (per_shape_calls.h).
      // Calls of one sharing key share it, and so one copy of their packed weights.
      if (kernel::isSymbolicCall(impl.kernels[i], *stmts[j])) {
        int threads = impl.concurrency.stageOf[i] >= 0 ? 1 : impl.options.threads;
        std::string key = PerShapeCall::sharingKey(impl.kernels[i], *stmts[j], threads);
        std::shared_ptr<PerShapeCall>& made =
            key.empty() ? impl.calls.back()[j].perShape : perShapeByKey[key];
        if (!made) made = std::make_shared<PerShapeCall>(impl.kernels[i], *stmts[j], threads);
        impl.calls.back()[j].perShape = made;
        continue;
      }
      pending.push_back({&impl.calls.back()[j], &impl.kernels[i], impl.concurrency.stageOf[i] >= 0,
                         impl.plan.kernels[i].flops, packed,
                         codegen::cpu::resultStrides(impl.kernels[i], *stmts[j])});
    }
  }
  return pending;
}

// The custom kernels of the plan (kind "custom"): inverted-residual blocks, the CPU target's one
// custom fusion (inverted_residual.h), each run by Kiln's own kernel that keeps the values
// between its three calls in cache. Their calls get no oneDNN kernel; the block reads the
// weights from the constants. The planner claimed each block with the checks of create(), so a
// refusal here is a bug: an error naming the kernel, never a quiet fallback.
Status createBlocks(CpuProgram::Impl& impl) {
  for (size_t i = 0; i < impl.kernels.size(); ++i) {
    const kernel::Kernel& k = impl.kernels[i];
    if (k.kind != "custom") continue;
    std::vector<const kernel::Stmt*> c = kernel::callsOf(k);
    if (c.size() != 3 || impl.calls[i].size() != 3)
      return Status::error("kernel " + k.name + ": a custom kernel of " + std::to_string(c.size()) +
                           " calls; the CPU target's only custom kernel is an inverted-residual "
                           "block of three");
    Block block;
    std::array<CallNode, 3> layers;
    for (size_t j = 0; j < 3; ++j) {
      KILN_ASSIGN_OR_RETURN(layers[j], callNode(k, *c[j]));
      for (const std::string& name : c[j]->args) {
        auto it = std::find_if(k.buffers.begin(), k.buffers.end(),
                               [&](const kernel::Buffer& b) { return b.name == name; });
        if (it == k.buffers.end())
          return Status::error("kernel " + k.name + ": call " + c[j]->callee() +
                               " names no buffer %" + name);
        block.args[j].push_back(static_cast<size_t>(it - k.buffers.begin()));
      }
    }
    auto made = codegen::cpu::InvertedResidualKernel::create({layers[0].node, &layers[0].postOps},
                                                             {layers[1].node, &layers[1].postOps},
                                                             {layers[2].node, &layers[2].postOps});
    if (!made)
      return Status::error(
          "kernel " + k.name + " (the inverted-residual block from " + layers[0].node->describe() +
          "): code generation refuses the planned block: " + made.status().message());
    block.kernel = std::move(*made);
    impl.calls[i][0].block = block.kernel->describe();
    for (size_t j = 1; j < 3; ++j)
      impl.calls[i][j].block = "in " + k.name + "'s inverted-residual block";
    impl.blocks.emplace(i, std::move(block));
  }
  return Status::ok();
}

// What createOneDnnKernel reads of a call: the node and post-ops (callNodeKey), its work (the
// thread rule), an artifact's weights and a strided result. Calls of one key make the same
// kernel, so it is made once and shared: the 100 steps of an unrolled recurrence reordered the
// same weights 100 times.
std::string callKey(const Pending& p) {
  char buf[64];
  std::snprintf(buf, sizeof buf, " %a %p%s", p.flops,
                static_cast<const void*>(p.prepacked ? p.prepacked->bytes.data() : nullptr),
                p.inLane ? " lane" : "");
  std::string key = codegen::cpu::callNodeKey(*p.kernel, *p.call->stmt) + buf;
  for (int64_t s : p.dstStrides) key += "," + std::to_string(s);
  return key;
}

// Makes the oneDNN kernel of a pending call, or says why there is none (LibraryCall::why).
void makeKernel(const Pending& p, int poolThreads, bool pooled) {
  LibraryCall& c = *p.call;
  const kernel::Stmt& s = *c.stmt;
  // The node lives only while the kernel is made: it shares the constants' data, which a held
  // constant frees once its readers are prepared.
  StatusOr<CallNode> node = callNode(*p.kernel, s);
  if (!node) {
    c.why = node.status().message();
    return;
  }
  const Node& n = *node->node;
  bool small = n.op() == OpCode::DotGeneral && p.flops < kSmallCallFlops &&
               p.flops > 4.0 * static_cast<double>(n.operand(1)->type().numElements().value_or(0));
  // A lane of a concurrent stage runs on one thread: oneDNN runs a primitive with the threads
  // it was created for.
  int threads = small || p.inLane ? 1 : poolThreads;
  c.oneThread = small && pooled;
  CallForm form{p.prepacked, p.dstStrides, s.layout};
  auto fast = codegen::cpu::createOneDnnKernel(n, node->postOps, threads, form);
  if (!fast && !s.postOps.empty()) {
    // oneDNN cannot take these post-ops (well): the kernel without them, then ours.
    c.why = fast.status().message();
    fast = codegen::cpu::createOneDnnKernel(n, {}, threads, form);
    c.separatePostOps = true;
  }
  if (fast) c.fast = std::move(*fast);
  else c.why = fast.status().message();
}

// Creates the oneDNN kernel of each pending call, on several threads at once (a primitive
// generates its code and reorders constant weights when it is created); calls of one callKey
// share the kernel of the first.
void prepareCalls(CpuProgram::Impl& impl, const Function& f, const std::vector<Pending>& pending) {
  const CompileOptions& options = impl.options;
  // Constants only library kernels hold are freed as their readers are prepared, before code
  // generation (CompileOptions::dropHeldConstants; an artifact does not store their data).
  std::optional<CpuProgram::HeldConstants> held;
  if (options.dropHeldConstants) held.emplace(impl, f, /*drop=*/true);
  // Whether the run has more than one thread, so that keeping a call to one thread means something.
  const bool pooled = codegen::cpu::ThreadPool(options.threads).numThreads() > 1;
  auto prepare = [&](const Pending& p) {
    makeKernel(p, options.threads, pooled);
    LibraryCall& c = *p.call;
    if (!c.fast) {  // the reference kernel reads every operand from its buffer
      StatusOr<CallNode> reference = callNode(*p.kernel, *c.stmt, nullptr, /*constants=*/false);
      if (reference) c.reference = std::make_shared<const CallNode>(std::move(*reference));
    }
    if (held) held->prepared(c);
  };
  std::map<std::string, size_t> firstOf;
  std::vector<size_t> unique;
  std::vector<std::pair<size_t, size_t>> copies;  // (call, the call whose kernel it shares)
  for (size_t i = 0; i < pending.size(); ++i) {
    auto [it, added] = firstOf.emplace(callKey(pending[i]), i);
    if (added) unique.push_back(i);
    else copies.emplace_back(i, it->second);
  }
  auto prepareAll = [&](const std::vector<size_t>& which) {
    size_t helpers = std::min<size_t>(which.size(), static_cast<size_t>(compileThreads(options)));
    std::atomic<size_t> next{0};
    auto work = [&] {
      for (size_t i; (i = next.fetch_add(1)) < which.size();) prepare(pending[which[i]]);
    };
    std::vector<std::thread> threads;
    for (size_t t = 1; t < helpers; ++t) threads.emplace_back(work);
    work();
    for (std::thread& t : threads) t.join();
  };
  prepareAll(unique);
  // A kernel with blockable buffers is not shared: the layout plan stores per call which of its
  // buffers hold blocked data (storeBlocked).
  std::vector<size_t> own;
  for (const auto& [i, first] : copies) {
    LibraryCall& c = *pending[i].call;
    const LibraryCall& made = *pending[first].call;
    if (made.fast && !made.fast->blockableBuffers().empty()) {
      own.push_back(i);
      continue;
    }
    c.fast = made.fast;
    c.reference = made.reference;
    c.why = made.why;
    c.separatePostOps = made.separatePostOps;
    c.oneThread = made.oneThread;
    if (held) held->prepared(c);
  }
  prepareAll(own);
  held.reset();
}

// Post-ops a call's library kernel did not take run as a loop nest after the call, scheduled as
// the CPU schedules its nests (kernel/post_op_loops.h).
Status postOpsAsLoops(CpuProgram::Impl& impl) {
  for (size_t k = 0; k < impl.kernels.size(); ++k)
    for (LibraryCall& c : impl.calls[k]) {
      if (!c.separatePostOps || c.stmt->postOps.empty()) continue;
      KILN_ASSIGN_OR_RETURN(kernel::PostOpLoops pieces,
                            kernel::postOpsAsLoops(impl.kernels[k], *c.stmt));
      kernel::Kernel nest;
      nest.kind = impl.kernels[k].kind;
      nest.body = kernel::indexViews(impl.kernels[k], pieces.loops);
      if (nest.body != pieces.loops) nest = kernel::simplifyIndices(nest);
      nest = kernel::vectorizeInner(kernel::parallelizeOuter(nest, kernel::kParallelThreshold));
      impl.kernels[k] =
          kernel::replaceStmt(impl.kernels[k], c.stmt, kernel::block({pieces.call, nest.body}));
      c.stmt = pieces.call.get();
    }
  return Status::ok();
}

// An artifact's object code, linked: the code of each distinct kernel that needs code.
Status linkObjects(CpuProgram::Impl& impl, const std::vector<ObjectUnit>& objects,
                   const std::vector<size_t>& generated,
                   std::vector<std::shared_ptr<CompiledKernel>>& uniqueCompiled) {
  const size_t unique = uniqueCompiled.size();
  for (const ObjectUnit& u : objects) {
    KILN_ASSIGN_OR_RETURN(auto linked, codegen::cpu::linkObject(u.object, u.symbols));
    for (size_t j = 0; j < linked.size(); ++j) {
      if (u.kernels[j] >= unique)
        return Status::error("the artifact's object code names kernel " +
                             std::to_string(u.kernels[j]) + " of " + std::to_string(unique));
      // A one-call kernel has its direct form already (artifacts written before such kernels
      // got no code hold code for them too).
      if (!uniqueCompiled[u.kernels[j]]) uniqueCompiled[u.kernels[j]] = std::move(linked[j]);
    }
    impl.objects.push_back(u);
  }
  for (size_t u : generated)
    if (!uniqueCompiled[u]) return Status::error("the artifact has no object code for some kernel");
  return Status::ok();
}

// The distinct kernels `generated` (indices into `unique`) compiled by up to `threads` LLVM
// compilers at once (one context and object each).
Status compileKernels(CpuProgram::Impl& impl, const std::vector<size_t>& unique,
                      const std::vector<size_t>& generated,
                      std::vector<std::shared_ptr<CompiledKernel>>& uniqueCompiled) {
  const CompileOptions& options = impl.options;
  int workers = std::min<int>({compileThreads(options), static_cast<int>(generated.size()), 8});
  workers = std::max(workers, 1);
  std::vector<std::vector<const kernel::Kernel*>> batches(static_cast<size_t>(workers));
  for (size_t g = 0; g < generated.size(); ++g)
    batches[g % static_cast<size_t>(workers)].push_back(&impl.kernels[unique[generated[g]]]);
  std::vector<StatusOr<std::vector<std::unique_ptr<codegen::cpu::CompiledKernel>>>> results;
  for (int w = 0; w < workers; ++w) results.emplace_back(Status::error("not compiled"));
  for (int w = 0; w < workers; ++w) {
    KILN_ASSIGN_OR_RETURN(auto compiler, codegen::cpu::CpuCompiler::create());
    impl.compilers.push_back(std::move(compiler));
  }
  {
    std::vector<std::thread> threads;
    for (int w = 1; w < workers; ++w)
      threads.emplace_back([&, w] {
        results[size_t(w)] = impl.compilers[size_t(w)]->compileAll(batches[size_t(w)]);
      });
    results[0] = impl.compilers[0]->compileAll(batches[0]);
    for (std::thread& t : threads) t.join();
  }
  for (int w = 0; w < workers; ++w) {
    if (!results[size_t(w)]) return results[size_t(w)].status();
    auto& done = *results[size_t(w)];
    ObjectUnit unit;
    unit.object = impl.compilers[size_t(w)]->lastObject();
    for (size_t j = 0; j < done.size(); ++j) {
      size_t u = generated[j * static_cast<size_t>(workers) + static_cast<size_t>(w)];
      unit.symbols.push_back(done[j]->symbol());
      unit.kernels.push_back(u);
      uniqueCompiled[u] = std::move(done[j]);
    }
    impl.objects.push_back(std::move(unit));
  }
  return Status::ok();
}

Status generateCode(CpuProgram::Impl& impl, const std::vector<ObjectUnit>* objects) {
  // Code generation: kernels that differ only in their names compile once, and the distinct
  // ones are split over up to `threads` compilers (one LLVM context and object each) that run at
  // once. An artifact brings the object code of each compiler instead.
  std::map<std::string, size_t> firstOf;
  std::vector<size_t> uniqueOf(impl.kernels.size());
  std::vector<size_t> unique;
  std::string keys;
  for (size_t i = 0; i < impl.kernels.size(); ++i) {
    std::string key = structuralKey(impl.kernels[i]);
    auto [it, added] = firstOf.emplace(key, unique.size());
    if (added) {
      unique.push_back(i);
      keys += key;
    }
    uniqueOf[i] = it->second;
  }
  impl.uniqueKernels = static_cast<int>(unique.size());
  impl.kernelsHash = hex64(hash64(keys));
  std::vector<std::shared_ptr<codegen::cpu::CompiledKernel>> uniqueCompiled(unique.size());
  // A kernel that is one library call needs no code: it calls the handler directly. A custom
  // kernel needs none either: it runs its Block (createBlocks).
  std::vector<size_t> generated;
  for (size_t u = 0; u < unique.size(); ++u) {
    if (impl.blocks.count(unique[u])) continue;
    uniqueCompiled[u] = codegen::cpu::callOnlyKernel(impl.kernels[unique[u]]);
    if (!uniqueCompiled[u]) generated.push_back(u);
  }
  KILN_RETURN_IF_ERROR(objects ? linkObjects(impl, *objects, generated, uniqueCompiled)
                               : compileKernels(impl, unique, generated, uniqueCompiled));
  for (size_t i = 0; i < impl.kernels.size(); ++i)
    impl.compiled.push_back(uniqueCompiled[uniqueOf[i]]);
  return Status::ok();
}

// Independent kernels run at once, one thread each, where the concurrency plan finds it pays
// (runtime/concurrency.h); not with one thread or CompileOptions::concurrentKernels off.
runtime::ConcurrencyPlan planKernelConcurrency(const CpuProgram::Impl& impl) {
  const int threads = impl.pool->numThreads();
  runtime::KernelCosts cost;
  if (impl.options.concurrentKernels && threads > 1 &&
      impl.plan.kernels.size() == impl.kernels.size())
    cost = estimateKernelCosts(impl.plan, impl.kernels, threads);
  return runtime::planConcurrency(impl.kernels, cost, threads);
}

}  // namespace

// Library kernels and code generation (or, with `objects`, linking the object code of an
// artifact) for the kernels the driver lowered the module to.
Status CpuProgram::buildInto(Impl& impl, std::unique_ptr<Module> module,
                             const std::vector<ObjectUnit>* objects,
                             const PackedByCall* prepacked) {
  const CompileOptions& options = impl.options;
  Function* f = module->entry();
  impl.pool = std::make_unique<codegen::cpu::ThreadPool>(options.threads);
  impl.concurrency = planKernelConcurrency(impl);
  std::vector<Pending> pending = listCalls(impl, prepacked);
  KILN_RETURN_IF_ERROR(createBlocks(impl));
  std::erase_if(pending, [](const Pending& p) { return !p.call->block.empty(); });
  prepareCalls(impl, *f, pending);
  KILN_RETURN_IF_ERROR(tellBlockedBuffers(impl));
  KILN_RETURN_IF_ERROR(postOpsAsLoops(impl));
  KILN_RETURN_IF_ERROR(checkHeldConstants(impl));
  if (!options.instrumentation.dumpDir.empty()) {
    KILN_RETURN_IF_ERROR(
        compiler::writeDump(options, "library-calls.txt", describeLibraryCalls(impl)));
  }
  KILN_RETURN_IF_ERROR(generateCode(impl, objects));
  if (!options.instrumentation.dumpDir.empty() && !objects) {
    std::string ir;
    for (const auto& c : impl.compilers) ir += c->lastLlvmIr();
    KILN_RETURN_IF_ERROR(compiler::writeDump(options, "kernels.ll", ir));
  }
  impl.f = f;
  impl.module = std::move(module);
  return Status::ok();
}

StatusOr<std::unique_ptr<CpuProgram>>
CpuProgram::build(std::unique_ptr<Module> module, fusion::FusionPlan plan,
                  std::vector<kernel::Kernel> kernels, const CompileOptions& options,
                  const std::vector<ObjectUnit>* objects, const PackedByCall* prepacked) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->plan = std::move(plan);
  impl->kernels = std::move(kernels);
  KILN_RETURN_IF_ERROR(buildInto(*impl, std::move(module), objects, prepacked));
  return std::make_unique<CpuProgram>(std::move(impl));
}

namespace {

// Outputs are written whole by their kernels (or copied after them), so they start
// uninitialised; the caller's tensors are reused when they have the right types and are not
// shared.
// An arena for one run: a finished run's, or a new one.
std::shared_ptr<std::byte> takeArena(const CpuProgram::Impl& m) {
  std::shared_ptr<std::byte> arena;
  {
    std::lock_guard<std::mutex> lock(m.arenaMu);
    if (!m.freeArenas.empty()) {
      arena = std::move(m.freeArenas.back());
      m.freeArenas.pop_back();
    }
  }
  static_assert(kBufferAlignment <= 64, "allocateLarge aligns to 64 bytes");
  if (!arena && m.buffers.arenaBytes)
    arena = allocateLarge(static_cast<size_t>(m.buffers.arenaBytes));
  return arena;
}

// Outputs that no kernel writes: parameters, constants, or a value listed twice. `address`
// gives a stored value's address in this run.
template <typename Address>
void copyUnwrittenOutputs(const CpuProgram::Impl& m, std::span<const Tensor> inputs,
                          std::vector<Tensor>& outputs, Address address) {
  const Function& f = *m.f;
  for (size_t o = 0; o < f.outputs().size(); ++o) {
    const Value* v = f.outputs()[o];
    auto it = m.buffers.values.find(v);
    bool written = it != m.buffers.values.end() && it->second.storage == Storage::Output &&
                   it->second.offset == static_cast<int64_t>(o);
    if (written) continue;
    const std::byte* src = nullptr;
    if (v->def()->op() == OpCode::Parameter)
      src = inputs[static_cast<size_t>(v->def()->attrInt("index"))].bytes();
    else if (v->def()->op() == OpCode::Constant) src = v->def()->constantData().tensor.bytes();
    else if (it != m.buffers.values.end()) src = static_cast<const std::byte*>(address(v));
    if (src && outputs[o].byteSize())
      std::memcpy(outputs[o].mutableBytes(), src, outputs[o].byteSize());
  }
}

// The arena offsets of a run at `sizes` (none for a static plan), computed once per size.
std::shared_ptr<const std::vector<int64_t>> offsetsFor(const CpuProgram::Impl& m,
                                                       const SymbolBindings& sizes) {
  static const auto none = std::make_shared<const std::vector<int64_t>>();
  if (sizes.empty()) return none;
  std::vector<int64_t> key;
  for (const auto& [symbol, size] : sizes) key.push_back(size);
  std::lock_guard<std::mutex> lock(m.arenaMu);
  auto it = m.offsetsBySize.find(key);
  if (it != m.offsetsBySize.end()) return it->second;
  if (m.offsetsBySize.size() >= 64) m.offsetsBySize.clear();
  auto at = std::make_shared<const std::vector<int64_t>>(m.buffers.offsetsAt(sizes));
  m.offsetsBySize.emplace(std::move(key), at);
  return at;
}

// Whether a result of kernel k (buffer addresses `ptrs`, in its buffers' order) may share bytes
// with an operand: a second run of k would then read what the first wrote. A buffer of symbolic
// size or of a blocked layout counts as overlapping everything (its span is not known here).
bool overlapsOperands(const kernel::Kernel& k, const std::vector<void*>& ptrs) {
  struct Span {
    uintptr_t lo, hi;
  };
  auto spanOf = [&](size_t i) -> std::optional<Span> {
    const kernel::Buffer& b = k.buffers[i];
    if (b.isSymbolic() || !b.layout.empty() || i >= ptrs.size()) return std::nullopt;
    int64_t n = b.elements();
    if (b.view && b.view->rowLength > 0 && n > 0)
      n = (n - 1) / b.view->rowLength * b.view->pitch + (n - 1) % b.view->rowLength + 1;
    const auto lo = reinterpret_cast<uintptr_t>(ptrs[i]);
    return Span{lo, lo + static_cast<uintptr_t>(n) * dtypeSize(b.type)};
  };
  for (size_t o = 0; o < k.buffers.size(); ++o) {
    if (k.buffers[o].role != kernel::BufferRole::Output) continue;
    std::optional<Span> out = spanOf(o);
    if (!out) return true;
    for (size_t i = 0; i < k.buffers.size(); ++i) {
      if (k.buffers[i].role != kernel::BufferRole::Input) continue;
      std::optional<Span> in = spanOf(i);
      if (!in || (in->lo < out->hi && out->lo < in->hi)) return true;
    }
  }
  return false;
}

}  // namespace

Status CpuProgram::runInto(std::span<const Tensor> inputs, std::vector<Tensor>& outputs,
                           std::vector<double>* kernelMs) const {
  return runAgain(inputs, outputs, kernelMs, {}, nullptr);
}

Status CpuProgram::runAgain(std::span<const Tensor> inputs, std::vector<Tensor>& outputs,
                            std::vector<double>* kernelMs, const std::set<int>& again,
                            runtime::HotTimes* hot) const {
  const Impl& m = *impl_;
  const Function& f = *m.f;
  KILN_ASSIGN_OR_RETURN(SymbolBindings sizes, runtime::runSizes(f, inputs, m.options.ranges));
  runtime::prepareOutputs(f, outputs, sizes);
  const std::shared_ptr<const std::vector<int64_t>> packed = offsetsFor(m, sizes);
  const std::vector<int64_t>& itemOffsets = *packed;
  std::shared_ptr<std::byte> arena = takeArena(m);
  // Back to the free list when this run ends, however it ends.
  struct ArenaReturn {
    const Impl& m;
    std::shared_ptr<std::byte>& arena;
    ~ArenaReturn() {
      if (!arena) return;
      std::lock_guard<std::mutex> lock(m.arenaMu);
      m.freeArenas.push_back(std::move(arena));
    }
  } giveBack{m, arena};
  auto address = [&](const Value* v) -> void* {
    const Slot& s = m.buffers.values.at(v);
    switch (s.storage) {
      case Storage::Parameter:
        return const_cast<std::byte*>(inputs[static_cast<size_t>(s.offset)].bytes());
      case Storage::Constant:
        return const_cast<std::byte*>(v->def()->constantData().tensor.bytes());
      case Storage::Output: return outputs[static_cast<size_t>(s.offset)].mutableBytes();
      case Storage::Arena: return arena.get() + m.buffers.offsetOf(s, itemOffsets);
    }
    return nullptr;
  };
  Status error = Status::ok();
  std::mutex mu;
  std::atomic<bool> failed{false};
  // Kernel i's buffer addresses and block arguments, per thread that runs kernels.
  struct Args {
    std::vector<void*> ptrs;
    std::array<std::vector<void*>, 3> block;
    std::vector<int64_t> symbols;  // the kernel's, in its order (kernel::Kernel)
  };
  auto runKernel = [&](size_t i, ThreadPool& pool, Args& a) {
    auto kernelStart = kernelMs ? Clock::now() : Clock::time_point{};
    a.ptrs.clear();
    size_t temp = 0;
    for (const kernel::Buffer& b : m.kernels[i].buffers) {
      if (b.role == kernel::BufferRole::Temp)
        a.ptrs.push_back(arena.get() + m.buffers.tempOffsetOf(i, temp++, itemOffsets));
      else if (b.role == kernel::BufferRole::Internal) a.ptrs.push_back(nullptr);  // no memory
      else a.ptrs.push_back(address(b.value));
    }
    if (!m.kernels[i].symbols.empty()) {
      a.symbols.clear();
      for (const kernel::Symbol& s : m.kernels[i].symbols) a.symbols.push_back(sizes.at(s.name));
      a.ptrs.push_back(a.symbols.data());
    }
    if (auto block = m.blocks.find(i); block != m.blocks.end()) {
      void* const* args[3];
      for (size_t j = 0; j < 3; ++j) {
        a.block[j].clear();
        for (size_t b : block->second.args[j]) a.block[j].push_back(a.ptrs[b]);
        args[j] = a.block[j].data();
      }
      block->second.kernel->run(args, pool);
      if (kernelMs) (*kernelMs)[i] = msSince(kernelStart);
      return;
    }
    CallContext ctx{&m.calls, i, &error, &mu, &failed, &sizes};
    m.compiled[i]->run(a.ptrs.data(), pool, runLibraryCall, &ctx);
    if (kernelMs) (*kernelMs)[i] = msSince(kernelStart);
    if (hot && again.count(static_cast<int>(i)) && !overlapsOperands(m.kernels[i], a.ptrs)) {
      auto secondStart = Clock::now();
      m.compiled[i]->run(a.ptrs.data(), pool, runLibraryCall, &ctx);
      hot->ms[i] = msSince(secondStart);
      if (pool.numThreads() > 1) {
        ThreadPool one(1);
        auto thirdStart = Clock::now();
        m.compiled[i]->run(a.ptrs.data(), one, runLibraryCall, &ctx);
        hot->oneThreadMs[i] = msSince(thirdStart);
      }
    }
  };
  // A concurrent stage: the pool's threads take its lanes (a stage has at most one per thread),
  // and each runs its lane's kernels on that thread alone.
  auto runStage = [&](const runtime::ConcurrentStage& s) {
    ThreadPool one(1);
    m.pool->parallelFor(static_cast<int64_t>(s.lanes.size()), [&](int64_t begin, int64_t end) {
      Args a;
      for (int64_t lane = begin; lane < end; ++lane)
        for (int k : s.lanes[static_cast<size_t>(lane)]) {
          if (failed.load()) return;
          runKernel(static_cast<size_t>(k), one, a);
        }
    });
  };
  Args args;
  if (kernelMs) kernelMs->assign(m.kernels.size(), 0.0);
  if (hot) {
    hot->ms.assign(m.kernels.size(), -1.0);
    hot->oneThreadMs.assign(m.kernels.size(), -1.0);
  }
  for (size_t i = 0; i < m.kernels.size(); ++i) {
    const int stage = m.concurrency.stageOf[i];
    if (stage >= 0) {
      const runtime::ConcurrentStage& s = m.concurrency.stages[static_cast<size_t>(stage)];
      runStage(s);
      if (!error)
        return Status(error).prefix("kernels " + m.kernels[i].name + " .. " +
                                    m.kernels[static_cast<size_t>(s.last)].name);
      i = static_cast<size_t>(s.last);
      continue;
    }
    runKernel(i, *m.pool, args);
    if (!error) return Status(error).prefix("kernel " + m.kernels[i].name);
  }
  copyUnwrittenOutputs(m, inputs, outputs, address);
  return Status::ok();
}

}  // namespace kiln::codegen::cpu
