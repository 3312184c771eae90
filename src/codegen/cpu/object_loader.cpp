// Kiln's linker for its own object code (object_loader.h): reads the ELF sections, lays them out
// in one mapping grouped by protection, resolves symbols, applies relocations and protects the
// groups, one named step each; also the kiln_cpu_parallel_for runtime entry.
#include "codegen/cpu/object_loader.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <dlfcn.h>
#include <elf.h>
#include <limits>
#include <map>
#include <optional>
#include <sys/mman.h>
#include <unistd.h>

#include "codegen/cpu/llvm_emit.h"

namespace kiln::codegen::cpu {

extern "C" void kiln_cpu_parallel_for(void* pool, int64_t n,
                                      void (*fn)(void* ctx, int64_t begin, int64_t end),
                                      void* ctx) {
  static_cast<ThreadPool*>(pool)->parallelFor(
      n, [&](int64_t begin, int64_t end) { fn(ctx, begin, end); });
}

namespace {

// The mapping an object's sections were loaded into.
struct LoadedCode {
  void* base = nullptr;
  size_t bytes = 0;
  LoadedCode() = default;
  LoadedCode(const LoadedCode&) = delete;
  LoadedCode& operator=(const LoadedCode&) = delete;
  ~LoadedCode() {
    if (base) ::munmap(base, bytes);
  }
};

class LoadedKernel final : public CompiledKernel {
 public:
  LoadedKernel(std::shared_ptr<const LoadedCode> code, KernelEntry entry, std::string symbol)
      : code_(std::move(code)), entry_(entry), symbol_(std::move(symbol)) {}
  void run(void* const* buffers, ThreadPool& pool, CallHandler handler,
           void* context) const override {
    entry_(buffers, &pool, reinterpret_cast<void*>(handler), context);
  }
  const std::string& symbol() const override { return symbol_; }

 private:
  std::shared_ptr<const LoadedCode> code_;  // keeps the code mapped
  KernelEntry entry_;
  std::string symbol_;
};

// Reads ELF structures out of the object's bytes, each checked to lie inside them.
class ElfReader {
 public:
  explicit ElfReader(std::string_view bytes) : bytes_(bytes) {}

  template <typename T>
  StatusOr<T> read(uint64_t offset, const std::string& what) const {
    if (offset > bytes_.size() || bytes_.size() - offset < sizeof(T))
      return error(what + " lies outside the object (" + std::to_string(bytes_.size()) + " bytes)");
    T v;
    std::memcpy(&v, bytes_.data() + offset, sizeof(T));
    return v;
  }
  StatusOr<std::string_view> range(uint64_t offset, uint64_t size, const std::string& what) const {
    if (offset > bytes_.size() || bytes_.size() - offset < size)
      return error(what + " lies outside the object (" + std::to_string(bytes_.size()) + " bytes)");
    return bytes_.substr(offset, size);
  }
  static Status error(const std::string& why) { return Status::error("object code: " + why); }

 private:
  std::string_view bytes_;
};

// A NUL-terminated name at `offset` of a string table.
StatusOr<std::string> nameAt(std::string_view table, uint64_t offset, const char* what) {
  if (offset >= table.size()) return ElfReader::error(std::string(what) + " name out of range");
  size_t end = table.find('\0', offset);
  if (end == std::string_view::npos)
    return ElfReader::error(std::string(what) + " name is not terminated");
  return std::string(table.substr(offset, end - offset));
}

// A symbol the object uses but does not define.
StatusOr<uint64_t> resolveExternal(const std::string& name) {
  if (name == kKilnParallelFor) return reinterpret_cast<uint64_t>(&kiln_cpu_parallel_for);
  void* p = ::dlsym(RTLD_DEFAULT, name.c_str());
  if (!p) return ElfReader::error("it calls '" + name + "', which this process does not have");
  return reinterpret_cast<uint64_t>(p);
}

std::string relocationName(uint32_t type) {
  switch (type) {
    case R_X86_64_64: return "R_X86_64_64";
    case R_X86_64_PC32: return "R_X86_64_PC32";
    case R_X86_64_PLT32: return "R_X86_64_PLT32";
    case R_X86_64_PC64: return "R_X86_64_PC64";
    case R_X86_64_GOTPCREL: return "R_X86_64_GOTPCREL";
    case R_X86_64_32: return "R_X86_64_32";
    case R_X86_64_32S: return "R_X86_64_32S";
    default: return "type " + std::to_string(type);
  }
}

// The object's section headers, checked to be those of a 64-bit little-endian x86-64
// relocatable object, with the section name table.
struct Sections {
  std::vector<Elf64_Shdr> headers;
  std::string_view names;  // the section name table

