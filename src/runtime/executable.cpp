// Compiling a module into an Executable, and running it.
#include "runtime/executable.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <new>
#include <optional>
#include <set>
#include <thread>

#include "codegen/cpu/cpu_codegen.h"
#include "codegen/cpu/inverted_residual.h"
#include "codegen/cpu/object_loader.h"
#include "codegen/cpu/onednn.h"
#include "codegen/cpu/post_ops.h"
#include "interp/interpreter.h"
#include "ir/text/text.h"
#include "kernel/lower.h"
#include "passes/convolution_to_matmul.h"
#include "passes/pipeline.h"
#include "runtime/artifact.h"
#include "runtime/source_key.h"
#include "support/hash.h"
#include "support/large_buffer.h"
#include "support/mapped_file.h"
#include "support/version.h"

namespace kiln::runtime {

namespace {

// The options that shape the generated code, as text (artifact meta, cache keys).
std::string optionsText(const CompileOptions& o) {
  std::string s = "O" + std::to_string(o.optLevel) + (o.fuse ? " fuse" : " no-fuse") +
                  (o.postOps ? " post-ops" : " no-post-ops") +
                  (o.reassociate ? " reassociate" : " no-reassociate");
  for (const auto& [symbol, size] : o.dims) s += " " + symbol + "=" + std::to_string(size);
  return s;
}

Status parseOptionsText(const std::string& text, CompileOptions& o) {
  std::vector<std::string> words;
  for (size_t at = 0; at < text.size();) {
    size_t sp = text.find(' ', at);
    if (sp == std::string::npos) sp = text.size();
    words.push_back(text.substr(at, sp - at));
    at = sp + 1;
  }
  if (words.size() < 4 || (words[0] != "O0" && words[0] != "O1"))
    return Status::error("the artifact's options '" + text + "' are not readable");
  o.optLevel = words[0][1] - '0';
  o.fuse = words[1] == "fuse";
  o.postOps = words[2] == "post-ops";
  o.reassociate = words[3] == "reassociate";
  return Status::ok();
}

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

// A decimal index, or nullopt when `text` is not one.
std::optional<size_t> parseIndex(std::string_view text) {
  size_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

}  // namespace

// One library call: the oneDNN kernel prepared for its node, or null (the reference kernel runs).
struct LibraryCall {
  const kernel::Stmt* stmt = nullptr;
  std::unique_ptr<codegen::cpu::LibraryKernel> fast;
  // The call's post-ops are applied after the kernel (by codegen::cpu::applyPostOps) rather than
  // by the kernel itself.
  bool separatePostOps = false;
  std::string why;         // why the reference kernel runs, or why the post-ops are separate
  bool oneThread = false;  // a small product kept to one thread of a larger pool
  std::string block;       // the inverted-residual block it runs in, if any (Impl::blocks)
};

// Three kernels, each one library call (a 1x1, a depthwise and a 1x1 convolution), run as one
// inverted-residual block (codegen/cpu/inverted_residual.h) by the first: the other two are
// skipped. `args[j]`: the kernel buffer of each argument of layer j's call.
struct Block {
  std::unique_ptr<codegen::cpu::InvertedResidualKernel> kernel;
  std::array<std::vector<size_t>, 3> args;
  std::vector<const Value*> unstored;  // the first two layers' results, which it never stores
};

// One compiler's object code: the entry symbols of the distinct kernels it holds.
struct Executable::ObjectUnit {
  std::string object;
  std::vector<std::string> symbols;
  std::vector<size_t> kernels;  // distinct-kernel index of each symbol
};

struct Executable::Impl {
  std::unique_ptr<Module> module;
  const Function* f = nullptr;
  CompileOptions options;
  fusion::FusionPlan plan;
  std::vector<kernel::Kernel> kernels;
  std::vector<std::vector<LibraryCall>> calls;  // per kernel, by call index
  std::map<size_t, Block> blocks;               // by the index of a block's first kernel
  std::vector<std::unique_ptr<codegen::cpu::CpuCompiler>> compilers;
  std::vector<std::shared_ptr<codegen::cpu::CompiledKernel>> compiled;  // per kernel (shared
                                                                        // by identical kernels)
  int uniqueKernels = 0;
  std::unique_ptr<codegen::cpu::ThreadPool> pool;
  BufferPlan buffers;
  CompileTimes times;
  std::string passTimings;
  std::vector<ObjectUnit> objects;       // the code, for serialize()
  std::string kernelsHash;               // of the distinct kernels' IR
  std::string cacheReport;               // what the compile cache did
  std::string loadedFrom;                // the artifact it was loaded from
  std::vector<std::string> outputNames;  // as the source named them (outputNames())
  int64_t droppedBytes = -1;  // constants freed (CompileOptions::dropHeldConstants); -1: none
  // Arenas of finished runs, reused by the next ones (one per run in flight at most): a fresh
  // arena would page-fault on every first touch of every run.
  mutable std::mutex arenaMu;
  // 64-byte aligned (kBufferAlignment), on huge pages when large (support/large_buffer.h).
  mutable std::vector<std::shared_ptr<std::byte>> freeArenas;
};

struct CallContext {
  const std::vector<std::vector<LibraryCall>>* calls;  // per kernel, by call index
  size_t kernel;
  Status* error;  // the first failure of a library call (calls must not throw)
  std::mutex* mu;
};

namespace {

// Runs library call `index` of the current kernel: through its oneDNN kernel when it has one,
// else through the reference kernel of its node (operands copied out of the buffers, results
// copied back).
void runLibraryCall(void* context, int32_t index, void** buffers) {
  auto* ctx = static_cast<CallContext*>(context);
  const LibraryCall& call = (*ctx->calls)[ctx->kernel][static_cast<size_t>(index)];
  const Node& n = *call.stmt->node;
  auto postOps = [&] {
    if (!call.separatePostOps) return;
    const size_t first = n.numOperands() + n.numResults();  // the post-ops' operands follow
    codegen::cpu::applyPostOps(call.stmt->postOps, n.result(0)->type().staticDims(),
                               static_cast<float*>(buffers[n.numOperands()]), buffers + first);
  };
  if (call.fast) {
    Status s = call.fast->run(buffers);
    if (!s) {
      std::lock_guard<std::mutex> lock(*ctx->mu);
      if (*ctx->error) *ctx->error = s;
      return;
    }
    postOps();
    return;
  }
  std::vector<Tensor> operands;
  for (size_t i = 0; i < n.numOperands(); ++i) {
    const TensorType& t = n.operand(i)->type();
    Tensor x(t.dtype(), t.staticDims());
    if (x.byteSize()) std::memcpy(x.mutableBytes(), buffers[i], x.byteSize());
    operands.push_back(std::move(x));
  }
  auto results = evaluateNode(n, operands);
  if (!results) {
    std::lock_guard<std::mutex> lock(*ctx->mu);
    if (*ctx->error) *ctx->error = results.status();
    return;
  }
  for (size_t r = 0; r < results->size(); ++r) {
    const Tensor& t = (*results)[r];
    if (t.byteSize()) std::memcpy(buffers[n.numOperands() + r], t.bytes(), t.byteSize());
  }
  postOps();
}

Status writeFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) return Status::error("cannot write '" + path + "'");
  return Status::ok();
}

}  // namespace

