// ONNX element types and TensorProto data to Kiln tensors.
//
// Data comes from one of three places: raw_data (little-endian bytes), the typed repeated fields
// (float_data, int32_data, ...), or an external file named by external_data. In every case the
// element count is checked against the dims before anything is allocated, so a bad model gives an
// error rather than a huge allocation.
#include "frontend/onnx/tensor_proto.h"

#include <bit>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace kiln::onnx {

static_assert(std::endian::native == std::endian::little,
              "TensorProto raw data is little-endian; a big-endian host needs byte swapping");

namespace {

namespace fs = std::filesystem;
using TP = pb::TensorProto;

// The typed repeated field that holds elements of `t` (ONNX stores 8- and 16-bit types, bool and
// the 16-bit float bit patterns in int32_data, u32 and u64 in uint64_data).
const char* typedFieldName(DType t) {
  switch (t) {
    case DType::F32: return "float_data";
    case DType::F64: return "double_data";
    case DType::Str: return "string_data";
    case DType::I64: return "int64_data";
    case DType::U32:
    case DType::U64: return "uint64_data";
    default: return "int32_data";
  }
}

int64_t typedCount(const TP& t, DType d) {
  switch (d) {
    case DType::F32: return t.float_data_size();
    case DType::F64: return t.double_data_size();
    case DType::Str: return t.string_data_size();
    case DType::I64: return t.int64_data_size();
    case DType::U32:
    case DType::U64: return t.uint64_data_size();
    default: return t.int32_data_size();
  }
}

template <typename T, typename Field>
void copyField(const Field& field, Tensor& out) {
  T* dst = out.mutableData<T>();
  for (int i = 0; i < field.size(); ++i) dst[i] = static_cast<T>(field.Get(i));
}

// Copies the typed field into `out`, whose element count typedCount() has already matched.
void fillTyped(const TP& t, Tensor& out) {
  switch (out.dtype()) {
    case DType::F32: return copyField<float>(t.float_data(), out);
    case DType::F64: return copyField<double>(t.double_data(), out);
    case DType::I64: return copyField<int64_t>(t.int64_data(), out);
    case DType::I32: return copyField<int32_t>(t.int32_data(), out);
    case DType::I16: return copyField<int16_t>(t.int32_data(), out);
    case DType::I8: return copyField<int8_t>(t.int32_data(), out);
    case DType::U8: return copyField<uint8_t>(t.int32_data(), out);
    case DType::U16: return copyField<uint16_t>(t.int32_data(), out);
    case DType::U32: return copyField<uint32_t>(t.uint64_data(), out);
    case DType::U64: return copyField<uint64_t>(t.uint64_data(), out);
    case DType::Bool:
      for (int i = 0; i < t.int32_data_size(); ++i)
        out.mutableData<uint8_t>()[i] = t.int32_data(i) != 0 ? 1 : 0;
      return;
    case DType::F16:
    case DType::BF16:
      // The 16-bit patterns sit in the low half of each int32.
      for (int i = 0; i < t.int32_data_size(); ++i)
        out.mutableData<uint16_t>()[i] = static_cast<uint16_t>(t.int32_data(i) & 0xffff);
      return;
    case DType::Str:
      for (int i = 0; i < t.string_data_size(); ++i) out.setStr(i, t.string_data(i));
      return;
  }
}

StatusOr<int64_t> parseInt(const std::string& s, const std::string& what, const char* key) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < 0)
    return Status::error(what + ": external_data " + key + " '" + s +
                         "' is not a non-negative integer");
  return v;
}

// Checks that `location` stays inside the model's folder.
Status checkExternalPath(const std::string& location, const std::string& what) {
  if (location.empty()) return Status::error(what + ": external_data has no location");
  fs::path p(location);
  if (p.is_absolute())
    return Status::error(what + ": external data location '" + location +
                         "' is absolute; it must be relative to the model's folder");
  for (const fs::path& part : p)
    if (part == "..")
      return Status::error(what + ": external data location '" + location +
                           "' leaves the model's folder ('..' is not allowed)");
  return Status::ok();
}

// True if `p` is `folder` or lies under it, compared part by part (both canonical paths), so
// that /models2/w.bin is not under /models.
bool isUnder(const fs::path& p, const fs::path& folder) {
  auto q = p.begin();
  for (const fs::path& part : folder)
    if (q == p.end() || *q++ != part) return false;
  return true;
}

