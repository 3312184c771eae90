// No library call of a CPU program runs a library's reference implementation or the
// interpreter's kernel (issue 19, "no silent slow paths"): for the convolution shapes whose
// calls used to (one input channel, transposed, dilated, grouped, 1-D, 3-D), the schedule's
// choice names a fast oneDNN implementation or Kiln's loops (choose_library_calls.h), and the
// values agree with the interpreter.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "interp/interpreter.h"
#include "ir/text/text.h"
#include "runtime/executable.h"

namespace kiln::runtime {
namespace {

// A constant %name of type f32[dims] with small values that vary (no two neighbours equal), as
// a line of .kir: the weights a model holds.
std::string constantLine(const std::string& name, const std::vector<int64_t>& dims) {
  int64_t count = 1;
  std::string type;
  for (int64_t d : dims) {
    count *= d;
    type += (type.empty() ? "" : ",") + std::to_string(d);
  }
  std::string s = "  %" + name + " = f32[" + type + "] constant() {value = [";
  for (int64_t i = 0; i < count; ++i)
    s += (i ? ", " : "") + std::to_string(0.25 * std::sin(0.7 * static_cast<double>(i) + 0.3));
  return s + "]}\n";
}

struct Case {
  std::string name;
  std::string text;      // a .kir module
  std::string expected;  // what the call's note must say: its op and formulation
};

// `body` (the lines after the constants) in a function of input %x: f32[input] returning
// f32[output], with constant weights %w: f32[weights] and a bias %b: f32[channels].
std::string program(const std::string& input, const std::string& output,
                    const std::vector<int64_t>& weights, int64_t channels,
                    const std::string& body) {
  return "func @main(%x: f32[" + input + "]) -> (f32[" + output + "]) {\n" +
         constantLine("w", weights) + constantLine("b", {channels}) + body + "}\n";
}

// A convolution %c of %x and %w with `attrs`, its bias added and a relu: the epilogue a model's
// layer has, which the call takes as post-ops where the library can.
std::string layer(const std::string& output, size_t rank, const std::string& attrs) {
  std::string bdims = "[" + std::to_string(rank - 1) + "]";
  return "  %c = f32[" + output + "] convolution(%x, %w) {" + attrs + "}\n" + "  %bb = f32[" +
         output + "] broadcast_in_dim(%b) {dims = " + bdims + "}\n" + "  %a = f32[" + output +
         "] add(%c, %bb)\n" + "  %z = f32[] constant() {value = [0.0]}\n" + "  %zb = f32[" +
         output + "] broadcast_in_dim(%z) {dims = []}\n" + "  %y = f32[" + output +
         "] max(%a, %zb)\n" + "  return %y\n";
}

std::vector<Case> cases() {
  const std::string d1 = "dimension_numbers = \"b0f_0io->b0f\"";
  const std::string d2 = "dimension_numbers = \"b01f_01io->b01f\"";
  const std::string d3 = "dimension_numbers = \"b012f_012io->b012f\"";
  std::vector<Case> c;
  c.push_back({"one input channel, 3x3",
               program("1,20,20,1", "1,20,20,8", {3, 3, 1, 8}, 8,
                       layer("1,20,20,8", 4, "padding_low = [1, 1], padding_high = [1, 1], " + d2)),
               "convolution: oneDNN convolution"});
  c.push_back({"1-D, one input channel, window 16, stride 4",
               program("1,200,1", "1,47,16", {16, 1, 16}, 16,
                       layer("1,47,16", 3, "window_strides = [4], " + d1)),
               "convolution: oneDNN convolution"});
  c.push_back({"1-D, dilation 4",
               program("1,100,16", "1,100,16", {3, 16, 16}, 16,
                       layer("1,100,16", 3,
                             "padding_low = [4], padding_high = [4], rhs_dilation = [4], " + d1)),
               "convolution: oneDNN convolution"});
  // Groups of 4 channels: Kiln's grouped kernel where the CPU has AVX-512 (grouped_conv_kernel.h),
  // else oneDNN's; groups of 8: oneDNN's.
  c.push_back({"grouped, 4 groups of 4",
               program("1,10,10,16", "1,10,10,16", {3, 3, 4, 16}, 16,
                       layer("1,10,10,16", 4,
                             "padding_low = [1, 1], padding_high = [1, 1], "
                             "feature_group_count = 4, " +
                                 d2)),
               __builtin_cpu_supports("avx512f") ? "convolution: Kiln grouped convolution"
                                                 : "convolution: oneDNN convolution"});
  c.push_back({"grouped, 2 groups of 8",
               program("1,10,10,16", "1,10,10,16", {3, 3, 8, 16}, 16,
                       layer("1,10,10,16", 4,
                             "padding_low = [1, 1], padding_high = [1, 1], "
                             "feature_group_count = 2, " +
                                 d2)),
               "convolution: oneDNN convolution"});
  c.push_back(
      {"3-D",
       program("1,6,8,8,8", "1,6,8,8,16", {3, 3, 3, 8, 16}, 16,
               layer("1,6,8,8,16", 5, "padding_low = [1, 1, 1], padding_high = [1, 1, 1], " + d3)),
       "convolution: oneDNN convolution"});
  c.push_back(
      {"3-D, one input channel",
       program("1,6,8,8,1", "1,6,8,8,8", {3, 3, 3, 1, 8}, 8,
               layer("1,6,8,8,8", 5, "padding_low = [1, 1, 1], padding_high = [1, 1, 1], " + d3)),
       "convolution: oneDNN convolution"});
  // ConvTranspose2d(16, 8, 2, stride=2) and (16, 8, 3, stride=2, padding=1, output_padding=1)
  // as the importer writes them: lhs_dilation 2, padding window-1-p (and + output_padding high).
  // Its window is its stride: convolution-to-matmul makes it a product and a depth-to-space.
  c.push_back({"transposed, 2x2 stride 2",
               program("1,8,8,16", "1,16,16,8", {2, 2, 16, 8}, 8,
                       layer("1,16,16,8", 4,
                             "padding_low = [1, 1], padding_high = [1, 1], "
                             "lhs_dilation = [2, 2], " +
                                 d2)),
               "dot_general: oneDNN matmul (64x16x32"});
  c.push_back({"transposed, 3x3 stride 2, output padding 1",
               program("1,8,8,16", "1,16,16,8", {3, 3, 16, 8}, 8,
                       layer("1,16,16,8", 4,
                             "padding_low = [1, 1], padding_high = [2, 2], "
                             "lhs_dilation = [2, 2], " +
                                 d2)),
               "convolution: oneDNN deconvolution"});
  c.push_back({"transposed, grouped",
               program("1,8,8,16", "1,16,16,16", {2, 2, 8, 16}, 16,
                       layer("1,16,16,16", 4,
                             "padding_low = [1, 1], padding_high = [1, 1], "
                             "lhs_dilation = [2, 2], feature_group_count = 2, " +
                                 d2)),
               "convolution: oneDNN deconvolution"});
  c.push_back({"transposed, 1-D, window 4 stride 2",
               program("1,50,16", "1,100,8", {4, 16, 8}, 8,
                       layer("1,100,8", 3,
                             "padding_low = [2], padding_high = [2], lhs_dilation = [2], " + d1)),
               "convolution: oneDNN deconvolution"});
  // A transposed convolution whose kernel is not a constant: no deconvolution (its kernel would
  // be flipped on every run), so Kiln's loops, never the interpreter's kernel.
  c.push_back({"transposed, kernel a parameter",
               "func @main(%x: f32[1,8,8,16], %w: f32[2,2,16,8]) -> (f32[1,16,16,8]) {\n"
               "  %y = f32[1,16,16,8] convolution(%x, %w) {padding_low = [1, 1], "
               "padding_high = [1, 1], lhs_dilation = [2, 2], " +
                   d2 + "}\n  return %y\n}\n",
               "convolution: Kiln's loops"});
  return c;
}

// Each line of `calls` (a description per call) is Kiln's loops, a kernel of Kiln's own ("Kiln
// grouped convolution", "Kiln lstm") or a oneDNN kernel whose implementation (", IMPL," where
// IMPL is "name:isa", e.g. "brgconv:avx512_core") is not a reference one; none is the
// interpreter's kernel ("reference kernel (why)").
void expectNoSlowCall(const std::string& calls, const std::string& what) {
  const std::regex impl(", ([a-z0-9_]+(:[a-z0-9_]+)+)[,)]");
  const std::regex slow("^(ref|ref_[a-z0-9_]+|simple|simple_[a-z0-9_]+):");
  for (size_t at = 0, end; (end = calls.find('\n', at)) != std::string::npos; at = end + 1) {
    const std::string line = calls.substr(at, end - at);
    EXPECT_EQ(line.find(": reference kernel ("), std::string::npos) << what << ": " << line;
    if (line.find("Kiln's loops") != std::string::npos) continue;
    if (std::regex_search(line, std::regex(": Kiln [a-z]"))) continue;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(line, m, impl)) << what << ": no implementation in " << line;
    EXPECT_FALSE(std::regex_search(m[1].str(), slow)) << what << ": " << line;
  }
}

TEST(NoSlowLibraryCalls, ConvolutionShapesTakeFastFormulations) {
  std::mt19937 rng(19);
  std::uniform_real_distribution<double> uf(-1.0, 1.0);
  for (const Case& c : cases()) {
    for (int threads : {1, 2}) {
      std::string what = c.name + ", " + std::to_string(threads) + " threads";
      auto parsed = parseModule(c.text, "no-slow-calls.kir");
      ASSERT_TRUE(parsed.isOk()) << what << ": " << parsed.status().str();
      const Function& f = *(*parsed)->entry();
      std::vector<Tensor> inputs;
      for (size_t i = 0; i < f.numParameters(); ++i) {
        Tensor x(DType::F32, f.parameter(i)->type().staticDims());
        for (int64_t e = 0; e < x.numElements(); ++e) x.setDouble(e, uf(rng));
        inputs.push_back(std::move(x));
      }
      auto want = interpret(f, inputs);
      ASSERT_TRUE(want.isOk()) << what << ": " << want.status().str();
      CompileOptions o;
      o.threads = threads;
      auto exe = Executable::compile(std::move(*parsed), o);
      ASSERT_TRUE(exe.isOk()) << what << ": " << exe.status().str();
      std::string notes;
      for (const kernel::Kernel& k : (*exe)->kernels())
        for (const std::string& n : k.notes) notes += k.name + ": " + n + "\n";
      EXPECT_NE(notes.find(c.expected), std::string::npos) << what << ":\n" << notes;
      expectNoSlowCall(notes, what + " (schedule)");
      expectNoSlowCall((*exe)->libraryCallDetails(), what + " (library calls)");
      auto got = (*exe)->run(inputs);
      ASSERT_TRUE(got.isOk()) << what << ": " << got.status().str();
      ASSERT_EQ(got->size(), 1u);
      const Tensor &g = (*got)[0], &w = (*want)[0];
      ASSERT_EQ(g.type(), w.type()) << what;
      double scale = 1;
      for (int64_t e = 0; e < w.numElements(); ++e)
        scale = std::max(scale, std::abs(w.getDouble(e)));
      for (int64_t e = 0; e < w.numElements(); ++e)
        ASSERT_LE(std::abs(g.getDouble(e) - w.getDouble(e)), 1e-4 * scale)
            << what << " element " << e << ": " << g.getDouble(e) << " vs " << w.getDouble(e);
    }
  }
}

}  // namespace
}  // namespace kiln::runtime
