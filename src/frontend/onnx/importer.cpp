// The importer's model-level work: initializers, graph inputs and outputs, statically known
// values, clean-up, check mode, and the public entry points of onnx_importer.h and
// import_options.h.
#include "frontend/onnx/importer.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>

#include "frontend/onnx/raw_data_split.h"
#include "frontend/onnx/tensor_proto.h"
#include "interp/interpreter.h"
#include "ir/verifier.h"
#include "support/mapped_file.h"

namespace kiln::onnx {

namespace {

// Values computed while importing are shapes, indices and small tables; a larger result is left
// to run time rather than allocated here.
constexpr int64_t kMaxKnownElements = int64_t(1) << 24;

// Sentinels standing for symbolic dims sit far from any extent or index a model computes.
constexpr int64_t kSentinelBase = std::numeric_limits<int64_t>::min() / 2;

// Ops that only move or select elements: a sentinel passes through them unchanged, so their
// results may still be read as dims. Any other op on a sentinel gives a meaningless number.
bool carriesSentinels(const Node& n) {
  switch (n.op()) {
    case OpCode::Reshape:
    case OpCode::BroadcastInDim:
    case OpCode::Transpose:
    case OpCode::Slice:
    case OpCode::Concatenate:
    case OpCode::Gather:
    case OpCode::Reverse:
    case OpCode::DynamicSlice: return true;
    case OpCode::Convert: return n.result()->type().dtype() == DType::I64;
    default: return false;
  }
}

std::string parentDir(const std::string& path) {
  std::filesystem::path p(path);
  return p.has_parent_path() ? p.parent_path().string() : ".";
}

}  // namespace

Value* Scope::lookup(const std::string& name) const {
  for (const Scope* s = this; s; s = s->parent) {
    auto it = s->values.find(name);
    if (it != s->values.end()) return it->second;
  }
  return nullptr;
}

const std::vector<Value*>* Scope::lookupSequence(const std::string& name) const {
  for (const Scope* s = this; s; s = s->parent) {
    auto it = s->sequences.find(name);
    if (it != s->sequences.end()) return &it->second;
  }
  return nullptr;
}

Importer::Importer(const pb::ModelProto& model, std::string baseDir, Mode mode,
                   const ImportOptions& options, std::set<std::string> boundInputs)
    : model_(model), baseDir_(std::move(baseDir)), mode_(mode), options_(options),
      boundInputs_(std::move(boundInputs)) {}

Status Importer::report(const std::string& node, const std::string& opType, const Status& s,
                        int opset) {
  if (s.isOk()) return s;
  // The builder names the node itself; keep one prefix only.
  std::string msg = s.message();
  std::string builderPrefix = "node '" + node + "': ";
  if (msg.rfind(builderPrefix, 0) == 0) msg = msg.substr(builderPrefix.size());
  if (mode_ == Mode::Check) {
    unsupported_.push_back(Unsupported{node, opType, msg});
    return Status::ok();
  }
  std::string where =
      opType.empty() ? node
                     : "node '" + node + "' (" + opType +
                           (opset > 0 ? ", opset " + std::to_string(opset) : std::string()) + ")";
  return Status::error(where + ": " + msg);
}

StatusOr<std::unique_ptr<Module>> Importer::run() {
  module_ = std::make_unique<Module>();
  f_ = module_->addFunction("main");
  if (!model_.has_graph()) return Status::error("the model has no graph");
  Scope scope;
  for (const auto& op : model_.opset_import()) {
    std::string d = op.domain() == "ai.onnx" ? "" : op.domain();
    scope.opsets[d] = static_cast<int>(op.version());
  }
  if (!scope.opsets.count("")) scope.opsets[""] = 1;  // models before opset_import existed
  int opset = scope.opsets[""];
  if (opset < 1 || opset > 17) {
    KILN_RETURN_IF_ERROR(
        report("model", "",
               Status::error("opset " + std::to_string(opset) +
                             " of the default domain is not supported (1 to 17)")));
  }
  if (mode_ == Mode::Check) {
    // The model's own value_info, so that checking can go on past a failing node. (ONNX's shape
    // inference is not run: it is not safe on malformed models.)
    for (const auto& vi : model_.graph().value_info()) hintTypes_[vi.name()] = vi.type();
    for (const auto& vi : model_.graph().output()) hintTypes_[vi.name()] = vi.type();
  }
  KILN_RETURN_IF_ERROR(importInitializers(scope));
  KILN_RETURN_IF_ERROR(importInputs(scope));
  KILN_RETURN_IF_ERROR(importGraphNodes(model_.graph(), scope));
  KILN_RETURN_IF_ERROR(importOutputs(scope));
  removeDeadNodes();
  KILN_RETURN_IF_ERROR(checkDeadSymbolic());
  if (mode_ == Mode::Import && unsupported_.empty()) {
    Status v = verify(*module_);
    if (!v) return Status::error("internal error: imported IR does not verify: " + v.str());
  }
  return std::move(module_);
}

Status Importer::importInitializers(Scope& scope) {
  return importInitializerList(model_.graph(), scope);
}

Status Importer::importInitializerList(const pb::GraphProto& g, Scope& scope) {
  Builder b(f_);
  for (const auto& sp : g.sparse_initializer()) {
    std::string name = sp.values().name();
    KILN_RETURN_IF_ERROR(report("initializer '" + name + "'", "",
                                Status::error("sparse initializers are not supported")));
  }
  // The tensor of an initializer: converted beforehand (useConvertedInitializers), or now.
  auto convert = [&](const pb::TensorProto& t, const std::string& what) -> StatusOr<Tensor> {
    if (converted_) {
      auto it = converted_->find(&t);
      if (it != converted_->end()) return it->second;
    }
    return tensorFromProto(t, baseDir_, what);
  };
  for (const pb::TensorProto& t : g.initializer()) {
    std::string what = "initializer '" + t.name() + "'";
    StatusOr<Tensor> tensor = convert(t, what);
    if (!tensor) {
      KILN_RETURN_IF_ERROR(
          report(what, "", Status::error(tensor.status().message().substr(what.size() + 2))));
      poisoned_.insert(t.name());
      continue;
    }
    b.setOrigin(t.name());
    TensorType type = tensor->type();
    Value* v =
        b.op(OpCode::Constant, {}, {{"value", tensorAttr(std::move(*tensor), t.name())}}, {type});
    if (!v) return b.status();
    v->setName(t.name());
    scope.values[t.name()] = v;
  }
  return Status::ok();
}

std::string Importer::symbolFor(const std::string& dimParam) {
  auto it = dimParams_.find(dimParam);
  if (it != dimParams_.end()) return it->second;
  std::string s;
  for (char ch : dimParam)
    s += (std::isalnum(static_cast<unsigned char>(ch)) || ch == '_') ? ch : '_';
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) s = "d_" + s;
  std::string unique = s;
  for (int k = 1; usedSymbols_.count(unique); ++k) unique = s + "_" + std::to_string(k);
  usedSymbols_.insert(unique);
  dimParams_[dimParam] = unique;
  return unique;
}

