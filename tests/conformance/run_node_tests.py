#!/usr/bin/env python3
"""Runs the ONNX backend node tests through `kiln run`, as a user would, and counts how many
in-scope tests pass against their expected outputs, next to what `kiln conformance` reports.

    /usr/bin/python3 tests/conformance/run_node_tests.py --kiln build/bin/kiln [--backend interp]
        [--data /usr/share/libonnx-testdata/data/node] [--jobs 2] [--report run-vs-conformance.json]

For each test, test_data_set_0's input_<i>.pb become .npy files given to `kiln run MODEL --input
FILE ...` in the order of the graph inputs (positional, so any input name works); the outputs it
writes (`--output-dir`, OUTPUT_NAME.npy) are compared with output_<i>.pb by the conformance
runner's rule: same dtype and shape, integers and bools exact, floats within
1e-7 + 1e-3 * |expected|, NaN equal to NaN. Which tests are in scope, and which pass through the
conformance runner (every data set, inputs bound by the runner itself), comes from
`kiln conformance --report` on the same folder and backend. Needs numpy and onnx.
Exit status: 0 when kiln run passes at least as many in-scope tests as kiln conformance, 1 if not.
"""
import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

RTOL, ATOL = 1e-3, 1e-7


def output_file_names(names):
    """The files `kiln run --output-dir` writes for these output names (tools/kiln/run.cpp)."""
    used, files = set(), []
    for i, name in enumerate(names):
        if name == "" or name.isdigit():
            name = f"output_{i}"
        f = re.sub(r"[^A-Za-z0-9_.-]", "_", name[:200])
        if f == "" or f.startswith("."):
            f = "_" + f
        while f in used:
            f += f"_{i}"
        used.add(f)
        files.append(f + ".npy")
    return files


def array(path, value_info):
    """The tensor in the .pb file at `path` as numpy reads it; a bfloat16 value (which the test
    data stores as its uint16 bits, and numpy lacks) as float32, which is how `kiln run` takes
    and writes bf16 tensors."""
    a = numpy_helper.to_array(onnx.load_tensor(path))
    if value_info.type.tensor_type.elem_type == onnx.TensorProto.BFLOAT16 and a.dtype == np.uint16:
        a = (a.astype(np.uint32) << 16).view(np.float32)
    if a.dtype == object:  # strings (bytes or str objects): numpy's str arrays, as .npy holds them
        text = [x.decode("utf-8") if isinstance(x, bytes) else x for x in a.ravel()]
        a = np.array(text, dtype=str).reshape(a.shape)
    return a


def compare(got, want):
    """'' when `got` matches `want`, else why not."""
    if got.dtype != want.dtype and not (got.dtype.kind == want.dtype.kind == "U"):
        return f"dtype {got.dtype}, expected {want.dtype}"
    if got.shape != want.shape:
        return f"shape {got.shape}, expected {want.shape}"
    if got.dtype.kind in "biuU" or got.dtype == np.bool_:  # exact; str arrays of any width
        bad = np.count_nonzero(got != want)
    else:
        g, w = got.astype(np.float64), want.astype(np.float64)
        with np.errstate(invalid="ignore"):  # inf - inf: equal infinities compare with ==
            near = np.abs(g - w) <= ATOL + RTOL * np.abs(w)
        close = near | (np.isnan(g) & np.isnan(w)) | (g == w)
        bad = np.count_nonzero(~close)
    return f"{bad} elements differ" if bad else ""


def run_test(kiln, backend, test_dir, timeout):
    """(passed, reason) for one test through `kiln run`."""
    try:
        return run_test_data(kiln, backend, test_dir, timeout)
    except (OSError, ValueError, onnx.onnx_cpp2py_export.checker.ValidationError) as e:
        return False, f"{type(e).__name__}: {e}"


def run_test_data(kiln, backend, test_dir, timeout):
    model_path = os.path.join(test_dir, "model.onnx")
    data = os.path.join(test_dir, "test_data_set_0")
    model = onnx.load(model_path, load_external_data=False)
    inits = {t.name for t in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in inits]
    outputs = list(model.graph.output)
    with tempfile.TemporaryDirectory(prefix="kiln_node_") as tmp:
        args = [kiln, "run", model_path, "--backend", backend, "--output-dir", os.path.join(tmp, "out")]
        for i, vi in enumerate(inputs):
            path = os.path.join(tmp, f"input_{i}.npy")
            np.save(path, array(os.path.join(data, f"input_{i}.pb"), vi))
            args += ["--input", path]
        try:
            r = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return False, f"timed out after {timeout} s"
        if r.returncode != 0:
            lines = r.stderr.strip().splitlines() or [f"exit status {r.returncode}"]
            return False, lines[-1]
        for i, f in enumerate(output_file_names([o.name for o in outputs])):
            want = array(os.path.join(data, f"output_{i}.pb"), outputs[i])
            got_path = os.path.join(tmp, "out", f)
            if not os.path.exists(got_path):
                return False, f"output {i} '{outputs[i].name}': kiln run wrote no {f}"
            why = compare(np.load(got_path), want)
            if why:
                return False, f"output {i} '{outputs[i].name}': {why}"
    return True, ""


def conformance(kiln, backend, data, jobs):
    """{test name: (in_scope, passed)} from `kiln conformance --report`."""
    with tempfile.TemporaryDirectory(prefix="kiln_conf_") as tmp:
        report = os.path.join(tmp, "report.json")
        subprocess.run([kiln, "conformance", "--backend", backend, "--jobs", str(jobs),
                        "--report", report, data], check=False, capture_output=True)
        with open(report) as f:
            tests = json.load(f)["tests"]
    return {t["name"]: (t["in_scope"], t["outcome"] == "passed") for t in tests}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kiln", default="build/bin/kiln")
    ap.add_argument("--backend", default="interp")
    ap.add_argument("--data", default="/usr/share/libonnx-testdata/data/node")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=60)
    ap.add_argument("--report", help="write each in-scope test's two outcomes as JSON")
    a = ap.parse_args()
    conf = conformance(a.kiln, a.backend, a.data, a.jobs)
    names = sorted(n for n, (in_scope, _) in conf.items() if in_scope)
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        runs = dict(zip(names, pool.map(
            lambda n: run_test(a.kiln, a.backend, os.path.join(a.data, n), a.timeout), names)))
    conf_passed = sum(conf[n][1] for n in names)
    run_passed = sum(runs[n][0] for n in names)
    print(f"in-scope node tests: {len(names)}")
    print(f"kiln conformance passes: {conf_passed}")
    print(f"kiln run passes:         {run_passed}")
    for n in names:
        if conf[n][1] and not runs[n][0]:
            print(f"  passes in conformance only: {n}: {runs[n][1]}")
        elif runs[n][0] and not conf[n][1]:
            print(f"  passes through kiln run only: {n}")
    if a.report:
        with open(a.report, "w") as f:
            json.dump({n: {"conformance": conf[n][1], "run": runs[n][0], "reason": runs[n][1]}
                       for n in names}, f, indent=1)
    return 0 if run_passed >= conf_passed else 1


if __name__ == "__main__":
    sys.exit(main())
