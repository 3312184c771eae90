"""Writes a Kiln IR module (docs/kir.md) as text, with constants in one binary blob.

The torch frontend emits .kir text rather than calling a builder op by op: the text is what
`dump_dir` and error messages show, Kiln's parser checks every op against its type rule as it
reads it (errors point at a line, which maps back to the FX node), and the weights go into
`data @w = T blob OFFSET` entries of one buffer, so that a 44 MB resnet18 crosses into C++ as one
copy instead of 88 MB of hex.
"""

import re

import numpy as np

_BARE_NAME = re.compile(r"^[A-Za-z0-9_.$-]+$")

# numpy dtypes of Kiln's element types (bf16 constants are written from their raw bits).
NUMPY_OF = {
    "bool": np.bool_, "i8": np.int8, "u8": np.uint8, "i16": np.int16, "u16": np.uint16,
    "i32": np.int32, "u32": np.uint32, "i64": np.int64, "u64": np.uint64,
    "f16": np.float16, "bf16": np.uint16, "f32": np.float32, "f64": np.float64,
}
FLOATS = ("f16", "bf16", "f32", "f64")


def type_str(dtype, shape):
    return f"{dtype}[{','.join(str(int(d)) for d in shape)}]"


def quote(name):
    if _BARE_NAME.match(name):
        return name
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def literal(value, dtype):
    """A scalar as the .kir text spells an element of `dtype`."""
    if dtype == "bool":
        return "true" if value else "false"
    if dtype in FLOATS:
        v = float(value)
        if v != v:
            return "nan"
        if v in (float("inf"), float("-inf")):
            return "inf" if v > 0 else "-inf"
        text = repr(v)
        return text if ("." in text or "e" in text) else text + ".0"
    return str(int(value))


class Value:
    """A value of the function being written: its printed name, element type and static dims."""

    __slots__ = ("name", "dtype", "shape")

    def __init__(self, name, dtype, shape):
        self.name = name
        self.dtype = dtype
        self.shape = tuple(int(d) for d in shape)

    @property
    def type(self):
        return type_str(self.dtype, self.shape)

    @property
    def rank(self):
        return len(self.shape)

    def __repr__(self):
        return f"Value({self.name}: {self.type})"


class KirWriter:
    """One function, @main, written statement by statement."""

    def __init__(self):
        self.params = []
        self.lines = []
        self.data = []
        self.blob_parts = []
        self.blob_size = 0
        self.count = 0
        # The FX node (or other origin) of each statement, by its line in the text.
        self.origins = {}
        self.origin = None
        self.loc = None

    def _fresh(self):
        self.count += 1
        return f"%v{self.count}"

    def parameter(self, name, dtype, shape):
        v = Value("%" + quote(name), dtype, shape)
        self.params.append(v)
        return v

    def op(self, name, operands, dtype, shape, attrs=None):
        """Appends `%r = T name(operands) {attrs}` and returns %r."""
        result = Value(self._fresh(), dtype, shape)
        text = f"  {result.name} = {result.type} {name}({', '.join(o.name for o in operands)})"
        if attrs:
            text += " {" + ", ".join(f"{k} = {_attr(v)}" for k, v in attrs.items()) + "}"
        if self.loc:
            text += f' loc("{self.loc}")'
        self.origins[len(self.lines) + 2] = self.origin  # line 1 is the signature
        self.lines.append(text)
        return result

    def constant(self, array, dtype):
        """A constant of Kiln type `dtype` from a numpy array (bf16: its raw uint16 bits)."""
        array = np.ascontiguousarray(array, dtype=NUMPY_OF[dtype])
        if array.size == 1 and dtype != "bf16":
            value = "[" + literal(array.reshape(-1)[0], dtype) + "]"
            return self.op("constant", [], dtype, array.shape, {"value": _Raw(value)})
        if array.size > 0 and (array.reshape(-1) == array.reshape(-1)[0]).all() and dtype != "bf16":
            value = "splat(" + literal(array.reshape(-1)[0], dtype) + ")"
            return self.op("constant", [], dtype, array.shape, {"value": _Raw(value)})
        offset = (self.blob_size + 63) // 64 * 64
        if offset > self.blob_size:
            self.blob_parts.append(bytes(offset - self.blob_size))
        self.blob_parts.append(memoryview(array).cast("B"))
        self.blob_size = offset + array.nbytes
        entry = f"c{len(self.data)}"
        self.data.append(f"data @{entry} = {type_str(dtype, array.shape)} blob {offset}")
        return self.op("constant", [], dtype, array.shape, {"value": _Raw("@" + entry)})

    def splat(self, value, dtype, shape):
        return self.op("constant", [], dtype, shape, {"value": _Raw(f"splat({literal(value, dtype)})")})

    def scalar(self, value, dtype):
        return self.op("constant", [], dtype, (), {"value": _Raw(f"[{literal(value, dtype)}]")})

    def text(self, outputs):
        """The module, returning `outputs`."""
        params = ", ".join(f"{p.name}: {p.type}" for p in self.params)
        results = ", ".join(o.type for o in outputs)
        head = f"func @main({params}) -> ({results}) {{"
        ret = "  return " + ", ".join(o.name for o in outputs)
        return "\n".join([head] + self.lines + [ret, "}"] + self.data) + "\n"

    def blob(self):
        """The constants' bytes, each at an offset that is a multiple of 64."""
        out = bytearray(self.blob_size)
        at = 0
        for part in self.blob_parts:
            n = len(part) if isinstance(part, bytes) else part.nbytes
            out[at:at + n] = part
            at += n
        return out

    def origin_of_line(self, line):
        return self.origins.get(line)


class _Raw:
    """An attribute value written as is (tensor values)."""

    def __init__(self, text):
        self.text = text


def _attr(v):
    if isinstance(v, _Raw):
        return v.text
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return literal(v, "f64")
    if isinstance(v, (list, tuple)):
        if any(isinstance(x, float) for x in v):
            return "[" + ", ".join(literal(x, "f64") for x in v) + "]"
        return "[" + ", ".join(str(int(x)) for x in v) + "]"
    if isinstance(v, str):
        return v  # enum words (sum, lt, tanh) and dtypes
    raise TypeError(f"cannot write attribute {v!r}")
