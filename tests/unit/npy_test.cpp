// Tests of .npy reading and writing (src/support/npy.h): byte-exact agreement with numpy's own
// files, round trips of every dtype, header variants Python allows, and one-line errors for
// malformed files.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

#include "support/npy.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

class NpyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kiln_npy_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  std::string writeBytes(const std::string& name, const std::string& bytes) const {
    std::ofstream out(path(name), std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return path(name);
  }

  std::string readBytes(const std::string& p) const {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  fs::path dir_;
};

// The exact bytes numpy 1.24.2 writes, captured with
//   b = io.BytesIO(); np.save(b, a); print(b.getvalue())
// for the array named in each comment. Header: 10-byte preamble, 118-byte dict padded with spaces
// to a 64-byte boundary, then the data.
std::string numpyHeader(const std::string& dict) {
  std::string h("\x93NUMPY\x01\x00v\x00", 10);
  h += dict;
  h.append(117 - dict.size(), ' ');
  return h + "\n";
}
// np.array([[1, 2, 3], [4, 5, 6]], dtype=np.float32)
const std::string kNumpyF32 =
    numpyHeader("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }") +
    std::string("\x00\x00\x80?\x00\x00\x00@\x00\x00@@\x00\x00\x80@\x00\x00\xa0@\x00\x00\xc0@", 24);
// np.array(7, dtype=np.int64)
const std::string kNumpyI64Scalar =
    numpyHeader("{'descr': '<i8', 'fortran_order': False, 'shape': (), }") +
    std::string("\x07\x00\x00\x00\x00\x00\x00\x00", 8);
// np.array([True, False, True])
const std::string kNumpyBool =
    numpyHeader("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }") +
    std::string("\x01\x00\x01", 3);
// np.array([1.5, -2.0], dtype=np.float16)
const std::string kNumpyF16 =
    numpyHeader("{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }") +
    std::string("\x00>\x00\xc0", 4);
// np.zeros((0, 3), dtype=np.uint8)
const std::string kNumpyEmptyU8 =
    numpyHeader("{'descr': '|u1', 'fortran_order': False, 'shape': (0, 3), }");

// np.array([0, 65535, 1], dtype='<u2'), np.array([4294967295, 2147483648], dtype='<u4') and
// np.array([18446744073709551615, 9223372036854775808, 1], dtype='<u8').
const std::string kNumpyU16 =
    numpyHeader("{'descr': '<u2', 'fortran_order': False, 'shape': (3,), }") +
    std::string("\x00\x00\xff\xff\x01\x00", 6);
const std::string kNumpyU32 =
    numpyHeader("{'descr': '<u4', 'fortran_order': False, 'shape': (2,), }") +
    std::string("\xff\xff\xff\xff\x00\x00\x00\x80", 8);
const std::string kNumpyU64 =
    numpyHeader("{'descr': '<u8', 'fortran_order': False, 'shape': (3,), }") +
    std::string("\xff\xff\xff\xff\xff\xff\xff\xff\x00\x00\x00\x00\x00\x00\x00\x80"
                "\x01\x00\x00\x00\x00\x00\x00\x00",
                24);

// np.lib.format.write_array(b, np.array([[1, -2]], dtype=np.int32), version=(2, 0)) and with
// version=(3, 0): the header length is a uint32; the two differ only in the version byte.
std::string numpyV2V3(char major) {
  std::string h("\x93NUMPY", 6);
  h += major;
  h += std::string("\x00t\x00\x00\x00", 5);
  std::string dict = "{'descr': '<i4', 'fortran_order': False, 'shape': (1, 2), }";
  h += dict;
  h.append(0x74 - 1 - dict.size(), ' ');
  return h + "\n" + std::string("\x01\x00\x00\x00\xfe\xff\xff\xff", 8);
}

TEST_F(NpyTest, ReadsNumpyFloat32) {
  auto t = readNpy(writeBytes("a.npy", kNumpyF32));
  ASSERT_TRUE(t.isOk()) << t.status().str();
  EXPECT_EQ(t->dtype(), DType::F32);
  EXPECT_EQ(t->dims(), (std::vector<int64_t>{2, 3}));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(t->data<float>()[i], float(i + 1));
}

TEST_F(NpyTest, ReadsNumpyScalarBoolHalfAndEmpty) {
  auto s = readNpy(writeBytes("s.npy", kNumpyI64Scalar));
  ASSERT_TRUE(s.isOk()) << s.status().str();
  EXPECT_EQ(s->dtype(), DType::I64);
  EXPECT_EQ(s->rank(), 0);
  EXPECT_EQ(s->data<int64_t>()[0], 7);

  auto b = readNpy(writeBytes("b.npy", kNumpyBool));
  ASSERT_TRUE(b.isOk()) << b.status().str();
  EXPECT_EQ(b->dtype(), DType::Bool);
  EXPECT_EQ(b->getInt(0), 1);
  EXPECT_EQ(b->getInt(1), 0);
  EXPECT_EQ(b->getInt(2), 1);

  auto h = readNpy(writeBytes("h.npy", kNumpyF16));
  ASSERT_TRUE(h.isOk()) << h.status().str();
  EXPECT_EQ(h->dtype(), DType::F16);
  EXPECT_EQ(h->getDouble(0), 1.5);
  EXPECT_EQ(h->getDouble(1), -2.0);

  auto e = readNpy(writeBytes("e.npy", kNumpyEmptyU8));
  ASSERT_TRUE(e.isOk()) << e.status().str();
  EXPECT_EQ(e->dtype(), DType::U8);
  EXPECT_EQ(e->dims(), (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(e->numElements(), 0);
}

TEST_F(NpyTest, ReadsVersions2And3) {
  for (char major : {'\x02', '\x03'}) {
    auto t = readNpy(writeBytes("v.npy", numpyV2V3(major)));
    ASSERT_TRUE(t.isOk()) << t.status().str();
    EXPECT_EQ(t->dtype(), DType::I32);
    EXPECT_EQ(t->dims(), (std::vector<int64_t>{1, 2}));
    EXPECT_EQ(t->data<int32_t>()[0], 1);
    EXPECT_EQ(t->data<int32_t>()[1], -2);
  }
}

TEST_F(NpyTest, WritesExactlyWhatNumpyWrites) {
  Tensor f(DType::F32, {2, 3});
  for (int i = 0; i < 6; ++i) f.setDouble(i, i + 1);
  ASSERT_TRUE(writeNpy(path("f.npy"), f).isOk());
  EXPECT_EQ(readBytes(path("f.npy")), kNumpyF32);

  Tensor s(DType::I64, {});
  s.setInt(0, 7);
  ASSERT_TRUE(writeNpy(path("s.npy"), s).isOk());
  EXPECT_EQ(readBytes(path("s.npy")), kNumpyI64Scalar);

  Tensor b(DType::Bool, {3});
  b.setInt(0, 1);
  b.setInt(2, 1);
  ASSERT_TRUE(writeNpy(path("b.npy"), b).isOk());
  EXPECT_EQ(readBytes(path("b.npy")), kNumpyBool);

  Tensor h(DType::F16, {2});
  h.setDouble(0, 1.5);
  h.setDouble(1, -2.0);
  ASSERT_TRUE(writeNpy(path("h.npy"), h).isOk());
  EXPECT_EQ(readBytes(path("h.npy")), kNumpyF16);

  ASSERT_TRUE(writeNpy(path("e.npy"), Tensor(DType::U8, {0, 3})).isOk());
  EXPECT_EQ(readBytes(path("e.npy")), kNumpyEmptyU8);
}

TEST_F(NpyTest, ReadsAndWritesNumpyUnsigned16To64) {
  auto a = readNpy(writeBytes("a.npy", kNumpyU16));
  ASSERT_TRUE(a.isOk()) << a.status().str();
  EXPECT_EQ(a->dtype(), DType::U16);
  EXPECT_EQ(a->getInt(1), 65535);
  auto b = readNpy(writeBytes("b.npy", kNumpyU32));
  ASSERT_TRUE(b.isOk()) << b.status().str();
  EXPECT_EQ(b->dtype(), DType::U32);
  EXPECT_EQ(b->getInt(0), 4294967295);
  EXPECT_EQ(b->getInt(1), 2147483648);
  auto c = readNpy(writeBytes("c.npy", kNumpyU64));
  ASSERT_TRUE(c.isOk()) << c.status().str();
  EXPECT_EQ(c->dtype(), DType::U64);
  EXPECT_EQ(c->getUInt(0), 18446744073709551615u);
  EXPECT_EQ(c->getUInt(1), 9223372036854775808u);
  EXPECT_EQ(c->getUInt(2), 1u);
  // Written back, each file is byte-for-byte what numpy wrote.
  ASSERT_TRUE(writeNpy(path("a2.npy"), *a).isOk());
  EXPECT_EQ(readBytes(path("a2.npy")), kNumpyU16);
  ASSERT_TRUE(writeNpy(path("b2.npy"), *b).isOk());
  EXPECT_EQ(readBytes(path("b2.npy")), kNumpyU32);
  Tensor u(DType::U64, {3});
  u.setUInt(0, 18446744073709551615u);
  u.setUInt(1, 9223372036854775808u);
  u.setUInt(2, 1);
  ASSERT_TRUE(writeNpy(path("c2.npy"), u).isOk());
  EXPECT_EQ(readBytes(path("c2.npy")), kNumpyU64);
}

TEST_F(NpyTest, RoundTripsEveryNumpyDType) {
  const DType types[] = {DType::Bool, DType::I8,  DType::U8,  DType::I16, DType::U16, DType::I32,
                         DType::U32,  DType::I64, DType::U64, DType::F16, DType::F32, DType::F64};
  for (DType dt : types) {
    Tensor t(dt, {3, 1, 4});
    // Values every dtype holds exactly: 0/1 for bool, 0..33 for unsigned, -17..16 otherwise.
    for (int64_t i = 0; i < t.numElements(); ++i)
      t.setInt(i, isBool(dt) ? i % 2 : isUnsignedInteger(dt) ? 3 * i : 3 * i - 17);
    std::string p = path("t.npy");
    ASSERT_TRUE(writeNpy(p, t).isOk()) << dtypeName(dt);
    auto back = readNpy(p);
    ASSERT_TRUE(back.isOk()) << back.status().str();
    EXPECT_TRUE(back->identical(t)) << dtypeName(dt);
    // numpy aligns the data to 64 bytes; so must we, for files numpy may memory-map.
    EXPECT_EQ((readBytes(p).size() - t.byteSize()) % 64, 0u) << dtypeName(dt);
  }
}

TEST_F(NpyTest, WritesVersion2WhenTheHeaderNeedsIt) {
  // 25000 dims of extent 1 spell "1, " 25000 times: a 75 KB header, too long for a uint16.
  Tensor t(DType::F32, std::vector<int64_t>(25000, 1));
  t.setDouble(0, 3.25);
  ASSERT_TRUE(writeNpy(path("big.npy"), t).isOk());
  std::string bytes = readBytes(path("big.npy"));
  EXPECT_EQ(bytes[6], '\x02');
  EXPECT_EQ((bytes.size() - 4) % 64, 0u);
  auto back = readNpy(path("big.npy"));
  ASSERT_TRUE(back.isOk()) << back.status().str();
  EXPECT_TRUE(back->identical(t));
}

// The same f32 [2] array [1, 2] with header dicts written as Python allows them.
std::string withDict(const std::string& dict) {
  std::string h("\x93NUMPY\x01\x00", 8);
  uint16_t len = static_cast<uint16_t>(dict.size());
  h += static_cast<char>(len & 0xff);
  h += static_cast<char>(len >> 8);
  return h + dict + std::string("\x00\x00\x80?\x00\x00\x00@", 8);
}

TEST_F(NpyTest, AcceptsHeaderVariants) {
  const char* dicts[] = {
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n",
      "{\"shape\": (2,), \"descr\": \"<f4\", \"fortran_order\": False}",
      "{ 'fortran_order' : False , 'shape' : ( 2 , ) , 'descr' : '<f4' }   \n",
      "{'descr': '<f4', 'fortran_order': False, 'shape': [2]}",
      "{'descr': '=f4', 'fortran_order': False, 'shape': (2L,), }",
  };
  for (const char* d : dicts) {
    auto t = readNpy(writeBytes("v.npy", withDict(d)));
    ASSERT_TRUE(t.isOk()) << d << ": " << t.status().str();
    EXPECT_EQ(t->dims(), (std::vector<int64_t>{2}));
    EXPECT_EQ(t->data<float>()[1], 2.0f);
  }
}

TEST_F(NpyTest, NormalisesBoolBytes) {
  std::string bytes = kNumpyBool;
  bytes[bytes.size() - 1] = '\x05';
  auto t = readNpy(writeBytes("b.npy", bytes));
  ASSERT_TRUE(t.isOk());
  EXPECT_EQ(t->data<uint8_t>()[2], 1);
}

// The one-line error of reading `p`, or "<no error>".
std::string errorOf(const std::string& p) {
  auto t = readNpy(p);
  if (t.isOk()) return "<no error>";
  return t.status().str();
}

TEST_F(NpyTest, RejectsMalformedFiles) {
  struct Case {
    std::string bytes;
    std::string expected;
  };
  std::string f32 = kNumpyF32;
  std::string badVersion = f32;
  badVersion[6] = '\x04';
  const Case cases[] = {
      {"", "not a .npy file (too short)"},
      {"PK\x03\x04 this is a zip file", "not a .npy file (bad magic)"},
      {badVersion, "unsupported .npy format version 4.0"},
      {f32.substr(0, 9), "truncated header"},
      {f32.substr(0, 60), "truncated header"},
      {f32.substr(0, f32.size() - 1),
       "truncated data: the header promises 24 bytes, the file has 23"},
      {f32 + "xx", "2 unexpected bytes after the data"},
      {withDict("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }"),
       "Fortran-order arrays are not supported"},
      {withDict("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }"),
       "big-endian data ('>f4') is not supported"},
      {withDict("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }"),
       "unsupported dtype '<c8'"},
      {withDict("{'descr': '<u3', 'fortran_order': False, 'shape': (2,), }"),
       "unsupported dtype '<u3'"},
      {withDict("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }"),
       "structured arrays are not supported"},
      {withDict("{'descr': '<f4', 'shape': (2,), }"), "needs the keys"},
      {withDict("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }"),
       "shape entries must be non-negative"},
      {withDict("{'descr': '<f4, 'fortran_order': False, 'shape': (2,), }"), "malformed header"},
      {withDict("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } junk"),
       "unexpected text after the header dict"},
      {withDict("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}"),
       "duplicate key 'descr'"},
      {withDict("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}"),
       "integer too large"},
      {withDict(std::string(40, '(') + std::string(40, ')')), "nesting too deep"},
  };
  for (const Case& c : cases) {
    std::string p = writeBytes("bad.npy", c.bytes);
    std::string msg = errorOf(p);
    EXPECT_NE(msg.find(c.expected), std::string::npos) << "got: " << msg;
    EXPECT_EQ(msg.rfind(p + ": error: ", 0), 0u) << "error should name the file: " << msg;
  }
}

TEST_F(NpyTest, RefusesAbsurdShapesWithoutAllocating) {
  // 2^31 * 2^31 elements: rejected by the element-count check before anything is allocated.
  std::string huge =
      withDict("{'descr': '<f8', 'fortran_order': False, 'shape': (2147483648, 2147483648), }");
  EXPECT_NE(errorOf(writeBytes("huge.npy", huge)).find("more than 2^40 elements"),
            std::string::npos);
  // 2^30 f64 elements (8 GiB) is a legal count, but the file holds 8 bytes: refused as truncated
  // rather than allocated.
  std::string big = withDict("{'descr': '<f8', 'fortran_order': False, 'shape': (1073741824,), }");
  EXPECT_NE(errorOf(writeBytes("big.npy", big)).find("the header promises 8589934592"),
            std::string::npos);
  // A header length beyond the file.
  std::string longHeader("\x93NUMPY\x02\x00\xff\xff\xff\x7f{}", 14);
  EXPECT_NE(errorOf(writeBytes("lh.npy", longHeader)).find("header too large"), std::string::npos);
}

TEST_F(NpyTest, ReportsMissingFilesAndUnwritablePaths) {
  EXPECT_NE(errorOf(path("absent.npy")).find("absent.npy: error: cannot open file"),
            std::string::npos);
  Status s = writeNpy(path("no/such/dir/x.npy"), Tensor(DType::F32, {1}));
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.str().find("cannot open file for writing"), std::string::npos);
}

TEST_F(NpyTest, RefusesToWriteBFloat16) {
  Status s = writeNpy(path("x.npy"), Tensor(DType::BF16, {2}));
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("numpy has no bfloat16 dtype"), std::string::npos);
  EXPECT_FALSE(fs::exists(path("x.npy")));
}

}  // namespace
}  // namespace kiln
