#include "runtime/artifact.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "support/hash.h"

namespace kiln::runtime {
namespace {

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'A', 'R', 'T', '1'};
constexpr size_t kHeader = 8 + 4 + 4 + 8 + 8;

template <typename T>
void put(std::string& out, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// Reads a little-endian integer at `at`, advancing it; false when past the end.
template <typename T>
bool get(std::string_view in, size_t& at, T& v) {
  if (in.size() < sizeof(T) || at > in.size() - sizeof(T)) return false;
  v = 0;
  for (size_t i = 0; i < sizeof(T); ++i)
    v |= static_cast<T>(static_cast<unsigned char>(in[at + i])) << (8 * i);
  at += sizeof(T);
  return true;
}

}  // namespace

std::string_view DecodedArtifact::operator[](const std::string& name) const {
  auto it = sections.find(name);
  return it == sections.end() ? std::string_view() : it->second;
}

Status DecodedArtifact::verify(const std::string& name, const MappedFile* file) const {
  auto it = sections.find(name);
  if (it == sections.end()) return Status::error(source + ": no section '" + name + "'");
  uint64_t actual, expected = checksums.at(name);
  if (file) {
    ChunkedHash hash;
    KILN_RETURN_IF_ERROR(file->read(it->second, [&](std::string_view p) { hash.update(p); }));
    actual = hash.finish();
  } else {
    actual = chunkedHash64(it->second);
  }
  if (actual != expected)
    return Status::error(source + ": corrupted: checksum " + hex64(actual) + " of section '" +
                         name + "', the table says " + hex64(expected));
  return Status::ok();
}

namespace {

size_t alignSection(size_t n) {
  return (n + kSectionAlignment - 1) / kSectionAlignment * kSectionAlignment;
}

// Writes a file through `fill` into a temporary file in the same directory, then renames it.
template <typename Fill>
Status writeAtomically(const std::string& path, Fill fill) {
  std::filesystem::path p(path);
  std::string tmp =
      (p.parent_path() / ("." + p.filename().string() + ".tmp" + std::to_string(::getpid())))
          .string();
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    fill(out);
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      return Status::error("cannot write '" + tmp + "'");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    return Status::error("cannot write '" + path + "': " + ec.message());
  }
  return Status::ok();
}

// Writes the artifact through `emit` (called with consecutive pieces of the file).
template <typename Emit>
void emitArtifact(const SectionPieces& sections, Emit emit) {
  size_t tableBytes = 0;
  for (const auto& [name, pieces] : sections) tableBytes += 4 + name.size() + 8 + 8 + 8;
  std::string table;
  size_t offset = alignSection(kHeader + tableBytes);
  for (const auto& [name, pieces] : sections) {
    ChunkedHash hash;
    uint64_t size = 0;
    for (std::string_view p : pieces) {
      hash.update(p);
      size += p.size();
    }
    put<uint32_t>(table, static_cast<uint32_t>(name.size()));
    table += name;
    put<uint64_t>(table, offset);
    put<uint64_t>(table, size);
    put<uint64_t>(table, hash.finish());
    offset = alignSection(offset + size);
  }
  std::string head(kMagic, sizeof kMagic);
  put<uint32_t>(head, kArtifactFormat);
  put<uint32_t>(head, static_cast<uint32_t>(sections.size()));
  put<uint64_t>(head, table.size());
  put<uint64_t>(head, hash64(table));
  head += table;
  static const char kZeros[kSectionAlignment] = {};
  uint64_t at = 0;
  auto write = [&](std::string_view piece) {
    emit(piece);
    at += piece.size();
  };
  write(head);
  for (const auto& [name, pieces] : sections) {
    write(std::string_view(kZeros, alignSection(at) - at));
    for (std::string_view p : pieces) write(p);
  }
}

}  // namespace

std::string encodeArtifact(const SectionPieces& sections) {
  std::string out;
  emitArtifact(sections, [&](std::string_view piece) { out += piece; });
  return out;
}

std::string encodeArtifact(const Sections& sections) {
  SectionPieces pieces;
  for (const auto& [name, data] : sections) pieces[name] = {data};
  return encodeArtifact(pieces);
}

StatusOr<uint64_t> writeArtifact(const std::string& path, const SectionPieces& sections) {
  uint64_t size = 0;
  KILN_RETURN_IF_ERROR(writeAtomically(path, [&](std::ofstream& out) {
    emitArtifact(sections, [&](std::string_view piece) {
      out.write(piece.data(), static_cast<std::streamsize>(piece.size()));
      size += piece.size();
    });
  }));
  return size;
}

StatusOr<DecodedArtifact> decodeArtifact(std::string_view bytes, const std::string& source,
                                         const std::function<bool(const std::string&)>& defer) {
  auto fail = [&](const std::string& why) { return Status::error(source + ": " + why); };
  if (bytes.size() < sizeof kMagic || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    return fail("not a Kiln artifact (no KILNART1 header)");
  size_t at = sizeof kMagic;
  uint32_t format = 0, count = 0;
  uint64_t tableBytes = 0, checksum = 0;
  if (!get(bytes, at, format) || !get(bytes, at, count) || !get(bytes, at, tableBytes) ||
      !get(bytes, at, checksum))
    return fail("truncated header");
  if (format != kArtifactFormat)
    return fail("artifact format " + std::to_string(format) + ", this Kiln reads format " +
                std::to_string(kArtifactFormat) + ": compile the model again");
  if (tableBytes > bytes.size() - kHeader)
    return fail("corrupted: the file has " + std::to_string(bytes.size()) +
                " bytes, too few for its section table (" + std::to_string(tableBytes) + ")");
  std::string_view table = bytes.substr(kHeader, tableBytes);
  uint64_t actual = hash64(table);
  if (actual != checksum)
    return fail("corrupted: checksum " + hex64(actual) + " of the section table, the header says " +
                hex64(checksum));
  DecodedArtifact out;
  out.source = source;
  at = 0;
  uint64_t end = kHeader + tableBytes;  // where the previous section ended
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t nameSize = 0;
    uint64_t offset = 0, size = 0, sum = 0;
    if (!get(table, at, nameSize) || nameSize > table.size() - at)
      return fail("corrupted: section " + std::to_string(i) + " is cut off");
    std::string name(table.substr(at, nameSize));
    at += nameSize;
    if (!get(table, at, offset) || !get(table, at, size) || !get(table, at, sum))
      return fail("corrupted: section '" + name + "' is cut off");
    if (offset < end || offset > bytes.size() || size > bytes.size() - offset)
      return fail("corrupted: section '" + name + "' (" + std::to_string(size) +
                  " bytes at offset " + std::to_string(offset) + ") lies outside the file (" +
                  std::to_string(bytes.size()) + " bytes) or over another section");
    out.sections[name] = bytes.substr(offset, size);
    out.checksums[name] = sum;
    end = offset + size;
    if (!defer || !defer(name)) KILN_RETURN_IF_ERROR(out.verify(name));
  }
  if (at != table.size()) return fail("corrupted: bytes after the last entry of the section table");
  if (end != bytes.size()) return fail("corrupted: bytes after the last section");
  return out;
}

std::vector<std::string> sectionLines(std::string_view text) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < text.size()) {
    size_t nl = text.find('\n', at);
    if (nl == std::string::npos) nl = text.size();
    out.push_back(std::string(text.substr(at, nl - at)));
    at = nl + 1;
  }
  return out;
}

Status writeFileAtomically(const std::string& path, std::string_view bytes) {
  return writeAtomically(path, [&](std::ofstream& out) {
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  });
}

}  // namespace kiln::runtime
