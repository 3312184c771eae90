"""torch.compile(model, backend="kiln"): Dynamo's graphs compiled by Kiln, eager fallback with
a logged reason, recompiles logged when shapes change. Needs torch >= 2.0."""

import functools
import logging

import pytest

torch = pytest.importorskip("torch", reason="python3-torch is not installed")
if int(torch.__version__.split(".")[0]) < 2:
    pytest.skip(f"torch.compile needs torch >= 2.0; this is torch {torch.__version__}",
                allow_module_level=True)

import kiln  # noqa: E402,F401  (registers the backend)
import kiln.dynamo  # noqa: E402


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x):
        y = torch.relu(self.conv(x)).mean(dim=(2, 3))
        return self.fc(y)


def test_compiles_matches_and_logs_recompiles(caplog, backend):
    torch.manual_seed(0)
    torch._dynamo.reset()
    model = Net().eval()
    # backend="kiln" with the tests' Kiln backend (cpu, or interp in a build without it).
    kiln_on = functools.partial(kiln.dynamo.kiln_backend, backend=backend)
    compiled = torch.compile(model, backend=kiln_on, dynamic=False)
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad(), caplog.at_level(logging.WARNING, logger="kiln.dynamo"):
        # float32 sums in another order: within 1e-4 of the output's scale.
        ref = model(x)
        got = compiled(x)
        # Kiln compiled the graph: nothing fell back to eager.
        assert not [r for r in caplog.records if "runs in eager" in r.message], caplog.text
        assert (got - ref).abs().max() <= 1e-4 * ref.abs().max()
        with caplog.at_level(logging.WARNING, logger="kiln.dynamo"):
            x2 = torch.randn(4, 3, 16, 16)
            got2 = compiled(x2)
        assert (got2 - model(x2)).abs().max() <= 1e-4 * model(x2).abs().max()
    assert any("recompiling" in r.message and "(2, 3, 16, 16)" in r.message for r in caplog.records)


class Cumprod(torch.nn.Module):
    def forward(self, x):
        return torch.cumprod(x, dim=1) + 1


def test_unsupported_graph_falls_back_with_reason(caplog):
    torch._dynamo.reset()
    compiled = torch.compile(Cumprod(), backend="kiln", dynamic=False)
    x = torch.randn(3, 4)
    with caplog.at_level(logging.WARNING, logger="kiln.dynamo"):
        got = compiled(x)
    assert torch.allclose(got, Cumprod()(x))
    falls = [r for r in caplog.records if "runs in eager PyTorch" in r.message]
    assert len(falls) == 1 and "cumprod" in falls[0].message