Executable::Executable(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Executable::~Executable() = default;

// What runs each library call, and why not oneDNN (or not its post-ops) where it is not.
namespace {

// The call of a kernel that is nothing but one library call, else null.
const kernel::Stmt* onlyCall(const kernel::Kernel& k) {
  const kernel::Stmt* s = k.body.get();
  while (s && s->kind == kernel::Stmt::Kind::Block && s->body.size() == 1) s = s->body[0].get();
  return s && s->kind == kernel::Stmt::Kind::Call ? s : nullptr;
}

// Calls use(call, buffer, positions) for each buffer of each kernel that holds a graph value:
// `call` is the kernel's library call when the kernel is nothing but one (else null), and
// `positions` the buffer's positions among that call's arguments.
template <typename Use>
void forEachValueBuffer(const std::vector<kernel::Kernel>& kernels,
                        std::vector<std::vector<LibraryCall>>& calls, Use use) {
  for (size_t i = 0; i < kernels.size(); ++i) {
    const kernel::Stmt* s = onlyCall(kernels[i]);
    LibraryCall* call = s && calls[i].size() == 1 ? &calls[i][0] : nullptr;
    for (const kernel::Buffer& b : kernels[i].buffers) {
      if (!b.value) continue;
      std::vector<size_t> positions;
      for (size_t j = 0; call && j < s->args.size(); ++j)
        if (s->args[j] == b.name) positions.push_back(j);
      use(call, b, positions);
    }
  }
}

}  // namespace

// Values stored in a library kernel's blocked layout (LibraryKernel::blockableBuffers): a value
// written by a kernel that is one library call, read only by such kernels, each listing the
// value's buffer among its blockable ones, with the same layout, and not a function output.
// Between two blocked convolutions such a value then needs no reorders. Tells each library
// kernel with blockable buffers which of them are stored so (possibly none).
void Executable::storeBlockedValues(Impl& impl, const Function& f) {
  struct Use {
    LibraryCall* call;
    size_t position;
  };
  std::map<const Value*, std::vector<Use>> uses;  // every read and write of a value
  std::set<const Value*> excluded;                // read or written some other way
  // Per call that could compute blocked, the positions it finds stored blocked (none, it may
  // be: every such call is told, so that it prepares the reorders it needs now, not in a run).
  std::map<LibraryCall*, std::vector<size_t>> stored;
  forEachValueBuffer(
      impl.kernels, impl.calls,
      [&](LibraryCall* call, const kernel::Buffer& b, const std::vector<size_t>& positions) {
        std::vector<size_t> blockable;
        if (call && call->fast) blockable = call->fast->blockableBuffers();
        if (!blockable.empty()) stored.emplace(call, std::vector<size_t>{});
        if (call && call->separatePostOps) blockable.clear();
        bool ok = !positions.empty();
        for (size_t p : positions)
          ok = ok && std::find(blockable.begin(), blockable.end(), p) != blockable.end();
        if (!ok) excluded.insert(b.value);
        else
          for (size_t p : positions) uses[b.value].push_back({call, p});
      });
  for (const Value* v : f.outputs()) excluded.insert(v);
  for (const auto& [v, list] : uses) {
    if (excluded.count(v)) continue;
    bool written = false, sameLayout = true;
    for (const Use& u : list) {
      written = written || u.position == u.call->stmt->node->numOperands();
      sameLayout =
          sameLayout && u.call->fast->blockedLayout() == list[0].call->fast->blockedLayout();
    }
    if (!written || !sameLayout) continue;
    for (const Use& u : list) stored[u.call].push_back(u.position);
  }
  for (auto& [call, positions] : stored) call->fast->storeBlocked(positions);
}

// The constants whose every reader is a library kernel holding its own copy of them
// (LibraryKernel::holdsWeights) and reading them as its weights: their data can be freed
// (CompileOptions::dropHeldConstants), and an artifact stores them only in the kernels' layouts.
// Told of each library call once it is prepared (from any thread), it finds such a constant as
// soon as its last reader holds it. With `drop` it frees the data right then (the constant
// becomes ConstantData::held), so that a compile does not keep every constant and every held
// copy at once.
class Executable::HeldConstants {
 public:
  HeldConstants(Impl& impl, const Function& f, bool drop)
      : drop_(drop), dropped_(impl.droppedBytes) {
    if (drop_) dropped_ = 0;
    forEachValueBuffer(
        impl.kernels, impl.calls,
        [&](LibraryCall* call, const kernel::Buffer& b, const std::vector<size_t>& positions) {
          if (b.role != kernel::BufferRole::Input || b.value->def()->op() != OpCode::Constant)
            return;
          Entry& e = values_[b.value];
          ++e.readers;
          if (call && positions == std::vector<size_t>{1}) weightsOf_[call] = b.value;
          else e.held = false;
        });
    for (const Value* v : f.outputs())
      if (auto it = values_.find(v); it != values_.end()) it->second.held = false;
  }
  ~HeldConstants() {
    if (untrimmed_ > 0) trim();
  }

  void prepared(const LibraryCall& call) {
    auto w = weightsOf_.find(&call);
    if (w == weightsOf_.end()) return;
    std::lock_guard<std::mutex> lock(mu_);
    Entry& e = values_.at(w->second);
    e.held = e.held && call.fast && call.fast->holdsWeights();
    if (--e.readers > 0 || !e.held) return;
    Node* n = const_cast<Node*>(w->second->def());
    found_.insert(n);
    if (!drop_ || n->constantData().held) return;
    int64_t bytes = static_cast<int64_t>(n->constantData().tensor.byteSize());
    dropped_ += bytes;
    ConstantData held;
    held.poolName = n->constantData().poolName;
    held.held = true;
    n->setAttr("value", AttrValue(std::in_place_index<8>, std::move(held)));
    // The constants' storage mostly comes from the heap (the importer's parsed strings), where
    // freed memory stays this process's until the heap is trimmed: without that a compile would
    // still hold every constant next to the held copies (measured on the ViT: a peak of 213 MiB
    // instead of 182).
    if ((untrimmed_ += bytes) >= (int64_t{16} << 20)) trim();
  }

  // The constant nodes found held so far.
  const std::set<const Node*>& found() const { return found_; }

 private:
  // Returns the heap's free memory to the system (glibc; elsewhere nothing).
  void trim() {
    untrimmed_ = 0;
#ifdef __GLIBC__
    malloc_trim(0);
#endif
  }

  struct Entry {
    int readers = 0;   // reading kernels not yet prepared
    bool held = true;  // every reader so far holds it as its weights
  };
  const bool drop_;
  std::mutex mu_;
  std::map<const Value*, Entry> values_;
  std::map<const LibraryCall*, const Value*> weightsOf_;  // the constant a call reads as weights
  std::set<const Node*> found_;
  int64_t& dropped_;
  int64_t untrimmed_ = 0;  // bytes freed since the heap was last trimmed
};

std::string Executable::describeCalls(const Impl& impl) {
  std::string text;
  for (size_t i = 0; i < impl.kernels.size(); ++i)
    for (const LibraryCall& c : impl.calls[i]) {
      text += impl.kernels[i].name + ": " + c.stmt->callee + ": ";
      text += !c.block.empty() ? c.block
              : c.fast         ? c.fast->describe()
                               : "reference kernel (" + c.why + ")";
      if (c.separatePostOps) text += "; post-ops applied after the call";
      if (c.fast && c.separatePostOps) text += " (" + c.why + ")";
      if (c.fast && c.oneThread) text += "; one thread (a small product)";
      text += "\n";
    }
  return text;
}

// The compile cache: an entry is the artifact of an earlier compile of the same source with the
// same options, for this target and this build of Kiln (buildKey: a fingerprint of its code,
// computed once per process and cache directory). Its path ("" without a cache).
std::string Executable::cacheEntryPath(const CompileOptions& options) {
  if (options.cacheDir.empty() || options.sourceKey.empty()) return "";
  static std::mutex mu;
  static std::map<std::string, std::string> builds;  // cache directory -> buildKey
  std::string build;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = builds.find(options.cacheDir);
    if (it == builds.end()) it = builds.emplace(options.cacheDir, buildKey(options.cacheDir)).first;
    build = it->second;
  }
  std::string key = options.sourceKey + "\n" + optionsText(options) + "\n" +
                    codegen::cpu::hostTarget() + "\n" + build;
  return (std::filesystem::path(options.cacheDir) / (hex64(hash64(key)) + ".kiln")).string();
}

