#include "passes/expose_dynamic_sizes.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <sstream>

namespace kiln {
namespace {

bool isSized(const Value* v) { return v->def()->op() == OpCode::SetDimensionSize; }

int64_t sizedDim(const Value* v) { return v->def()->attrInt("dimension"); }

Node* nodeAfter(Function& f, const Node* n) {
  for (auto it = f.nodes().begin(); it != f.nodes().end(); ++it)
    if (it->get() == n) return std::next(it) == f.nodes().end() ? nullptr : std::next(it)->get();
  return nullptr;
}

Status refuse(const Node& user, const Value* sized, const std::string& why) {
  const Node& s = *sized->def();
  const Node& source = *s.operand(0)->def();
  return Status::error(user.describe() +
                       ": an operand has a dimension whose size is known only at run time (dim " +
                       std::to_string(sizedDim(sized)) + " of " + sized->type().str() + ", from " +
                       source.describe() + "); " + why +
                       ". Such values may flow to the outputs through elementwise ops, transposes "
                       "and as the indices of a gather");
}

// Where dim `d` of `user`'s operand `i` (sized) ends up in its result, or an error.
StatusOr<int64_t> resultDim(const Node& user, size_t i, const Value* sized) {
  const int64_t d = sizedDim(sized);
  switch (user.info().opClass) {
    case OpClass::ElementwiseUnary:
    case OpClass::ElementwiseBinary:
    case OpClass::ElementwiseTernary:
      if (sized->type().rank() != user.result()->type().rank())
        return refuse(user, sized, "a rank-0 operand cannot be sized");
      return d;
    default: break;
  }
  if (user.op() == OpCode::Transpose) {
    std::vector<int64_t> perm = user.attrInts("permutation");
    auto it = std::find(perm.begin(), perm.end(), d);
    if (it == perm.end()) return refuse(user, sized, "bad permutation");
    return static_cast<int64_t>(it - perm.begin());
  }
  if (user.op() == OpCode::Gather && i == 1) {
    const int64_t ivd = user.attrInt("index_vector_dim");
    if (d == ivd) return refuse(user, sized, "the index vector itself cannot be sized");
    std::vector<int64_t> offset = user.attrInts("offset_dims");
    // Result dims not in offset_dims are the index dims other than index_vector_dim, in order.
    int64_t batch = d < ivd ? d : d - 1, seen = 0;
    for (int64_t r = 0; r < user.result()->type().rank(); ++r) {
      if (std::find(offset.begin(), offset.end(), r) != offset.end()) continue;
      if (seen++ == batch) return r;
    }
    return refuse(user, sized, "no result dim for the sized index dim");
  }
  if (user.op() == OpCode::Gather)
    return refuse(user, sized, "gathering from it would read its padding");
  return refuse(user, sized, std::string(opName(user.op())) + " would read its padding");
}

// Moves one set_dimension_size past `user` (one of its users), or says why not.
Status sinkPast(Function& f, Node& user) {
  const Value* sized = nullptr;
  size_t first = 0;
  for (size_t i = 0; i < user.numOperands(); ++i) {
    const Value* v = user.operand(i);
    if (!isSized(v)) continue;
    if (!sized) {
      sized = v;
      first = i;
    } else if (v->def()->operand(1) != sized->def()->operand(1) || sizedDim(v) != sizedDim(sized)) {
      return refuse(user, v, "its operands are sized differently");
    }
  }
  if (user.numResults() != 1) return refuse(user, sized, "it has several results");
  KILN_ASSIGN_OR_RETURN(int64_t dim, resultDim(user, first, sized));
  Value* size = sized->def()->operand(1);
  for (size_t i = 0; i < user.numOperands(); ++i)
    if (isSized(user.operand(i))) user.setOperand(i, user.operand(i)->def()->operand(0));
  Value* r = user.result();
  std::vector<Use> uses = r->uses();
  Node* s = f.createNode(OpCode::SetDimensionSize, {r, size}, {r->type()},
                         {{"dimension", intAttr(dim)}}, nodeAfter(f, &user));
  s->setOrigin(user.origin());
  for (const Use& u : uses) u.user->setOperand(u.operandIndex, s->result());
  for (size_t o = 0; o < f.outputs().size(); ++o)
    if (f.outputs()[o] == r) f.setOutput(o, s->result());
  return Status::ok();
}

// get_dimension_size(sds(x, s){d}) {d} -> s; of another dim -> get_dimension_size(x) (an
// extent).
void resolveSizeQuery(Function& f, Node& query) {
  const int64_t d = query.attrInt("dimension");
  Value* v = query.operand(0);
  for (; isSized(v); v = v->def()->operand(0)) {
    if (sizedDim(v) != d) continue;
    f.replaceAllUsesWith(query.result(), v->def()->operand(1));
    f.erase(&query);
    return;
  }
  query.setOperand(0, v);
}

// A user of a sized value that is neither a set_dimension_size of it nor the function's output.
Node* firstConsumer(Function& f) {
  for (const auto& np : f.nodes()) {
    if (np->op() != OpCode::SetDimensionSize) continue;
    for (const Use& u : np->result()->uses())
      if (u.user->op() != OpCode::SetDimensionSize || u.operandIndex != 0) return u.user;
  }
  return nullptr;
}

void eraseDead(Function& f) {
  for (bool changed = true; changed;) {
    changed = false;
    for (const auto& np : f.nodes())
      if (np->op() == OpCode::SetDimensionSize && !np->result()->hasUses()) {
        f.erase(np.get());
        changed = true;
        break;
      }
  }
}

}  // namespace

StatusOr<std::vector<DynamicDim>> exposeDynamicSizes(Function& f) {
  bool any = std::any_of(f.nodes().begin(), f.nodes().end(),
                         [](const auto& n) { return n->op() == OpCode::SetDimensionSize; });
  if (!any) return std::vector<DynamicDim>{};
  while (Node* user = firstConsumer(f)) {
    for (const Value* v : user->operands())
      if (isSized(v) && user->op() == OpCode::SetDimensionSize)
        return refuse(*user, v, "a size cannot itself be sized");
    if (user->op() == OpCode::GetDimensionSize) resolveSizeQuery(f, *user);
    else KILN_RETURN_IF_ERROR(sinkPast(f, *user));
    eraseDead(f);
  }
  std::vector<Value*> outs = f.outputs();
  std::vector<std::string> names = f.outputNames();
  const size_t visible = outs.size();
  std::vector<DynamicDim> dims;
  std::map<Value*, size_t> sizeOutput;
  for (size_t o = 0; o < visible; ++o) {
    while (isSized(outs[o])) {
      Node* s = outs[o]->def();
      Value* size = s->operand(1);
      auto [it, added] = sizeOutput.emplace(size, outs.size());
      if (added) {
        outs.push_back(size);
        names.push_back(names[o] + ".size" + std::to_string(s->attrInt("dimension")));
      }
      dims.push_back(DynamicDim{o, s->attrInt("dimension"), it->second});
      outs[o] = s->operand(0);
    }
  }
  f.setOutputs(outs, names);
  eraseDead(f);
  return dims;
}

Tensor trimDim(const Tensor& t, int64_t dim, int64_t size) {
  std::vector<int64_t> dims = t.dims();
  const auto d = static_cast<size_t>(dim);
  const int64_t extent = dims[d];
  size = std::clamp<int64_t>(size, 0, extent);
  if (size == extent) return t;
  int64_t outer = 1, inner = 1;  // elements
  for (size_t i = 0; i < d; ++i) outer *= dims[i];
  for (size_t i = d + 1; i < dims.size(); ++i) inner *= dims[i];
  dims[d] = size;
  Tensor r = Tensor::uninitialized(t.dtype(), dims);
  const int64_t kept = size * inner, es = static_cast<int64_t>(dtypeSize(t.dtype()));
  for (int64_t o = 0; o < outer; ++o) {
    if (isString(t.dtype())) {  // element objects, not bytes
      for (int64_t e = 0; e < kept; ++e) r.setStr(o * kept + e, t.str(o * extent * inner + e));
    } else if (kept > 0) {
      std::memcpy(r.mutableBytes() + o * kept * es, t.bytes() + o * extent * inner * es,
                  static_cast<size_t>(kept * es));
    }
  }
  return r;
}

Status trimDynamicOutputs(std::span<const DynamicDim> dims, size_t visible,
                          std::vector<Tensor>& outputs) {
  for (const DynamicDim& d : dims) {
    if (d.output >= visible || d.sizeOutput >= outputs.size() ||
        outputs[d.sizeOutput].numElements() != 1 || d.dim >= outputs[d.output].rank())
      return Status::error("the outputs do not match their run-time sizes");
    outputs[d.output] = trimDim(outputs[d.output], d.dim, outputs[d.sizeOutput].getInt(0));
  }
  outputs.resize(std::min(visible, outputs.size()));
  return Status::ok();
}

std::string dynamicDimsText(std::span<const DynamicDim> dims) {
  std::string s;
  for (const DynamicDim& d : dims)
    s += std::to_string(d.output) + " " + std::to_string(d.dim) + " " +
         std::to_string(d.sizeOutput) + "\n";
  return s;
}

StatusOr<std::vector<DynamicDim>> parseDynamicDims(std::string_view text, size_t outputs) {
  std::vector<DynamicDim> dims;
  std::istringstream in{std::string(text)};
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::istringstream l(line);
    DynamicDim d;
    if (!(l >> d.output >> d.dim >> d.sizeOutput) || d.output >= outputs ||
        d.sizeOutput >= outputs || d.dim < 0)
      return Status::error("bad run-time size line '" + line + "'");
    dims.push_back(d);
  }
  return dims;
}

}  // namespace kiln