std::string Importer::freshSymbol() {
  std::string s;
  do s = "unk" + std::to_string(unkCounter_++);
  while (usedSymbols_.count(s) || dimParams_.count(s));
  usedSymbols_.insert(s);
  return s;
}

StatusOr<TensorType> Importer::typeOfValueInfo(const pb::ValueInfoProto& vi,
                                               const std::string& what) {
  const pb::TypeProto& tp = vi.type();
  if (!tp.has_tensor_type()) {
    const char* kind = tp.has_sequence_type()        ? "sequence"
                       : tp.has_optional_type()      ? "optional"
                       : tp.has_map_type()           ? "map"
                       : tp.has_sparse_tensor_type() ? "sparse tensor"
                                                     : "unknown";
    if (tp.has_sequence_type())
      return Status::error("sequence types are not supported here: a sequence must be known "
                           "while importing (built by sequence ops inside the graph)");
    return Status::error(std::string(kind) + " types are not supported");
  }
  const auto& tt = tp.tensor_type();
  auto dtype = dtypeFromOnnx(tt.elem_type());
  if (!dtype)
    return Status::error("element type " + onnxDTypeName(tt.elem_type()) + " is not supported");
  if (!tt.has_shape()) return Status::error("the rank is unknown (no shape given)");
  Shape dims;
  for (const auto& d : tt.shape().dim()) {
    if (d.has_dim_value()) {
      if (d.dim_value() < 0 || d.dim_value() > kMaxElements)
        return Status::error("dimension " + std::to_string(d.dim_value()) + " is invalid");
      dims.emplace_back(d.dim_value());
    } else if (d.has_dim_param() && !d.dim_param().empty()) {
      auto fixed = options_.dimValues.find(d.dim_param());
      if (fixed != options_.dimValues.end()) {
        if (fixed->second < 0)
          return Status::error("the value given for dim '" + d.dim_param() + "' is negative");
        dims.emplace_back(fixed->second);
      } else {
        dims.push_back(Dim::symbol(symbolFor(d.dim_param())));
      }
    } else {
      dims.push_back(Dim::symbol(freshSymbol()));
    }
  }
  (void)what;
  return TensorType(*dtype, std::move(dims));
}

