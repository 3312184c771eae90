// The JIT side of the CPU backend: one ORC LLJIT per CpuCompiler, the new pass manager's
// default pipeline for the host TargetMachine, and the runtime entry for Parallel loops.
#include <atomic>
#include <mutex>

#include "codegen/cpu/cpu_codegen.h"
#include "codegen/cpu/llvm_emit.h"
#include "llvm/ExecutionEngine/Orc/CompileUtils.h"
#include "llvm/ExecutionEngine/Orc/Core.h"
#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/ExecutionEngine/Orc/ThreadSafeModule.h"
#include "llvm/IR/DiagnosticHandler.h"
#include "llvm/IR/DiagnosticInfo.h"
#include "llvm/IR/DiagnosticPrinter.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"

namespace kiln::codegen::cpu {

extern "C" void kiln_cpu_parallel_for(void* pool, int64_t n,
                                      void (*fn)(void* ctx, int64_t begin, int64_t end),
                                      void* ctx) {
  static_cast<ThreadPool*>(pool)->parallelFor(
      n, [&](int64_t begin, int64_t end) { fn(ctx, begin, end); });
}

namespace {

std::string errorText(llvm::Error e) { return llvm::toString(std::move(e)); }

// The JIT and what its code needs; shared by the compiler and every kernel compiled with it.
struct JitState {
  std::unique_ptr<llvm::orc::LLJIT> jit;
};

class JitKernel final : public CompiledKernel {
 public:
  JitKernel(std::shared_ptr<JitState> jit, KernelEntry entry, std::string symbol)
      : jit_(std::move(jit)), entry_(entry), symbol_(std::move(symbol)) {}
  void run(void* const* buffers, ThreadPool& pool, CallHandler handler,
           void* context) const override {
    entry_(buffers, &pool, reinterpret_cast<void*>(handler), context);
  }
  const std::string& symbol() const override { return symbol_; }

 private:
  std::shared_ptr<JitState> jit_;  // keeps the code alive
  KernelEntry entry_;
  std::string symbol_;
};

// Collects LLVM's warnings and errors (such as "loop not vectorized" for a Vectorized loop whose
// body calls libm) instead of printing them to stderr; remarks are dropped.
struct CollectDiagnostics : llvm::DiagnosticHandler {
  explicit CollectDiagnostics(std::string* out) : out(out) {}
  bool handleDiagnostics(const llvm::DiagnosticInfo& info) override {
    if (info.getSeverity() == llvm::DS_Error || info.getSeverity() == llvm::DS_Warning) {
      llvm::raw_string_ostream os(*out);
      llvm::DiagnosticPrinterRawOStream printer(os);
      os << (info.getSeverity() == llvm::DS_Error ? "error: " : "warning: ");
      info.print(printer);
      os << "\n";
    }
    return true;
  }
  std::string* out;
};

llvm::OptimizationLevel optimizationLevel(int level) {
  switch (level) {
    case 0: return llvm::OptimizationLevel::O0;
    case 1: return llvm::OptimizationLevel::O1;
    case 2: return llvm::OptimizationLevel::O2;
    default: return llvm::OptimizationLevel::O3;
  }
}

// Features worth naming in hostCpu(), in the order they are printed.
constexpr const char* kNotableFeatures[] = {"avx512f",    "avx512bw",   "avx512vl",
                                            "avx512bf16", "avx512fp16", "amx-tile",
                                            "avx2",       "fma",        "f16c"};

}  // namespace

struct CpuCompiler::Impl {
  CodegenOptions options;
  std::shared_ptr<JitState> state;
  std::unique_ptr<llvm::TargetMachine> tm;  // for the optimization pipeline
  std::string cpu, features;
  std::string lastIr;
  std::string lastObject;
  std::string lastDiagnostics;
  int nextModule = 0;

  Status optimize(llvm::Module& m) {
    llvm::PipelineTuningOptions pto;
    pto.LoopVectorization = options.vectorize;
    pto.SLPVectorization = options.vectorize;
    pto.LoopUnrolling = true;
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PassBuilder pb(tm.get(), pto);
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    llvm::OptimizationLevel level = optimizationLevel(options.optLevel);
    llvm::ModulePassManager mpm = level == llvm::OptimizationLevel::O0
                                      ? pb.buildO0DefaultPipeline(level)
                                      : pb.buildPerModuleDefaultPipeline(level);
    mpm.run(m, mam);
    return Status::ok();
  }

