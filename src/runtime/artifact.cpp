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

std::string encodeArtifact(const Sections& sections) {
  std::string payload;
  for (const auto& [name, data] : sections) {
    put<uint32_t>(payload, static_cast<uint32_t>(name.size()));
    payload += name;
    put<uint64_t>(payload, data.size());
    payload += data;
  }
  std::string out(kMagic, sizeof kMagic);
  put<uint32_t>(out, kArtifactFormat);
  put<uint32_t>(out, static_cast<uint32_t>(sections.size()));
  put<uint64_t>(out, payload.size());
  put<uint64_t>(out, hash64(payload));
  return out + payload;
}

StatusOr<SectionViews> decodeArtifact(std::string_view bytes, const std::string& source) {
  auto fail = [&](const std::string& why) { return Status::error(source + ": " + why); };
  if (bytes.size() < sizeof kMagic || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    return fail("not a Kiln artifact (no KILNART1 header)");
  size_t at = sizeof kMagic;
  uint32_t format = 0, count = 0;
  uint64_t size = 0, checksum = 0;
  if (!get(bytes, at, format) || !get(bytes, at, count) || !get(bytes, at, size) ||
      !get(bytes, at, checksum))
    return fail("truncated header");
  if (format != kArtifactFormat)
    return fail("artifact format " + std::to_string(format) + ", this Kiln reads format " +
                std::to_string(kArtifactFormat) + ": compile the model again");
  if (bytes.size() - kHeader != size)
    return fail("corrupted: the payload has " + std::to_string(bytes.size() - kHeader) +
                " bytes, the header says " + std::to_string(size));
  std::string_view payload = bytes.substr(kHeader);
  uint64_t actual = hash64(payload);
  if (actual != checksum)
    return fail("corrupted: checksum " + hex64(actual) + ", the header says " + hex64(checksum));
  SectionViews out;
  at = 0;
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t nameSize = 0;
    uint64_t dataSize = 0;
    if (!get(payload, at, nameSize) || nameSize > payload.size() - at)
      return fail("corrupted: section " + std::to_string(i) + " is cut off");
    std::string name(payload.substr(at, nameSize));
    at += nameSize;
    if (!get(payload, at, dataSize) || dataSize > payload.size() - at)
      return fail("corrupted: section '" + name + "' is cut off");
    out[name] = payload.substr(at, dataSize);
    at += dataSize;
  }
  if (at != payload.size()) return fail("corrupted: bytes after the last section");
  return out;
}

Status writeFileAtomically(const std::string& path, std::string_view bytes) {
  std::filesystem::path p(path);
  std::string tmp =
      (p.parent_path() / ("." + p.filename().string() + ".tmp" + std::to_string(::getpid())))
          .string();
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
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

}  // namespace kiln::runtime
