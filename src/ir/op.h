// The op table: one OpInfo per op of ops.def, with its attribute schema and type rule.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "ir/attributes.h"
#include "ir/types.h"
#include "support/status.h"

namespace kiln {

enum class OpCode : uint16_t {
#define KILN_OP(id, name, cls, minOps, maxOps, results) id,
#include "ir/ops.def"
#undef KILN_OP
};

inline constexpr int kNumOps = 0
#define KILN_OP(id, name, cls, minOps, maxOps, results) +1
#include "ir/ops.def"
#undef KILN_OP
    ;

enum class OpClass : uint8_t {
  Leaf,
  ElementwiseUnary,
  ElementwiseBinary,
  ElementwiseTernary,
  DataMovement,
  Reduction,
  Contraction,
  Composite,
};

// One attribute of an op's schema.
struct AttrSpec {
  const char* name;
  AttrKind kind;
  bool required;
  // Default for optional scalar attributes (Int/Float/Bool/Enum). Optional list attributes
  // default to "absent", and the op's semantics say what absent means (e.g. strides of 1).
  std::optional<AttrValue> defaultValue;
  // Allowed words of an Enum attribute.
  std::vector<const char*> enumValues;
};

// What an op's type rule sees: operand types, attributes, and the result types written in the
// program (empty when a builder asks for inference). Ops whose result shape is not a function of
// the operands (reshape, broadcast_in_dim, iota, constant, convert, resize, parameter) take it
// from `declared`.
struct InferInput {
  OpCode op;
  std::span<const TensorType> operands;
  const AttrMap& attrs;
  std::span<const TensorType> declared;
};

using InferFn = StatusOr<std::vector<TensorType>> (*)(const InferInput&);

struct OpInfo {
  OpCode code;
  const char* name;
  OpClass opClass;
  int minOperands;
  int maxOperands;  // -1: no upper bound
  int numResults;
  std::vector<AttrSpec> attrs;
  InferFn infer;
};

const OpInfo& opInfo(OpCode op);
std::string_view opName(OpCode op);
std::optional<OpCode> opFromName(std::string_view name);
const AttrSpec* findAttrSpec(OpCode op, std::string_view attrName);

// Checks operand count, attribute names/kinds/enum words and required attributes, then runs the
// type rule. Errors name the op and the cause; the caller adds the location.
StatusOr<std::vector<TensorType>> inferResultTypes(const InferInput& in);

// Attribute access with schema defaults (KILN_CHECKs that the attribute exists or has one).
int64_t getInt(OpCode op, const AttrMap& a, const char* name);
double getFloat(OpCode op, const AttrMap& a, const char* name);
bool getBool(OpCode op, const AttrMap& a, const char* name);
const std::string& getEnum(OpCode op, const AttrMap& a, const char* name);
// A list attribute, or `fallback` when absent.
std::vector<int64_t> getInts(const AttrMap& a, const char* name,
                             std::vector<int64_t> fallback = {});
std::vector<double> getFloats(const AttrMap& a, const char* name,
                              std::vector<double> fallback = {});
bool hasAttr(const AttrMap& a, const char* name);

// Convolution dimension numbers, spelled as in StableHLO's text: "bf01_oi01->bf01" (b batch,
// f feature, o/i kernel output/input feature, digits spatial dimensions in order).
struct ConvDimensionNumbers {
  int64_t inputBatch = 0, inputFeature = 1;
  std::vector<int64_t> inputSpatial;
  int64_t kernelOutput = 0, kernelInput = 1;
  std::vector<int64_t> kernelSpatial;
  int64_t outputBatch = 0, outputFeature = 1;
  std::vector<int64_t> outputSpatial;
};
StatusOr<ConvDimensionNumbers> parseConvDimensionNumbers(std::string_view s);
std::string defaultConvDimensionNumbers(int64_t numSpatial);  // "bf01_oi01->bf01" for 2
// The convolution's dimension numbers (attribute or the NCHW/OIHW default for its rank).
StatusOr<ConvDimensionNumbers> convDimensionNumbers(const AttrMap& a, int64_t rank);
// A convolution's window attributes, with their defaults where absent (strides and dilations 1,
// padding 0). Not checked: the shape rule checks a verified node's (one entry per spatial dim,
// strides and dilations positive).
struct ConvWindow {
  std::vector<int64_t> strides, lo, hi, lhsDil, rhsDil;
};
ConvWindow convWindow(const AttrMap& a, size_t numSpatial);

}  // namespace kiln
