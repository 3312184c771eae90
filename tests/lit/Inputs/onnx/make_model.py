"""Writes small ONNX models for the importer's lit tests: make_model.py NAME OUT.onnx.

Each model is built with onnx.helper at test time, so the tests need no binary files."""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT


def model(nodes, inputs, outputs, inits=(), opset=13, functions=(), extra_opsets=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in extra_opsets]
    return helper.make_model(graph, opset_imports=opsets, functions=list(functions))


def conv_relu():
    # Conv (SAME_UPPER, stride 2) + bias, then Relu; batch is the symbol "batch".
    w = numpy_helper.from_array(np.arange(2 * 3 * 3 * 3, dtype=np.float32).reshape(2, 3, 3, 3), "conv.weight")
    b = numpy_helper.from_array(np.array([0.5, -0.5], dtype=np.float32), "conv.bias")
    nodes = [
        helper.make_node("Conv", ["x", "conv.weight", "conv.bias"], ["c"], name="conv1",
                         auto_pad="SAME_UPPER", strides=[2, 2]),
        helper.make_node("Relu", ["c"], ["y"], name="relu1"),
    ]
    return model(nodes, [helper.make_tensor_value_info("x", F, ["batch", 3, 8, 8])],
                 [helper.make_tensor_value_info("y", F, None)], [w, b])


def shape_subgraph():
    # y = Reshape(x, Concat(Shape(x)[0:1], [-1])): the shape is computed from a symbolic dim.
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Constant", [], ["idx"], value=numpy_helper.from_array(np.array([0], dtype=np.int64))),
        helper.make_node("Gather", ["s", "idx"], ["n"], axis=0),
        helper.make_node("Constant", [], ["m1"], value=numpy_helper.from_array(np.array([-1], dtype=np.int64))),
        helper.make_node("Concat", ["n", "m1"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["y"]),
    ]
    return model(nodes, [helper.make_tensor_value_info("x", F, ["N", 4, 5])],
                 [helper.make_tensor_value_info("y", F, None)])


def broadcast_matmul():
    # MatMul with batch broadcasting [N,1,2,3] x [4,3,5], then Add of a [5] bias.
    b = numpy_helper.from_array(np.ones(5, dtype=np.float32), "bias")
    nodes = [helper.make_node("MatMul", ["a", "b"], ["p"]), helper.make_node("Add", ["p", "bias"], ["y"])]
    return model(nodes, [helper.make_tensor_value_info("a", F, [2, 1, 2, 3]),
                         helper.make_tensor_value_info("b", F, [4, 3, 5])],
                 [helper.make_tensor_value_info("y", F, None)], [b])


def softmax_opset11():
    nodes = [helper.make_node("Softmax", ["x"], ["y"], axis=1)]
    return model(nodes, [helper.make_tensor_value_info("x", F, [2, 3, 4])],
                 [helper.make_tensor_value_info("y", F, None)], opset=11)


def unsupported():
    # Two problems: an op Kiln does not map, and an unknown domain; both are named.
    nodes = [
        helper.make_node("Det", ["x"], ["d"], name="det"),
        helper.make_node("Frob", ["x"], ["f"], name="", domain="com.example"),
        helper.make_node("Add", ["d", "d"], ["y"], name="after"),
    ]
    return model(nodes, [helper.make_tensor_value_info("x", F, [3, 3])],
                 [helper.make_tensor_value_info("y", F, None), helper.make_tensor_value_info("f", F, None)],
                 extra_opsets=[("com.example", 1)])


def cycle():
    nodes = [helper.make_node("Neg", ["b"], ["a"], name="n1"), helper.make_node("Neg", ["a"], ["b"], name="n2")]
    return model(nodes, [helper.make_tensor_value_info("x", F, [2])], [helper.make_tensor_value_info("b", F, None)])


def bad_broadcast():
    nodes = [helper.make_node("Add", ["x", "z"], ["y"], name="add_xz")]
    return model(nodes, [helper.make_tensor_value_info("x", F, ["N", 3]), helper.make_tensor_value_info("z", F, ["M", 3])],
                 [helper.make_tensor_value_info("y", F, None)])


def short_data():
    t = TensorProto(name="w", data_type=F, dims=[4], float_data=[1.0, 2.0])  # 2 values for 4
    nodes = [helper.make_node("Identity", ["w"], ["y"])]
    return model(nodes, [], [helper.make_tensor_value_info("y", F, None)], [t])


