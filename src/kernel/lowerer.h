// The lowering's internals (lower.h is its interface): the Lowerer of one fusion kernel, whose
// parts live in lower.cpp (loop nests and stores), lower_compute.cpp (a value at an index, by
// its op), lower_reduce.cpp (reduction kernels) and lower_call.cpp (library calls, post-ops).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "fusion/fusion.h"
#include "kernel/kernel_ir.h"
#include "kernel/lower.h"

namespace kiln::kernel::lowering {

using Index = std::vector<ExprRef>;

// The multi-index of a flat index in `shape`.
Index unflatten(const ExprRef& flat, const std::vector<int64_t>& shape);
Index unflatten(const ExprRef& flat, const std::vector<ExprRef>& extents);
// The index into a reshape's operand (dims `in`) of element `idx` of its result (dims `out`),
// group by group: runs of dims with equal element counts map onto each other (S to S and
// N*256 to 4*N*64 in [S,N,256] -> [S,4*N,64]), so no index divides by a symbolic count.
Index reshapeIndex(const Index& idx, const Shape& out, const Shape& in);
// Whether an extent is the constant `n`.
bool isConst(const ExprRef& extent, int64_t n);
// `i` clamped to [0, extent).
ExprRef clampIndex(const ExprRef& i, int64_t extent);
ExprRef clampIndex(const ExprRef& i, const ExprRef& extent);
// The conjunction of `conds` (true for none).
ExprRef andAll(const std::vector<ExprRef>& conds);
// A graph dim as an extent: its value, or the product of its coefficient and symbols.
ExprRef dimExpr(const Dim& d);
// Whether an op's lowering reads extents only through Lowerer::extentsOf, so that a loop kernel
// with symbolic dims may hold it (the elementwise ops and broadcast, reshape, transpose, iota).
bool lowersOverSymbols(OpCode op);
// The type arithmetic runs in: f32 for f16/bf16 (rounded on store), the dtype otherwise.
DType computeType(DType t);

class Lowerer {
 public:
  // `names`: the printed names of f's values (printedValueNames), shared by its kernels.
  // `storesAlongside`, `sortRows`: fusion::FusionOptions::storesAlongsideReductions and
  // sortRows. `symbols`: the ranges of the program's symbols (a value with a symbolic dim needs
  // its symbol's range).
  Lowerer(const fusion::Kernel& k, const std::map<const Value*, std::string>& names,
          bool storesAlongside = false, const std::vector<Symbol>& symbols = {},
          fusion::SortRowLimits sortRows = {})
      : k_(k), names_(names), storesAlongside_(storesAlongside), sortRows_(sortRows),
        symbols_(symbols) {
    members_.insert(k.nodes.begin(), k.nodes.end());
    out_.kind = std::string(fusion::kernelKindName(k.kind));
    out_.name = "k" + std::to_string(k.id) + "_" + out_.kind;
  }

  StatusOr<Kernel> run();

 private:
  std::string name(const Value* v) const;

  // A buffer name for a value: its printed name reduced to [A-Za-z0-9_], made unique.
  const Buffer& bufferFor(const Value* v, BufferRole role);

  bool isStored(const Value* v) const;

  // Fresh loop variable names: i0, i1, ... (r0, ... for reduction loops), none a symbol's.
  std::string freshVar(const char* prefix);

  // The extents of `v`'s dims: constants, and its symbolic dims as their symbols.
  std::vector<ExprRef> extentsOf(const Value* v) const;
  // Checks that a kernel with symbolic dims lowers only what lowers over them, and records the
  // symbols it reads.
  Status checkSymbolic();
  // Whether member `n` of this kernel lowers with symbolic dims.
  bool lowersWithSymbols(const Node& n) const;
  // A slice x[:S] of a static extent must not read past it at the top of S's range.
  Status checkSlicePrefix(const Node& n) const;

  // A serial loop nest over `shape`: calls body(index) for the innermost body. Dims of extent 1
  // get no loop (their index is 0). The target's schedule picks parallel and vector loops.
  StmtRef nest(const std::vector<ExprRef>& extents,
               const std::function<StmtRef(const Index&)>& body, const char* prefix = "i");
  StmtRef nest(const std::vector<int64_t>& shape, const std::function<StmtRef(const Index&)>& body,
               const char* prefix = "i") {
    return nest(constExtents(shape), body, prefix);
  }

