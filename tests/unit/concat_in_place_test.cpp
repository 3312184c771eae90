// Concatenations written in place by their producers (fusion/concat_views.h): the CPU backend's
// results match the interpreter's, the plan says which concatenates are in place and why the
// others are not, and the buffer plan gives the slices the concatenation's memory.
//
// Tolerance: 1e-5 * max(1, max |reference|), as in cpu_backend_test.cpp (tanh, exp and the
// convolutions' sums differ from the interpreter's double-precision ones by a few f32 ulps).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "interp/interpreter.h"
#include "ir/text/text.h"
#include "kernel/kernel_ir.h"
#include "runtime/executable.h"

namespace kiln::runtime {
namespace {

struct Checked {
  std::unique_ptr<Executable> exe;
  std::vector<std::string> notes;  // the plan's note per concatenate, in program order
};

// Compiles `text` for the CPU, runs it on random inputs and compares every output with the
// interpreter's.
Checked compileAndCompare(const std::string& text) {
  Checked c;
  auto parsed = parseModule(text, "concat.kir");
  EXPECT_TRUE(parsed.isOk()) << parsed.status().str();
  if (!parsed.isOk()) return c;
  const Function& f = *(*parsed)->entry();
  std::vector<Tensor> inputs;
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (const Node* n : f.parameterNodes()) {
    Tensor t(n->result()->type().dtype(), n->result()->type().staticDims());
    for (int64_t i = 0; i < t.numElements(); ++i) t.setDouble(i, u(rng));
    inputs.push_back(t);
  }
  auto want = interpret(f, inputs);
  EXPECT_TRUE(want.isOk()) << want.status().str();
  CompileOptions o;
  o.threads = 2;
  auto exe = Executable::compile(std::move(*parsed), o);
  EXPECT_TRUE(exe.isOk()) << exe.status().str();
  if (!exe.isOk() || !want.isOk()) return c;
  c.exe = std::move(*exe);
  for (const auto& [n, note] : c.exe->plan().concats.notes) c.notes.push_back(note);
  auto got = c.exe->run(inputs);
  EXPECT_TRUE(got.isOk()) << got.status().str();
  if (!got.isOk()) return c;
  EXPECT_EQ(got->size(), want->size());
  for (size_t o = 0; o < std::min(got->size(), want->size()); ++o) {
    const Tensor &g = (*got)[o], &w = (*want)[o];
    EXPECT_EQ(g.type(), w.type());
    double scale = 1;
    for (int64_t i = 0; i < w.numElements(); ++i)
      scale = std::max(scale, std::fabs(w.getDouble(i)));
    for (int64_t i = 0; i < w.numElements(); ++i)
      EXPECT_NEAR(g.getDouble(i), w.getDouble(i), 1e-5 * scale)
          << "output " << o << ", element " << i;
  }
  return c;
}

// Values whose buffers are slices of another value's, over all kernels.
int stridedSlices(const Executable& exe) {
  int n = 0;
  for (const kernel::Kernel& k : exe.kernels())
    for (const kernel::Buffer& b : k.buffers) n += b.view.has_value();
  return n;
}

// A DenseNet block on NHWC: each layer reads the concatenation of everything before it, and
// the block's last concatenate holds every layer's result.
TEST(ConcatInPlace, DenseBlockMatchesTheInterpreter) {
  std::string t =
      R"(func @main(%x: f32[1,5,5,16], %w0: f32[3,3,16,8], %w1: f32[3,3,24,8], %w2: f32[1,1,32,8], %s: f32[40]) -> (f32[1,5,5,40]) {
  %zero = f32[] constant() {value = [0.0]}
  %big = f32[] constant() {value = [1.0e30]}
  %p = f32[1,5,5,16] tanh(%x)
  %a0 = f32[1,5,5,8] convolution(%p, %w0) {padding_low = [1, 1], padding_high = [1, 1], dimension_numbers = "b01f_01io->b01f"}
  %r0 = f32[1,5,5,8] clamp(%zero, %a0, %big)
  %c1 = f32[1,5,5,24] concatenate(%p, %r0) {dimension = 3}
  %n1 = f32[1,5,5,24] tanh(%c1)
  %a1 = f32[1,5,5,8] convolution(%n1, %w1) {padding_low = [1, 1], padding_high = [1, 1], dimension_numbers = "b01f_01io->b01f"}
  %c2 = f32[1,5,5,32] concatenate(%p, %r0, %a1) {dimension = 3}
  %n2 = f32[1,5,5,32] sigmoid(%c2)
  %a2 = f32[1,5,5,8] convolution(%n2, %w2) {dimension_numbers = "b01f_01io->b01f"}
  %c3 = f32[1,5,5,40] concatenate(%p, %r0, %a1, %a2) {dimension = 3}
  %sb = f32[1,5,5,40] broadcast_in_dim(%s) {dims = [3]}
  %y = f32[1,5,5,40] mul(%c3, %sb)
  return %y
})";
  Checked c = compileAndCompare(t);
  ASSERT_NE(c.exe, nullptr);
  // %p is read by a convolution (dense rows only): none of the block is in place.
  ASSERT_EQ(c.notes.size(), 3u);
  for (const std::string& n : c.notes)
    EXPECT_NE(n.find("not in place: %p is read by %a0 (convolution)"), std::string::npos) << n;
  EXPECT_EQ(stridedSlices(*c.exe), 0);

