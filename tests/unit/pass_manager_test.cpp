// The pass manager (instrumentation: verification, dumps, timing, printing) and pass specs.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ir/text/text.h"
#include "passes/pass_manager.h"

namespace kiln {
namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

std::unique_ptr<Module> parse(const std::string& text) {
  auto m = parseModule(text, "test.kir");
  EXPECT_TRUE(m.isOk()) << m.status().str();
  return m ? std::move(*m) : nullptr;
}

// x * 1 + 0, with a dead exp: algebraic-simplify and dce both have work.
const char* kProgram = R"(func @main(%x: f32[3]) -> (f32[3]) {
  %one = f32[3] constant() {value = [1.0, 1.0, 1.0]}
  %m = f32[3] mul(%x, %one)
  %dead = f32[3] exp(%x)
  return %m
}
)";

std::string readFile(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A fresh empty folder under the system's temp folder.
std::filesystem::path freshDir(const std::string& name) {
  auto dir =
      std::filesystem::temp_directory_path() /
      ("kiln-pm-" + name + "-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  std::filesystem::remove_all(dir);
  return dir;
}

TEST(PassManager, RunsPassesInOrderAndReportsChange) {
  auto m = parse(kProgram);
  PassManager pm;
  ASSERT_TRUE(pm.addPass("algebraic-simplify").isOk());
  ASSERT_TRUE(pm.addPass("dce").isOk());
  auto changed = pm.run(*m);
  ASSERT_TRUE(changed.isOk()) << changed.status().str();
  EXPECT_TRUE(*changed);
  // x * 1 -> x, then the constant and the exp are dead: only the parameter is left.
  EXPECT_EQ(m->entry()->numNodes(), 1u);
  EXPECT_EQ(m->entry()->outputs()[0], m->entry()->parameter(0));
  auto again = pm.run(*m);
  ASSERT_TRUE(again.isOk());
  EXPECT_FALSE(*again) << "a second run has nothing left to do";
}

TEST(PassManager, DumpDirHoldsNumberedParseableModules) {
  auto dir = freshDir("dump");
  PassManagerOptions o;
  o.dumpDir = dir.string();
  PassManager pm(o);
  ASSERT_TRUE(pm.addPass("algebraic-simplify").isOk());
  ASSERT_TRUE(pm.addPass("dce").isOk());
  auto m = parse(kProgram);
  ASSERT_TRUE(pm.run(*m).isOk());
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names,
            (std::vector<std::string>{"00-input.kir", "01-algebraic-simplify.kir", "02-dce.kir"}));
  // Each dump parses back; the input dump still has the mul, the last one has nothing left.
  std::string input = readFile(dir / "00-input.kir");
  EXPECT_TRUE(contains(input, "mul(%x, %one)")) << input;
  auto last = parseModule(readFile(dir / "02-dce.kir"), "02-dce.kir");
  ASSERT_TRUE(last.isOk()) << last.status().str();
  EXPECT_EQ((*last)->entry()->numNodes(), 1u);
  std::filesystem::remove_all(dir);
}

TEST(PassManager, DumpIntoAnUnwritablePlaceIsAnError) {
  PassManagerOptions o;
  o.dumpDir = "/proc/kiln-cannot-write-here";
  PassManager pm(o);
  ASSERT_TRUE(pm.addPass("dce").isOk());
  auto m = parse(kProgram);
  auto r = pm.run(*m);
  ASSERT_FALSE(r.isOk());
  EXPECT_TRUE(contains(r.status().message(), "dump")) << r.status().str();
}

TEST(PassManager, TimingReportHasOneRowPerPass) {
  PassManagerOptions o;
  o.timePasses = true;
  PassManager pm(o);
  auto m = parse(kProgram);
  for (const char* p : {"algebraic-simplify", "dce", "algebraic-simplify"})
    ASSERT_TRUE(pm.runPass(p, *m).isOk());
  std::string report = pm.timingReport();
  EXPECT_TRUE(contains(report, "pass")) << report;
  EXPECT_TRUE(contains(report, "total")) << report;
  // One row per pass name, counting its runs: algebraic-simplify ran twice and changed once.
  std::istringstream lines(report);
  std::string line, simplifyRow;
  int rows = 0;
  while (std::getline(lines, line)) {
    ++rows;
    if (line.rfind("algebraic-simplify", 0) == 0) simplifyRow = line;
  }
  EXPECT_EQ(rows, 4) << report;  // header, two passes, total
  std::istringstream row(simplifyRow);
  std::string name;
  int runs = 0, changed = 0;
  row >> name >> runs >> changed;
  EXPECT_EQ(runs, 2) << report;
  EXPECT_EQ(changed, 1) << report;
}

TEST(PassManager, NoTimingReportUnlessAsked) {
  PassManager pm;
  auto m = parse(kProgram);
  ASSERT_TRUE(pm.runPass("dce", *m).isOk());
  EXPECT_EQ(pm.timingReport(), "");
}

TEST(PassManager, PrintAfterNamedPassesOnly) {
  std::ostringstream out;
  PassManagerOptions o;
  o.printAfter = {"dce"};
  o.printStream = &out;
  PassManager pm(o);
  auto m = parse(kProgram);
  ASSERT_TRUE(pm.runPass("algebraic-simplify", *m).isOk());
  EXPECT_EQ(out.str(), "") << "algebraic-simplify was not asked for";
  ASSERT_TRUE(pm.runPass("dce", *m).isOk());
  EXPECT_TRUE(contains(out.str(), "IR after dce")) << out.str();
  EXPECT_TRUE(contains(out.str(), "func @main")) << out.str();
}

// A pass that breaks the IR: gives a value a type its op does not produce.
class BreakingPass : public Pass {
 public:
  std::string name() const override { return "break-types"; }
  std::string description() const override { return "test pass"; }
  StatusOr<bool> run(Module& m) override {
    for (const auto& n : m.entry()->nodes())
      if (n->op() == OpCode::Mul) n->result()->setType(TensorType::of(DType::F32, {4}));
    return true;
  }
};

TEST(PassManager, VerifyEachNamesThePassThatBrokeTheModule) {
  PassManagerOptions o;
  o.verifyEach = true;
  PassManager pm(o);
  pm.addPass(std::make_unique<BreakingPass>());
  auto m = parse(kProgram);
  auto r = pm.run(*m);
  ASSERT_FALSE(r.isOk());
  EXPECT_TRUE(contains(r.status().message(), "after pass 'break-types'")) << r.status().str();
}

TEST(PassSpec, OptionsAreParsedForPassesThatTakeThem) {
  auto s = createPassFromSpec("specialize-shapes=N=2");
  ASSERT_TRUE(s.isOk()) << s.status().str();
  EXPECT_EQ((*s)->name(), "specialize-shapes");
  auto m =
      parse("func @main(%x: f32[N,4]) -> (f32[N,4]) {\n  %y = f32[N,4] tanh(%x)\n  return %y\n}\n");
  auto changed = (*s)->run(*m);
  ASSERT_TRUE(changed.isOk()) << changed.status().str();
  EXPECT_TRUE(*changed);
  EXPECT_EQ(m->entry()->outputs()[0]->type(), TensorType::of(DType::F32, {2, 4}));

  auto l = createPassFromSpec("layout-assignment=nchw");
  ASSERT_TRUE(l.isOk()) << l.status().str();
  EXPECT_EQ((*l)->name(), "layout-assignment");
}

TEST(PassSpec, BadSpecsAreErrors) {
  struct Case {
    const char* spec;
    const char* message;
  } cases[] = {
      {"no-such-pass", "unknown pass 'no-such-pass'"},
      {"dce=fast", "pass 'dce' takes no options"},
      {"specialize-shapes=N", "bad symbol binding 'N'"},
      {"specialize-shapes=N=-1", "bad symbol binding 'N=-1'"},
      {"specialize-shapes=N=1,N=2", "symbol N is bound twice"},
      {"specialize-shapes", "needs bindings"},
      {"layout-assignment=nwhc", "unknown layout target 'nwhc'"},
  };
  for (const Case& c : cases) {
    auto p = createPassFromSpec(c.spec);
    ASSERT_FALSE(p.isOk()) << c.spec;
    EXPECT_TRUE(contains(p.status().message(), c.message)) << c.spec << ": " << p.status().str();
  }
}

TEST(PassRegistry, KnowsThePipelinePasses) {
  std::vector<std::string> names = passNames();
  for (const char* want :
       {"algebraic-simplify", "constant-fold", "cse", "dce", "propagate-shapes",
        "specialize-shapes", "recognize-patterns", "fold-batch-norm", "layout-assignment"})
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
}

}  // namespace
}  // namespace kiln
