// Op patterns and per-node costs for fusion.
#include "fusion/op_pattern.h"

#include <algorithm>
#include <string>

#include "ir/resize_geometry.h"

namespace kiln::fusion {

std::string_view patternName(OpPattern p) {
  switch (p) {
    case OpPattern::Buffer: return "buffer";
    case OpPattern::Elementwise: return "elementwise";
    case OpPattern::Injective: return "injective";
    case OpPattern::Reduction: return "reduction";
    case OpPattern::Contraction: return "contraction";
    case OpPattern::Attention: return "attention";
    case OpPattern::Opaque: return "opaque";
  }
  return "?";
}

OpPattern patternOf(const Node& n) {
  switch (n.info().opClass) {
    case OpClass::Leaf: return n.op() == OpCode::Iota ? OpPattern::Injective : OpPattern::Buffer;
    case OpClass::ElementwiseUnary:
    case OpClass::ElementwiseBinary:
    case OpClass::ElementwiseTernary: return OpPattern::Elementwise;
    case OpClass::DataMovement:
      // Scatters, resizes and grid samples are kernels of their own: their loop lowering
      // (src/kernel/lower_opaque.h) writes whole buffers and cannot be inlined at an index.
      // But a nearest resize by whole factors moves data as a slice does (nearestIndexMap).
      // Gathers and dynamic slices read through loaded indices.
      if (n.op() == OpCode::Resize && nearestIndexMap(n)) return OpPattern::Injective;
      if (n.op() == OpCode::Scatter || n.op() == OpCode::Resize || n.op() == OpCode::GridSample)
        return OpPattern::Opaque;
      return OpPattern::Injective;
    case OpClass::Reduction:
      // Sorts, top_k and cumsum too: whole-row scans, lowered as kernels of their own.
      if (n.op() == OpCode::Sort || n.op() == OpCode::TopK || n.op() == OpCode::Cumsum ||
          n.op() == OpCode::NonZero || n.op() == OpCode::Unique ||
          n.op() == OpCode::NonMaxSuppression)
        return OpPattern::Opaque;
      return OpPattern::Reduction;
    case OpClass::Contraction: return OpPattern::Contraction;
    case OpClass::Composite:
      switch (n.op()) {
        case OpCode::Gelu:
        case OpCode::BatchNormInference: return OpPattern::Elementwise;
        case OpCode::Attention: return OpPattern::Attention;
        // A whole recurrence: one library call where the target keeps it (the CPU's oneDNN).
        case OpCode::Lstm:
        case OpCode::Gru: return OpPattern::Opaque;
        default: return OpPattern::Reduction;  // softmax, log_softmax, layer_norm
      }
  }
  return OpPattern::Opaque;
}

int64_t elementsOf(const Value& v) {
  int64_t n = 1;
  for (const Dim& d : v.type().dims()) n *= d.isStatic() ? d.value() : 1;
  return n;
}

int64_t bytesOf(const Value& v) {
  return elementsOf(v) * static_cast<int64_t>(dtypeSize(v.type().dtype()));
}

namespace {

bool isTranscendental(OpCode op) {
  switch (op) {
    case OpCode::Exp:
    case OpCode::Expm1:
    case OpCode::Log:
    case OpCode::Log1p:
    case OpCode::Sin:
    case OpCode::Cos:
    case OpCode::Tan:
    case OpCode::Asin:
    case OpCode::Acos:
    case OpCode::Atan:
    case OpCode::Sinh:
    case OpCode::Cosh:
    case OpCode::Asinh:
    case OpCode::Acosh:
    case OpCode::Atanh:
    case OpCode::Tanh:
    case OpCode::Erf:
    case OpCode::Sigmoid:
    case OpCode::Pow:
    case OpCode::Atan2: return true;
    default: return false;
  }
}

// The extent of the output-feature dimension of a convolution's kernel, from the
// dimension_numbers spelling "bf01_oi01->bf01" (default: kernel dimension 0).
int64_t kernelOutputFeatures(const Node& conv) {
  const Value& kernel = *conv.operand(1);
  size_t oPos = 0;
  auto it = conv.attrs().find("dimension_numbers");
  if (it != conv.attrs().end() && attrKind(it->second) == AttrKind::String) {
    const std::string& spec = std::get<7>(it->second);
    size_t us = spec.find('_'), arrow = spec.find("->");
    if (us != std::string::npos && arrow != std::string::npos && arrow > us) {
      size_t o = spec.find('o', us + 1);
      if (o != std::string::npos && o < arrow) oPos = o - us - 1;
    }
  }
  const Dim& d = kernel.type().dims().at(oPos);
  return d.isStatic() && d.value() > 0 ? d.value() : 1;
}

}  // namespace

double flopsOf(const Node& n) {
  if (n.numResults() == 0) return 0;
  double out = static_cast<double>(elementsOf(*n.result()));
  switch (patternOf(n)) {
    case OpPattern::Buffer:
    case OpPattern::Injective: return 0;
    case OpPattern::Elementwise:
      if (n.op() == OpCode::Gelu) return 8 * out;
      if (n.op() == OpCode::BatchNormInference) return 4 * out;
      return (isTranscendental(n.op()) ? 8 : 1) * out;
    case OpPattern::Reduction: {
      double in = static_cast<double>(elementsOf(*n.operand(0)));
      if (n.op() == OpCode::Softmax || n.op() == OpCode::LogSoftmax) return 12 * in;
      if (n.op() == OpCode::LayerNorm) return 8 * in;
      if (n.op() == OpCode::ReduceWindow) {
        double window = 1;
        for (int64_t w : n.attrInts("window_dimensions")) window *= static_cast<double>(w);
        return out * window;
      }
      return in;
    }
    case OpPattern::Contraction: {
      if (n.op() == OpCode::DotGeneral) {
        double k = 1;
        const auto& lhs = n.operand(0)->type().dims();
        for (int64_t d : n.attrInts("lhs_contracting"))
          if (d >= 0 && d < static_cast<int64_t>(lhs.size()) && lhs[d].isStatic())
            k *= static_cast<double>(lhs[d].value());
        return 2 * out * k;
      }
      double perOutput = static_cast<double>(elementsOf(*n.operand(1))) /
                         static_cast<double>(kernelOutputFeatures(n));
      return 2 * out * perOutput;
    }
    case OpPattern::Attention: {
      // q: [..., Sq, D], k: [..., Sk, D]: two matrix products of 2*Sq*Sk*D each per head, and
      // the softmax over Sq*Sk scores.
      const auto& k = n.operand(1)->type().dims();
      double sk = k.size() >= 2 && k[k.size() - 2].isStatic() ? k[k.size() - 2].value() : 1;
      double scores = out / (k.empty() || !k.back().isStatic() ? 1 : k.back().value()) * sk;
      return 4 * out * sk + 12 * scores;
    }
    case OpPattern::Opaque:
      if (n.op() == OpCode::Lstm || n.op() == OpCode::Gru) {
        // Every step, batch row and direction: x w^T and h r^T over all gates, so 2 * (|w| + |r|)
        // per row of x (S * B rows; |w| and |r| cover the directions).
        const Dim& inputs = n.operand(0)->type().dims().back();
        const double rows =
            static_cast<double>(elementsOf(*n.operand(0))) /
            static_cast<double>(inputs.isStatic() ? std::max<int64_t>(1, inputs.value()) : 1);
        return 2 * rows *
               static_cast<double>(elementsOf(*n.operand(1)) + elementsOf(*n.operand(2)));
      }
      return out;
  }
  return out;
}

}  // namespace kiln::fusion