  // Read through an elementwise op instead (as DenseNet's batch norm does), it is.
  size_t at = t.find("convolution(%p, %w0)");
  t.replace(at, 20, "convolution(%e, %w0)");
  t.insert(t.find("  %a0 ="), "  %e = f32[1,5,5,16] exp(%p)\n");
  c = compileAndCompare(t);
  ASSERT_NE(c.exe, nullptr);
  ASSERT_EQ(c.notes.size(), 3u);
  EXPECT_EQ(c.notes[0], "in place: a slice of %c3 (element offset 0, row pitch 40)");
  EXPECT_EQ(c.notes[1], "in place: a slice of %c3 (element offset 0, row pitch 40)");
  EXPECT_EQ(c.notes[2], "in place: its 4 operands store their slices of its buffer (row pitch 40)");
  EXPECT_GT(stridedSlices(*c.exe), 0);
  // The slices take no memory of their own: each is at its offset in %c3's.
  const BufferPlan& b = c.exe->buffers();
  const Value* c3 = nullptr;
  for (const auto& [v, slot] : b.values)
    if (slot.sliceOf) c3 = slot.sliceOf;
  ASSERT_NE(c3, nullptr);
  for (const auto& [v, slot] : b.values)
    if (slot.sliceOf) {
      EXPECT_EQ(slot.sliceOf, c3);
      EXPECT_EQ(slot.offset, b.values.at(c3).offset + slot.sliceBytes);
    }
}

// Along a middle axis of NCHW (each slice a run of whole rows per batch), with a pooling and a
// nested concatenate (Inception's branches) among the producers.
TEST(ConcatInPlace, NestedAndPooledOperandsMatchTheInterpreter) {
  const std::string t =
      R"(func @main(%x: f32[2,4,6,6], %v: f32[2,3,6,6], %w: f32[2,1,6,6]) -> (f32[2,12,6,6]) {
  %a = f32[2,4,6,6] tanh(%x)
  %m = f32[2,4,6,6] reduce_window(%x) {kind = max, window_dimensions = [1, 1, 3, 3], window_strides = [1, 1, 1, 1], base_dilations = [1, 1, 1, 1], window_dilations = [1, 1, 1, 1], padding_low = [0, 0, 1, 1], padding_high = [0, 0, 1, 1]}
  %b = f32[2,3,6,6] exp(%v)
  %e = f32[2,1,6,6] sigmoid(%w)
  %inner = f32[2,4,6,6] concatenate(%b, %e) {dimension = 1}
  %c = f32[2,12,6,6] concatenate(%a, %inner, %m) {dimension = 1}
  %y = f32[2,12,6,6] exp(%c)
  return %y
})";
  Checked c = compileAndCompare(t);
  ASSERT_NE(c.exe, nullptr);
  ASSERT_EQ(c.notes.size(), 2u);
  EXPECT_EQ(c.notes[0],
            "in place: an operand of %c, a slice of %c (element offset 144, row pitch 432)");
  EXPECT_EQ(c.notes[1],
            "in place: its 4 operands store their slices of its buffer (row pitch 432)");
  EXPECT_GT(stridedSlices(*c.exe), 0);
}

