"""One compile on the cuda target over ranges of sizes serves every size in them with no
recompile: the BERT-style encoder of test_dynamic_encoder.py over batch 1..32 and sequence 1..512
at ten (batch, sequence) pairs, against the reference interpreter and torch (ResNet-18 over a
batch range: test_ranges_resnet.py). Needs a GPU and a Kiln build with the cuda target (the H200:
docs/gpu.md)."""

import os

import numpy as np
import pytest

import kiln

torch = pytest.importorskip("torch", reason="torch is not installed")
pytest.importorskip("onnx", reason="onnx is not installed")
if "cuda" not in kiln.backends():
    pytest.skip("this build of Kiln has no cuda target", allow_module_level=True)
if not torch.cuda.is_available():
    pytest.skip("no CUDA device here", allow_module_level=True)

from test_dynamic_encoder import VOCAB, WIDTH, export_encoder, sample_pairs  # noqa: E402


def assert_near(got, want, tolerance, what):
    """Every element within `tolerance` times the largest magnitude of `want`."""
    worst = float(np.max(np.abs(got - want))) if want.size else 0.0
    scale = float(np.max(np.abs(want))) if want.size else 0.0
    assert worst <= tolerance * scale, f"{what}: max error {worst:.3g}, scale {scale:.3g}"


def encoder(tmp_path):
    """(torch model or None, ONNX path, compiled over the ranges). Newer torch's TorchScript
    exporter bakes the sample's sequence length into the attention's reshapes (a Reshape to
    [16, 4*N, 8], which Kiln refuses over S); there the export of a torch that keeps S (1.13,
    which the CPU machine has) is read from KILN_ENCODER_ONNX, with no torch model to compare."""
    dims = {"N": (1, 32), "S": (1, 512)}
    model, path = export_encoder(tmp_path)
    try:
        return model, path, kiln.compile(path, backend="cuda", dims=dims)
    except kiln.UnsupportedOpError as e:
        if "only at some sizes" not in str(e):
            raise
        given = os.environ.get("KILN_ENCODER_ONNX")
        if not given:
            pytest.skip(f"torch {torch.__version__} exports S as a constant ({e}); set "
                        "KILN_ENCODER_ONNX to an export by torch 1.13")
        return None, given, kiln.compile(given, backend="cuda", dims=dims)


def test_encoder_over_batch_and_sequence_ranges(tmp_path):
    model, path, exe = encoder(tmp_path)
    rng = np.random.default_rng(11)
    for n, s in sample_pairs(rng):
        ids = rng.integers(0, VOCAB, (n, s)).astype(np.int64)
        got = exe(ids)
        assert got.shape == (n, s, WIDTH)
        # f32 throughout (no TF32): products of 32-64 terms and two layer norms, in another
        # order than the interpreter's: 1e-5 of the output's scale is far above that and far
        # below a wrong index.
        reference = kiln.compile(path, backend="interp", dims={"N": n, "S": s})
        assert_near(got, reference(ids), 1e-5, f"N={n} S={s} against the interpreter")
        if model is not None:
            with torch.no_grad():
                want = model(torch.from_numpy(ids)).numpy()
            assert_near(got, want, 1e-4, f"N={n} S={s} against torch")
    assert exe.recompiles == 0
