"""torch.compile(model, backend="kiln"): Kiln as a TorchDynamo backend (torch >= 2.0).

Dynamo hands each graph it captures (an FX graph of torch calls) with example inputs; the
backend traces it to ATen with make_fx and compiles it with Kiln (kiln.capture). A graph Kiln
cannot take runs in eager PyTorch, with one logged warning that says why. Kiln compiles for the
shapes it is given: when Dynamo calls again for the same graph with other shapes (a guard
failed), the recompile is logged with the shapes that changed.

Registered when `kiln` is imported with torch >= 2.0 already imported, by kiln.dynamo.register(),
and, for an installed wheel, through the `torch_dynamo_backends` entry point.
"""

import copy
import logging

import torch
from torch.utils import _pytree as pytree

from . import _kiln
from .capture import DTYPES, capture, compile_captured

log = logging.getLogger("kiln.dynamo")

# The input shapes each graph was last compiled for, by the graph's code.
_compiled_shapes = {}


def _torch_major():
    return int(torch.__version__.split(".")[0])


def register():
    """Makes backend="kiln" known to torch.compile; False (and nothing done) before torch 2."""
    if _torch_major() < 2:
        return False
    import torch._dynamo

    if "kiln" in torch._dynamo.list_backends(exclude_tags=()):
        return True
    torch._dynamo.register_backend(kiln_backend, name="kiln")
    return True


def _signature(example_inputs):
    return tuple((tuple(x.shape), x.dtype) if isinstance(x, torch.Tensor) else type(x).__name__
                 for x in example_inputs)


def _log_recompile(gm, key, signature):
    previous = _compiled_shapes.get(key)
    _compiled_shapes[key] = signature
    if previous is None or previous == signature:
        return
    changes = [f"input {i}: {a} -> {b}" for i, (a, b) in enumerate(zip(previous, signature))
               if a != b]
    log.warning("kiln: recompiling graph %s for new input shapes (%s)", _graph_name(gm),
                "; ".join(changes) or "inputs changed")


def _graph_name(gm):
    return f"of {sum(1 for n in gm.graph.nodes if n.op == 'call_function')} ops"


def _is_state(node, x):
    """Whether a graph input is a parameter or buffer of the module (Dynamo lifts them to inputs
    since torch 2.5): its source names the module's _parameters or _buffers."""
    if isinstance(x, torch.nn.Parameter):
        return True
    source = getattr(node.meta.get("grapharg"), "source", None)
    name = getattr(source, "name", None) if source is not None else None
    name = name() if callable(name) else name if isinstance(name, str) else node.name
    return "_parameters" in name or "_buffers" in name


def _frozen(gm, example_inputs):
    """The graph inputs that are the module's state, by position: compiled as constants, as
    Inductor's freezing does."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    return {i: x for i, (n, x) in enumerate(zip(placeholders, example_inputs))
            if isinstance(x, torch.Tensor) and _is_state(n, x)}


def _on_cpu(gm, frozen, count):
    """The graph as a function of its non-frozen inputs, with its state on the CPU (a copy when
    any of its own tensors lies elsewhere)."""
    if any(t.device.type != "cpu" for t in list(gm.parameters()) + list(gm.buffers())):
        gm = copy.deepcopy(gm).cpu()

    def of_inputs(*inputs):
        it = iter(inputs)
        return gm(*[frozen[i] if i in frozen else next(it) for i in range(count)])

    return of_inputs


def _why_not(example_inputs):
    """Why these inputs cannot be compiled (None: they can)."""
    for i, x in enumerate(example_inputs):
        if not isinstance(x, torch.Tensor):
            return f"input {i} is a {type(x).__name__}, not a tensor (symbolic shapes: use " \
                   "torch.compile(..., dynamic=False))"
        if any(not isinstance(d, int) for d in x.shape):
            return f"input {i} has symbolic dims {tuple(x.shape)} (use dynamic=False)"
        if x.device.type == "cuda" and "cuda" not in _kiln.backends():
            return f"input {i} is on {x.device}; this build of Kiln has no cuda target"
        if x.device.type not in ("cpu", "cuda"):
            return f"input {i} is on {x.device}; Kiln runs on the CPU and on CUDA GPUs"
        if x.dtype not in DTYPES:
            return f"input {i} has dtype {x.dtype}, which Kiln does not have"
    return None


def kiln_backend(gm, example_inputs, backend=None, threads=0, opt_level=1):
    """The Dynamo backend: Kiln's executable for `gm`, or gm.forward (eager) when Kiln cannot
    compile it. backend: Kiln's target; None: cuda for inputs on a GPU, else cpu. The module's
    parameters and buffers are compiled as constants: after changing them, call
    torch._dynamo.reset()."""
    from . import _options

    reason = _why_not(example_inputs)
    if reason:
        log.warning("kiln: graph %s runs in eager PyTorch: %s", _graph_name(gm), reason)
        return gm.forward
    _log_recompile(gm, gm.code, _signature(example_inputs))
    frozen = _frozen(gm, example_inputs)
    inputs = [x for i, x in enumerate(example_inputs) if i not in frozen]
    if backend is None:
        on_gpu = any(x.device.type == "cuda" for x in (inputs or example_inputs))
        backend = "cuda" if on_gpu else "cpu"
    # Tracing needs real tensors of the shapes Dynamo saw (its example inputs may be fake). It
    # runs on the CPU whatever the device: on a GPU, ATen records the device's own kernels
    # (cudnn_batch_norm, ...) instead of the ops Kiln translates.
    real = [torch.zeros(x.shape, dtype=x.dtype) for x in inputs]
    frozen_cpu = {i: x.detach().cpu() for i, x in frozen.items()}
    of_inputs = _on_cpu(gm, frozen_cpu, len(example_inputs))
    try:
        text, blob, spec, tr = capture(of_inputs, real, names=[f"arg{i}" for i in range(len(real))])
        exe = compile_captured(text, blob, tr, _options(backend, threads, None, opt_level, None,
                                                        None), "<dynamo>.kir")
    except _kiln.KilnError as e:
        log.warning("kiln: graph %s runs in eager PyTorch: %s", _graph_name(gm),
                    "; ".join(line.strip() for line in str(e).split("\n")))
        return gm.forward

    def run(*args):
        out = exe(*[a for i, a in enumerate(args) if i not in frozen])
        return pytree.tree_unflatten(list(out) if isinstance(out, tuple) else [out], spec)

    return run


# Importing this module (as `import kiln` does when torch is already imported) registers it.
register()
