"""Graph capture from PyTorch straight into Kiln's IR.

A module is traced to ATen ops with make_fx (torch.fx.experimental.proxy_tensor), each op is
translated by the table in kiln.aten into Kiln ops written as .kir text, parameters and buffers
become constants (their bytes in one blob, see kir_writer), and Kiln compiles the result. Every
op Kiln cannot take is listed at once, with its node and the line of Python that made it.
"""

import inspect
import operator
import os

import numpy as np
import torch
import torch.fx
import torch.fx.proxy
from torch.fx.experimental.proxy_tensor import make_fx
from torch.utils import _pytree as pytree

from . import _kiln, aten
from .kir_writer import KirWriter, Value

DTYPES = {
    torch.float32: "f32", torch.float64: "f64", torch.float16: "f16", torch.bfloat16: "bf16",
    torch.int8: "i8", torch.uint8: "u8", torch.int16: "i16", torch.int32: "i32",
    torch.int64: "i64", torch.bool: "bool",
}
TORCH_DTYPES = {v: k for k, v in DTYPES.items()}

# Ops whose result is not a function of their inputs: never evaluated at capture time.
_RANDOM = {"rand", "randn", "randint", "rand_like", "randn_like", "randint_like", "bernoulli",
           "normal", "uniform", "dropout", "native_dropout", "multinomial", "randperm"}
_TORCH_DIR = os.path.dirname(torch.__file__)
_KILN_DIR = os.path.dirname(os.path.abspath(__file__))


class Unavailable:
    """A result Kiln does not compute (batch norm's saved statistics, pooling indices): an
    error only where something reads it."""

    def __init__(self, reason):
        self.reason = reason


class _Failed:
    """The result of a node that could not be translated, where no stand-in can take its
    place: its readers are skipped (the node itself is what gets reported)."""


def _stand_in(node):
    """After a node fails, a Value of its recorded type stands in for its result, so that the
    nodes after it are still checked and every unsupported op is listed at once (the text
    written is never compiled)."""
    meta = _tensor_meta(node)
    if meta is None or meta[0] not in DTYPES:
        return _Failed()
    return Value("%failed", DTYPES[meta[0]], meta[1])


def source_location(node):
    """'model.py:12 in forward: y = x.cumprod(1)' for the user's line that made `node`."""
    trace = getattr(node, "stack_trace", None) or node.meta.get("stack_trace")
    if not trace:
        return ""
    lines = trace.strip("\n").split("\n")
    for i, line in enumerate(lines):
        line = line.strip()
        if not line.startswith('File "'):
            continue
        path = line[6:line.index('"', 6)]
        if path.startswith((_TORCH_DIR, _KILN_DIR, "<")):
            continue
        rest = line[line.index('"', 6) + 1:].strip(", ")  # 'line 12, in forward'
        lineno = rest.split(",")[0].replace("line", "").strip()
        func = rest.split(" in ")[-1] if " in " in rest else ""
        code = lines[i + 1].strip() if i + 1 < len(lines) else ""
        return f"{os.path.basename(path)}:{lineno} in {func}: {code}"
    return ""


def caller_location():
    """'model.py:30 in main: exe = kiln.compile(...)' for the user's line that called into Kiln:
    where a node's own trace has no line of the user's (a module of torch.nn traced by newer
    torch, whose traces stop at the traced function)."""
    for frame in inspect.stack(context=1)[1:]:
        if frame.filename.startswith((_TORCH_DIR, _KILN_DIR, "<")):
            continue
        code = frame.code_context[0].strip() if frame.code_context else ""
        return f"{os.path.basename(frame.filename)}:{frame.lineno} in {frame.function}: {code}"
    return ""


def describe(node, fallback=""):
    where = source_location(node) or fallback
    return f"node '{node.name}'" + (f" ({where})" if where else "")