Status Importer::importInputs(Scope& scope) {
  Builder b(f_);
  for (const pb::ValueInfoProto& vi : model_.graph().input()) {
    if (scope.values.count(vi.name())) continue;  // an initializer (a default value)
    std::string what = "graph input '" + vi.name() + "'";
    auto type = typeOfValueInfo(vi, what);
    if (!type) {
      KILN_RETURN_IF_ERROR(report(what, "", type.status()));
      poisoned_.insert(vi.name());
      continue;
    }
    b.setOrigin(vi.name());
    auto bound = options_.inputValues.find(vi.name());
    if (boundInputs_.count(vi.name()) && bound != options_.inputValues.end()) {
      const Tensor& t = bound->second;
      bool fits = t.dtype() == type->dtype() && t.rank() == type->rank();
      for (int64_t i = 0; fits && i < t.rank(); ++i)
        fits = type->dim(i).isSymbolic() || type->dim(i).value() == t.dims()[i];
      if (!fits)
        return Status::error(what + ": the value given for it has type " + t.type().str() +
                             ", the model declares " + type->str());
      Value* v = b.op(OpCode::Constant, {}, {{"value", tensorAttr(t, vi.name())}}, {t.type()});
      if (!v) return b.status();
      v->setName(vi.name());
      scope.values[vi.name()] = v;
      continue;
    }
    Value* v = b.parameter(*type, vi.name());
    v->setName(vi.name());
    scope.values[vi.name()] = v;
  }
  return Status::ok();
}

Status Importer::importOutputs(Scope& scope) {
  std::vector<Value*> outs;
  std::vector<std::string> names;
  std::unordered_set<const Value*> renamed;
  for (const pb::ValueInfoProto& vi : model_.graph().output()) {
    Value* v = scope.lookup(vi.name());
    if (!v && poisoned_.count(vi.name())) continue;  // check mode: its producer is reported
    if (!v && scope.lookupSequence(vi.name())) {
      KILN_RETURN_IF_ERROR(report("graph output '" + vi.name() + "'", "",
                                  Status::error("sequence graph outputs are not supported: a "
                                                "sequence must be known while importing and "
                                                "the IR has no sequence type")));
      continue;
    }
    if (!v) {
      KILN_RETURN_IF_ERROR(report("graph output '" + vi.name() + "'", "",
                                  Status::error("no node or input produces it")));
      continue;
    }
    // Each output is named after its graph output, also where its value is a graph input or
    // another output (Identity, Max of one input). The value itself takes the output's name for
    // readable dumps, unless it is a parameter (named after its input) or returned already.
    if (v->def()->op() != OpCode::Parameter && renamed.insert(v).second) v->setName(vi.name());
    outs.push_back(v);
    names.push_back(vi.name());
  }
  if (unsupported_.empty()) f_->setOutputs(std::move(outs), std::move(names));
  return Status::ok();
}

