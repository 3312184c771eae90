// The "in scope" decision of `kiln conformance`, made by reading the ModelProto with the ONNX
// protobuf schema (see conformance_scope.h for the rules).
#include "conformance_scope.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <set>
#include <sstream>

namespace kiln::conformance {

namespace {

namespace pb = ::onnx;

constexpr const char* kTrainingDomain = "ai.onnx.preview.training";
constexpr int64_t kMaxModelBytes = (int64_t(1) << 31) - 1;  // protobuf's limit

// Ops whose outputs are random draws, so no fixed expected output can be matched.
const std::set<std::string>& randomOps() {
  static const std::set<std::string> ops = {"Bernoulli",         "RandomNormal",
                                            "RandomNormalLike",  "RandomUniform",
                                            "RandomUniformLike", "Multinomial"};
  return ops;
}

bool isDefaultDomain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

// The kind of value a formal parameter of an op schema takes when every type it allows is of that
// kind ("sequences" for seq(...), ...); "" when it allows a plain numeric tensor.
std::string onlyKind(const ::onnx::DataTypeSet& types) {
  std::string kind;
  for (const std::string* t : types) {
    std::string k = t->rfind("seq(", 0) == 0        ? "sequences"
                    : t->rfind("optional(", 0) == 0 ? "optionals"
                    : t->rfind("map(", 0) == 0      ? "maps"
                    : *t == "tensor(string)"        ? "strings"
                                                    : "";
    if (k.empty() || (!kind.empty() && k != kind)) return "";
    kind = k;
  }
  return kind;
}

// Why a value of type `t` puts a test out of scope, or "" when it does not.
std::string typeProblem(const pb::TypeProto& t) {
  switch (t.value_case()) {
    case pb::TypeProto::kTensorType:
      return t.tensor_type().elem_type() == pb::TensorProto::STRING ? "uses strings" : "";
    case pb::TypeProto::kSequenceType: return "uses sequences";
    case pb::TypeProto::kOptionalType: return "uses optionals";
    case pb::TypeProto::kMapType: return "uses maps";
    default: return "";
  }
}

template <typename T>
T readLE(const std::string& raw) {
  T v;
  std::memcpy(&v, raw.data(), sizeof v);
  return v;
}

// The value of a one-element numeric or bool TensorProto, if it holds exactly one.
std::optional<double> scalarOf(const pb::TensorProto& t) {
  int64_t n = 1;
  for (int64_t d : t.dims()) n *= d;
  if (n != 1) return std::nullopt;
  const std::string& raw = t.raw_data();
  switch (t.data_type()) {
    case pb::TensorProto::FLOAT:
      if (raw.size() == 4) return readLE<float>(raw);
      if (t.float_data_size() == 1) return t.float_data(0);
      break;
    case pb::TensorProto::DOUBLE:
      if (raw.size() == 8) return readLE<double>(raw);
      if (t.double_data_size() == 1) return t.double_data(0);
      break;
    case pb::TensorProto::FLOAT16:
      if (raw.size() == 2) return halfToFloat(readLE<uint16_t>(raw));
      if (t.int32_data_size() == 1) return halfToFloat(static_cast<uint16_t>(t.int32_data(0)));
      break;
    case pb::TensorProto::BOOL:
      if (raw.size() == 1) return raw[0] != 0 ? 1.0 : 0.0;
      if (t.int32_data_size() == 1) return t.int32_data(0) != 0 ? 1.0 : 0.0;
      break;
    default: break;
  }
  return std::nullopt;
}

class Scanner {
 public:
  // Values known from constants and the test's inputs, by tensor name.
  std::map<std::string, double> known;
  // The model's opset imports, by domain ("" for the default domain).
  std::map<std::string, int> opsets;
  std::string problem;  // the first reason found

  void scanGraph(const pb::GraphProto& g) {
    for (const auto& vi : g.input()) checkValue(vi, "graph input");
    for (const auto& vi : g.output()) checkValue(vi, "graph output");
    for (const auto& vi : g.value_info()) checkValue(vi, "value");
    for (const auto& init : g.initializer()) {
      if (init.data_type() == pb::TensorProto::STRING)
        note("uses strings (initializer '" + init.name() + "')");
      if (auto v = scalarOf(init)) known[init.name()] = *v;
    }
    for (const auto& node : g.node()) scanNode(node);
  }

 private:
  void note(const std::string& why) {
    if (problem.empty()) problem = why;
  }

  void checkValue(const pb::ValueInfoProto& vi, const char* what) {
    std::string p = typeProblem(vi.type());
    if (!p.empty()) note(p + " (" + what + " '" + vi.name() + "')");
  }

