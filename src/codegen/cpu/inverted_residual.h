// Kiln's own kernel for an inverted-residual block (mobilenet_v2's): a 1x1 convolution that
// expands the channels, a 3x3 depthwise convolution of stride 1 or 2, and a 1x1 convolution that
// projects them back, each with its per-channel bias and a clamp (relu, relu6) or none, the last
// with an optional residual add; f32 on nhwc with hwio weights.
//
// It computes the block one output row at a time: each input row is expanded once into a ring of
// three rows, then the depthwise row and the projected row follow, so the expanded and depthwise
// values (several times the block's channels) stay in the cache. As separate library calls the
// three layers write and read those values whole, and at mobilenet_v2's 112x112 and 56x56 they
// are bound by that traffic (docs/codegen.md, "Inverted-residual blocks"). The output rows are
// split over the pool's threads; each part expands the row above its first once more.
//
// The CPU target registers the block as a custom fusion (invertedResidualFusion): the planner
// forms one custom kernel of the three convolutions where create() takes them and the values
// between them have no other reader; those values are internal to the kernel (no memory). The
// kernel reads the weights and biases from the calls' own buffers, so it holds nothing; it needs
// AVX-512 (invertedResidualAvailable()).
#pragma once

#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "codegen/cpu/thread_pool.h"
#include "fusion/custom_fusion.h"
#include "ir/ir.h"
#include "kernel/kernel_ir.h"
#include "support/status.h"

namespace kiln::codegen::cpu {

// Whether this CPU runs the kernel (AVX-512F).
bool invertedResidualAvailable();

// The custom fusion "inverted-residual block": over chains of three convolution kernels whose
// middle one is grouped, claims those create() takes (the same checks, on the plan's post-op
// chains), with the reason; declines the others with create()'s reason.
fusion::CustomFusion invertedResidualFusion();

class InvertedResidualKernel {
 public:
  // One layer of the block: its convolution and the post-ops of its call.
  struct Layer {
    const Node* node = nullptr;
    const std::vector<kernel::PostOp>* postOps = nullptr;
  };
  // The kernel for expand -> depthwise -> project, or why these are not such a block.
  static StatusOr<std::unique_ptr<InvertedResidualKernel>>
  create(const Layer& expand, const Layer& depthwise, const Layer& project);

  // args[i]: the arguments of layer i's library call, as a library kernel receives them (the
  // convolution's operands, its result, then its add/mul post-ops' operands). Writes the
  // project layer's result; the other two results are not written.
  void run(void* const* const args[3], const ThreadPool& pool) const;

  // "Kiln inverted-residual block (16 -> 96 -> 24 channels, 112x112, depthwise stride 2, ...)".
  std::string describe() const;
  // The bytes of its 1x1 weights (expand and project) and the most it takes.
  int64_t weightBytes() const;
  static int64_t maxWeightBytes();

 private:
  struct Shape {
    int64_t batch = 0, height = 0, width = 0;  // of the block's input
    int64_t in = 0, mid = 0, out = 0;          // channels
    int64_t stride = 1, outHeight = 0, outWidth = 0;
  };
  struct Clamp {
    float lo = -std::numeric_limits<float>::infinity();
    float hi = std::numeric_limits<float>::infinity();
  };
  InvertedResidualKernel() = default;
  void runRows(void* const* const args[3], int64_t image, int64_t y0, int64_t y1,
               float* scratch) const;

  Shape s_;
  Clamp expandClamp_, depthwiseClamp_;
  bool residual_ = false;  // the project layer adds a residual (its call's argument 4)
};

}  // namespace kiln::codegen::cpu
