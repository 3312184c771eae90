#!/usr/bin/python3
"""Writes mlp.kir: a 2-layer perceptron (16 -> 32 -> relu -> 10, then softmax) whose weights are
random (numpy seed 0) and stored out of line as `data` entries. Run from anywhere:
    /usr/bin/python3 examples/mlp/make_mlp.py
The output is deterministic, so re-running it reproduces the committed file byte for byte."""
import os

import numpy as np

IN, HIDDEN, OUT = 16, 32, 10


def weights():
    rng = np.random.default_rng(0)
    return {
        "w1": (rng.standard_normal((IN, HIDDEN)) * np.sqrt(2.0 / IN)).astype(np.float32),
        "b1": (rng.standard_normal(HIDDEN) * 0.1).astype(np.float32),
        "w2": (rng.standard_normal((HIDDEN, OUT)) * np.sqrt(1.0 / HIDDEN)).astype(np.float32),
        "b2": (rng.standard_normal(OUT) * 0.1).astype(np.float32),
    }


PROGRAM = f"""\
// A 2-layer perceptron: probs = softmax(relu(x w1 + b1) w2 + b2), for a batch of N rows.
// Written by make_mlp.py (random weights, numpy seed 0); the weights are the data entries below.
// Run it: kiln run examples/mlp/mlp.kir --random-inputs --dim N=4
func @main(%x: f32[N,{IN}]) -> (f32[N,{OUT}], f32[N,{OUT}]) {{
  %w1 = f32[{IN},{HIDDEN}] constant() {{value = @w1}}
  %b1 = f32[{HIDDEN}] constant() {{value = @b1}}
  %w2 = f32[{HIDDEN},{OUT}] constant() {{value = @w2}}
  %b2 = f32[{OUT}] constant() {{value = @b2}}
  %zero = f32[] constant() {{value = [0.0]}}
  %xw1 = f32[N,{HIDDEN}] dot_general(%x, %w1) {{lhs_contracting = [1], rhs_contracting = [0]}}
  %b1_rows = f32[N,{HIDDEN}] broadcast_in_dim(%b1) {{dims = [1]}}
  %pre = f32[N,{HIDDEN}] add(%xw1, %b1_rows)
  %zeros = f32[N,{HIDDEN}] broadcast_in_dim(%zero) {{dims = []}}
  %hidden = f32[N,{HIDDEN}] max(%pre, %zeros)
  %hw2 = f32[N,{OUT}] dot_general(%hidden, %w2) {{lhs_contracting = [1], rhs_contracting = [0]}}
  %b2_rows = f32[N,{OUT}] broadcast_in_dim(%b2) {{dims = [1]}}
  %logits = f32[N,{OUT}] add(%hw2, %b2_rows)
  %probs = f32[N,{OUT}] softmax(%logits) {{axis = 1}}
  return %logits, %probs
}}
"""


def main():
    text = PROGRAM
    for name, array in weights().items():
        dims = ",".join(str(d) for d in array.shape)
        text += f"\ndata @{name} = f32[{dims}] 0x{array.astype('<f4').tobytes().hex()}"
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mlp.kir")
    with open(path, "w") as f:
        f.write(text + "\n")


if __name__ == "__main__":
    main()
