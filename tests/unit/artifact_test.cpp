// Artifacts and the compile cache (runtime::Executable::serialize / load, CompileOptions
// cacheDir): an artifact round-trips to the same results; one for another CPU or Kiln version,
// or whose kernels differ from what this Kiln builds from its kernel IR, is refused with a message
// saying so; the cache misses, hits, and rebuilds a corrupted entry.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <unistd.h>

#include "compiler/stored_plan.h"
#include "ir/text/text.h"
#include "runtime/artifact.h"
#include "runtime/executable.h"
#include "runtime/source_key.h"
#include "support/hash.h"
#include "support/mapped_file.h"

namespace kiln::runtime {
namespace {

const char* kProgram = R"(
func @main(%x: f32[4,8], %w: f32[8,8]) -> (f32[4,8]) {
  %mm = f32[4,8] dot_general(%x, %w) {lhs_contracting = [1], rhs_contracting = [0]}
  %t = f32[4,8] tanh(%mm)
  %e = f32[4,8] exp(%t)
  return %e
})";

// An empty directory of this process under the system's temporary directory.
std::string freshTempDir(const std::string& prefix) {
  std::string dir =
      (std::filesystem::temp_directory_path() / (prefix + std::to_string(::getpid()))).string();
  std::filesystem::remove_all(dir);
  return dir;
}

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
  for (const auto& [k, v] : views->sections) s[k] = std::string(v);
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
  EXPECT_NE(refused.status().message().find("b.kiln: compiled for cpu 'pentium +mmx', this "
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
  EXPECT_NE(refused.status().message().find("are not the ones this Kiln builds from its kernel IR"),
            std::string::npos)
      << refused.status().message();
}

// An artifact holds its scheduled kernel IR and what each buffer holds (kernels.ir,
// kernels.values); a load reads them instead of lowering and scheduling again (a note changed in
// the artifact is the loaded kernel's note), and refuses them where they do not fit its module.
TEST(Artifact, LoadsItsKernelIRInsteadOfLoweringAgain) {
  auto exe = compileProgram();
  ASSERT_TRUE(exe);
  std::string bytes = exe->serialize();
  auto views = decodeArtifact(bytes, "a");
  ASSERT_TRUE(views.isOk());
  ASSERT_TRUE(views->has("kernels.ir") && views->has("kernels.values"));
  const std::string ir((*views)["kernels.ir"]), values((*views)["kernels.values"]);
  EXPECT_EQ(ir.rfind("kernel k0_contraction(in %x: f32[4,8], in %w: f32[8,8]", 0), 0u) << ir;
  // %x is the function's first node's result, %w its second's.
  EXPECT_NE(values.find("kernel k0_contraction\nvalue %x 0:0\nvalue %w 1:0\n"), std::string::npos)
      << values;
  const size_t note = values.find("\nnote ");
  ASSERT_NE(note, std::string::npos) << values;
  std::string renoted = values.substr(0, note) + "\nnote read from the artifact" +
                        values.substr(values.find('\n', note + 1));
  auto loaded = Executable::load(withSection(bytes, "kernels.values", renoted), "a.kiln");
  ASSERT_TRUE(loaded.isOk()) << loaded.status().str();
  const std::vector<std::string>& notes = (*loaded)->kernels()[0].notes;
  EXPECT_NE(std::find(notes.begin(), notes.end(), "read from the artifact"), notes.end());
  auto got = (*loaded)->run(inputs());
  auto want = exe->run(inputs());
  ASSERT_TRUE(got.isOk() && want.isOk());
  EXPECT_EQ(std::memcmp((*got)[0].bytes(), (*want)[0].bytes(), (*want)[0].byteSize()), 0);

  struct Case {
    std::string section, text, error;
  } cases[] = {
      {"kernels.values", "kernel k0_contraction\nvalue %x 99:0\n", "no value 99:0 in the module"},
      {"kernels.values", "kernel k0_contraction\nvalue %w 0:0\n", "bind no value to %x"},
      {"kernels.values", "kernel k7_loop\n", "name kernel k7_loop out of order"},
      {"kernels.values", "kernel k0_contraction\nvalue %q 0:0\n", "it has no buffer %q"},
      {"kernels.ir", "kernel k0_contraction(in %x: f32[4,8]) {\n  call dot_general(%x)\n}\n",
       "arguments are not dot_general's operands"},
  };
  for (const Case& c : cases) {
    auto refused = Executable::load(withSection(bytes, c.section, c.text), "e.kiln");
    ASSERT_FALSE(refused.isOk()) << c.text;
    EXPECT_EQ(refused.status().message().rfind("e.kiln", 0), 0u) << refused.status().message();
    EXPECT_NE(refused.status().message().find(c.error), std::string::npos)
        << refused.status().message();
  }
}

// An artifact holds its fusion plan (fusion.plan); a load reads it instead of planning again: the
// loaded plan explains as the compiled one did, stores back to the same text, and a reason
// changed in the artifact is the loaded decision's. A plan that does not fit the module is
// refused, naming the artifact and the line.
TEST(Artifact, LoadsItsFusionPlanInsteadOfPlanningAgain) {
  const char* program = R"(
func @main(%x: f32[4,8], %w: f32[8,8], %b: f32[8]) -> (f32[4,16], f32[4]) {
  %mm = f32[4,8] dot_general(%x, %w) {lhs_contracting = [1], rhs_contracting = [0]}
  %bb = f32[4,8] broadcast_in_dim(%b) {dims = [1]}
  %a = f32[4,8] add(%mm, %bb)
  %t = f32[4,8] tanh(%a)
  %e = f32[4,8] exp(%x)
  %c = f32[4,16] concatenate(%t, %e) {dimension = 1}
  %s = f32[4] reduce(%c) {dims = [1], kind = sum}
  return %c, %s
})";
  auto parsed = parseModule(program, "plan.kir");
  ASSERT_TRUE(parsed.isOk()) << parsed.status().str();
  auto exe = Executable::compile(std::move(*parsed), {});
  ASSERT_TRUE(exe.isOk()) << exe.status().str();
  const std::string bytes = (*exe)->serialize();
  auto views = decodeArtifact(bytes, "a");
  ASSERT_TRUE(views.isOk() && views->has("fusion.plan"));
  const std::string plan((*views)["fusion.plan"]);
  const std::string explained = fusion::explainPlan((*exe)->function(), (*exe)->plan());
  EXPECT_NE(explained.find("epilogue"), std::string::npos) << explained;

  auto loaded = Executable::load(bytes, "a.kiln");
  ASSERT_TRUE(loaded.isOk()) << loaded.status().str();
  const Function& f = (*loaded)->function();
  EXPECT_EQ(fusion::explainPlan(f, (*loaded)->plan()), explained);
  EXPECT_EQ(compiler::storePlan((*loaded)->plan(), f), plan);
  EXPECT_EQ((*loaded)->plan().kernels.size(), (*exe)->plan().kernels.size());
  // Its calls name their nodes as the compiled ones did (kernels.values' call lines).
  ASSERT_EQ((*loaded)->kernels().size(), (*exe)->kernels().size());
  size_t calls = 0;
  for (size_t i = 0; i < (*exe)->kernels().size(); ++i) {
    auto want = kernel::callsOf((*exe)->kernels()[i]),
         got = kernel::callsOf((*loaded)->kernels()[i]);
    ASSERT_EQ(got.size(), want.size());
    for (size_t j = 0; j < want.size(); ++j, ++calls) {
      EXPECT_TRUE(want[j]->loc.known());  // (a .kir node has a location, no origin)
      EXPECT_EQ(got[j]->origin, want[j]->origin);
      EXPECT_EQ(got[j]->loc.str(), want[j]->loc.str());
      EXPECT_EQ(got[j]->note, want[j]->note);
    }
  }
  EXPECT_EQ(calls, 1u);

  const size_t reason = plan.find("\nreason ");
  ASSERT_NE(reason, std::string::npos) << plan;
  const std::string edited = plan.substr(0, reason) + "\nreason read from the artifact" +
                             plan.substr(plan.find('\n', reason + 1));
  auto reasoned = Executable::load(withSection(bytes, "fusion.plan", edited), "a.kiln");
  ASSERT_TRUE(reasoned.isOk()) << reasoned.status().str();
  bool found = false;
  for (const fusion::Decision& d : (*reasoned)->plan().decisions)
    found = found || d.reason == "read from the artifact";
  EXPECT_TRUE(found);

  const std::string first = plan.substr(0, plan.find("\nkernel ") + 1);
  struct Case {
    std::string text, error;
  } cases[] = {
      {"", "has no plan line"},
      {first + "kernel 3 loop 0 0 0 0\n", "kernel 3 is out of order"},
      {first + "kernel 0 spiral 0 0 0 0\n", "no kernel kind 'spiral'"},
      {first + "kernel 0 loop 0 0 0 0\nnodes 999\n", "no node 999 in the module"},
      {first + "kernel 0 loop 0 0 0 0\noutputs 0:7\n", "no value 0:7 in the module"},
      {first + "kernel 0 loop 0 0 0 0\nstep add - 0 0\n", "comes before its chain"},
      {first + "kernel 0 loop 0 0 0 0\nlaunch 1\n", "not a line of a fusion plan"},
  };
  for (const Case& c : cases) {
    auto refused = Executable::load(withSection(bytes, "fusion.plan", c.text), "e.kiln");
    ASSERT_FALSE(refused.isOk()) << c.text;
    EXPECT_EQ(refused.status().message().rfind("e.kiln", 0), 0u) << refused.status().message();
    EXPECT_NE(refused.status().message().find(c.error), std::string::npos)
        << refused.status().message();
  }
  Sections without;
  for (const auto& [k, v] : views->sections)
    if (k != "fusion.plan") without[k] = std::string(v);
  auto old = Executable::load(encodeArtifact(without), "old.kiln");
  ASSERT_FALSE(old.isOk());
  EXPECT_NE(old.status().message().find("old.kiln: the artifact has no fusion plan"),
            std::string::npos)
      << old.status().message();
}

// Kernels compiled by one LLVM compiler or several (CompileOptions::compileThreads) compute the
// same outputs, each grouping gives the same artifact every time, and both artifacts load.
TEST(Artifact, CompileThreadsDoNotChangeResults) {
  const char* program = R"(
func @main(%x: f32[4,8], %w: f32[8,8]) -> (f32[4,8], f32[4,8], f32[4,8], f32[4,8]) {
  %mm = f32[4,8] dot_general(%x, %w) {lhs_contracting = [1], rhs_contracting = [0]}
  %a = f32[4,8] tanh(%mm)
  %b = f32[4,8] exp(%x)
  %c = f32[4,8] sigmoid(%mm)
  %d = f32[4,8] sqrt(%b)
  return %a, %b, %c, %d
})";
  std::vector<std::vector<Tensor>> results;
  for (int threads : {1, 3}) {
    CompileOptions o;
    o.fuse = false;
    o.compileThreads = threads;
    std::string bytes[2];
    for (std::string& b : bytes) {
      auto parsed = parseModule(program, "threads.kir");
      ASSERT_TRUE(parsed.isOk()) << parsed.status().str();
      auto exe = Executable::compile(std::move(*parsed), o);
      ASSERT_TRUE(exe.isOk()) << exe.status().str();
      b = (*exe)->serialize();
    }
    EXPECT_EQ(bytes[0], bytes[1]) << threads << " compile threads";
    auto loaded = Executable::load(bytes[0], "threads.kiln");
    ASSERT_TRUE(loaded.isOk()) << loaded.status().str();
    auto out = (*loaded)->run(inputs());
    ASSERT_TRUE(out.isOk()) << out.status().str();
    ASSERT_EQ(out->size(), 4u);
    results.push_back(std::move(*out));
  }
  for (size_t i = 0; i < 4; ++i) {
    ASSERT_EQ(results[0][i].byteSize(), results[1][i].byteSize());
    EXPECT_EQ(std::memcmp(results[0][i].bytes(), results[1][i].bytes(), results[0][i].byteSize()),
              0)
        << "output " << i;
  }
}

