"""Runs every ONNX backend test of a folder through `kiln run` and through ONNX Runtime (its CPU
execution provider, onnxruntime-node), and lists the tests that ONNX Runtime passes and Kiln
does not. Both are checked against the test data's expected outputs with the same comparison as
run_node_tests.py; every test counts, in scope or not.

    /usr/bin/python3 tests/conformance/compare_ort.py --kiln build/bin/kiln \\
        [--data /usr/share/libonnx-testdata/data/simple] [--backend interp] [--node-modules DIR]

onnxruntime-node comes from bench/setup.sh (bench/node_modules). Exits 1 when ONNX Runtime
passes a test that Kiln fails.
"""
import argparse
import base64
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_node_tests import array, compare, run_test  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def tensor_json(a):
    if a.dtype.kind == "U":
        return {"type": "string", "dims": list(a.shape), "strings": [str(x) for x in a.ravel()]}
    name = "bool" if a.dtype == np.bool_ else a.dtype.name
    return {"type": name, "dims": list(a.shape),
            "b64": base64.b64encode(np.ascontiguousarray(a).tobytes()).decode()}


def tensor_array(t):
    if t["type"] == "string":
        return np.array(t["strings"], dtype=str).reshape(t["dims"])
    dtype = np.bool_ if t["type"] == "bool" else np.dtype(t["type"])
    return np.frombuffer(base64.b64decode(t["b64"]), dtype=dtype).reshape(t["dims"])


def run_ort(test_dir, node_modules, timeout):
    """(passed, reason) for one test through onnxruntime-node."""
    model_path = os.path.join(test_dir, "model.onnx")
    data = os.path.join(test_dir, "test_data_set_0")
    try:
        model = onnx.load(model_path, load_external_data=False)
    except Exception as e:  # a model ONNX itself cannot read
        return False, f"{type(e).__name__}: {e}"
    inits = {t.name for t in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in inits]
    outputs = list(model.graph.output)
    with tempfile.TemporaryDirectory(prefix="kiln_ort_") as tmp:
        feeds = {vi.name: tensor_json(array(os.path.join(data, f"input_{i}.pb"), vi))
                 for i, vi in enumerate(inputs)}
        with open(os.path.join(tmp, "in.json"), "w") as f:
            json.dump(feeds, f)
        env = dict(os.environ, NODE_PATH=node_modules)
        try:
            r = subprocess.run(["node", os.path.join(HERE, "ort_run.js"), model_path,
                                os.path.join(tmp, "in.json"), os.path.join(tmp, "out.json")],
                               capture_output=True, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            return False, f"timed out after {timeout} s"
        if r.returncode != 0:
            return False, (r.stderr.strip().splitlines() or ["failed"])[-1]
        with open(os.path.join(tmp, "out.json")) as f:
            got = json.load(f)
    for i, o in enumerate(outputs):
        why = compare(tensor_array(got[i]), array(os.path.join(data, f"output_{i}.pb"), o))
        if why:
            return False, f"output {i} '{o.name}': {why}"
    return True, ""


def guarded(run, *args):
    """run(*args), or (False, why) when the test data itself cannot be read (a sequence or an
    optional input, which numpy_helper cannot convert)."""
    try:
        return run(*args)
    except Exception as e:  # noqa: BLE001 - any failure is this test's, reported with it
        return False, f"{type(e).__name__}: {e}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kiln", default="build/bin/kiln")
    ap.add_argument("--backend", default="interp")
    ap.add_argument("--data", default="/usr/share/libonnx-testdata/data/simple")
    ap.add_argument("--node-modules", default=os.path.join(HERE, "..", "..", "bench", "node_modules"))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=60)
    a = ap.parse_args()
    names = sorted(n for n in os.listdir(a.data)
                   if os.path.exists(os.path.join(a.data, n, "test_data_set_0")))
    node_modules = os.path.abspath(a.node_modules)
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        kiln = dict(zip(names, pool.map(
            lambda n: guarded(run_test, a.kiln, a.backend, os.path.join(a.data, n), a.timeout),
            names)))
        ort = dict(zip(names, pool.map(
            lambda n: guarded(run_ort, os.path.join(a.data, n), node_modules, a.timeout),
            names)))
    print(f"tests: {len(names)}")
    print(f"kiln run passes:     {sum(kiln[n][0] for n in names)}")
    print(f"onnxruntime passes:  {sum(ort[n][0] for n in names)}")
    missing = [n for n in names if ort[n][0] and not kiln[n][0]]
    for n in names:
        if kiln[n][0] != ort[n][0]:
            who, why = ("onnxruntime", kiln[n][1]) if ort[n][0] else ("kiln", ort[n][1])
            print(f"  passes through {who} only: {n}: {why}")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
