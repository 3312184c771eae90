// String tensors (docs/ops.md, "Strings"): elements that are objects, not bytes; .npy text in
// numpy's own bytes; string constants in the text IR; string_normalize and convert on the
// interpreter against hand-worked values; ops without a meaning for text refuse it; and the
// compiled targets refuse it by name rather than copying text objects as bytes.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "interp/interpreter.h"
#include "ir/builder.h"
#include "ir/text/text.h"
#include "runtime/executable.h"
#include "runtime/target.h"
#include "support/npy.h"

namespace kiln {
namespace {

Tensor strings(std::vector<int64_t> dims, const std::vector<std::string>& values) {
  Tensor t(DType::Str, std::move(dims));
  for (size_t i = 0; i < values.size(); ++i) t.setStr(static_cast<int64_t>(i), values[i]);
  return t;
}

std::vector<std::string> elements(const Tensor& t) {
  std::vector<std::string> out;
  for (int64_t i = 0; i < t.numElements(); ++i) out.push_back(t.str(i));
  return out;
}

TEST(Strings, TensorsHoldObjectsCopiedByClone) {
  Tensor a = strings({2}, {"ab", "a much longer string than the small-string buffer holds"});
  Tensor b = a.clone();
  b.setStr(0, "changed");
  EXPECT_EQ(a.str(0), "ab");
  EXPECT_EQ(b.str(1), a.str(1));
  EXPECT_FALSE(a.identical(b));
  b.setStr(0, "ab");
  EXPECT_TRUE(a.identical(b));
  EXPECT_EQ(Tensor(DType::Str, {3}).str(2), "");  // new elements are empty
  EXPECT_EQ(dtypeName(DType::Str), "string");
  EXPECT_EQ(parseDType("string"), DType::Str);
  EXPECT_FALSE(isNumeric(DType::Str));
  EXPECT_FALSE(isInteger(DType::Str));
}

TEST(Strings, NpyMatchesNumpysBytesAndRoundTrips) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("kiln_strings_" + std::to_string(::getpid())))
          .string();
  std::filesystem::create_directories(dir);
  // np.save(f, np.array(['ab', 'c'])): '<U2', UTF-32LE, each element padded with NULs.
  const std::string path = dir + "/s.npy";
  ASSERT_TRUE(writeNpy(path, strings({2}, {"ab", "c"})).isOk());
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  std::string dict = "{'descr': '<U2', 'fortran_order': False, 'shape': (2,), }";
  std::string want = std::string("\x93NUMPY\x01\x00v\x00", 10) + dict +
                     std::string(117 - dict.size(), ' ') + "\n" +
                     std::string("a\0\0\0b\0\0\0c\0\0\0\0\0\0\0", 16);
  EXPECT_EQ(bytes, want);
  // Text beyond ASCII, an empty string and a 2-D shape come back as written.
  Tensor t = strings({2, 2}, {"\xc3\xa9t\xc3\xa9", "", "\xf0\x9f\x94\xa5", "plain"});
  ASSERT_TRUE(writeNpy(path, t).isOk());
  auto back = readNpy(path);
  ASSERT_TRUE(back.isOk()) << back.status().str();
  EXPECT_TRUE(back->identical(t));
  // Text that is not UTF-8 cannot be written as numpy text: an error naming the element.
  Status bad = writeNpy(path, strings({2}, {"ok", "\xff"}));
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.message().find("element 1: malformed UTF-8"), std::string::npos) << bad.message();
  std::filesystem::remove_all(dir);
}

