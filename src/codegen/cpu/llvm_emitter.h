// Internal to src/codegen/cpu: the emitter class behind emitKernels (llvm_emit.h), shared by
// llvm_emit.cpp (functions, statements, loops, Parallel outlining) and llvm_emit_expr.cpp (types,
// rounding, expressions). Includes LLVM headers: only those two files include it.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "codegen/cpu/llvm_emit.h"
#include "ir/types.h"
#include "kernel/copy_loop.h"
#include "kernel/kernel_ir.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "support/status.h"

namespace kiln::codegen::cpu::llvm_emit {

using kernel::BinaryOp;
using kernel::Expr;
using kernel::ExprRef;
using kernel::LoopKind;
using kernel::Stmt;
using kernel::StmtRef;
using kernel::UnaryOp;

inline bool isUnsigned(DType t) { return isInteger(t) && !isSignedInteger(t); }
inline bool isHalfLike(DType t) { return t == DType::F16 || t == DType::BF16; }

// A buffer visible at a point of the kernel: a parameter or a Local scratch allocation.
struct BufferBinding {
  std::string name;
  llvm::Value* ptr = nullptr;
  DType type = DType::F32;
  bool inRegisters = false;  // a Local array small enough to live in vector registers
};

// The function being emitted: the kernel entry or a Parallel loop body outlined from it.
struct FnState {
  llvm::Function* fn = nullptr;
  llvm::BasicBlock* entry = nullptr;  // allocas go here
  llvm::Value* buffersArg = nullptr;  // void* const* buffers
  llvm::Value* pool = nullptr;        // ThreadPool* (null in outlined bodies)
  llvm::Value* handler = nullptr;
  llvm::Value* context = nullptr;
  bool inParallel = false;             // an outlined body: Parallel loops inside run serially
  std::vector<BufferBinding> buffers;  // innermost last
  std::vector<std::pair<std::string, llvm::Value*>> vars;  // innermost last
};

// Emits one kernel: its entry function and the bodies its Parallel loops are outlined into.
class KernelEmitter {
 public:
  KernelEmitter(llvm::Module& m, const kernel::Kernel& k, const EmitOptions& options)
      : m_(m), c_(m.getContext()), b_(c_), k_(k), options_(options) {}
  Status emit(const std::string& entryName);

 private:
  // ---- functions and errors (llvm_emit.cpp) ----

  void setAttributes(llvm::Function* fn);
  void startFunction(FnState& s);
  void bindParameters(FnState& s);
  llvm::Value* fail(const std::string& message, llvm::Type* type);
  llvm::AllocaInst* entryAlloca(llvm::Type* type, const std::string& name);

  // ---- types (llvm_emit_expr.cpp) ----

  llvm::Type* regType(DType t);
  llvm::Type* memType(DType t);
  llvm::Type* mathType(DType t);

  // ---- rounding helpers (llvm_emit_expr.cpp) ----

  llvm::Value* bf16Bits(llvm::Value* f);
  llvm::Value* bf16ToFloat(llvm::Value* bits16);
  llvm::Value* roundToBf16(llvm::Value* f);
  llvm::Value* roundToHalf(llvm::Value* f);
  llvm::Value* roundToOddFloat(llvm::Value* d);
  llvm::Value* fabs(llvm::Value* v);

  // ---- expressions (llvm_emit_expr.cpp) ----

  llvm::Value* emitExpr(const ExprRef& e);
  llvm::Value* emitExprNode(const ExprRef& e);
  llvm::Value* emitConst(const Expr& e);
  llvm::Value* lookupVar(const std::string& name);
  const BufferBinding* lookupBuffer(const std::string& name);
  llvm::Value* address(const std::string& name, DType type, const ExprRef& index,
                       const BufferBinding** out);
  llvm::Value* emitLoad(const Expr& e);
  llvm::Value* emitCast(llvm::Value* v, DType from, DType to);
  llvm::Value* callMath(const std::string& name, llvm::Type* type, std::vector<llvm::Value*> args);
  template <typename F>
  llvm::Value* inMath(llvm::Value* v, DType t, F f);
  llvm::Value* emitUnary(const Expr& e);
  llvm::Value* intUnary(UnaryOp op, llvm::Value* v, DType t);
  bool approximate(DType t) const;
  llvm::Value* floatUnary(UnaryOp op, llvm::Value* v, DType t);
  llvm::Value* emitBinary(const Expr& e);
  llvm::Value* unsupportedBinary(BinaryOp op, DType t);
  llvm::Value* floatBinary(BinaryOp op, llvm::Value* a, llvm::Value* v, DType t);
  llvm::Value* maxMin(llvm::Value* a, llvm::Value* v, bool max);
  llvm::Value* boolBinary(BinaryOp op, llvm::Value* a, llvm::Value* v);
  llvm::Value* intBinary(BinaryOp op, llvm::Value* a, llvm::Value* v, DType t);
  llvm::Function* intPowFunction(llvm::Type* ty, bool u);

  // ---- statements (llvm_emit.cpp) ----

  void emitStmt(const Stmt& s);
  void emitStore(const Stmt& s);
  void emitAlloc(const Stmt& s);
  void emitIf(const Stmt& s);
  void emitCall(const Stmt& s);
  static bool containsVectorizedLoop(const Stmt& s);
  static bool contiguousStores(const Stmt& s);
  bool registerArrayLoop(const Stmt& s);
  static bool independentIterations(const Stmt& body);
  llvm::MDNode* loopMetadata(LoopKind kind, const Stmt& s, llvm::MDNode* accessGroup);
  void tagAccess(llvm::Instruction* access);
  void emitLoop(const Stmt& s, LoopKind kind, llvm::Value* begin, llvm::Value* end,
                const Stmt* inner = nullptr);
  void emitFor(const Stmt& s);
  void emitCopy(const Stmt& s, const kernel::CopyLoop& c, llvm::Value* extent);
  FnState outlinedState(llvm::Function* body,
                        const std::vector<std::pair<std::string, llvm::Value*>>& outerVars);
  void emitParallel(const Stmt& s, llvm::Value* extent);
  llvm::Module& m_;
  llvm::LLVMContext& c_;
  llvm::IRBuilder<> b_;
  const kernel::Kernel& k_;
  const EmitOptions& options_;
  std::string entryName_;
  FnState fs_;
  std::vector<std::pair<std::string, std::string>> hiddenAllocs_;  // name, why not visible
  int32_t nextCallIndex_ = 0;
  int nextParallel_ = 0;
  std::unordered_map<const kernel::Expr*, llvm::Value*> emitted_;  // emitExpr's memo
  // The access groups of the vectorized loops being emitted whose iterations are independent
  // (innermost last): their loads and stores carry them, and each loop's metadata names its
  // group as parallel.
  std::vector<llvm::MDNode*> accessGroups_;
  Status error_;
};

}  // namespace kiln::codegen::cpu::llvm_emit
