// Reading and writing numpy .npy files.
//
// Format (numpy/lib/format.py): the magic "\x93NUMPY", a major and minor version byte, the header
// length (uint16 for 1.0, uint32 for 2.0 and 3.0), then the header: a Python dict literal such as
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded with spaces and ending in
// '\n', then the raw element bytes. The header is parsed by a small literal parser rather than by
// searching for substrings, so key order, quoting and spacing may vary as Python allows.
#include "support/npy.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <map>
#include <string_view>

#include "support/utf8.h"

namespace kiln {
namespace {

static_assert(std::endian::native == std::endian::little,
              ".npy I/O assumes a little-endian host (data is copied as is)");

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;
// A header longer than this is not a header numpy would write; refusing it bounds the memory a
// malformed file can make us allocate before the data size is checked.
constexpr uint32_t kMaxHeaderSize = 1u << 20;

Status npyError(const std::string& path, const std::string& message) {
  return Status::error(message, Location{path, 0, 0});
}

// ---- A parser for the subset of Python literals a .npy header uses. -----------------------

struct PyValue {
  enum class Kind { Str, Int, Bool, None, Tuple, Dict } kind = Kind::None;
  std::string str;
  int64_t integer = 0;
  bool boolean = false;
  std::vector<PyValue> items;           // Tuple (also Python lists)
  std::map<std::string, PyValue> dict;  // Dict with string keys
};

class LiteralParser {
 public:
  explicit LiteralParser(std::string_view text) : s_(text) {}

  // Parses one literal that must span the whole text (trailing whitespace allowed).
  StatusOr<PyValue> parseAll() {
    KILN_ASSIGN_OR_RETURN(PyValue v, parseValue(0));
    skipSpace();
    if (pos_ != s_.size()) return fail("unexpected text after the header dict");
    return v;
  }

 private:
  static constexpr int kMaxDepth = 16;

  Status fail(const std::string& what) const {
    return Status::error("malformed header: " + what + " at offset " + std::to_string(pos_));
  }
  void skipSpace() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
      ++pos_;
  }
  bool consume(char c) {
    skipSpace();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool consumeWord(std::string_view w) {
    if (s_.substr(pos_, w.size()) != w) return false;
    size_t end = pos_ + w.size();
    if (end < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[end])) || s_[end] == '_'))
      return false;
    pos_ = end;
    return true;
  }

  StatusOr<PyValue> parseValue(int depth) {
    if (depth > kMaxDepth) return fail("nesting too deep");
    skipSpace();
    if (pos_ >= s_.size()) return fail("unexpected end");
    char c = s_[pos_];
    if (c == '\'' || c == '"') return parseString();
    if (c == '{') return parseDict(depth);
    if (c == '(' || c == '[') return parseSequence(depth);
    if (c == '-' || std::isdigit(static_cast<unsigned char>(c))) return parseInt();
    PyValue v;
    if (consumeWord("None")) return v;
    v.kind = PyValue::Kind::Bool;
    v.boolean = true;
    if (consumeWord("True")) return v;
    v.boolean = false;
    if (consumeWord("False")) return v;
    return fail(std::string("unexpected character '") + c + "'");
  }

  StatusOr<PyValue> parseString() {
    char quote = s_[pos_++];
    PyValue v;
    v.kind = PyValue::Kind::Str;
    while (pos_ < s_.size() && s_[pos_] != quote) {
      if (s_[pos_] == '\\') return fail("escape sequences are not supported in strings");
      v.str += s_[pos_++];
    }
    if (pos_ >= s_.size()) return fail("unterminated string");
    ++pos_;
    return v;
  }

  StatusOr<PyValue> parseInt() {
    size_t start = pos_;
    bool negative = s_[pos_] == '-';
    if (negative) ++pos_;
    if (pos_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[pos_])))
      return fail("expected a digit");
    // Python 2 wrote long shape entries as "3L"; accepted below.
    uint64_t magnitude = 0;
    while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
      magnitude = magnitude * 10 + static_cast<uint64_t>(s_[pos_++] - '0');
      if (magnitude > (uint64_t(1) << 62)) {
        pos_ = start;
        return fail("integer too large");
      }
    }
    if (pos_ < s_.size() && s_[pos_] == 'L') ++pos_;
    PyValue v;
    v.kind = PyValue::Kind::Int;
    v.integer = negative ? -static_cast<int64_t>(magnitude) : static_cast<int64_t>(magnitude);
    return v;
  }

  StatusOr<PyValue> parseSequence(int depth) {
    char close = s_[pos_++] == '(' ? ')' : ']';
    PyValue v;
    v.kind = PyValue::Kind::Tuple;
    while (!consume(close)) {
      KILN_ASSIGN_OR_RETURN(PyValue item, parseValue(depth + 1));
      v.items.push_back(std::move(item));
      if (!consume(',')) {
        if (!consume(close)) return fail(std::string("expected ',' or '") + close + "'");
        break;
      }
    }
    return v;
  }

  StatusOr<PyValue> parseDict(int depth) {
    ++pos_;
    PyValue v;
    v.kind = PyValue::Kind::Dict;
    while (!consume('}')) {
      skipSpace();
      if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"'))
        return fail("expected a string key");
      KILN_ASSIGN_OR_RETURN(PyValue key, parseString());
      if (!consume(':')) return fail("expected ':'");
      KILN_ASSIGN_OR_RETURN(PyValue item, parseValue(depth + 1));
      if (v.dict.count(key.str)) return fail("duplicate key '" + key.str + "'");
      v.dict.emplace(key.str, std::move(item));
      if (!consume(',')) {
        if (!consume('}')) return fail("expected ',' or '}'");
        break;
      }
    }
    return v;
  }

  std::string_view s_;
  size_t pos_ = 0;
};

