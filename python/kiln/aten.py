"""The table from ATen ops (what make_fx and torch.export record) to Kiln ops (docs/ops.md).

Each entry takes the translator (kiln.capture.Translator) and the node's arguments, with tensors
already Values of the module being written (or torch tensors for constants), and returns the
result Value (or a tuple for ops with several results). In-place variants (relu_, add_) use the
functional entry: capture checks that nothing reads the overwritten value afterwards. An entry
raises Unsupported with the reason when it cannot express a case.
"""

import math

TABLE = {}


class Unsupported(Exception):
    """An op, or a use of an op, that Kiln cannot express; the message says why."""


def op(*names):
    def register(fn):
        for n in names:
            TABLE[n] = fn
        return fn
    return register


def norm_dim(d, rank):
    d = int(d)
    if not -max(rank, 1) <= d < max(rank, 1):
        raise Unsupported(f"dimension {d} out of range for rank {rank}")
    return d + rank if d < 0 else d


def norm_dims(dims, rank):
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    return sorted({norm_dim(d, rank) for d in dims})


# --- elementwise ---------------------------------------------------------------------------

_UNARY = {
    "exp": "exp", "expm1": "expm1", "log": "log", "log1p": "log1p", "sqrt": "sqrt",
    "rsqrt": "rsqrt", "neg": "neg", "abs": "abs", "sin": "sin", "cos": "cos", "tan": "tan",
    "asin": "asin", "acos": "acos", "atan": "atan", "sinh": "sinh", "cosh": "cosh",
    "asinh": "asinh", "acosh": "acosh", "atanh": "atanh", "tanh": "tanh", "sigmoid": "sigmoid",
    "erf": "erf", "floor": "floor", "ceil": "ceil", "round": "round_nearest_even",
    "sign": "sign", "bitwise_not": "not", "logical_not": "not",
}
_BOOL_RESULT = {"isnan": "is_nan", "isinf": "is_inf", "isfinite": "is_finite"}


def _unary(kiln_op):
    def emit(cx, x):
        dtype, shape = cx.out
        x = cx.convert(cx.v(x), dtype if kiln_op != "not" or dtype != "bool" else "bool")
        return cx.w.op(kiln_op, [x], dtype, shape)
    return emit


def _classify(kiln_op):
    def emit(cx, x):
        dtype, shape = cx.out
        return cx.w.op(kiln_op, [cx.v(x)], dtype, shape)
    return emit


for _name, _kop in _UNARY.items():
    op(_name)(_unary(_kop))
for _name, _kop in _BOOL_RESULT.items():
    op(_name)(_classify(_kop))

_BINARY = {
    "mul": "mul", "div": "div", "pow": "pow", "maximum": "max", "minimum": "min",
    "fmod": "rem", "atan2": "atan2", "bitwise_and": "and", "bitwise_or": "or",
    "bitwise_xor": "xor", "logical_and": "and", "logical_or": "or", "logical_xor": "xor",
}
_COMPARE = {"eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge"}


def binary(cx, kiln_op, a, b, dtype=None, shape=None):
    """a op b with torch's broadcasting, both operands converted to the result's dtype."""
    out_dtype, out_shape = cx.out
    dtype = dtype or out_dtype
    shape = out_shape if shape is None else shape
    a = cx.broadcast(cx.convert(cx.v(a, dtype), dtype), shape)
    b = cx.broadcast(cx.convert(cx.v(b, dtype), dtype), shape)
    return cx.w.op(kiln_op, [a, b], dtype, shape)


def _binary(kiln_op):
    def emit(cx, a, b, rounding_mode=None):
        if rounding_mode is not None:
            return _div_rounded(cx, a, b, rounding_mode)
        return binary(cx, kiln_op, a, b)
    return emit


for _name, _kop in _BINARY.items():
    op(_name)(_binary(_kop))


