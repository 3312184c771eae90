// oneDNN library kernels: dot_general -> matmul, convolution -> convolution_forward. See
// onednn.h for what is covered and docs/codegen.md ("Library kernels (oneDNN)") for the design.
//
// Every operand and result is described to oneDNN by its logical dims and the strides it has in
// Kiln's dense row-major buffer, so a primitive reads and writes the runtime's buffers in place.
// Only constant weights may be reordered, once, into the layout the primitive prefers.
#include "codegen/cpu/onednn.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ir/op.h"
#include "ir/tensor.h"
#include "ir/types.h"
#include "support/large_buffer.h"

#if DNNL_CPU_RUNTIME == DNNL_RUNTIME_OMP
// From libgomp, which libdnnl is linked against (declared here so that no OpenMP compile flags
// are needed: nothing in Kiln uses OpenMP pragmas).
extern "C" {
int omp_get_max_threads(void);
void omp_set_num_threads(int n);
}
#endif

namespace kiln::codegen::cpu {
namespace {

using dnnl::memory;
using Dims = memory::dims;

// Sets the OpenMP thread count of the calling thread for the scope's lifetime. libgomp keeps
// nthreads-var per thread for threads it did not create (an OpenMP "data environment" ICV), so
// this does not change what other threads' oneDNN calls use.
class OmpThreadsScope {
 public:
  explicit OmpThreadsScope(int threads) {
#if DNNL_CPU_RUNTIME == DNNL_RUNTIME_OMP
    if (threads > 0) {
      saved_ = omp_get_max_threads();
      omp_set_num_threads(threads);
    }
#else
    (void)threads;
#endif
  }
  ~OmpThreadsScope() {
#if DNNL_CPU_RUNTIME == DNNL_RUNTIME_OMP
    if (saved_ > 0) omp_set_num_threads(saved_);
#endif
  }
  OmpThreadsScope(const OmpThreadsScope&) = delete;
  OmpThreadsScope& operator=(const OmpThreadsScope&) = delete;

 private:
  int saved_ = 0;
};

// The CPU engine, created on first use and shared by all kernels (engines are thread-safe).
const dnnl::engine& cpuEngine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// Per-thread scratch memory for library calls (oneDNN scratchpads, reordered operands), reused
// from call to call: a fresh allocation per call would page-fault on every first touch. A call
// runs on one thread and does not nest, so one region per thread suffices.
// The region grows to the largest request and keeps no contents: growing allocates anew (no copy,
// no zero fill), 64-byte aligned and on huge pages when large (support/large_buffer.h).
std::byte* threadScratch(size_t bytes) {
  thread_local std::shared_ptr<std::byte> region;
  thread_local size_t capacity = 0;
  if (bytes > capacity || !region) {
    capacity = std::max(bytes, capacity * 2);
    region = allocateLarge(capacity);
  }
  return region.get();
}

size_t alignUp64(size_t n) { return (n + 63) / 64 * 64; }

// One dim of a oneDNN memory descriptor: extent and stride in elements.
struct Axis {
  int64_t ext = 1, stride = 1;
};

// A plain f32 descriptor with explicit strides. A unit dim's stride is irrelevant to addressing;
// it is set to the span of the dims inside it so that the descriptor looks dense to oneDNN's
// implementation checks (which compare strides with extents).
memory::desc stridedDesc(std::vector<Axis> axes) {
  for (size_t i = axes.size(); i-- > 0;) {
    if (axes[i].ext != 1) continue;
    int64_t span = 1;
    for (size_t j = i + 1; j < axes.size(); ++j)
      span = std::max(span, axes[j].ext * axes[j].stride);
    axes[i].stride = span;
  }
  Dims dims, strides;
  for (const Axis& a : axes) {
    dims.push_back(a.ext);
    strides.push_back(a.stride);
  }
  return memory::desc(dims, memory::data_type::f32, strides);
}

std::vector<int64_t> rowMajor(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) s[i - 1] = s[i] * dims[i];
  return s;
}

std::string joinDims(const std::vector<int64_t>& v, const char* sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + std::to_string(v[i]);
  return s;
}

// The static, non-empty dims of an f32 value, or why not.
StatusOr<std::vector<int64_t>> f32Dims(const Value* v, const char* what) {
  const TensorType& t = v->type();
  if (t.dtype() != DType::F32)
    return Status::error(std::string(what) + " is " + t.str() + "; only f32 is supported");
  if (!t.isStatic()) return Status::error(std::string(what) + " has symbolic dims");
  std::vector<int64_t> d = t.staticDims();
  for (int64_t e : d)
    if (e == 0) return Status::error(std::string(what) + " is empty");
  return d;
}

// The post-ops of a call as oneDNN post-ops, with the descriptors of their operands.
struct PostOpsPlan {
  dnnl::post_ops ops;
  // An add/mul post-op operand: its index in `ops`, its descriptor, and its buffer's position in
  // run()'s array (3 + its ordinal among the call's add/mul operands).
  struct Binary {
    int index = 0;
    memory::desc desc;
    size_t position = 0;
  };
  std::vector<Binary> binaries;
  // An add of a per-channel operand (a bias) that only adds come before, taken as the primitive's
  // bias argument instead of a binary post-op (planPostOps's `biasAxis`; adds commute, and
  // oneDNN adds the bias first). Its descriptor covers the dst's axes like a binary operand's
  // (extent 1 but on the bias axis) until a kernel takes the form its primitive wants (a
  // convolution's is 1-D); `index` is unused.
  std::optional<Binary> bias;
  std::string text;  // ", post-ops add+relu"
  // Some add/mul operand varies along a dst axis other than axis 1 (a convolution's channels).
  bool nonChannelOperand = false;
};

// `resultDims` are the dims of the node's result; `axisDims[i]` the result dims (outer to inner)
// that axis i of the primitive's dst descriptor covers. An add/mul operand is described over the
// same axes: an axis where the operand is broadcast has extent 1.
// `remap`, when given, may replace an operand's descriptor (a blocked layout) or refuse it; it is
// given the operand's position in run()'s buffers.
// `biasAxis` >= 0: the first add of an operand varying along that dst axis only (or along none),
// with only adds before it, becomes the plan's bias. oneDNN adds a bias to its accumulators
// before its post-ops, where a binary post-op is one more pass in the kernel's epilogue:
// mobilenet_v2 ran 9-12% faster, resnet50 5-7% (docs/codegen.md, "Post-ops").
using DescRemap = std::function<StatusOr<memory::desc>(size_t position, const memory::desc&)>;
StatusOr<PostOpsPlan> planPostOps(const std::vector<kernel::PostOp>& postOps,
                                  const std::vector<int64_t>& resultDims,
                                  const std::vector<std::vector<int64_t>>& axisDims,
                                  const DescRemap& remap = nullptr, int biasAxis = -1) {
  using kernel::PostOp;
  PostOpsPlan plan;
  auto eltwise = [&](dnnl::algorithm a, float alpha = 0.0f, float beta = 0.0f) {
    plan.ops.append_eltwise(1.0f, a, alpha, beta);
  };
  size_t position = 3;             // the next add/mul operand's buffer
  bool onlyAdds = true;            // so far
  std::vector<std::string> names;  // of the post-ops in `ops`
  for (size_t i = 0; i < postOps.size(); ++i) {
    const PostOp& p = postOps[i];
    names.emplace_back(kernel::postOpName(p.kind));
    if (p.kind != PostOp::Kind::Add) onlyAdds = false;
    switch (p.kind) {
      case PostOp::Kind::Add:
      case PostOp::Kind::Mul: {
        // The operand's stride along each result dim (0: broadcast).
        std::vector<int64_t> stride(resultDims.size(), 0);
        int64_t s = 1;
        for (size_t j = p.operandShape.size(); j-- > 0;) {
          auto d = static_cast<size_t>(p.operandDims[j]);
          if (d >= resultDims.size()) return Status::error("post-op operand dims out of range");
          if (p.operandShape[j] != 1) stride[d] = s;
          s *= p.operandShape[j];
        }
        std::vector<Axis> axes;
        for (const std::vector<int64_t>& dims : axisDims) {
          Axis a{1, 1};
          bool broadcast = false, read = false;
          for (int64_t d : dims) {
            int64_t ext = resultDims[static_cast<size_t>(d)];
            if (ext == 1) continue;
            int64_t st = stride[static_cast<size_t>(d)];
            (st == 0 ? broadcast : read) = true;
            if (st == 0) continue;
            if (a.ext > 1 && a.stride != st * ext)
              return Status::error("post-op operand dims do not merge like the result's");
            a = Axis{a.ext * ext, st};
          }
          if (broadcast && read)
            return Status::error("post-op operand is broadcast along part of a merged dim");
          if (a.ext > 1 && axes.size() != 1) plan.nonChannelOperand = true;
          axes.push_back(a);
        }
        memory::desc operand = stridedDesc(axes);
        bool alongBiasAxis = biasAxis >= 0;
        for (size_t a = 0; a < axes.size(); ++a)
          if (axes[a].ext > 1 && static_cast<int>(a) != biasAxis) alongBiasAxis = false;
        if (onlyAdds && !plan.bias && p.kind == PostOp::Kind::Add && alongBiasAxis) {
          plan.bias = PostOpsPlan::Binary{0, operand, position++};
          names.pop_back();
          break;
        }
        if (remap) {
          KILN_ASSIGN_OR_RETURN(operand, remap(position, operand));
        }
        plan.binaries.push_back({plan.ops.len(), operand, position++});
        plan.ops.append_binary(p.kind == PostOp::Kind::Add ? dnnl::algorithm::binary_add
                                                           : dnnl::algorithm::binary_mul,
                               operand);
        break;
      }
      case PostOp::Kind::Clamp:
        if (p.lo == 0 && std::isinf(p.hi) && p.hi > 0) {
          eltwise(dnnl::algorithm::eltwise_relu);
        } else {
          constexpr float kMax = std::numeric_limits<float>::max();
          auto bound = [&](double v) {
            return static_cast<float>(std::clamp(v, -double(kMax), double(kMax)));
          };
          eltwise(dnnl::algorithm::eltwise_clip, bound(p.lo), bound(p.hi));
        }
        break;
      case PostOp::Kind::Sigmoid: eltwise(dnnl::algorithm::eltwise_logistic); break;
      case PostOp::Kind::Tanh: eltwise(dnnl::algorithm::eltwise_tanh); break;
      case PostOp::Kind::Gelu: eltwise(dnnl::algorithm::eltwise_gelu_erf); break;
      case PostOp::Kind::GeluTanh: eltwise(dnnl::algorithm::eltwise_gelu_tanh); break;
    }
  }
  if (plan.bias) plan.text = ", bias";
  for (size_t i = 0; i < names.size(); ++i) plan.text += (i ? "+" : ", post-ops ") + names[i];
  return plan;
}

// The calling thread's stream, made on its first call: creating one per call cost about a
// microsecond of a small call's three (50 chained 8x8x32 depthwise convolutions).
dnnl::stream& threadStream() {
  thread_local dnnl::stream stream(cpuEngine());
  return stream;
}

// Runs `body` (which executes primitives) under the kernel's OpenMP thread limit, with the
// thread's stream, turning exceptions into errors that name the kernel.
template <typename Body>
Status runPrimitive(const std::string& description, int threads, Body body) {
  try {
    OmpThreadsScope scope(threads);
    dnnl::stream& stream = threadStream();
    body(stream);
    stream.wait();
    return Status::ok();
  } catch (const dnnl::error& e) {
    return Status::error(description + ": oneDNN error: " + e.what());
  } catch (const std::exception& e) {
    return Status::error(description + ": " + e.what());
  }
}

// Every field of a blocked or Winograd memory descriptor as text ("" for other formats): two
// descriptors with the same text describe the same bytes.
std::string layoutText(const memory::desc& d) {
  const dnnl_memory_desc_t& m = d.data;
  auto list = [&](const dnnl_dims_t& v, int n) {
    std::string s;
    for (int i = 0; i < n; ++i) s += (i ? "," : "") + std::to_string(v[i]);
    return s;
  };
  if (m.format_kind == dnnl_format_kind_wino) {
    const dnnl_wino_desc_t& w = m.format_desc.wino_desc;
    char scale[32];
    std::snprintf(scale, sizeof scale, "%a", static_cast<double>(w.adj_scale));
    return "dt " + std::to_string(static_cast<int>(m.data_type)) + " dims " +
           list(m.dims, m.ndims) + " wino " + std::to_string(static_cast<int>(w.wino_format)) +
           " r " + std::to_string(w.r) + " alpha " + std::to_string(w.alpha) + " ic,oc " +
           std::to_string(w.ic) + "," + std::to_string(w.oc) + " blocks " +
           std::to_string(w.ic_block) + "," + std::to_string(w.oc_block) + "," +
           std::to_string(w.ic2_block) + "," + std::to_string(w.oc2_block) + " scale " + scale +
           " size " + std::to_string(w.size) + " bytes " + std::to_string(d.get_size());
  }
  if (m.format_kind != dnnl_blocked) return "";
  const dnnl_blocking_desc_t& b = m.format_desc.blocking;
  return "dt " + std::to_string(static_cast<int>(m.data_type)) + " dims " + list(m.dims, m.ndims) +
         " padded " + list(m.padded_dims, m.ndims) + " offsets " + list(m.padded_offsets, m.ndims) +
         " offset0 " + std::to_string(m.offset0) + " strides " + list(b.strides, m.ndims) +
         " blocks " + list(b.inner_blks, b.inner_nblks) + " at " +
         list(b.inner_idxs, b.inner_nblks) + " extra " + std::to_string(m.extra.flags) + "," +
         std::to_string(m.extra.compensation_mask) + "," + std::to_string(m.extra.scale_adjust) +
         " bytes " + std::to_string(d.get_size());
}

// Constant weights a kernel holds in its primitive's layout: reordered from the constant when
// the kernel was created, or an artifact's bytes used in place (kept alive by `owner`).
struct HeldWeights {
  std::optional<memory> packed;
  std::string layout;                 // layoutText of the packed descriptor
  std::shared_ptr<const void> owner;  // of prepacked bytes
  bool prepacked = false;