// An artifact holds the weights as its library kernels laid them out for the threads they were
// made for (oneDNN's Winograd kernels choose by the thread count: this 28x28 96 -> 128 layer's
// differ between 1 and 2 threads on AVX-512 machines). Loaded for the same threads it runs; for
// others it runs where the layouts agree (within 1e-4: a primitive for other threads may sum in
// another order), and otherwise the error says which thread count it was compiled for and which
// the run asked.
TEST(Artifact, ALoadForOtherThreadsRunsOrNamesTheThreadCounts) {
  std::string weights;
  for (int i = 0; i < 3 * 3 * 96 * 128; ++i)
    weights += (i ? ", " : "") + std::to_string(0.01 * ((i * 7) % 13) - 0.06);
  const std::string program = R"(
func @main(%x: f32[1,28,28,96]) -> (f32[1,28,28,128]) {
  %w = f32[3,3,96,128] constant() {value = [)" +
                              weights + R"(]}
  %c = f32[1,28,28,128] convolution(%x, %w) {padding_low = [1, 1], padding_high = [1, 1], dimension_numbers = "b01f_01io->b01f"}
  return %c
})";
  Tensor x(DType::F32, {1, 28, 28, 96});
  for (int64_t i = 0; i < x.numElements(); ++i) x.setDouble(i, 0.02 * (i % 11) - 0.1);
  CompileOptions one;
  one.threads = 1;
  auto parsed = parseModule(program, "conv.kir");
  ASSERT_TRUE(parsed.isOk()) << parsed.status().str();
  auto exe = Executable::compile(std::move(*parsed), one);
  ASSERT_TRUE(exe.isOk()) << exe.status().str();
  const std::vector<Tensor> in = {x};
  auto want = (*exe)->run(in);
  ASSERT_TRUE(want.isOk()) << want.status().str();
  const std::string bytes = (*exe)->serialize();
  auto same = Executable::load(bytes, "conv.kiln", one);
  ASSERT_TRUE(same.isOk()) << same.status().str();
  CompileOptions two;
  two.threads = 2;
  auto other = Executable::load(bytes, "conv.kiln", two);
  if (!other.isOk()) {
    EXPECT_NE(other.status().message().find("compiled for 1 threads, run with 2"),
              std::string::npos)
        << other.status().str();
    return;
  }
  auto got = (*other)->run(in);
  ASSERT_TRUE(got.isOk()) << got.status().str();
  for (int64_t i = 0; i < (*want)[0].numElements(); ++i)
    ASSERT_NEAR((*got)[0].getDouble(i), (*want)[0].getDouble(i), 1e-4) << "element " << i;
}