// A concatenate with an operand nothing computes (a parameter) is a kernel's op, with the reason.
TEST(ConcatInPlace, ParameterOperandFallsBackWithItsReason) {
  const std::string t = R"(func @main(%x: f32[3,8], %y: f32[3,8]) -> (f32[3,16]) {
  %t = f32[3,8] tanh(%x)
  %c = f32[3,16] concatenate(%t, %y) {dimension = 1}
  %z = f32[3,16] exp(%c)
  return %z
})";
  Checked c = compileAndCompare(t);
  ASSERT_NE(c.exe, nullptr);
  ASSERT_EQ(c.notes.size(), 1u);
  EXPECT_EQ(c.notes[0], "not in place: %y is a parameter: nothing computes it in place");
  EXPECT_EQ(stridedSlices(*c.exe), 0);
}

// Executable::runAgain (kiln bench --roofline's hot times): the kernels asked for run a second
// time at once and a third on one thread, each with its own time, where their results do not
// overlap their operands, and the outputs are those of a plain run, bit for bit. The block in place
// has kernels that read and write slices of one buffer (views), whose spans the overlap rule
// measures by their pitch.
TEST(ConcatInPlace, KernelsRunTwiceKeepTheirValues) {
  const std::string t =
      R"(func @main(%x: f32[1,5,5,16], %w0: f32[3,3,16,8], %w1: f32[3,3,24,8], %s: f32[32]) -> (f32[1,5,5,32]) {
  %p = f32[1,5,5,16] tanh(%x)
  %e = f32[1,5,5,16] exp(%p)
  %a0 = f32[1,5,5,8] convolution(%e, %w0) {padding_low = [1, 1], padding_high = [1, 1], dimension_numbers = "b01f_01io->b01f"}
  %c1 = f32[1,5,5,24] concatenate(%p, %a0) {dimension = 3}
  %n1 = f32[1,5,5,24] tanh(%c1)
  %a1 = f32[1,5,5,8] convolution(%n1, %w1) {padding_low = [1, 1], padding_high = [1, 1], dimension_numbers = "b01f_01io->b01f"}
  %c2 = f32[1,5,5,32] concatenate(%p, %a0, %a1) {dimension = 3}
  %sb = f32[1,5,5,32] broadcast_in_dim(%s) {dims = [3]}
  %y = f32[1,5,5,32] mul(%c2, %sb)
  return %y
})";
  Checked c = compileAndCompare(t);
  ASSERT_NE(c.exe, nullptr);
  ASSERT_GT(stridedSlices(*c.exe), 0);
  const Function& f = c.exe->function();
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < f.numParameters(); ++i) {
    Tensor in(f.parameter(i)->type().dtype(), f.parameter(i)->type().staticDims());
    for (int64_t j = 0; j < in.numElements(); ++j) in.setDouble(j, std::sin(0.1 * double(j + i)));
    inputs.push_back(in);
  }
  auto once = c.exe->run(inputs);
  ASSERT_TRUE(once.isOk()) << once.status().str();
  const size_t n = c.exe->kernels().size();
  std::set<int> all;
  for (size_t k = 0; k + 1 < n; ++k) all.insert(static_cast<int>(k));  // every kernel but the last
  std::vector<Tensor> outputs;
  HotTimes hot;
  ASSERT_TRUE(c.exe->runAgain(inputs, outputs, nullptr, all, &hot).isOk());
  ASSERT_EQ(hot.ms.size(), n);
  ASSERT_EQ(hot.oneThreadMs.size(), n);
  EXPECT_EQ(hot.ms[n - 1], -1.0);  // not asked for
  EXPECT_EQ(hot.oneThreadMs[n - 1], -1.0);
  int ranAgain = 0;
  for (size_t k = 0; k + 1 < n; ++k) {
    ranAgain += hot.ms[k] >= 0;
    // Compiled for 2 threads: each kernel run again also ran a third time, on one thread.
    EXPECT_EQ(hot.oneThreadMs[k] >= 0, hot.ms[k] >= 0) << "kernel " << k;
  }
  EXPECT_GT(ranAgain, 0);
  ASSERT_EQ(outputs.size(), once->size());
  for (int64_t j = 0; j < outputs[0].numElements(); ++j)
    ASSERT_EQ(outputs[0].getDouble(j), (*once)[0].getDouble(j)) << "element " << j;
}

