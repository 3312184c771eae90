// oneDNN library kernels: the LibraryKernels that run a primitive on Kiln's buffers (OneDnnKernel)
// or on blocked copies of them (BlockedConvolution), with the per-thread stream and scratch and
// the memory objects they reuse from run to run. See onednn.h.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "codegen/cpu/onednn_internal.h"
#include "support/large_buffer.h"

namespace kiln::codegen::cpu::onednn {

// The calling thread's stream, made on its first call: creating one per call cost about a
// microsecond of a small call's three (50 chained 8x8x32 depthwise convolutions).
dnnl::stream& threadStream() {
  thread_local dnnl::stream stream(cpuEngine());
  return stream;
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

namespace {

size_t alignUp64(size_t n) { return (n + 63) / 64 * 64; }

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

// What a kernel would be (probeOneDnnKernel): a description, the buffers it would compute
// blocked and their layout, and nothing to run.
class ProbedKernel final : public LibraryKernel {
 public:
  ProbedKernel(std::string description, std::vector<size_t> blockable, std::string layout)
      : description_(std::move(description)), blockable_(std::move(blockable)),
        layout_(std::move(layout)) {}
  Status run(void* const*) const override {
    return Status::error(description_ + ": a probe, not a kernel");
  }
  std::string describe() const override { return description_; }
  std::vector<size_t> blockableBuffers() const override { return blockable_; }
  std::string blockedLayout() const override { return layout_; }

 private:
  std::string description_;
  std::vector<size_t> blockable_;
  std::string layout_;
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

// A convolution computing in nChw8c or nChw16c (channelBlock()). Each blockable buffer (source 0,
// result 2, residual-shaped post-op operands 3+i) is reordered between its IR layout and the
// blocked one in per-thread scratch, unless the runtime stores it blocked (storeBlocked). A
// reorder primitive is created when an operand first needs one: storeBlocked creates those of the
// operands left in the IR layout, and most operands are stored blocked and never need one (each
// costs 0.1-0.5 ms to create: resnet50 created 18 and used none of them).
class BlockedConvolution final : public LibraryKernel {
 public:
  using Operand = BlockedOperand;
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

}  // namespace

std::unique_ptr<LibraryKernel> makeProbedKernel(std::string description,
                                                std::vector<size_t> blockable, std::string layout) {
  return std::make_unique<ProbedKernel>(std::move(description), std::move(blockable),
                                        std::move(layout));
}

std::unique_ptr<LibraryKernel>
makeOneDnnKernel(dnnl::primitive prim, memory::desc src, memory::desc weights, memory::desc dst,
                 memory::desc scratch, HeldWeights held, std::optional<PostOpsPlan::Binary> bias,
                 std::vector<PostOpsPlan::Binary> binaries, int threads, std::string description) {
  return std::unique_ptr<LibraryKernel>(
      new OneDnnKernel(std::move(prim), src, weights, dst, scratch, std::move(held), bias,
                       std::move(binaries), threads, std::move(description)));
}

std::unique_ptr<LibraryKernel> makeBlockedConvolution(dnnl::primitive prim, memory::desc weights,
                                                      memory::desc scratch, HeldWeights held,
                                                      std::vector<BlockedOperand> operands,
                                                      std::vector<PostOpsPlan::Binary> binaries,
                                                      std::optional<PostOpsPlan::Binary> bias,
                                                      int threads, std::string description,
                                                      std::string layout) {
  return std::unique_ptr<LibraryKernel>(new BlockedConvolution(
      std::move(prim), weights, scratch, std::move(held), std::move(operands), std::move(binaries),
      bias, threads, std::move(description), std::move(layout)));
}

}  // namespace kiln::codegen::cpu::onednn
