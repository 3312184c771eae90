"""Guards and recompiles: an executable compiled for batch 2 of a model whose batch is an ONNX
dim_param runs other batches by compiling again (once per size, one line on stderr), also from
several threads at once; recompile=False makes that a RunError naming the dim and both sizes."""

import threading

import numpy as np
import pytest

import kiln

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

W = (np.arange(12, dtype=np.float32).reshape(4, 3) / 10 - 0.5)
B = np.array([0.25, -0.5, 1.0], dtype=np.float32)


def model_bytes():
    """y = relu(x @ W + B) with x of shape (batch, 4): batch is the symbolic dim."""
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["m"]),
        helper.make_node("Add", ["m", "b"], ["a"]),
        helper.make_node("Relu", ["a"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
        [numpy_helper.from_array(W, "w"), numpy_helper.from_array(B, "b")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m.SerializeToString()


def expected(x):
    return np.maximum(x.astype(np.float64) @ W + B, 0)


@pytest.fixture
def model_path(tmp_path):
    path = tmp_path / "dyn.onnx"
    path.write_bytes(model_bytes())
    return path


def x_of(n, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, (n, 4)).astype(np.float32)


def test_other_batch_recompiles_once(model_path, backend, capfd):
    exe = kiln.compile(model_path, backend=backend, dims={"batch": 2})
    assert exe.guards == [{"symbol": "batch", "value": 2, "checks": [("x", 0)]}]
    assert exe.explain()["guards"] == exe.guards
    for n in (2, 5, 2, 5, 7):
        x = x_of(n, n)
        np.testing.assert_allclose(exe(x), expected(x), rtol=1e-5, atol=1e-6)
    assert exe.recompiles == 2
    assert sorted(s["batch"] for s in exe.specializations) == [5, 7]
    err = capfd.readouterr().err
    assert err.count("kiln: recompiling") == 2, err
    assert f"kiln: recompiling {model_path}: dim batch=5 (compiled for batch=2)" in err
    assert exe.inputs[0][2] == (2, 4)  # what it was compiled for first


def test_a_range_compiles_once(model_path, backend, capfd):
    exe = kiln.compile(model_path, backend=backend, dims={"batch": (1, 8)})
    assert exe.guards == [{"symbol": "batch", "value": -1, "range": (1, 8),
                           "checks": [("x", 0)]}]
    for n in (8, 1, 5, 1):
        x = x_of(n, n)
        np.testing.assert_allclose(exe(x), expected(x), rtol=1e-5, atol=1e-6)
    assert exe.recompiles == 0
    x = x_of(9)
    np.testing.assert_allclose(exe(x), expected(x), rtol=1e-5, atol=1e-6)
    assert exe.recompiles == 1
    assert "dim batch=9 (compiled for batch=1..8)" in capfd.readouterr().err
    with pytest.raises(ValueError, match=r"a range is \(lo, hi\)"):
        kiln.compile(model_path, backend=backend, dims={"batch": (1, 2, 3)})
    with pytest.raises(ValueError, match=r"the range \(4, 2\) is empty"):
        kiln.compile(model_path, backend=backend, dims={"batch": (4, 2)})


def test_recompile_false_is_an_error(model_path, backend):
    exe = kiln.compile(model_path, backend=backend, dims={"batch": 2}, recompile=False)
    with pytest.raises(kiln.RunError,
                       match=r"input 0 \('x'\) dim 0: batch is 6, but .*dyn.onnx was compiled for "
                             r"batch=2, and recompiling is off"):
        exe(x_of(6))
    with pytest.raises(kiln.InvalidInputError, match=r"expected f32\[batch,4\]"):
        exe(np.zeros((2, 5), np.float32))  # a static dim: no recompile either way
    assert exe.recompiles == 0


def test_onnx_bytes_and_kir_recompile(model_path, backend, tmp_path):
    exe = kiln.compile(model_bytes(), backend=backend, dims={"batch": 1})
    x = x_of(3)
    np.testing.assert_allclose(exe(x), expected(x), rtol=1e-5, atol=1e-6)
    kir = ("func @main(%x: f32[N,4]) -> (f32[N,4]) {\n"
           "  %y = f32[N,4] tanh(%x)\n"
           "  return %y\n}\n")
    exe = kiln.compile_kir(kir, backend=backend, dims={"N": 2})
    x = x_of(9)
    np.testing.assert_allclose(exe(x), np.tanh(x), rtol=1e-6, atol=1e-6)
    assert exe.recompiles == 1


def test_threads_recompile_safely(model_path, backend):
    exe = kiln.compile(model_path, backend=backend, dims={"batch": 1}, threads=1)
    errors = []

    def worker(seed):
        try:
            for k in range(20):
                n = 1 + (seed + k) % 4
                x = x_of(n, seed * 100 + k)
                np.testing.assert_allclose(exe(x), expected(x), rtol=1e-5, atol=1e-6)
        except Exception as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    assert exe.recompiles == 3  # batches 2, 3 and 4, each once


def test_pow2_buckets_compile_once_each(model_path, backend, capfd):
    exe = kiln.compile(model_path, backend=backend, dims={"batch": (1, 16, "pow2")})
    assert exe.guards[0]["range"] == (1, 16, "pow2")
    for n in (5, 7, 1, 6):
        x = x_of(n, n)
        np.testing.assert_allclose(exe(x), expected(x), rtol=1e-5, atol=1e-6)
    err = capfd.readouterr().err
    assert err.count("kiln: compiling") == 2, err  # buckets 5..8 and 1
    assert "for batch=5..8, the bucket of batch=5 in batch=1..16:pow2" in err
    assert "for batch=1, the bucket of batch=1 in batch=1..16:pow2" in err
    assert exe.recompiles == 0  # a bucket is within the range
    with pytest.raises(ValueError, match=r"\(lo, hi, 'pow2'\)"):
        kiln.compile(model_path, backend=backend, dims={"batch": (1, 16, "pow3")})