  std::optional<PackedWeights> exported() const {
    if (!packed || layout.empty()) return std::nullopt;
    PackedWeights w;
    w.layout = layout;
    w.bytes = std::string_view(static_cast<const char*>(packed->get_data_handle()),
                               packed->get_desc().get_size());
    return w;
  }
};

// The data handle of a memory object made before its run sets one.
void* const kNoData = nullptr;

// Runs a primitive with an array of arguments (the C API: no map built per run).
void executeWith(const dnnl::primitive& prim, dnnl::stream& stream,
                 const std::vector<dnnl_exec_arg_t>& args) {
  dnnl::error::wrap_c_api(
      dnnl_primitive_execute(prim.get(), stream.get(), static_cast<int>(args.size()), args.data()),
      "could not execute a primitive");
}

// Runs a reorder from `from` to `to`.
void reorderWith(const dnnl::reorder& r, dnnl::stream& stream, const memory& from,
                 const memory& to) {
  dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from.get()}, {DNNL_ARG_TO, to.get()}};
  dnnl::error::wrap_c_api(dnnl_primitive_execute(r.get(), stream.get(), 2, args),
                          "could not execute a reorder");
}

// The memory objects of a kernel's runs, made once and reused with their data handles set on
// each run: making them and an argument map on every run cost about 1.5 of a small call's 2.5
// microseconds (50 chained 8x8x32 1x1 convolutions: 0.136 -> 0.082 ms at 1 thread). Runs on
// several threads at once each lease a set of their own; a set goes back to the pool after the
// run.
template <typename Set>
class ArgPool {
 public:
  class Lease {
   public:
    Lease(ArgPool& owner, std::unique_ptr<Set> set) : owner_(owner), set_(std::move(set)) {}
    ~Lease() {
      std::lock_guard<std::mutex> lock(owner_.mu_);
      owner_.free_.push_back(std::move(set_));
    }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    Set* operator->() const { return set_.get(); }

   private:
    ArgPool& owner_;
    std::unique_ptr<Set> set_;
  };

  template <typename Make>
  Lease take(Make make) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!free_.empty()) {
        std::unique_ptr<Set> set = std::move(free_.back());
        free_.pop_back();
        return Lease(*this, std::move(set));
      }
    }
    return Lease(*this, make());
  }

 private:
  std::mutex mu_;
  std::vector<std::unique_ptr<Set>> free_;
};