// Deletes the least recently used entries (by modification time, which a hit refreshes) of the
// cache in `dir` until its entries total at most `limit` bytes; `keep` stays. Leftover temporary
// files of writes that did not finish, an hour old, go too. Returns how many entries it deleted.
int Executable::evictCacheEntries(const std::string& dir, uint64_t limit, const std::string& keep) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<std::pair<fs::file_time_type, fs::path>> entries;
  uint64_t total = 0;
  const auto now = fs::file_time_type::clock::now();
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const fs::path& p = e.path();
    std::string name = p.filename().string();
    fs::file_time_type t = e.last_write_time(ec);
    if (ec || !e.is_regular_file(ec)) continue;
    if (name.rfind(".", 0) == 0 && name.find(".kiln.tmp") != std::string::npos) {
      if (now - t > std::chrono::hours(1)) fs::remove(p, ec);
      continue;
    }
    if (p.extension() != ".kiln") continue;
    total += e.file_size(ec);
    if (p != fs::path(keep)) entries.push_back({t, p});
  }
  std::sort(entries.begin(), entries.end());
  int deleted = 0;
  for (const auto& [time, p] : entries) {
    if (total <= limit) break;
    uint64_t size = fs::file_size(p, ec);
    if (ec || !fs::remove(p, ec)) continue;
    total -= size;
    ++deleted;
  }
  return deleted;
}

