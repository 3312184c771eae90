"""An ONNX model from Python: written with onnx.helper, compiled by Kiln, run on numpy arrays.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/onnx_model.py
"""

import numpy as np
from onnx import TensorProto, helper

import kiln


def make_model():
    """y = softmax(x @ w + b) over a symbolic batch N."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((16, 4)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["xw"]),
         helper.make_node("Add", ["xw", "b"], ["logits"]),
         helper.make_node("Softmax", ["logits"], ["y"], axis=1)],
        "classifier",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor("w", TensorProto.FLOAT, w.shape, w.ravel()),
         helper.make_tensor("b", TensorProto.FLOAT, b.shape, b)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), w, b


def main():
    model, w, b = make_model()
    exe = kiln.compile(model.SerializeToString(), dims={"N": 8})
    print("inputs: ", exe.inputs)
    print("outputs:", exe.outputs)
    x = np.random.default_rng(1).standard_normal((8, 16)).astype(np.float32)
    (y,) = exe.run(None, {"x": x})              # as with onnxruntime.InferenceSession.run
    logits = x @ w + b
    ref = np.exp(logits - logits.max(1, keepdims=True))
    ref /= ref.sum(1, keepdims=True)
    print("max difference from numpy:", float(np.abs(y - ref).max()))
    print(exe.explain()["text"])


if __name__ == "__main__":
    main()