  // Adds an object file to the JIT and looks up the kernels' entry points.
  StatusOr<std::vector<std::unique_ptr<CompiledKernel>>>
  link(std::unique_ptr<llvm::MemoryBuffer> object, const std::vector<std::string>& symbols) {
    llvm::orc::LLJIT& jit = *state->jit;
    if (llvm::Error e = jit.addObjectFile(std::move(object)))
      return Status::error("cpu codegen: " + errorText(std::move(e)));
    std::vector<std::unique_ptr<CompiledKernel>> out;
    for (const std::string& name : symbols) {
      auto addr = jit.lookup(name);
      if (!addr) return Status::error("cpu codegen: " + errorText(addr.takeError()));
      out.push_back(std::make_unique<JitKernel>(state, addr->toPtr<KernelEntry>(), name));
    }
    return out;
  }
};

CpuCompiler::CpuCompiler(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CpuCompiler::~CpuCompiler() = default;

std::string hostTarget() {
  auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!jtmb) {
    llvm::consumeError(jtmb.takeError());
    return "";
  }
  return jtmb->getCPU() + " " + jtmb->getFeatures().getString();
}

StatusOr<std::unique_ptr<CpuCompiler>> CpuCompiler::create(const CodegenOptions& options) {
  static std::once_flag initOnce;
  std::call_once(initOnce, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
  });
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  // detectHost fills in the host's CPU name and features (llvm::sys::getHostCPUName and
  // getHostCPUFeatures), so the code uses AVX2 / AVX-512 where the machine has them.
  auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!jtmb) return Status::error("cpu codegen: no host target: " + errorText(jtmb.takeError()));
  jtmb->setCodeGenOptLevel(options.optLevel >= 3   ? llvm::CodeGenOptLevel::Aggressive
                           : options.optLevel <= 0 ? llvm::CodeGenOptLevel::None
                                                   : llvm::CodeGenOptLevel::Default);
  impl->cpu = jtmb->getCPU();
  impl->features = jtmb->getFeatures().getString();
  auto tm = jtmb->createTargetMachine();
  if (!tm) return Status::error("cpu codegen: " + errorText(tm.takeError()));
  impl->tm = std::move(*tm);

  auto jit = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(*jtmb)).create();
  if (!jit)
    return Status::error("cpu codegen: cannot create the JIT: " + errorText(jit.takeError()));
  llvm::orc::JITDylib& lib = (*jit)->getMainJITDylib();
  // libm (expf, erf, ...) and anything else the process has, then Kiln's parallel-for entry.
  auto processSymbols = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
      (*jit)->getDataLayout().getGlobalPrefix());
  if (!processSymbols)
    return Status::error("cpu codegen: " + errorText(processSymbols.takeError()));
  lib.addGenerator(std::move(*processSymbols));
  llvm::orc::SymbolMap runtime;
  runtime[(*jit)->mangleAndIntern(kKilnParallelFor)] = {
      llvm::orc::ExecutorAddr::fromPtr(&kiln_cpu_parallel_for),
      llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable};
  if (llvm::Error e = lib.define(llvm::orc::absoluteSymbols(std::move(runtime))))
    return Status::error("cpu codegen: " + errorText(std::move(e)));
  impl->state = std::make_shared<JitState>();
  impl->state->jit = std::move(*jit);
  return std::unique_ptr<CpuCompiler>(new CpuCompiler(std::move(impl)));
}

StatusOr<std::unique_ptr<CompiledKernel>> CpuCompiler::compile(const kernel::Kernel& k) {
  KILN_ASSIGN_OR_RETURN(auto all, compileAll({&k}));
  return std::move(all[0]);
}

StatusOr<std::vector<std::unique_ptr<CompiledKernel>>>
CpuCompiler::compileAll(const std::vector<const kernel::Kernel*>& kernels) {
  Impl& s = *impl_;
  llvm::orc::LLJIT& jit = *s.state->jit;
  auto context = std::make_unique<llvm::LLVMContext>();
  std::string diagnostics;
  context->setDiagnosticHandler(std::make_unique<CollectDiagnostics>(&diagnostics));
  auto module = std::make_unique<llvm::Module>("kiln_cpu", *context);
  module->setDataLayout(jit.getDataLayout());
  module->setTargetTriple(jit.getTargetTriple().str());

  // Symbols are unique per JIT: kiln<module>_<index>_<kernel name>.
  std::string prefix = "kiln" + std::to_string(s.nextModule++) + "_";
  EmitOptions eo;
  eo.vectorize = s.options.vectorize;
  eo.approximateMath = s.options.approximateMath;
  eo.cpu = s.cpu;
  eo.features = s.features;
  KILN_ASSIGN_OR_RETURN(std::vector<std::string> names, emitKernels(*module, kernels, prefix, eo));
  std::string verifyErrors;
  llvm::raw_string_ostream verifyOut(verifyErrors);
  if (llvm::verifyModule(*module, &verifyOut)) {
    std::string ir;
    llvm::raw_string_ostream irOut(ir);
    module->print(irOut, nullptr);
    KILN_CHECK(false, "cpu codegen emitted invalid LLVM IR: " + verifyErrors + "\n" + ir);
  }
  KILN_RETURN_IF_ERROR(s.optimize(*module));
  std::string ir;
  llvm::raw_string_ostream irOut(ir);
  module->print(irOut, nullptr);

  // Machine code: an object file (kept for artifacts and the compile cache), linked into the JIT.
  llvm::orc::SimpleCompiler compiler(*s.tm);
  auto object = compiler(*module);
  if (!object) return Status::error("cpu codegen: " + errorText(object.takeError()));
  std::string objectBytes((*object)->getBufferStart(), (*object)->getBufferSize());
  KILN_ASSIGN_OR_RETURN(auto out, s.link(std::move(*object), names));
  s.lastIr = std::move(ir);
  s.lastObject = std::move(objectBytes);
  s.lastDiagnostics = std::move(diagnostics);
  return out;
}

StatusOr<std::vector<std::unique_ptr<CompiledKernel>>>
CpuCompiler::loadObject(std::string_view object, const std::vector<std::string>& symbols) {
  auto buffer = llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(object.data(), object.size()),
                                                     "kiln_cpu_object");
  return impl_->link(std::move(buffer), symbols);
}

std::string CpuCompiler::lastObject() const { return impl_->lastObject; }

std::string CpuCompiler::lastLlvmIr() const { return impl_->lastIr; }
std::string CpuCompiler::lastDiagnostics() const { return impl_->lastDiagnostics; }

std::string CpuCompiler::hostCpu() const {
  std::string features = "," + impl_->features + ",";
  std::string out = impl_->cpu + " (";
  bool first = true;
  for (const char* f : kNotableFeatures) {
    if (features.find(std::string(",+") + f + ",") == std::string::npos) continue;
    out += (first ? "+" : " +") + std::string(f);
    first = false;
  }
  return out + ")";
}

}  // namespace kiln::codegen::cpu