// The cache entry at `path` loaded; null when there is none, an error when it is unusable.
StatusOr<std::unique_ptr<Executable>> Executable::loadCacheEntry(const std::string& path,
                                                                 const CompileOptions& options) {
  if (!std::filesystem::exists(path)) return std::unique_ptr<Executable>();
  auto start = Clock::now();
  KILN_ASSIGN_OR_RETURN(MappedFile file, MappedFile::open(path));
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Executable> hit, load(std::move(file), path, options));
  hit->impl_->cacheReport = "hit: " + path;
  // The entry is now the most recently used (evictCacheEntries deletes the least recent first).
  std::error_code ec;
  std::filesystem::last_write_time(path, std::filesystem::file_time_type::clock::now(), ec);
  hit->impl_->times.cacheLoad = msSince(start);
  return hit;
}

StatusOr<std::unique_ptr<Executable>> Executable::fromCache(const CompileOptions& options) {
  if (options.backend != "cpu") return std::unique_ptr<Executable>();
  std::string path = cacheEntryPath(options);
  if (path.empty()) return std::unique_ptr<Executable>();
  StatusOr<std::unique_ptr<Executable>> hit = loadCacheEntry(path, options);
  if (!hit) return std::unique_ptr<Executable>();  // compile() reports and rebuilds it
  return hit;
}

Status runCpuPasses(Module& module, PassManager& pm, int optLevel, const SymbolBindings& dims) {
  if (optLevel > 0) {
    PipelineOptions po;
    po.specialize = dims;
    KILN_RETURN_IF_ERROR(runDefaultPipeline(module, pm, po).status());
  } else if (!dims.empty()) {
    std::unique_ptr<Pass> p = makeSpecializeShapesPass(dims);
    KILN_RETURN_IF_ERROR(pm.runPass(*p, module).status());
  }
  // The CPU backend has no fused attention kernel: attention runs as two oneDNN matrix products
  // around a softmax kernel (at every optimisation level: this is lowering, not optimisation).
  KILN_RETURN_IF_ERROR(pm.runPass("split-attention", module).status());
  // Convolutions with few output pixels run faster as an im2col and one matrix product than on
  // oneDNN's convolution kernels (passes/convolution_to_matmul.h), except the ones oneDNN runs
  // as Winograd convolutions here; an optimisation, so not at -O0.
  if (optLevel > 0) {
    ConvolutionToMatmulOptions c2m;
    c2m.keepWinograd = codegen::cpu::oneDnnWinograd();
    KILN_ASSIGN_OR_RETURN(bool rewrote, pm.runPass(*makeConvolutionToMatmulPass(c2m), module));
    if (rewrote) KILN_RETURN_IF_ERROR(pm.runPass("dce", module).status());
  }
  return Status::ok();
}

StatusOr<std::unique_ptr<Executable>> Executable::compile(std::unique_ptr<Module> module,
                                                          const CompileOptions& options) {
  if (options.backend != "cpu")
    return Status::error("unknown backend '" + options.backend + "' (known: cpu)");
  if (!module->entry()) return Status::error("the module has no function");
  std::string cachePath = cacheEntryPath(options), cacheReport;
  if (!cachePath.empty()) {
    StatusOr<std::unique_ptr<Executable>> hit = loadCacheEntry(cachePath, options);
    if (hit && *hit) return hit;
    cacheReport =
        !hit ? "entry rejected (" + hit.status().message() + "), rebuilt: " : "miss, written: ";
  }
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  // The outputs' names are the program's interface: taken before the passes, which may replace
  // an output by another value (max(h, h) by h).
  for (const Value* v : module->entry()->outputs()) impl->outputNames.push_back(v->name());
  // Graph passes (or only the specialisation at -O0).
  auto start = Clock::now();
  PassManager pm(options.instrumentation);
  KILN_RETURN_IF_ERROR(runCpuPasses(*module, pm, options.optLevel, options.dims));
  impl->times.passes = msSince(start);
  impl->passTimings = pm.timingReport();
  KILN_RETURN_IF_ERROR(build(*impl, std::move(module), nullptr));
  auto exe = std::unique_ptr<Executable>(new Executable(std::move(impl)));
  if (!cachePath.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(options.cacheDir, ec);
    StatusOr<uint64_t> written = exe->writeArtifact(cachePath);
    exe->impl_->cacheReport = written ? cacheReport + cachePath
                                      : cacheReport + "not written: " + written.status().message();
    if (written) {
      int evicted = evictCacheEntries(options.cacheDir, options.cacheLimitBytes, cachePath);
      if (evicted > 0)
        exe->impl_->cacheReport += " (" + std::to_string(evicted) +
                                   " least recently used entries deleted to stay under the " +
                                   std::to_string(options.cacheLimitBytes >> 20) + " MiB limit)";
    }
  }
  return exe;
}