void Importer::removeDeadNodes() {
  std::vector<Node*> order;
  for (const auto& n : f_->nodes()) order.push_back(n.get());
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    Node* n = *it;
    if (n->op() == OpCode::Parameter) continue;
    bool used = false;
    for (size_t i = 0; i < n->numResults(); ++i) used |= n->result(i)->hasUses();
    if (used) continue;
    for (size_t i = 0; i < n->numResults(); ++i) {
      known_.erase(n->result(i));
      unknowable_.erase(n->result(i));
    }
    symbolicConstants_.erase(n);
    f_->erase(n);
  }
}

Status Importer::checkDeadSymbolic() {
  for (const Node* n : symbolicConstants_)
    KILN_RETURN_IF_ERROR(report(
        n->origin(), "",
        Status::error(
            "the shape of a tensor with symbolic dimensions is used as data at run time; dynamic "
            "shapes are not supported")));
  return Status::ok();
}

// ---- Known values ----

int64_t Importer::sentinelFor(const Dim& d) {
  auto it = sentinels_.find(d.str());
  if (it != sentinels_.end()) return it->second;
  int64_t v = kSentinelBase - static_cast<int64_t>(sentinels_.size());
  sentinels_[d.str()] = v;
  sentinelSymbols_[v] = d;
  return v;
}

std::optional<Dim> Importer::dimForSentinel(int64_t v) const {
  auto it = sentinelSymbols_.find(v);
  if (it == sentinelSymbols_.end()) return std::nullopt;
  return it->second;
}

bool Importer::holdsSentinel(const Tensor& t) const {
  if (t.dtype() != DType::I64) return false;
  for (int64_t j = 0; j < t.numElements(); ++j)
    if (sentinelSymbols_.count(t.data<int64_t>()[j])) return true;
  return false;
}

// Elementwise i64 arithmetic on sentinels: products and exact quotients of dims, and adding 0.
// nullopt when an element's result is not a dim (a sum of symbols, an inexact quotient).
std::optional<Tensor> Importer::dimArithmetic(const Node& n, const std::vector<Tensor>& operands) {
  OpCode op = n.op();
  if (op == OpCode::Compare) return dimComparison(n, operands);
  bool arith = op == OpCode::Mul || op == OpCode::Div || op == OpCode::Add || op == OpCode::Sub;
  if (!arith || operands.size() != 2 || n.result()->type().dtype() != DType::I64 ||
      operands[0].type() != n.result()->type() || operands[1].type() != n.result()->type())
    return std::nullopt;

  Tensor out(DType::I64, n.result()->type().staticDims());
  for (int64_t j = 0; j < out.numElements(); ++j) {
    int64_t x = operands[0].data<int64_t>()[j], y = operands[1].data<int64_t>()[j];
    auto a = dimForSentinel(x), b = dimForSentinel(y);
    int64_t& r = out.mutableData<int64_t>()[j];
    if (!a && !b) {  // plain integers, as the interpreter computes them
      bool ok = op == OpCode::Mul   ? !__builtin_mul_overflow(x, y, &r)
                : op == OpCode::Div ? y != 0 && (r = x / y, true)
                : op == OpCode::Add ? !__builtin_add_overflow(x, y, &r)
                                    : !__builtin_sub_overflow(x, y, &r);
      if (!ok) return std::nullopt;
      continue;
    }
    if ((!a && (x < 0 || x > kMaxElements)) || (!b && (y < 0 || y > kMaxElements)))
      return std::nullopt;
    Dim da = a ? *a : Dim(x), db = b ? *b : Dim(y);
    std::optional<Dim> d;
    if (op == OpCode::Mul) d = da * db;
    else if (op == OpCode::Div) d = Dim::quotient(da, db);
    else if (db == Dim(0)) d = da;
    else if (op == OpCode::Add && da == Dim(0)) d = db;
    if (!d) return std::nullopt;
    r = d->isStatic() ? d->value() : sentinelFor(*d);
  }
  return out;
}

