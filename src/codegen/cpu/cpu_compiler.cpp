// The compiling side of the CPU backend: the new pass manager's default pipeline for the host
// TargetMachine, then machine code as an ELF object, which Kiln's own loader links
// (object_loader.h): no LLVM JIT.
#include <atomic>
#include <mutex>

#include "codegen/cpu/cpu_codegen.h"
#include "codegen/cpu/llvm_emit.h"
#include "codegen/cpu/object_loader.h"
#include "llvm/ExecutionEngine/Orc/CompileUtils.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
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

namespace {

std::string errorText(llvm::Error e) { return llvm::toString(std::move(e)); }

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
  std::unique_ptr<llvm::TargetMachine> tm;
  std::string cpu, features;
  int preferVectorBits = 0;  // EmitOptions::preferVectorBits
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
  // The large code model and static relocations: every address in the object is an absolute
  // 64-bit one (R_X86_64_64), which is all linkObject needs to place the code anywhere.
  jtmb->setCodeModel(llvm::CodeModel::Large);
  jtmb->setRelocationModel(llvm::Reloc::Static);
  impl->cpu = jtmb->getCPU();
  impl->features = jtmb->getFeatures().getString();
  // Loops use the widest vectors the CPU has. LLVM keeps Intel's AVX-512 CPUs at 256 bits (older
  // Xeons lower their clock for 512-bit code), but the products and convolutions oneDNN runs
  // use 512 bits anyway, and a loop's exp or reduction runs 1.5-2x faster at full width.
  if (("," + impl->features + ",").find(",+avx512f,") != std::string::npos)
    impl->preferVectorBits = 512;
  auto tm = jtmb->createTargetMachine();
  if (!tm) return Status::error("cpu codegen: " + errorText(tm.takeError()));
  impl->tm = std::move(*tm);
  return std::unique_ptr<CpuCompiler>(new CpuCompiler(std::move(impl)));
}

StatusOr<std::unique_ptr<CompiledKernel>> CpuCompiler::compile(const kernel::Kernel& k) {
  KILN_ASSIGN_OR_RETURN(auto all, compileAll({&k}));
  return std::move(all[0]);
}

StatusOr<std::vector<std::unique_ptr<CompiledKernel>>>
CpuCompiler::compileAll(const std::vector<const kernel::Kernel*>& kernels) {
  Impl& s = *impl_;
  auto context = std::make_unique<llvm::LLVMContext>();
  std::string diagnostics;
  context->setDiagnosticHandler(std::make_unique<CollectDiagnostics>(&diagnostics));
  auto module = std::make_unique<llvm::Module>("kiln_cpu", *context);
  module->setDataLayout(s.tm->createDataLayout());
  module->setTargetTriple(s.tm->getTargetTriple().str());

  // Symbols are unique per compiler: kiln<module>_<index>_<kernel name>.
  std::string prefix = "kiln" + std::to_string(s.nextModule++) + "_";
  EmitOptions eo;
  eo.vectorize = s.options.vectorize;
  eo.approximateMath = s.options.approximateMath;
  eo.cpu = s.cpu;
  eo.features = s.features;
  eo.preferVectorBits = s.preferVectorBits;
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

  // Machine code: an object file (kept for artifacts and the compile cache), linked by Kiln.
  llvm::orc::SimpleCompiler compiler(*s.tm);
  auto object = compiler(*module);
  if (!object) return Status::error("cpu codegen: " + errorText(object.takeError()));
  std::string objectBytes((*object)->getBufferStart(), (*object)->getBufferSize());
  KILN_ASSIGN_OR_RETURN(auto out, linkObject(objectBytes, names));
  s.lastIr = std::move(ir);
  s.lastObject = std::move(objectBytes);
  s.lastDiagnostics = std::move(diagnostics);
  return out;
}

std::string CpuCompiler::lastObject() const { return impl_->lastObject; }

std::string CpuCompiler::lastLlvmIr() const { return impl_->lastIr; }
std::string CpuCompiler::lastDiagnostics() const { return impl_->lastDiagnostics; }

std::string hostCpu() {
  const std::string target = hostTarget();  // "CPU FEATURES"
  if (target.empty()) return "unknown";
  const size_t space = target.find(' ');
  std::string features = "," + target.substr(space + 1) + ",";
  std::string out = target.substr(0, space) + " (";
  bool first = true;
  for (const char* f : kNotableFeatures) {
    if (features.find(std::string(",+") + f + ",") == std::string::npos) continue;
    out += (first ? "+" : " +") + std::string(f);
    first = false;
  }
  return out + ")";
}

}  // namespace kiln::codegen::cpu