def _compare(direction):
    def emit(cx, a, b):
        common = cx.promote(a, b)
        _, shape = cx.out
        a = cx.broadcast(cx.convert(cx.v(a, common), common), shape)
        b = cx.broadcast(cx.convert(cx.v(b, common), common), shape)
        return cx.w.op("compare", [a, b], "bool", shape, {"direction": direction})
    return emit


for _name, _dir in _COMPARE.items():
    op(_name)(_compare(_dir))


def _div_rounded(cx, a, b, mode):
    dtype, shape = cx.out
    q = binary(cx, "div", a, b)
    if dtype not in ("f16", "bf16", "f32", "f64"):
        if mode == "trunc":
            return q  # integer division truncates
        raise Unsupported("integer division with rounding_mode='floor'")
    if mode == "floor":
        return cx.w.op("floor", [q], dtype, shape)
    # trunc(q) = sign(q) * floor(|q|)
    fl = cx.w.op("floor", [cx.w.op("abs", [q], dtype, shape)], dtype, shape)
    return cx.w.op("mul", [cx.w.op("sign", [q], dtype, shape), fl], dtype, shape)


@op("add", "sub")
def _add_sub(cx, a, b, alpha=1):
    if alpha != 1:
        b = binary(cx, "mul", b, alpha)
    return binary(cx, "add" if cx.target_name == "add" else "sub", a, b)


@op("rsub")
def _rsub(cx, a, b, alpha=1):
    if alpha != 1:
        a = binary(cx, "mul", a, alpha)
    return binary(cx, "sub", b, a)


@op("reciprocal")
def _reciprocal(cx, x):
    return binary(cx, "div", 1.0, x)


@op("square")
def _square(cx, x):
    return binary(cx, "mul", x, x)


@op("where")
def _where(cx, cond, a, b):
    dtype, shape = cx.out
    c = cx.broadcast(cx.convert(cx.v(cond, "bool"), "bool"), shape)
    a = cx.broadcast(cx.convert(cx.v(a, dtype), dtype), shape)
    b = cx.broadcast(cx.convert(cx.v(b, dtype), dtype), shape)
    return cx.w.op("select", [c, a, b], dtype, shape)


@op("masked_fill")
def _masked_fill(cx, x, mask, value):
    return _where(cx, mask, value, x)


@op("clamp", "clip")
def _clamp(cx, x, min=None, max=None):
    dtype, shape = cx.out
    y = cx.convert(cx.v(x), dtype)
    if min is not None and max is not None and not hasattr(min, "shape") and not hasattr(max, "shape"):
        return cx.w.op("clamp", [cx.w.scalar(min, dtype), y, cx.w.scalar(max, dtype)], dtype, shape)
    if min is not None:
        y = binary(cx, "max", y, min)
    if max is not None:
        y = binary(cx, "min", y, max)
    return y


op("clamp_min")(lambda cx, x, m: _clamp(cx, x, min=m))
op("clamp_max")(lambda cx, x, m: _clamp(cx, x, max=m))


@op("relu")
def _relu(cx, x):
    return binary(cx, "max", x, 0)


@op("hardtanh")
def _hardtanh(cx, x, min_val=-1.0, max_val=1.0):
    return _clamp(cx, x, min_val, max_val)


op("relu6")(lambda cx, x: _clamp(cx, x, 0.0, 6.0))


@op("silu")
def _silu(cx, x):
    dtype, shape = cx.out
    return binary(cx, "mul", x, cx.w.op("sigmoid", [cx.v(x)], dtype, shape))


@op("hardsigmoid")
def _hardsigmoid(cx, x):
    return binary(cx, "div", _clamp(cx, binary(cx, "add", x, 3.0), 0.0, 6.0), 6.0)


@op("hardswish")
def _hardswish(cx, x):
    return binary(cx, "mul", x, _hardsigmoid(cx, x))


@op("leaky_relu")
def _leaky_relu(cx, x, negative_slope=0.01):
    dtype, shape = cx.out
    positive = binary(cx, "max", x, 0)
    negative = binary(cx, "mul", binary(cx, "min", x, 0), negative_slope)
    return cx.w.op("add", [positive, negative], dtype, shape)


