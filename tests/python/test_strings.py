"""String tensors through the Python API: numpy text in (str, bytes, str objects), object arrays
of str out, on the interpreter; a compiled backend refuses a model over strings by name."""

import numpy as np
import pytest
from onnx import TensorProto, helper

import kiln


def normalizer(tmp_path, **attrs):
    """A StringNormalizer over x: string[1, 4], its output sized by the data."""
    node = helper.make_node("StringNormalizer", ["x"], ["y"], **attrs)
    graph = helper.make_graph(
        [node], "strings", [helper.make_tensor_value_info("x", TensorProto.STRING, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.STRING, [1, None])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    path = tmp_path / "strings.onnx"
    path.write_bytes(model.SerializeToString())
    return str(path)


def test_text_in_and_out(tmp_path):
    exe = kiln.compile(normalizer(tmp_path, case_change_action="UPPER", stopwords=["monday"]),
                       backend="interp")
    assert exe.inputs[0][:3] == ("x", "str", (1, 4))
    want = np.array([["TUESDAY", "\u00c9T\u00c9", "FRIDAY"]], dtype=object)
    for x in (np.array([["Monday", "tuesday", "\u00e9t\u00e9", "Friday"]]),  # <U7
              np.array([["Monday", "tuesday", "\u00e9t\u00e9", "Friday"]], dtype=object),
              np.array([[b"Monday", b"tuesday", "\u00e9t\u00e9".encode(), b"Friday"]])):
        y = exe(x)
        assert y.dtype == object and y.shape == (1, 3)
        np.testing.assert_array_equal(y, want)


def test_nothing_left_is_one_empty_string(tmp_path):
    exe = kiln.compile(normalizer(tmp_path, stopwords=["a"]), backend="interp")
    y = exe(np.array([["a", "A", "a", "a"]]))
    np.testing.assert_array_equal(y, np.array([[""]], dtype=object))


def test_elements_that_are_not_text_are_named(tmp_path):
    exe = kiln.compile(normalizer(tmp_path), backend="interp")
    with pytest.raises(kiln.InvalidInputError, match="holding a int at element 2"):
        exe(np.array([["a", "b", 3, "d"]], dtype=object))
    with pytest.raises(kiln.InvalidInputError, match=r"expected string\[1,4\]"):
        exe(np.zeros((1, 4), np.float32))


def test_compiled_backends_refuse_strings(tmp_path):
    compiled = [b for b in kiln.backends() if b != "interp"]
    if not compiled:
        pytest.skip("this build has no compiled backend")
    for backend in compiled:
        with pytest.raises(kiln.CompileError, match=f"the {backend} target has no kernels for text"):
            kiln.compile(normalizer(tmp_path), backend=backend)
