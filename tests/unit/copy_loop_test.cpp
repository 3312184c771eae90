// Copy loops (kernel/copy_loop.h) and kernels that are one library call: what matchCopyLoop
// recognises and refuses, and that the CPU backend's block moves and direct calls compute what
// the loops say (element by element against the loop's own definition).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "codegen/cpu/cpu_codegen.h"
#include "kernel/copy_loop.h"
#include "kernel/kernel_ir.h"

namespace kiln {
namespace {

using codegen::cpu::CompiledKernel;
using codegen::cpu::CpuCompiler;
using codegen::cpu::ThreadPool;
using namespace kernel;

Buffer buf(const std::string& name, std::vector<int64_t> shape, BufferRole role) {
  Buffer b;
  b.name = name;
  b.type = DType::F32;
  b.shape = std::move(shape);
  b.role = role;
  return b;
}

CpuCompiler& compiler() {
  static std::unique_ptr<CpuCompiler> c = [] {
    auto r = CpuCompiler::create();
    KILN_CHECK(r.isOk(), r.status().str());
    return std::move(r).value();
  }();
  return *c;
}

// y[r * 2n + (j + n)] = x[r * n + j]: row r of x into the right half of row r of y.
StmtRef rowCopy(int64_t n, LoopKind kind, ExprRef value = nullptr) {
  ExprRef r = var("r"), j = var("j");
  ExprRef src = binary(BinaryOp::Add, binary(BinaryOp::Mul, r, intConst(n)), j);
  ExprRef dst = binary(BinaryOp::Add, binary(BinaryOp::Mul, r, intConst(2 * n)),
                       binary(BinaryOp::Add, j, intConst(n)));
  return forLoop("j", intConst(n), kind,
                 store("y", dst, value ? value : load("x", DType::F32, src)));
}

TEST(CopyLoop, MatchesUnitStrideCopiesAndConditionalFills) {
  StmtRef plain = rowCopy(8, LoopKind::Vectorized);
  auto c = matchCopyLoop(*plain);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->dst, "y");
  EXPECT_EQ(c->src, "x");
  EXPECT_EQ(printExpr(c->dstStart), "r * 16 + 8");
  EXPECT_EQ(printExpr(c->srcStart), "r * 8");
  EXPECT_FALSE(c->cond);

  // A pad's border: the condition depends on the outer row only.
  ExprRef inside = binary(BinaryOp::Ge, var("r"), intConst(1));
  ExprRef x = load("x", DType::F32,
                   binary(BinaryOp::Add, binary(BinaryOp::Mul, var("r"), intConst(8)), var("j")));
  auto padded =
      matchCopyLoop(*rowCopy(8, LoopKind::Serial, select(inside, x, floatConst(0, DType::F32))));
  ASSERT_TRUE(padded);
  EXPECT_EQ(printExpr(padded->cond), "r >= 1");
  EXPECT_FALSE(padded->fillWhen);
  auto swapped =
      matchCopyLoop(*rowCopy(8, LoopKind::Serial, select(inside, floatConst(-1, DType::F32), x)));
  ASSERT_TRUE(swapped);
  EXPECT_TRUE(swapped->fillWhen);

