// GEMM shapes of dot_general calls. See gemm.h.
#include "codegen/cuda/gemm.h"

#include <algorithm>
#include <cmath>

#include "codegen/cuda/library_call.h"
#include "passes/rewrite_util.h"

namespace kiln::codegen::cuda {
namespace {

std::vector<int64_t> ints(const AttrMap& a, const char* name) {
  auto it = a.find(name);
  if (it == a.end() || attrKind(it->second) != AttrKind::Ints) return {};
  return std::get<4>(it->second);
}

int64_t product(const std::vector<int64_t>& shape, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= shape[i];
  return p;
}

// One operand: `batch` leading dims, then its free dims and its contracting dim `c` either
// first or last; the free dims' product (they flatten: they are adjacent), or nullopt.
std::optional<int64_t> freeExtent(const std::vector<int64_t>& shape, size_t batch, int64_t c,
                                  bool* kLast) {
  const size_t rank = shape.size();
  if (rank < batch + 1) return std::nullopt;
  if (static_cast<size_t>(c) == rank - 1) {
    *kLast = true;
    return product(shape, batch, rank - 1);
  }
  if (static_cast<size_t>(c) == batch) {
    *kLast = false;
    return product(shape, batch + 1, rank);
  }
  return std::nullopt;
}

}  // namespace

std::string GemmShape::str() const {
  return std::string(tf32 ? "tf32" : dtypeName(type)) + " " +
         (batch > 1 ? std::to_string(batch) + " x " : "") + "[" + std::to_string(m) + " x " +
         std::to_string(k) + "]" + (lhsTransposed ? "^T" : "") + " . [" + std::to_string(k) +
         " x " + std::to_string(n) + "]" + (rhsTransposed ? "^T" : "");
}

std::optional<GemmShape> gemmShape(const kernel::Kernel& k, const kernel::Stmt& call,
                                   std::string* why) {
  auto no = [&](const std::string& reason) -> std::optional<GemmShape> {
    if (why) *why = reason;
    return std::nullopt;
  };
  if (call.op != OpCode::DotGeneral || call.args.size() < 3) return no("not a dot_general");
  const kernel::Buffer* lhs = k.find(call.args[0]);
  const kernel::Buffer* rhs = k.find(call.args[1]);
  const kernel::Buffer* out = k.find(call.args[2]);
  if (!lhs || !rhs || !out) return no("its operands are not buffers of the kernel");
  const DType t = out->type;
  if (lhs->type != t || rhs->type != t || (t != DType::F32 && t != DType::F16 && t != DType::BF16))
    return no("operands of " + std::string(dtypeName(lhs->type)) + " and " +
              std::string(dtypeName(rhs->type)) + " (cuBLASLt here takes f32, f16 and bf16)");
  const std::vector<int64_t> lb = ints(call.attrs, "lhs_batch"), rb = ints(call.attrs, "rhs_batch");
  const std::vector<int64_t> lc = ints(call.attrs, "lhs_contracting");
  const std::vector<int64_t> rc = ints(call.attrs, "rhs_contracting");
  if (lc.size() != 1 || rc.size() != 1) return no("more than one contracting dim");
  for (size_t i = 0; i < lb.size(); ++i)
    if (lb[i] != static_cast<int64_t>(i) || rb[i] != static_cast<int64_t>(i))
      return no("batch dims that do not lead in the same order");
  GemmShape g;
  g.type = t;
  g.batch = product(lhs->shape, 0, lb.size());
  bool lhsKLast = true, rhsKLast = false;
  std::optional<int64_t> m = freeExtent(lhs->shape, lb.size(), lc[0], &lhsKLast);
  std::optional<int64_t> n = freeExtent(rhs->shape, rb.size(), rc[0], &rhsKLast);
  if (!m || !n) return no("free dims on both sides of the contracting dim");
  g.lhsTransposed = !lhsKLast;  // [M, K] is the natural row-major lhs, [K, N] the rhs
  g.rhsTransposed = rhsKLast;
  g.m = *m;
  g.n = *n;
  g.k = lhs->shape[static_cast<size_t>(lc[0])];
  if (g.m == 0 || g.n == 0 || g.k == 0) return no("an empty product");
  return g;
}

std::string GemmEpilogue::str() const {
  std::string s;
  auto add = [&](const char* part) { s += (s.empty() ? "" : " + ") + std::string(part); };
  if (scale >= 0) add("alpha");
  if (residual >= 0) add("residual");
  if (bias >= 0) add("bias");
  if (act == Act::Relu) add("relu");
  if (act == Act::GeluTanh) add("gelu_tanh");
  return s.empty() ? "none" : s;
}

namespace {

// Whether post-op `p` (an add) reads a vector along the result's last dim, of extent n.
bool isBias(const kernel::PostOp& p, const kernel::Buffer& out, int64_t n) {
  const int along = kernel::postOpVectorDim(p);
  return along >= 0 && static_cast<size_t>(along) + 1 == out.shape.size() && out.shape.back() == n;
}

// Why cuBLASLt's epilogue cannot take post-op `p` after those of `e`, or "" when it can (and
// then `e` takes it).
std::string takeOne(GemmEpilogue& e, const kernel::PostOp& p, int index, const kernel::Kernel& k,
                    const kernel::Buffer& out, const GemmShape& g) {
  using Kind = kernel::PostOp::Kind;
  if (e.act != GemmEpilogue::Act::None) return "a post-op after the activation";
  if (p.kind == Kind::Mul) {
    const kernel::Buffer* operand = k.find(p.operand);
    std::optional<double> v = operand ? rewrite::splatValue(operand->value) : std::nullopt;
    if (!v) return "a mul by other than a constant scalar";
    if (index > 0) return "a mul after other post-ops (alpha scales the product alone)";
    e.scale = index;
    e.alpha = *v;
    return "";
  }
  if (p.kind == Kind::Add) {
    const kernel::Buffer* operand = k.find(p.operand);
    if (!operand || operand->type != out.type) return "an add of an operand of another type";
    if (kernel::postOpReadsWhole(p, out.shape) && e.residual < 0) {
      e.residual = index;
      return "";
    }
    if (isBias(p, out, g.n) && e.bias < 0) {
      e.bias = index;
      return "";
    }
    return "an add that is neither one bias along N nor one operand of the result's shape";
  }
  if (p.kind == Kind::Clamp && p.lo == 0 && std::isinf(p.hi) && p.hi > 0) {
    e.act = GemmEpilogue::Act::Relu;
    return "";
  }
  if (p.kind == Kind::GeluTanh) {
    e.act = GemmEpilogue::Act::GeluTanh;
    return "";
  }
  if (p.kind == Kind::Gelu) return "an erf gelu (cuBLASLt's GELU is the tanh approximation)";
  return std::string("a ") + kernel::postOpName(p.kind) + " (no cuBLASLt epilogue)";
}

}  // namespace

GemmEpilogue gemmEpilogue(const kernel::Kernel& k, const kernel::Stmt& call, const GemmShape& g,
                          std::string* why) {
  GemmEpilogue e;
  size_t operands = 0;
  for (const kernel::PostOp& p : call.postOps) operands += !p.operand.empty();
  const kernel::Buffer* out = call.args.size() > operands + 2
                                  ? k.find(call.args[call.args.size() - operands - 1])
                                  : nullptr;
  if (!out) {
    if (why) *why = "the call's result is no buffer of the kernel";
    return e;
  }
  for (const kernel::PostOp& p : call.postOps) {
    std::string stop = takeOne(e, p, static_cast<int>(e.taken), k, *out, g);
    if (!stop.empty()) {
      if (why) *why = stop;
      break;
    }
    ++e.taken;
  }
  return e;
}

}  // namespace kiln::codegen::cuda
