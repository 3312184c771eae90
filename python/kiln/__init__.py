"""Kiln from Python: compile a model once, run it many times (docs/python.md).

    import kiln
    exe = kiln.compile("model.onnx", dims={"N": 1})
    (y,) = exe.run(None, {"x": x})        # numpy in, numpy out (ONNX Runtime's style)
    y = exe(x)                             # positional or named inputs

    model = kiln.compile(torch_module, example_inputs=(x,))   # captured into Kiln's IR
    y = model(x)                           # torch tensors in and out (DLPack, no copies)
"""

import os
import weakref

from . import _kiln
from ._kiln import (
    CompileError,
    Executable,
    InvalidInputError,
    KilnError,
    RunError,
    UnsupportedOpError,
)

__version__ = _kiln.__version__

__all__ = [
    "compile",
    "backends",
    "Executable",
    "KilnError",
    "CompileError",
    "UnsupportedOpError",
    "InvalidInputError",
    "RunError",
]


def _register_dynamo_backend():
    # torch.compile(backend="kiln") needs torch >= 2.0; torch is not imported for it (slow).
    torch = _torch_if_loaded()
    if torch is not None and not torch.__version__.startswith(("0.", "1.")):
        from . import dynamo

        dynamo.register()


def backends():
    """The targets this build of Kiln has ("cpu", "cuda", "interp"): what `backend=` may name."""
    return _kiln.backends()


_PRECISIONS = ("f32", "tf32", "f16", "bf16")


def _options(backend, threads, dims, opt_level, cache_dir, dump_dir, precision="f32",
             recompile=True):
    if not isinstance(backend, str):
        raise TypeError(f"backend must be a str such as 'cpu', got {type(backend).__name__}")
    if precision not in _PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(_PRECISIONS)}, got {precision!r}")
    sizes, ranges = {}, {}
    for k, v in (dims or {}).items():
        if isinstance(v, (tuple, list)):
            if len(v) not in (2, 3) or (len(v) == 3 and v[2] != "pow2"):
                raise ValueError(f"dims[{k!r}]: a range is (lo, hi) or (lo, hi, 'pow2'), "
                                 f"got {v!r}")
            ranges[str(k)] = (int(v[0]), int(v[1]), len(v) == 3)
        else:
            sizes[str(k)] = int(v)
    return _kiln.options(
        backend=backend,
        threads=int(threads),
        dims=sizes,
        ranges=ranges,
        opt_level=int(opt_level),
        cache_dir=os.fspath(cache_dir) if cache_dir else "",
        dump_dir=os.fspath(dump_dir) if dump_dir else "",
        precision=precision,
        recompile=bool(recompile),
    )


def _is_torch_module(source):
    torch = _torch_if_loaded()
    return torch is not None and isinstance(source, torch.nn.Module)


def _torch_if_loaded():
    import sys

    return sys.modules.get("torch")


def compile(
    source,
    *,
    backend="cpu",
    threads=0,
    dims=None,
    opt_level=1,
    cache_dir=None,
    dump_dir=None,
    example_inputs=None,
    precision="f32",
    recompile=True,
):
    """Compiles `source` into an executable.

    source: a path (str or os.PathLike) to an ONNX model (.onnx), a Kiln IR module (.kir) or a
        Kiln artifact (.kiln, from `kiln compile` or Executable.save); the bytes of an ONNX
        model; or a torch.nn.Module, captured into Kiln's IR with `example_inputs` (a tuple of
        tensors giving the shapes and dtypes it is compiled for).
    backend: a target of this build (kiln.backends()): "cpu", "cuda" (an NVIDIA GPU;
        docs/gpu.md), or "interp" (the reference interpreter).
    threads: threads a run uses (0: all the machine has).
    dims: sizes of the model's symbolic dimensions, e.g. {"N": 8}, or ranges of them, e.g.
        {"N": (1, 64)}: one compile runs every size in the range (docs/cli.md, "Ranges").
    opt_level: 1 runs the graph optimisation pipeline, 0 none.
    cache_dir: the persistent compile cache's directory (None: no cache).
    dump_dir: a directory to write the IR into after each stage (00-import.kir, ...); constant
        data over 4 KiB prints as `elided`.
    precision: "f32" (the default), "tf32" (cuda matrix products on TF32 tensor cores), "f16"
        or "bf16" (values computed and stored in that type; inputs and outputs stay f32;
        tolerances in docs/gpu.md).
    recompile: True (the default): a run whose inputs differ from the compiled sizes in a
        symbolic dim of the model (an ONNX dim_param) compiles it again for them, logging one
        line to stderr, and keeps that specialisation; False: such a run raises RunError naming
        the dim, its size and the compiled size.

    Returns an Executable (for a torch module, a kiln.capture.CapturedModule around one). Raises
    CompileError (UnsupportedOpError listing every unsupported op) when Kiln cannot compile it.
    """
    options = _options(backend, threads, dims, opt_level, cache_dir, dump_dir, precision,
                       recompile)
    if _is_torch_module(source):
        from . import capture

        if example_inputs is None:
            raise TypeError("compiling a torch.nn.Module needs example_inputs=(tensor, ...)")
        return capture.compile_module(source, example_inputs, options)
    if example_inputs is not None:
        raise TypeError("example_inputs= applies to a torch.nn.Module only")
    if isinstance(source, (bytes, bytearray, memoryview)):
        return _compile_onnx_bytes(bytes(source), options)
    if isinstance(source, (str, os.PathLike)):
        return _compile_path(os.fspath(source), options)
    raise TypeError(
        "source must be a path (.onnx, .kir, .kiln), ONNX bytes or a torch.nn.Module, "
        f"got {type(source).__name__}"
    )


def _compile_path(path, options):
    if not os.path.isfile(path):
        raise CompileError(f"{path}: no such file")
    ext = os.path.splitext(path)[1].lower()
    if ext == ".kir":
        with open(path, encoding="utf-8") as f:
            text = f.read()
        return _kiln.compile_kir(text, path, b"", options)
    if ext == ".kiln":
        return _kiln.load_artifact(path, options)
    if ext == ".onnx":
        return _kiln.compile_onnx(path, options)
    raise CompileError(f"{path}: unknown kind of model (expected .onnx, .kir or .kiln)")


def _compile_onnx_bytes(data, options):
    # The importer reads files (external data lives next to them): bytes go through a
    # temporary file, removed once imported.
    import tempfile

    fd, path = tempfile.mkstemp(suffix=".onnx", prefix="kiln-")
    exe = None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        exe = _kiln.compile_onnx(path, options)
        return exe
    finally:
        # A model with symbolic dims is imported again to recompile for other sizes: its file
        # stays while the executable lives.
        if exe is not None and exe.guards:
            weakref.finalize(exe, os.unlink, path)
        else:
            os.unlink(path)


def compile_kir(text, *, blob=b"", filename="<python>.kir", **options):
    """Compiles Kiln IR given as text (docs/kir.md); `data @w = T blob OFFSET` entries read
    their bytes from `blob`. The keyword options are kiln.compile's."""
    return _kiln.compile_kir(text, filename, blob, _options(**_defaults(options)))


def _defaults(options):
    allowed = {"backend": "cpu", "threads": 0, "dims": None, "opt_level": 1,
               "cache_dir": None, "dump_dir": None, "precision": "f32", "recompile": True}
    unknown = set(options) - set(allowed)
    if unknown:
        raise TypeError(f"unknown options: {', '.join(sorted(unknown))}")
    return {**allowed, **options}


_register_dynamo_backend()