// The real path of the external data file `location` (symbolic links followed, in the folder's
// path too). Refuses a file whose real path lies outside the model folder's real path: a link
// inside the folder must not make the model read a file elsewhere (and leak it as a weight).
StatusOr<fs::path> resolveInsideFolder(const std::string& baseDir, const std::string& location,
                                       const std::string& what) {
  std::error_code ec;
  fs::path folder = fs::canonical(baseDir.empty() ? "." : baseDir, ec);
  if (ec)
    return Status::error(what + ": cannot resolve the model's folder '" + baseDir + "' (" +
                         ec.message() + ")");
  fs::path given = fs::path(baseDir.empty() ? "." : baseDir) / location;
  fs::path real = fs::canonical(given, ec);
  if (ec || !fs::is_regular_file(real, ec))
    return Status::error(what + ": external data file '" + given.string() + "' does not exist");
  if (!isUnder(real, folder))
    return Status::error(what + ": external data location '" + location + "' resolves to '" +
                         real.string() + "', outside the model's folder '" + folder.string() +
                         "' (through a symbolic link); external data must stay in the folder");
  return real;
}

struct ExternalSpan {
  fs::path path;
  int64_t offset = 0;
  int64_t length = 0;
};

// Finds and checks the byte range of external data: the file exists inside the model's folder
// and holds exactly `bytes` bytes at the offset.
StatusOr<ExternalSpan> locateExternal(const TP& t, int64_t bytes, const std::string& baseDir,
                                      const std::string& what) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : t.external_data()) {
    if (kv.key() == "location") {
      location = kv.value();
    } else if (kv.key() == "offset") {
      KILN_ASSIGN_OR_RETURN(offset, parseInt(kv.value(), what, "offset"));
    } else if (kv.key() == "length") {
      KILN_ASSIGN_OR_RETURN(length, parseInt(kv.value(), what, "length"));
    }
  }
  KILN_RETURN_IF_ERROR(checkExternalPath(location, what));
  KILN_ASSIGN_OR_RETURN(fs::path path, resolveInsideFolder(baseDir, location, what));
  std::error_code ec;
  auto size = static_cast<int64_t>(fs::file_size(path, ec));
  if (ec) return Status::error(what + ": cannot read the size of '" + path.string() + "'");
  if (length < 0) length = bytes;
  if (length != bytes)
    return Status::error(what + ": external_data length is " + std::to_string(length) +
                         " bytes, dims need " + std::to_string(bytes));
  if (offset > size || length > size - offset)
    return Status::error(what + ": external data [" + std::to_string(offset) + ", " +
                         std::to_string(offset + length) + ") lies beyond the end of '" +
                         path.string() + "' (" + std::to_string(size) + " bytes)");
  return ExternalSpan{path, offset, length};
}

Status readExternal(const ExternalSpan& span, Tensor& out, const std::string& what) {
  std::ifstream in(span.path, std::ios::binary);
  in.seekg(span.offset);
  in.read(reinterpret_cast<char*>(out.mutableBytes()), span.length);
  if (!in) return Status::error(what + ": failed reading '" + span.path.string() + "'");
  if (out.dtype() == DType::Bool)
    for (int64_t i = 0; i < out.numElements(); ++i)
      out.mutableData<uint8_t>()[i] = out.data<uint8_t>()[i] != 0;
  return Status::ok();
}

}  // namespace

std::optional<DType> dtypeFromOnnx(int elemType) {
  switch (elemType) {
    case TP::FLOAT: return DType::F32;
    case TP::UINT8: return DType::U8;
    case TP::UINT16: return DType::U16;
    case TP::UINT32: return DType::U32;
    case TP::UINT64: return DType::U64;
    case TP::INT8: return DType::I8;
    case TP::INT16: return DType::I16;
    case TP::INT32: return DType::I32;
    case TP::INT64: return DType::I64;
    case TP::BOOL: return DType::Bool;
    case TP::FLOAT16: return DType::F16;
    case TP::DOUBLE: return DType::F64;
    case TP::BFLOAT16: return DType::BF16;
    case TP::STRING: return DType::Str;
    default: return std::nullopt;
  }
}

std::string onnxDTypeName(int elemType) {
  if (pb::TensorProto_DataType_IsValid(elemType))
    return pb::TensorProto_DataType_Name(static_cast<pb::TensorProto_DataType>(elemType));
  return "type " + std::to_string(elemType);
}

int onnxFromDType(DType t) {
  switch (t) {
    case DType::F32: return TP::FLOAT;
    case DType::U8: return TP::UINT8;
    case DType::U16: return TP::UINT16;
    case DType::U32: return TP::UINT32;
    case DType::U64: return TP::UINT64;
    case DType::I8: return TP::INT8;
    case DType::I16: return TP::INT16;
    case DType::I32: return TP::INT32;
    case DType::I64: return TP::INT64;
    case DType::Bool: return TP::BOOL;
    case DType::F16: return TP::FLOAT16;
    case DType::F64: return TP::DOUBLE;
    case DType::BF16: return TP::BFLOAT16;
    case DType::Str: return TP::STRING;
  }
  return TP::UNDEFINED;
}