TEST(Strings, ConstantsPrintInlineAndParseBack) {
  const char* text = R"(func @main(%x: string[1,3]) -> (string[1,3]) {
  %0 = string[2] constant() {value = ["Monday", "say \"hi\"\n"]}
  %1, %2 = (string[1,3], i64[]) string_normalize(%x, %0) {case_change = upper, case_sensitive = false}
  %y = string[1,3] set_dimension_size(%1, %2) {dimension = 1}
  return %y
}
)";
  auto m = parseModule(text, "s.kir");
  ASSERT_TRUE(m.isOk()) << m.status().str();
  std::string printed = printModule(**m);
  EXPECT_NE(printed.find(R"(["Monday", "say \"hi\"\n"])"), std::string::npos) << printed;
  auto again = parseModule(printed, "again.kir");
  ASSERT_TRUE(again.isOk()) << again.status().str();
  EXPECT_EQ(printModule(**again), printed);
  // Too few elements is an error at the constant.
  auto few = parseModule(R"(func @main() -> (string[2]) {
  %0 = string[2] constant() {value = ["a"]}
  return %0
}
)",
                         "few.kir");
  ASSERT_FALSE(few.isOk());
  EXPECT_NE(few.status().message().find("needs 2 elements, got 1"), std::string::npos);
}

// string_normalize(x, stopwords) sized by its count, as the ONNX importer builds it.
StatusOr<std::vector<Tensor>> normalize(const Tensor& x, const Tensor& stop, const char* change,
                                        bool sensitive) {
  Module m;
  Function* f = m.addFunction("main");
  Builder b(f);
  Value* xv = b.parameter(x.type());
  std::vector<Value*> r =
      b.opN(OpCode::StringNormalize, {xv, b.constant(stop)},
            {{"case_change", enumAttr(change)}, {"case_sensitive", boolAttr(sensitive)}});
  if (!b.ok()) return b.status();
  Value* y = b.op(OpCode::SetDimensionSize, {r[0], r[1]}, {{"dimension", intAttr(x.rank() - 1)}});
  if (!b.ok()) return b.status();
  f->setOutputs({y});
  return interpret(*f, std::vector<Tensor>{x});
}

TEST(Strings, NormalizeRemovesStopwordsThenMapsCase) {
  Tensor x = strings({1, 5}, {"Monday", "tuesday", "MONDAY", "\xc3\xa9t\xc3\xa9", "Friday"});
  Tensor stop = strings({1}, {"monday"});
  auto upper = normalize(x, stop, "upper", false);  // case-insensitive: every Monday goes
  ASSERT_TRUE(upper.isOk()) << upper.status().str();
  EXPECT_EQ((*upper)[0].dims(), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(elements((*upper)[0]),
            (std::vector<std::string>{"TUESDAY", "\xc3\x89T\xc3\x89", "FRIDAY"}));
  auto exact = normalize(x, stop, "none", true);  // case-sensitive: none matches "monday"
  ASSERT_TRUE(exact.isOk()) << exact.status().str();
  EXPECT_EQ(elements((*exact)[0]), elements(x));
  auto lower = normalize(strings({3}, {"A", "b", "MONDAY"}), stop, "lower", false);
  ASSERT_TRUE(lower.isOk()) << lower.status().str();
  EXPECT_EQ(elements((*lower)[0]), (std::vector<std::string>{"a", "b"}));
  // Nothing left: one empty string, as ONNX says.
  auto none = normalize(strings({2}, {"monday", "Monday"}), stop, "none", false);
  ASSERT_TRUE(none.isOk()) << none.status().str();
  EXPECT_EQ((*none)[0].dims(), std::vector<int64_t>{1});
  EXPECT_EQ((*none)[0].str(0), "");
  // Malformed text is an error naming the element.
  auto bad = normalize(strings({2}, {"ok", "\xc3"}), stop, "upper", false);
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find("operand element 1: malformed UTF-8"), std::string::npos)
      << bad.status().message();
}

StatusOr<Tensor> convert(const Tensor& x, DType to) {
  Module m;
  Function* f = m.addFunction("main");
  Builder b(f);
  Value* y = b.convert(b.parameter(x.type()), to);
  if (!b.ok()) return b.status();
  f->setOutputs({y});
  KILN_ASSIGN_OR_RETURN(std::vector<Tensor> r, interpret(*f, std::vector<Tensor>{x}));
  return r[0];
}