// ---- Header fields. ------------------------------------------------------------------------

struct DescrEntry {
  const char* code;  // kind and size, without the byte-order character
  DType dtype;
};
// bf16 is missing on purpose: numpy has no bfloat16 dtype.
constexpr DescrEntry kDescrs[] = {
    {"b1", DType::Bool}, {"i1", DType::I8},  {"u1", DType::U8},  {"i2", DType::I16},
    {"u2", DType::U16},  {"i4", DType::I32}, {"u4", DType::U32}, {"i8", DType::I64},
    {"u8", DType::U64},  {"f2", DType::F16}, {"f4", DType::F32}, {"f8", DType::F64},
};

StatusOr<DType> dtypeFromDescr(const std::string& descr) {
  if (descr.size() != 3) return Status::error("unsupported dtype '" + descr + "'");
  char order = descr[0];
  std::string code = descr.substr(1);
  if (std::string_view("<>|=").find(order) == std::string_view::npos)
    return Status::error("unsupported dtype '" + descr + "' (bad byte-order character)");
  for (const DescrEntry& e : kDescrs) {
    if (code != e.code) continue;
    bool oneByte = dtypeSize(e.dtype) == 1;
    // Byte order does not matter for one-byte types (numpy writes '|'); '=' is native order,
    // little-endian here.
    if (oneByte || order == '<' || order == '=') return e.dtype;
    if (order == '>') return Status::error("big-endian data ('" + descr + "') is not supported");
    break;
  }
  return Status::error("unsupported dtype '" + descr +
                       "' (supported: bool, int8, uint8, int16, uint16, int32, uint32, int64, "
                       "uint64, float16, float32, float64)");
}

std::string descrOf(DType t) {
  for (const DescrEntry& e : kDescrs) {
    if (e.dtype == t) return (dtypeSize(t) == 1 ? "|" : "<") + std::string(e.code);
  }
  return {};
}

struct Header {
  DType dtype = DType::F32;
  std::vector<int64_t> dims;
  // Strings: numpy's fixed-width '<U{width}' (UTF-32 code units) or '|S{width}' (bytes).
  int64_t width = 0;
  int charBytes = 0;
};

// A string descr: '<U8' (text, 4 bytes a character) or '|S8' (bytes); false for other descrs.
StatusOr<bool> stringDescr(const std::string& descr, Header& h) {
  if (descr.size() < 3 || (descr[1] != 'U' && descr[1] != 'S')) return false;
  if (descr[1] == 'U' && descr[0] == '>')
    return Status::error("big-endian data ('" + descr + "') is not supported");
  int64_t width = 0;
  auto [p, ec] = std::from_chars(descr.data() + 2, descr.data() + descr.size(), width);
  if (ec != std::errc() || p != descr.data() + descr.size() || width < 1 || width > (1 << 20))
    return Status::error("unsupported dtype '" + descr + "' (bad string width)");
  h.dtype = DType::Str;
  h.width = width;
  h.charBytes = descr[1] == 'U' ? 4 : 1;
  return true;
}

const PyValue* findKey(const PyValue& dict, const char* key) {
  auto it = dict.dict.find(key);
  return it == dict.dict.end() ? nullptr : &it->second;
}