namespace {

// What a TensorProto declares: its element type, dims, element count and byte count.
struct Declared {
  DType dtype;
  std::vector<int64_t> dims;
  int64_t n, bytes;
};

// Every source is checked against the declared element count before a tensor is allocated, so
// absurd dims fail here instead of in the allocator.
StatusOr<Declared> declared(const TP& t, const std::string& what) {
  auto dtype = dtypeFromOnnx(t.data_type());
  if (!dtype)
    return Status::error(what + ": element type " + onnxDTypeName(t.data_type()) +
                         " is not supported");
  if (t.has_segment()) return Status::error(what + ": segmented tensors are not supported");
  std::vector<int64_t> dims(t.dims().begin(), t.dims().end());
  for (int64_t d : dims)
    if (d < 0) return Status::error(what + ": negative dimension " + std::to_string(d));
  auto count = checkedNumElements(dims);
  if (!count) return Status::error(what + ": " + count.status().message());
  int64_t bytes = *count * static_cast<int64_t>(dtypeSize(*dtype));
  return Declared{*dtype, std::move(dims), *count, bytes};
}

Status checkRawSize(const Declared& d, size_t size, const std::string& what) {
  if (static_cast<int64_t>(size) == d.bytes) return Status::ok();
  return Status::error(what + ": raw_data has " + std::to_string(size) + " bytes, " +
                       TensorType::of(d.dtype, d.dims).str() + " needs " + std::to_string(d.bytes));
}

// A copy of raw bytes (bool normalised to 0/1). Every byte is written: no zero fill first.
Tensor copyRaw(const Declared& d, std::string_view raw) {
  Tensor out = Tensor::uninitialized(d.dtype, d.dims);
  if (!raw.empty()) std::memcpy(out.mutableBytes(), raw.data(), raw.size());
  if (out.dtype() == DType::Bool)
    for (int64_t i = 0; i < d.n; ++i) out.mutableData<uint8_t>()[i] = out.data<uint8_t>()[i] != 0;
  return out;
}

}  // namespace

StatusOr<Tensor> tensorFromProto(const TP& t, const std::string& baseDir, const std::string& what,
                                 std::string* takeRaw) {
  KILN_ASSIGN_OR_RETURN(Declared d, declared(t, what));
  if (isString(d.dtype) && (t.data_location() == TP::EXTERNAL || t.has_raw_data()))
    return Status::error(what + ": a string tensor keeps its elements in string_data, not in " +
                         (t.has_raw_data() ? "raw_data" : "external data"));
  if (t.data_location() == TP::EXTERNAL) {
    KILN_ASSIGN_OR_RETURN(ExternalSpan span, locateExternal(t, d.bytes, baseDir, what));
    KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::create(d.dtype, d.dims));
    KILN_RETURN_IF_ERROR(readExternal(span, out, what));
    return out;
  }
  if (t.has_raw_data()) {
    KILN_RETURN_IF_ERROR(checkRawSize(d, t.raw_data().size(), what));
    if (takeRaw && d.dtype != DType::Bool)
      return Tensor::fromBytes(d.dtype, d.dims, std::move(*takeRaw));
    return copyRaw(d, t.raw_data());
  }
  int64_t have = typedCount(t, d.dtype);
  if (have != d.n)
    return Status::error(what + ": " + typedFieldName(d.dtype) + " has " + std::to_string(have) +
                         " elements, " + TensorType::of(d.dtype, d.dims).str() + " needs " +
                         std::to_string(d.n));
  KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::create(d.dtype, d.dims));
  fillTyped(t, out);
  return out;
}

StatusOr<Tensor> tensorFromOutsideRaw(const TP& t, std::string_view raw, const MappedFile& file,
                                      const std::string& what) {
  KILN_ASSIGN_OR_RETURN(Declared d, declared(t, what));
  if (isString(d.dtype))
    return Status::error(what + ": a string tensor keeps its elements in string_data, not in "
                                "raw_data");
  KILN_RETURN_IF_ERROR(checkRawSize(d, raw.size(), what));
  Tensor out = Tensor::uninitialized(d.dtype, d.dims);
  Status read = file.copyTo(raw, out.mutableBytes());
  if (!read) return Status::error(what + ": " + read.message());
  if (out.dtype() == DType::Bool)  // normalise to 0/1
    for (int64_t i = 0; i < d.n; ++i) out.mutableData<uint8_t>()[i] = out.data<uint8_t>()[i] != 0;
  return out;
}

StatusOr<std::string> readFileLimited(const std::string& path, const std::string& what) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return Status::error(what + " '" + path + "' does not exist");
  auto size = fs::file_size(path, ec);
  if (ec) return Status::error(what + " '" + path + "': cannot read its size");
  if (static_cast<int64_t>(size) > kMaxProtoBytes)
    return Status::error(what + " '" + path + "' is " + std::to_string(size) +
                         " bytes; files over 2 GB are not supported (store large weights as "
                         "external data)");
  std::string bytes(size, '\0');
  std::ifstream in(path, std::ios::binary);
  if (!in.read(bytes.data(), static_cast<std::streamsize>(size)))
    return Status::error(what + " '" + path + "': read failed");
  return bytes;
}

}  // namespace kiln::onnx
