// oneDNN library kernels: constant weights. A primitive created with weights of format `any`
// picks their layout; the constant is reordered into it once (packWeights), or an artifact's
// prepacked bytes in that layout are used in place. See onednn.h and docs/codegen.md, "Weights".
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "codegen/cpu/onednn_internal.h"
#include "ir/op.h"
#include "ir/tensor.h"
#include "ir/types.h"
#include "support/large_buffer.h"

namespace kiln::codegen::cpu::onednn {

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

bool reorderWritesEveryByte(const memory::desc& d) {
  const dnnl_memory_desc_t& m = d.data;
  if (m.format_kind != dnnl_blocked || m.extra.flags != 0 || m.offset0 != 0) return false;
  const dnnl_blocking_desc_t& b = m.format_desc.blocking;
  // The inner blocks are one dense tile; each dimension's outer extent steps over whole tiles.
  int64_t tile = 1;
  int64_t perDim[DNNL_MAX_NDIMS];
  std::fill(perDim, perDim + DNNL_MAX_NDIMS, 1);
  for (int i = 0; i < b.inner_nblks; ++i) {
    tile *= b.inner_blks[i];
    perDim[b.inner_idxs[i]] *= b.inner_blks[i];
  }
  std::vector<std::pair<int64_t, int64_t>> outer;  // (stride, extent) of the outer steps
  for (int i = 0; i < m.ndims; ++i) {
    if (m.padded_offsets[i] != 0) return false;
    int64_t extent = m.padded_dims[i] / perDim[i];
    if (extent > 1) outer.emplace_back(b.strides[i], extent);
  }
  // Sorted by stride, each step must span exactly the steps inside it: no gaps, no overlap.
  std::sort(outer.begin(), outer.end());
  int64_t span = tile;
  for (const auto& [stride, extent] : outer) {
    if (stride != span) return false;
    span *= extent;
  }
  return static_cast<size_t>(span) * memory::data_type_size(d.data_type()) == d.get_size();
}

bool heldWeights(const Node& n) {
  const Node* wdef = n.operand(1)->def();
  return wdef->op() == OpCode::Constant && wdef->constantData().held;
}

const Tensor* constantWeights(const Node& n, const memory::desc& weights) {
  const Node* wdef = n.operand(1)->def();
  if (wdef->op() != OpCode::Constant) return nullptr;
  const Tensor& t = wdef->constantData().tensor;
  if (t.dtype() == DType::F32 && t.defined() &&
      static_cast<size_t>(t.numElements()) * sizeof(float) == weights.get_size())
    return &t;
  return nullptr;
}

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
  // The reorder writes every element and zeroes the padding (dnnl.h, dnnl_primitive_execute:
  // padded outputs come zero-padded). Only a layout with bytes outside both (gaps between padded
  // rows) is zeroed first, so that an artifact holding it is deterministic: elsewhere the zeroing
  // is a second pass over fresh pages that the reorder writes anyway.
  if (!reorderWritesEveryByte(chosen)) std::memset(packed.get_data_handle(), 0, chosen.get_size());
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

PrimitiveInputs primitiveInputs(const Node& n, const memory::desc& weights, const PostOpsPlan& post,
                                bool hasPostOps, const memory::desc* constantLayout) {
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

}  // namespace kiln::codegen::cpu::onednn
