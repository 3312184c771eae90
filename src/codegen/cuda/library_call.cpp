// Library calls of cuda programs. See library_call.h.
#include "codegen/cuda/library_call.h"

#include <algorithm>

#include "codegen/cuda/conv.h"
#include "codegen/cuda/cublaslt.h"
#include "codegen/cuda/gemm.h"
#ifdef KILN_HAVE_CUDNN
#include "codegen/cuda/cudnn.h"
#endif

namespace kiln::codegen::cuda {

std::optional<std::string> libraryFor(const kernel::Kernel& k, const kernel::Stmt& call,
                                      std::string* why) {
  std::string reason;
  if (call.op == OpCode::DotGeneral) {
    if (gemmShape(k, call, &reason)) return "cuBLASLt";
    if (why) *why = "cuBLASLt does not take " + reason;
  } else if (call.op == OpCode::Convolution) {
#ifndef KILN_HAVE_CUDNN
    if (why) *why = "this build has no cuDNN";
    return std::nullopt;
#endif
    if (convShape(k, call, &reason)) return "cuDNN";
    if (why) *why = "cuDNN does not take " + reason;
  } else if (why) {
    *why = "no GPU library takes " + std::string(opName(call.op));
  }
  return std::nullopt;
}

size_t libraryEpilogue(const kernel::Kernel& k, const kernel::Stmt& call, std::string* what,
                       std::string* why) {
  if (call.op == OpCode::DotGeneral) {
    if (std::optional<GemmShape> g = gemmShape(k, call, why)) {
      GemmEpilogue e = gemmEpilogue(k, call, *g, why);
      if (what) *what = e.str();
      return e.taken;
    }
  }
  if (call.op == OpCode::Convolution) {
    if (std::optional<ConvShape> c = convShape(k, call, why)) {
      ConvEpilogue e = convEpilogue(k, call, *c, why);
      if (what) *what = e.str();
      return e.taken;
    }
  }
  if (why) *why = "its library takes no post-ops";
  return 0;
}

namespace {

// The argument of post-op `index`'s operand: after the call's operands and result.
int postOpArg(const kernel::Stmt& call, int index) {
  if (index < 0) return -1;
  int before = 0;
  for (int i = 0; i < index; ++i) before += !call.postOps[static_cast<size_t>(i)].operand.empty();
  size_t operands = 0;
  for (const kernel::PostOp& p : call.postOps) operands += !p.operand.empty();
  return static_cast<int>(call.args.size() - operands) + before;
}

}  // namespace

StatusOr<std::unique_ptr<LibraryCall>> makeLibraryCall(const kernel::Kernel& k,
                                                       const kernel::Stmt& call, bool tf32) {
  std::string why;
  if (call.op == OpCode::DotGeneral) {
    if (std::optional<GemmShape> g = gemmShape(k, call, &why)) {
      g->tf32 = tf32 && g->type == DType::F32;
      GemmEpilogue e = gemmEpilogue(k, call, *g, &why);
      if (e.taken == call.postOps.size()) {
        KILN_ASSIGN_OR_RETURN(
            std::unique_ptr<Gemm> gemm,
            Gemm::create(*g, e, postOpArg(call, e.residual), postOpArg(call, e.bias)));
        return std::unique_ptr<LibraryCall>(std::move(gemm));
      }
      why = "post-ops cuBLASLt does not take: " + why;
    }
  }
#ifdef KILN_HAVE_CUDNN
  if (why.empty() && call.op == OpCode::Convolution) {
    if (std::optional<ConvShape> c = convShape(k, call, &why)) {
      c->tf32 = tf32 && c->type == DType::F32;
      ConvEpilogue e = convEpilogue(k, call, *c, &why);
      if (e.taken == call.postOps.size()) {
        KILN_ASSIGN_OR_RETURN(
            std::unique_ptr<Conv> conv,
            Conv::create(*c, e, postOpArg(call, e.residual), postOpArg(call, e.bias)));
        return std::unique_ptr<LibraryCall>(std::move(conv));
      }
      why = "post-ops cuDNN does not take: " + why;
    }
  }
#else
  if (why.empty() && !call.postOps.empty()) why = "post-ops";
#endif
  if (why.empty()) libraryFor(k, call, &why);
  return Status::error("kernel " + k.name + ": library call " + call.callee() +
                       " has no GPU kernel (" + why + ")");
}

StatusOr<std::unique_ptr<LibraryCall>>
makeLibraryCallAt(const kernel::Kernel& k, const kernel::Stmt& call, bool tf32,
                  const std::map<std::string, int64_t>& sizes) {
  kernel::Kernel at;
  at.name = k.name;
  kernel::Stmt c = call;
  for (const std::string& a : call.args) {
    const kernel::Buffer* b = k.find(a);
    if (!b) return Status::error("kernel " + k.name + ": a call's buffer %" + a + " is missing");
    kernel::Buffer s = *b;
    s.dims.clear();
    s.shape.clear();
    for (const kernel::ExprRef& e : b->extents()) {
      std::optional<int64_t> n = kernel::evaluateExtent(e, sizes);
      if (!n)
        return Status::error("kernel " + k.name + ": the extent " + kernel::printExpr(e) + " of %" +
                             a + " has no value at this run's sizes");
      s.shape.push_back(*n);
    }
    for (kernel::PostOp& p : c.postOps)
      if (p.operand == a) p.operandShape = s.shape;
    at.buffers.push_back(std::move(s));
  }
  return makeLibraryCall(at, c, tf32);
}

std::vector<int64_t> withEpilogueOperands(std::vector<int64_t> bytes, int residualArg, int biasArg,
                                          int64_t biasElements) {
  const int64_t result = bytes.back();
  const int last = std::max({static_cast<int>(bytes.size()) - 1, residualArg, biasArg});
  bytes.resize(static_cast<size_t>(last) + 1, 0);
  if (residualArg >= 0) bytes[static_cast<size_t>(residualArg)] = result;
  if (biasArg >= 0) bytes[static_cast<size_t>(biasArg)] = biasElements * 4;
  return bytes;
}

StatusOr<std::unique_ptr<Scratch>>
Scratch::make(const Driver& driver, const std::vector<int64_t>& bytes, bool workspace) {
  std::unique_ptr<Scratch> s(new Scratch(driver));
  for (int64_t b : bytes) {
    KILN_ASSIGN_OR_RETURN(DevicePtr p, driver.allocate(std::max<int64_t>(b, 1)));
    s->ptrs_.push_back(p);
  }
  if (!workspace) return s;
  KILN_ASSIGN_OR_RETURN(DevicePtr w, driver.allocate(kCallWorkspace));
  s->ptrs_.push_back(w);
  return s;
}

Scratch::~Scratch() {
  for (DevicePtr p : ptrs_) driver_.free(p);
}

StatusOr<double> timeRuns(const CallRun& run, int repeat, int runsPerGraph) {
  KILN_ASSIGN_OR_RETURN(const Driver* drv, Driver::get());
  KILN_RETURN_IF_ERROR(drv->makeCurrent());
  Stream stream = nullptr;
  Event start = nullptr, end = nullptr;
  GraphExec graph = nullptr;
  auto timed = [&]() -> StatusOr<double> {
    KILN_ASSIGN_OR_RETURN(stream, drv->createStream());
    KILN_ASSIGN_OR_RETURN(start, drv->createEvent());
    KILN_ASSIGN_OR_RETURN(end, drv->createEvent());
    KILN_RETURN_IF_ERROR(run(stream));  // warm-up
    if (drv->beginCapture(stream)) {
      Status issued = Status::ok();
      for (int i = 0; i < runsPerGraph && issued; ++i) issued = run(stream);
      if (StatusOr<GraphExec> g = drv->endCapture(stream, issued)) graph = *g;
    }
    std::vector<double> ms;
    for (int r = 0; r < repeat; ++r) {
      KILN_RETURN_IF_ERROR(drv->record(start, stream));
      KILN_RETURN_IF_ERROR(graph ? drv->launchGraph(graph, stream) : run(stream));
      KILN_RETURN_IF_ERROR(drv->record(end, stream));
      KILN_ASSIGN_OR_RETURN(float t, drv->elapsed(start, end));
      ms.push_back(graph ? t / runsPerGraph : t);
    }
    std::sort(ms.begin(), ms.end());
    return ms.empty() ? 0.0 : ms[ms.size() / 2];
  };
  StatusOr<double> result = timed();
  drv->destroyGraph(graph);
  if (start) drv->destroyEvent(start);
  if (end) drv->destroyEvent(end);
  if (stream) drv->destroyStream(stream);
  return result;
}

StatusOr<OperandCopies> OperandCopies::make(const Driver& driver,
                                            const std::vector<int64_t>& bytes) {
  int64_t each = 0;
  for (int64_t b : bytes) each += b;
  const int64_t n = std::clamp<int64_t>(kColdBytes / std::max<int64_t>(each, 1) + 1, 1, kMaxCopies);
  OperandCopies c;
  for (int64_t i = 0; i < n; ++i) {
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<Scratch> s, Scratch::make(driver, bytes, false));
    c.copies_.push_back(std::move(s));
  }
  KILN_ASSIGN_OR_RETURN(c.workspace_, Scratch::make(driver, {}, true));
  return c;
}

Status OperandCopies::run(const LibraryCall& call, Stream stream) {
  const Scratch& c = *copies_[next_++ % copies_.size()];
  return call.run(c.args(), workspace_->workspace(), stream);
}

StatusOr<double> timeAlone(const LibraryCall& call, bool withEpilogue, int repeat, bool cold) {
  KILN_ASSIGN_OR_RETURN(const Driver* drv, Driver::get());
  KILN_RETURN_IF_ERROR(drv->makeCurrent());
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<LibraryCall> alone, call.alone(withEpilogue));
  if (cold) {
    KILN_ASSIGN_OR_RETURN(OperandCopies copies, OperandCopies::make(*drv, alone->argBytes()));
    return timeRuns([&](Stream s) { return copies.run(*alone, s); }, repeat,
                    std::max(kRunsPerGraph, copies.count()));
  }
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Scratch> scratch, Scratch::make(*drv, alone->argBytes()));
  return timeRuns([&](Stream s) { return alone->run(scratch->args(), scratch->workspace(), s); },
                  repeat);
}

}  // namespace kiln::codegen::cuda