// Comparisons of i64 sentinels that hold for every size: a dim (>= 0) against a negative number
// (torch's `expand(n, -1, -1)` asks shape == -1), and a dim against itself.
std::optional<Tensor> Importer::dimComparison(const Node& n, const std::vector<Tensor>& operands) {
  if (operands.size() != 2 || operands[0].dtype() != DType::I64 ||
      operands[0].type() != operands[1].type())
    return std::nullopt;
  const std::string& dir = n.attrEnum("direction");
  Tensor out(DType::Bool, operands[0].dims());
  for (int64_t j = 0; j < out.numElements(); ++j) {
    int64_t x = operands[0].data<int64_t>()[j], y = operands[1].data<int64_t>()[j];
    auto a = dimForSentinel(x), b = dimForSentinel(y);
    // The sign of x - y where it is known for every size: -1, 0 or 1.
    std::optional<int> sign;
    if (!a && !b) sign = x < y ? -1 : x > y ? 1 : 0;
    else if (a && b && *a == *b) sign = 0;
    else if (a && !b && y < 0) sign = 1;
    else if (b && !a && x < 0) sign = -1;
    if (!sign) return std::nullopt;
    bool r = dir == "eq"   ? *sign == 0
             : dir == "ne" ? *sign != 0
             : dir == "lt" ? *sign < 0
             : dir == "le" ? *sign <= 0
             : dir == "gt" ? *sign > 0
                           : *sign >= 0;
    out.setInt(j, r ? 1 : 0);
  }
  return out;
}

void Importer::addSymbolicConstant(Value* v, KnownValue k) {
  known_[v] = std::move(k);
  symbolicConstants_.insert(v->def());
}

std::string Importer::unknownReason(Value* v) const {
  auto it = unknowable_.find(v);
  return it == unknowable_.end() ? std::string() : it->second;
}

void Importer::noteNeededInputs(const std::vector<std::string>& names) {
  neededInputs_.insert(names.begin(), names.end());
}

std::vector<std::string> Importer::parameterDeps(Value* v) {
  std::vector<std::string> names;
  std::unordered_set<const Node*> seen;
  std::vector<const Node*> stack{v->def()};
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (!seen.insert(n).second) continue;
    if (n->op() == OpCode::Parameter) names.push_back(n->result()->name());
    for (Value* o : n->operands()) stack.push_back(o->def());
  }
  std::sort(names.begin(), names.end());
  return names;
}

