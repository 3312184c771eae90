"""One compile of a BERT-style encoder over batch N in 1..32 and sequence S in 1..512 (an ONNX
export with both axes dynamic: attention reshapes to 4*N heads and N*S tokens) serves ten random
(N, S) pairs with no recompile, and matches the reference interpreter and torch."""

import inspect

import numpy as np
import pytest

import kiln
from conftest import needs_cpu

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")

VOCAB, WIDTH, HEADS, POSITIONS = 100, 32, 4, 512


class Encoder(torch.nn.Module):
    """Token, position and segment embeddings, a layer norm and two post-norm encoder layers."""

    def __init__(self):
        super().__init__()
        self.tok = torch.nn.Embedding(VOCAB, WIDTH)
        self.pos = torch.nn.Embedding(POSITIONS, WIDTH)
        self.seg = torch.nn.Embedding(2, WIDTH)
        self.ln = torch.nn.LayerNorm(WIDTH)
        layer = torch.nn.TransformerEncoderLayer(WIDTH, HEADS, 2 * WIDTH, dropout=0.0,
                                                 activation="gelu", batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, num_layers=2,
                                                   enable_nested_tensor=False)
        self.register_buffer("positions", torch.arange(POSITIONS).unsqueeze(0))
        self.register_buffer("segments", torch.zeros(1, POSITIONS, dtype=torch.int64))

    def forward(self, ids):
        s = ids.shape[1]
        x = self.tok(ids) + self.pos(self.positions[:, :s]) + self.seg(self.segments[:, :s])
        return self.encoder(self.ln(x))


def sample_pairs(rng):
    """The ranges' corners and eight random (N, S) pairs in N=1..32, S=1..512."""
    return [(1, 1), (32, 512)] + [(int(rng.integers(1, 33)), int(rng.integers(1, 513)))
                                  for _ in range(8)]


def export_encoder(directory):
    """The seeded encoder and its ONNX export with N and S dynamic."""
    torch.manual_seed(0)
    model = Encoder().eval()
    path = directory / "encoder.onnx"
    # torch >= 2.5 defaults to its dynamo exporter, which names the dims itself; the TorchScript
    # one keeps N and S. Grad mode on: under no_grad torch 1.13 takes a fused encoder path with no
    # ONNX export.
    legacy = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    torch.onnx.export(model, (torch.zeros(2, 16, dtype=torch.int64),), str(path),
                      opset_version=17, input_names=["ids"], output_names=["hidden"],
                      dynamic_axes={"ids": {0: "N", 1: "S"}, "hidden": {0: "N", 1: "S"}}, **legacy)
    return model, path


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    return export_encoder(tmp_path_factory.mktemp("encoder"))


@needs_cpu()
def test_one_compile_serves_batch_and_sequence_ranges(exported):
    model, path = exported
    exe = kiln.compile(path, backend="cpu", dims={"N": (1, 32), "S": (1, 512)})
    assert [(g["symbol"], g["range"]) for g in exe.guards] == [("N", (1, 32)), ("S", (1, 512))]
    rng = np.random.default_rng(7)
    for n, s in sample_pairs(rng):
        ids = rng.integers(0, VOCAB, (n, s)).astype(np.int64)
        got = exe(ids)
        assert got.shape == (n, s, WIDTH)
        # Tolerance: f32 sums of 32-64 terms through two layer norms; Kiln's library products
        # and vector reductions add in another order than the interpreter (about 1e-6 apart).
        reference = kiln.compile(path, backend="interp", dims={"N": n, "S": s})
        np.testing.assert_allclose(got, reference(ids), rtol=1e-4, atol=1e-5)
        with torch.no_grad():
            want = model(torch.from_numpy(ids)).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    assert exe.recompiles == 0
