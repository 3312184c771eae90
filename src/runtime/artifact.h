// The container of a .kiln artifact (a compiled model in one file; Executable::serialize writes
// one, Executable::load reads it) and of compile-cache entries:
//
//   "KILNART1"  u32 format version  u32 section count  u64 payload bytes  u64 checksum
//   payload: per section, u32 name bytes, name, u64 data bytes, data (sections sorted by name)
//
// Integers are little-endian; the checksum is hash64 (support/hash.h) of the payload. What the
// sections hold is Executable's business (docs/runtime.md, "Artifacts").
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "support/status.h"

namespace kiln::runtime {

constexpr uint32_t kArtifactFormat = 1;

using Sections = std::map<std::string, std::string>;
using SectionViews = std::map<std::string, std::string_view>;  // into the artifact's bytes

std::string encodeArtifact(const Sections& sections);

// Checks the magic, the format version, the sizes and the checksum. Errors name `source` (the
// file) and say which check failed. The views point into `bytes`.
StatusOr<SectionViews> decodeArtifact(std::string_view bytes, const std::string& source);

// Writes `bytes` to `path` atomically: a temporary file in the same directory, then rename.
Status writeFileAtomically(const std::string& path, std::string_view bytes);

}  // namespace kiln::runtime
