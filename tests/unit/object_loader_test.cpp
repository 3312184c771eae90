// Kiln's linker for its object code (codegen/cpu/object_loader.h): an object CpuCompiler wrote
// links again, in place of the compiler that made it, and its kernels compute what they should;
// malformed objects, relocations the loader does not handle, missing entry points and symbols
// the process lacks are errors that name them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <elf.h>
#include <string>
#include <vector>

#include "codegen/cpu/cpu_codegen.h"
#include "codegen/cpu/object_loader.h"
#include "kernel/kernel_ir.h"

namespace kiln {
namespace {

using codegen::cpu::CodegenOptions;
using codegen::cpu::CpuCompiler;
using codegen::cpu::linkObject;
using codegen::cpu::ThreadPool;
using kernel::Buffer;
using kernel::BufferRole;
using kernel::LoopKind;

constexpr int64_t kRows = 64, kCols = 48;

// y[r, c] = erf(x[r, c]) * 0.5 + 0.25, rows in parallel: the code calls kiln_cpu_parallel_for
// and libm's erf (math in double, approximateMath off) and reads its constants from a data
// section, so linking it resolves all three kinds of symbol.
kernel::Kernel erfRows() {
  using namespace kernel;
  Buffer x, y;
  x.name = "x";
  y.name = "y";
  x.type = y.type = DType::F32;
  x.shape = y.shape = {kRows, kCols};
  x.role = BufferRole::Input;
  y.role = BufferRole::Output;
  ExprRef at = binary(BinaryOp::Add, binary(BinaryOp::Mul, var("r"), intConst(kCols)), var("c"));
  ExprRef value = binary(BinaryOp::Add,
                         binary(BinaryOp::Mul, unary(UnaryOp::Erf, load("x", DType::F32, at)),
                                floatConst(0.5, DType::F32)),
                         floatConst(0.25, DType::F32));
  Kernel k;
  k.name = "erf_rows";
  k.buffers = {x, y};
  k.body = forLoop("r", intConst(kRows), LoopKind::Parallel,
                   forLoop("c", intConst(kCols), LoopKind::Serial, store("y", at, value)));
  return k;
}

struct Compiled {
  std::string object;
  std::string symbol;
};

Compiled compileErfRows() {
  CodegenOptions o;
  o.approximateMath = false;
  auto compiler = CpuCompiler::create(o);
  EXPECT_TRUE(compiler.isOk()) << compiler.status().str();
  kernel::Kernel k = erfRows();
  auto compiled = (*compiler)->compile(k);
  EXPECT_TRUE(compiled.isOk()) << compiled.status().str();
  return {(*compiler)->lastObject(), (*compiled)->symbol()};
}

void expectErfRows(const codegen::cpu::CompiledKernel& k) {
  std::vector<float> x(kRows * kCols), y(kRows * kCols, -1.0f);
  for (size_t i = 0; i < x.size(); ++i) x[i] = -3.0f + 6.0f * static_cast<float>(i) / x.size();
  void* buffers[] = {x.data(), y.data()};
  ThreadPool pool(2);
  k.run(buffers, pool, nullptr, nullptr);
  for (size_t i = 0; i < x.size(); ++i) {
    // erf in double rounded once, then two f32 operations: within 2 ulp of the double result.
    float want = static_cast<float>(std::erf(static_cast<double>(x[i]))) * 0.5f + 0.25f;
    ASSERT_NEAR(y[i], want, 2e-7) << "element " << i << " of erf(" << x[i] << ")";
  }
}

// The section header of the first section of `type`, and its bytes' offset, in `object`.
const Elf64_Shdr* sectionOfType(const std::string& object, uint32_t type) {
  Elf64_Ehdr eh;
  std::memcpy(&eh, object.data(), sizeof eh);
  for (size_t i = 0; i < eh.e_shnum; ++i) {
    const auto* s =
        reinterpret_cast<const Elf64_Shdr*>(object.data() + eh.e_shoff + i * sizeof(Elf64_Shdr));
    if (s->sh_type == type) return s;
  }
  return nullptr;
}

TEST(ObjectLoader, LinksACompilersObjectAgain) {
  Compiled c = compileErfRows();  // the compiler is gone: the object alone is linked
  ASSERT_FALSE(c.object.empty());
  // Large code model, static relocations: only 64-bit absolute relocations.
  const Elf64_Shdr* rela = sectionOfType(c.object, SHT_RELA);
  ASSERT_NE(rela, nullptr);
  for (uint64_t k = 0; k < rela->sh_size / sizeof(Elf64_Rela); ++k) {
    Elf64_Rela r;
    std::memcpy(&r, c.object.data() + rela->sh_offset + k * sizeof r, sizeof r);
    EXPECT_EQ(ELF64_R_TYPE(r.r_info), static_cast<uint32_t>(R_X86_64_64)) << "relocation " << k;
  }
  auto linked = linkObject(c.object, {c.symbol});
  ASSERT_TRUE(linked.isOk()) << linked.status().str();
  ASSERT_EQ(linked->size(), 1u);
  EXPECT_EQ((*linked)[0]->symbol(), c.symbol);
  expectErfRows(*(*linked)[0]);
  // Twice: each link has its own copy of the code.
  auto again = linkObject(c.object, {c.symbol});
  ASSERT_TRUE(again.isOk()) << again.status().str();
  linked->clear();
  expectErfRows(*(*again)[0]);
}

TEST(ObjectLoader, RefusesWhatItCannotLink) {
  Compiled c = compileErfRows();
  auto refused = [&](const std::string& object, const std::vector<std::string>& symbols,
                     const std::string& message) {
    auto r = linkObject(object, symbols);
    ASSERT_FALSE(r.isOk()) << message;
    EXPECT_NE(r.status().message().find(message), std::string::npos) << r.status().message();
  };
  refused("", {c.symbol}, "object code: the ELF header lies outside the object (0 bytes)");
  refused(std::string(64, 'x'), {c.symbol}, "object code: not an ELF object");
  refused(c.object.substr(0, 200), {c.symbol}, "lies outside the object (200 bytes)");
  refused(c.object, {c.symbol, "kiln_no_such_kernel"},
          "object code: no function named 'kiln_no_such_kernel'");

  // A relocation kind the loader does not handle (a GOT-relative one).
  std::string got = c.object;
  const Elf64_Shdr* rela = sectionOfType(got, SHT_RELA);
  ASSERT_NE(rela, nullptr);
  Elf64_Rela r;
  std::memcpy(&r, got.data() + rela->sh_offset, sizeof r);
  r.r_info = ELF64_R_INFO(ELF64_R_SYM(r.r_info), R_X86_64_GOTPCREL);
  std::memcpy(got.data() + rela->sh_offset, &r, sizeof r);
  refused(got, {c.symbol}, "relocation R_X86_64_GOTPCREL in '.rela.ltext' is not supported");

  // A symbol the process does not have: the parallel-for entry renamed in the string table.
  std::string renamed = c.object;
  size_t at = renamed.find("kiln_cpu_parallel_for");
  ASSERT_NE(at, std::string::npos);
  renamed[at + std::strlen("kiln_cpu_parallel_for") - 1] = 'x';
  refused(renamed, {c.symbol},
          "object code: it calls 'kiln_cpu_parallel_fox', which this process does not have");
}

}  // namespace
}  // namespace kiln