StatusOr<Header> interpretHeader(const PyValue& dict) {
  if (dict.kind != PyValue::Kind::Dict) return Status::error("malformed header: not a dict");
  const PyValue* descr = findKey(dict, "descr");
  const PyValue* fortran = findKey(dict, "fortran_order");
  const PyValue* shape = findKey(dict, "shape");
  if (!descr || !fortran || !shape)
    return Status::error("malformed header: needs the keys 'descr', 'fortran_order' and 'shape'");
  if (descr->kind != PyValue::Kind::Str)
    return Status::error("unsupported dtype: structured arrays are not supported");
  if (fortran->kind != PyValue::Kind::Bool)
    return Status::error("malformed header: 'fortran_order' is not True or False");
  if (fortran->boolean)
    return Status::error("Fortran-order arrays are not supported (save with C order)");
  if (shape->kind != PyValue::Kind::Tuple)
    return Status::error("malformed header: 'shape' is not a tuple");
  Header h;
  KILN_ASSIGN_OR_RETURN(bool isText, stringDescr(descr->str, h));
  if (!isText) {
    KILN_ASSIGN_OR_RETURN(h.dtype, dtypeFromDescr(descr->str));
  }
  for (const PyValue& d : shape->items) {
    if (d.kind != PyValue::Kind::Int || d.integer < 0)
      return Status::error("malformed header: shape entries must be non-negative integers");
    h.dims.push_back(d.integer);
  }
  return h;
}

// ---- Reading. ------------------------------------------------------------------------------

uint32_t readLittleEndian(const unsigned char* p, int bytes) {
  uint32_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Reads the preamble and header text; leaves `in` at the first data byte.
StatusOr<std::string> readHeaderText(std::ifstream& in, uint64_t fileSize) {
  unsigned char pre[12] = {};
  size_t need = kMagicSize + 2;
  if (fileSize < need || !in.read(reinterpret_cast<char*>(pre), static_cast<std::streamsize>(need)))
    return Status::error("not a .npy file (too short)");
  if (std::string_view(reinterpret_cast<char*>(pre), kMagicSize) != std::string_view(kMagic, 6))
    return Status::error("not a .npy file (bad magic)");
  int major = pre[6];
  if (major < 1 || major > 3)
    return Status::error("unsupported .npy format version " + std::to_string(major) + "." +
                         std::to_string(pre[7]));
  int lenBytes = major == 1 ? 2 : 4;
  if (fileSize < need + lenBytes ||
      !in.read(reinterpret_cast<char*>(pre + need), static_cast<std::streamsize>(lenBytes)))
    return Status::error("truncated header");
  uint32_t headerLen = readLittleEndian(pre + need, lenBytes);
  if (headerLen > kMaxHeaderSize) return Status::error("header too large");
  if (headerLen > fileSize - need - lenBytes) return Status::error("truncated header");
  std::string text(headerLen, '\0');
  if (!in.read(text.data(), static_cast<std::streamsize>(headerLen)))
    return Status::error("truncated header");
  return text;
}

// numpy stores bool as one byte 0/1; anything else would give a Tensor a value that its users
// compare with 1, so normalise.
void normaliseBools(Tensor& t) {
  auto* p = t.mutableData<uint8_t>();
  for (int64_t i = 0; i < t.numElements(); ++i) p[i] = p[i] != 0;
}

// Fixed-width numpy strings to a string tensor (UTF-8): trailing NULs are padding, as in numpy.
StatusOr<Tensor> readStrings(std::ifstream& in, const Header& h, uint64_t dataBytes) {
  std::string raw(dataBytes, '\0');
  if (dataBytes > 0 && !in.read(raw.data(), static_cast<std::streamsize>(dataBytes)))
    return Status::error("cannot read the data");
  Tensor t(DType::Str, h.dims);
  const size_t stride = static_cast<size_t>(h.width * h.charBytes);
  for (int64_t i = 0; i < t.numElements(); ++i) {
    const auto* p = reinterpret_cast<const unsigned char*>(raw.data()) + i * stride;
    std::string s;
    for (int64_t k = 0; k < h.width; ++k) {
      uint32_t c = h.charBytes == 4 ? readLittleEndian(p + 4 * k, 4) : p[k];
      if (!isScalarValue(c))
        return Status::error("element " + std::to_string(i) + " holds " + std::to_string(c) +
                             ", which is not a Unicode code point");
      if (h.charBytes == 1) s += static_cast<char>(c);
      else appendUtf8(s, static_cast<char32_t>(c));
    }
    while (!s.empty() && s.back() == '\0') s.pop_back();
    t.setStr(i, std::move(s));
  }
  return t;
}

StatusOr<Tensor> readNpyImpl(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return Status::error("is a directory");
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return Status::error("cannot open file");
  std::streamoff end = in.tellg();
  if (end < 0) return Status::error("cannot read file");
  uint64_t fileSize = static_cast<uint64_t>(end);
  in.seekg(0);
  KILN_ASSIGN_OR_RETURN(std::string text, readHeaderText(in, fileSize));
  KILN_ASSIGN_OR_RETURN(PyValue dict, LiteralParser(text).parseAll());
  KILN_ASSIGN_OR_RETURN(Header h, interpretHeader(dict));
  auto count = checkedNumElements(h.dims);
  if (!count) return Status::error("bad shape: " + count.status().message());
  // Checked against the file before allocating: a header cannot make us allocate more than the
  // file holds. count <= 2^40 and sizes <= 8, so the product fits.
  uint64_t dataBytes =
      static_cast<uint64_t>(*count) * (h.charBytes ? h.width * h.charBytes : dtypeSize(h.dtype));
  uint64_t available = fileSize - static_cast<uint64_t>(in.tellg());
  if (available < dataBytes)
    return Status::error("truncated data: the header promises " + std::to_string(dataBytes) +
                         " bytes, the file has " + std::to_string(available));
  if (available > dataBytes)
    return Status::error(std::to_string(available - dataBytes) +
                         " unexpected bytes after the data");
  if (h.charBytes) return readStrings(in, h, dataBytes);
  Tensor t(h.dtype, h.dims);
  if (dataBytes > 0 &&
      !in.read(reinterpret_cast<char*>(t.mutableBytes()), static_cast<std::streamsize>(dataBytes)))
    return Status::error("cannot read the data");
  if (h.dtype == DType::Bool) normaliseBools(t);
  return t;
}

// ---- Writing. ------------------------------------------------------------------------------

std::string shapeLiteral(const std::vector<int64_t>& dims) {
  std::string s = "(";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(dims[i]);
  }
  if (dims.size() == 1) s += ",";
  return s + ")";
}