class Translator:
    """Translates one ATen FX graph into a .kir module (the `cx` that kiln.aten entries get)."""

    def __init__(self, gm, input_names):
        self.gm = gm
        self.input_names = input_names
        self.w = KirWriter()
        self.env = {}
        self.node = None
        self.target_name = ""
        self.unsupported = []  # (node description, op, reason)
        self.caller = caller_location()  # the user's line that compiles, for nodes without one
        self._consts = {}
        # Values that are a reshape merging the leading dims of another (name -> that value).
        self.flattened = {}

    # --- what kiln.aten entries use ---
    @property
    def out(self):
        """(Kiln dtype, shape) of the current node's (first) result."""
        meta = _tensor_meta(self.node)
        if meta is None:
            for user in self.node.users:
                if user.target is operator.getitem and user.args[1] == 0:
                    meta = _tensor_meta(user)
        if meta is None:
            raise aten.Unsupported("no shape recorded for this node")
        return DTYPES[meta[0]], tuple(int(d) for d in meta[1])

    def v(self, x, dtype=None):
        """x as a Value: a constant for a torch tensor or a Python number."""
        if isinstance(x, Value):
            return x
        if isinstance(x, torch.Tensor):
            return self.const(x)
        if isinstance(x, (bool, int, float)):
            if dtype is None:
                dtype = "bool" if isinstance(x, bool) else "i64" if isinstance(x, int) else "f32"
            return self.w.scalar(x, dtype)
        if isinstance(x, Unavailable):
            raise aten.Unsupported(x.reason)
        raise aten.Unsupported(f"an operand of type {type(x).__name__}")

    def const(self, t):
        key = id(t)
        if key not in self._consts:
            if t.dtype not in DTYPES:
                raise aten.Unsupported(f"a constant of dtype {t.dtype}")
            t = t.detach().cpu().contiguous()
            if t.dtype == torch.bfloat16:
                array = t.view(torch.int16).numpy().view(np.uint16)
            else:
                array = t.numpy()
            self._consts[key] = (t, self.w.constant(array, DTYPES[t.dtype]))
        return self._consts[key][1]

    def convert(self, v, dtype):
        if v.dtype == dtype:
            return v
        return self.w.op("convert", [v], dtype, v.shape)

    def broadcast(self, v, shape):
        shape = tuple(int(d) for d in shape)
        if v.shape == shape:
            return v
        lead = len(shape) - v.rank
        if lead < 0 or any(s not in (1, shape[lead + i]) for i, s in enumerate(v.shape)):
            raise aten.Unsupported(f"broadcast of {v.type} to {list(shape)}")
        return self.w.op("broadcast_in_dim", [v], v.dtype, shape,
                         {"dims": list(range(lead, len(shape)))})

    def promote(self, a, b):
        def example(x):
            if isinstance(x, Value):
                return torch.empty(x.shape, dtype=TORCH_DTYPES[x.dtype], device="meta")
            return x
        return DTYPES[torch.result_type(example(a), example(b))]

    def unavailable(self, reason):
        return Unavailable(reason)

    # --- the graph ---
    def run(self):
        outputs = None
        placeholders = 0
        for node in self.gm.graph.nodes:
            self.node = node
            self.w.origin = node
            self.w.loc = node.name
            if node.op == "placeholder":
                self.env[node] = self._parameter(node, placeholders)
                placeholders += 1
            elif node.op == "get_attr":
                self.env[node] = _fetch_attr(self.gm, node.target)
            elif node.op == "call_function":
                self.env[node] = self._call(node)
            elif node.op == "output":
                outputs = node.args[0]
            else:
                self._fail(node, node.op, f"{node.op} nodes are not ATen ops")
                self.env[node] = _Failed()
        return outputs

    def _parameter(self, node, i):
        meta = _tensor_meta(node)
        if meta is None or meta[0] not in DTYPES:
            self._fail(node, "input", "an input that is not a tensor of a Kiln dtype")
            return _Failed()
        name = self.input_names[i] if i < len(self.input_names) else f"input{i}"
        return self.w.parameter(name, DTYPES[meta[0]], meta[1])

    def _fail(self, node, op, reason):
        self.unsupported.append((describe(node, self.caller), op, reason))

    def _call(self, node):
        args = torch.fx.node.map_arg(node.args, lambda n: self.env[n])
        kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: self.env[n])
        flat = pytree.tree_flatten((args, kwargs))[0]
        if any(isinstance(x, _Failed) for x in flat):
            return _stand_in(node)
        if node.target is operator.getitem:
            if isinstance(args[0], (_Failed, Value)):  # a stand-in for a failed op's results
                return _stand_in(node)
            item = args[0][args[1]]
            if isinstance(item, Unavailable):
                self._fail(node, "getitem", item.reason)
                return _stand_in(node)
            return item
        name = _packet_name(node.target)
        base = name[:-1] if name.endswith("_") and not name.endswith("__") else name
        self.target_name = base
        op_text = str(node.target)
        try:
            if base != name:
                _check_in_place(node)
            if not any(isinstance(x, Value) for x in flat) and base not in _RANDOM:
                return node.target(*args, **kwargs)  # constants only: torch computes it now
            entry = aten.TABLE.get(base)
            if entry is None:
                raise aten.Unsupported("Kiln has no translation of this op")
            return entry(self, *args, **kwargs)
        except aten.Unsupported as e:
            self._fail(node, op_text, str(e))
        except Exception as e:  # an entry meeting arguments it does not handle
            self._fail(node, op_text, f"cannot translate these arguments ({type(e).__name__}: {e})")
        return _stand_in(node)

    def module_text(self, outputs):
        flat = pytree.tree_flatten(outputs)[0]
        values = []
        for i, o in enumerate(flat):
            if isinstance(o, torch.fx.Node):
                o = self.env[o]
            if isinstance(o, torch.Tensor):
                o = self.const(o)
            if not isinstance(o, Value):
                if not isinstance(o, _Failed):
                    self.unsupported.append((f"output {i}", "output",
                                             f"a {type(o).__name__} output (not a tensor)"))
                continue
            values.append(o)
        return self.w.text(values)