// Fusion, lowering, library kernels, code generation (or, with `objects`, linking the object
// code of an artifact) and buffer planning, for a module the passes have run on.
Status Executable::build(Impl& impl, std::unique_ptr<Module> module,
                         const std::vector<ObjectUnit>* objects, const PackedByCall* prepacked) {
  const CompileOptions& options = impl.options;
  Function* f = module->entry();
  if (!f) return Status::error("the module has no function");
  for (const auto& n : f->nodes())
    for (size_t r = 0; r < n->numResults(); ++r)
      if (!n->result(r)->type().isStatic())
        return Status::error("value " + n->result(r)->name() + " has type " +
                             n->result(r)->type().str() +
                             ": give the sizes of its symbolic dimensions to compile it");
  // Fusion and lowering.
  auto start = Clock::now();
  fusion::FusionOptions fo;
  fo.fuse = options.fuse;
  impl.plan = fusion::planFusion(*f, fo);
  impl.times.fusion = msSince(start);
  start = Clock::now();
  kernel::LowerOptions lo;
  lo.postOps = options.postOps;
  lo.reassociate = options.reassociate;
  KILN_ASSIGN_OR_RETURN(impl.kernels, kernel::lowerPlan(*f, impl.plan, lo));
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
  struct Pending {
    LibraryCall* call;
    double flops;
    const codegen::cpu::PackedWeights* prepacked;  // from the artifact, or null
  };
  std::vector<Pending> pending;
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
      pending.push_back({&impl.calls.back()[j], impl.plan.kernels[i].flops, packed});
    }
  }
  // Inverted-residual blocks: a 1x1 convolution, a depthwise one and a 1x1 one, each a kernel
  // that is one library call with its bias and clamp as post-ops, where the first two results have
  // no other reader, run as one Kiln kernel that keeps the values between them in cache
  // (codegen/cpu/inverted_residual.h; docs/codegen.md, "Inverted-residual blocks"). Their calls
  // get no oneDNN kernel; the block reads the weights from the constants.
  {
    std::map<const Value*, int> readers;
    for (const kernel::Kernel& k : impl.kernels)
      for (const kernel::Buffer& b : k.buffers)
        if (b.role == kernel::BufferRole::Input && b.value) ++readers[b.value];
    const std::set<const Value*> outputs(f->outputs().begin(), f->outputs().end());
    for (size_t i = 0; i + 2 < impl.kernels.size(); ++i) {
      std::array<const kernel::Stmt*, 3> c{};
      bool ok = true;
      for (size_t j = 0; j < 3; ++j) {
        c[j] = onlyCall(impl.kernels[i + j]);
        ok = ok && c[j] && impl.calls[i + j].size() == 1 && c[j]->node->numResults() == 1;
      }
      if (!ok) continue;
      // Each call's arguments as kernel buffers; the values the calls write (after their
      // post-ops) and read as their sources.
      Block block;
      std::array<const Value*, 3> source{}, result{};
      for (size_t j = 0; j < 3; ++j) {
        const auto& buffers = impl.kernels[i + j].buffers;
        for (const std::string& name : c[j]->args) {
          auto it = std::find_if(buffers.begin(), buffers.end(),
                                 [&](const kernel::Buffer& b) { return b.name == name; });
          ok = ok && it != buffers.end();
          if (ok) block.args[j].push_back(static_cast<size_t>(it - buffers.begin()));
        }
        const size_t operands = c[j]->node->numOperands();
        ok = ok && block.args[j].size() > operands;
        if (!ok) break;
        source[j] = buffers[block.args[j][0]].value;
        result[j] = buffers[block.args[j][operands]].value;
      }
      if (!ok || source[1] != result[0] || source[2] != result[1] || readers[result[0]] != 1 ||
          readers[result[1]] != 1 || outputs.count(result[0]) || outputs.count(result[1]))
        continue;
      auto k = codegen::cpu::InvertedResidualKernel::create(
          {c[0]->node, &c[0]->postOps}, {c[1]->node, &c[1]->postOps}, {c[2]->node, &c[2]->postOps});
      if (!k) continue;
      block.kernel = std::move(*k);
      block.unstored = {result[0], result[1]};
      impl.calls[i][0].block = block.kernel->describe() + " with " + impl.kernels[i + 1].name +
                               " and " + impl.kernels[i + 2].name;
      for (size_t j = 1; j < 3; ++j)
        impl.calls[i + j][0].block = "in " + impl.kernels[i].name + "'s inverted-residual block";
      impl.blocks.emplace(i, std::move(block));
      i += 2;
    }
    std::erase_if(pending, [](const Pending& p) { return !p.call->block.empty(); });
  }
  // Constants only library kernels hold are freed as their readers are prepared, before code
  // generation (CompileOptions::dropHeldConstants; an artifact does not store their data).
  std::optional<HeldConstants> held;
  if (options.dropHeldConstants) held.emplace(impl, *f, /*drop=*/true);
  // Whether the run has more than one thread, so that keeping a call to one thread means something.
  const bool pooled = codegen::cpu::ThreadPool(options.threads).numThreads() > 1;
  auto prepare = [&](const Pending& p) {
    LibraryCall& c = *p.call;
    const kernel::Stmt* s = c.stmt;
    bool small =
        s->node->op() == OpCode::DotGeneral && p.flops < kSmallCallFlops &&
        p.flops > 4.0 * static_cast<double>(s->node->operand(1)->type().numElements().value_or(0));
    int threads = small ? 1 : options.threads;
    c.oneThread = small && pooled;
    auto fast = codegen::cpu::createOneDnnKernel(*s->node, s->postOps, threads, p.prepacked);
    if (!fast && !s->postOps.empty()) {
      // oneDNN cannot take these post-ops (well): the kernel without them, then ours.
      c.why = fast.status().message();
      fast = codegen::cpu::createOneDnnKernel(*s->node, {}, threads, p.prepacked);
      c.separatePostOps = true;
    }
    if (fast) c.fast = std::move(*fast);
    else c.why = fast.status().message();
    if (held) held->prepared(c);
  };
  {
    int hardware = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    size_t helpers = std::min<size_t>(
        pending.size(), static_cast<size_t>(options.threads > 0 ? options.threads : hardware));
    std::atomic<size_t> next{0};
    auto work = [&] {
      for (size_t i; (i = next.fetch_add(1)) < pending.size();) prepare(pending[i]);
    };
    std::vector<std::thread> threads;
    for (size_t t = 1; t < helpers; ++t) threads.emplace_back(work);
    work();
    for (std::thread& t : threads) t.join();
  }
  held.reset();
  // A constant without data (an artifact stores it only in its readers' layouts) must be held by
  // every reader: this oneDNN chose the layouts the artifact has.
  Status missing = Status::ok();
  forEachValueBuffer(
      impl.kernels, impl.calls,
      [&](LibraryCall* call, const kernel::Buffer& b, const std::vector<size_t>& positions) {
        const Node* def = b.value->def();
        if (!missing || def->op() != OpCode::Constant || !def->constantData().held) return;
        if (call && call->fast && call->fast->holdsWeights() && positions == std::vector<size_t>{1})
          return;
        missing = Status::error(
            "constant @" + def->constantData().poolName +
            " is stored only in the layout a library kernel chose when the artifact was written, "
            "and here " +
            (call && call->fast ? call->stmt->node->describe() + " does not take it in that layout"
             : call ? call->stmt->node->describe() + " has no library kernel (" + call->why + ")"
                    : "a loop kernel reads it") +
            ": compile the model again");
      });
  KILN_RETURN_IF_ERROR(missing);
  storeBlockedValues(impl, *f);
  impl.times.lowering = msSince(start);
  if (!options.instrumentation.dumpDir.empty()) {
    std::string text;
    for (const kernel::Kernel& k : impl.kernels) text += kernel::printKernel(k) + "\n";
    KILN_RETURN_IF_ERROR(writeFile(
        (std::filesystem::path(options.instrumentation.dumpDir) / "kernels.txt").string(), text));
    KILN_RETURN_IF_ERROR(writeFile(
        (std::filesystem::path(options.instrumentation.dumpDir) / "library-calls.txt").string(),
        describeCalls(impl)));
  }
  // Code generation: kernels that differ only in their names compile once, and the distinct
  // ones are split over up to `threads` compilers (one LLVM context and object each) that run at
  // once. An artifact brings the object code of each compiler instead.
  start = Clock::now();
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
  // A kernel that is one library call needs no code: it calls the handler directly.
  std::vector<size_t> generated;
  for (size_t u = 0; u < unique.size(); ++u) {
    uniqueCompiled[u] = codegen::cpu::callOnlyKernel(impl.kernels[unique[u]]);
    if (!uniqueCompiled[u]) generated.push_back(u);
  }
  if (objects) {
    for (const ObjectUnit& u : *objects) {
      KILN_ASSIGN_OR_RETURN(auto linked, codegen::cpu::linkObject(u.object, u.symbols));
      for (size_t j = 0; j < linked.size(); ++j) {
        if (u.kernels[j] >= unique.size())
          return Status::error("the artifact's object code names kernel " +
                               std::to_string(u.kernels[j]) + " of " +
                               std::to_string(unique.size()));
        // A one-call kernel has its direct form already (artifacts written before such kernels
        // got no code hold code for them too).
        if (!uniqueCompiled[u.kernels[j]]) uniqueCompiled[u.kernels[j]] = std::move(linked[j]);
      }
      impl.objects.push_back(u);
    }
    for (const auto& c : uniqueCompiled)
      if (!c) return Status::error("the artifact has no object code for some kernel");
  } else {
    int hardware = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    int workers = std::min<int>(
        {options.threads > 0 ? options.threads : hardware, static_cast<int>(generated.size()), 8});
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
  }
  for (size_t i = 0; i < impl.kernels.size(); ++i)
    impl.compiled.push_back(uniqueCompiled[uniqueOf[i]]);
  impl.times.codegen = msSince(start);
  if (!options.instrumentation.dumpDir.empty() && !objects) {
    std::string ir;
    for (const auto& c : impl.compilers) ir += c->lastLlvmIr();
    KILN_RETURN_IF_ERROR(writeFile(
        (std::filesystem::path(options.instrumentation.dumpDir) / "kernels.ll").string(), ir));
  }
  start = Clock::now();
  // A block's kernels run as one, at its first kernel's place: their values may not share memory.
  // The two values between its layers need no memory.
  std::vector<RunTogether> together;
  for (const auto& [first, block] : impl.blocks)
    together.push_back({static_cast<int>(first), static_cast<int>(first) + 2, block.unstored});
  KILN_ASSIGN_OR_RETURN(impl.buffers, planBuffers(*f, impl.kernels, together));
  impl.times.buffers = msSince(start);
  impl.pool = std::make_unique<codegen::cpu::ThreadPool>(options.threads);
  impl.f = f;
  impl.module = std::move(module);
  return Status::ok();
}