Status Importer::evaluate(Node* n) {
  std::vector<Tensor> operands;
  bool symbolic = false;
  for (Value* o : n->operands()) {
    const KnownValue& k = known_.at(o);
    symbolic |= k.symbolic;
    operands.push_back(k.tensor);
  }
  // Select picks elements, so a sentinel in its data operands survives; not in its predicate.
  bool carries =
      carriesSentinels(*n) || (n->op() == OpCode::Select && !known_.at(n->operand(0)).symbolic);
  if (symbolic && !carries) {
    if (std::optional<Tensor> t = dimArithmetic(*n, operands)) {
      bool symbolicResult = holdsSentinel(*t);
      known_[n->result()] = KnownValue{std::move(*t), symbolicResult};
      return Status::ok();
    }
    std::set<std::string> syms;
    for (const Tensor& t : operands)
      if (t.dtype() == DType::I64)
        for (int64_t j = 0; j < t.numElements(); ++j)
          if (auto d = dimForSentinel(t.data<int64_t>()[j])) syms.insert(d->str());
    std::string names;
    for (const std::string& s : syms) names += (names.empty() ? "'" : ", '") + s + "'";
    std::string why = "it is computed by " + std::string(opName(n->op())) +
                      " from symbolic dimension " + names +
                      ", and only products and exact quotients of symbolic dimensions are "
                      "supported (give the dimension a value to import)";
    for (size_t i = 0; i < n->numResults(); ++i) unknowable_[n->result(i)] = why;
    return Status::ok();
  }
  for (size_t i = 0; i < n->numResults(); ++i) {
    auto count = n->result(i)->type().numElements();
    if (!count || *count > kMaxKnownElements) {
      for (size_t j = 0; j < n->numResults(); ++j)
        unknowable_[n->result(j)] =
            "it is too large to compute while importing (" + n->result(i)->type().str() + ")";
      return Status::ok();
    }
  }
  auto results = evaluateNode(*n, operands);
  if (!results) {
    Status s = results.status();
    return s.prefix("evaluating " + std::string(opName(n->op())) + " while importing");
  }
  for (size_t i = 0; i < n->numResults(); ++i) {
    Tensor& t = (*results)[i];
    bool hasSentinel = symbolic && holdsSentinel(t);
    known_[n->result(i)] = KnownValue{std::move(t), hasSentinel};
  }
  return Status::ok();
}

StatusOr<const KnownValue*> Importer::knownValue(Value* v) {
  std::vector<Node*> stack{v->def()};
  auto done = [&](Node* n) {
    return known_.count(n->result(0)) || unknowable_.count(n->result(0));
  };
  while (!stack.empty()) {
    Node* n = stack.back();
    if (done(n)) {
      stack.pop_back();
      continue;
    }
    if (n->op() == OpCode::Parameter) {
      unknowable_[n->result()] = "";
      stack.pop_back();
      continue;
    }
    if (n->op() == OpCode::Constant) {
      known_[n->result()] = KnownValue{n->constantData().tensor, false};
      stack.pop_back();
      continue;
    }
    bool pending = false, blocked = false;
    std::string why;
    for (Value* o : n->operands()) {
      if (known_.count(o)) continue;
      auto u = unknowable_.find(o);
      if (u != unknowable_.end()) {
        blocked = true;
        if (why.empty()) why = u->second;
      } else {
        stack.push_back(o->def());
        pending = true;
      }
    }
    if (pending && !blocked) continue;
    stack.pop_back();
    if (blocked) {
      for (size_t i = 0; i < n->numResults(); ++i) unknowable_[n->result(i)] = why;
      continue;
    }
    KILN_RETURN_IF_ERROR(evaluate(n));
  }
  auto it = known_.find(v);
  return it == known_.end() ? nullptr : &it->second;
}

// ---- Entry points ----