  // The value of `v` at `idx`, computed inside the kernel (members) or loaded (inputs).
  StatusOr<ExprRef> valueAt(const Value* v, const Index& idx);

  // The value of `v` at `idx` by its op (lower_compute.cpp): an input's load, an elementwise
  // op at the same index, or data movement (broadcast, reshape, ..., gather) at another.
  StatusOr<ExprRef> compute(const Value* v, const Index& idx);
  StatusOr<ExprRef> computeElementwise(const Value* v, const Index& idx);
  StatusOr<ExprRef> computeMovement(const Value* v, const Index& idx);
  StatusOr<ExprRef> gatherAt(const Value* v, const Index& idx);
  StatusOr<ExprRef> padAt(const Value* v, const Index& idx);
  StatusOr<ExprRef> concatenateAt(const Value* v, const Index& idx);
  StatusOr<ExprRef> dynamicSliceAt(const Value* v, const Index& idx);

  // Stores `v` at `idx` (rounding to its dtype).
  StatusOr<StmtRef> storeValue(const Value* v, const Index& idx);

  // The stores of each of `values` at `idx`.
  StatusOr<StmtRef> storeValues(const std::vector<const Value*>& values, const Index& idx);

  // A nest over `shape` storing each of `values` (all of that shape).
  StatusOr<StmtRef> storeNest(const std::vector<const Value*>& values,
                              const std::vector<ExprRef>& extents);
  StatusOr<StmtRef> storeNest(const std::vector<const Value*>& values,
                              const std::vector<int64_t>& shape) {
    return storeNest(values, constExtents(shape));
  }

  // A stored concatenate computed in the kernel: the loops over the dims before the
  // concatenated one are shared, and inside them one nest per operand stores that operand alone
  // over its part of the result. Computed element by element instead, every element would
  // evaluate every operand and select one (a 9-way im2col concatenation of slices of a pad ran at
  // 0.2 GB/s), and the selects keep the loop from vectorizing. Sharing the outer loops makes an
  // im2col one parallel loop over pixels, each storing its nine rows, instead of nine.
  StatusOr<StmtRef> storeConcatenate(const Value* v);

  // `s`, then the nests that store `rest` (the kernel's outputs of other shapes).
  StatusOr<StmtRef> thenStore(StmtRef s, const std::vector<const Value*>& rest);

  // One nest per distinct shape among `values`.
  StatusOr<StmtRef> storeAll(const std::vector<const Value*>& values);

  StatusOr<StmtRef> lowerLoop() { return storeAll(k_.outputs); }

  // ---- reductions -----------------------------------------------------------------------

  static ReduceKind reduceKind(const std::string& kind);

  // Values to store, split: those of `shape` (stored in the main nest) and the rest (each in a
  // nest of its own, recomputed).
  void splitOutputs(const std::vector<ExprRef>& shape, std::vector<const Value*>& main,
                    std::vector<const Value*>& rest) const;

  StatusOr<StmtRef> lowerReduction();

  // Whether v is `on` or computed from it inside the kernel.
  bool dependsOn(const Value* v, const Value* on) const;
  // Whether computing v in the kernel takes float arithmetic (not only loads, data movement and
  // index arithmetic).
  bool computesArithmetic(const Value* v) const;
  // Of a reduce's other outputs `rest`, those of its input's shape computed with arithmetic and
  // without its result move to `visitedOnce`: the reduced loops visit each of their elements
  // exactly once, so they are stored there, from the value the reduction reads, instead of in a
  // nest of their own that computes it again (a squeeze-and-excitation block's swish and its
  // pool). A copy (an embedding's gather) costs only its loads again, and a store among the
  // reduced loads keeps LLVM from hoisting their invariant indices (measured slower).
  void splitVisitedOnce(std::vector<const Value*>& rest,
                        std::vector<const Value*>& visitedOnce) const;
  // The value a channel reduction reduces at input index `idx`, after `stores` (out) of the
  // visitedOnce values there: x loaded back where it is one of them (computed once; a load of
  // the address just stored, which the code generator forwards), else computed.
  StatusOr<ExprRef> reducedValue(const Value* x, const Index& idx,
                                 const std::vector<const Value*>& visitedOnce, StmtRef& stores);