  size_t size() const { return headers.size(); }
  const Elf64_Shdr& operator[](size_t i) const { return headers[i]; }
  // Section i's name, or "#i" when it has none.
  std::string name(size_t i) const {
    auto n = nameAt(names, headers[i].sh_name, "section");
    return n ? *n : "#" + std::to_string(i);
  }
};

StatusOr<Sections> readSections(const ElfReader& elf) {
  KILN_ASSIGN_OR_RETURN(Elf64_Ehdr eh, elf.read<Elf64_Ehdr>(0, "the ELF header"));
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0)
    return ElfReader::error("not an ELF object (no ELF magic)");
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB ||
      eh.e_machine != EM_X86_64 || eh.e_type != ET_REL)
    return ElfReader::error("not a 64-bit little-endian x86-64 relocatable object");
  if (eh.e_shentsize != sizeof(Elf64_Shdr))
    return ElfReader::error("unexpected section header size " + std::to_string(eh.e_shentsize));
  Sections sections;
  sections.headers.resize(eh.e_shnum);
  for (size_t i = 0; i < sections.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(sections.headers[i],
                          elf.read<Elf64_Shdr>(eh.e_shoff + i * sizeof(Elf64_Shdr),
                                               "section header " + std::to_string(i)));
  }
  if (eh.e_shstrndx >= sections.size()) return ElfReader::error("no section name table");
  KILN_ASSIGN_OR_RETURN(sections.names,
                        elf.range(sections[eh.e_shstrndx].sh_offset,
                                  sections[eh.e_shstrndx].sh_size, "the section name table"));
  return sections;
}

// Where the allocated sections go in the mapping: three groups (code, constants, writable data),
// each starting on a page so that it gets its own protection.
struct Layout {
  uint64_t page = 0;
  std::vector<std::optional<uint64_t>> placed;  // per section its offset in the mapping
  uint64_t size = 0, groupStart[3] = {0, 0, 0}, groupEnd[3] = {0, 0, 0};
};

StatusOr<Layout> layoutSections(const Sections& sections, uint64_t page) {
  Layout layout;
  layout.page = page;
  layout.placed.resize(sections.size());
  uint64_t& size = layout.size;
  for (int group = 0; group < 3; ++group) {
    size = (size + page - 1) / page * page;
    layout.groupStart[group] = size;
    for (size_t i = 0; i < sections.size(); ++i) {
      const Elf64_Shdr& s = sections[i];
      if (!(s.sh_flags & SHF_ALLOC) || s.sh_size == 0) continue;
      int g = (s.sh_flags & SHF_EXECINSTR) ? 0 : (s.sh_flags & SHF_WRITE) ? 2 : 1;
      if (g != group) continue;
      if (s.sh_type != SHT_PROGBITS && s.sh_type != SHT_NOBITS)
        return ElfReader::error("section '" + sections.name(i) + "' of type " +
                                std::to_string(s.sh_type) + " is not supported");
      uint64_t align = std::max<uint64_t>(s.sh_addralign, 1);
      if (align > page || (align & (align - 1)) != 0)
        return ElfReader::error("section '" + sections.name(i) + "' has alignment " +
                                std::to_string(align));
      if (s.sh_size > (uint64_t(1) << 32))
        return ElfReader::error("section '" + sections.name(i) + "' is too large");
      size = (size + align - 1) / align * align;
      layout.placed[i] = size;
      size += s.sh_size;
    }
    layout.groupEnd[group] = size;
  }
  return layout;
}

// Maps memory for the layout (read+write for now) and copies the sections' bytes into it.
StatusOr<std::shared_ptr<LoadedCode>> loadSections(const ElfReader& elf, const Sections& sections,
                                                   const Layout& layout) {
  const uint64_t page = layout.page;
  auto code = std::make_shared<LoadedCode>();
  code->bytes = std::max<uint64_t>((layout.size + page - 1) / page * page, page);
  void* base =
      ::mmap(nullptr, code->bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) return ElfReader::error("cannot map memory for the code");
  code->base = base;
  auto* at = static_cast<char*>(base);
  for (size_t i = 0; i < sections.size(); ++i) {
    if (!layout.placed[i] || sections[i].sh_type == SHT_NOBITS) continue;
    KILN_ASSIGN_OR_RETURN(std::string_view data,
                          elf.range(sections[i].sh_offset, sections[i].sh_size,
                                    "section '" + sections.name(i) + "'"));
    std::memcpy(at + *layout.placed[i], data.data(), data.size());
  }
  return code;
}