namespace {

StatusOr<pb::ModelProto> parseModel(std::string_view bytes) {
  if (static_cast<int64_t>(bytes.size()) > kMaxProtoBytes)
    return Status::error("the model is " + std::to_string(bytes.size()) +
                         " bytes; models over 2 GB are not supported (store large weights as "
                         "external data)");
  pb::ModelProto model;
  if (!model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return Status::error("not a valid ONNX model (corrupt or truncated protobuf data)");
  if (!model.has_graph()) return Status::error("not a valid ONNX model (it has no graph)");
  return model;
}

// raw_data payloads from this size on are read from the file straight into their tensors (a
// page: smaller ones cost less to parse with the message).
constexpr size_t kOutsideRawBytes = 4096;

// A model parsed from a file, and per main-graph initializer the raw_data that the parse left in
// the file (nullopt: it is in the message), a part of `file`'s bytes.
struct ParsedFile {
  pb::ModelProto model;
  std::vector<std::optional<std::string_view>> outside;
  MappedFile file;
};

// The model at `path`, mapped and parsed without its large initializer payloads
// (raw_data_split.h), which protobuf would copy into a string each, grown piece by piece from
// the read buffer (every weight's bytes copied about twice, into fresh pages). Where the bytes
// are not of the expected shape, parsed whole.
StatusOr<ParsedFile> parseModelFile(const std::string& path) {
  const std::string what = "model file '" + path + "'";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return Status::error(what + " does not exist");
  StatusOr<MappedFile> mapped = MappedFile::open(path);
  if (!mapped) return Status::error(what + ": cannot read it (" + mapped.status().message() + ")");
  ParsedFile out;
  out.file = std::move(mapped).value();
  std::string_view file = out.file.bytes();
  if (static_cast<int64_t>(file.size()) > kMaxProtoBytes)
    return Status::error(what + " is " + std::to_string(file.size()) +
                         " bytes; files over 2 GB are not supported (store large weights as "
                         "external data)");
  std::optional<SplitModel> split = splitInitializerData(file, kOutsideRawBytes);
  std::string_view bytes = split ? std::string_view(split->skeleton) : file;
  if (!out.model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return Status::error(path + ": not a valid ONNX model (corrupt or truncated protobuf data)");
  if (!out.model.has_graph())
    return Status::error(path + ": not a valid ONNX model (it has no graph)");
  if (split) {
    KILN_CHECK(split->raw.size() == static_cast<size_t>(out.model.graph().initializer_size()),
               "splitInitializerData: one entry per initializer");
    out.outside = std::move(split->raw);
  }
  return out;
}

// The main graph's initializers as tensors, converted once, taking over the raw data in the
// message (the model is not used afterwards) or reading it from `parsed.file`.
std::map<const pb::TensorProto*, StatusOr<Tensor>> convertInitializers(ParsedFile& parsed,
                                                                       const std::string& baseDir) {
  std::map<const pb::TensorProto*, StatusOr<Tensor>> converted;
  size_t i = 0;
  for (pb::TensorProto& t : *parsed.model.mutable_graph()->mutable_initializer()) {
    std::string what = "initializer '" + t.name() + "'";
    std::optional<std::string_view> outside;
    if (i < parsed.outside.size()) outside = parsed.outside[i];
    ++i;
    if (outside) {
      converted.emplace(&t, tensorFromOutsideRaw(t, *outside, parsed.file, what));
      continue;
    }
    std::string* raw = t.has_raw_data() ? t.mutable_raw_data() : nullptr;
    converted.emplace(&t, tensorFromProto(t, baseDir, what, raw));
  }
  return converted;
}

// Imports a parsed model.
StatusOr<std::unique_ptr<Module>> importParsed(ParsedFile& parsed, const std::string& baseDir,
                                               const ImportOptions& options,
                                               ImportReport* report = nullptr) {
  pb::ModelProto& model = parsed.model;
  std::map<const pb::TensorProto*, StatusOr<Tensor>> converted =
      convertInitializers(parsed, baseDir);
  ImportReport local;
  ImportReport& seen = report ? *report : local;
  // Graph inputs are bound to their given values only where a node needs them; each round binds
  // the inputs the previous round found it needed.
  while (true) {
    Importer imp(model, baseDir, Mode::Import, options, seen.boundInputs);
    imp.useConvertedInitializers(&converted);
    auto r = imp.run();
    seen.neededInputs.insert(imp.neededInputs().begin(), imp.neededInputs().end());
    if (r) return r;
    bool added = false;
    for (const std::string& name : imp.neededInputs())
      if (options.inputValues.count(name)) added |= seen.boundInputs.insert(name).second;
    if (!added) return r.status();
  }
}

}  // namespace

StatusOr<std::unique_ptr<Module>>
importModelBytes(std::string_view bytes, const std::string& baseDir, const ImportOptions& options) {
  ParsedFile parsed;
  KILN_ASSIGN_OR_RETURN(parsed.model, parseModel(bytes));
  return importParsed(parsed, baseDir, options);
}

StatusOr<std::vector<Unsupported>> checkModelBytes(std::string_view bytes,
                                                   const std::string& baseDir) {
  KILN_ASSIGN_OR_RETURN(pb::ModelProto model, parseModel(bytes));
  ImportOptions none;
  Importer imp(model, baseDir, Mode::Check, none, {});
  auto r = imp.run();
  std::vector<Unsupported> list = imp.unsupported();
  if (!r && list.empty()) list.push_back(Unsupported{"model", "", r.status().message()});
  return list;
}

StatusOr<std::unique_ptr<Module>>
importModelFile(const std::string& path, const ImportOptions& options, ImportReport* report) {
  KILN_ASSIGN_OR_RETURN(ParsedFile parsed, parseModelFile(path));
  auto r = importParsed(parsed, parentDir(path), options, report);
  if (!r) {
    Status s = r.status();
    return s.prefix(path);
  }
  return r;
}

StatusOr<std::unique_ptr<Module>> importModelFile(const std::string& path) {
  return importModelFile(path, ImportOptions{});
}

StatusOr<std::vector<Unsupported>> checkModelFile(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::string bytes, readFileLimited(path, "model file"));
  auto r = checkModelBytes(bytes, parentDir(path));
  if (!r) {
    Status s = r.status();
    return s.prefix(path);
  }
  return r;
}

namespace {

// A graph input that is not an initializer: its name and the dim_param of each dim ("" where
// it has none).
struct GraphInput {
  std::string name;
  std::vector<std::string> dimParams;
};

StatusOr<std::vector<GraphInput>> graphInputs(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::string bytes, readFileLimited(path, "model file"));
  auto model = parseModel(bytes);
  if (!model) return Status(model.status()).prefix(path);
  std::set<std::string> initializers;
  for (const pb::TensorProto& t : model->graph().initializer()) initializers.insert(t.name());
  std::vector<GraphInput> inputs;
  for (const pb::ValueInfoProto& vi : model->graph().input()) {
    if (initializers.count(vi.name())) continue;
    inputs.push_back({vi.name(), {}});
    if (!vi.type().has_tensor_type() || !vi.type().tensor_type().has_shape()) continue;
    for (const auto& d : vi.type().tensor_type().shape().dim())
      inputs.back().dimParams.push_back(d.has_dim_param() ? d.dim_param() : "");
  }
  return inputs;
}

}  // namespace

StatusOr<std::vector<std::string>> graphInputNames(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::vector<GraphInput> inputs, graphInputs(path));
  std::vector<std::string> names;
  for (GraphInput& in : inputs) names.push_back(std::move(in.name));
  return names;
}

StatusOr<ImportOptions> importOptionsForInputs(const std::string& path,
                                               std::map<std::string, Tensor> values) {
  KILN_ASSIGN_OR_RETURN(std::vector<GraphInput> inputs, graphInputs(path));
  ImportOptions o;
  for (const GraphInput& in : inputs) {
    auto it = values.find(in.name);
    if (it == values.end()) continue;
    const std::vector<int64_t>& dims = it->second.dims();
    for (size_t d = 0; d < in.dimParams.size() && d < dims.size(); ++d)
      if (!in.dimParams[d].empty()) o.dimValues.emplace(in.dimParams[d], dims[d]);
  }
  o.inputValues = std::move(values);
  return o;
}

StatusOr<Tensor> readTensorProtoFile(const std::string& path) {
  pb::TensorProto t;
  KILN_RETURN_IF_ERROR(parseProtoFile(path, "tensor file", t));
  return tensorFromProto(t, parentDir(path), "tensor file '" + path + "'");
}

}  // namespace kiln::onnx
