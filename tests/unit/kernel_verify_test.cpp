// kernel::verifyKernel: each rule it checks, on a kernel broken in that one way, and every
// kernel lowered from the op table's test module (Inputs/all-ops.kir), which must verify, also
// after each schedule pass.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "all_ops_module.h"
#include "fusion/fusion.h"
#include "ir/text/text.h"
#include "kernel/lower.h"
#include "kernel/schedule.h"
#include "kernel/verify.h"
#include "passes/pass_manager.h"
#include "passes/specialize_shapes.h"

namespace kiln::kernel {
namespace {

Buffer buffer(const std::string& name, DType t, BufferRole role) {
  Buffer b;
  b.name = name;
  b.type = t;
  b.shape = {8};
  b.role = role;
  return b;
}

// for i0 in [0, 8) { %y[i0] = exp(%x[i0]) } over in %x: f32[8], out %y: f32[8], with `body`
// replacing the store when given.
Kernel kernelWith(StmtRef body = nullptr) {
  Kernel k;
  k.name = "k0_loop";
  k.buffers = {buffer("x", DType::F32, BufferRole::Input),
               buffer("y", DType::F32, BufferRole::Output)};
  StmtRef s =
      body ? body : store("y", var("i0"), unary(UnaryOp::Exp, load("x", DType::F32, var("i0"))));
  k.body = forLoop("i0", intConst(8), LoopKind::Serial, s);
  return k;
}

std::string errorOf(const Kernel& k) {
  Status s = verifyKernel(k);
  return s.isOk() ? "" : s.message();
}

TEST(VerifyKernel, AcceptsAWellFormedKernel) { EXPECT_EQ(errorOf(kernelWith()), ""); }

TEST(VerifyKernel, RefusesEachBrokenRule) {
  ExprRef x = load("x", DType::F32, var("i0"));
  struct Case {
    StmtRef body;
    const char* error;
  } cases[] = {
      {store("z", var("i0"), x), "store to unknown buffer %z"},
      {store("y", var("i0"), load("w", DType::F32, var("i0"))), "load of unknown buffer %w"},
      {store("y", var("i1"), x), "variable i1 is not the variable of an enclosing loop"},
      {store("y", var("i0"), cast(x, DType::F64)), "the stored value is f64, not f32"},
      {store("y", var("i0"), load("x", DType::F16, var("i0"))),
       "a load of %x is f16, the buffer f32"},
      {store("y", cast(var("i0"), DType::I32), x), "the index is i32, not i64"},
      {store("y", var("i0"), binary(BinaryOp::Add, x, cast(x, DType::F64))), "add of f32 and f64"},
      {store("y", var("i0"), select(x, x, x)), "a select's condition is not bool"},
      {ifThen(x, store("y", var("i0"), x)), "the condition is f32, not bool"},
      {forLoop("i0", intConst(2), LoopKind::Serial, store("y", var("i0"), x)),
       "loop variable 'i0' is empty or already in scope"},
      {alloc("x", DType::F32, 4, MemoryScope::Local, store("y", var("i0"), x)),
       "%x is declared twice"},
      {alloc("t", DType::F32, 0, MemoryScope::Local, store("y", var("i0"), x)),
       "a scratch buffer of size 0"},
      {call(OpCode::DotGeneral, {}, {"x", "q"}), "argument %q is no buffer"},
      {reduceInto("z", intConst(0), ReduceKind::Sum, {"r0"}, {intConst(8)}, x),
       "reduction into unknown buffer %z"},
      {reduceInto("y", intConst(0), ReduceKind::Sum, {"i0"}, {intConst(8)}, x),
       "reduction variable 'i0' is empty or already in scope"},
      {reduceInto("y", var("i0"), ReduceKind::Sum, {}, {}, x),
       "a reduction needs one extent per loop variable, and a loop"},
      {reduceInto("y", var("i0"), ReduceKind::Max, {"r0"}, {intConst(8)},
                  cast(load("x", DType::F32, var("r0")), DType::F64)),
       "the reduced value is f64, not f32"},
  };
  for (const Case& c : cases) {
    std::string error = errorOf(kernelWith(c.body));
    EXPECT_NE(error.find(c.error), std::string::npos)
        << "expected '" << c.error << "', got '" << error << "'";
    EXPECT_EQ(error.rfind("kernel k0_loop: ", 0), 0u) << error;
  }
  // A loop variable is out of scope after its loop.
  Kernel after =
      kernelWith(block({forLoop("i1", intConst(2), LoopKind::Serial, store("y", var("i1"), x)),
                        store("y", var("i1"), x)}));
  EXPECT_NE(errorOf(after).find("variable i1 is not the variable of an enclosing loop"),
            std::string::npos)
      << errorOf(after);
}

// A call is self-contained: its arguments are its op's operands and results, and the op's type
// rule gives its results' types from its operands'; a buffer in a blocked layout is read and
// written by library calls only.
TEST(VerifyKernel, CallsAndBlockedBuffersFollowTheirRules) {
  auto twoByTwo = [](const std::string& name, BufferRole role) {
    Buffer b = buffer(name, DType::F32, role);
    b.shape = {2, 2};
    return b;
  };
  AttrMap dot;
  dot["lhs_contracting"] = intsAttr({1});
  dot["rhs_contracting"] = intsAttr({0});
  Kernel k;
  k.name = "k0_contraction";
  k.buffers = {twoByTwo("a", BufferRole::Input), twoByTwo("b", BufferRole::Input),
               twoByTwo("y", BufferRole::Output)};
  k.body = call(OpCode::DotGeneral, dot, {"a", "b", "y"});
  EXPECT_EQ(errorOf(k), "");
  EXPECT_EQ(callOperands(*k.body), 2u);
  k.buffers[2].shape = {2, 3};
  EXPECT_NE(errorOf(k).find("result %y is f32[2,3], but dot_general of its operands gives "
                            "f32[2,2]"),
            std::string::npos)
      << errorOf(k);
  k.buffers[2].shape = {2, 2};
  k.body = call(OpCode::DotGeneral, dot, {"a", "y"});
  EXPECT_NE(errorOf(k).find("2 arguments are not dot_general's operands, its 1 results"),
            std::string::npos)
      << errorOf(k);
  // Blocked: the call may write it; a loop may not read it.
  k.buffers[2].layout = "nChw16c";
  k.body = call(OpCode::DotGeneral, dot, {"a", "b", "y"});
  EXPECT_EQ(errorOf(k), "");
  Kernel loop = kernelWith();
  loop.buffers[0].layout = "nChw16c";
  EXPECT_NE(errorOf(loop).find("%x holds its value in layout nChw16c: only library calls read "
                               "and write it"),
            std::string::npos)
      << errorOf(loop);
}

// A kernel with GPU loops is a sequence of launches (gpu_block over gpu_thread) and calls;
// barriers and shared scratch are inside a launch.
TEST(VerifyKernel, LaunchesFollowTheLaunchStructure) {
  const StmtRef copy = store("y", var("t"), load("x", DType::F32, var("t")));
  auto launch = [](StmtRef threadBody, int64_t threads = 8) {
    return forLoop("b", intConst(1), LoopKind::GpuBlock,
                   forLoop("t", intConst(threads), LoopKind::GpuThread, threadBody));
  };
  Kernel k = kernelWith();
  k.body = block({launch(block({barrier(), copy})),
                  launch(alloc("s", DType::F32, 8, MemoryScope::Shared, copy))});
  EXPECT_EQ(errorOf(k), "");
  struct Case {
    StmtRef body;
    std::string error;
  } cases[] = {
      {forLoop("i0", intConst(8), LoopKind::Serial, launch(copy)),
       "a gpu_block loop is not a step of the kernel (in `for b`)"},
      {forLoop("t", intConst(1), LoopKind::GpuBlock, copy),
       "a gpu_block loop's body is not a gpu_thread loop"},
      {forLoop("t", intConst(8), LoopKind::GpuThread, copy),
       "a gpu_thread loop is not a gpu_block's body"},
      {launch(copy, 2048), "a gpu_thread loop's extent is not a constant in [1, 1024]"},
      {block({launch(copy), forLoop("t", intConst(8), LoopKind::Serial, copy)}),
       "a kernel with launches has a step that is neither a launch nor a library call"},
      {block({barrier(), forLoop("t", intConst(8), LoopKind::Serial, copy)}),
       "a barrier outside a launch (in `barrier`)"},
      {alloc("s", DType::F32, 8, MemoryScope::Shared,
             forLoop("t", intConst(8), LoopKind::Serial, copy)),
       "shared scratch outside a launch"},
  };
  for (const Case& c : cases) {
    k.body = c.body;
    EXPECT_NE(errorOf(k).find(c.error), std::string::npos) << c.error << "\n" << errorOf(k);
  }
}

// A wide copy moves elements of one type between buffers in memory, each index a proven
// multiple of its element count.
TEST(VerifyKernel, CopiesAreAlignedAndOfOneType) {
  Kernel k = kernelWith(wideCopy("y", binary(BinaryOp::Mul, var("i0"), intConst(4)), "x",
                                 binary(BinaryOp::Mul, var("i0"), intConst(4)), 4));
  EXPECT_EQ(errorOf(k), "");
  struct Case {
    StmtRef body;
    std::string error;
  } cases[] = {
      {wideCopy("y", var("i0"), "x", intConst(0), 4),
       "index i0 is not known to be a multiple of 4 (the copy would not be aligned)"},
      {wideCopy("y", intConst(0), "x", intConst(2), 4), "index 2 is not known to be a multiple"},
      {wideCopy("y", intConst(0), "q", intConst(0), 4), "a copy between unknown buffers %y and %q"},
      {wideCopy("y", intConst(0), "x", intConst(0), 0), "a copy of 0 elements (1 to 64)"},
      {alloc("h", DType::F16, 4, MemoryScope::Local,
             wideCopy("h", intConst(0), "x", intConst(0), 4)),
       "a copy from f32 to f16"},
  };
  for (const Case& c : cases) {
    k = kernelWith(c.body);
    EXPECT_NE(errorOf(k).find(c.error), std::string::npos) << c.error << "\n" << errorOf(k);
  }
  // What it stands for, element by element.
  const StmtRef stores = copyAsStores(*wideCopy("y", intConst(4), "x", intConst(8), 2), DType::F32);
  EXPECT_EQ(printKernel(kernelWith(stores)).find("%y[4] = %x[8]") != std::string::npos &&
                printKernel(kernelWith(stores)).find("%y[5] = %x[9]") != std::string::npos,
            true)
      << printKernel(kernelWith(stores));
}

TEST(VerifyKernel, EveryKernelOfTheOpTableModuleVerifies) {
  // Its symbols at small sizes, as a compile specialises them.
  std::unique_ptr<Module> module = allOpsModule({{"N", 3}, {"B", 2}, {"S", 5}});
  ASSERT_NE(module, nullptr);
  size_t count = 0;
  for (const auto& f : module->functions()) {
    if (firstStringNode(*f)) continue;  // text has no kernel IR (only the interpreter runs it)
    fusion::FusionPlan plan = fusion::planFusion(*f);
    auto kernels = lowerPlan(*f, plan);
    ASSERT_TRUE(kernels.isOk()) << kernels.status().str();
    count += kernels->size();
    for (const Kernel& lowered : *kernels) {
      EXPECT_TRUE(verifyKernel(lowered).isOk()) << verifyKernel(lowered).str();
      Kernel k = cacheRows(lowered, 4);
      k = parallelizeOuter(k, 8);
      k = vectorizeInner(k);
      k = splitReductions(k, 2, true);
      k = lowerReductions(k);
      EXPECT_TRUE(verifyKernel(k).isOk()) << verifyKernel(k).str() << "\n" << printKernel(k);
      EXPECT_EQ(printKernel(k).find("reduce<"), std::string::npos) << printKernel(k);
    }
  }
  EXPECT_GE(count, 20u);  // every op family lowers to some kernel (@constants to none)
}

}  // namespace
}  // namespace kiln::kernel