// The preamble and header, padded with spaces so that the data starts at a multiple of 64 bytes
// (numpy's alignment), ending in '\n'. Version 2.0 only when the header needs more than 65535.
std::string headerBytes(const Tensor& t, const std::string& descr) {
  std::string dict = "{'descr': '" + descr +
                     "', 'fortran_order': False, 'shape': " + shapeLiteral(t.dims()) + ", }";
  int lenBytes = 2;
  int major = 1;
  size_t preamble = kMagicSize + 2 + 2;
  size_t total = (preamble + dict.size() + 1 + 63) / 64 * 64;
  if (total - preamble > 65535) {
    lenBytes = 4;
    major = 2;
    preamble = kMagicSize + 2 + 4;
    total = (preamble + dict.size() + 1 + 63) / 64 * 64;
  }
  size_t headerLen = total - preamble;
  std::string out(kMagic, kMagicSize);
  out += static_cast<char>(major);
  out += '\0';
  for (int i = 0; i < lenBytes; ++i) out += static_cast<char>((headerLen >> (8 * i)) & 0xff);
  out += dict;
  out.append(headerLen - dict.size() - 1, ' ');
  out += '\n';
  return out;
}

// A string tensor as numpy's '<U{width}': UTF-32LE, each element padded with NULs to the
// longest one's length (1 at least, as numpy writes empty strings).
StatusOr<std::string> stringData(const Tensor& t, std::string& descr) {
  std::vector<std::u32string> points;
  size_t width = 1;
  for (int64_t i = 0; i < t.numElements(); ++i) {
    StatusOr<std::u32string> c = decodeUtf8(t.str(i));
    if (!c) return Status::error("element " + std::to_string(i) + ": " + c.status().message());
    width = std::max(width, c->size());
    points.push_back(std::move(*c));
  }
  descr = "<U" + std::to_string(width);
  std::string out(points.size() * width * 4, '\0');
  for (size_t i = 0; i < points.size(); ++i)
    for (size_t k = 0; k < points[i].size(); ++k)
      for (int b = 0; b < 4; ++b)
        out[(i * width + k) * 4 + b] = static_cast<char>((points[i][k] >> (8 * b)) & 0xff);
  return out;
}

}  // namespace

StatusOr<Tensor> readNpy(const std::string& path) {
  StatusOr<Tensor> t = readNpyImpl(path);
  if (!t) return npyError(path, t.status().message());
  return t;
}

Status writeNpy(const std::string& path, const Tensor& t) {
  if (!t.defined()) return npyError(path, "cannot write an undefined tensor");
  if (t.dtype() == DType::BF16)
    return npyError(path, "cannot write bf16 to .npy: numpy has no bfloat16 dtype (convert to "
                          "f32 first)");
  std::string descr = descrOf(t.dtype()), text;
  if (isString(t.dtype())) {
    StatusOr<std::string> utf32 = stringData(t, descr);
    if (!utf32) return npyError(path, utf32.status().message());
    text = std::move(*utf32);
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return npyError(path, "cannot open file for writing");
  std::string header = headerBytes(t, descr);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  if (isString(t.dtype())) out.write(text.data(), static_cast<std::streamsize>(text.size()));
  else if (t.byteSize() > 0)
    out.write(reinterpret_cast<const char*>(t.bytes()), static_cast<std::streamsize>(t.byteSize()));
  out.close();
  if (!out) return npyError(path, "write failed");
  return Status::ok();
}

}  // namespace kiln
