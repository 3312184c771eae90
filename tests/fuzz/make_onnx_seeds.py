#!/usr/bin/env python3
"""Writes the tiny ONNX seed models of the importer's fuzz corpus (tests/fuzz/corpus/onnx).

    /usr/bin/python3 tests/fuzz/make_onnx_seeds.py [OUT_DIR]

Each model is a few nodes built with onnx.helper; together they cover initializers (raw and typed
data), broadcasting, shape arithmetic, attributes of several kinds and a symbolic dimension.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def save(model, out_dir, name):
    onnx.checker.check_model(model)
    with open(os.path.join(out_dir, name), "wb") as f:
        f.write(model.SerializeToString())


def add_relu():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])
    b = numpy_helper.from_array(np.array([1, -2, 3], dtype=np.float32), "b")
    nodes = [helper.make_node("Add", ["x", "b"], ["t"], name="add"),
             helper.make_node("Relu", ["t"], ["y"], name="relu")]
    graph = helper.make_graph(nodes, "add_relu", [x], [y], [b])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def conv_pool():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 1, 1])
    w = helper.make_tensor("w", TensorProto.FLOAT, [2, 1, 2, 2], [1, 0, 0, 1, 0.5, 0.5, 0.5, 0.5])
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[0, 0, 0, 0], strides=[2, 2]),
             helper.make_node("MaxPool", ["c"], ["y"], kernel_shape=[2, 2])]
    graph = helper.make_graph(nodes, "conv_pool", [x], [y], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])


def reshape_shape():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [6, 4])
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "i"], ["last"], axis=0),
             helper.make_node("Concat", ["m1", "last"], ["shape"], axis=0),
             helper.make_node("Reshape", ["x", "shape"], ["y"])]
    inits = [numpy_helper.from_array(np.array([2], dtype=np.int64), "i"),
             numpy_helper.from_array(np.array([-1], dtype=np.int64), "m1")]
    graph = helper.make_graph(nodes, "reshape_shape", [x], [y], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


def softmax_matmul():
    a = helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 4])
    b = helper.make_tensor_value_info("b", TensorProto.FLOAT, [4, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    nodes = [helper.make_node("MatMul", ["a", "b"], ["m"]),
             helper.make_node("Softmax", ["m"], ["y"], axis=-1)]
    graph = helper.make_graph(nodes, "softmax_matmul", [a, b], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def cast_where():
    x = helper.make_tensor_value_info("x", TensorProto.INT32, [3])
    y = helper.make_tensor_value_info("y", TensorProto.INT64, [3])
    nodes = [helper.make_node("Cast", ["x"], ["xf"], to=TensorProto.INT64),
             helper.make_node("Constant", [], ["z"],
                              value=helper.make_tensor("zv", TensorProto.INT64, [], [0])),
             helper.make_node("Less", ["xf", "z"], ["neg"]),
             helper.make_node("Neg", ["xf"], ["n"]),
             helper.make_node("Where", ["neg", "n", "xf"], ["y"])]
    graph = helper.make_graph(nodes, "cast_where", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "corpus", "onnx")
    os.makedirs(out_dir, exist_ok=True)
    for make in (add_relu, conv_pool, reshape_shape, softmax_matmul, cast_where):
        save(make(), out_dir, make.__name__ + ".onnx")


if __name__ == "__main__":
    main()