// A kernel that reads one slice of a buffer and writes another (rows interleaved: their spans
// overlap) is not run again; one that reads the whole buffer and writes its own is. (80 input
// channels keep the 1x1 convolution one: convolution-to-matmul takes those of at most 64.)
TEST(ConcatInPlace, KernelsOverSlicesOfOneBufferRunOnce) {
  const std::string t =
      R"(func @main(%x: f32[1,6,6,80], %v: f32[1,1,80,16]) -> (f32[1,6,6,32]) {
  %p = f32[1,6,6,16] convolution(%x, %v) {dimension_numbers = "b01f_01io->b01f"}
  %q = f32[1,6,6,16] reduce_window(%p) {kind = max, window_dimensions = [1, 3, 3, 1], window_strides = [1, 1, 1, 1], padding_low = [0, 1, 1, 0], padding_high = [0, 1, 1, 0]}
  %c = f32[1,6,6,32] concatenate(%p, %q) {dimension = 3}
  %n = f32[1,6,6,32] sigmoid(%c)
  return %n
})";
  Checked c = compileAndCompare(t);
  ASSERT_NE(c.exe, nullptr);
  const Function& f = c.exe->function();
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < f.numParameters(); ++i)
    inputs.emplace_back(f.parameter(i)->type().dtype(), f.parameter(i)->type().staticDims());
  const std::vector<kernel::Kernel>& ks = c.exe->kernels();
  std::set<int> all;
  for (size_t k = 0; k < ks.size(); ++k) all.insert(static_cast<int>(k));
  std::vector<Tensor> outputs;
  HotTimes hot;
  ASSERT_TRUE(c.exe->runAgain(inputs, outputs, nullptr, all, &hot).isOk());
  const std::vector<double>& again = hot.ms;
  ASSERT_EQ(again.size(), ks.size());
  int slicesToSlices = 0, sliceToOwn = 0;
  for (size_t k = 0; k < ks.size(); ++k) {
    bool readsView = false, writesView = false;
    for (const kernel::Buffer& b : ks[k].buffers) {
      readsView |= b.view && b.role == kernel::BufferRole::Input;
      writesView |= b.view && b.role == kernel::BufferRole::Output;
    }
    if (readsView && writesView) {
      ++slicesToSlices;
      EXPECT_EQ(again[k], -1.0) << ks[k].name;
    } else if (!readsView && !writesView && callsOf(ks[k]).empty()) {
      ++sliceToOwn;
      EXPECT_GE(again[k], 0.0) << ks[k].name;
    }
  }
  EXPECT_EQ(slicesToSlices, 1);  // the pool of %p's slice into %q's
  EXPECT_EQ(sliceToOwn, 1);      // sigmoid(%c) into %n
}

}  // namespace
}  // namespace kiln::runtime