// The arguments of a plain kernel's run: memory objects whose data handles are set per run, in
// the order added, and fixed ones (held weights).
struct ArgSet {
  std::vector<memory> mems, fixedMems;
  std::vector<dnnl_exec_arg_t> args;

  void add(int arg, memory m) {
    args.push_back({arg, m.get()});
    mems.push_back(std::move(m));
  }
  void fixed(int arg, memory m) {
    args.push_back({arg, m.get()});
    fixedMems.push_back(std::move(m));
  }
};

// A oneDNN primitive with its memory descriptors, ready to run on Kiln's buffers.
class OneDnnKernel final : public LibraryKernel {
 public:
  OneDnnKernel(dnnl::primitive prim, memory::desc src, memory::desc weights, memory::desc dst,
               memory::desc scratch, HeldWeights held, std::optional<PostOpsPlan::Binary> bias,
               std::vector<PostOpsPlan::Binary> binaries, int threads, std::string description)
      : engine_(cpuEngine()), prim_(std::move(prim)), src_(std::move(src)),
        weights_(std::move(weights)), dst_(std::move(dst)), scratch_(std::move(scratch)),
        held_(std::move(held)), bias_(std::move(bias)), binaries_(std::move(binaries)),
        threads_(threads), description_(std::move(description)) {}

  Status run(void* const* buffers) const override {
    return runPrimitive(description_, threads_, [&](dnnl::stream& stream) {
      ArgPool<ArgSet>::Lease set = args_.take([&] { return makeArgs(); });
      // Data handles in makeArgs' order: src, (weights,) dst, (bias,) binaries, (scratchpad).
      size_t i = 0;
      set->mems[i++].set_data_handle(buffers[0]);
      if (!held_.packed) set->mems[i++].set_data_handle(buffers[1]);
      set->mems[i++].set_data_handle(buffers[2]);
      if (bias_) set->mems[i++].set_data_handle(buffers[bias_->position]);
      for (const PostOpsPlan::Binary& b : binaries_)
        set->mems[i++].set_data_handle(buffers[b.position]);
      // The scratchpad (user mode) of the calling thread: concurrent runs never share one.
      if (scratch_.get_size() > 0)
        set->mems[i++].set_data_handle(threadScratch(scratch_.get_size()));
      executeWith(prim_, stream, set->args);
    });
  }

  std::string describe() const override { return description_; }
  bool holdsWeights() const override { return held_.packed.has_value(); }
  std::optional<PackedWeights> packedWeights() const override { return held_.exported(); }

 private:
  // The memory objects of a run with no data yet; held weights are fixed.
  std::unique_ptr<ArgSet> makeArgs() const {
    auto set = std::make_unique<ArgSet>();
    set->add(DNNL_ARG_SRC, memory(src_, engine_, kNoData));
    if (held_.packed) set->fixed(DNNL_ARG_WEIGHTS, *held_.packed);
    else set->add(DNNL_ARG_WEIGHTS, memory(weights_, engine_, kNoData));
    set->add(DNNL_ARG_DST, memory(dst_, engine_, kNoData));
    if (bias_) set->add(DNNL_ARG_BIAS, memory(bias_->desc, engine_, kNoData));
    for (const PostOpsPlan::Binary& b : binaries_)
      set->add(DNNL_ARG_ATTR_MULTIPLE_POST_OP(b.index) | DNNL_ARG_SRC_1,
               memory(b.desc, engine_, kNoData));
    if (scratch_.get_size() > 0) set->add(DNNL_ARG_SCRATCHPAD, memory(scratch_, engine_, kNoData));
    return set;
  }

  dnnl::engine engine_;
  dnnl::primitive prim_;
  memory::desc src_, weights_, dst_, scratch_;
  HeldWeights held_;
  std::optional<PostOpsPlan::Binary> bias_;    // the primitive's bias, if any
  std::vector<PostOpsPlan::Binary> binaries_;  // add/mul post-op operands, in order
  mutable ArgPool<ArgSet> args_;
  int threads_;
  std::string description_;
};

// Whether the weights operand (operand 1) is a constant whose data is not here
// (ConstantData::held: an artifact stores it only in the layout its library kernel chose).
bool heldWeights(const Node& n) {
  const Node* wdef = n.operand(1)->def();
  return wdef->op() == OpCode::Constant && wdef->constantData().held;
}

// The constant data of the weights operand (operand 1) when it is an f32 `constant` that
// `weights` describes, else null.
const Tensor* constantWeights(const Node& n, const memory::desc& weights) {
  const Node* wdef = n.operand(1)->def();
  if (wdef->op() != OpCode::Constant) return nullptr;
  const Tensor& t = wdef->constantData().tensor;
  if (t.dtype() == DType::F32 && t.defined() &&
      static_cast<size_t>(t.numElements()) * sizeof(float) == weights.get_size())
    return &t;
  return nullptr;
}

// The constant weights in the layout the primitive chose: reordered once, here, or the caller's
// prepacked weights when they are in that layout (none when the primitive reads the constant as
// it is). Weights whose data is held elsewhere (`held`) must come prepacked in that layout.
StatusOr<HeldWeights> packWeights(const Tensor* constant, bool heldData,
                                  const memory::desc& weights, const memory::desc& chosen,
                                  const PackedWeights* prepacked) {
  HeldWeights held;
  if (!constant && !heldData) return held;
  const dnnl::engine& engine = cpuEngine();
  held.layout = layoutText(chosen);
  if (prepacked && !held.layout.empty() && prepacked->layout == held.layout &&
      prepacked->bytes.size() == chosen.get_size()) {
    held.packed = memory(chosen, engine, const_cast<char*>(prepacked->bytes.data()));
    held.owner = prepacked->owner;
    held.prepacked = true;
    return held;
  }
  if (heldData)
    return Status::error("the weights are stored only in the layout " +
                         (prepacked ? prepacked->layout : std::string("(none)")) +
                         ", and the primitive chooses " + held.layout);
  if (chosen == weights) return HeldWeights{};
  memory user(weights, engine, const_cast<std::byte*>(constant->bytes()));
  // Kiln's own memory (huge pages for large weights, support/large_buffer.h), held by `owner`.
  std::shared_ptr<std::byte> bytes = allocateLarge(chosen.get_size());
  memory packed(chosen, engine, bytes.get());
  held.owner = bytes;
  // The reorder writes the elements only; the gaps of a strided layout (padded rows) are zeroed
  // so that an artifact holding these bytes is deterministic.
  std::memset(packed.get_data_handle(), 0, chosen.get_size());
  // The reorder's scratchpad (Winograd weight transforms need one of several MiB) in Kiln's
  // memory too: oneDNN's own would be fresh 4 KiB pages on every reorder. Creating the reorder
  // and asking for its scratchpad run under one lock: oneDNN shares what it creates between
  // threads through its primitive cache, synchronised inside the library where ThreadSanitizer
  // cannot see it (scripts/tsan.sh). Creation is cheap; the reorders run in parallel.
  static std::mutex creation;
  std::optional<dnnl::reorder> reorder;
  memory::desc scratchDesc;
  {
    std::lock_guard<std::mutex> lock(creation);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    dnnl::reorder::primitive_desc pd(engine, weights, engine, chosen, attr);
    scratchDesc = pd.scratchpad_desc();
    reorder.emplace(pd);
  }
  std::shared_ptr<std::byte> scratch =
      scratchDesc.get_size() ? allocateLarge(scratchDesc.get_size()) : nullptr;
  memory scratchpad(scratchDesc, engine, scratch.get());
  dnnl::stream& stream = threadStream();
  reorder->execute(
      stream, {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, packed}, {DNNL_ARG_SCRATCHPAD, scratchpad}});
  stream.wait();
  held.packed = packed;
  return held;
}

// What a primitive is created with: its attributes (user scratchpad, the post-ops) and its
// weights descriptor, format `any` for constant weights so that the primitive picks their layout.
struct PrimitiveInputs {
  const Tensor* constant = nullptr;  // the weights' data when they are a constant
  bool held = false;                 // constant weights whose data is held elsewhere
  dnnl::primitive_attr attr;
  memory::desc weights;
};

PrimitiveInputs primitiveInputs(const Node& n, const memory::desc& weights, const PostOpsPlan& post,
                                bool hasPostOps, const memory::desc* constantLayout = nullptr) {
  PrimitiveInputs in;
  in.constant = constantWeights(n, weights);
  in.held = heldWeights(n);
  in.attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (hasPostOps) in.attr.set_post_ops(post.ops);
  in.weights = !in.constant && !in.held ? weights
               : constantLayout
                   ? *constantLayout
                   : memory::desc(weights.dims(), memory::data_type::f32, memory::format_tag::any);
  return in;
}

