// Type rules of the ops (internal to src/ir; the table in op_table.cpp points at them).
// Each returns the result types, or an error naming the cause (the op name is prefixed by the
// caller). Attribute names/kinds and operand counts are checked before these run.
#pragma once

#include "ir/op.h"

namespace kiln {

// Strings enter only the ops that have a meaning for them (convert, string_normalize, the
// constants and parameters that hold them, and the run-time sizes of their results); any other
// op given a string operand or result is an error rather than a byte copy of text objects.
Status checkStrings(const InferInput& in);

#define KILN_DECLARE_RULE(name) StatusOr<std::vector<TensorType>> name(const InferInput& in);
KILN_DECLARE_RULE(inferConstant)
KILN_DECLARE_RULE(inferDeclared)
KILN_DECLARE_RULE(inferIota)
KILN_DECLARE_RULE(inferUnary)
KILN_DECLARE_RULE(inferConvert)
KILN_DECLARE_RULE(inferBinary)
KILN_DECLARE_RULE(inferSelect)
KILN_DECLARE_RULE(inferClamp)
KILN_DECLARE_RULE(inferBroadcastInDim)
KILN_DECLARE_RULE(inferReshape)
KILN_DECLARE_RULE(inferTranspose)
KILN_DECLARE_RULE(inferSlice)
KILN_DECLARE_RULE(inferDynamicSlice)
KILN_DECLARE_RULE(inferDynamicUpdateSlice)
KILN_DECLARE_RULE(inferConcatenate)
KILN_DECLARE_RULE(inferPad)
KILN_DECLARE_RULE(inferGather)
KILN_DECLARE_RULE(inferScatter)
KILN_DECLARE_RULE(inferReverse)
KILN_DECLARE_RULE(inferResize)
KILN_DECLARE_RULE(inferGridSample)
KILN_DECLARE_RULE(inferReduce)
KILN_DECLARE_RULE(inferArgReduce)
KILN_DECLARE_RULE(inferReduceWindow)
KILN_DECLARE_RULE(inferCumsum)
KILN_DECLARE_RULE(inferSort)
KILN_DECLARE_RULE(inferTopK)
KILN_DECLARE_RULE(inferNonZero)
KILN_DECLARE_RULE(inferUnique)
KILN_DECLARE_RULE(inferNonMaxSuppression)
KILN_DECLARE_RULE(inferStringNormalize)
KILN_DECLARE_RULE(inferSetDimensionSize)
KILN_DECLARE_RULE(inferGetDimensionSize)
KILN_DECLARE_RULE(inferDotGeneral)
KILN_DECLARE_RULE(inferConvolution)
KILN_DECLARE_RULE(inferSoftmax)
KILN_DECLARE_RULE(inferLayerNorm)
KILN_DECLARE_RULE(inferBatchNorm)
KILN_DECLARE_RULE(inferGelu)
KILN_DECLARE_RULE(inferAttention)
KILN_DECLARE_RULE(inferRecurrence)
#undef KILN_DECLARE_RULE

}  // namespace kiln