  void scanNode(const pb::NodeProto& node) {
    std::string where =
        "op " + node.op_type() + (node.name().empty() ? "" : " (node '" + node.name() + "')");
    if (node.domain() == kTrainingDomain) note("uses the training domain: " + where);
    checkSchema(node, where);
    if (isDefaultDomain(node.domain()) && randomOps().count(node.op_type()))
      note("random outputs: " + where);
    if (isDefaultDomain(node.domain()) && node.op_type() == "Dropout" && dropoutIsRandom(node))
      note("random outputs: Dropout in training mode" +
           (node.name().empty() ? "" : " (node '" + node.name() + "')"));
    for (const auto& a : node.attribute()) {
      if (a.type() == pb::AttributeProto::TENSOR && a.t().data_type() == pb::TensorProto::STRING)
        note("uses strings (attribute '" + a.name() + "' of " + where + ")");
      if (a.has_g()) scanGraph(a.g());
      for (const auto& sub : a.graphs()) scanGraph(sub);
    }
    if (node.op_type() == "Constant" && node.output_size() == 1) {
      for (const auto& a : node.attribute())
        if (a.name() == "value" && a.has_t())
          if (auto v = scalarOf(a.t())) known[node.output(0)] = *v;
    }
  }

  // Values inside the graph can be sequences, optionals or strings even when the graph's inputs
  // and outputs are plain tensors (SplitToSequence then ConcatFromSequence, say): the op's schema
  // says so when a parameter the node uses admits nothing else.
  void checkSchema(const pb::NodeProto& node, const std::string& where) {
    std::string domain = isDefaultDomain(node.domain()) ? "" : node.domain();
    auto version = opsets.find(domain);
    if (version == opsets.end()) return;
    const ::onnx::OpSchema* schema =
        ::onnx::OpSchemaRegistry::Schema(node.op_type(), version->second, domain);
    if (!schema) return;
    checkParams(schema->inputs(), node.input(), where);
    checkParams(schema->outputs(), node.output(), where);
  }

  template <typename Names>
  void checkParams(const std::vector<::onnx::OpSchema::FormalParameter>& params, const Names& names,
                   const std::string& where) {
    for (int i = 0; i < names.size() && !params.empty(); ++i) {
      if (names.Get(i).empty()) continue;                              // an optional input left out
      size_t p = std::min(static_cast<size_t>(i), params.size() - 1);  // variadic tail
      std::string kind = onlyKind(params[p].GetTypes());
      if (!kind.empty()) note("uses " + kind + ": " + where);
    }
  }

  // Dropout draws a random mask when training_mode (input 2) may be true and the ratio
  // (input 1, default 0.5) is not known to be 0.
  bool dropoutIsRandom(const pb::NodeProto& node) const {
    if (node.input_size() < 3 || node.input(2).empty()) return false;
    auto mode = known.find(node.input(2));
    if (mode != known.end() && mode->second == 0) return false;
    if (node.input_size() < 2 || node.input(1).empty()) return true;
    auto ratio = known.find(node.input(1));
    return ratio == known.end() || ratio->second != 0;
  }
};

}  // namespace

ScopeDecision decideScope(const std::string& modelPath,
                          const std::vector<std::optional<Tensor>>& inputs) {
  std::ifstream in(modelPath, std::ios::binary | std::ios::ate);
  if (!in) return {};
  std::streamoff size = in.tellg();
  if (size < 0 || size > kMaxModelBytes) return {};
  std::string bytes(static_cast<size_t>(size), '\0');
  in.seekg(0);
  if (!in.read(bytes.data(), size)) return {};
  pb::ModelProto model;
  if (!model.ParseFromString(bytes)) return {};

  Scanner s;
  for (const auto& op : model.opset_import())
    s.opsets[isDefaultDomain(op.domain()) ? "" : op.domain()] = static_cast<int>(op.version());
  // The test's inputs bind, in order, to the graph inputs that are not initializers.
  std::set<std::string> initializers;
  for (const auto& init : model.graph().initializer()) initializers.insert(init.name());
  size_t next = 0;
  for (const auto& vi : model.graph().input()) {
    if (initializers.count(vi.name())) continue;
    size_t i = next++;
    if (i < inputs.size() && inputs[i] && inputs[i]->numElements() == 1 &&
        !isString(inputs[i]->dtype()))
      s.known[vi.name()] = inputs[i]->getDouble(0);
  }
  s.scanGraph(model.graph());
  if (s.problem.empty()) return {};
  return {false, s.problem};
}

}  // namespace kiln::conformance