// "oneDNN <what>, <impl>, constant weights reordered, post-ops ..." (without the closing ")").
std::string kernelDescription(const std::string& what, const std::string& impl,
                              const PrimitiveInputs& in, const HeldWeights& held,
                              const PostOpsPlan& post) {
  std::string desc = "oneDNN " + what + ", " + impl;
  if (in.constant || in.held)
    desc += held.prepacked ? ", constant weights prepacked"
            : held.packed  ? ", constant weights reordered"
                           : ", constant weights";
  return desc + post.text;
}

// A convolution computing in nChw8c or nChw16c (channelBlock()). Each blockable buffer (source 0,
// result 2, residual-shaped post-op operands 3+i) is reordered between its IR layout and the
// blocked one in per-thread scratch, unless the runtime stores it blocked (storeBlocked). A
// reorder primitive is created when an operand first needs one: storeBlocked creates those of the
// operands left in the IR layout, and most operands are stored blocked and never need one (each
// costs 0.1-0.5 ms to create: resnet50 created 18 and used none of them).
class BlockedConvolution final : public LibraryKernel {
 public:
  struct Operand {
    size_t position = 0;          // in run()'s buffers
    int arg = DNNL_ARG_SRC;       // the primitive's argument
    memory::desc plain, blocked;  // the IR layout and the blocked one
    bool stored = false;          // the buffer holds the blocked layout already
    // A residual that a Winograd convolution adds through its `sum` post-op: it is copied (or
    // reordered) into the result before the primitive runs, instead of being an argument.
    bool sum = false;
  };
  BlockedConvolution(dnnl::primitive prim, memory::desc weights, memory::desc scratch,
                     HeldWeights held, std::vector<Operand> operands,
                     std::vector<PostOpsPlan::Binary> binaries,
                     std::optional<PostOpsPlan::Binary> bias, int threads, std::string description,
                     std::string layout)
      : engine_(cpuEngine()), prim_(std::move(prim)), weights_(std::move(weights)),
        scratch_(std::move(scratch)), held_(std::move(held)), operands_(std::move(operands)),
        binaries_(std::move(binaries)), bias_(std::move(bias)), threads_(threads),
        description_(std::move(description)), layout_(std::move(layout)),
        reorders_(operands_.size()), reorderMade_(new std::once_flag[operands_.size()]) {}

  Status run(void* const* buffers) const override {
    return runPrimitive(description_, threads_, [&](dnnl::stream& stream) {
      ArgPool<Args>::Lease set = args_.take([&] { return makeArgs(); });
      // Scratch: the scratchpad, then each operand that is reordered.
      size_t bytes = alignUp64(scratch_.get_size());
      for (const Operand& o : operands_)
        if (!o.stored && !o.sum) bytes += alignUp64(o.blocked.get_size());
      std::byte* scratch = threadScratch(bytes);
      std::byte* next = scratch + alignUp64(scratch_.get_size());
      for (size_t k = 0; k < operands_.size(); ++k) {
        const Operand& o = operands_[k];
        set->plain[k].set_data_handle(buffers[o.position]);
        if (o.sum) continue;
        set->blocked[k].set_data_handle(o.stored ? buffers[o.position] : next);
        if (!o.stored) next += alignUp64(o.blocked.get_size());
        if (!o.stored && o.position != 2)
          reorderWith(reorderOf(k), stream, set->plain[k], set->blocked[k]);
      }
      // The residual of a `sum` post-op starts out in the result.
      for (size_t k = 0; k < operands_.size(); ++k) {
        const Operand& o = operands_[k];
        if (!o.sum) continue;
        const memory& dst = set->blocked[kResultOperand];
        if (!o.stored) reorderWith(reorderOf(k), stream, set->plain[k], dst);
        else if (buffers[o.position] != dst.get_data_handle())
          std::memcpy(dst.get_data_handle(), buffers[o.position], o.blocked.get_size());
      }
      if (bias_) set->bias.set_data_handle(buffers[bias_->position]);
      if (!held_.packed) set->weights.set_data_handle(buffers[1]);
      for (size_t j = 0; j < set->binaryBuffers.size(); ++j)
        set->binaries[j].set_data_handle(buffers[set->binaryBuffers[j]]);
      if (scratch_.get_size() > 0) set->scratchpad.set_data_handle(scratch);
      executeWith(prim_, stream, set->args);
      for (size_t k = 0; k < operands_.size(); ++k) {
        const Operand& o = operands_[k];
        if (!o.stored && o.position == 2)
          reorderWith(reorderOf(k), stream, set->blocked[k], set->plain[k]);
      }
    });
  }

  std::string describe() const override {
    std::string s = description_ + ", " + layout_;
    std::string reordered, stored;
    for (const Operand& o : operands_)
      ((o.stored ? stored : reordered) += (o.stored ? stored : reordered).empty() ? "" : ", ") +=
          bufferName(o.position);
    if (!reordered.empty()) s += "; reordered: " + reordered;
    if (!stored.empty()) s += "; stored blocked: " + stored;
    return s + ")";
  }

  std::vector<size_t> blockableBuffers() const override {
    std::vector<size_t> p;
    for (const Operand& o : operands_) p.push_back(o.position);
    return p;
  }
  void storeBlocked(const std::vector<size_t>& positions) override {
    OmpThreadsScope scope(threads_);
    for (size_t k = 0; k < operands_.size(); ++k) {
      Operand& o = operands_[k];
      o.stored = std::find(positions.begin(), positions.end(), o.position) != positions.end();
      if (!o.stored) reorderOf(k);
    }
  }
  std::string blockedLayout() const override { return layout_; }
  bool holdsWeights() const override { return held_.packed.has_value(); }
  std::optional<PackedWeights> packedWeights() const override { return held_.exported(); }

 private:
  // The memory objects of a run: per operand its blocked and its IR-layout memory; the bias,
  // the weights (fixed when held), the per-channel binary post-op operands and the scratchpad;
  // and the primitive's argument array over them.
  struct Args {
    std::vector<memory> blocked, plain, binaries;
    std::vector<size_t> binaryBuffers;  // run()'s buffer of each of `binaries`
    memory bias, weights, scratchpad;
    std::vector<dnnl_exec_arg_t> args;
  };

  std::unique_ptr<Args> makeArgs() const {
    auto set = std::make_unique<Args>();
    for (const Operand& o : operands_) {
      set->blocked.emplace_back(o.blocked, engine_, kNoData);
      set->plain.emplace_back(o.plain, engine_, kNoData);
      if (!o.sum) set->args.push_back({o.arg, set->blocked.back().get()});
    }
    if (bias_) {
      set->bias = memory(bias_->desc, engine_, kNoData);
      set->args.push_back({DNNL_ARG_BIAS, set->bias.get()});
    }
    set->weights = held_.packed ? *held_.packed : memory(weights_, engine_, kNoData);
    set->args.push_back({DNNL_ARG_WEIGHTS, set->weights.get()});
    for (const PostOpsPlan::Binary& b : binaries_) {
      int arg = DNNL_ARG_ATTR_MULTIPLE_POST_OP(b.index) | DNNL_ARG_SRC_1;
      bool blockedOperand = std::any_of(operands_.begin(), operands_.end(),
                                        [&](const Operand& o) { return !o.sum && o.arg == arg; });
      if (blockedOperand) continue;
      set->binaries.emplace_back(b.desc, engine_, kNoData);
      set->binaryBuffers.push_back(b.position);
      set->args.push_back({arg, set->binaries.back().get()});
    }
    if (scratch_.get_size() > 0) {
      set->scratchpad = memory(scratch_, engine_, kNoData);
      set->args.push_back({DNNL_ARG_SCRATCHPAD, set->scratchpad.get()});
    }
    return set;
  }

  // Operand k's reorder: IR layout -> blocked for an input, blocked -> IR layout for the result.
  const dnnl::reorder& reorderOf(size_t k) const {
    std::call_once(reorderMade_[k], [&] {
      const Operand& o = operands_[k];
      reorders_[k] =
          o.position == 2
              ? dnnl::reorder(dnnl::reorder::primitive_desc(engine_, o.blocked, engine_, o.plain))
              : dnnl::reorder(dnnl::reorder::primitive_desc(engine_, o.plain, engine_, o.blocked));
    });
    return *reorders_[k];
  }

