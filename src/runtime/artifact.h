// The container of a .kiln artifact (a compiled model in one file; Executable::serialize writes
// one, Executable::load reads it) and of compile-cache entries:
//
//   "KILNART1"  u32 format version  u32 section count  u64 table bytes  u64 table checksum
//   table: per section (sorted by name): u32 name bytes, name, u64 offset, u64 bytes, u64 checksum
//   then each section's data at its offset (from the start of the file), a multiple of 64,
//   in table order, zero bytes between them
//
// Integers are little-endian; the table's checksum is hash64 and a section's is ChunkedHash
// (support/hash.h) of its bytes. Every section has its own
// checksum, so that a reader can check the small sections it interprets before using them and
// check large data (weights) while it does other work. Sections are aligned so that data in a
// mapped file can be used in place. What the sections hold is Executable's business
// (docs/architecture.md, "Artifacts").
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "support/mapped_file.h"
#include "support/status.h"

namespace kiln::runtime {

// Raised when what a section holds changes meaning (3: the stored plan's sort row limits).
constexpr uint32_t kArtifactFormat = 3;
constexpr size_t kSectionAlignment = 64;

using Sections = std::map<std::string, std::string>;
// Sections given as pieces (views that must stay valid until the artifact is written), so that
// large data (weights) is written from where it lies instead of being copied.
using SectionPieces = std::map<std::string, std::vector<std::string_view>>;

// The sections of an artifact, as views into its bytes.
struct DecodedArtifact {
  std::string source;  // the file, for messages
  std::map<std::string, std::string_view> sections;
  std::map<std::string, uint64_t> checksums;

  std::string_view operator[](const std::string& name) const;
  bool has(const std::string& name) const { return sections.count(name) != 0; }
  // Checks the checksum of section `name` (one that decodeArtifact was told to defer). With
  // `file`, the mapped file the artifact's bytes lie in, the section is read from the file
  // instead of through the mapping (MappedFile::read: faster, and leaves no pages resident).
  Status verify(const std::string& name, const MappedFile* file = nullptr) const;
};

std::string encodeArtifact(const Sections& sections);
std::string encodeArtifact(const SectionPieces& sections);
// Writes the artifact to `path` atomically (a temporary file, then rename), piece by piece;
// returns its size in bytes.
StatusOr<uint64_t> writeArtifact(const std::string& path, const SectionPieces& sections);

// Checks the magic, the format version, the table's checksum, the sections' bounds and the
// checksum of every section except those `defer` names (the caller checks them with verify()
// before it relies on them). Errors name `source` (the file) and say which check failed.
StatusOr<DecodedArtifact> decodeArtifact(std::string_view bytes, const std::string& source,
                                         const std::function<bool(const std::string&)>& defer = {});

// The lines of a text section, without their newlines.
std::vector<std::string> sectionLines(std::string_view text);

// Writes `bytes` to `path` atomically: a temporary file in the same directory, then rename.
Status writeFileAtomically(const std::string& path, std::string_view bytes);

}  // namespace kiln::runtime
