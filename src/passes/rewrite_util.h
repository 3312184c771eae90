// Helpers shared by the graph rewrites in src/passes (internal to the passes): recognising
// constants and splats, replacing values, permutation arithmetic.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ir/builder.h"
#include "ir/ir.h"

namespace kiln::rewrite {

// The data of the `constant` node that defines v, or nullptr.
const Tensor* constantOf(const Value* v);

// True when every element of t has the same bytes (an empty tensor is not a splat).
bool isSplatTensor(const Tensor& t);

// The value of every element of v when v is known to be uniform: a splat constant, or a
// broadcast_in_dim / reshape / convert-free chain of broadcast_in_dim and reshape over one.
// Converts are not looked through: the value would change with the dtype.
std::optional<double> splatValue(const Value* v);
// splatValue(v) == x exactly (so isSplat(v, 0) is true for -0.0 as well).
bool isSplat(const Value* v, double x);

// True when v is a constant or uniform (splatValue has a value).
bool isConstantLike(const Value* v);

// Moves every use of `from` (function outputs included) to `to`, which must have the same type.
// `to` takes `from`'s name when it has none, so outputs keep their names.
void replaceValue(Value* from, Value* to);

// Erases `n` if none of its results is used, then every producer that this leaves unused
// (parameters excepted), so a rewrite leaves no dead nodes behind.
void eraseIfDead(Node* n);

// A Builder that inserts before `n` and gives new nodes n's location and origin.
Builder builderBefore(Node* n);

// Along one spatial dim of a convolution (input extent x, output extent y, window stride, low
// padding, kernel dilation): the number of output positions at which kernel tap t reads the
// input rather than padding.
int64_t tapReads(int64_t x, int64_t y, int64_t stride, int64_t lo, int64_t dil, int64_t t);

// A splat constant of `type` (rank 0: the scalar; otherwise a broadcast_in_dim of a scalar, so it
// never costs more than one element of storage). Returns nullptr (with b's error) on failure.
Value* splatConstant(Builder& b, const TensorType& type, double v);

// Permutations: p[i] is the source dimension of result dimension i (transpose's convention).
bool isIdentityPermutation(const std::vector<int64_t>& p);
std::vector<int64_t> inversePermutation(const std::vector<int64_t>& p);
// transpose(transpose(x, inner), outer) == transpose(x, composePermutations(inner, outer)).
std::vector<int64_t> composePermutations(const std::vector<int64_t>& inner,
                                         const std::vector<int64_t>& outer);
// The shape of transpose(x, p) for x of shape s.
Shape permuteShape(const Shape& s, const std::vector<int64_t>& p);

// The relative tolerance with which a constant of dtype t is compared to a textbook constant
// (0.5, 1/sqrt(2), ...): a few units in the last place of t, since exporters store the constant
// rounded to the model's dtype.
double constantTolerance(DType t);
// |a - b| <= tol * |b| (relative: 1/4095 is not 1/4096 however small both are).
bool approxEqual(double a, double b, double tol);

// v as the attribute of a composite that replaces ops of dtype t: an f32 constant becomes the
// shortest decimal that reads back to the same f32 (1e-05, not 9.999999747378752e-06), which the
// composite, computing in f32, turns into the same f32 again. Other dtypes keep v exactly.
double attributeValue(double v, DType t);

// Number of uses of v by nodes (function outputs not counted).
size_t numUsers(const Value* v);

}  // namespace kiln::rewrite