  static std::string bufferName(size_t position) {
    if (position == 0) return "source";
    if (position == 2) return "result";
    return "post-op operand " + std::to_string(position - 3);
  }

  dnnl::engine engine_;
  dnnl::primitive prim_;
  memory::desc weights_, scratch_;
  HeldWeights held_;
  std::vector<Operand> operands_;
  std::vector<PostOpsPlan::Binary> binaries_;  // add/mul post-op operands, in order
  std::optional<PostOpsPlan::Binary> bias_;    // the per-channel add taken as the bias (1-D)
  static constexpr size_t kResultOperand = 1;  // operands_[1] is the result (position 2)
  mutable ArgPool<Args> args_;
  int threads_;
  std::string description_;
  std::string layout_;                                          // "nChw8c" or "nChw16c"
  mutable std::vector<std::optional<dnnl::reorder>> reorders_;  // per operand, once needed
  std::unique_ptr<std::once_flag[]> reorderMade_;
};

// A per-channel bias over a convolution's dst axes (extent 1 but on axis 1) as the 1-D
// descriptor oneDNN's convolutions take.
memory::desc channelVector(const memory::desc& d) {
  return memory::desc({d.dims()[1]}, memory::data_type::f32,
                      Dims{d.data.format_desc.blocking.strides[1]});
}

// Builds the primitive from `makePd(weightsDesc, attr, bias)` (bias: the plan's bias descriptor
// or null; planPostOps takes one along dst axis `biasAxis`, if >= 0). With constant weights the
// primitive may choose their layout (format `any`); when it differs from the constant's own, the
// constant is reordered into it once, here.
template <typename Primitive, typename MakePd>
StatusOr<std::unique_ptr<LibraryKernel>>
finish(const Node& n, int threads, const memory::desc& src, const memory::desc& weights,
       const memory::desc& dst, MakePd makePd, const std::string& what,
       const std::vector<kernel::PostOp>& postOps,
       const std::vector<std::vector<int64_t>>& axisDims, const PackedWeights* prepacked,
       int biasAxis, const memory::desc* constantLayout = nullptr) {
  KILN_ASSIGN_OR_RETURN(PostOpsPlan post, planPostOps(postOps, n.result(0)->type().staticDims(),
                                                      axisDims, nullptr, biasAxis));
  PrimitiveInputs in = primitiveInputs(n, weights, post, !postOps.empty(), constantLayout);
  auto pd = makePd(in.weights, in.attr, post.bias ? &post.bias->desc : nullptr);
  // The bias memory as the primitive takes it (a convolution's is 1-D, makePd's conversion).
  if (post.bias) post.bias->desc = pd.bias_desc();
  // A reference implementation would be far slower than the optimized one without post-ops
  // plus a pass over the result: the caller then applies them itself.
  const std::string impl = pd.impl_info_str();
  if (!postOps.empty() && impl.rfind("ref", 0) == 0)
    return Status::error("oneDNN has only its reference implementation (" + impl +
                         ") with these post-ops");
  // oneDNN 2.6's gemm-based convolution addresses a binary post-op operand that is not
  // per-channel (a residual) wrongly: measured against the interpreter, see docs/codegen.md.
  if (n.op() == OpCode::Convolution && post.nonChannelOperand &&
      impl.find("gemm") != std::string::npos)
    return Status::error("oneDNN's " + impl +
                         " convolution mis-addresses post-op operands that are not per-channel");
  KILN_ASSIGN_OR_RETURN(HeldWeights held,
                        packWeights(in.constant, in.held, weights, pd.weights_desc(), prepacked));
  std::string desc = kernelDescription(what, impl, in, held, post) + ")";
  return std::unique_ptr<LibraryKernel>(
      new OneDnnKernel(Primitive(pd), src, weights, dst, pd.scratchpad_desc(), std::move(held),
                       std::move(post.bias), std::move(post.binaries), threads, std::move(desc)));
}

// ---------------------------------------------------------------------------------------------
// dot_general -> matmul

// A run of dims (outer to inner) that is one strided dim: extent, stride of its innermost dim,
// and the position (in the list it came from) of that innermost dim.
struct Run {
  int64_t ext = 1, stride = 1;
  size_t inner = 0;
  size_t first = 0;  // the position of its outermost dim
};

// Merges the dims `axes` (outer to inner) of a tensor into as few strided runs as possible;
// unit dims are dropped (they do not address anything).
std::vector<Run> mergeRuns(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides,
                           const std::vector<int64_t>& axes) {
  std::vector<Run> runs;
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t ext = dims[static_cast<size_t>(axes[i])];
    int64_t stride = strides[static_cast<size_t>(axes[i])];
    if (ext == 1) continue;
    if (!runs.empty() && runs.back().stride == stride * ext) {
      runs.back().ext *= ext;
      runs.back().stride = stride;
      runs.back().inner = i;
    } else {
      runs.push_back(Run{ext, stride, i, i});
    }
  }
  return runs;
}

std::vector<int64_t> otherDims(int64_t rank, const std::vector<int64_t>& a,
                               const std::vector<int64_t>& b) {
  std::vector<int64_t> r;
  for (int64_t i = 0; i < rank; ++i)
    if (std::find(a.begin(), a.end(), i) == a.end() && std::find(b.begin(), b.end(), i) == b.end())
      r.push_back(i);
  return r;
}

Status checkPairs(const std::vector<int64_t>& l, const std::vector<int64_t>& r,
                  const std::vector<int64_t>& ld, const std::vector<int64_t>& rd) {
  if (l.size() != r.size()) return Status::error("lhs and rhs dimension lists differ in length");
  for (size_t i = 0; i < l.size(); ++i) {
    if (l[i] < 0 || l[i] >= static_cast<int64_t>(ld.size()) || r[i] < 0 ||
        r[i] >= static_cast<int64_t>(rd.size()))
      return Status::error("batch or contracting dimension out of range");
    if (ld[static_cast<size_t>(l[i])] != rd[static_cast<size_t>(r[i])])
      return Status::error("paired dimensions have different extents");
  }
  return Status::ok();
}

// The result dims a run over positions [first, inner] of a dim list covers, `offset` being the
// result position of the list's first dim.
std::vector<int64_t> runDims(const Run& r, size_t offset) {
  std::vector<int64_t> d;
  for (size_t i = r.first; i <= r.inner; ++i) d.push_back(static_cast<int64_t>(offset + i));
  return d;
}

// Whether oneDNN runs its AVX-512 kernels here (get_effective_cpu_isa includes avx512_core).
bool avx512() {
  static const bool yes = [] {
    auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
    auto core = static_cast<unsigned>(dnnl::cpu_isa::avx512_core);
    return (isa & core) == core;
  }();
  return yes;
}

// The layout constant 2-D weights (K x N) are stored in without AVX-512 (with it, oneDNN's brgemm
// matmul packs them into a blocked layout of its own, format `any`, which measured as fast or
// faster on every shape of the benchmark's models: 1-3% on the large products at 1 thread, 3-16%
// at 2 threads and on the small ones). Rows of N, each row padded to a cache
// line and then by one more line when its length is a multiple of 512 bytes. oneDNN 2.6's gemm
// reads the weights down their columns; with rows a multiple of 512 bytes apart those reads map to
// few cache sets and evict each other (measured: 128x256x1024 2.48 -> 1.26 ms, 197x384x1536
// 4.26 -> 3.82 ms, 1 thread; no shape measured slower, docs/codegen.md).
std::optional<memory::desc> paddedWeights(const std::vector<Axis>& wei, const Axis& k,
                                          const Axis& n) {
  if (wei.size() != 2 || k.ext <= 1 || n.ext <= 1) return std::nullopt;
  int64_t row = (n.ext + 15) / 16 * 16;
  if (row % 128 == 0) row += 16;
  return memory::desc({k.ext, n.ext}, memory::data_type::f32, memory::dims{row, 1});
}

