// Guards and recompiles (runtime/guards.h, Executable::run): inputs of other sizes in a symbolic
// dim of the source compile it again for them, once per size, from any number of threads; with
// recompile off that is an error naming the dim and both sizes; other differences stay errors.
// On the interpreter target, which every build has; the CPU target where the build has it.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <optional>
#include <thread>
#include <unistd.h>

#include "ir/text/text.h"
#include "runtime/executable.h"
#include "runtime/guards.h"
#include "runtime/target.h"

namespace kiln::runtime {
namespace {

const bool kRegistered = [] {
  registerBuiltinTargets();
  return true;
}();

// y = x * 2 + b: b's 4 is static, x's N is the guarded symbol.
constexpr const char* kModel = R"(func @main(%x: f32[N,4], %b: f32[4]) -> (f32[N,4]) {
  %two = f32[] constant() {value = [2.0]}
  %t = f32[N,4] broadcast_in_dim(%two) {dims = []}
  %bb = f32[N,4] broadcast_in_dim(%b) {dims = [1]}
  %m = f32[N,4] mul(%x, %t)
  %y = f32[N,4] add(%m, %bb)
  return %y
}
)";

std::unique_ptr<Module> model() {
  auto m = parseModule(kModel, "guards.kir");
  KILN_CHECK(m.isOk(), m.status().str());
  return std::move(*m);
}

std::vector<Tensor> inputs(int64_t n, float base = 0) {
  Tensor x(DType::F32, {n, 4}), b(DType::F32, {4});
  for (int64_t i = 0; i < n * 4; ++i) x.setDouble(i, base + static_cast<double>(i));
  for (int64_t i = 0; i < 4; ++i) b.setDouble(i, 0.5 * static_cast<double>(i));
  return {x, b};
}

// x * 2 + b, checked element by element.
void expectResult(const std::vector<Tensor>& in, const std::vector<Tensor>& out) {
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].dims(), in[0].dims());
  for (int64_t i = 0; i < in[0].numElements(); ++i)
    EXPECT_EQ(out[0].getDouble(i), in[0].getDouble(i) * 2 + in[1].getDouble(i % 4)) << i;
}

std::unique_ptr<Executable> compileFor(int64_t n, const std::string& backend = "interp",
                                       bool recompile = true) {
  CompileOptions o;
  o.backend = backend;
  o.dims = {{"N", n}};
  o.recompile = recompile;
  o.threads = 1;
  auto exe = Executable::compile(model(), o);
  KILN_CHECK(exe.isOk(), exe.status().str());
  return std::move(*exe);
}

TEST(Guards, OfTheSourcesSymbolicDims) {
  ASSERT_TRUE(kRegistered);
  auto exe = compileFor(2);
  const Guards& g = exe->guards();
  ASSERT_EQ(g.dims.size(), 1u);
  EXPECT_EQ(g.dims[0].symbol, "N");
  EXPECT_EQ(g.dims[0].value, 2);
  ASSERT_EQ(g.dims[0].checks.size(), 1u);
  EXPECT_EQ(g.dims[0].checks[0], std::make_pair(size_t(0), size_t(0)));
  EXPECT_EQ(describeGuards(g, {"x", "b"}), "N = 2: input 'x' dim 0\n");
  EXPECT_EQ(exe->inputTypes()[0].str(), "f32[N,4]");
  EXPECT_EQ(exe->inputTypes()[1].str(), "f32[4]");
  EXPECT_EQ(exe->function().parameter(0)->type().str(), "f32[2,4]");
}

TEST(Guards, OtherSizeRecompilesOnceAndSwitchingBackDoesNot) {
  auto exe = compileFor(2);
  for (int64_t n : {2, 5, 5, 2, 3, 5, 0}) {
    std::vector<Tensor> in = inputs(n);
    auto out = exe->run(in);
    ASSERT_TRUE(out.isOk()) << n << ": " << out.status().str();
    expectResult(in, *out);
  }
  EXPECT_EQ(exe->recompiles(), 3);  // 5, 3 and 0; 2 is the first compile
  EXPECT_EQ(exe->specializations().size(), 3u);
}