@op("gelu")
def _gelu(cx, x, approximate="none"):
    dtype, shape = cx.out
    return cx.w.op("gelu", [cx.v(x)], dtype, shape, {"approximate": approximate})


@op("_softmax", "softmax", "_log_softmax", "log_softmax")
def _softmax(cx, x, dim, half_to_float=False):
    dtype, shape = cx.out
    x = cx.convert(cx.v(x), dtype)
    kind = "log_softmax" if "log" in cx.target_name else "softmax"
    return cx.w.op(kind, [x], dtype, shape, {"axis": norm_dim(dim, len(shape))})


# --- identity, dtype and layout ------------------------------------------------------------

@op("clone", "detach", "alias", "contiguous", "lift_fresh_copy", "lift_fresh", "lift",
    "positive", "_assert_tensor_metadata")
def _identity(cx, x, *args, **kwargs):
    return cx.v(x)


@op("dropout", "feature_dropout", "alpha_dropout")
def _dropout(cx, x, p=0.5, train=False):
    if train and p > 0:
        raise Unsupported("dropout in training mode (call module.eval())")
    return cx.v(x)


@op("native_dropout")
def _native_dropout(cx, x, p, train):
    if train and p > 0:
        raise Unsupported("dropout in training mode (call module.eval())")
    v = cx.v(x)
    return v, cx.w.splat(True, "bool", v.shape)


@op("_to_copy", "to", "type_as", "_to_dtype")
def _to(cx, x, *args, **kwargs):
    dtype, _ = cx.out
    return cx.convert(cx.v(x), dtype)


@op("view", "_reshape_alias", "_unsafe_view", "reshape", "view_copy", "squeeze", "unsqueeze",
    "flatten", "squeeze_copy", "unsqueeze_copy", "_reshape_copy")
def _reshape(cx, x, *args, **kwargs):
    dtype, shape = cx.out
    v = cx.v(x)
    if v.shape == tuple(shape):
        return v
    r = cx.w.op("reshape", [v], v.dtype, shape)
    if v.rank > 2 and r.rank == 2 and v.shape[-1] == r.shape[-1]:
        cx.flattened[r.name] = cx.flattened.get(v.name, v)
    return r


@op("expand", "expand_copy", "broadcast_to")
def _expand(cx, x, *args, **kwargs):
    _, shape = cx.out
    return cx.broadcast(cx.v(x), shape)


@op("permute", "permute_copy")
def _permute(cx, x, dims):
    v = cx.v(x)
    perm = [norm_dim(d, v.rank) for d in dims]
    return transpose(cx, v, perm)


def transpose(cx, v, perm):
    if perm == list(range(v.rank)):
        return v
    shape = [v.shape[p] for p in perm]
    return cx.w.op("transpose", [v], v.dtype, shape, {"permutation": perm})


@op("t", "numpy_T")
def _t(cx, x):
    v = cx.v(x)
    return transpose(cx, v, [1, 0]) if v.rank == 2 else v


@op("transpose", "swapaxes")
def _transpose(cx, x, d0, d1):
    v = cx.v(x)
    perm = list(range(v.rank))
    a, b = norm_dim(d0, v.rank), norm_dim(d1, v.rank)
    perm[a], perm[b] = perm[b], perm[a]
    return transpose(cx, v, perm)


@op("zeros_like", "ones_like", "full_like", "new_zeros", "new_ones", "new_full", "empty_like")
def _filled_like(cx, x, *args, **kwargs):
    dtype, shape = cx.out
    name = cx.target_name
    if name in ("zeros_like", "new_zeros", "empty_like"):
        value = 0
    elif name in ("ones_like", "new_ones"):
        value = 1
    else:
        value = args[1] if name == "new_full" else args[0]
    return cx.w.splat(value, dtype, shape)


# --- data movement -------------------------------------------------------------------------

