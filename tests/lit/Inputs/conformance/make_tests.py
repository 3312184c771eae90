#!/usr/bin/env python3
"""Writes a folder of small ONNX backend tests (model.onnx + test_data_set_*/) whose outcomes
under `kiln conformance` are known, for the lit tests in tests/lit/conformance.

    make_tests.py OUT_DIR [SLOW_DIR]

SLOW_DIR, when given, gets one test that runs far longer than a second (for the time limit).

Expected values are computed here with numpy; the tests that must fail get expected outputs that
are deliberately off by a stated amount.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = [helper.make_opsetid("", 13)]


def write_test(root, name, model, data_sets):
    folder = os.path.join(root, name)
    os.makedirs(folder, exist_ok=True)
    if model is not None:
        onnx.save(model, os.path.join(folder, "model.onnx"))
    for k, (inputs, outputs) in enumerate(data_sets):
        ds = os.path.join(folder, f"test_data_set_{k}")
        os.makedirs(ds, exist_ok=True)
        for i, t in enumerate(inputs):
            with open(os.path.join(ds, f"input_{i}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(t).SerializeToString())
        for i, t in enumerate(outputs):
            with open(os.path.join(ds, f"output_{i}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(t).SerializeToString())


def unary_model(op, dtype=TensorProto.FLOAT, shape=(2, 3), out_dtype=None, domain="", opset=None):
    x = helper.make_tensor_value_info("x", dtype, list(shape))
    y = helper.make_tensor_value_info("y", out_dtype or dtype, list(shape))
    node = helper.make_node(op, ["x"], ["y"], domain=domain)
    graph = helper.make_graph([node], op.lower(), [x], [y])
    return helper.make_model(graph, opset_imports=opset or OPSET)


def add_model(dtype=TensorProto.FLOAT, shape=(2, 3)):
    a = helper.make_tensor_value_info("a", dtype, list(shape))
    b = helper.make_tensor_value_info("b", dtype, list(shape))
    y = helper.make_tensor_value_info("y", dtype, list(shape))
    graph = helper.make_graph([helper.make_node("Add", ["a", "b"], ["y"])], "add", [a, b], [y])
    return helper.make_model(graph, opset_imports=OPSET)


def max_model(dtype):
    a = helper.make_tensor_value_info("a", dtype, [3])
    b = helper.make_tensor_value_info("b", dtype, [3])
    y = helper.make_tensor_value_info("y", dtype, [3])
    graph = helper.make_graph([helper.make_node("Max", ["a", "b"], ["y"])], "max", [a, b], [y])
    return helper.make_model(graph, opset_imports=OPSET)


def dropout_model():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    r = helper.make_tensor_value_info("r", TensorProto.FLOAT, [])
    t = helper.make_tensor_value_info("t", TensorProto.BOOL, [])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])
    node = helper.make_node("Dropout", ["x", "r", "t"], ["y"], seed=0)
    graph = helper.make_graph([node], "dropout", [x, r, t], [y])
    return helper.make_model(graph, opset_imports=OPSET)


def slow_model():
    # Inputs and output are tiny, but the work is a 3000^3 matrix product (2.7e10 multiply-adds):
    # far longer than a one-second time limit on any CPU interpreter.
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [])
    shape = numpy_helper.from_array(np.array([3000, 3000], dtype=np.int64), "shape")
    nodes = [helper.make_node("Expand", ["x", "shape"], ["big"]),
             helper.make_node("MatMul", ["big", "big"], ["prod"]),
             helper.make_node("ReduceSum", ["prod"], ["y"], keepdims=0)]
    graph = helper.make_graph(nodes, "slow", [x], [y], [shape])
    return helper.make_model(graph, opset_imports=OPSET)


def main():
    root = sys.argv[1]
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 3)).astype(np.float32)
    b = rng.standard_normal((2, 3)).astype(np.float32)
    s = a + b
    write_test(root, "test_add_pass", add_model(), [([a, b], [s]), ([b, a], [s])])
    # Within rtol 1e-3: off by 5e-4 relative.
    write_test(root, "test_add_within_tolerance", add_model(), [([a, b], [s * np.float32(1.0005)])])
    # Off by 1 at element [1,2] only.
    off = s.copy()
    off[1, 2] += 1.0
    write_test(root, "test_add_fail", add_model(), [([a, b], [s]), ([a, b], [off])])
    ia = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.int32)
    write_test(root, "test_add_int_fail", add_model(TensorProto.INT32),
               [([ia, ia], [ia * 2 + np.array([[0, 0, 0], [0, 7, 0]], dtype=np.int32)])])
    write_test(root, "test_add_shape_fail", add_model(), [([a, b], [s.reshape(3, 2)])])
    nan = np.array([[np.nan, 1, -np.inf], [np.inf, 0, 2]], dtype=np.float32)
    write_test(root, "test_abs_nan_pass", unary_model("Abs"), [([nan], [np.abs(nan)])])
    write_test(root, "test_unknown_op", unary_model("FooBar", domain="com.example",
               opset=OPSET + [helper.make_opsetid("com.example", 1)]), [([a], [a])])
    strings = np.array([["a", "b", "c"], ["d", "e", "f"]], dtype=object)
    write_test(root, "test_string_input", unary_model("Identity", TensorProto.STRING),
               [([strings], [strings])])
    write_test(root, "test_random_like", unary_model("RandomUniformLike"), [([a], [a])])
    x4 = np.array([1, 2, 3, 4], dtype=np.float32)
    write_test(root, "test_dropout_training", dropout_model(),
               [([x4, np.array(0.5, dtype=np.float32), np.array(True)], [x4])])
    write_test(root, "test_dropout_zero_ratio", dropout_model(),
               [([x4, np.array(0.0, dtype=np.float32), np.array(True)], [x4])])
    write_test(root, "test_no_model", None, [([a], [a])])
    # The model takes f32; the data gives f64: the interpreter refuses the input.
    write_test(root, "test_wrong_input_dtype", unary_model("Abs"),
               [([a.astype(np.float64)], [np.abs(a)])])
    # uint64 above 2^63 compares unsigned; the wrong variant expects 5 where 2^64 - 1 is right.
    ua = np.array([2**64 - 1, 1, 2**63], dtype=np.uint64)
    ub = np.array([5, 2**63 + 1, 7], dtype=np.uint64)
    write_test(root, "test_max_uint64_ok", max_model(TensorProto.UINT64),
               [([ua, ub], [np.maximum(ua, ub)])])
    write_test(root, "test_max_uint64_wrong", max_model(TensorProto.UINT64),
               [([ua, ub], [np.array([5, 2**63 + 1, 2**63], dtype=np.uint64)])])
    # Older ONNX test data stores bfloat16 tensors as UINT16 bit patterns: -1.5, 2, -0 in bf16.
    bits = np.array([[0xBFC0, 0x4000, 0x8000]], dtype=np.uint16)
    write_test(root, "test_abs_bf16_as_uint16", unary_model("Abs", TensorProto.BFLOAT16, (1, 3)),
               [([bits], [bits & np.uint16(0x7FFF)])])
    if len(sys.argv) > 2:
        write_test(sys.argv[2], "test_slow", slow_model(),
                   [([np.ones((1, 1), np.float32)], [np.array(3000.0 ** 3, np.float32)])])


if __name__ == "__main__":
    main()
