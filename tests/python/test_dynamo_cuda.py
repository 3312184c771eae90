"""torch.compile(model, backend="kiln") on CUDA tensors: Dynamo's graphs compiled for Kiln's
cuda target, the module's weights as constants, inputs and outputs passed to Kiln as device
addresses through DLPack (no copy across the bus), on resnet50 and a BERT-style encoder, against
eager PyTorch. Needs torch >= 2 with a GPU and a Kiln build with the cuda target (the H200:
docs/python.md)."""

import logging
import os
import sys

import pytest

torch = pytest.importorskip("torch", reason="python3-torch is not installed")
if int(torch.__version__.split(".")[0]) < 2:
    pytest.skip(f"torch.compile needs torch >= 2.0; this is torch {torch.__version__}",
                allow_module_level=True)
if not torch.cuda.is_available():
    pytest.skip("no CUDA device for torch", allow_module_level=True)

import kiln  # noqa: E402
import kiln.dynamo  # noqa: E402

if "cuda" not in kiln.backends():
    pytest.skip("this build of Kiln has no cuda target", allow_module_level=True)

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))


@pytest.fixture(autouse=True)
def strict_f32():
    # Eager PyTorch would use TF32 for convolutions; Kiln's f32 keeps full precision.
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    torch._dynamo.reset()
    yield
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


def relative_error(got, want):
    return ((got.float() - want.float()).abs().max() / want.float().abs().max()).item()


class Scale(torch.nn.Module):
    def forward(self, a, b):
        return a * b + 1


def test_cuda_tensors_in_and_out_without_copies():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
    model = model.eval()
    exe = kiln.compile(model, example_inputs=(torch.randn(8, 16),), backend="cuda")
    x = torch.randn(8, 16, device="cuda")
    got = exe(x)
    # The output is a CUDA tensor the run wrote in place, ordered on torch's stream.
    assert isinstance(got, torch.Tensor) and got.device.type == "cuda"
    with torch.no_grad():
        want = model(x.cpu())
    assert relative_error(got.cpu(), want) <= 1e-5
    # A host input among CUDA ones is refused, naming it.
    two = kiln.compile(Scale().eval(), example_inputs=(torch.randn(3, 4), torch.randn(3, 4)),
                       backend="cuda")
    a, b = torch.randn(3, 4, device="cuda"), torch.randn(3, 4, device="cuda")
    # The GPU contracts a * b + 1 into one fused multiply-add (one rounding, eager rounds
    # twice): within an f32 ulp of the result's scale.
    assert relative_error(two(a, b), a * b + 1) <= 1e-6
    with pytest.raises(kiln.KilnError, match="not in CUDA memory"):
        two(a, b.cpu())


def compile_and_compare(model, x, caplog, tolerance):
    compiled = torch.compile(model, backend="kiln", dynamic=False)
    with torch.no_grad(), caplog.at_level(logging.WARNING, logger="kiln.dynamo"):
        want = model(x)
        for _ in range(3):  # the first run compiles; later ones replay the same executable
            got = compiled(x)
    assert not [r for r in caplog.records if "runs in eager" in r.message], caplog.text
    assert got.device.type == "cuda"
    error = relative_error(got, want)
    assert error <= tolerance, error
    return compiled


# f32 on both sides; cuDNN's and cuBLAS's algorithms sum in other orders than eager's, so the
# outputs agree to about 1e-6 of their scale; 1e-4 leaves room and still catches any wrong
# index or op (those are off by the output's own size).
def test_resnet50(caplog):
    torchvision = pytest.importorskip("torchvision", reason="torchvision is not installed")
    torch.manual_seed(0)
    model = torchvision.models.resnet50(weights=None).cuda().eval()
    compile_and_compare(model, torch.randn(2, 3, 224, 224, device="cuda"), caplog, 1e-4)


def test_bert_style_encoder(caplog):
    import export_models

    torch.manual_seed(0)
    # The fused inference path of nn.TransformerEncoderLayer is one op; its parts compile.
    if hasattr(torch.backends, "mha"):
        torch.backends.mha.set_fastpath_enabled(False)
    try:
        model = export_models.BertEncoder().cuda().eval()
        ids = torch.randint(0, 30522, (2, 128), device="cuda")
        compile_and_compare(model, ids, caplog, 1e-4)
    finally:
        if hasattr(torch.backends, "mha"):
            torch.backends.mha.set_fastpath_enabled(True)