TEST(Strings, ConvertWritesTheShortestTextThatReadsBack) {
  Tensor f(DType::F32, {6});
  const std::vector<double> values = {0.1, 0.039187793, -2.5, 1e20, INFINITY, NAN};
  for (size_t i = 0; i < values.size(); ++i) f.setDouble(static_cast<int64_t>(i), values[i]);
  auto text = convert(f, DType::Str);
  ASSERT_TRUE(text.isOk()) << text.status().str();
  EXPECT_EQ(elements(*text),
            (std::vector<std::string>{"0.1", "0.039187793", "-2.5", "1e+20", "INF", "NaN"}));
  auto back = convert(*text, DType::F32);
  ASSERT_TRUE(back.isOk()) << back.status().str();
  for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(back->getDouble(i), f.getDouble(i)) << i;
  EXPECT_TRUE(std::isnan(back->getDouble(5)));
  // f16 0.1 is 0.0999755859375: "0.1" is the shortest text that rounds to it in f16.
  Tensor h(DType::F16, {1});
  h.setDouble(0, 0.1);
  EXPECT_EQ(convert(h, DType::Str)->str(0), "0.1");
  // Integers read exactly (beyond 2^53); ONNX's special values in any case; scientific notation.
  auto i64 = convert(strings({2}, {"9007199254740993", "-7"}), DType::I64);
  ASSERT_TRUE(i64.isOk()) << i64.status().str();
  EXPECT_EQ(i64->getInt(0), 9007199254740993);
  EXPECT_EQ(i64->getInt(1), -7);
  auto special = convert(strings({4}, {"+INF", "-inf", "nan", "1E3"}), DType::F64);
  ASSERT_TRUE(special.isOk()) << special.status().str();
  EXPECT_EQ(special->getDouble(0), INFINITY);
  EXPECT_EQ(special->getDouble(1), -INFINITY);
  EXPECT_TRUE(std::isnan(special->getDouble(2)));
  EXPECT_EQ(special->getDouble(3), 1000.0);
  auto word = convert(strings({2}, {"1", "Hello"}), DType::F32);
  ASSERT_FALSE(word.isOk());
  EXPECT_NE(word.status().message().find("element 1: 'Hello' is not a number"), std::string::npos)
      << word.status().message();
}

TEST(Strings, OpsWithoutAMeaningForTextRefuseIt) {
  Module m;
  Function* f = m.addFunction("main");
  Builder b(f);
  Value* x = b.parameter(TensorType::of(DType::Str, {2}));
  b.op(OpCode::Reverse, {x}, {{"dims", intsAttr({0})}});
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("reverse: does not take strings"), std::string::npos)
      << b.status().message();
}

TEST(Strings, TheInterpreterTargetRunsThemAndCompiledTargetsRefuseThem) {
  runtime::registerBuiltinTargets();
  const char* text = R"(func @main(%x: string[3]) -> (string[3]) {
  %0 = string[1] constant() {value = ["b"]}
  %1, %2 = (string[3], i64[]) string_normalize(%x, %0) {case_change = upper}
  %y = string[3] set_dimension_size(%1, %2) {dimension = 0}
  return %y
}
)";
  const std::vector<Tensor> in{strings({3}, {"a", "B", "c"})};
  for (const std::string& backend : runtime::targetNames()) {
    auto m = parseModule(text, "s.kir");
    ASSERT_TRUE(m.isOk()) << m.status().str();
    runtime::CompileOptions o;
    o.backend = backend;
    auto exe = runtime::Executable::compile(std::move(*m), o);
    if (backend != "interp") {
      ASSERT_FALSE(exe.isOk()) << backend;
      EXPECT_NE(exe.status().message().find("string tensors are run by the interpreter only"),
                std::string::npos)
          << exe.status().message();
      continue;
    }
    ASSERT_TRUE(exe.isOk()) << exe.status().str();
    auto loaded = runtime::Executable::load((*exe)->serialize(), "s.kiln");
    ASSERT_TRUE(loaded.isOk()) << loaded.status().str();
    for (const runtime::Executable* e : {exe->get(), loaded->get()}) {
      auto out = e->run(in);
      ASSERT_TRUE(out.isOk()) << out.status().str();
      EXPECT_EQ(elements((*out)[0]), (std::vector<std::string>{"A", "C"}));
    }
  }
}

}  // namespace
}  // namespace kiln