// ---- artifacts ------------------------------------------------------------------------------
//
// Sections: "meta" (kiln version, target, options), "module" (the module after the passes, as
// .kir text whose constants are in "blob"), "kernels" (a hash of the lowered kernels, which
// loading recomputes), "outputs" (the source's output names, a line each), and per code unit w:
// "object.w" (an ELF object), "symbols.w" (its kernel entry symbols) and "units.w" (the distinct
// kernels they are).

// The sections of the artifact: small texts owned here, the weights (constants, packed weights)
// and the object code as views of where they lie.
struct Executable::ArtifactParts {
  std::deque<std::string> text;  // stable addresses
  Blob blob;
  SectionPieces sections;

  void add(const std::string& name, std::string content) {
    text.push_back(std::move(content));
    sections[name].push_back(text.back());
  }
};

void Executable::artifactParts(ArtifactParts& parts) const {
  const Impl& m = *impl_;
  parts.add("meta", "kiln " + std::string(kKilnVersion) + "\ntarget " + codegen::cpu::hostTarget() +
                        "\noptions " + optionsText(m.options) + "\n");
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
  std::string outputs, packed;
  for (const std::string& name : m.outputNames) outputs += name + "\n";
  parts.add("outputs", outputs);
  // The weights library kernels hold in layouts of their own, so that loading uses them in place.
  for (size_t i = 0; i < m.calls.size(); ++i)
    for (size_t j = 0; j < m.calls[i].size(); ++j) {
      const LibraryCall& c = m.calls[i][j];
      std::optional<codegen::cpu::PackedWeights> w;
      if (c.fast) w = c.fast->packedWeights();
      if (!w) continue;
      std::string id = std::to_string(i) + "." + std::to_string(j);
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

std::string Executable::serialize() const {
  ArtifactParts parts;
  artifactParts(parts);
  return encodeArtifact(parts.sections);
}

StatusOr<uint64_t> Executable::writeArtifact(const std::string& path) const {
  ArtifactParts parts;
  artifactParts(parts);
  return runtime::writeArtifact(path, parts.sections);
}

StatusOr<std::unique_ptr<Executable>> Executable::load(std::string_view bytes,
                                                       const std::string& source,
                                                       const CompileOptions& runOptions) {
  return load(bytes, source, runOptions, nullptr);
}

StatusOr<std::unique_ptr<Executable>> Executable::load(MappedFile file, const std::string& source,
                                                       const CompileOptions& runOptions) {
  auto mapping = std::make_shared<const MappedFile>(std::move(file));
  return load(mapping->bytes(), source, runOptions, mapping);
}

// `mapping`, when given, is the mapped file `bytes` lie in: constants and packed weights then
// use its bytes in place, and keep it mapped.
StatusOr<std::unique_ptr<Executable>> Executable::load(std::string_view bytes,
                                                       const std::string& source,
                                                       const CompileOptions& runOptions,
                                                       std::shared_ptr<const MappedFile> mapping) {
  auto start = Clock::now();
  // The weights ("blob", "packed.*") are most of the bytes. From a mapping they are checked on
  // another thread while the rest of the load runs: they are data, which nothing reads before
  // that check has passed (the load waits for it before it returns the executable).
  auto weights = [](const std::string& name) {
    return name == "blob" || name.rfind("packed.", 0) == 0;
  };
  std::function<bool(const std::string&)> defer;
  if (mapping) defer = weights;
  KILN_ASSIGN_OR_RETURN(DecodedArtifact s, decodeArtifact(bytes, source, defer));
  std::future<Status> weightsChecked;
  if (mapping)
    weightsChecked = std::async(std::launch::async, [&s, weights, &mapping] {
      // Read from the file, not through the mapping: checking makes no page resident (kernels
      // map the pages they read when they first run).
      for (const auto& [name, data] : s.sections)
        if (weights(name)) KILN_RETURN_IF_ERROR(s.verify(name, mapping.get()));
      return Status::ok();
    });
  auto lines = [](std::string_view text) {
    std::vector<std::string> out;
    size_t at = 0;
    while (at < text.size()) {
      size_t nl = text.find('\n', at);
      if (nl == std::string::npos) nl = text.size();
      out.push_back(std::string(text.substr(at, nl - at)));
      at = nl + 1;
    }
    return out;
  };
  std::map<std::string, std::string> meta;
  for (const std::string& l : lines(s["meta"])) {
    size_t sp = l.find(' ');
    if (sp != std::string::npos) meta[l.substr(0, sp)] = l.substr(sp + 1);
  }
  if (meta["kiln"] != kKilnVersion)
    return Status::error(source + ": compiled by Kiln " + meta["kiln"] + ", this is Kiln " +
                         kKilnVersion + ": compile the model again");
  const std::string host = codegen::cpu::hostTarget();
  if (meta["target"] != host)
    return Status::error(source + ": compiled for CPU '" + meta["target"] + "', this machine is '" +
                         host + "': compile the model again here");
  auto impl = std::make_unique<Impl>();
  // What shapes the code (optimisation level, fusion, post-ops) comes from the artifact; how to
  // run it (threads) from the caller.
  impl->options = runOptions;
  KILN_RETURN_IF_ERROR(parseOptionsText(meta["options"], impl->options));
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Module> module,
                        parseModule(s["module"], source + " (module)", s["blob"], mapping));
  // Packed weights: "K.J LAYOUT" per line, the bytes in "packed.K.J" (call J of kernel K). The
  // kernels use them in place from a mapping; from bytes the caller keeps, a copy each (a held
  // constant has no other copy).
  PackedByCall prepacked;
  for (const std::string& l : lines(s["packed"])) {
    size_t dot = l.find('.'), sp = l.find(' ');
    std::optional<size_t> k, j;
    if (dot < sp && sp != std::string::npos) {
      k = parseIndex(std::string_view(l).substr(0, dot));
      j = parseIndex(std::string_view(l).substr(dot + 1, sp - dot - 1));
    }
    if (!k || !j || !s.has("packed." + l.substr(0, sp)))
      return Status::error(source + ": malformed packed-weights entry '" + l + "'");
    codegen::cpu::PackedWeights w;
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
  std::vector<ObjectUnit> units;
  for (size_t w = 0; s.has("object." + std::to_string(w)); ++w) {
    ObjectUnit u;
    u.object = std::string(s["object." + std::to_string(w)]);
    u.symbols = lines(s["symbols." + std::to_string(w)]);
    for (const std::string& k : lines(s["units." + std::to_string(w)])) {
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
  impl->outputNames = lines(s["outputs"]);
  if (!module->entry() || impl->outputNames.size() != module->entry()->outputs().size())
    return Status::error(source + ": its output names do not match its module's outputs");
  const std::string kernels(s["kernels"]);
  impl->times.passes = msSince(start);  // reading and parsing; no passes run
  KILN_RETURN_IF_ERROR(build(*impl, std::move(module), &units, &prepacked));
  if (impl->kernelsHash != kernels)
    return Status::error(source + ": its kernels (" + kernels +
                         ") are not the ones this Kiln lowers its module to (" + impl->kernelsHash +
                         "): compile the model again");
  if (weightsChecked.valid()) KILN_RETURN_IF_ERROR(weightsChecked.get());
  impl->loadedFrom = source;
  // Parsing touched the pages of the text, the code and the constants it read. Those still used
  // (constants that kernels read) come back from the page cache on first use; the rest stop
  // counting as this process's memory.
  if (mapping) mapping->release(bytes);
  return std::unique_ptr<Executable>(new Executable(std::move(impl)));
}

StatusOr<std::vector<Tensor>> Executable::run(std::span<const Tensor> inputs,
                                              std::vector<double>* kernelMs) const {
  std::vector<Tensor> outputs;
  KILN_RETURN_IF_ERROR(runInto(inputs, outputs, kernelMs));
  return outputs;
}

Status Executable::runInto(std::span<const Tensor> inputs, std::vector<Tensor>& outputs,
                           std::vector<double>* kernelMs) const {
  const Impl& m = *impl_;
  const Function& f = *m.f;
  if (inputs.size() != f.numParameters())
    return Status::error("expected " + std::to_string(f.numParameters()) + " inputs, got " +
                         std::to_string(inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].type() != f.parameter(i)->type())
      return Status::error("input " + std::to_string(i) + " ('" + f.parameter(i)->name() +
                           "'): expected " + f.parameter(i)->type().str() + ", got " +
                           inputs[i].type().str());
  // Outputs are written whole by their kernels (or copied below), so they start uninitialised;
  // the caller's tensors are reused when they have the right types and are not shared.
  bool reuse = outputs.size() == f.outputs().size();
  for (size_t o = 0; reuse && o < outputs.size(); ++o)
    reuse = outputs[o].defined() && outputs[o].type() == f.outputs()[o]->type() &&
            outputs[o].isUnique();
  if (!reuse) {
    outputs.clear();
    for (const Value* v : f.outputs())
      outputs.push_back(Tensor::uninitialized(v->type().dtype(), v->type().staticDims()));
  }
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
      case Storage::Arena: return arena.get() + s.offset;
      case Storage::Unstored: return nullptr;
    }
    return nullptr;
  };
  Status error = Status::ok();
  std::mutex mu;
  // The addresses of kernel i's buffers.
  auto kernelPtrs = [&](size_t i, std::vector<void*>& ptrs) {
    ptrs.clear();
    size_t temp = 0;
    for (const kernel::Buffer& b : m.kernels[i].buffers) {
      if (b.role == kernel::BufferRole::Temp)
        ptrs.push_back(arena.get() + m.buffers.temps[i][temp++]);
      else ptrs.push_back(address(b.value));
    }
  };
  std::vector<void*> ptrs;
  std::array<std::vector<void*>, 3> blockPtrs, blockArgs;
  if (kernelMs) kernelMs->assign(m.kernels.size(), 0.0);
  for (size_t i = 0; i < m.kernels.size(); ++i) {
    const kernel::Kernel& k = m.kernels[i];
    auto kernelStart = kernelMs ? Clock::now() : Clock::time_point{};
    if (auto block = m.blocks.find(i); block != m.blocks.end()) {
      void* const* args[3];
      for (size_t j = 0; j < 3; ++j) {
        kernelPtrs(i + j, blockPtrs[j]);
        blockArgs[j].clear();
        for (size_t b : block->second.args[j]) blockArgs[j].push_back(blockPtrs[j][b]);
        args[j] = blockArgs[j].data();
      }
      block->second.kernel->run(args, *m.pool);
      if (kernelMs) (*kernelMs)[i] = msSince(kernelStart);
      i += 2;  // the block's other kernels (their times stay 0)
      continue;
    }
    kernelPtrs(i, ptrs);
    CallContext ctx{&m.calls, i, &error, &mu};
    m.compiled[i]->run(ptrs.data(), *m.pool, runLibraryCall, &ctx);
    if (kernelMs) (*kernelMs)[i] = msSince(kernelStart);
    if (!error) return Status(error).prefix("kernel " + k.name);
  }
  // Outputs that no kernel writes: parameters, constants, or a value listed twice.
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
  return Status::ok();
}

const Function& Executable::function() const { return *impl_->f; }

const std::vector<std::string>& Executable::outputNames() const { return impl_->outputNames; }

int64_t Executable::droppedConstantBytes() const { return impl_->droppedBytes; }
const fusion::FusionPlan& Executable::plan() const { return impl_->plan; }
const std::vector<kernel::Kernel>& Executable::kernels() const { return impl_->kernels; }
const BufferPlan& Executable::buffers() const { return impl_->buffers; }
const CompileTimes& Executable::times() const { return impl_->times; }
int Executable::threads() const { return impl_->pool->numThreads(); }
const std::string& Executable::passTimings() const { return impl_->passTimings; }

std::string Executable::libraryCallDetails() const { return describeCalls(*impl_); }

std::string Executable::libraryCalls() const {
  std::map<std::string, int> fast, reference;
  for (const auto& calls : impl_->calls)
    for (const LibraryCall& c : calls) ++(c.fast ? fast : reference)[c.stmt->callee];
  auto list = [](const std::map<std::string, int>& m) {
    std::string s;
    for (const auto& [name, n] : m) s += (s.empty() ? "" : ", ") + std::to_string(n) + " " + name;
    return s;
  };
  std::string out;
  if (!fast.empty()) out += "oneDNN: " + list(fast);
  if (!reference.empty())
    out += std::string(out.empty() ? "" : "; ") + "reference: " + list(reference);
  return out.empty() ? "none" : out;
}
std::string Executable::hostCpu() const { return codegen::cpu::hostCpu(); }
int Executable::uniqueKernels() const { return impl_->uniqueKernels; }
const std::string& Executable::cacheReport() const { return impl_->cacheReport; }
const std::string& Executable::loadedFrom() const { return impl_->loadedFrom; }

std::string defaultCacheDir() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg && *xdg) return (std::filesystem::path(xdg) / "kiln").string();
  const char* home = std::getenv("HOME");
  if (home && *home) return (std::filesystem::path(home) / ".cache" / "kiln").string();
  return "";
}

}  // namespace kiln::runtime
