// oneDNN library kernels: dot_general -> matmul. The batch dim pairs become oneDNN batch dims,
// the lhs free dims M (and further batch dims), the rhs free dims N and the contracting dims K,
// each a strided descriptor over the IR's buffer (onednn.h).
#include <algorithm>
#include <cstdint>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <string>
#include <vector>

#include "codegen/cpu/onednn_internal.h"

namespace kiln::codegen::cpu::onednn {
namespace {

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

// A dot_general's operands and result as oneDNN matmul axes: src (batch..., M, K), weights
// (batch..., K, N) and dst (batch..., M, N), with the result dims each dst axis covers; the
// result on `dstStrides` (a strided slice) unless it is empty (row-major).
struct MatmulAxes {
  std::vector<Axis> src, wei, dst;
  std::vector<std::vector<int64_t>> dstDims;  // the result dims each dst axis covers
  std::vector<int64_t> batch;                 // the batch extents
  Axis srcK, wK, wN;
  int64_t m = 1;  // M's extent
};

StatusOr<MatmulAxes> matmulAxes(const Node& n, const std::vector<int64_t>& dstStrides) {
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
  std::vector<int64_t> ls = rowMajor(ld), rs = rowMajor(rd);
  std::vector<int64_t> os = dstStrides.empty() ? rowMajor(od) : dstStrides;

  MatmulAxes x;
  // K: the contracting dims must be one strided run on each side.
  std::vector<Run> lk = mergeRuns(ld, ls, lc), rk = mergeRuns(rd, rs, rc);
  if (lk.size() > 1 || rk.size() > 1)
    return Status::error("contracting dims do not merge into one strided dim");
  x.srcK = lk.empty() ? Axis{} : Axis{lk[0].ext, lk[0].stride};
  x.wK = rk.empty() ? Axis{} : Axis{rk[0].ext, rk[0].stride};
  // N: the rhs free dims must be one strided run.
  std::vector<Run> rn = mergeRuns(rd, rs, rf);
  if (rn.size() > 1) return Status::error("rhs free dims do not merge into one strided dim");
  size_t firstN = lb.size() + lf.size();  // output position of the first rhs free dim
  x.wN = rn.empty() ? Axis{} : Axis{rn[0].ext, rn[0].stride};
  Axis dN = rn.empty() ? Axis{} : Axis{rn[0].ext, os[firstN + rn[0].inner]};
  // M: the last run of lhs free dims; earlier runs are batch dims the rhs is broadcast over.
  std::vector<Run> lm = mergeRuns(ld, ls, lf);
  bool noM = lm.empty();
  if (noM) lm.push_back(Run{1, 1, 0, 0});

  for (size_t i = 0; i < lb.size(); ++i) {
    int64_t ext = ld[static_cast<size_t>(lb[i])];
    if (ext == 1) continue;
    x.src.push_back({ext, ls[static_cast<size_t>(lb[i])]});
    x.wei.push_back({ext, rs[static_cast<size_t>(rb[i])]});
    x.dst.push_back({ext, os[i]});
    x.dstDims.push_back({static_cast<int64_t>(i)});
    x.batch.push_back(ext);
  }
  for (size_t r = 0; r + 1 < lm.size(); ++r) {
    x.src.push_back({lm[r].ext, lm[r].stride});
    x.wei.push_back({1, 1});
    x.dst.push_back({lm[r].ext, os[lb.size() + lm[r].inner]});
    x.dstDims.push_back(runDims(lm[r], lb.size()));
    x.batch.push_back(lm[r].ext);
  }
  const Run& m = lm.back();
  x.m = m.ext;
  x.src.push_back({m.ext, m.stride});
  x.src.push_back(x.srcK);
  x.wei.push_back(x.wK);
  x.wei.push_back(x.wN);
  x.dst.push_back({m.ext, os[lb.size() + m.inner]});
  x.dst.push_back(dN);
  x.dstDims.push_back(noM ? std::vector<int64_t>{} : runDims(m, lb.size()));
  x.dstDims.push_back(rn.empty() ? std::vector<int64_t>{} : runDims(rn[0], firstN));
  if (x.src.size() > DNNL_MAX_NDIMS) return Status::error("too many batch dims for oneDNN");
  return x;
}

}  // namespace

StatusOr<std::unique_ptr<LibraryKernel>>
createMatmul(const Node& n, const std::vector<kernel::PostOp>& postOps, int threads,
             const PackedWeights* prepacked, bool probe, const std::vector<int64_t>& dstStrides) {
  KILN_ASSIGN_OR_RETURN(const MatmulAxes x, matmulAxes(n, dstStrides));
  bool lhsT = x.srcK.ext > 1 && x.m > 1 && x.srcK.stride != 1;
  bool rhsT = x.wK.ext > 1 && x.wN.ext > 1 && x.wN.stride != 1;
  std::string what = "matmul (";
  if (!x.batch.empty()) what += "batch " + joinDims(x.batch, "x") + ", ";
  what += std::to_string(x.m) + "x" + std::to_string(x.srcK.ext) + "x" + std::to_string(x.wN.ext);
  if (lhsT) what += ", lhs transposed";
  if (rhsT) what += ", rhs transposed";
  memory::desc srcMd = stridedDesc(x.src), weiMd = stridedDesc(x.wei), dstMd = stridedDesc(x.dst);
  std::optional<memory::desc> padded = avx512() ? std::nullopt : paddedWeights(x.wei, x.wK, x.wN);
  if (padded && padded->data.format_desc.blocking.strides[0] != x.wN.ext &&
      (constantWeights(n, weiMd) || heldWeights(n)))
    what +=
        ", weight rows padded to " + std::to_string(padded->data.format_desc.blocking.strides[0]);
  auto makePd = [&](const memory::desc& w, const dnnl::primitive_attr& attr,
                    const memory::desc* bias) {
    return dnnl::matmul::primitive_desc(bias ? dnnl::matmul::desc(srcMd, w, *bias, dstMd)
                                             : dnnl::matmul::desc(srcMd, w, dstMd),
                                        attr, cpuEngine());
  };
  return finish<dnnl::matmul>(n, threads, srcMd, weiMd, dstMd, makePd, what, postOps, x.dstDims,
                              prepacked, /*biasAxis=*/static_cast<int>(x.dst.size()) - 1, probe,
                              padded ? &*padded : nullptr);
}

}  // namespace kiln::codegen::cpu::onednn