TEST(Guards, RecompileOffIsAnErrorNamingTheDim) {
  auto exe = compileFor(2, "interp", /*recompile=*/false);
  auto out = exe->run(inputs(7));
  ASSERT_FALSE(out.isOk());
  EXPECT_EQ(out.status().message(),
            "input 0 ('x') dim 0: N is 7, but the executable was compiled for N=2, and "
            "recompiling is off");
  EXPECT_EQ(exe->recompiles(), 0);
  EXPECT_TRUE(exe->run(inputs(2)).isOk());
}

TEST(Guards, OtherDifferencesStayErrors) {
  auto exe = compileFor(2);
  std::vector<Tensor> in = inputs(2);
  in[1] = Tensor(DType::F32, {5});
  auto out = exe->run(in);
  ASSERT_FALSE(out.isOk());
  EXPECT_EQ(out.status().message(), "input 1 ('b'): expected f32[4], got f32[5]");
  in = inputs(3);
  in[0] = Tensor(DType::F64, {3, 4});
  out = exe->run(in);
  ASSERT_FALSE(out.isOk());
  EXPECT_EQ(out.status().message(), "input 0 ('x'): expected f32[2,4], got f64[3,4]");
  EXPECT_EQ(exe->recompiles(), 0);
}

TEST(Guards, OneSymbolInTwoInputsMustAgree) {
  auto m = parseModule(R"(func @main(%a: f32[N,3], %b: f32[N,3]) -> (f32[N,3]) {
  %0 = f32[N,3] mul(%a, %b)
  return %0
}
)",
                       "two.kir");
  ASSERT_TRUE(m.isOk()) << m.status().str();
  CompileOptions o;
  o.backend = "interp";
  o.dims = {{"N", 2}};
  auto exe = Executable::compile(std::move(*m), o);
  ASSERT_TRUE(exe.isOk()) << exe.status().str();
  auto out =
      (*exe)->run(std::vector<Tensor>{Tensor(DType::F32, {4, 3}), Tensor(DType::F32, {5, 3})});
  ASSERT_FALSE(out.isOk());
  EXPECT_EQ(out.status().message(), "input 1 ('b'): dim N is 5, but 4 in input 0 ('a')");
  out = (*exe)->run(std::vector<Tensor>{Tensor(DType::F32, {4, 3}), Tensor(DType::F32, {4, 3})});
  EXPECT_TRUE(out.isOk()) << out.status().str();
}

// Eight threads run four sizes on one executable at once: each size is compiled once (a thread
// that finds it being compiled waits), and every result is right.
TEST(Guards, RecompilesAreSafeAcrossThreads) {
  auto exe = compileFor(1);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int k = 0; k < 25; ++k) {
        int64_t n = 1 + (t + k) % 4;
        std::vector<Tensor> in = inputs(n, static_cast<float>(t * 100 + k));
        auto out = exe->run(in);
        if (!out.isOk() || (*out)[0].dims() != in[0].dims()) {
          ++failures;
          continue;
        }
        for (int64_t i = 0; i < in[0].numElements(); ++i)
          if ((*out)[0].getDouble(i) != in[0].getDouble(i) * 2 + in[1].getDouble(i % 4)) ++failures;
      }
    });
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(exe->recompiles(), 3);  // sizes 2, 3 and 4
}

TEST(Guards, AtMostEightSpecializationsAreKept) {
  auto exe = compileFor(1);
  for (int64_t n = 2; n <= 12; ++n) ASSERT_TRUE(exe->run(inputs(n)).isOk()) << n;
  EXPECT_EQ(exe->specializations().size(), 8u);
  EXPECT_EQ(exe->recompiles(), 11);
  ASSERT_TRUE(exe->run(inputs(2)).isOk());  // evicted: compiled again
  EXPECT_EQ(exe->recompiles(), 12);
}