  // Refused: a condition that changes along the row, a computed value, a stride other than 1,
  // a parallel loop, and a copy within one buffer (the loop may read what it wrote).
  ExprRef perElement = binary(BinaryOp::Ge, var("j"), intConst(1));
  EXPECT_FALSE(matchCopyLoop(
      *rowCopy(8, LoopKind::Serial, select(perElement, x, floatConst(0, DType::F32)))));
  EXPECT_FALSE(matchCopyLoop(*rowCopy(8, LoopKind::Serial, unary(UnaryOp::Neg, x))));
  ExprRef strided = load("x", DType::F32, binary(BinaryOp::Mul, var("j"), intConst(2)));
  EXPECT_FALSE(matchCopyLoop(*rowCopy(8, LoopKind::Serial, strided)));
  EXPECT_FALSE(matchCopyLoop(*rowCopy(8, LoopKind::Parallel)));
  StmtRef self = forLoop(
      "j", intConst(8), LoopKind::Serial,
      store("x", binary(BinaryOp::Add, var("j"), intConst(1)), load("x", DType::F32, var("j"))));
  EXPECT_FALSE(matchCopyLoop(*self));
}

// for r in [0, rows) { row r of y: left half = fill or x's row r by `cond`, right half = x's
// row r } compiled and run; every element is checked against that definition.
void expectPadCopy(double fill, bool fillWhen) {
  const int64_t rows = 5, n = 300;  // 1200-byte rows
  ExprRef r = var("r"), j = var("j");
  ExprRef src = binary(BinaryOp::Add, binary(BinaryOp::Mul, r, intConst(n)), j);
  ExprRef x = load("x", DType::F32, src);
  ExprRef odd = binary(BinaryOp::Eq, binary(BinaryOp::Rem, r, intConst(2)), intConst(1));
  ExprRef left = fillWhen ? select(odd, floatConst(fill, DType::F32), x)
                          : select(odd, x, floatConst(fill, DType::F32));
  StmtRef leftHalf = forLoop(
      "j", intConst(n), LoopKind::Vectorized,
      store("y", binary(BinaryOp::Add, binary(BinaryOp::Mul, r, intConst(2 * n)), j), left));
  StmtRef body = forLoop("r", intConst(rows), LoopKind::Serial,
                         block({leftHalf, rowCopy(n, LoopKind::Vectorized)}));
  Kernel k;
  k.name = "pad_copy";
  k.buffers = {buf("x", {rows, n}, BufferRole::Input), buf("y", {rows, 2 * n}, BufferRole::Output)};
  k.body = body;
  ASSERT_TRUE(matchCopyLoop(*leftHalf));
  auto ck = compiler().compile(k);
  ASSERT_TRUE(ck.isOk()) << ck.status().str();
  std::string ir = compiler().lastLlvmIr();
  EXPECT_NE(ir.find("llvm.memmove"), std::string::npos) << ir;
  // A zero fill is a memset; another constant is a loop storing it.
  EXPECT_EQ(ir.find("llvm.memset") != std::string::npos, fill == 0.0) << ir;
  std::vector<float> xs(rows * n), ys(rows * 2 * n, std::nanf(""));
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>(i) * 0.25f + 1.0f;
  void* ptrs[] = {xs.data(), ys.data()};
  ThreadPool pool(1);
  (*ck)->run(ptrs, pool, nullptr, nullptr);
  for (int64_t row = 0; row < rows; ++row)
    for (int64_t col = 0; col < 2 * n; ++col) {
      float from = xs[static_cast<size_t>(row * n + col % n)];
      bool filled = col < n && (row % 2 == 1) == fillWhen;
      float want = filled ? static_cast<float>(fill) : from;
      ASSERT_EQ(ys[static_cast<size_t>(row * 2 * n + col)], want) << row << "," << col;
    }
}

TEST(CopyLoop, RowsAreMovedAndFilledAsTheLoopsSay) {
  expectPadCopy(0.0, false);
  expectPadCopy(0.0, true);
  expectPadCopy(-std::numeric_limits<double>::infinity(), false);  // a max pool's padding
  expectPadCopy(2.5, true);
}

void recordArgs(void* context, int32_t index, void** buffers) {
  auto* seen = static_cast<std::vector<void*>*>(context);
  seen->push_back(reinterpret_cast<void*>(static_cast<intptr_t>(index)));
  seen->insert(seen->end(), buffers, buffers + 3);
}

TEST(CopyLoop, OneCallKernelsCallTheHandlerWithoutGeneratedCode) {
  Kernel k;
  k.name = "k0_contraction";
  k.buffers = {buf("b", {4}, BufferRole::Input), buf("a", {4}, BufferRole::Input),
               buf("y", {4}, BufferRole::Output)};
  k.body = block({call(OpCode::DotGeneral, {}, {"a", "b", "y"})});
  std::unique_ptr<CompiledKernel> direct = codegen::cpu::callOnlyKernel(k);
  ASSERT_TRUE(direct);
  EXPECT_EQ(direct->symbol(), "");
  float a[4], b[4], y[4];
  void* ptrs[] = {b, a, y};  // the kernel's buffer order
  std::vector<void*> seen;
  ThreadPool pool(1);
  direct->run(ptrs, pool, &recordArgs, &seen);
  // Call 0 with the call's arguments in its order, as the generated code passes them.
  EXPECT_EQ(seen, (std::vector<void*>{nullptr, a, b, y}));

  // Anything more than the call (a loop epilogue) is generated code.
  k.body = block({call(OpCode::DotGeneral, {}, {"a", "b", "y"}),
                  store("y", intConst(0), floatConst(0, DType::F32))});
  EXPECT_FALSE(codegen::cpu::callOnlyKernel(k));
}

}  // namespace
}  // namespace kiln