def aliased_outputs():
    # Outputs whose values are a graph input or another output: y = Identity(x), m = Max(x) (one
    # input), r = Relu(x) and r2 = Identity(r) (one value, two names), and x itself.
    nodes = [
        helper.make_node("Identity", ["x"], ["y"]),
        helper.make_node("Max", ["x"], ["m"]),
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Identity", ["r"], ["r2"]),
    ]
    outs = [helper.make_tensor_value_info(n, F, None) for n in ["y", "m", "r", "r2", "x"]]
    return model(nodes, [helper.make_tensor_value_info("x", F, [2, 3])], outs)


def reshape_by_input():
    # y = Reshape(data, shape): the importer needs the value of the graph input `shape`.
    nodes = [helper.make_node("Reshape", ["data", "shape"], ["y"], name="reshape")]
    return model(nodes, [helper.make_tensor_value_info("data", F, [2, 3]),
                         helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
                 [helper.make_tensor_value_info("y", F, None)])


def reshape_by_dim_arithmetic():
    # y = Reshape(x, [(N + 1 - 1) * 3, 1]) for x: [N, 3]: arithmetic on the named dim N that is
    # no product of dims (N + 1), which imports once N has a size.
    i64 = lambda name, v: numpy_helper.from_array(np.array(v, dtype=np.int64), name)
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Add", ["n", "one"], ["n_plus_1"]),
        helper.make_node("Sub", ["n_plus_1", "one"], ["n_again"]),
        helper.make_node("Mul", ["n_again", "three"], ["n3"]),
        helper.make_node("Concat", ["n3", "one"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["y"]),
    ]
    return model(nodes, [helper.make_tensor_value_info("x", F, ["N", 3])],
                 [helper.make_tensor_value_info("y", F, None)],
                 [i64("zero", [0]), i64("three", [3]), i64("one", [1])])


def nonzero_compress():
    # torch.nonzero's export (NonZero, Transpose), Compress by a run-time condition, and a
    # ReduceSum of NonZero's result, which would read its padding.
    nodes = [
        helper.make_node("NonZero", ["x"], ["nz"], name="nonzero"),
        helper.make_node("Transpose", ["nz"], ["rows"], perm=[1, 0], name="transpose"),
        helper.make_node("Compress", ["x", "keep"], ["kept"], axis=1, name="compress"),
    ]
    return model(nodes, [helper.make_tensor_value_info("x", F, [2, 3]),
                         helper.make_tensor_value_info("keep", TensorProto.BOOL, [3])],
                 [helper.make_tensor_value_info("rows", TensorProto.INT64, None),
                  helper.make_tensor_value_info("kept", F, None)])


def mask_gather():
    # torch's x[mask] for a boolean mask of x's first two dims (NonZero, Transpose, GatherND),
    # with Shape and Size of the result (its sizes at run time).
    nodes = [
        helper.make_node("NonZero", ["mask"], ["nz"], name="nonzero"),
        helper.make_node("Transpose", ["nz"], ["idx"], perm=[1, 0], name="transpose"),
        helper.make_node("GatherND", ["x", "idx"], ["picked"], name="gather"),
        helper.make_node("Shape", ["picked"], ["shape"], name="shape"),
        helper.make_node("Size", ["picked"], ["size"], name="size"),
    ]
    return model(nodes, [helper.make_tensor_value_info("x", F, [2, 3, 4]),
                         helper.make_tensor_value_info("mask", TensorProto.BOOL, [2, 3])],
                 [helper.make_tensor_value_info("picked", F, None),
                  helper.make_tensor_value_info("shape", TensorProto.INT64, None),
                  helper.make_tensor_value_info("size", TensorProto.INT64, None)])


def unique_nms():
    # Unique along an axis and NonMaxSuppression of run-time inputs (the thresholds and the
    # per-class maximum too).
    i64, f32 = TensorProto.INT64, TensorProto.FLOAT
    nodes = [
        helper.make_node("Unique", ["u"], ["uy", "ui", "uinv", "uc"], axis=0, sorted=1,
                         name="unique"),
        helper.make_node("NonMaxSuppression", ["boxes", "scores", "max", "iou", "score"],
                         ["selected"], name="nms"),
    ]
    return model(nodes, [helper.make_tensor_value_info("u", f32, [5, 2]),
                         helper.make_tensor_value_info("boxes", f32, [1, 6, 4]),
                         helper.make_tensor_value_info("scores", f32, [1, 1, 6]),
                         helper.make_tensor_value_info("max", i64, [1]),
                         helper.make_tensor_value_info("iou", f32, [1]),
                         helper.make_tensor_value_info("score", f32, [1])],
                 [helper.make_tensor_value_info(n, t, None) for n, t in
                  [("uy", f32), ("ui", i64), ("uinv", i64), ("uc", i64), ("selected", i64)]])


def identity_resize():
    # A Resize to the same shape with cubic attributes set (torchvision's FPN on feature maps
    # of equal stride): it imports as the identity, every attribute read.
    sizes = numpy_helper.from_array(np.array([1, 2, 4, 4], np.int64), "sizes")
    nodes = [helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="nearest",
                              cubic_coeff_a=-0.75, exclude_outside=0,
                              coordinate_transformation_mode="asymmetric", nearest_mode="floor")]
    return model(nodes, [helper.make_tensor_value_info("x", F, [1, 2, 4, 4])],
                 [helper.make_tensor_value_info("y", F, None)], [sizes])