  // The reduced loops of output index `o` of a reduce, argmax/argmin or reduce_window, the input
  // index they read, and (for a window with padding or dilation) when that index is valid.
  struct ReductionIndex {
    std::vector<std::string> rvars;
    std::vector<ExprRef> rextents;
    Index inIdx;
    ExprRef valid;
  };
  ReductionIndex reductionIndex(const Index& o);

  // Whether a reduce or reduce_window keeps its input's innermost dim as its result's innermost
  // (pooling in NHWC, a reduction over rows): then the accumulators of a run of that dim are
  // updated together, in a loop inside the reduced loops (lowerChannelReduction).
  bool keepsInnermost() const;

  // A reduce or reduce_window that keeps the innermost dim (keepsInnermost): per index of the
  // other result dims, a local accumulator per innermost element,
  //   for c: acc[c] = identity
  //   for the reduced loops { for c: acc[c] = acc[c] op x(..., c) }
  //   for c: the stored values at (..., c), the result being acc[c]
  // (the innermost loops, which a schedule may vectorize).
  // Each accumulator sees its elements in the same order as one per output element would.
  StatusOr<StmtRef> lowerChannelReduction();

  // One step of argmax/argmin over the variable `pos`: the first NaN wins (argmax: NaN is the
  // largest; argmin: the smallest); ties keep the first index unless select_last_index.
  StmtRef argUpdate(const std::string& acc, const std::string& accIdx, DType ct, ExprRef v,
                    const std::string& pos);

  // reduce, argmax/argmin and reduce_window: per output element, a Reduce (argmax/argmin: a
  // loop) over the reduced elements into local accumulators, then the epilogue there.
  StatusOr<StmtRef> lowerRowReduction();

  // softmax, log_softmax, layer_norm: per row, passes over the row with local accumulators,
  // and the result (with its epilogue) stored in the last pass.
  StatusOr<StmtRef> lowerRowNormalization();
  // The dims of the rows and of one row (softmax: its axis; layer_norm: [axis, rank)).
  struct RowLayout {
    std::vector<ExprRef> in, rowShape, lineShape;
    std::vector<size_t> rowDims, lineDims;
    Index at(const Index& row, const Index& line) const;  // the full index
  };
  RowLayout rowLayout() const;
  // acc = acc `kind` value(full index) over the row: one Reduce over its dims.
  StatusOr<StmtRef> reduceLine(const RowLayout& rl, const Index& row, const std::string& acc,
                               ReduceKind kind, DType ct,
                               const std::function<StatusOr<ExprRef>(const Index&)>& value);
  // The passes before the last: layer_norm's mean into a0 and 1 / sqrt(var + eps) into a1;
  // softmax's max into a0 and sum of exp(x - max) into a1 (1 / sum for softmax).
  StatusOr<std::vector<StmtRef>> rowStatistics(const RowLayout& rl, const Index& row,
                                               const std::string& a0, const std::string& a1,
                                               DType ct);
  // The anchor's value at `full` from the row's statistics acc0 and acc1.
  StatusOr<ExprRef> normalizedAt(const Index& full, const Index& line, ExprRef acc0, ExprRef acc1);

  // ---- library calls ----------------------------------------------------------------------

  // The post-ops the plan decided for a call of `anchor` (fusion::Kernel::postOps, or a custom
  // kernel's step) on its buffers; returns the value the call then writes, and in `why` why the
  // chain stops there.
  const Value* transcribePostOps(const fusion::PostOpChain& chain, const Node* anchor,
                                 std::vector<PostOp>& ops, std::string& why);

  StatusOr<StmtRef> lowerCall();
  // A custom kernel: one call per step; the values between steps in Internal buffers.
  StatusOr<StmtRef> lowerCustom();

  const fusion::Kernel& k_;
  Kernel out_;
  std::map<const Value*, std::string> names_;
  std::set<const Node*> members_;
  std::vector<Buffer> buffers_;
  std::set<std::string> usedNames_;
  std::map<const Value*, std::function<ExprRef(const Index&)>> overrides_;
  std::map<std::string, std::pair<ExprRef, Index>> memo_;
  int vars_ = 0;
  bool storesAlongside_ = false;
  fusion::SortRowLimits sortRows_;
  std::vector<Symbol> symbols_;
};

}  // namespace kiln::kernel::lowering
