// The kernel IR: one fused kernel as loops over buffers (in the spirit of Halide's lowered IR and
// TVM's TIR). The lowering (lower.h) builds it from a fusion::Kernel; backends print it: LLVM IR
// for the CPU, CUDA C++ for the GPU. Nothing here knows a backend.
//
// Values are scalars. Buffers are flat arrays in row-major order; a load or store takes a flat
// element index (an i64 expression), so layouts and views are index arithmetic the lowering
// writes out. Expressions are immutable and hash-consed: every builder returns the one live
// expression of its structure, so structural equality is pointer equality and a shared
// subexpression is one node (an index reused by many loads is one DAG node, not a copy per use).
// Passes over expressions memoise by pointer, which keeps them linear in the size of the DAG.
// Statements form a tree.
//
//   kernel k0_loop(in %x: f32[4,8], out %y: f32[4,8]) {
//     parallel for i0 in [0, 4) {
//       vectorized for i1 in [0, 8) {
//         %y[i0 * 8 + i1] = exp(%x[i0 * 8 + i1])
//       }
//     }
//   }
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ir/ir.h"
#include "ir/types.h"

namespace kiln::kernel {

enum class UnaryOp : uint8_t {
  Neg,
  Abs,
  Sign,
  Floor,
  Ceil,
  RoundNearestEven,
  Exp,
  Expm1,
  Log,
  Log1p,
  Sqrt,
  Rsqrt,
  Sin,
  Cos,
  Tan,
  Asin,
  Acos,
  Atan,
  Sinh,
  Cosh,
  Asinh,
  Acosh,
  Atanh,
  Tanh,
  Erf,
  Sigmoid,
  Not,  // logical not for bool, bitwise not for integers
  IsFinite,
  IsInf,
  IsNan,  // float -> bool
  // The sum, max or min of the operand over the 32 lanes of a GPU warp, in every lane: a
  // schedule's row per warp (gpu_schedule.h). Every lane of the warp must evaluate it. Built by
  // warpCombine, `i` is the group of consecutive lanes combined (0: the whole warp).
  WarpSum,
  WarpMax,
  WarpMin,
};

enum class BinaryOp : uint8_t {
  Add,
  Sub,
  Mul,
  Div,
  Rem,
  Pow,
  Max,
  Min,
  Atan2,
  And,
  Or,
  Xor,  // logical for bool, bitwise for integers
  ShiftLeft,
  ShiftRightArithmetic,
  ShiftRightLogical,
  Lt,
  Le,
  Gt,
  Ge,
  Eq,
  Ne,  // -> bool; float comparisons are ordered except Ne
};

const char* unaryOpName(UnaryOp op);    // "exp"
const char* binaryOpName(BinaryOp op);  // "add"

struct Expr;
using ExprRef = std::shared_ptr<const Expr>;

// Built only through the builders below (which intern it); never changed after.
struct Expr {
  enum class Kind : uint8_t {
    Const,   // a number of `type` (ints and bool in `i`, floats in `f`)
    Var,     // a loop variable (i64) by name
    Load,    // buffer[args[0]]: `name` is the buffer
    Unary,   // args[0]
    Binary,  // args[0], args[1]
    Select,  // args[0] (bool) ? args[1] : args[2]
    Cast,    // args[0] converted to `type` (float -> int truncates toward zero, saturating)
  };
  Kind kind = Kind::Const;
  DType type = DType::I64;
  int64_t i = 0;
  double f = 0;
  std::string name;
  UnaryOp unary = UnaryOp::Neg;
  BinaryOp binary = BinaryOp::Add;
  std::vector<ExprRef> args;
};

// Builders. Binary and unary builders fold constants and the identities of index arithmetic
// (i + 0, i * 1, i * 0, c1 + c2) so lowered index expressions stay readable.
ExprRef intConst(int64_t v, DType type = DType::I64);
ExprRef floatConst(double v, DType type);
ExprRef constOf(double v, DType type);  // int or float constant by type
ExprRef var(const std::string& name);
ExprRef load(const std::string& buffer, DType type, ExprRef index);
ExprRef unary(UnaryOp op, ExprRef a);
ExprRef binary(BinaryOp op, ExprRef a, ExprRef b);
ExprRef select(ExprRef cond, ExprRef a, ExprRef b);
ExprRef cast(ExprRef a, DType type);
// A warp op (WarpSum, WarpMax, WarpMin) over each group of `lanes` consecutive lanes (a power of
// two up to 32): "warp_sum(x, 16)" combines lanes 0-15 and 16-31 apart.
ExprRef warpCombine(UnaryOp op, ExprRef a, int64_t lanes);
// gelu(x) = x * (1 + erf(x / sqrt 2)) / 2, or with `tanh` its tanh approximation.
ExprRef gelu(ExprRef x, bool tanh);
// `e` with new operands, through the builders above (so the result is folded and interned).
ExprRef withArgs(const ExprRef& e, std::vector<ExprRef> args);
// Row-major flat index of the multi-index `idx` in `shape`, and the element count of `shape`.
ExprRef flatIndex(const std::vector<ExprRef>& idx, const std::vector<int64_t>& shape);
// The same over extents that may be expressions of the kernel's symbols.
ExprRef flatIndex(const std::vector<ExprRef>& idx, const std::vector<ExprRef>& extents);
int64_t elementCount(const std::vector<int64_t>& shape);
// The product of extents that may be expressions of the kernel's symbols.
ExprRef elementCount(const std::vector<ExprRef>& extents);
// The extents of a static shape, as constants.
std::vector<ExprRef> constExtents(const std::vector<int64_t>& shape);

// Serial is also what the lowering emits: the target's schedule passes (kernel/schedule.h) choose
// the other kinds.
enum class LoopKind : uint8_t { Serial, Parallel, Vectorized, Unrolled, GpuBlock, GpuThread };
const char* loopKindName(LoopKind k);  // "serial", "parallel", ...

enum class MemoryScope : uint8_t { Local, Shared };  // Local: per thread; Shared: per GPU block

// How a Reduce statement combines values: acc = combine(acc, x).
enum class ReduceKind : uint8_t {
  Sum,
  Prod,
  Max,
  Min,
  And,
  Or,
  // select(acc > x, acc, x): one vector max instruction, where `max` also orders -0 below +0
  // and propagates NaN; a softmax row's max (a NaN anywhere makes every output NaN either way).
  SelectMax,
};
const char* reduceKindName(ReduceKind k);  // "sum", ..., "select_max"
ExprRef reduceIdentity(ReduceKind k, DType type);
ExprRef reduceCombine(ReduceKind k, ExprRef acc, ExprRef x);
// Whether the result depends on the order the values are combined in (float sums and products).
bool reduceDependsOnOrder(ReduceKind k, DType type);

struct Stmt;
using StmtRef = std::shared_ptr<Stmt>;

// One step of a library call's epilogue that the library applies to the result as it writes it
// (oneDNN post-ops, cuBLASLt epilogues), in order. The lowering folds a chain of elementwise ops
// after a contraction into these when it can; what it cannot fold stays a loop nest.
struct PostOp {
  enum class Kind : uint8_t {
    Add,       // result + operand
    Mul,       // result * operand
    Clamp,     // min(max(result, lo), hi); lo = 0, hi = inf is relu
    Sigmoid,   // 1 / (1 + exp(-result))
    Tanh,      // tanh(result)
    Gelu,      // result * (1 + erf(result / sqrt 2)) / 2
    GeluTanh,  // the tanh approximation of gelu
    Swish,     // result * sigmoid(result) (SiLU)
  };
  Kind kind = Kind::Add;
  // Add, Mul: the other operand, a buffer of `operandShape` whose dim j is the result's dim
  // operandDims[j] (as in broadcast_in_dim: it is broadcast along the other dims).
  std::string operand;
  std::vector<int64_t> operandShape;
  std::vector<int64_t> operandDims;
  // Clamp bounds (infinite when absent).
  double lo = 0, hi = 0;
};
const char* postOpName(PostOp::Kind k);  // "add", "mul", "clamp", ...
// Whether post-op `p` reads an operand of `shape` (the result's) element for element: a residual.
bool postOpReadsWhole(const PostOp& p, const std::vector<int64_t>& shape);
// The one result dim along which post-op `p` reads a vector (broadcast along the others: a
// bias), or -1.
int postOpVectorDim(const PostOp& p);

struct Stmt {
  enum class Kind : uint8_t {
    Block,    // body, in order
    For,      // for var in [0, extent): body[0]
    Store,    // buffer[index] = value
    Alloc,    // a scratch buffer `buffer` of `size` elements of `type` in `scope`, live in body[0]
    If,       // if (cond) body[0] else body[1] (body[1] may be null)
    Barrier,  // all threads of a GPU block wait here
    Call,     // a library kernel: callee(args...) on whole buffers (matrix product, convolution)
    // buffer[index] = combine(buffer[index], value) for every point of the loops `vars` (extents
    // `extents`, the last innermost), starting from the value buffer[index] holds. The order is
    // the loops' unless the reduction does not depend on it; a schedule pass turns it into loops
    // (partial accumulators, a vector, warps).
    Reduce,
    // buffer[index + l] = from[fromIndex + l] for l in [0, lanes), as one access of lanes
    // elements: a schedule proves both indices multiples of `lanes` (so each side is aligned to
    // the access) and the buffers of one element type (wideAccesses, gpu_schedule.h). Printed
    // `%dst[index : lanes] = %src[fromIndex : lanes]`.
    Copy,
  };
  Kind kind = Kind::Block;
  std::vector<StmtRef> body;
  std::string callee() const { return std::string(opName(op)); }  // a Call's op, as text
  // For
  std::string var;
  ExprRef extent;
  LoopKind loop = LoopKind::Serial;
  // Store, Alloc
  std::string buffer;
  ExprRef index, value;
  DType type = DType::F32;
  int64_t size = 0;
  MemoryScope scope = MemoryScope::Local;
  // If
  ExprRef cond;
  // Call: the op it runs and its attributes (the operands' and results' types are those of
  // their buffers, and a constant operand's data is the graph constant its buffer holds: the
  // call is self-contained, no graph node); args are its operand buffers, its result buffers
  // (the op's number of results), then the operand buffers of the post-ops (one per add or mul,
  // in order). With post-ops the (single) result buffer holds the value after the last
  // post-op. `layout`: the blocked layout the target chose for the call to compute in
  // ("nChw16c"), empty for its buffers' own.
  OpCode op = OpCode::DotGeneral;
  AttrMap attrs;
  std::vector<std::string> args;
  std::string layout;
  // Where the call came from (its graph node's origin and location), for messages only: not
  // part of its text.
  std::string origin;
  Location loc;
  std::vector<PostOp> postOps;
  // When epilogue ops remain after the post-ops: why the post-op chain stops there.
  std::string note;
  // Reduce (with buffer, index, value)
  ReduceKind reduce = ReduceKind::Sum;
  std::vector<std::string> vars;
  std::vector<ExprRef> extents;
  // Copy (with buffer, index)
  std::string from;
  ExprRef fromIndex;
  int64_t lanes = 0;
};

StmtRef block(std::vector<StmtRef> body);
StmtRef forLoop(const std::string& var, ExprRef extent, LoopKind kind, StmtRef body);
StmtRef store(const std::string& buffer, ExprRef index, ExprRef value);
StmtRef alloc(const std::string& buffer, DType type, int64_t size, MemoryScope scope, StmtRef body);
StmtRef ifThen(ExprRef cond, StmtRef then, StmtRef otherwise = nullptr);
StmtRef barrier();
StmtRef reduceInto(const std::string& buffer, ExprRef index, ReduceKind kind,
                   std::vector<std::string> vars, std::vector<ExprRef> extents, ExprRef value);
StmtRef call(OpCode op, AttrMap attrs, std::vector<std::string> args,
             std::vector<PostOp> postOps = {});
StmtRef wideCopy(const std::string& buffer, ExprRef index, const std::string& from,
                 ExprRef fromIndex, int64_t lanes);
// A Copy as the element stores it stands for (for a target without wide accesses).
StmtRef copyAsStores(const Stmt& copy, DType type);
// A call's numbers of results (the op's) and operands (the arguments before its results).
size_t callResults(const Stmt& call);
size_t callOperands(const Stmt& call);

// Input and Output buffers hold graph values; a Temp buffer is scratch memory the runtime
// provides for one run of the kernel (a library call's result that an epilogue then reads). An
// Internal buffer is a graph value that one call of a custom kernel passes to the next
// (fusion/custom_fusion.h): the target's kernel keeps it in its own storage, so it has no memory
// and no address (the runtime passes null).
enum class BufferRole : uint8_t { Input, Output, Temp, Internal };
const char* bufferRoleName(BufferRole r);  // "in", "out", "temp", "internal"

// A size known when the kernel runs, not when it is compiled: a symbolic dim of the program
// (`N` in f32[N,16]) in [lo, hi]. Expressions read it as a Var of its name, which no loop binds;
// the runtime passes its value with the buffers (see Kernel).
struct Symbol {
  std::string name;
  int64_t lo = 0, hi = 0;
};

// A kernel parameter: a buffer the runtime passes in (a graph value in memory).
struct Buffer {
  std::string name;
  DType type = DType::F32;
  // Each dim's extent, the largest it can be where `dims` makes it symbolic: the buffer's
  // memory is sized by `shape`, its elements laid out row-major by `extents()`.
  std::vector<int64_t> shape;
  // Empty when every dim is static (== shape); else each dim's extent, an expression over the
  // kernel's symbols (a constant for a static dim).
  std::vector<ExprRef> dims;
  BufferRole role = BufferRole::Input;
  const Value* value = nullptr;  // the graph value it holds
  // A slice of another value's buffer (a concatenation its producers write in place,
  // fusion/concat_views.h): the buffer starts `offset` elements into `of`'s, and its element i
  // lives at (i / rowLength) * pitch + i % rowLength from there (kernel/buffer_views.h).
  struct View {
    const Value* of = nullptr;
    int64_t offset = 0, rowLength = 0, pitch = 0;
  };
  std::optional<View> view;
  // The layout the buffer's memory holds the value in: empty for the IR's (row-major), else a
  // blocked layout of the target's ("nChw16c"), which the target's schedule sets where only its
  // library calls that compute in that layout read and write the value.
  std::string layout;
  int64_t elements() const;  // of `shape`: the most the buffer holds
  std::vector<ExprRef> extents() const;
  bool isSymbolic() const { return !dims.empty(); }
};

// The runtime calls a kernel with its buffers' addresses and, after them, the address of an
// array of its symbols' values (i64, in the order of `symbols`).
struct Kernel {
  std::string name;             // "k3_reduction"
  std::string kind;             // the fusion kind: "loop", "reduction", ..., "opaque"
  std::vector<Symbol> symbols;  // the run-time sizes its extents and indices read
  std::vector<Buffer> buffers;  // inputs, then outputs, then temps, then internal buffers
  StmtRef body;
  // The schedule's decisions with their reasons ("convolution on cuDNN", ...), for `kiln
  // explain`; not part of the kernel's text.
  std::vector<std::string> notes;
  const Buffer* find(const std::string& name) const;
  const Symbol* symbol(const std::string& name) const;
};

// The value of an extent expression (sums, products and quotients by a positive constant of
// non-negative constants and symbols)
// with each symbol at valueOf(its name); nullopt for any other expression, an unknown symbol or
// an overflow.
std::optional<int64_t>
evaluateExtent(const ExprRef& e,
               const std::function<std::optional<int64_t>(const std::string&)>& valueOf);
// With the symbols' values in `sizes`.
std::optional<int64_t> evaluateExtent(const ExprRef& e,
                                      const std::map<std::string, int64_t>& sizes);
// Its largest value over `symbols` (each at its hi).
std::optional<int64_t> upperBound(const ExprRef& e, const std::vector<Symbol>& symbols);

// The buffers the expressions of `k` load from (library calls' arguments are not loads).
std::set<std::string> loadedBuffers(const Kernel& k);

// The Call statements of a kernel in pre-order (a Call inside a loop once): the numbering the
// CPU code generator gives them.
std::vector<const Stmt*> callsOf(const Kernel& k);
std::vector<Stmt*> mutableCallsOf(Kernel& k);  // the same, to change them
// Whether call `call` of `k` reads or writes a buffer of symbolic dims: a library's kernel for it
// (fixed shapes) is then made for each run's sizes.
bool isSymbolicCall(const Kernel& k, const Stmt& call);

// The readable text of a kernel (the format of the example at the top of this file).
std::string printKernel(const Kernel& k);
// Names of buffers and loop variables that `k` does not use yet: prefix0, prefix1, ...
class FreshNames {
 public:
  explicit FreshNames(const Kernel& k);
  std::string fresh(const std::string& prefix);

 private:
  void collect(const StmtRef& s);
  std::set<std::string> used_;
};

// `k` with statement `target` replaced by `with`; the statements off the path to it stay shared.
Kernel replaceStmt(const Kernel& k, const Stmt* target, StmtRef with);
// A serial loop nest over every element of a shape whose extents may be expressions of the
// kernel's symbols: `idx` is each dim's index (0 for a dim of constant extent 1, which gets no
// loop), `wrap` puts a body inside the loops.
struct ShapeNest {
  std::vector<ExprRef> extents;
  std::vector<std::string> vars;  // "" for a dim of extent 1
  std::vector<ExprRef> idx;
  StmtRef wrap(StmtRef body) const;
};
// Its variables are fresh names prefix0, prefix1, ... of `names`.
ShapeNest shapeNest(const std::vector<ExprRef>& extents, FreshNames& names,
                    const std::string& prefix);
ShapeNest shapeNest(const std::vector<int64_t>& shape, FreshNames& names,
                    const std::string& prefix);

// Kernels one after another, a blank line between them (parseKernels reads it back).
std::string printKernels(const std::vector<Kernel>& ks);
std::string printExpr(const ExprRef& e);

}  // namespace kiln::kernel
