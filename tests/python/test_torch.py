"""Modules captured from torch (make_fx to ATen, then Kiln's IR) against torch eager, DLPack
tensors in and out, and the list of every op Kiln cannot take."""

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="python3-torch is not installed")
torchvision = pytest.importorskip("torchvision", reason="python3-torchvision is not installed")

import kiln  # noqa: E402
from conftest import needs_cpu  # noqa: E402

# Kiln sums float32 products in other orders than torch (oneDNN's blocked convolutions, batch
# norm folded into the weights, fused epilogues), so errors grow with the size of the sums:
# the bound is relative to the output's largest magnitude, where an elementwise relative bound
# would fail on outputs near zero that are right to 1e-4 of the output's scale.
RELATIVE = 1e-4


def assert_matches(got, ref):
    assert isinstance(got, torch.Tensor) and got.shape == ref.shape and got.dtype == ref.dtype
    scale = ref.abs().max().item()
    err = (got - ref).abs().max().item()
    assert err <= RELATIVE * scale, f"max error {err:.3g} over output scale {scale:.3g}"


def calibrate_batch_norm(model, shape):
    """Running statistics from train-mode passes (fresh ones make activations vanish)."""
    model.train()
    with torch.no_grad():
        for _ in range(2):
            model(torch.randn(*shape))
    model.eval()


def check_model(model, x, backend):
    compiled = kiln.compile(model, example_inputs=(x,), backend=backend)
    with torch.no_grad():
        ref = model(x)
    assert_matches(compiled(x), ref)
    return compiled


@needs_cpu()
@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2"])
def test_torchvision(name, backend):
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(weights=None)
    calibrate_batch_norm(model, (2, 3, 224, 224))
    compiled = check_model(model, torch.randn(1, 3, 224, 224), backend)
    kinds = {k["kind"] for k in compiled.explain()["kernels"]}
    assert "contraction" in kinds


def test_transformer_encoder(backend):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128,
                                             dropout=0.0, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False).eval()
    check_model(model, torch.randn(2, 16, 64), backend)


class Mixed(torch.nn.Module):
    """Two outputs in a dict, a bool one among them, and integer arithmetic."""

    def forward(self, x, k):
        y = torch.nn.functional.gelu(x) * 2 + k.to(torch.float32)
        return {"y": y, "positive": y > 0, "count": (k * 3).sum(dim=1, keepdim=True)}


def test_structure_dtypes_and_dlpack(backend):
    torch.manual_seed(0)
    x = torch.randn(3, 5)
    k = torch.arange(15, dtype=torch.int64).reshape(3, 5)
    compiled = kiln.compile(Mixed().eval(), example_inputs=(x, k), backend=backend)
    assert [i[0] for i in compiled.inputs] == ["x", "k"]
    ref = Mixed()(x, k)
    got = compiled(x, k)
    assert set(got) == {"y", "positive", "count"}
    assert_matches(got["y"], ref["y"])
    assert torch.equal(got["positive"], ref["positive"])
    assert torch.equal(got["count"], ref["count"])
    # A transposed (non-contiguous) tensor is read through a copy; numpy in gives numpy out.
    xt = x.t().contiguous().t()
    assert torch.equal(compiled(xt, k)["count"], ref["count"])
    out = compiled.executable(x.numpy(), k.numpy())
    assert all(isinstance(o, np.ndarray) for o in out)
    with pytest.raises(kiln.InvalidInputError, match=r"input 'k' \(#1\): expected i64\[3,5\]"):
        compiled(x, k.to(torch.int32))
    with pytest.raises(kiln.InvalidInputError, match=r"input 'x' \(#0\).*cannot be exported "
                       r"\(Can't export tensors that require gradient"):
        compiled(x.clone().requires_grad_(), k)


class Unsupported(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.ConvTranspose2d(2, 2, 2)

    def forward(self, x):
        a = torch.cumprod(x, dim=1)
        b = self.up(a)
        c = torch.linalg.inv(b[:, :, :3, :3])
        return c.sum() + torch.relu(a).mean()


def test_every_unsupported_op_listed():
    with pytest.raises(kiln.UnsupportedOpError) as info:
        kiln.compile(Unsupported().eval(), example_inputs=(torch.randn(1, 2, 4, 4),))
    items = info.value.unsupported
    ops = " ".join(op for _, op, _ in items)
    assert "cumprod" in ops and "convolution" in ops and "linalg_inv" in ops, items
    message = str(info.value)
    assert "transposed convolution" in message
    # Each names its node and the line of this file that made it.
    assert all("test_torch.py:" in where for where, _, _ in items), items


class InPlace(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        z = y + 1
        y.add_(5)  # overwrites y after z read it: the translation is still functional
        w = y * 1
        return z, w


def test_in_place_ops(backend):
    x = torch.randn(4)
    compiled = kiln.compile(InPlace().eval(), example_inputs=(x,), backend=backend)
    z, w = compiled(x)
    rz, rw = InPlace()(x)
    assert torch.allclose(z, rz) and torch.allclose(w, rw)


def test_type_error_names_the_fx_node(monkeypatch):
    # An entry of the ATen table that writes a wrong result type: Kiln's parser rejects the
    # line, and the error names the node and the Python line it came from.
    import kiln.aten

    def wrong(cx, x):
        return cx.w.op("tanh", [cx.v(x)], "f32", (99,))

    monkeypatch.setitem(kiln.aten.TABLE, "relu", wrong)
    with pytest.raises(kiln.CompileError, match=r"(?s)ReLU>.kir:2:\d+: error: tanh has type "
                       r"f32\[99\].*from node 'relu' \(test_torch.py:\d+"):
        kiln.compile(torch.nn.ReLU().eval(), example_inputs=(torch.randn(4),))


def test_training_mode_is_refused():
    with pytest.raises(kiln.CompileError, match="training mode"):
        kiln.compile(torch.nn.Linear(2, 2), example_inputs=(torch.randn(1, 2),))