// The symbol table: per symbol its address in the mapping, or resolved in the process; none for
// one of a section left unloaded (debug information, say, or the file name), which is fine as
// long as no relocation of a loaded section uses it. `defined`: the global functions by name.
struct Symbols {
  size_t symtab = 0;  // its section
  std::vector<std::optional<uint64_t>> address;
  std::map<std::string, uint64_t> defined;
};

StatusOr<Symbols> resolveSymbols(const ElfReader& elf, const Sections& sections,
                                 const Layout& layout, char* at) {
  Symbols symbols;
  size_t& symtab = symbols.symtab;
  symtab = sections.size();
  for (size_t i = 0; i < sections.size(); ++i)
    if (sections[i].sh_type == SHT_SYMTAB) symtab = i;
  if (symtab == sections.size()) return ElfReader::error("no symbol table");
  const Elf64_Shdr& st = sections[symtab];
  if (st.sh_entsize != sizeof(Elf64_Sym) || st.sh_link >= sections.size())
    return ElfReader::error("malformed symbol table");
  KILN_ASSIGN_OR_RETURN(std::string_view names,
                        elf.range(sections[st.sh_link].sh_offset, sections[st.sh_link].sh_size,
                                  "the symbol name table"));
  for (uint64_t k = 0; k < st.sh_size / sizeof(Elf64_Sym); ++k) {
    KILN_ASSIGN_OR_RETURN(Elf64_Sym sym, elf.read<Elf64_Sym>(st.sh_offset + k * sizeof(Elf64_Sym),
                                                             "symbol " + std::to_string(k)));
    std::optional<uint64_t> a = 0;
    if (k == 0) {
      // the null symbol
    } else if (sym.st_shndx == SHN_UNDEF) {
      KILN_ASSIGN_OR_RETURN(std::string name, nameAt(names, sym.st_name, "symbol"));
      KILN_ASSIGN_OR_RETURN(uint64_t external, resolveExternal(name));
      a = external;
    } else if (sym.st_shndx == SHN_ABS) {
      a = sym.st_value;
    } else if (sym.st_shndx < sections.size() && layout.placed[sym.st_shndx]) {
      a = reinterpret_cast<uint64_t>(at + *layout.placed[sym.st_shndx]) + sym.st_value;
      if (ELF64_ST_BIND(sym.st_info) == STB_GLOBAL && ELF64_ST_TYPE(sym.st_info) == STT_FUNC) {
        KILN_ASSIGN_OR_RETURN(std::string name, nameAt(names, sym.st_name, "symbol"));
        symbols.defined[name] = *a;
      }
    } else {
      a = std::nullopt;
    }
    symbols.address.push_back(a);
  }
  return symbols;
}

// Writes one relocation of `type` at `where` (address p): sa is the symbol's address plus the
// addend. Section r of `sections` holds the relocation (named in errors).
Status applyRelocation(uint32_t type, char* where, uint64_t sa, uint64_t p,
                       const Sections& sections, size_t r) {
  switch (type) {
    case R_X86_64_64: std::memcpy(where, &sa, 8); break;
    case R_X86_64_PC64: {
      uint64_t v = sa - p;
      std::memcpy(where, &v, 8);
      break;
    }
    case R_X86_64_PC32:
    case R_X86_64_PLT32: {
      int64_t v = static_cast<int64_t>(sa - p);
      if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
        return ElfReader::error(relocationName(type) + " in '" + sections.name(r) +
                                "' does not reach its target (the code must use the large "
                                "code model)");
      int32_t v32 = static_cast<int32_t>(v);
      std::memcpy(where, &v32, 4);
      break;
    }
    default:
      return ElfReader::error("relocation " + relocationName(type) + " in '" + sections.name(r) +
                              "' is not supported");
  }
  return Status::ok();
}