TEST(Artifact, CompileCacheMissesHitsAndRebuildsCorruptEntries) {
  std::string dir = freshTempDir("kiln-cache-test-");
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

// Writing an entry deletes the least recently used ones (a hit makes an entry recent) until the
// cache fits its limit.
TEST(Artifact, CompileCacheEvictsLeastRecentlyUsedEntries) {
  std::string dir = freshTempDir("kiln-evict-test-");
  CompileOptions a;
  a.cacheDir = dir;
  a.sourceKey = "kir " + hex64(hash64(kProgram));
  CompileOptions b = a, c = a;
  b.optLevel = 0;
  c.postOps = false;
  auto pause = [] { std::this_thread::sleep_for(std::chrono::milliseconds(20)); };
  std::string entryA = compileProgram(a)->cacheReport().substr(15);  // "miss, written: "
  pause();
  std::string entryB = compileProgram(b)->cacheReport().substr(15);
  pause();
  EXPECT_EQ(compileProgram(a)->cacheReport(), "hit: " + entryA);  // A is now the most recent
  pause();
  uint64_t size = std::filesystem::file_size(entryA) + std::filesystem::file_size(entryB);
  c.cacheLimitBytes = size + 1000;  // room for two entries of this size, not three
  auto third = compileProgram(c);
  ASSERT_TRUE(third);
  EXPECT_NE(third->cacheReport().find(
                "(1 least recently used entries deleted to stay under the 0 MiB limit)"),
            std::string::npos)
      << third->cacheReport();
  std::string entryC = third->cacheReport().substr(15, third->cacheReport().find(" (") - 15);
  EXPECT_TRUE(std::filesystem::exists(entryA));
  EXPECT_FALSE(std::filesystem::exists(entryB));
  EXPECT_TRUE(std::filesystem::exists(entryC));
  std::filesystem::remove_all(dir);
}

// A convolution with constant weights (which its oneDNN kernel holds reordered) and a constant
// that a loop reads.
std::string convProgram() {
  std::string weights, scale;
  for (int i = 0; i < 3 * 3 * 8 * 8; ++i)
    weights += (i ? ", " : "") + std::to_string(0.01 * (i % 13) - 0.06);
  for (int i = 0; i < 6 * 8; ++i) scale += (i ? ", " : "") + std::to_string(0.5 + 0.01 * i);
  const std::string text = R"(
func @main(%x: f32[1,6,6,8]) -> (f32[1,6,6,8]) {
  %w = f32[3,3,8,8] constant() {value = [)" +
                           weights + R"(]}
  %s = f32[6,8] constant() {value = [)" +
                           scale + R"(]}
  %c = f32[1,6,6,8] convolution(%x, %w) {padding_low = [1, 1], padding_high = [1, 1], dimension_numbers = "b01f_01io->b01f"}
  %sb = f32[1,6,6,8] broadcast_in_dim(%s) {dims = [2, 3]}
  %t = f32[1,6,6,8] tanh(%c)
  %y = f32[1,6,6,8] mul(%t, %sb)
  return %y
})";
  return text;
}

Tensor convInput() {
  Tensor x(DType::F32, {1, 6, 6, 8});
  for (int64_t i = 0; i < x.numElements(); ++i) x.setDouble(i, 0.03 * (i % 11) - 0.15);
  return x;
}

std::unique_ptr<Executable> compileText(const std::string& text, const CompileOptions& o) {
  auto parsed = parseModule(text, "conv.kir");
  EXPECT_TRUE(parsed.isOk()) << parsed.status().str();
  auto exe = Executable::compile(std::move(*parsed), o);
  EXPECT_TRUE(exe.isOk()) << exe.status().str();
  return exe ? std::move(*exe) : nullptr;
}

// The convolution's constant weights are freed with dropHeldConstants; the constant the loop
// reads is kept. The results do not change, a compile with a cache writes its entry before
// freeing, fromCache finds that entry, and a compile without a cache frees it too.
TEST(Artifact, DropsConstantsOnlyLibraryKernelsHold) {
  const std::string text = convProgram();
  Tensor x = convInput();
  auto compile = [&](const CompileOptions& o) { return compileText(text, o); };
  auto kept = compile({});
  ASSERT_TRUE(kept);
  EXPECT_EQ(kept->droppedConstantBytes(), -1);
  std::string dir = freshTempDir("kiln-drop-test-");
  CompileOptions o;
  o.dropHeldConstants = true;
  o.cacheDir = dir;
  o.sourceKey = "kir " + hex64(hash64(text));
  auto none = Executable::fromCache(o);
  ASSERT_TRUE(none.isOk());
  EXPECT_EQ(*none, nullptr);
  auto dropped = compile(o);
  ASSERT_TRUE(dropped);
  EXPECT_EQ(dropped->cacheReport().rfind("miss, written: ", 0), 0u) << dropped->cacheReport();
  EXPECT_EQ(dropped->droppedConstantBytes(), 3 * 3 * 8 * 8 * 4);  // %w, not %s
  auto hit = Executable::fromCache(o);
  ASSERT_TRUE(hit.isOk() && *hit) << (hit.isOk() ? "no entry" : hit.status().str());
  EXPECT_EQ((*hit)->cacheReport().rfind("hit: ", 0), 0u);
  EXPECT_EQ((*hit)->droppedConstantBytes(), 0);  // the entry stores %w only packed
  // Without a cache entry to write, the constant is freed while the calls are prepared.
  CompileOptions noCache;
  noCache.dropHeldConstants = true;
  auto early = compile(noCache);
  ASSERT_TRUE(early);
  EXPECT_EQ(early->droppedConstantBytes(), 3 * 3 * 8 * 8 * 4);
  std::vector<Tensor> in{x};
  auto a = kept->run(in), b = dropped->run(in), c = (*hit)->run(in), d = early->run(in);
  ASSERT_TRUE(a.isOk() && b.isOk() && c.isOk() && d.isOk());
  EXPECT_EQ(std::memcmp((*a)[0].bytes(), (*b)[0].bytes(), (*a)[0].byteSize()), 0);
  EXPECT_EQ(std::memcmp((*a)[0].bytes(), (*c)[0].bytes(), (*a)[0].byteSize()), 0);
  EXPECT_EQ(std::memcmp((*a)[0].bytes(), (*d)[0].bytes(), (*a)[0].byteSize()), 0);
  std::filesystem::remove_all(dir);
}

// Three convolutions on two threads: %w1 is the weights of the first and the last, %w2 of the
// middle one, and a loop reads %w2 too. %w1 is freed once both its readers are prepared, %w2 is
// kept; the results equal a compile that frees nothing, and the artifact of the freeing compile
// (which stores %w1 only packed) loads and gives them again. With two preparing threads the
// freeing runs while other calls are being created (scripts/tsan.sh runs this test).
TEST(Artifact, HeldConstantsAreFreedWhileCallsArePrepared) {
  auto weights = [](int seed) {
    std::string w;
    for (int i = 0; i < 3 * 3 * 8 * 8; ++i)
      w += (i ? ", " : "") + std::to_string(0.01 * ((i * seed) % 17) - 0.08);
    return w;
  };
  const std::string text = R"(
func @main(%x: f32[1,6,6,8], %y: f32[3,3,8,8]) -> (f32[1,6,6,8], f32[3,3,8,8]) {
  %w1 = f32[3,3,8,8] constant() {value = [)" +
                           weights(3) + R"(]}
  %w2 = f32[3,3,8,8] constant() {value = [)" +
                           weights(5) + R"(]}
  %a = f32[1,6,6,8] convolution(%x, %w1) {padding_low = [1, 1], padding_high = [1, 1], dimension_numbers = "b01f_01io->b01f"}
  %ta = f32[1,6,6,8] tanh(%a)
  %b = f32[1,6,6,8] convolution(%ta, %w2) {padding_low = [1, 1], padding_high = [1, 1], dimension_numbers = "b01f_01io->b01f"}
  %tb = f32[1,6,6,8] tanh(%b)
  %c = f32[1,6,6,8] convolution(%tb, %w1) {padding_low = [1, 1], padding_high = [1, 1], dimension_numbers = "b01f_01io->b01f"}
  %w2x = f32[3,3,8,8] add(%w2, %y)
  return %c, %w2x
})";
  CompileOptions keep;
  keep.threads = 2;
  CompileOptions drop = keep;
  drop.dropHeldConstants = true;
  auto kept = compileText(text, keep), dropped = compileText(text, drop);
  ASSERT_TRUE(kept && dropped);
  EXPECT_EQ(kept->droppedConstantBytes(), -1);
  EXPECT_EQ(dropped->droppedConstantBytes(), 3 * 3 * 8 * 8 * 4);  // %w1 only
  Tensor y(DType::F32, {3, 3, 8, 8});
  for (int64_t i = 0; i < y.numElements(); ++i) y.setDouble(i, 0.5 - 0.01 * (i % 7));
  std::vector<Tensor> in{convInput(), y};
  auto a = kept->run(in), b = dropped->run(in);
  ASSERT_TRUE(a.isOk() && b.isOk());
  for (size_t o = 0; o < 2; ++o)
    EXPECT_EQ(std::memcmp((*a)[o].bytes(), (*b)[o].bytes(), (*a)[o].byteSize()), 0) << o;
  const std::string bytes = dropped->serialize();
  EXPECT_EQ(bytes, kept->serialize());  // the artifact does not depend on what was freed
  auto loaded = Executable::load(bytes, "three.kiln", keep);
  ASSERT_TRUE(loaded.isOk()) << loaded.status().str();
  auto c = (*loaded)->run(in);
  ASSERT_TRUE(c.isOk());
  for (size_t o = 0; o < 2; ++o)
    EXPECT_EQ(std::memcmp((*a)[o].bytes(), (*c)[o].bytes(), (*a)[o].byteSize()), 0) << o;
}

// Products of one constant weight with equal shapes (the steps of an unrolled recurrence) share
// one oneDNN kernel, made once: the artifact stores its packed weights once ("K.J same K0.J0"
// for the other calls), and the loaded artifact computes the same bits as the compiled program.
TEST(Artifact, CallsOfOneKernelStoreTheirWeightsOnce) {
  std::string w;
  for (int i = 0; i < 64 * 64; ++i) w += (i ? ", " : "") + std::to_string(0.01 * (i % 13) - 0.06);
  std::string text = "func @main(%x: f32[4,64]) -> (f32[4,64]) {\n  %w = f32[64,64] constant() "
                     "{value = [" +
                     w + "]}\n";
  std::string h = "%x";
  for (int i = 0; i < 3; ++i) {
    const std::string s = std::to_string(i);
    text += "  %m" + s + " = f32[4,64] dot_general(" + h +
            ", %w) {lhs_contracting = [1], rhs_contracting = [0]}\n  %h" + s +
            " = f32[4,64] tanh(%m" + s + ")\n";
    h = "%h" + s;
  }
  text += "  return " + h + "\n}\n";
  CompileOptions o;
  o.threads = 1;
  auto exe = compileText(text, o);
  ASSERT_TRUE(exe);
  const std::string bytes = exe->serialize();
  auto views = decodeArtifact(bytes, "a");
  ASSERT_TRUE(views.isOk());
  const std::string packed(views->sections.at("packed"));
  const std::string first = packed.substr(0, packed.find(' '));
  EXPECT_NE(packed.find(" same " + first + "\n"), std::string::npos) << packed;
  int sections = 0;
  for (const auto& [name, bytesOf] : views->sections) sections += name.rfind("packed.", 0) == 0;
  EXPECT_EQ(sections, 1) << packed;
  Tensor x(DType::F32, {4, 64});
  for (int64_t i = 0; i < x.numElements(); ++i) x.setDouble(i, 0.02 * (i % 17) - 0.15);
  std::vector<Tensor> in{x};
  auto want = exe->run(in);
  auto loaded = Executable::load(bytes, "shared.kiln", o);
  ASSERT_TRUE(want.isOk() && loaded.isOk()) << loaded.status().str();
  auto got = (*loaded)->run(in);
  ASSERT_TRUE(got.isOk());
  EXPECT_EQ(std::memcmp((*got)[0].bytes(), (*want)[0].bytes(), (*want)[0].byteSize()), 0);
  // A "same" entry that names no earlier entry is refused.
  auto bad = Executable::load(withSection(bytes, "packed", "1.0 same 7.0\n"), "bad.kiln", o);
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find("'1.0 same 7.0' names no earlier entry"), std::string::npos)
      << bad.status().message();
}

// An artifact stores the convolution's weights once, in the layout its kernel chose (the module
// says `held`). Loaded from a mapped file it is used in place: its other constants borrow the
// file's bytes and the convolution uses the stored weights (no reorder), with the same results.
// Weights stored in a layout the primitive does not choose are refused (compile again). A
// changed byte in the weights, which the load checks on a second thread, is reported.
TEST(Artifact, MappedArtifactsAreUsedInPlace) {
  auto exe = compileText(convProgram(), {});
  ASSERT_TRUE(exe);
  EXPECT_NE(exe->libraryCallDetails().find("constant weights reordered"), std::string::npos)
      << exe->libraryCallDetails();
  const std::string bytes = exe->serialize();
  std::string dir = freshTempDir("kiln-mapped-test-");
  std::filesystem::create_directories(dir);
  auto load = [&](const std::string& name, const std::string& content) {
    std::string path = dir + "/" + name;
    std::ofstream(path, std::ios::binary) << content;
    auto file = MappedFile::open(path);
    EXPECT_TRUE(file.isOk());
    return Executable::load(std::move(*file), path);
  };
  std::vector<Tensor> in{convInput()};
  auto want = exe->run(in);
  ASSERT_TRUE(want.isOk());
  auto sameResults = [&](const Executable& e) {
    auto got = e.run(in);
    ASSERT_TRUE(got.isOk());
    EXPECT_EQ(std::memcmp((*got)[0].bytes(), (*want)[0].bytes(), (*want)[0].byteSize()), 0);
  };

  auto mapped = load("a.kiln", bytes);
  ASSERT_TRUE(mapped.isOk()) << mapped.status().str();
  EXPECT_NE((*mapped)->libraryCallDetails().find("constant weights prepacked"), std::string::npos)
      << (*mapped)->libraryCallDetails();
  int borrowed = 0, held = 0;
  for (const auto& n : (*mapped)->function().nodes()) {
    if (n->op() != OpCode::Constant) continue;
    borrowed += n->constantData().tensor.isBorrowed();
    held += n->constantData().held;
  }
  EXPECT_EQ(borrowed, 1);  // the scale
  EXPECT_EQ(held, 1);      // the weights
  sameResults(**mapped);
  // The artifact serializes to the same bytes again (its packed weights are the file's).
  EXPECT_EQ((*mapped)->serialize(), bytes);

  auto views = decodeArtifact(bytes, "a");
  ASSERT_TRUE(views.isOk());
  std::string packed(views->sections.at("packed"));
  ASSERT_NE(packed.find(' '), std::string::npos) << packed;
  std::string id = packed.substr(0, packed.find(' '));
  std::string other = id + " dt 3 dims 1 padded 1 offsets 0 offset0 0 strides 1 blocks  at  extra "
                           "0,0,0 bytes 4\n";
  auto otherLayout = load("b.kiln", withSection(bytes, "packed", other));
  ASSERT_FALSE(otherLayout.isOk());
  EXPECT_NE(otherLayout.status().message().find(
                "is stored only in the layout a library kernel chose when the artifact was "
                "written, and here convolution"),
            std::string::npos)
      << otherLayout.status().message();
  EXPECT_NE(otherLayout.status().message().find("compile the model again"), std::string::npos);

  auto malformed =
      load("m.kiln", withSection(bytes, "packed", "x.1 " + other.substr(id.size() + 1)));
  ASSERT_FALSE(malformed.isOk());
  EXPECT_NE(malformed.status().message().find("m.kiln: malformed packed-weights entry 'x.1 dt 3"),
            std::string::npos)
      << malformed.status().message();

  for (const std::string& section : {std::string("blob"), "packed." + id}) {
    std::string flipped = bytes;
    size_t at = static_cast<size_t>(views->sections.at(section).data() - bytes.data());
    flipped[at + views->sections.at(section).size() / 2] ^= 1;
    auto refused = load("c.kiln", flipped);
    ASSERT_FALSE(refused.isOk()) << section;
    EXPECT_NE(refused.status().message().find("c.kiln: corrupted: checksum"), std::string::npos)
        << refused.status().message();
    EXPECT_NE(refused.status().message().find("of section '" + section + "'"), std::string::npos)
        << refused.status().message();
  }
  std::filesystem::remove_all(dir);
}

// The build key is the fingerprint of the file holding Kiln's code: here the test executable,
// which links Kiln statically. A rebuild changes that file, hence every compile-cache key.
TEST(SourceKey, BuildKeyIsTheFingerprintOfKilnsCode) {
  std::string dir = freshTempDir("kiln-build-key-test-");
  std::string why;
  std::string key = buildKey(dir, &why);
  EXPECT_TRUE(why.empty()) << why;
  auto exe = hashFile(std::filesystem::read_symlink("/proc/self/exe").string());
  ASSERT_TRUE(exe.isOk()) << exe.status().str();
  EXPECT_EQ(key, "kiln " + *exe);
  EXPECT_EQ(buildKey(dir), key);
  EXPECT_EQ(buildKey(""), key);
  std::filesystem::remove_all(dir);
}

// A source file's fingerprint is recorded in the cache directory and reused while the file's
// identity and timestamps are unchanged; a write or a replacement makes it read the file again.
// A file changed less than minAgeSeconds ago is not recorded.
TEST(SourceKey, RecordsFingerprintsOfUnchangedFiles) {
  std::string dir = freshTempDir("kiln-source-key-test-");
  std::string cache = dir + "/cache", path = dir + "/m.onnx";
  std::filesystem::create_directories(dir);
  auto write = [](const std::string& p, const std::string& content) {
    std::ofstream(p, std::ios::binary | std::ios::trunc) << content;
  };
  write(path, "first version");
  auto hashed = hashFile(path);
  ASSERT_TRUE(hashed.isOk());
  auto key = sourceFileKey("onnx", path, cache, 0.0);
  ASSERT_TRUE(key.isOk()) << key.status().str();
  EXPECT_EQ(*key, "onnx " + *hashed);
  // The record is what a second call uses: a record changed by hand shows through.
  std::vector<std::filesystem::path> records;
  for (const auto& e : std::filesystem::directory_iterator(cache + "/sources"))
    records.push_back(e.path());
  ASSERT_EQ(records.size(), 1u);
  std::string text;
  {
    std::ifstream in(records[0]);
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  write(records[0].string(), text.substr(0, text.rfind("onnx ")) + "onnx feedfacefeedface\n");
  EXPECT_EQ(*sourceFileKey("onnx", path, cache, 0.0), "onnx feedfacefeedface");
  EXPECT_EQ(*sourceFileKey("kir", path, cache, 0.0), "kir " + *hashed);  // another kind
  // A write of the same size, a clock tick later: read again.
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  write(path, "other version");
  auto changed = sourceFileKey("onnx", path, cache, 0.0);
  ASSERT_TRUE(changed.isOk());
  EXPECT_EQ(*changed, "onnx " + *hashFile(path));
  EXPECT_NE(*changed, "onnx " + *hashed);
  // A replacement (a new inode).
  write(dir + "/new.onnx", "third version");
  std::filesystem::rename(dir + "/new.onnx", path);
  EXPECT_EQ(*sourceFileKey("onnx", path, cache, 0.0), "onnx " + *hashFile(path));
  // A file younger than minAgeSeconds is hashed but not recorded.
  write(dir + "/young.onnx", "young");
  EXPECT_EQ(*sourceFileKey("onnx", dir + "/young.onnx", cache, 3600.0),
            "onnx " + *hashFile(dir + "/young.onnx"));
  size_t count = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(cache + "/sources"))
    ++count;
  EXPECT_EQ(count, 1u);
  // Without a cache directory nothing is recorded; a missing file is an error.
  EXPECT_EQ(*sourceFileKey("onnx", path, "", 0.0), "onnx " + *hashFile(path));
  auto missing = sourceFileKey("onnx", dir + "/none.onnx", cache, 0.0);
  ASSERT_FALSE(missing.isOk());
  EXPECT_NE(missing.status().str().find("no such file"), std::string::npos);
  std::filesystem::remove_all(dir);
}

// Hash64 and ChunkedHash must give the same value however a stream is split (the checksums of
// artifacts written whole are checked piece by piece): pieces of odd sizes, pieces that end
// inside a 32-byte stripe or a 4 MiB chunk, and empty pieces. And the checksum must see every
// byte: changing any chunk changes it.
TEST(ChunkedHash, SameHoweverSplit) {
  const size_t chunk = ChunkedHash::kChunk;
  std::string data(2 * chunk + 12345, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>((i * 2654435761u) >> 13);
  for (size_t size : {size_t(0), size_t(7), size_t(31), size_t(32), size_t(100000), chunk - 1,
                      chunk, chunk + 1, 2 * chunk, data.size()}) {
    std::string_view bytes(data.data(), size);
    const uint64_t whole = chunkedHash64(bytes);
    for (size_t step : {size_t(1) << 18, size_t(1000003), size_t(13)}) {
      if (step == 13 && size > 100000) continue;  // byte-sized pieces: small streams only
      ChunkedHash streamed;
      Hash64 plain(5);
      for (size_t at = 0; at < size; at += step) {
        streamed.update(bytes.substr(at, step));
        streamed.update({});
        plain.update(bytes.substr(at, step));
      }
      EXPECT_EQ(streamed.finish(), whole) << "size " << size << ", pieces of " << step;
      EXPECT_EQ(plain.finish(), hash64(bytes, 5)) << "size " << size << ", pieces of " << step;
    }
  }
  // The values themselves do not change between versions: artifacts on disk carry them.
  EXPECT_EQ(hex64(hash64("")), "ef46db3751d8e999");
  EXPECT_EQ(hex64(hash64("kiln artifact checksum, 41 bytes long....")), "ff2d75cba1dc4727");
  const uint64_t whole = chunkedHash64(data);
  EXPECT_EQ(hex64(whole), "de335efc80e9722b");
  std::string changed = data;
  for (size_t at : {size_t(0), chunk - 1, chunk, 2 * chunk + 5, data.size() - 1}) {
    changed[at] ^= 1;
    EXPECT_NE(chunkedHash64(changed), whole) << "byte " << at;
    changed[at] ^= 1;
  }
}

// MappedFile::read gives the bytes of a part of the file, in order, in pieces, the same bytes
// the mapping shows; a range outside the mapping is a broken invariant, not an error.
TEST(MappedFile, ReadsRangesThroughTheFile) {
  std::string dir = ::testing::TempDir() + "kiln_mapped_read";
  std::filesystem::create_directories(dir);
  std::string data(1 << 20, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>((i * 2654435761u) >> 11);
  { std::ofstream(dir + "/f", std::ios::binary) << data; }
  auto file = MappedFile::open(dir + "/f");
  ASSERT_TRUE(file.isOk()) << file.status().str();
  std::string_view bytes = file->bytes();
  ASSERT_EQ(bytes, data);
  for (auto [from, size] :
       {std::pair<size_t, size_t>{0, data.size()}, {12345, 700001}, {7, 0}, {data.size() - 3, 3}}) {
    std::string got;
    size_t pieces = 0;
    ASSERT_TRUE(file->read(bytes.substr(from, size),
                           [&](std::string_view p) {
                             got += p;
                             ++pieces;
                           })
                    .isOk());
    EXPECT_EQ(got, data.substr(from, size)) << "from " << from;
    EXPECT_EQ(pieces, (size + (256 << 10) - 1) / (256 << 10)) << "from " << from;
  }
  std::string elsewhere = "not in the file";
  EXPECT_DEATH((void)file->read(elsewhere, [](std::string_view) {}), "not part of the file");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kiln::runtime
