// ONNX ops whose result sizes depend on the data besides NonZero and Compress (ops_misc.cpp):
// Unique, NonMaxSuppression and StringNormalizer. Each becomes an op that computes its results
// padded to a bound known while importing, and their count at run time; set_dimension_size says
// which dims the count sizes (passes/expose_dynamic_sizes.h).
#include <algorithm>
#include <cctype>

#include "frontend/onnx/ops_common.h"

namespace kiln::onnx {

namespace {

Value* sized(OpContext& c, Value* x, Value* size, int64_t dim) {
  return c.b.op(OpCode::SetDimensionSize, {x, size}, {{"dimension", intAttr(dim)}});
}

// Unique: Y (the distinct slices along `axis`, or elements of the flattened input), indices
// (of their first occurrences), inverse_indices (of every slice's unique slice) and counts.
// Y, indices and counts have as many entries as there are distinct slices.
Status unique(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  if (!x->type().isStatic())
    return c.unsupported("Unique of " + x->type().str() +
                         " needs static dimensions (its bound is the slice count; give the "
                         "symbolic dims sizes with --dim or input files)");
  AttrMap attrs{{"sorted", boolAttr(c.attrInt("sorted", 1) != 0)}};
  int64_t dim = 0;
  if (c.hasAttr("axis")) {
    KILN_ASSIGN_OR_RETURN(dim, normAxis(c.attrInt("axis", 0), x->type().rank()));
    attrs["axis"] = intAttr(dim);
  }
  std::vector<Value*> r = c.b.opN(OpCode::Unique, {x}, attrs);
  if (r.size() != 5) return c.builderError();
  Value* count = r[4];
  Value* outs[4] = {sized(c, r[0], count, dim), sized(c, r[1], count, 0), r[2],
                    sized(c, r[3], count, 0)};
  for (int i = 0; i < 4; ++i) {
    ONNX_BUILT(c, outs[i]);
    if (c.wantsOutput(i)) c.setOutput(i, outs[i]);
  }
  return Status::ok();
}

// An optional scalar input (shape [] or [1]) as a rank-0 value of dtype t, or `dflt`.
StatusOr<Value*> scalarInput(OpContext& c, int i, DType t, double dflt) {
  if (!c.has(i)) return scalarConst(c.b, t, dflt);
  Value* v = c.in(i);
  if (v->type().numElements() != std::optional<int64_t>(1))
    return c.err("input " + std::to_string(i) + " must have one element, got " + v->type().str());
  if (v->type().rank() != 0) v = c.b.reshape(v, {});
  if (v && v->type().dtype() != t) v = c.b.convert(v, t);
  ONNX_BUILT(c, v);
  return v;
}

// NonMaxSuppression: the (batch, class, box) rows of the boxes kept, at most
// max_output_boxes_per_class per batch and class. The rows are padded to
// B * C * min(N, max_output_boxes_per_class when known while importing, else N).
Status nonMaxSuppression(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * boxes, c.req(0));
  KILN_ASSIGN_OR_RETURN(Value * scores, c.req(1));
  const int64_t center = c.attrInt("center_point_box", 0);
  if (center != 0 && center != 1)
    return c.err("center_point_box must be 0 or 1, got " + std::to_string(center));
  if (boxes->type().rank() != 3 || !boxes->type().isStatic())
    return c.unsupported("boxes " + boxes->type().str() +
                         " must be a static [B, N, 4] (the bound of the result depends on B and N; "
                         "give symbolic dims sizes with --dim or input files)");
  const int64_t n = boxes->type().dim(1).value();
  // No max_output_boxes_per_class: no output, as the operator's default 0 says.
  int64_t bound = c.has(2) ? n : 0;
  if (c.has(2)) {
    KILN_ASSIGN_OR_RETURN(const KnownValue* k, c.known(c.in(2)));
    if (k && !k->symbolic && k->tensor.numElements() == 1)
      bound = std::clamp<int64_t>(k->tensor.getInt(0), 0, n);
  }
  KILN_ASSIGN_OR_RETURN(Value * maxPerClass, scalarInput(c, 2, DType::I64, 0));
  KILN_ASSIGN_OR_RETURN(Value * iou, scalarInput(c, 3, DType::F32, 0));
  std::vector<Value*> operands{boxes, scores, maxPerClass, iou};
  if (c.has(4)) {
    KILN_ASSIGN_OR_RETURN(Value * score, scalarInput(c, 4, DType::F32, 0));
    operands.push_back(score);
  }
  std::vector<Value*> r =
      c.b.opN(OpCode::NonMaxSuppression, operands,
              {{"bound_per_class", intAttr(bound)}, {"center_point_box", boolAttr(center == 1)}});
  if (r.size() != 2) return c.builderError();
  Value* selected = sized(c, r[0], r[1], 0);
  ONNX_BUILT(c, selected);
  c.setOutput(0, selected);
  return Status::ok();
}

// Case maps that do not depend on the language: a locale of another language (tr_TR maps 'i'
// to a dotted capital) is refused rather than mapped by these.
bool languageNeutral(const std::string& locale) {
  return locale.empty() || locale == "C" || locale == "POSIX" || locale.rfind("C.", 0) == 0 ||
         locale.rfind("en", 0) == 0;
}

// StringNormalizer: the strings of X ([C] or [1, C]) not among the stopwords, in order, case
// changed; one empty string when none is left.
Status stringNormalizer(OpContext& c) {
  KILN_ASSIGN_OR_RETURN(Value * x, c.req(0));
  std::string action = c.attrString("case_change_action", "NONE");
  std::string locale = c.attrString("locale", "");
  if (action != "NONE" && action != "LOWER" && action != "UPPER")
    return c.err("case_change_action '" + action + "' is not NONE, LOWER or UPPER");
  if (!languageNeutral(locale))
    return c.unsupported("locale '" + locale +
                         "': only language-neutral case maps (C, en_*) are supported");
  const pb::AttributeProto* stop = c.rawAttr("stopwords");
  if (stop && stop->type() != pb::AttributeProto::STRINGS)
    return c.err("stopwords must be STRINGS");
  Tensor words(DType::Str, {stop ? stop->strings_size() : 0});
  for (int64_t i = 0; i < words.numElements(); ++i)
    words.setStr(i, stop->strings(static_cast<int>(i)));
  std::transform(action.begin(), action.end(), action.begin(), ::tolower);  // the enum's words
  std::vector<Value*> r =
      c.b.opN(OpCode::StringNormalize, {x, c.b.constant(std::move(words))},
              {{"case_change", enumAttr(action)},
               {"case_sensitive", boolAttr(c.attrInt("is_case_sensitive", 0) != 0)}});
  if (r.size() != 2) return c.builderError();
  Value* kept = sized(c, r[0], r[1], x->type().rank() - 1);
  ONNX_BUILT(c, kept);
  c.setOutput(0, kept);
  return Status::ok();
}

}  // namespace

void addDynamicSizeOps(OpTable& t) {
  t.add("StringNormalizer", 10, stringNormalizer);
  t.add("Unique", 11, unique);
  t.add("NonMaxSuppression", 10, nonMaxSuppression);
}

}  // namespace kiln::onnx