// Applies the relocations of the loaded sections (RELA sections only).
Status applyRelocations(const ElfReader& elf, const Sections& sections, const Layout& layout,
                        const Symbols& symbols, char* at) {
  const std::vector<std::optional<uint64_t>>& address = symbols.address;
  for (size_t r = 0; r < sections.size(); ++r) {
    const Elf64_Shdr& rs = sections[r];
    if (rs.sh_type == SHT_REL && rs.sh_info < sections.size() && layout.placed[rs.sh_info])
      return ElfReader::error("relocations without addends ('" + sections.name(r) +
                              "') are not supported");
    if (rs.sh_type != SHT_RELA || rs.sh_info >= sections.size() || !layout.placed[rs.sh_info])
      continue;
    if (rs.sh_entsize != sizeof(Elf64_Rela) || rs.sh_link != symbols.symtab)
      return ElfReader::error("malformed relocation section '" + sections.name(r) + "'");
    const Elf64_Shdr& target = sections[rs.sh_info];
    char* targetBase = at + *layout.placed[rs.sh_info];
    for (uint64_t k = 0; k < rs.sh_size / sizeof(Elf64_Rela); ++k) {
      KILN_ASSIGN_OR_RETURN(Elf64_Rela rel,
                            elf.read<Elf64_Rela>(rs.sh_offset + k * sizeof(Elf64_Rela),
                                                 "relocation " + std::to_string(k) + " of '" +
                                                     sections.name(r) + "'"));
      const uint32_t type = ELF64_R_TYPE(rel.r_info);
      const uint64_t symbol = ELF64_R_SYM(rel.r_info);
      if (symbol >= address.size())
        return ElfReader::error("relocation of '" + sections.name(r) + "' names symbol " +
                                std::to_string(symbol) + " of " + std::to_string(address.size()));
      const size_t width = type == R_X86_64_PC32 || type == R_X86_64_PLT32 ? 4 : 8;
      if (rel.r_offset > target.sh_size || target.sh_size - rel.r_offset < width)
        return ElfReader::error("a relocation of '" + sections.name(r) +
                                "' lies outside its section");
      if (!address[symbol])
        return ElfReader::error("a relocation of '" + sections.name(r) +
                                "' refers to a symbol of a section that is not loaded");
      const uint64_t s = *address[symbol];
      const uint64_t p = reinterpret_cast<uint64_t>(targetBase + rel.r_offset);
      const uint64_t sa = s + static_cast<uint64_t>(rel.r_addend);
      KILN_RETURN_IF_ERROR(applyRelocation(type, targetBase + rel.r_offset, sa, p, sections, r));
    }
  }
  return Status::ok();
}

// Protections: code read+execute, constants read-only, writable data as it is.
Status protectGroups(const Layout& layout, char* at) {
  const uint64_t page = layout.page;
  for (int group = 0; group < 2; ++group) {
    if (layout.groupEnd[group] == layout.groupStart[group]) continue;
    uint64_t end = (layout.groupEnd[group] + page - 1) / page * page;
    int prot = group == 0 ? PROT_READ | PROT_EXEC : PROT_READ;
    if (::mprotect(at + layout.groupStart[group], end - layout.groupStart[group], prot) != 0)
      return ElfReader::error("cannot protect the loaded code");
  }
  return Status::ok();
}

}  // namespace

StatusOr<std::vector<std::unique_ptr<CompiledKernel>>>
linkObject(std::string_view object, const std::vector<std::string>& symbols) {
  ElfReader elf(object);
  KILN_ASSIGN_OR_RETURN(Sections sections, readSections(elf));
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  KILN_ASSIGN_OR_RETURN(Layout layout, layoutSections(sections, page));
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<LoadedCode> code, loadSections(elf, sections, layout));
  auto* at = static_cast<char*>(code->base);
  KILN_ASSIGN_OR_RETURN(Symbols resolved, resolveSymbols(elf, sections, layout, at));
  KILN_RETURN_IF_ERROR(applyRelocations(elf, sections, layout, resolved, at));
  KILN_RETURN_IF_ERROR(protectGroups(layout, at));

  std::vector<std::unique_ptr<CompiledKernel>> out;
  for (const std::string& name : symbols) {
    auto it = resolved.defined.find(name);
    if (it == resolved.defined.end()) return ElfReader::error("no function named '" + name + "'");
    out.push_back(
        std::make_unique<LoadedKernel>(code, reinterpret_cast<KernelEntry>(it->second), name));
  }
  return out;
}

}  // namespace kiln::codegen::cpu
