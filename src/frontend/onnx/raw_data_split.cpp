#include "frontend/onnx/raw_data_split.h"

#include <cstdint>

namespace kiln::onnx {

namespace {

// Field numbers in onnx.proto.
constexpr uint64_t kModelGraph = 7;
constexpr uint64_t kGraphInitializer = 5;
constexpr uint64_t kTensorRawData = 9;

constexpr int kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5;

bool readVarint(std::string_view& in, uint64_t& v) {
  v = 0;
  for (int shift = 0; shift < 64 && !in.empty(); shift += 7) {
    auto byte = static_cast<uint8_t>(in.front());
    in.remove_prefix(1);
    v |= uint64_t(byte & 0x7f) << shift;
    if (!(byte & 0x80)) return true;
  }
  return false;
}

void appendVarint(std::string& out, uint64_t v) {
  for (; v >= 0x80; v >>= 7) out += static_cast<char>((v & 0x7f) | 0x80);
  out += static_cast<char>(v);
}

// One field of a message: its number, wire type, its key's bytes, all its bytes and, for a
// length-delimited field, its payload.
struct Field {
  uint64_t number = 0;
  int wireType = 0;
  std::string_view key, whole, payload;
};

// Reads the next field of `in`; false at malformed data or a group (not in ONNX's messages).
bool nextField(std::string_view& in, Field& f) {
  const char* start = in.data();
  uint64_t key = 0, n = 0;
  if (!readVarint(in, key)) return false;
  f.number = key >> 3;
  f.wireType = static_cast<int>(key & 7);
  f.key = std::string_view(start, static_cast<size_t>(in.data() - start));
  switch (f.wireType) {
    case kVarint:
      if (!readVarint(in, n)) return false;
      break;
    case kFixed64:
    case kFixed32: {
      size_t size = f.wireType == kFixed64 ? 8 : 4;
      if (in.size() < size) return false;
      in.remove_prefix(size);
      break;
    }
    case kLengthDelimited:
      if (!readVarint(in, n) || n > in.size()) return false;
      f.payload = in.substr(0, static_cast<size_t>(n));
      in.remove_prefix(static_cast<size_t>(n));
      break;
    default: return false;
  }
  f.whole = std::string_view(start, static_cast<size_t>(in.data() - start));
  return f.number != 0;
}

// Appends `f` with `payload` in place of its own.
void appendReplaced(std::string& out, const Field& f, std::string_view payload) {
  out += f.key;
  appendVarint(out, payload.size());
  out += payload;
}

// A TensorProto without its raw_data field when that is at least `minBytes` (then `cut` is set).
bool splitTensor(std::string_view msg, size_t minBytes, std::string& out,
                 std::optional<std::string_view>& cut) {
  bool sawRaw = false;
  for (Field f; !msg.empty();) {
    if (!nextField(msg, f)) return false;
    if (f.number == kTensorRawData) {
      // A repeated raw_data would be merged (the last wins): left to protobuf.
      if (f.wireType != kLengthDelimited || sawRaw) return false;
      sawRaw = true;
      if (f.payload.size() >= minBytes) {
        cut = f.payload;
        continue;
      }
    }
    out += f.whole;
  }
  return true;
}

// A GraphProto with each initializer split by splitTensor.
bool splitGraph(std::string_view msg, size_t minBytes, std::string& out, SplitModel& split) {
  for (Field f; !msg.empty();) {
    if (!nextField(msg, f)) return false;
    if (f.number != kGraphInitializer) {
      out += f.whole;
      continue;
    }
    if (f.wireType != kLengthDelimited) return false;
    std::string tensor;
    std::optional<std::string_view> cut;
    if (!splitTensor(f.payload, minBytes, tensor, cut)) return false;
    split.raw.push_back(cut);
    appendReplaced(out, f, tensor);
  }
  return true;
}

}  // namespace

std::optional<SplitModel> splitInitializerData(std::string_view bytes, size_t minBytes) {
  SplitModel split;
  bool sawGraph = false;
  for (Field f; !bytes.empty();) {
    if (!nextField(bytes, f)) return std::nullopt;
    if (f.number != kModelGraph) {
      split.skeleton += f.whole;
      continue;
    }
    // A second graph field would be merged into the first: left to protobuf.
    if (f.wireType != kLengthDelimited || sawGraph) return std::nullopt;
    sawGraph = true;
    std::string graph;
    if (!splitGraph(f.payload, minBytes, graph, split)) return std::nullopt;
    appendReplaced(split.skeleton, f, graph);
  }
  return split;
}

}  // namespace kiln::onnx
