// Artifacts and the compile cache (runtime::Executable::serialize / load, CompileOptions
// cacheDir): an artifact round-trips to the same results; one for another CPU or Kiln version,
// or whose kernels differ from what this Kiln lowers its module to, is refused with a message
// saying so; the cache misses, hits, and rebuilds a corrupted entry.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "ir/text/text.h"
#include "runtime/artifact.h"
#include "runtime/executable.h"
#include "support/hash.h"

namespace kiln::runtime {
namespace {

const char* kProgram = R"(
func @main(%x: f32[4,8], %w: f32[8,8]) -> (f32[4,8]) {
  %mm = f32[4,8] dot_general(%x, %w) {lhs_contracting = [1], rhs_contracting = [0]}
  %t = f32[4,8] tanh(%mm)
  %e = f32[4,8] exp(%t)
  return %e
})";

std::unique_ptr<Executable> compileProgram(const CompileOptions& o = {}) {
  auto parsed = parseModule(kProgram, "artifact.kir");
  EXPECT_TRUE(parsed.isOk());
  auto exe = Executable::compile(std::move(*parsed), o);
  EXPECT_TRUE(exe.isOk()) << exe.status().str();
  return exe ? std::move(*exe) : nullptr;
}

std::vector<Tensor> inputs() {
  Tensor x(DType::F32, {4, 8}), w(DType::F32, {8, 8});
  for (int64_t i = 0; i < 32; ++i) x.setDouble(i, 0.1 * (i % 7) - 0.3);
  for (int64_t i = 0; i < 64; ++i) w.setDouble(i, 0.05 * (i % 5) - 0.1);
  return {x, w};
}

// The artifact with section `name` replaced by `text` (and a valid checksum).
std::string withSection(const std::string& bytes, const std::string& name,
                        const std::string& text) {
  auto views = decodeArtifact(bytes, "a");
  EXPECT_TRUE(views.isOk());
  Sections s;
  for (const auto& [k, v] : *views) s[k] = std::string(v);
  s[name] = text;
  return encodeArtifact(s);
}

TEST(Artifact, RoundTripsAndRefusesMismatches) {
  auto exe = compileProgram();
  ASSERT_TRUE(exe);
  std::string bytes = exe->serialize();
  EXPECT_EQ(bytes, compileProgram()->serialize());  // deterministic
  auto loaded = Executable::load(bytes, "a.kiln");
  ASSERT_TRUE(loaded.isOk()) << loaded.status().str();
  auto want = exe->run(inputs());
  auto got = (*loaded)->run(inputs());
  ASSERT_TRUE(want.isOk() && got.isOk());
  ASSERT_EQ((*got)[0].byteSize(), (*want)[0].byteSize());
  EXPECT_EQ(std::memcmp((*got)[0].bytes(), (*want)[0].bytes(), (*want)[0].byteSize()), 0);
  EXPECT_EQ((*loaded)->loadedFrom(), "a.kiln");

  auto views = decodeArtifact(bytes, "a");
  ASSERT_TRUE(views.isOk());
  std::string meta((*views)["meta"]);
  std::string target = meta.substr(meta.find("target ") + 7);
  target = target.substr(0, target.find('\n'));
  std::string other = meta;
  other.replace(meta.find(target), target.size(), "pentium +mmx");
  auto refused = Executable::load(withSection(bytes, "meta", other), "b.kiln");
  ASSERT_FALSE(refused.isOk());
  EXPECT_NE(refused.status().message().find("b.kiln: compiled for CPU 'pentium +mmx', this "
                                            "machine is '" +
                                            target + "'"),
            std::string::npos)
      << refused.status().message();

  other = meta;
  other.replace(0, meta.find('\n'), "kiln 0.0.1");
  refused = Executable::load(withSection(bytes, "meta", other), "c.kiln");
  ASSERT_FALSE(refused.isOk());
  EXPECT_NE(refused.status().message().find("c.kiln: compiled by Kiln 0.0.1, this is Kiln"),
            std::string::npos)
      << refused.status().message();

  refused = Executable::load(withSection(bytes, "kernels", "0123456789abcdef"), "d.kiln");
  ASSERT_FALSE(refused.isOk());
  EXPECT_NE(refused.status().message().find("are not the ones this Kiln lowers its module to"),
            std::string::npos)
      << refused.status().message();
}

TEST(Artifact, CompileCacheMissesHitsAndRebuildsCorruptEntries) {
  std::string dir =
      (std::filesystem::temp_directory_path() / ("kiln-cache-test-" + std::to_string(::getpid())))
          .string();
  std::filesystem::remove_all(dir);
  CompileOptions o;
  o.cacheDir = dir;
  o.sourceKey = "kir " + hex64(hash64(kProgram));
  auto miss = compileProgram(o);
  ASSERT_TRUE(miss);
  EXPECT_EQ(miss->cacheReport().rfind("miss, written: " + dir, 0), 0u) << miss->cacheReport();
  auto hit = compileProgram(o);
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->cacheReport().rfind("hit: " + dir, 0), 0u) << hit->cacheReport();
  EXPECT_GT(hit->times().cacheLoad, 0);
  auto a = miss->run(inputs()), b = hit->run(inputs());
  ASSERT_TRUE(a.isOk() && b.isOk());
  EXPECT_EQ(std::memcmp((*a)[0].bytes(), (*b)[0].bytes(), (*a)[0].byteSize()), 0);
  // Other options: another entry.
  CompileOptions o0 = o;
  o0.optLevel = 0;
  EXPECT_EQ(compileProgram(o0)->cacheReport().rfind("miss", 0), 0u);
  // A corrupted entry is reported and rebuilt; the rebuilt one hits.
  std::string entry = hit->cacheReport().substr(5);
  {
    std::fstream f(entry, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x7f');
  }
  auto rebuilt = compileProgram(o);
  ASSERT_TRUE(rebuilt);
  EXPECT_NE(rebuilt->cacheReport().find("entry rejected (" + entry + ": corrupted: checksum"),
            std::string::npos)
      << rebuilt->cacheReport();
  EXPECT_NE(rebuilt->cacheReport().find("), rebuilt: " + entry), std::string::npos);
  EXPECT_EQ(compileProgram(o)->cacheReport(), "hit: " + entry);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kiln::runtime
