"""kiln.compile on files and bytes, numpy in and out, inputs by position and by name, errors."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import kiln
from conftest import binary_kir, random_array, write_kir

# Every element type of Kiln with its numpy dtype; bf16 (which numpy lacks) is checked apart.
DTYPES = [("bool", np.bool_), ("i8", np.int8), ("u8", np.uint8), ("i16", np.int16),
          ("u16", np.uint16), ("i32", np.int32), ("u32", np.uint32), ("i64", np.int64),
          ("u64", np.uint64), ("f16", np.float16), ("f32", np.float32), ("f64", np.float64)]


@pytest.mark.parametrize("kiln_dtype,np_dtype", DTYPES, ids=[d for d, _ in DTYPES])
def test_every_dtype_in_and_out(tmp_path, backend, kiln_dtype, np_dtype):
    exe = kiln.compile(write_kir(tmp_path, binary_kir("max", kiln_dtype)), backend=backend)
    rng = np.random.default_rng(1)
    x = random_array(rng, np_dtype, (2, 3))
    y = random_array(rng, np_dtype, (2, 3))
    z = exe(x, y)
    assert isinstance(z, np.ndarray) and z.dtype == np_dtype and z.shape == (2, 3)
    np.testing.assert_array_equal(z, np.maximum(x, y))
    assert exe.inputs[0][:3] == ("x", np.dtype(np_dtype).name, (2, 3))


def test_bf16_through_float32(tmp_path, backend):
    # numpy has no bfloat16: bf16 inputs take float32 arrays (rounded to nearest even) and bf16
    # outputs come back as float32 (exact). Small integers are exact in bf16.
    exe = kiln.compile(write_kir(tmp_path, binary_kir("add", "bf16")), backend=backend)
    x = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
    z = exe(x, x)
    assert z.dtype == np.float32
    np.testing.assert_array_equal(z, 2 * x)


def test_named_positional_and_run(tmp_path, backend):
    exe = kiln.compile(write_kir(tmp_path, binary_kir("sub", "f32")), backend=backend)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = np.ones((2, 3), np.float32)
    expected = x - y
    np.testing.assert_array_equal(exe(x, y), expected)
    np.testing.assert_array_equal(exe(y=y, x=x), expected)
    np.testing.assert_array_equal(exe(x, y=y), expected)
    (z,) = exe.run(None, {"x": x, "y": y})
    np.testing.assert_array_equal(z, expected)
    (z,) = exe.run(["z"], {"x": x, "y": y})
    np.testing.assert_array_equal(z, expected)
    # A strided view is read through a copy; the result is the same.
    big = np.zeros((4, 6), np.float32)
    big[::2, ::2] = x
    np.testing.assert_array_equal(exe(big[::2, ::2], y), expected)
    # So is a big-endian array, through a byte-swapped copy.
    np.testing.assert_array_equal(exe(x.astype(">f4"), y), expected)


def test_input_errors_name_the_input_and_its_type(tmp_path, backend):
    exe = kiln.compile(write_kir(tmp_path, binary_kir("add", "f32")), backend=backend)
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(kiln.InvalidInputError, match=r"input 'y' \(#1\): expected f32\[2,3\] "
                       r"\(float32, shape \(2, 3\)\), got numpy float64 array"):
        exe(x, x.astype(np.float64))
    with pytest.raises(kiln.InvalidInputError, match=r"input 'x' \(#0\): expected f32\[2,3\].*"
                       r"of shape \(3, 2\)"):
        exe(np.zeros((3, 2), np.float32), x)
    with pytest.raises(kiln.InvalidInputError, match=r"no input named 'w' \(inputs: x: f32\[2,3\], "
                       r"y: f32\[2,3\]\)"):
        exe(x, w=x)
    with pytest.raises(kiln.InvalidInputError, match=r"input 'y' \(#1\) is missing: expected f32"):
        exe(x)
    with pytest.raises(kiln.InvalidInputError, match=r"input 'x' given twice"):
        exe(x, x, x=x)
    with pytest.raises(kiln.InvalidInputError, match=r"expected 2 inputs .* got 3 positional"):
        exe(x, x, x)
    with pytest.raises(kiln.InvalidInputError, match=r"input 'x' \(#0\).* got a list"):
        exe([[0.0] * 3] * 2, x)
    with pytest.raises(kiln.InvalidInputError, match=r"no output named 'q'"):
        exe.run(["q"], {"x": x, "y": x})
    assert issubclass(kiln.InvalidInputError, kiln.KilnError)
    assert issubclass(kiln.InvalidInputError, ValueError)


def _onnx_add_relu():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])
    b = helper.make_tensor("b", TensorProto.FLOAT, [4], [1.0, -2.0, 3.0, -4.0])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])
    nodes = [helper.make_node("Add", ["x", "b"], ["s"], name="add"),
             helper.make_node("Relu", ["s"], ["y"], name="relu")]
    graph = helper.make_graph(nodes, "add_relu", [x], [y], [b])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_onnx_path_bytes_dims_and_cache(tmp_path, backend):
    model = _onnx_add_relu()
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    x = np.array([[0, 1, -5, 5], [2, 2, 2, 2], [-1, -1, -1, -1]], np.float32)
    expected = np.maximum(x + np.array([1, -2, 3, -4], np.float32), 0)
    cache = tmp_path / "cache"
    exe = kiln.compile(path, backend=backend, dims={"N": 3}, cache_dir=cache)
    np.testing.assert_array_equal(exe(x), expected)
    assert exe.cache_report.startswith("miss")
    again = kiln.compile(str(path), backend=backend, dims={"N": 3}, cache_dir=cache)
    assert again.cache_report.startswith("hit")
    from_bytes = kiln.compile(model.SerializeToString(), backend=backend, dims={"N": 3})
    np.testing.assert_array_equal(from_bytes(x=x), expected)
    assert exe.outputs[0][:3] == ("y", "float32", (3, 4))


def test_onnx_outputs_keep_their_names_when_they_alias(tmp_path, backend):
    # y = Identity(x) and x itself are the input; r and r2 = Identity(r) are one value.
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [3]) for n in ["y", "r", "r2", "x"]]
    nodes = [helper.make_node("Identity", ["x"], ["y"]), helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Identity", ["r"], ["r2"])]
    model = helper.make_model(helper.make_graph(nodes, "aliases", [x], outs),
                              opset_imports=[helper.make_opsetid("", 13)])
    exe = kiln.compile(model.SerializeToString(), backend=backend)
    assert [o[0] for o in exe.outputs] == ["y", "r", "r2", "x"]
    data = np.array([-1, 2, -3], np.float32)
    r2, y = exe.run(["r2", "y"], {"x": data})
    np.testing.assert_array_equal(y, data)
    np.testing.assert_array_equal(r2, np.maximum(data, 0))


def test_artifact_round_trip_and_dump_dir(tmp_path, backend):
    dumps = tmp_path / "dumps"
    exe = kiln.compile(write_kir(tmp_path, binary_kir("mul", "f32")), backend=backend,
                       dump_dir=dumps)
    assert (dumps / "00-import.kir").exists()
    artifact = tmp_path / "m.kiln"
    assert exe.save(str(artifact)) > 0
    loaded = kiln.compile(artifact)
    x = np.full((2, 3), 3.0, np.float32)
    np.testing.assert_array_equal(loaded(x, x), x * x)


def test_compile_errors(tmp_path, backend):
    bad = write_kir(tmp_path, "func @main(%x: f32[2]) -> (f32[2]) {\n"
                              "  %y = f32[3] tanh(%x)\n  return %y\n}\n")
    with pytest.raises(kiln.CompileError, match=r"model.kir:2:\d+: error: "):
        kiln.compile(bad, backend=backend)
    with pytest.raises(kiln.CompileError, match="no such file"):
        kiln.compile(tmp_path / "absent.onnx")
    with pytest.raises(kiln.CompileError, match="nosuch"):
        kiln.compile(write_kir(tmp_path, binary_kir("add", "f32")), backend="nosuch")
    with pytest.raises(TypeError, match="source must be"):
        kiln.compile(42)


def test_unsupported_onnx_ops_listed(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])
    nodes = [helper.make_node("Foo", ["x"], ["a"], name="first_foo", domain="example"),
             helper.make_node("Bar", ["a"], ["y"], name="then_bar", domain="example")]
    graph = helper.make_graph(nodes, "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                    helper.make_opsetid("example", 1)])
    with pytest.raises(kiln.UnsupportedOpError) as info:
        kiln.compile(model.SerializeToString())
    nodes = [item[0] for item in info.value.unsupported]
    assert any("first_foo" in n for n in nodes) and any("then_bar" in n for n in nodes)


def test_explain_is_data(tmp_path, backend):
    text = ("func @main(%x: f32[4,8], %w: f32[8,16]) -> (f32[4,16]) {\n"
            "  %m = f32[4,16] dot_general(%x, %w) {lhs_contracting = [1], rhs_contracting = [0]}\n"
            "  %t = f32[4,16] tanh(%m)\n"
            "  return %t\n}\n")
    exe = kiln.compile(write_kir(tmp_path, text), backend=backend)
    info = exe.explain()
    ops = [op["op"] for k in info["kernels"] for op in k["ops"]]
    assert "dot_general" in ops and "tanh" in ops
    assert all({"producer", "consumer", "fused", "how", "reason"} <= set(d)
               for d in info["decisions"])
    assert info["memory"]["arena_bytes"] >= 0 and "arena" in info["memory"]["summary"]
    assert "fusion plan for @main" in info["text"]


@pytest.mark.parametrize("precision,tolerance", [("f16", 1e-2), ("bf16", 5e-2)])
def test_precision_keeps_f32_in_and_out(tmp_path, backend, precision, tolerance):
    # Values computed in the low type, the signature f32: within docs/gpu.md's tolerance of the
    # f32 result and not equal to it (the low type rounds 0.1-spaced inputs).
    path = write_kir(tmp_path, binary_kir("mul", "f32"))
    x = np.linspace(0.1, 2.0, 6, dtype=np.float32).reshape(2, 3)
    want = kiln.compile(path, backend=backend)(x, x)
    got = kiln.compile(path, backend=backend, precision=precision)(x, x)
    assert got.dtype == np.float32
    err = np.max(np.abs(got - want)) / np.max(np.abs(want))
    assert 0 < err <= tolerance
    with pytest.raises(ValueError, match="precision must be one of"):
        kiln.compile(path, backend=backend, precision="f8")


def test_outputs_of_run_time_size(backend):
    # ONNX NonZero: its result's second dim is known only when it runs; `outputs` says None
    # there, and a run returns the true size.
    graph = helper.make_graph(
        [helper.make_node("NonZero", ["x"], ["y"])], "nonzero",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    exe = kiln.compile(model.SerializeToString(), backend=backend)
    assert [(name, dtype, shape) for name, dtype, shape, _ in exe.outputs] == \
        [("y", "int64", (2, None))]
    x = np.array([[0, 1, 0], [2, 0, 3]], np.float32)
    np.testing.assert_array_equal(exe(x), np.array(np.nonzero(x)))