def _tensor_meta(node):
    meta = node.meta.get("tensor_meta")
    if meta is not None and hasattr(meta, "dtype"):
        return meta.dtype, tuple(meta.shape)
    val = node.meta.get("val")
    if isinstance(val, torch.Tensor):
        return val.dtype, tuple(val.shape)
    return None


def _packet_name(target):
    packet = getattr(target, "overloadpacket", None)
    if packet is not None:
        return packet.__name__
    return getattr(target, "__name__", str(target))


def _fetch_attr(gm, target):
    obj = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def _check_in_place(node):
    """An in-place op becomes its functional form, which is only the same if nothing reads the
    overwritten tensor afterwards or expects it changed."""
    mutated = node.args[0]
    if not isinstance(mutated, torch.fx.Node):
        return
    if mutated.op in ("placeholder", "get_attr"):
        raise aten.Unsupported(f"in-place op writes to the model's {mutated.op} '{mutated.name}'")
    order = {n: i for i, n in enumerate(node.graph.nodes)}
    later = [u for u in mutated.users if u is not node and order[u] > order[node]]
    if later:
        raise aten.Unsupported(f"in-place op overwrites '{mutated.name}', which "
                               f"'{later[0].name}' reads afterwards")


def input_names(module, count):
    try:
        params = [p for p in inspect.signature(module.forward).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    if len(params) >= count:
        return [p.name for p in params[:count]]
    return [f"input{i}" for i in range(count)]


def trace(module, example_inputs):
    """The module as an ATen FX graph. Traced with autograd on, so that modules with fused
    inference fast paths (nn.TransformerEncoder in eval under no_grad) record their parts;
    stack traces are recorded so that errors can name the user's line."""
    tracer = torch.fx.proxy.TracerBase
    saved = tracer.record_stack_traces
    tracer.record_stack_traces = True
    # Newer torch's make_fx sets the tracer's flag from its own argument (False by default).
    kwargs = {}
    if "record_stack_traces" in inspect.signature(make_fx).parameters:
        kwargs["record_stack_traces"] = True
    try:
        with torch.enable_grad():
            gm = make_fx(module, **kwargs)(*example_inputs)
    finally:
        tracer.record_stack_traces = saved
    gm.graph.eliminate_dead_code()
    return gm


def capture(module, example_inputs, names=None):
    """(kir text, blob, output tree spec, translator) for `module` at the example inputs."""
    flat_inputs, _ = pytree.tree_flatten(tuple(example_inputs))
    for i, x in enumerate(flat_inputs):
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"example input {i} is a {type(x).__name__}; pass tensors")
    gm = trace(module, example_inputs)
    names = names or input_names(module, len(flat_inputs))
    tr = Translator(gm, names)
    outputs = tr.run()
    _, spec = pytree.tree_flatten(outputs)
    text = tr.module_text(outputs)
    if tr.unsupported:
        raise unsupported_error(type(module).__name__, tr.unsupported)
    return text, tr.w.blob(), spec, tr


def unsupported_error(what, items):
    lines = [f"{what}: {len(items)} op(s) Kiln cannot compile:"]
    lines += [f"  {where}: {op}: {reason}" for where, op, reason in items]
    err = _kiln.UnsupportedOpError("\n".join(lines))
    err.unsupported = list(items)
    return err


def compile_captured(text, blob, tr, options, filename):
    try:
        return _kiln.compile_kir(text, filename, blob, options)
    except _kiln.CompileError as e:
        raise _located(e, tr, filename) from None


def _located(e, tr, filename):
    """The compile error with the FX node of the .kir line it points at."""
    message = str(e)
    if message.startswith(filename + ":"):
        line = message[len(filename) + 1:].split(":")[0]
        node = tr.w.origin_of_line(int(line)) if line.isdigit() else None
        if node is not None:
            message += f"\n  from {describe(node, tr.caller)}: {node.target}"
    err = type(e)(message)
    err.unsupported = []
    return err


class CapturedModule:
    """A torch module compiled by Kiln: called like the module (its tensors in, tensors of the
    same structure out). `.executable` is the kiln.Executable it runs."""

    def __init__(self, executable, spec, text):
        self.executable = executable
        self._spec = spec
        self.kir = text

    def __call__(self, *args):
        out = self.executable(*args)
        flat = list(out) if isinstance(out, tuple) else [out]
        return pytree.tree_unflatten(flat, self._spec)

    def explain(self):
        return self.executable.explain()

    @property
    def inputs(self):
        return self.executable.inputs

    @property
    def outputs(self):
        return self.executable.outputs


def compile_module(module, example_inputs, options):
    if not isinstance(example_inputs, (tuple, list)):
        example_inputs = (example_inputs,)
    if module.training:
        raise _kiln.CompileError(f"{type(module).__name__} is in training mode; call .eval() "
                                 "first (Kiln compiles inference)")
    text, blob, spec, tr = capture(module, tuple(example_inputs))
    filename = f"<torch:{type(module).__name__}>.kir"
    exe = compile_captured(text, blob, tr, options, filename)
    return CapturedModule(exe, spec, text)


