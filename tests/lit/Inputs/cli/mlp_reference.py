"""The MLP of examples/mlp/mlp.kir computed with numpy, from the weights read straight out of the
.kir data entries (hex, little-endian f32), independently of Kiln's parser and interpreter.
    mlp_reference.py MLP.kir X.npy OUT_DIR
checks OUT_DIR/logits.npy and OUT_DIR/probs.npy against it and exits 1 on a mismatch."""
import re
import sys

import numpy as np

kir, x_path, out_dir = sys.argv[1:4]
text = open(kir).read()
w = {}
for name, dims, data in re.findall(r"data @(\w+) = f32\[([\d,]+)\] 0x([0-9a-f]+)", text):
    shape = [int(d) for d in dims.split(",")]
    w[name] = np.frombuffer(bytes.fromhex(data), "<f4").reshape(shape).astype(np.float64)
x = np.load(x_path).astype(np.float64)
hidden = np.maximum(x @ w["w1"] + w["b1"], 0)
logits = hidden @ w["w2"] + w["b2"]
e = np.exp(logits - logits.max(axis=1, keepdims=True))
probs = e / e.sum(axis=1, keepdims=True)
for name, want in (("logits", logits), ("probs", probs)):
    got = np.load(f"{out_dir}/{name}.npy")
    assert got.dtype == np.float32, (name, got.dtype)
    assert got.shape == want.shape, (name, got.shape, want.shape)
    assert np.allclose(got, want, rtol=1e-5, atol=1e-6), (name, np.abs(got - want).max())
print("mlp outputs match numpy")
