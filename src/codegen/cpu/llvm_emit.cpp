// Kernel IR -> LLVM IR. One KernelEmitter (llvm_emitter.h) per kernel walks the statement tree with
// an IRBuilder; expressions become SSA values in their register type (bool i1, integers iN,
// f16/bf16/f32 float, f64 double); loads and stores convert to and from the memory type (bool i8,
// f16/bf16 i16). The numerics follow the reference interpreter (src/interp/eval_elementwise.cpp);
// see docs/codegen.md.
//
// This file: emitKernels, the functions and the statements (loops, Parallel loops outlined into
// functions run by kiln_cpu_parallel_for); llvm_emit_expr.cpp emits the expressions.
#include "codegen/cpu/llvm_emit.h"

#include <cmath>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "codegen/cpu/llvm_emitter.h"
#include "kernel/copy_loop.h"
#include "kernel/lanes.h"
#include "kernel/schedule.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/DerivedTypes.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Intrinsics.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Metadata.h"
#include "llvm/IR/Module.h"

namespace kiln::codegen::cpu {
namespace llvm_emit {

Status KernelEmitter::emit(const std::string& entryName) {
  llvm::Type* ptr = b_.getPtrTy();
  auto* type = llvm::FunctionType::get(b_.getVoidTy(), {ptr, ptr, ptr, ptr}, false);
  auto* fn = llvm::Function::Create(type, llvm::Function::ExternalLinkage, entryName, m_);
  entryName_ = entryName;
  FnState s;
  s.fn = fn;
  s.buffersArg = fn->getArg(0);
  s.pool = fn->getArg(1);
  s.handler = fn->getArg(2);
  s.context = fn->getArg(3);
  startFunction(s);
  bindParameters(s);
  fs_ = std::move(s);
  if (k_.body) emitStmt(*k_.body);
  b_.CreateRetVoid();
  return error_;
}

// ---- functions and errors ----

void KernelEmitter::setAttributes(llvm::Function* fn) {
  fn->addFnAttr(llvm::Attribute::NoUnwind);
  if (!options_.cpu.empty()) fn->addFnAttr("target-cpu", options_.cpu);
  if (!options_.features.empty()) fn->addFnAttr("target-features", options_.features);
  if (options_.preferVectorBits > 0)
    fn->addFnAttr("prefer-vector-width", std::to_string(options_.preferVectorBits));
}

// Creates the entry block of s.fn and puts the builder there.
void KernelEmitter::startFunction(FnState& s) {
  setAttributes(s.fn);
  s.entry = llvm::BasicBlock::Create(c_, "entry", s.fn);
  b_.SetInsertPoint(s.entry);
}

// Binds the kernel's parameters: their pointers, loaded from the buffers array.
void KernelEmitter::bindParameters(FnState& s) {
  for (size_t i = 0; i < k_.buffers.size(); ++i) {
    const kernel::Buffer& buf = k_.buffers[i];
    llvm::Value* slot = b_.CreateConstInBoundsGEP1_64(b_.getPtrTy(), s.buffersArg, i);
    llvm::Value* p = b_.CreateAlignedLoad(b_.getPtrTy(), slot, llvm::Align(8), buf.name);
    s.buffers.push_back({buf.name, p, buf.type});
  }
  if (k_.symbols.empty() || s.inParallel) return;  // an outlined body has them as outer vars
  // The symbols' values: an i64 array whose address follows the buffers'.
  llvm::Value* slot = b_.CreateConstInBoundsGEP1_64(b_.getPtrTy(), s.buffersArg, k_.buffers.size());
  llvm::Value* values = b_.CreateAlignedLoad(b_.getPtrTy(), slot, llvm::Align(8), "symbols");
  for (size_t i = 0; i < k_.symbols.size(); ++i) {
    llvm::Value* at = b_.CreateConstInBoundsGEP1_64(b_.getInt64Ty(), values, i);
    s.vars.emplace_back(
        k_.symbols[i].name,
        b_.CreateAlignedLoad(b_.getInt64Ty(), at, llvm::Align(8), k_.symbols[i].name));
  }
}

// Records the first error; emission goes on with a placeholder so the walk stays simple.
llvm::Value* KernelEmitter::fail(const std::string& message, llvm::Type* type) {
  if (error_.isOk()) error_ = Status::error("kernel " + k_.name + ": " + message);
  return llvm::PoisonValue::get(type);
}

llvm::AllocaInst* KernelEmitter::entryAlloca(llvm::Type* type, const std::string& name) {
  llvm::IRBuilder<> eb(fs_.entry, fs_.entry->getFirstInsertionPt());
  return eb.CreateAlloca(type, nullptr, name);
}

// ---- statements ----

void KernelEmitter::emitStmt(const Stmt& s) {
  if (!error_.isOk()) return;
  emitted_.clear();
  switch (s.kind) {
    case Stmt::Kind::Block:
      for (const StmtRef& child : s.body)
        if (child) emitStmt(*child);
      return;
    case Stmt::Kind::For: return emitFor(s);
    case Stmt::Kind::Store: return emitStore(s);
    case Stmt::Kind::Alloc: return emitAlloc(s);
    case Stmt::Kind::If: return emitIf(s);
    case Stmt::Kind::Barrier:
      fail("barriers synchronize GPU threads; a CPU kernel has none", b_.getInt1Ty());
      return;
    case Stmt::Kind::Call: return emitCall(s);
    case Stmt::Kind::Copy:  // element by element: LLVM's vectorizer widens what it can
      if (const BufferBinding* b = lookupBuffer(s.buffer))
        emitStmt(*kernel::copyAsStores(s, b->type));
      return;
    case Stmt::Kind::Reduce:
      fail("reduce<" + std::string(kernel::reduceKindName(s.reduce)) + "> into %" + s.buffer +
               " is not scheduled (the CPU schedule turns reductions into loops)",
           b_.getInt1Ty());
      return;
  }
}

void KernelEmitter::emitStore(const Stmt& s) {
  const BufferBinding* buf = nullptr;
  llvm::Value* p = address(s.buffer, s.value->type, s.index, &buf);
  if (!p) return;
  llvm::Value* v = emitExpr(s.value);
  if (s.value->type == DType::Bool) v = b_.CreateZExt(v, b_.getInt8Ty());
  else if (s.value->type == DType::F16)
    v = b_.CreateBitCast(b_.CreateFPTrunc(v, b_.getHalfTy()), b_.getInt16Ty());
  else if (s.value->type == DType::BF16) v = bf16Bits(v);
  tagAccess(b_.CreateAlignedStore(v, p, llvm::Align(dtypeSize(s.value->type))));
}

void KernelEmitter::tagAccess(llvm::Instruction* access) {
  if (accessGroups_.empty()) return;
  llvm::MDNode* groups =
      accessGroups_.size() == 1
          ? accessGroups_.back()
          : llvm::MDNode::get(
                c_, std::vector<llvm::Metadata*>(accessGroups_.begin(), accessGroups_.end()));
  access->setMetadata(llvm::LLVMContext::MD_access_group, groups);
}

void KernelEmitter::emitAlloc(const Stmt& s) {
  if (s.scope != kernel::MemoryScope::Local) {
    fail("shared memory ('" + s.buffer + "') exists only on GPUs", b_.getInt1Ty());
    return;
  }
  if (s.size <= 0) {
    fail("scratch buffer '" + s.buffer + "' has size " + std::to_string(s.size), b_.getInt1Ty());
    return;
  }
  // Hoisted to the entry block: one per function frame, so one per thread in outlined bodies.
  llvm::Type* arr = llvm::ArrayType::get(memType(s.type), static_cast<uint64_t>(s.size));
  llvm::AllocaInst* a = entryAlloca(arr, s.buffer);
  a->setAlignment(llvm::Align(64));
  bool inRegisters = s.size * static_cast<int64_t>(dtypeSize(s.type)) <= kernel::kRegisterRowBytes;
  fs_.buffers.push_back({s.buffer, a, s.type, inRegisters});
  if (!s.body.empty() && s.body[0]) emitStmt(*s.body[0]);
  fs_.buffers.pop_back();
}

void KernelEmitter::emitIf(const Stmt& s) {
  llvm::Value* cond = emitExpr(s.cond);
  if (!cond->getType()->isIntegerTy(1)) {
    fail("an if condition must be bool", b_.getInt1Ty());
    return;
  }
  llvm::Function* fn = fs_.fn;
  auto* thenBB = llvm::BasicBlock::Create(c_, "then", fn);
  auto* elseBB = llvm::BasicBlock::Create(c_, "else", fn);
  auto* merge = llvm::BasicBlock::Create(c_, "endif", fn);
  b_.CreateCondBr(cond, thenBB, elseBB);
  b_.SetInsertPoint(thenBB);
  if (!s.body.empty() && s.body[0]) emitStmt(*s.body[0]);
  b_.CreateBr(merge);
  b_.SetInsertPoint(elseBB);
  if (s.body.size() > 1 && s.body[1]) emitStmt(*s.body[1]);
  b_.CreateBr(merge);
  b_.SetInsertPoint(merge);
}

// handler(context, callIndex, args): args is an array of the argument buffers' pointers.
void KernelEmitter::emitCall(const Stmt& s) {
  const int32_t index = nextCallIndex_++;
  llvm::Type* ptr = b_.getPtrTy();
  size_t n = std::max<size_t>(1, s.args.size());
  llvm::AllocaInst* arr = entryAlloca(llvm::ArrayType::get(ptr, n), "call" + std::to_string(index));
  for (size_t j = 0; j < s.args.size(); ++j) {
    const BufferBinding* buf = lookupBuffer(s.args[j]);
    if (!buf) return;
    b_.CreateAlignedStore(buf->ptr, b_.CreateConstInBoundsGEP1_64(ptr, arr, j), llvm::Align(8));
  }
  auto* type = llvm::FunctionType::get(b_.getVoidTy(), {ptr, b_.getInt32Ty(), ptr}, false);
  b_.CreateCall(type, fs_.handler, {fs_.context, b_.getInt32(index), arr});
}

// Whether the loop `s` only stores (blocks of stores), each to consecutive elements for
// consecutive iterations.
bool KernelEmitter::contiguousStores(const Stmt& s) {
  std::vector<const Stmt*> stores;
  if (s.body.empty() || !kernel::storesOnly(s.body[0], stores)) return false;
  const ExprRef v = kernel::var(s.var);
  for (const Stmt* st : stores)
    if (kernel::coefficientOf(st->index, v) != std::optional<int64_t>(1)) return false;
  return !stores.empty();
}

// Whether `s` is a loop over a Local array that fits in registers (an accumulator row: its
// initial values, its updates, its write-out) whose other loads are contiguous along it and
// which computes no math function: unrolled before vectorization, a strided load or a libm call
// keeps the loop scalar (a max over a strided axis 2.8x slower, a cached softmax row 1.3x).
bool KernelEmitter::registerArrayLoop(const Stmt& s) {
  auto inRegisters = [&](const std::string& name) {
    const BufferBinding* b = lookupBuffer(name);
    return b && b->inRegisters;
  };
  const ExprRef v = kernel::var(s.var);
  bool touches = false;
  std::vector<const Expr*> exprs;
  std::vector<const Stmt*> work = {&s};
  while (!work.empty()) {
    const Stmt* t = work.back();
    work.pop_back();
    if (t->kind == Stmt::Kind::Store) {
      touches |= inRegisters(t->buffer);
      exprs.push_back(t->value.get());
    }
    for (const StmtRef& b : t->body)
      if (b) work.push_back(b.get());
  }
  while (!exprs.empty()) {
    const Expr* e = exprs.back();
    exprs.pop_back();
    if (e->kind == Expr::Kind::Unary && e->unary != UnaryOp::Neg && e->unary != UnaryOp::Abs)
      return false;
    if (e->kind == Expr::Kind::Load) {
      if (inRegisters(e->name)) touches = true;
      else if (kernel::coefficientOf(e->args[0], v) != std::optional<int64_t>(1)) return false;
    }
    for (const ExprRef& a : e->args) exprs.push_back(a.get());
  }
  return touches;
}

bool KernelEmitter::containsVectorizedLoop(const Stmt& s) {
  for (const StmtRef& b : s.body) {
    if (!b) continue;
    if (b->kind == Stmt::Kind::For && b->loop == LoopKind::Vectorized) return true;
    if (containsVectorizedLoop(*b)) return true;
  }
  return false;
}

// Whether the iterations of a loop with this body touch no element another iteration writes:
// the body only stores, and every load of a buffer the body stores to reads it at the index
// stored (the one index of all its stores). The buffer plan writes a value over another only
// when its kernel reads that input at the index it stores, so buffers of different names are
// different memory at different indices here. LLVM then vectorizes without runtime overlap checks,
// whose scalar fallback a value written in place always took (efficientnet_b0's SiLU loops, 15x).
bool KernelEmitter::independentIterations(const Stmt& body) {
  std::map<std::string, const kernel::Expr*> stored;
  std::vector<const Stmt*> stores, work = {&body};
  while (!work.empty()) {
    const Stmt* s = work.back();
    work.pop_back();
    if (s->kind == Stmt::Kind::Store) {
      auto [it, added] = stored.emplace(s->buffer, s->index.get());
      if (!added && it->second != s->index.get()) return false;
      stores.push_back(s);
      continue;
    }
    if (s->kind != Stmt::Kind::Block) return false;
    for (const StmtRef& b : s->body)
      if (b) work.push_back(b.get());
  }
  std::set<const kernel::Expr*> seen;
  std::vector<const kernel::Expr*> exprs;
  for (const Stmt* s : stores) exprs.insert(exprs.end(), {s->index.get(), s->value.get()});
  while (!exprs.empty()) {
    const kernel::Expr* e = exprs.back();
    exprs.pop_back();
    if (!e || !seen.insert(e).second) continue;
    if (e->kind == kernel::Expr::Kind::Load) {
      auto it = stored.find(e->name);
      if (it != stored.end() && it->second != e->args[0].get()) return false;
    }
    for (const ExprRef& a : e->args) exprs.push_back(a.get());
  }
  return true;
}

// Loop metadata: {self, hints...}, attached to the latch's branch.
llvm::MDNode* KernelEmitter::loopMetadata(LoopKind kind, const Stmt& s, llvm::MDNode* accessGroup) {
  std::vector<llvm::Metadata*> ops = {nullptr};
  auto hint = [&](const char* name, llvm::Metadata* value = nullptr) {
    std::vector<llvm::Metadata*> h = {llvm::MDString::get(c_, name)};
    if (value) h.push_back(value);
    ops.push_back(llvm::MDNode::get(c_, h));
  };
  ops.push_back(llvm::MDNode::get(c_, {llvm::MDString::get(c_, "llvm.loop.mustprogress")}));
  // A vectorized loop of at least 8 iterations (an AVX2 vector of f32) whose stores are all
  // contiguous along it is not unrolled first: LLVM fully unrolls short constant loops before its
  // vectorizer runs, which then vectorizes the loop around them with gathers and scatters (a
  // hardswish over 16 channels in NHWC ran at 6 GB/s instead of 57). Shorter or strided ones (3
  // colour channels, a transpose) still unroll: the loop around them may be the one to vectorize.
  // But one over a Local array that fits in registers (registerArrayLoop: a pooling's
  // accumulator row) is left to the unroller after vectorization, after which SROA keeps the
  // array in registers (a 3x3 max pool over 64 channels: its accumulators went through the stack
  // at every tap, 1.4x slower).
  if (kind == LoopKind::Vectorized && options_.vectorize) {
    hint("llvm.loop.vectorize.enable", llvm::ConstantAsMetadata::get(b_.getTrue()));
    if (s.extent->kind == Expr::Kind::Const && s.extent->i >= 8 && contiguousStores(s) &&
        !registerArrayLoop(s))
      hint("llvm.loop.unroll.disable");
  }
  if (accessGroup) hint("llvm.loop.parallel_accesses", accessGroup);
  if (kind == LoopKind::Unrolled) {
    bool small = s.extent->kind == Expr::Kind::Const && s.extent->i <= 64;
    hint(small ? "llvm.loop.unroll.full" : "llvm.loop.unroll.enable");
  }
  // A serial loop around a vectorized one (the reduced loops of a pooling, the window of a
  // global pool) is not unrolled: each copy would carry a whole vectorized loop, and fully
  // unrolling a 7x7 window around a 512-wide loop took LLVM 450 ms for one kernel.
  if (kind == LoopKind::Serial && containsVectorizedLoop(s)) hint("llvm.loop.unroll.disable");
  llvm::MDNode* md = llvm::MDNode::getDistinct(c_, ops);
  md->replaceOperandWith(0, md);
  return md;
}

// for var in [begin, end) { body } as header / body / latch blocks; `inner`, when given,
// replaces s's body.
void KernelEmitter::emitLoop(const Stmt& s, LoopKind kind, llvm::Value* begin, llvm::Value* end,
                             const Stmt* inner) {
  llvm::Function* fn = fs_.fn;
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  auto* header = llvm::BasicBlock::Create(c_, s.var + ".header", fn);
  auto* body = llvm::BasicBlock::Create(c_, s.var + ".body", fn);
  auto* exit = llvm::BasicBlock::Create(c_, s.var + ".exit", fn);
  b_.CreateBr(header);
  b_.SetInsertPoint(header);
  llvm::PHINode* i = b_.CreatePHI(b_.getInt64Ty(), 2, s.var);
  i->addIncoming(begin, pre);
  b_.CreateCondBr(b_.CreateICmpSLT(i, end), body, exit);
  b_.SetInsertPoint(body);
  fs_.vars.emplace_back(s.var, i);
  const Stmt* loopBody = inner ? inner : (!s.body.empty() ? s.body[0].get() : nullptr);
  llvm::MDNode* group = nullptr;
  if (kind == LoopKind::Vectorized && options_.vectorize && loopBody &&
      independentIterations(*loopBody)) {
    group = llvm::MDNode::getDistinct(c_, {});
    accessGroups_.push_back(group);
  }
  if (loopBody) emitStmt(*loopBody);
  if (group) accessGroups_.pop_back();
  fs_.vars.pop_back();
  llvm::Value* next = b_.CreateAdd(i, b_.getInt64(1), s.var + ".next", true, true);
  llvm::BranchInst* back = b_.CreateBr(header);
  back->setMetadata(llvm::LLVMContext::MD_loop, loopMetadata(kind, s, group));
  i->addIncoming(next, b_.GetInsertBlock());
  b_.SetInsertPoint(exit);
}

void KernelEmitter::emitFor(const Stmt& s) {
  if (s.loop == LoopKind::GpuBlock || s.loop == LoopKind::GpuThread) {
    fail(std::string(kernel::loopKindName(s.loop)) + " loop '" + s.var +
             "' is a GPU loop; this is not a CPU kernel",
         b_.getInt1Ty());
    return;
  }
  llvm::Value* extent = emitExpr(s.extent);
  if (!extent->getType()->isIntegerTy(64)) {
    fail("the extent of loop '" + s.var + "' is not i64", b_.getInt1Ty());
    return;
  }
  if (s.loop == LoopKind::Parallel && !fs_.inParallel) return emitParallel(s, extent);
  if (std::optional<kernel::CopyLoop> copy = kernel::matchCopyLoop(s))
    return emitCopy(s, *copy, extent);
  emitLoop(s, s.loop == LoopKind::Parallel ? LoopKind::Serial : s.loop, b_.getInt64(0), extent);
}

// A copy loop (kernel/copy_loop.h) as one memmove of the row, and where its condition says
// so, a memset (a zero fill) or the loop storing the fill constant. memmove, not memcpy: a
// value written in place reads the very elements it stores.
void KernelEmitter::emitCopy(const Stmt& s, const kernel::CopyLoop& c, llvm::Value* extent) {
  const BufferBinding* buf = nullptr;
  llvm::Value* dst = address(c.dst, c.type, c.dstStart, &buf);
  llvm::Value* src = address(c.src, c.type, c.srcStart, &buf);
  if (!dst || !src) return;
  uint64_t size = dtypeSize(c.type);
  llvm::Value* rowLength = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, extent, b_.getInt64(0));
  llvm::Value* bytes = b_.CreateMul(rowLength, b_.getInt64(size), "bytes", true, true);
  llvm::Align align(size);
  auto copyRow = [&] { b_.CreateMemMove(dst, align, src, align, bytes); };
  if (!c.cond) return copyRow();
  const kernel::Expr& f = *c.fill;
  bool zero = isFloat(f.type) ? f.f == 0.0 && !std::signbit(f.f) : f.i == 0;
  auto fillRow = [&] {
    if (zero) {
      b_.CreateMemSet(dst, b_.getInt8(0), bytes, align);
      return;
    }
    StmtRef fillStore = kernel::store(c.dst, c.store->index, c.fill);
    emitLoop(s, s.loop, b_.getInt64(0), extent, fillStore.get());
  };
  llvm::Value* cond = emitExpr(c.cond);
  llvm::Function* fn = fs_.fn;
  auto* fillBB = llvm::BasicBlock::Create(c_, s.var + ".fill", fn);
  auto* copyBB = llvm::BasicBlock::Create(c_, s.var + ".copy", fn);
  auto* merge = llvm::BasicBlock::Create(c_, s.var + ".done", fn);
  b_.CreateCondBr(cond, c.fillWhen ? fillBB : copyBB, c.fillWhen ? copyBB : fillBB);
  b_.SetInsertPoint(copyBB);
  copyRow();
  b_.CreateBr(merge);
  b_.SetInsertPoint(fillBB);
  fillRow();
  b_.CreateBr(merge);
  b_.SetInsertPoint(merge);
}

// The state of an outlined body(ctx, begin, end): the buffers array, handler, context and
// the outer loop variables are loaded from ctx's slots (see emitParallel).
FnState
KernelEmitter::outlinedState(llvm::Function* body,
                             const std::vector<std::pair<std::string, llvm::Value*>>& outerVars) {
  llvm::Type* ptr = b_.getPtrTy();
  llvm::Type* i64 = b_.getInt64Ty();
  FnState inner;
  inner.fn = body;
  inner.inParallel = true;
  startFunction(inner);
  llvm::Value* c = body->getArg(0);
  auto slot = [&](size_t j) { return b_.CreateConstInBoundsGEP1_64(i64, c, j); };
  inner.buffersArg = b_.CreateAlignedLoad(ptr, slot(0), llvm::Align(8), "buffers");
  inner.handler = b_.CreateAlignedLoad(ptr, slot(1), llvm::Align(8), "handler");
  inner.context = b_.CreateAlignedLoad(ptr, slot(2), llvm::Align(8), "context");
  for (size_t j = 0; j < outerVars.size(); ++j) {
    const std::string& name = outerVars[j].first;
    inner.vars.emplace_back(name, b_.CreateAlignedLoad(i64, slot(3 + j), llvm::Align(8), name));
  }
  bindParameters(inner);
  return inner;
}

// The buffers `s` or the statements below it store to, reduce into or pass to a call.
static void writtenBuffers(const Stmt& s, std::set<std::string>& out) {
  if (s.kind == Stmt::Kind::Store || s.kind == Stmt::Kind::Reduce) out.insert(s.buffer);
  if (s.kind == Stmt::Kind::Call) out.insert(s.args.begin(), s.args.end());
  for (const StmtRef& b : s.body)
    if (b) writtenBuffers(*b, out);
}

// The outermost Parallel loop: its body becomes `entry.parN(ctx, begin, end)`, run through
// kiln_cpu_parallel_for. ctx is an array of 8-byte slots in this frame: the buffers array,
// the handler, the context, the loop variables in scope, then the scratch buffers allocated
// outside the loop that it only reads (its threads share them; one it writes is refused).
void KernelEmitter::emitParallel(const Stmt& s, llvm::Value* extent) {
  llvm::Type* ptr = b_.getPtrTy();
  llvm::Type* i64 = b_.getInt64Ty();
  std::set<std::string> written;
  writtenBuffers(s, written);
  std::vector<BufferBinding> shared, refused;
  for (size_t i = k_.buffers.size(); i < fs_.buffers.size(); ++i)
    (written.count(fs_.buffers[i].name) ? refused : shared).push_back(fs_.buffers[i]);
  const size_t varSlots = 3 + fs_.vars.size(), numSlots = varSlots + shared.size();
  llvm::AllocaInst* ctx = entryAlloca(llvm::ArrayType::get(i64, numSlots), s.var + ".ctx");
  auto slot = [&](size_t j) { return b_.CreateConstInBoundsGEP1_64(i64, ctx, j); };
  b_.CreateAlignedStore(fs_.buffersArg, slot(0), llvm::Align(8));
  b_.CreateAlignedStore(fs_.handler, slot(1), llvm::Align(8));
  b_.CreateAlignedStore(fs_.context, slot(2), llvm::Align(8));
  for (size_t j = 0; j < fs_.vars.size(); ++j)
    b_.CreateAlignedStore(fs_.vars[j].second, slot(3 + j), llvm::Align(8));
  for (size_t j = 0; j < shared.size(); ++j)
    b_.CreateAlignedStore(shared[j].ptr, slot(varSlots + j), llvm::Align(8));

  auto* bodyType = llvm::FunctionType::get(b_.getVoidTy(), {ptr, i64, i64}, false);
  std::string name = entryName_ + ".par" + std::to_string(nextParallel_++);
  auto* body = llvm::Function::Create(bodyType, llvm::Function::InternalLinkage, name, m_);

  // Emit the body function, then come back here.
  llvm::BasicBlock* resume = b_.GetInsertBlock();
  FnState outer = std::move(fs_);
  fs_ = outlinedState(body, outer.vars);
  llvm::Value* c = body->getArg(0);
  for (size_t j = 0; j < shared.size(); ++j) {
    llvm::Value* at = b_.CreateConstInBoundsGEP1_64(i64, c, varSlots + j);
    fs_.buffers.push_back({shared[j].name,
                           b_.CreateAlignedLoad(ptr, at, llvm::Align(8), shared[j].name),
                           shared[j].type});
  }
  // Scratch allocated outside the loop that the loop writes would be shared by all threads:
  // refuse it by name.
  size_t hiddenBefore = hiddenAllocs_.size();
  for (const BufferBinding& r : refused)
    hiddenAllocs_.emplace_back(r.name, "scratch buffer '" + r.name +
                                           "' is allocated outside parallel loop '" + s.var +
                                           "' and would be shared by its threads");
  emitLoop(s, LoopKind::Serial, body->getArg(1), body->getArg(2));
  b_.CreateRetVoid();
  hiddenAllocs_.resize(hiddenBefore);
  fs_ = std::move(outer);
  b_.SetInsertPoint(resume);

  auto* pfType = llvm::FunctionType::get(b_.getVoidTy(), {ptr, i64, ptr, ptr}, false);
  llvm::FunctionCallee pf = m_.getOrInsertFunction(kKilnParallelFor, pfType);
  b_.CreateCall(pf, {fs_.pool, extent, body, ctx});
}

}  // namespace llvm_emit

namespace {

// A C identifier from a kernel name ("k3_reduction" stays; other characters become '_').
std::string sanitize(const std::string& name) {
  std::string out;
  for (char ch : name) {
    bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
    out += ok ? ch : '_';
  }
  return out.empty() ? "kernel" : out;
}

}  // namespace

StatusOr<std::vector<std::string>> emitKernels(llvm::Module& m,
                                               const std::vector<const kernel::Kernel*>& kernels,
                                               const std::string& prefix,
                                               const EmitOptions& options) {
  std::vector<std::string> names;
  for (size_t i = 0; i < kernels.size(); ++i) {
    std::string name = prefix + std::to_string(i) + "_" + sanitize(kernels[i]->name);
    llvm_emit::KernelEmitter emitter(m, *kernels[i], options);
    KILN_RETURN_IF_ERROR(emitter.emit(name));
    names.push_back(std::move(name));
  }
  return names;
}

}  // namespace kiln::codegen::cpu