def nonzero_sum():
    nodes = [helper.make_node("NonZero", ["x"], ["nz"], name="nonzero"),
             helper.make_node("ReduceSum", ["nz"], ["s"], keepdims=0, name="sum")]
    return model(nodes, [helper.make_tensor_value_info("x", F, [2, 3])],
                 [helper.make_tensor_value_info("s", TensorProto.INT64, None)])


MODELS = {f.__name__: f for f in [conv_relu, shape_subgraph, broadcast_matmul, softmax_opset11,
                                  unsupported, cycle, bad_broadcast, short_data, aliased_outputs,
                                  nonzero_compress, nonzero_sum, identity_resize, mask_gather,
                                  unique_nms,
                                  reshape_by_input, reshape_by_dim_arithmetic]}


def recurrent(op, hidden, gates, **attrs):
    # One LSTM or GRU over x [5, 2, 3] with seeded random initializers W, R, B (2 directions when
    # direction is bidirectional); the outputs Y and Y_h.
    dirs = 2 if attrs.get("direction") == "bidirectional" else 1
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)
             for name, shape in [("W", (dirs, gates * hidden, 3)), ("R", (dirs, gates * hidden, hidden)),
                                 ("B", (dirs, 2 * gates * hidden))]]
    nodes = [helper.make_node(op, ["x", "W", "R", "B"], ["y", "y_h"], name="rnn",
                              hidden_size=hidden, **attrs)]
    return model(nodes, [helper.make_tensor_value_info("x", F, [5, 2, 3])],
                 [helper.make_tensor_value_info("y", F, None), helper.make_tensor_value_info("y_h", F, None)],
                 inits)


MODELS.update({
    "lstm_bidirectional": lambda: recurrent("LSTM", 4, 4, direction="bidirectional"),
    "gru_linear_before_reset": lambda: recurrent("GRU", 4, 3, linear_before_reset=1),
    "gru_clip": lambda: recurrent("GRU", 4, 3, clip=2.0),
})


def external_link(out):
    # OUT's folder gets model.onnx, whose initializer w (f32[2]) is external data at link.bin,
    # a symbolic link to a file outside the folder (OUT's folder/../elsewhere/secret.bin).
    folder = os.path.dirname(os.path.abspath(out))
    elsewhere = os.path.join(os.path.dirname(folder), "elsewhere")
    os.makedirs(elsewhere, exist_ok=True)
    secret = os.path.join(elsewhere, "secret.bin")
    np.array([1.5, -2.0], np.float32).tofile(secret)
    link = os.path.join(folder, "link.bin")
    if os.path.lexists(link):
        os.remove(link)
    os.symlink(secret, link)
    w = TensorProto(name="w", data_type=F, dims=[2], data_location=TensorProto.EXTERNAL)
    for key, value in [("location", "link.bin"), ("offset", "0"), ("length", "8")]:
        w.external_data.add(key=key, value=value)
    nodes = [helper.make_node("Identity", ["w"], ["y"])]
    onnx.save(model(nodes, [], [helper.make_tensor_value_info("y", F, None)], [w]), out)


if __name__ == "__main__":
    name, out = sys.argv[1], sys.argv[2]
    if name == "external_link":
        external_link(out)
    elif name == "corrupt":
        with open(out, "wb") as f:
            f.write(b"\x0a\xff\xff\xff\xff\x0f not a model")
    else:
        onnx.save(MODELS[name](), out)
