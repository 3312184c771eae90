// oneDNN library kernels: timing two primitives of one convolution against each other, for the
// choices no rule of shape foresees (onednn_internal.h, timeConvolutions).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <vector>

#include "codegen/cpu/onednn_internal.h"
#include "support/large_buffer.h"

namespace kiln::codegen::cpu::onednn {
namespace {

// A primitive with zeroed scratch memory for each of its arguments.
struct Trial {
  dnnl::convolution_forward prim;
  std::vector<std::shared_ptr<std::byte>> owners;
  std::vector<dnnl_exec_arg_t> args;
  std::vector<memory> memories;

  explicit Trial(const dnnl::convolution_forward::primitive_desc& pd) : prim(pd) {
    const std::pair<int, memory::desc> operands[] = {{DNNL_ARG_SRC, pd.src_desc()},
                                                     {DNNL_ARG_WEIGHTS, pd.weights_desc()},
                                                     {DNNL_ARG_BIAS, pd.bias_desc()},
                                                     {DNNL_ARG_DST, pd.dst_desc()},
                                                     {DNNL_ARG_SCRATCHPAD, pd.scratchpad_desc()}};
    for (const auto& [arg, desc] : operands) {
      if (desc.get_size() == 0) continue;
      // Zeros: any finite values time the same, and fresh pages are touched here, not in a run.
      owners.push_back(allocateLarge(desc.get_size()));
      std::memset(owners.back().get(), 0, desc.get_size());
      memories.emplace_back(desc, cpuEngine(), owners.back().get());
      args.push_back({arg, memories.back().get()});
    }
  }

  double runMs(dnnl::stream& stream) const {
    const auto start = std::chrono::steady_clock::now();
    dnnl::error::wrap_c_api(dnnl_primitive_execute(prim.get(), stream.get(),
                                                   static_cast<int>(args.size()), args.data()),
                            "could not execute a primitive");
    stream.wait();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
        .count();
  }
};

}  // namespace

StatusOr<ConvolutionTimes> timeConvolutions(const dnnl::convolution_forward::primitive_desc& a,
                                            const dnnl::convolution_forward::primitive_desc& b,
                                            int threads, int rounds, const std::string& key) {
  // One measurement at a time in a process: calls are prepared on several threads at once, and
  // two timings sharing the cores would each measure the other.
  static std::mutex measuring;
  static std::map<std::string, ConvolutionTimes> timed;
  std::lock_guard<std::mutex> lock(measuring);
  if (auto it = timed.find(key); it != timed.end()) return it->second;
  try {
    Trial first(a), second(b);
    OmpThreadsScope scope(threads);
    dnnl::stream& stream = threadStream();
    first.runMs(stream);  // warm-up: code and operands into cache, OpenMP's threads started
    second.runMs(stream);
    ConvolutionTimes t{std::numeric_limits<double>::infinity(),
                       std::numeric_limits<double>::infinity()};
    // Taking turns, so that a slow phase of the machine costs both.
    for (int r = 0; r < rounds; ++r) {
      t.first = std::min(t.first, first.runMs(stream));
      t.second = std::min(t.second, second.runMs(stream));
    }
    timed.emplace(key, t);
    return t;
  } catch (const dnnl::error& e) {
    return Status::error(std::string("timing two convolution kernels: oneDNN error: ") + e.what());
  }
}

}  // namespace kiln::codegen::cpu::onednn