def slice_dim(cx, v, dim, start, end, step=1):
    start = 0 if start is None else int(start)
    end = v.shape[dim] if end is None else int(end)
    n = v.shape[dim]
    start = max(0, min(n, start + n if start < 0 else start))
    end = max(start, min(n, end + n if end < 0 else end))
    if start == 0 and end == n and step == 1:
        return v
    lo = [0] * v.rank
    hi = list(v.shape)
    st = [1] * v.rank
    lo[dim], hi[dim], st[dim] = start, end, int(step)
    shape = list(v.shape)
    shape[dim] = -(-(end - start) // int(step))
    return cx.w.op("slice", [v], v.dtype, shape, {"start": lo, "limit": hi, "stride": st})


@op("slice", "slice_copy")
def _slice(cx, x, dim=0, start=None, end=None, step=1):
    v = cx.v(x)
    return slice_dim(cx, v, norm_dim(dim, v.rank), start, end, step)


@op("select", "select_copy")
def _select(cx, x, dim, index):
    v = cx.v(x)
    d = norm_dim(dim, v.rank)
    i = int(index) + (v.shape[d] if int(index) < 0 else 0)
    s = slice_dim(cx, v, d, i, i + 1)
    return cx.w.op("reshape", [s], v.dtype, v.shape[:d] + v.shape[d + 1:])


@op("split", "split_with_sizes", "unbind", "chunk", "tensor_split")
def _split(cx, x, sizes, dim=0):
    v = cx.v(x)
    name = cx.target_name
    if name == "unbind":
        d = norm_dim(sizes, v.rank)
        return tuple(_select(cx, v, d, i) for i in range(v.shape[d]))
    d = norm_dim(dim, v.rank)
    n = v.shape[d]
    if name == "chunk":
        step = -(-n // int(sizes))
        sizes = [min(step, n - i) for i in range(0, n, step)]
    elif name == "tensor_split":
        raise Unsupported("tensor_split")
    elif isinstance(sizes, int):
        sizes = [min(sizes, n - i) for i in range(0, n, sizes)] or [0]
    parts, at = [], 0
    for s in sizes:
        parts.append(slice_dim(cx, v, d, at, at + int(s)))
        at += int(s)
    return tuple(parts)


@op("cat", "concat", "concatenate")
def _cat(cx, tensors, dim=0):
    dtype, shape = cx.out
    vs = [cx.convert(cx.v(t, dtype), dtype) for t in tensors]
    vs = [v for v in vs if not (v.rank == 1 and v.shape[0] == 0 and len(shape) != 1)]
    if len(vs) == 1:
        return vs[0]
    return cx.w.op("concatenate", vs, dtype, shape, {"dimension": norm_dim(dim, len(shape))})


@op("stack")
def _stack(cx, tensors, dim=0):
    dtype, shape = cx.out
    d = norm_dim(dim, len(shape))
    parts = []
    for t in tensors:
        v = cx.convert(cx.v(t, dtype), dtype)
        parts.append(cx.w.op("reshape", [v], dtype, v.shape[:d] + (1,) + v.shape[d:]))
    return cx.w.op("concatenate", parts, dtype, shape, {"dimension": d})


def take(cx, v, dim, idx):
    """v's elements along `dim` at the integer tensor idx (torch.index_select, embedding)."""
    q = idx.rank
    out = v.shape[:dim] + idx.shape + v.shape[dim + 1:]
    sizes = list(v.shape)
    sizes[dim] = 1
    offset = list(range(dim)) + list(range(dim + q, len(out)))
    return cx.w.op("gather", [v, idx], v.dtype, out, {
        "offset_dims": offset, "collapsed_slice_dims": [dim], "start_index_map": [dim],
        "index_vector_dim": q, "slice_sizes": sizes})


@op("embedding")
def _embedding(cx, weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    return take(cx, cx.v(weight), 0, cx.v(indices))


@op("index_select")
def _index_select(cx, x, dim, index):
    v = cx.v(x)
    return take(cx, v, norm_dim(dim, v.rank), cx.v(index))


@op("constant_pad_nd", "pad")
def _pad(cx, x, pad, value=0.0, *args):
    if cx.target_name == "pad" and isinstance(value, str) and value != "constant":
        raise Unsupported(f"pad mode '{value}'")
    v = cx.v(x)
    lo, hi = [0] * v.rank, [0] * v.rank
    for i in range(len(pad) // 2):
        d = v.rank - 1 - i
        lo[d], hi[d] = int(pad[2 * i]), int(pad[2 * i + 1])
    dtype, shape = cx.out
    fill = cx.w.scalar(0.0 if value is None else value, dtype)
    return cx.w.op("pad", [v, fill], dtype, shape, {"low": lo, "high": hi})


@op("flip")
def _flip(cx, x, dims):
    v = cx.v(x)
    return cx.w.op("reverse", [v], v.dtype, v.shape, {"dims": norm_dims(dims, v.rank)})


# --- contractions --------------------------------------------------------------------------

def dot(cx, a, b, lhs_contracting, rhs_contracting, shape, lhs_batch=(), rhs_batch=()):
    dtype = cx.out[0]
    a = cx.convert(cx.v(a), dtype)
    b = cx.convert(cx.v(b), dtype)
    attrs = {"lhs_contracting": list(lhs_contracting), "rhs_contracting": list(rhs_contracting)}
    if lhs_batch:
        attrs["lhs_batch"], attrs["rhs_batch"] = list(lhs_batch), list(rhs_batch)
    return cx.w.op("dot_general", [a, b], dtype, shape, attrs)


def _scaled(cx, v, factor):
    return v if factor == 1 else binary(cx, "mul", v, factor, shape=v.shape)


def _unflattened_mm(cx, a, b, bias=None):
    """a @ b (+ bias) where `a` is a higher-rank value with its leading dims merged (how torch
    applies nn.Linear to [B, S, K]): the product is taken on that value and the result reshaped,
    so that the reshapes around it cancel out (Kiln's simplifier folds reshape of reshape)
    instead of copying activations between the matrix products. None when `a` is no such value.
    """
    a = cx.v(a)
    src = cx.flattened.get(a.name)
    dtype, shape = cx.out
    if src is None or (bias is not None and cx.v(bias).rank == 2 and cx.v(bias).shape[0] != 1):
        return None
    full = src.shape[:-1] + (shape[1],)
    y = dot(cx, src, b, [src.rank - 1], [0], full)
    if bias is not None:
        y = binary(cx, "add", cx.v(bias), y, shape=full)
    r = cx.w.op("reshape", [y], dtype, shape)
    cx.flattened[r.name] = y
    return r


@op("mm")
def _mm(cx, a, b):
    return _unflattened_mm(cx, a, b) or dot(cx, a, b, [1], [0], cx.out[1])


@op("bmm")
def _bmm(cx, a, b):
    return dot(cx, a, b, [2], [1], cx.out[1], [0], [0])


@op("addmm", "baddbmm")
def _addmm(cx, bias, a, b, beta=1, alpha=1):
    batched = cx.target_name == "baddbmm"
    if not batched and beta == 1 and alpha == 1:
        y = _unflattened_mm(cx, a, b, bias)
        if y is not None:
            return y
    prod = dot(cx, a, b, [2] if batched else [1], [1] if batched else [0], cx.out[1],
               [0] if batched else (), [0] if batched else ())
    prod = _scaled(cx, prod, alpha)
    if beta == 0:
        return prod
    return binary(cx, "add", _scaled(cx, cx.v(bias), beta), prod)


@op("linear")
def _linear(cx, x, weight, bias=None):
    v = cx.v(x)
    y = dot(cx, v, weight, [v.rank - 1], [1], cx.out[1])
    return y if bias is None else binary(cx, "add", y, bias)


@op("matmul")
def _matmul(cx, a, b):
    va, vb = cx.v(a), cx.v(b)
    shape = cx.out[1]
    if vb.rank == 2 and va.rank >= 2:
        return dot(cx, va, vb, [va.rank - 1], [0], shape)
    if va.rank == vb.rank and va.rank >= 3 and va.shape[:-2] == vb.shape[:-2]:
        batch = list(range(va.rank - 2))
        return dot(cx, va, vb, [va.rank - 1], [vb.rank - 2], shape, batch, batch)
    raise Unsupported(f"matmul of ranks {va.rank} and {vb.rank} with broadcast batch dims")


@op("convolution", "_convolution")
def _convolution(cx, x, weight, bias, stride, padding, dilation, transposed, output_padding,
                 groups, *rest):
    if transposed:
        raise Unsupported("transposed convolution")
    dtype, shape = cx.out
    v, w = cx.convert(cx.v(x), dtype), cx.convert(cx.v(weight), dtype)
    spatial = v.rank - 2
    digits = "".join(str(i) for i in range(spatial))
    rep = lambda xs: [int(i) for i in xs] * (spatial if len(xs) == 1 else 1)
    attrs = {"window_strides": rep(stride), "padding_low": rep(padding),
             "padding_high": rep(padding), "rhs_dilation": rep(dilation),
             "feature_group_count": int(groups),
             "dimension_numbers": f'"bf{digits}_oi{digits}->bf{digits}"'}
    y = cx.w.op("convolution", [v, w], dtype, shape, attrs)
    if bias is None:
        return y
    b = cx.convert(cx.v(bias), dtype)
    bb = cx.w.op("broadcast_in_dim", [b], dtype, shape, {"dims": [1]})
    return cx.w.op("add", [y, bb], dtype, shape)


@op("scaled_dot_product_attention")
def _sdpa(cx, q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    if dropout_p:
        raise Unsupported("attention dropout")
    dtype, shape = cx.out
    operands = [cx.v(q), cx.v(k), cx.v(v)]
    if attn_mask is not None:
        m = cx.v(attn_mask)
        mshape = shape[:-1] + (operands[1].shape[-2],)
        operands.append(cx.broadcast(m, mshape))
    attrs = {"causal": bool(is_causal)}
    if scale is not None:
        attrs["scale"] = float(scale)
    return cx.w.op("attention", operands, dtype, shape, attrs)


# The fused kernels scaled_dot_product_attention dispatches to (torch >= 2): the attention and
# statistics nothing reads in inference (an error where something does).
@op("_scaled_dot_product_flash_attention_for_cpu")
def _sdpa_cpu(cx, q, k, v, dropout_p=0.0, is_causal=False, attn_mask=None, scale=None):
    y = _sdpa(cx, q, k, v, attn_mask, dropout_p, is_causal, scale)
    return y, cx.unavailable(f"the log-sum-exp of {cx.target_name}")


@op("_scaled_dot_product_efficient_attention")
def _sdpa_efficient(cx, q, k, v, attn_bias=None, compute_log_sumexp=False, dropout_p=0.0,
                    is_causal=False, scale=None):
    y = _sdpa(cx, q, k, v, attn_bias, dropout_p, is_causal, scale)
    rest = cx.unavailable(f"the statistics of {cx.target_name}")
    return y, rest, rest, rest


# --- normalisation -------------------------------------------------------------------------

def _ones(cx, n, dtype, value=1.0):
    return cx.w.splat(value, dtype, (n,))


def batch_norm(cx, x, weight, bias, mean, var, eps):
    v = cx.v(x)
    c = v.shape[1]
    ops = [cx.v(weight) if weight is not None else _ones(cx, c, v.dtype),
           cx.v(bias) if bias is not None else _ones(cx, c, v.dtype, 0.0),
           cx.v(mean), cx.v(var)]
    ops = [cx.convert(o, v.dtype) for o in ops]
    return cx.w.op("batch_norm_inference", [v] + ops, v.dtype, v.shape,
                   {"epsilon": float(eps), "feature_index": 1})


def _stats_unavailable(cx, what):
    return cx.unavailable(f"{what} of {cx.target_name} (batch statistics)")


@op("native_batch_norm", "batch_norm", "_native_batch_norm_legit_no_training",
    "_native_batch_norm_legit")
def _batch_norm(cx, x, weight, bias, mean, var, *args):
    name = cx.target_name
    if name == "_native_batch_norm_legit_no_training":
        eps = args[1]
    else:
        training, eps = args[0], args[2]
        if training:
            raise Unsupported("batch norm with batch statistics (training mode: call module.eval())")
    y = batch_norm(cx, x, weight, bias, mean, var, eps)
    if name == "batch_norm":
        return y
    return y, _stats_unavailable(cx, "saved mean"), _stats_unavailable(cx, "saved invstd")


@op("native_layer_norm", "layer_norm")
def _layer_norm(cx, x, normalized_shape, weight=None, bias=None, eps=1e-5, *args):
    v = cx.v(x)
    k = len(normalized_shape)
    tail = v.shape[v.rank - k:]
    n = 1
    for d in tail:
        n *= d
    scale = cx.v(weight) if weight is not None else cx.w.splat(1.0, v.dtype, tail)
    operands = [v, cx.convert(scale, v.dtype)]
    if bias is not None:
        operands.append(cx.convert(cx.v(bias), v.dtype))
    y = cx.w.op("layer_norm", operands, v.dtype, v.shape,
                {"axis": v.rank - k, "epsilon": float(eps)})
    if cx.target_name == "layer_norm":
        return y
    return y, _stats_unavailable(cx, "mean"), _stats_unavailable(cx, "rstd")


# --- reductions and pooling ----------------------------------------------------------------

def reduce(cx, x, dims, kind, keepdim, dtype=None):
    dtype = dtype or cx.out[0]
    v = cx.convert(cx.v(x), dtype)
    dims = norm_dims(dims, v.rank)
    shape = [d for i, d in enumerate(v.shape) if i not in dims]
    r = cx.w.op("reduce", [v], dtype, shape, {"dims": dims, "kind": kind})
    if keepdim:
        kept = [1 if i in dims else d for i, d in enumerate(v.shape)]
        r = cx.w.op("reshape", [r], dtype, kept)
    return r


@op("sum", "mean", "prod", "amax", "amin", "any", "all")
def _reduce(cx, x, dim=None, keepdim=False, dtype=None):
    name = cx.target_name
    if isinstance(dim, bool):  # any(x, keepdim) style overloads never reach here; guard anyway
        raise Unsupported(f"{name} with these arguments")
    kind = {"sum": "sum", "mean": "sum", "prod": "prod", "amax": "max", "amin": "min",
            "any": "or", "all": "and"}[name]
    v = cx.v(x)
    out = cx.out[0]
    r = reduce(cx, v, dim, kind, keepdim, "bool" if kind in ("or", "and") else out)
    if name != "mean":
        return r
    count = 1
    for i in norm_dims(dim, v.rank):
        count *= v.shape[i]
    return binary(cx, "div", r, float(count), shape=r.shape)


@op("max", "min")
def _max_dim(cx, x, dim=None, keepdim=False):
    kind = cx.target_name
    if dim is None:
        return reduce(cx, x, None, kind, False)
    if not isinstance(dim, int):  # max.other: elementwise
        return binary(cx, kind, x, dim)
    v = cx.v(x)
    d = norm_dim(dim, v.rank)
    values = reduce(cx, v, [d], kind, keepdim, v.dtype)
    return values, _arg(cx, v, d, keepdim, "argmax" if kind == "max" else "argmin")


def _arg(cx, v, d, keepdim, kind):
    shape = [s for i, s in enumerate(v.shape) if i != d]
    r = cx.w.op(kind, [v], "i64", shape, {"axis": d})
    if keepdim:
        r = cx.w.op("reshape", [r], "i64", [1 if i == d else s for i, s in enumerate(v.shape)])
    return r


@op("argmax", "argmin")
def _argmax(cx, x, dim=None, keepdim=False):
    v = cx.v(x)
    if dim is None:
        v = cx.w.op("reshape", [v], v.dtype, [math.prod(v.shape)])
        return _arg(cx, v, 0, False, cx.target_name)
    return _arg(cx, v, norm_dim(dim, v.rank), keepdim, cx.target_name)


def _pool_attrs(v, out_shape, kernel, stride, padding, dilation):
    n = len(kernel)
    rep = lambda xs, default: [int(i) for i in (xs or default)] * (n if len(xs or default) == 1 else 1)
    k = rep(kernel, kernel)
    s = rep(stride, kernel)
    p = rep(padding, [0])
    d = rep(dilation, [1])
    lead = v.rank - n
    hi = []
    for i in range(n):
        size, out = v.shape[lead + i], out_shape[lead + i]
        hi.append(max(0, (out - 1) * s[i] + (k[i] - 1) * d[i] + 1 - size - p[i]))
    return {"window_dimensions": [1] * lead + k, "window_strides": [1] * lead + s,
            "window_dilations": [1] * lead + d, "padding_low": [0] * lead + p,
            "padding_high": [0] * lead + hi}


@op("max_pool2d_with_indices", "max_pool2d", "max_pool1d", "max_pool3d",
    "max_pool3d_with_indices")
def _max_pool(cx, x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    v = cx.v(x)
    shape = cx.out[1]
    pad = padding if isinstance(padding, (list, tuple)) else [padding]
    dil = dilation if isinstance(dilation, (list, tuple)) else [dilation]
    attrs = _pool_attrs(v, shape, kernel_size, stride, pad, dil)
    attrs["kind"] = "max"
    y = cx.w.op("reduce_window", [v], v.dtype, shape, attrs)
    if cx.target_name.endswith("with_indices"):
        return y, cx.unavailable("indices of max pooling")
    return y


@op("avg_pool2d", "avg_pool1d", "avg_pool3d")
def _avg_pool(cx, x, kernel_size, stride=(), padding=0, ceil_mode=False,
              count_include_pad=True, divisor_override=None):
    v = cx.v(x)
    dtype, shape = cx.out
    pad = padding if isinstance(padding, (list, tuple)) else [padding]
    attrs = _pool_attrs(v, shape, kernel_size, stride, pad, [1])
    attrs["kind"] = "sum"
    total = cx.w.op("reduce_window", [v], dtype, shape, attrs)
    window = math.prod(attrs["window_dimensions"])
    if divisor_override:
        return binary(cx, "div", total, float(divisor_override), shape=shape)
    padded = any(attrs["padding_low"]) or any(attrs["padding_high"])
    if not padded or (count_include_pad and not ceil_mode):
        return binary(cx, "div", total, float(window), shape=shape)
    if count_include_pad:
        raise Unsupported("avg_pool with ceil_mode and count_include_pad")
    # Divide each window by the number of input elements in it.
    ones = cx.w.splat(1.0, dtype, v.shape)
    counts = cx.w.op("reduce_window", [ones], dtype, shape, attrs)
    return cx.w.op("div", [total, counts], dtype, shape)


@op("_adaptive_avg_pool2d", "adaptive_avg_pool2d", "adaptive_avg_pool1d",
    "_adaptive_avg_pool3d")
def _adaptive_avg_pool(cx, x, output_size):
    v = cx.v(x)
    dtype, shape = cx.out
    n = len(output_size)
    lead = v.rank - n
    sizes = v.shape[lead:]
    if any(s % o for s, o in zip(sizes, output_size)):
        raise Unsupported(f"adaptive average pooling from {tuple(sizes)} to "
                          f"{tuple(output_size)} (sizes that do not divide)")
    k = [s // o for s, o in zip(sizes, output_size)]
    attrs = {"kind": "sum", "window_dimensions": [1] * lead + k,
             "window_strides": [1] * lead + k}
    total = cx.w.op("reduce_window", [v], dtype, shape, attrs)
    return binary(cx, "div", total, float(math.prod(k)), shape=shape)