StatusOr<std::unique_ptr<LibraryKernel>> createMatmul(const Node& n,
                                                      const std::vector<kernel::PostOp>& postOps,
                                                      int threads, const PackedWeights* prepacked) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> ld, f32Dims(n.operand(0), "lhs"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> rd, f32Dims(n.operand(1), "rhs"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> od, f32Dims(n.result(0), "result"));
  std::vector<int64_t> lb = n.attrInts("lhs_batch"), rb = n.attrInts("rhs_batch"),
                       lc = n.attrInts("lhs_contracting"), rc = n.attrInts("rhs_contracting");
  KILN_RETURN_IF_ERROR(checkPairs(lb, rb, ld, rd));
  KILN_RETURN_IF_ERROR(checkPairs(lc, rc, ld, rd));
  std::vector<int64_t> lf = otherDims(static_cast<int64_t>(ld.size()), lb, lc),
                       rf = otherDims(static_cast<int64_t>(rd.size()), rb, rc);
  if (od.size() != lb.size() + lf.size() + rf.size())
    return Status::error("result rank does not match the operands");
  std::vector<int64_t> ls = rowMajor(ld), rs = rowMajor(rd), os = rowMajor(od);

  // K: the contracting dims must be one strided run on each side.
  std::vector<Run> lk = mergeRuns(ld, ls, lc), rk = mergeRuns(rd, rs, rc);
  if (lk.size() > 1 || rk.size() > 1)
    return Status::error("contracting dims do not merge into one strided dim");
  Axis srcK = lk.empty() ? Axis{} : Axis{lk[0].ext, lk[0].stride};
  Axis wK = rk.empty() ? Axis{} : Axis{rk[0].ext, rk[0].stride};
  // N: the rhs free dims must be one strided run.
  std::vector<Run> rn = mergeRuns(rd, rs, rf);
  if (rn.size() > 1) return Status::error("rhs free dims do not merge into one strided dim");
  size_t firstN = lb.size() + lf.size();  // output position of the first rhs free dim
  Axis wN = rn.empty() ? Axis{} : Axis{rn[0].ext, rn[0].stride};
  Axis dN = rn.empty() ? Axis{} : Axis{rn[0].ext, os[firstN + rn[0].inner]};
  // M: the last run of lhs free dims; earlier runs are batch dims the rhs is broadcast over.
  std::vector<Run> lm = mergeRuns(ld, ls, lf);
  bool noM = lm.empty();
  if (noM) lm.push_back(Run{1, 1, 0, 0});

  std::vector<Axis> src, wei, dst;
  std::vector<std::vector<int64_t>> dstDims;  // the result dims each dst axis covers
  std::vector<int64_t> batch;
  for (size_t i = 0; i < lb.size(); ++i) {
    int64_t ext = ld[static_cast<size_t>(lb[i])];
    if (ext == 1) continue;
    src.push_back({ext, ls[static_cast<size_t>(lb[i])]});
    wei.push_back({ext, rs[static_cast<size_t>(rb[i])]});
    dst.push_back({ext, os[i]});
    dstDims.push_back({static_cast<int64_t>(i)});
    batch.push_back(ext);
  }
  for (size_t r = 0; r + 1 < lm.size(); ++r) {
    src.push_back({lm[r].ext, lm[r].stride});
    wei.push_back({1, 1});
    dst.push_back({lm[r].ext, os[lb.size() + lm[r].inner]});
    dstDims.push_back(runDims(lm[r], lb.size()));
    batch.push_back(lm[r].ext);
  }
  const Run& m = lm.back();
  src.push_back({m.ext, m.stride});
  src.push_back(srcK);
  wei.push_back(wK);
  wei.push_back(wN);
  dst.push_back({m.ext, os[lb.size() + m.inner]});
  dst.push_back(dN);
  dstDims.push_back(noM ? std::vector<int64_t>{} : runDims(m, lb.size()));
  dstDims.push_back(rn.empty() ? std::vector<int64_t>{} : runDims(rn[0], firstN));
  if (src.size() > DNNL_MAX_NDIMS) return Status::error("too many batch dims for oneDNN");

  bool lhsT = srcK.ext > 1 && m.ext > 1 && srcK.stride != 1;
  bool rhsT = wK.ext > 1 && wN.ext > 1 && wN.stride != 1;
  std::string what = "matmul (";
  if (!batch.empty()) what += "batch " + joinDims(batch, "x") + ", ";
  what += std::to_string(m.ext) + "x" + std::to_string(srcK.ext) + "x" + std::to_string(wN.ext);
  if (lhsT) what += ", lhs transposed";
  if (rhsT) what += ", rhs transposed";
  memory::desc srcMd = stridedDesc(src), weiMd = stridedDesc(wei), dstMd = stridedDesc(dst);
  std::optional<memory::desc> padded = avx512() ? std::nullopt : paddedWeights(wei, wK, wN);
  if (padded && padded->data.format_desc.blocking.strides[0] != wN.ext &&
      (constantWeights(n, weiMd) || heldWeights(n)))
    what +=
        ", weight rows padded to " + std::to_string(padded->data.format_desc.blocking.strides[0]);
  auto makePd = [&](const memory::desc& w, const dnnl::primitive_attr& attr,
                    const memory::desc* bias) {
    return dnnl::matmul::primitive_desc(bias ? dnnl::matmul::desc(srcMd, w, *bias, dstMd)
                                             : dnnl::matmul::desc(srcMd, w, dstMd),
                                        attr, cpuEngine());
  };
  return finish<dnnl::matmul>(n, threads, srcMd, weiMd, dstMd, makePd, what, postOps, dstDims,
                              prepacked, /*biasAxis=*/static_cast<int>(dst.size()) - 1,
                              padded ? &*padded : nullptr);
}

// ---------------------------------------------------------------------------------------------
// convolution -> convolution_forward

// The layout letters of a convolution operand: `batch`/`feature` letters at their dims, the
// spatial letters (w; h, w; d, h, w) at the spatial dims.
std::string layoutName(size_t rank, int64_t b, char bl, int64_t f, char fl,
                       const std::vector<int64_t>& spatial) {
  static const char* kSpatial[] = {"w", "hw", "dhw"};
  std::string s(rank, '?');
  s[static_cast<size_t>(b)] = bl;
  s[static_cast<size_t>(f)] = fl;
  const char* letters = kSpatial[spatial.size() - 1];
  for (size_t i = 0; i < spatial.size(); ++i) s[static_cast<size_t>(spatial[i])] = letters[i];
  return s;
}

// The channel block of blocked convolutions: one vector register of floats, 16 where oneDNN
// runs AVX-512 code (its avx512_core kernels compute in nChw16c; on nChw8c it falls back to its
// avx2 ones), 8 otherwise.
int64_t channelBlock() { return avx512() ? 16 : 8; }

// The post-ops of a Winograd convolution, which takes no binary post-ops, from the plan of its
// post-ops: the per-channel add the plan took as the bias stays the bias, an add of a
// result-shaped operand (a residual) is its `sum` post-op (the residual is put in the result
// first), and a relu (clamp to [0, inf)) its activation, last. Any other post-op, or two of a
// kind, gives nullopt.
struct WinogradPostOps {
  dnnl::post_ops ops;
  std::optional<size_t> sumPosition;  // the residual's position in run()'s buffers
};
std::optional<WinogradPostOps> winogradPostOps(const std::vector<kernel::PostOp>& postOps,
                                               const PostOpsPlan& plan, const Dims& dstDims) {
  using kernel::PostOp;
  WinogradPostOps w;
  bool relu = false;
  size_t binary = 0;
  size_t position = 3;
  for (const PostOp& p : postOps) {
    if (relu) return std::nullopt;
    if (p.kind == PostOp::Kind::Add) {
      if (plan.bias && plan.bias->position == position++) continue;
      const PostOpsPlan::Binary& b = plan.binaries[binary++];
      if (b.desc.dims() != dstDims || w.sumPosition) return std::nullopt;
      w.sumPosition = b.position;
      w.ops.append_sum(1.0f);
    } else if (p.kind == PostOp::Kind::Clamp && p.lo == 0 && std::isinf(p.hi) && p.hi > 0) {
      w.ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
      relu = true;
    } else {
      return std::nullopt;
    }
  }
  return w;
}