// The guards travel in artifacts; an artifact that records no source file cannot recompile, and
// says why; given a source it does.
TEST(Guards, ArtifactsKeepTheirGuards) {
  auto exe = compileFor(2);
  auto loaded = Executable::load(exe->serialize(), "g.kiln");
  ASSERT_TRUE(loaded.isOk()) << loaded.status().str();
  const Guards& g = (*loaded)->guards();
  ASSERT_EQ(g.dims.size(), 1u);
  EXPECT_EQ(g.dims[0].symbol, "N");
  EXPECT_EQ(g.dims[0].value, 2);
  auto out = (*loaded)->run(inputs(3));
  ASSERT_FALSE(out.isOk());
  EXPECT_EQ(out.status().message(),
            "input 0 ('x') dim 0: N is 3, but the executable was compiled for N=2, and it "
            "cannot compile again: its source is not known");
  ModuleSource s;
  s.name = "guards.kir";
  s.load = [] { return StatusOr<std::unique_ptr<Module>>(model()); };
  (*loaded)->setSource(s);
  std::vector<Tensor> in = inputs(3);
  out = (*loaded)->run(in);
  ASSERT_TRUE(out.isOk()) << out.status().str();
  expectResult(in, *out);
}

TEST(Guards, MalformedSectionIsAnError) {
  std::vector<TensorType> compiled{TensorType::of(DType::F32, {2, 4})};
  auto g = parseGuards("0 0 N\n", compiled);
  ASSERT_TRUE(g.isOk()) << g.status().str();
  EXPECT_EQ(g->dims[0].value, 2);
  for (const char* bad : {"0 9 N\n", "3 0 N\n", "x 0 N\n", "0 0\n"})
    EXPECT_FALSE(parseGuards(bad, compiled).isOk()) << bad;
}

// Through the compile cache: a size compiled once is an entry that a fresh executable's
// recompile loads instead of compiling.
TEST(Guards, RecompilesGoThroughTheCompileCache) {
  std::string dir =
      (std::filesystem::temp_directory_path() / ("kiln-guards-cache-" + std::to_string(::getpid())))
          .string();
  std::filesystem::remove_all(dir);
  // `source`: none (a copy of the module is kept), or one that cannot load (so that a recompile
  // that works came from the cache).
  auto compile = [&](std::optional<ModuleSource> source) {
    CompileOptions o;
    o.backend = "interp";
    o.dims = {{"N", 2}};
    o.cacheDir = dir;
    o.sourceKey = "guards-test " + std::to_string(::getpid());
    auto exe = Executable::compile(model(), o, source);
    KILN_CHECK(exe.isOk(), exe.status().str());
    return std::move(*exe);
  };
  auto entries = [&] {
    int n = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir))
      n += e.path().extension() == ".kiln";
    return n;
  };
  auto first = compile(std::nullopt);
  ASSERT_TRUE(first->run(inputs(6)).isOk());
  EXPECT_EQ(entries(), 2);  // N=2 and N=6
  ModuleSource gone;
  gone.name = "gone.kir";
  gone.load = [] {
    return StatusOr<std::unique_ptr<Module>>(Status::error("gone.kir: no such file"));
  };
  auto second = compile(gone);  // a cache hit for N=2
  EXPECT_EQ(second->cacheReport().rfind("hit: ", 0), 0u) << second->cacheReport();
  std::vector<Tensor> in = inputs(6);
  auto out = second->run(in);
  ASSERT_TRUE(out.isOk()) << out.status().str();
  expectResult(in, *out);
  EXPECT_EQ(entries(), 2);
  out = second->run(inputs(7));  // not in the cache: the source is needed
  ASSERT_FALSE(out.isOk());
  EXPECT_EQ(out.status().message(),
            "recompiling for dim N=7 (compiled for N=2): gone.kir: no such file");
  std::filesystem::remove_all(dir);
}

TEST(Guards, CpuTargetRecompiles) {
  if (!findTarget("cpu").isOk()) GTEST_SKIP() << "this build has no cpu target";
  auto exe = compileFor(2, "cpu");
  for (int64_t n : {2, 9, 2, 9}) {
    std::vector<Tensor> in = inputs(n);
    auto out = exe->run(in);
    ASSERT_TRUE(out.isOk()) << out.status().str();
    expectResult(in, *out);
  }
  EXPECT_EQ(exe->recompiles(), 1);
}

}  // namespace
}  // namespace kiln::runtime
