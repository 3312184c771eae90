"""ResNet-18 compiled once over batch 1..64 serves ten batches (1, 64 and eight random) with no
recompile, against torch at each and the reference interpreter at the batches up to 2, on every
compiled target this build and machine have: cpu, and cuda where a GPU is present."""

import inspect

import numpy as np
import pytest

import kiln

torch = pytest.importorskip("torch", reason="torch is not installed")
torchvision = pytest.importorskip("torchvision", reason="torchvision is not installed")
pytest.importorskip("onnx", reason="onnx is not installed")


def backends():
    out = []
    for b in ("cpu", "cuda"):
        if b not in kiln.backends():
            out.append(pytest.param(b, marks=pytest.mark.skip(reason=f"this build has no {b} target")))
        elif b == "cuda" and not torch.cuda.is_available():
            out.append(pytest.param(b, marks=pytest.mark.skip(reason="no CUDA device here")))
        else:
            out.append(b)
    return out


def assert_near(got, want, tolerance, what):
    """Every element within `tolerance` times the largest magnitude of `want`."""
    worst = float(np.max(np.abs(got - want)))
    scale = float(np.max(np.abs(want)))
    assert worst <= tolerance * scale, f"{what}: max error {worst:.3g}, scale {scale:.3g}"


@pytest.fixture(scope="module")
def resnet18(tmp_path_factory):
    """(torch model, ONNX export with a symbolic batch N)."""
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=1000).eval()
    path = tmp_path_factory.mktemp("resnet18") / "resnet18.onnx"
    legacy = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    torch.onnx.export(model, (torch.zeros(2, 3, 224, 224),), str(path), opset_version=17,
                      input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}}, **legacy)
    return model, path


@pytest.mark.parametrize("backend", backends())
def test_resnet18_over_batch_range(resnet18, backend):
    model, path = resnet18
    exe = kiln.compile(path, backend=backend, dims={"N": (1, 64)})
    rng = np.random.default_rng(5)
    batches = [1, 64] + [int(n) for n in rng.choice(np.arange(2, 64), 8, replace=False)]
    for n in batches:
        x = rng.standard_normal((n, 3, 224, 224)).astype(np.float32)
        got = exe(x)
        assert got.shape == (n, 1000)
        with torch.no_grad():
            want = model(torch.from_numpy(x)).numpy()
        # f32 convolutions (oneDNN's or cuDNN's without TF32, Winograd among them on the CPU)
        # over 20 layers: 1e-4 of the logits' scale, as tests/models/check_model.py allows.
        assert_near(got, want, 1e-4, f"{backend} N={n} against torch")
        if n <= 2:
            reference = kiln.compile(path, backend="interp", dims={"N": n})
            assert_near(got, reference(x), 1e-4, f"{backend} N={n} against the interpreter")
    assert exe.recompiles == 0