// The convolution as a BlockedConvolution over nChw8c or nChw16c (channelBlock()), or why not
// (the caller then uses the IR layout): src, weights and dst are the IR-layout descriptors in
// oneDNN's logical order. With `winograd` (a 3x3 window of stride 1) and constant weights it
// first asks oneDNN for a Winograd kernel (docs/codegen.md, "Winograd convolutions").
template <typename MakePd>
StatusOr<std::unique_ptr<LibraryKernel>>
createBlockedConvolution(const Node& n, const std::vector<kernel::PostOp>& postOps, int threads,
                         const memory::desc& src, const memory::desc& weights,
                         const memory::desc& dst, MakePd makePd, bool winograd,
                         const std::string& what, const std::vector<std::vector<int64_t>>& axisDims,
                         const PackedWeights* prepacked) {
  using Tag = memory::format_tag;
  const bool b16 = channelBlock() == 16;
  const std::string layout = b16 ? "nChw16c" : "nChw8c";
  memory::desc srcB(src.dims(), memory::data_type::f32, b16 ? Tag::nChw16c : Tag::nChw8c);
  memory::desc dstB(dst.dims(), memory::data_type::f32, b16 ? Tag::nChw16c : Tag::nChw8c);
  std::vector<BlockedConvolution::Operand> operands(2);
  operands[0].position = 0;
  operands[0].arg = DNNL_ARG_SRC;
  operands[0].plain = src;
  operands[0].blocked = srcB;
  operands[1].position = 2;
  operands[1].arg = DNNL_ARG_DST;
  operands[1].plain = dst;
  operands[1].blocked = dstB;
  // A post-op operand of the result's shape (a residual) is blocked too; a per-channel one (a
  // bias) is broadcast and keeps its descriptor; any other broadcast is refused.
  auto remap = [&](size_t position, const memory::desc& d) -> StatusOr<memory::desc> {
    if (d.dims() == dst.dims()) {
      BlockedConvolution::Operand o;
      o.position = position;
      o.plain = d;
      o.blocked = dstB;
      operands.push_back(o);
      return dstB;
    }
    Dims dims = d.dims();
    for (size_t i = 0; i < dims.size(); ++i)
      if (i != 1 && dims[i] != 1)
        return Status::error("a post-op operand is broadcast along a non-channel dim");
    return d;
  };
  KILN_ASSIGN_OR_RETURN(PostOpsPlan post,
                        planPostOps(postOps, n.result(0)->type().staticDims(), axisDims, remap,
                                    /*biasAxis=*/1));
  for (BlockedConvolution::Operand& o : operands)
    for (const PostOpsPlan::Binary& b : post.binaries)
      if (o.position == b.position)
        o.arg = DNNL_ARG_ATTR_MULTIPLE_POST_OP(b.index) | DNNL_ARG_SRC_1;
  PrimitiveInputs in = primitiveInputs(n, weights, post, post.ops.len() > 0);
  std::optional<dnnl::convolution_forward::primitive_desc> pd;
  std::optional<PostOpsPlan::Binary> bias = post.bias;
  if (bias) bias->desc = channelVector(bias->desc);
  const memory::desc* biasDesc = bias ? &bias->desc : nullptr;
  std::vector<PostOpsPlan::Binary> binaries = post.binaries;
  std::optional<WinogradPostOps> wino;
  if (winograd && (in.constant || in.held)) wino = winogradPostOps(postOps, post, dst.dims());
  if (wino) {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    attr.set_post_ops(wino->ops);
    try {
      pd = makePd(srcB, in.weights, dstB, attr, dnnl::algorithm::convolution_winograd, biasDesc);
      binaries.clear();
      for (BlockedConvolution::Operand& o : operands) o.sum = o.position == wino->sumPosition;
    } catch (const dnnl::error&) {
      // oneDNN has no Winograd kernel for this shape or machine: the direct one is used.
    }
  }
  if (!pd)
    pd = makePd(srcB, in.weights, dstB, in.attr, dnnl::algorithm::convolution_direct, biasDesc);
  const std::string impl = pd->impl_info_str();
  if (impl.rfind("ref", 0) == 0)
    return Status::error("oneDNN has only its reference implementation in " + layout);
  KILN_ASSIGN_OR_RETURN(HeldWeights held,
                        packWeights(in.constant, in.held, weights, pd->weights_desc(), prepacked));
  std::string desc = kernelDescription(what, impl, in, held, post);
  return std::unique_ptr<LibraryKernel>(new BlockedConvolution(
      dnnl::convolution_forward(*pd), weights, pd->scratchpad_desc(), std::move(held),
      std::move(operands), std::move(binaries), std::move(bias), threads, std::move(desc), layout));
}

// Whether convolution `c` may compute blocked (2-D, one group, f32, constant weights, channel
// counts in whole blocks), and if so whether its window is larger than 1x1 (such a one does
// where oneDNN takes it).
std::optional<bool> blockableWindow(const Node& c) {
  if (c.op() != OpCode::Convolution || c.numOperands() != 2 ||
      c.attrInt("feature_group_count") != 1 || !c.operand(1)->def() ||
      c.operand(1)->def()->op() != OpCode::Constant)
    return std::nullopt;
  auto xd = f32Dims(c.operand(0), "input"), kd = f32Dims(c.operand(1), "kernel");
  if (!xd || !kd || xd->size() != 4 || kd->size() != 4) return std::nullopt;
  auto dn = convDimensionNumbers(c.attrs(), 4);
  if (!dn) return std::nullopt;
  const int64_t block = channelBlock();
  if ((*xd)[static_cast<size_t>(dn->inputFeature)] % block != 0 ||
      (*kd)[static_cast<size_t>(dn->kernelOutput)] % block != 0)
    return std::nullopt;
  return (*kd)[static_cast<size_t>(dn->kernelSpatial[0])] != 1 ||
         (*kd)[static_cast<size_t>(dn->kernelSpatial[1])] != 1;
}

// Whether 1x1 convolution `n` computes blocked: when its source comes, through elementwise ops
// (a residual add, a relu), from a blocked convolution with a larger window or from a 1x1 one
// that computes blocked by this rule. Such a layer then reads the blocked layout its producer
// keeps, and its result stays blocked for the layers after it (resnet's bottlenecks stay blocked
// from end to end: resnet50 at 2 threads 24.9-25.0 -> 23.5-23.9 ms, level at 1 thread), while
// 1x1 layers among depthwise ones (mobilenet_v2), whose kernels run faster on nhwc, stay on
// nhwc.
bool blockedOneByOne(const Node& n) {
  std::vector<const Node*> work;
  std::set<const Node*> seen;
  auto up = [&](const Node& m) {
    const bool conv = m.op() == OpCode::Convolution;
    for (size_t i = 0; i < (conv ? 1 : m.numOperands()); ++i) {
      const Node* def = m.operand(i)->def();
      // A convolution's source; an elementwise op's operands of its result's shape (not a
      // broadcast bias).
      if (def && (conv || m.operand(i)->type() == m.result(0)->type()) && seen.size() < 4096 &&
          seen.insert(def).second)
        work.push_back(def);
    }
  };
  up(n);
  while (!work.empty()) {
    const Node* m = work.back();
    work.pop_back();
    OpClass cls = opInfo(m->op()).opClass;
    if (m->op() == OpCode::Convolution) {
      std::optional<bool> larger = blockableWindow(*m);
      if (larger && *larger) return true;
      if (larger) up(*m);
    } else if (cls == OpClass::ElementwiseUnary || cls == OpClass::ElementwiseBinary ||
               cls == OpClass::ElementwiseTernary) {
      up(*m);
    }
  }
  return false;
}

StatusOr<std::unique_ptr<LibraryKernel>>
createConvolution(const Node& n, const std::vector<kernel::PostOp>& postOps, int threads,
                  const PackedWeights* prepacked) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> xd, f32Dims(n.operand(0), "input"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> kd, f32Dims(n.operand(1), "kernel"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> od, f32Dims(n.result(0), "result"));
  size_t rank = xd.size();
  if (rank < 3 || rank > 5 || kd.size() != rank || od.size() != rank)
    return Status::error("only 1-D, 2-D and 3-D convolutions (rank 3 to 5) are supported");
  size_t ns = rank - 2;
  auto dnOr = convDimensionNumbers(n.attrs(), static_cast<int64_t>(rank));
  if (!dnOr) return dnOr.status();
  const ConvDimensionNumbers& dn = *dnOr;
  const auto [strides, lo, hi, lhsDil, rhsDil] = convWindow(n.attrs(), ns);
  for (const auto* l : {&strides, &lo, &hi, &lhsDil, &rhsDil})
    if (l->size() != ns) return Status::error("window attributes need one entry per spatial dim");
  for (size_t s = 0; s < ns; ++s) {
    if (lhsDil[s] != 1) return Status::error("lhs_dilation is not supported");
    if (strides[s] < 1 || rhsDil[s] < 1) return Status::error("strides and dilations must be >= 1");
    if (lo[s] < 0 || hi[s] < 0) return Status::error("negative padding is not supported");
  }
  if (n.attrInt("batch_group_count") != 1)
    return Status::error("batch_group_count other than 1 is not supported");
  int64_t groups = n.attrInt("feature_group_count");
  auto at = [](const std::vector<int64_t>& v, int64_t i) { return v[static_cast<size_t>(i)]; };
  int64_t inC = at(xd, dn.inputFeature), kO = at(kd, dn.kernelOutput), kI = at(kd, dn.kernelInput);
  if (groups < 1 || kI * groups != inC || kO % groups != 0)
    return Status::error("feature_group_count does not fit the feature extents");
  if (at(od, dn.outputBatch) != at(xd, dn.inputBatch) || at(od, dn.outputFeature) != kO)
    return Status::error("result batch or feature extent does not match the operands");

  std::vector<int64_t> xs = rowMajor(xd), ks = rowMajor(kd), os = rowMajor(od);
  std::vector<Axis> src{{at(xd, dn.inputBatch), at(xs, dn.inputBatch)},
                        {inC, at(xs, dn.inputFeature)}};
  std::vector<Axis> dst{{at(od, dn.outputBatch), at(os, dn.outputBatch)},
                        {kO, at(os, dn.outputFeature)}};
  std::vector<Axis> wei;
  if (groups > 1) wei.push_back({groups, (kO / groups) * at(ks, dn.kernelOutput)});
  wei.push_back({kO / groups, at(ks, dn.kernelOutput)});
  wei.push_back({kI, at(ks, dn.kernelInput)});
  std::vector<std::vector<int64_t>> dstDims{{dn.outputBatch}, {dn.outputFeature}};
  Dims dStrides, dDilation, dLo, dHi;
  std::vector<int64_t> window;
  for (size_t s = 0; s < ns; ++s) {
    dstDims.push_back({dn.outputSpatial[s]});
    src.push_back({at(xd, dn.inputSpatial[s]), at(xs, dn.inputSpatial[s])});
    wei.push_back({at(kd, dn.kernelSpatial[s]), at(ks, dn.kernelSpatial[s])});
    dst.push_back({at(od, dn.outputSpatial[s]), at(os, dn.outputSpatial[s])});
    window.push_back(at(kd, dn.kernelSpatial[s]));
    dStrides.push_back(strides[s]);
    dDilation.push_back(rhsDil[s] - 1);  // oneDNN counts the holes: 0 is dense
    dLo.push_back(lo[s]);
    dHi.push_back(hi[s]);
  }
  std::string what =
      "convolution (" +
      layoutName(rank, dn.inputBatch, 'n', dn.inputFeature, 'c', dn.inputSpatial) + ", " +
      layoutName(rank, dn.kernelOutput, 'o', dn.kernelInput, 'i', dn.kernelSpatial) + " -> " +
      layoutName(rank, dn.outputBatch, 'n', dn.outputFeature, 'c', dn.outputSpatial) + ", " +
      joinDims(window, "x");
  if (std::any_of(strides.begin(), strides.end(), [](int64_t v) { return v != 1; }))
    what += ", stride " + joinDims(strides, "x");
  if (std::any_of(rhsDil.begin(), rhsDil.end(), [](int64_t v) { return v != 1; }))
    what += ", dilation " + joinDims(rhsDil, "x");
  if (groups > 1) what += ", groups " + std::to_string(groups);
  memory::desc srcMd = stridedDesc(src), weiMd = stridedDesc(wei), dstMd = stridedDesc(dst);
  const bool depthwise = groups > 1 && groups == inC && kO == inC;
  const bool stride1 =
      std::all_of(strides.begin(), strides.end(), [](int64_t v) { return v == 1; });
  auto makeAnyPd = [&](const memory::desc& s, const memory::desc& w, const memory::desc& d,
                       const dnnl::primitive_attr& attr, dnnl::algorithm algorithm,
                       const memory::desc* bias) {
    const auto prop = dnnl::prop_kind::forward_inference;
    auto c = bias ? dnnl::convolution_forward::desc(prop, algorithm, s, w, *bias, d, dStrides,
                                                    dDilation, dLo, dHi)
                  : dnnl::convolution_forward::desc(prop, algorithm, s, w, d, dStrides, dDilation,
                                                    dLo, dHi);
    // A depthwise convolution of stride 1 (always direct, on the IR layout: only one-group ones
    // compute blocked) takes oneDNN's AVX-512 jit_dw kernel where oneDNN has it, not its first
    // choice brdgmm_dw: mobilenet_v2 3.2-3.6% faster at 1 thread and level at 2 (both compiled
    // in one process, runs alternating; docs/codegen.md, "Depthwise convolutions"). The
    // descriptor's implementations can only be walked where it is constructed (a copy keeps the
    // one it shows).
    if (depthwise && stride1) {
      dnnl::convolution_forward::primitive_desc candidate(c, attr, cpuEngine());
      do {
        if (std::string(candidate.impl_info_str()).rfind("jit_dw:avx512", 0) == 0) return candidate;
      } while (candidate.next_impl());
    }
    return dnnl::convolution_forward::primitive_desc(c, attr, cpuEngine());
  };
  // 2-D, one group, a window larger than 1x1 (or a 1x1 window among such layers,
  // blockedOneByOne), channels in whole blocks: nChw8c or nChw16c (see onednn.h). oneDNN's
  // depthwise kernels, and its 1x1 kernels among them, run faster on nhwc.
  bool oneByOne = std::all_of(window.begin(), window.end(), [](int64_t w) { return w == 1; });
  const int64_t block = channelBlock();
  if (ns == 2 && groups == 1 && (!oneByOne || blockedOneByOne(n)) && inC % block == 0 &&
      kO % block == 0) {
    // oneDNN's Winograd kernels (F(2x2,3x3) and F(4x4,3x3), AVX-512 only) take 3x3 windows of
    // stride 1.
    bool winograd =
        window == std::vector<int64_t>{3, 3} && dStrides == Dims{1, 1} && dDilation == Dims{0, 0};
    auto blocked = createBlockedConvolution(n, postOps, threads, srcMd, weiMd, dstMd, makeAnyPd,
                                            winograd, what, dstDims, prepacked);
    if (blocked) return blocked;
  }
  auto makePd = [&](const memory::desc& w, const dnnl::primitive_attr& attr,
                    const memory::desc* bias) {
    std::optional<memory::desc> vector;
    if (bias) vector = channelVector(*bias);
    return makeAnyPd(srcMd, w, dstMd, attr, dnnl::algorithm::convolution_direct,
                     vector ? &*vector : nullptr);
  };
  return finish<dnnl::convolution_forward>(n, threads, srcMd, weiMd, dstMd, makePd, what, postOps,
                                           dstDims, prepacked, /*biasAxis=*/1);
}

}  // namespace

bool oneDnnAvx512() { return avx512(); }
bool oneDnnWinograd() { return avx512(); }

StatusOr<std::unique_ptr<LibraryKernel>>
createOneDnnKernel(const Node& n, const std::vector<kernel::PostOp>& postOps, int threads,
                   const PackedWeights* prepacked) {
  if (n.numOperands() != 2 || n.numResults() != 1)
    return Status::error(n.describe() + ": expected two operands and one result");
  try {
    // Primitives read the thread count when they are created (jit kernels size their work
    // split by it), so creation runs under the same limit as run().
    OmpThreadsScope scope(threads);
    StatusOr<std::unique_ptr<LibraryKernel>> k = Status::error("not a dot_general or convolution");
    if (n.op() == OpCode::DotGeneral) k = createMatmul(n, postOps, threads, prepacked);
    else if (n.op() == OpCode::Convolution) k = createConvolution(n, postOps, threads, prepacked);
    if (!k) return Status(k.status()).prefix(n.describe() + ": no oneDNN kernel");
    return k;
  } catch (const dnnl::error& e) {
    return Status::error(n.describe() + ": no oneDNN kernel: oneDNN error: " + e.what());
  } catch (const std::exception& e) {
    return Status::error(n.describe() + ": no oneDNN kernel: " + e.what());
  }
}

}  // namespace kiln::codegen::cpu
