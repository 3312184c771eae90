#!/usr/bin/env python3
"""Checks that `kiln explain` plans the memory `kiln run` uses: the arena line ("arena 3.06 MiB
(liveness lower bound ...)") of `kiln explain` (with the program, and with --no-code: the
driver stopped after the schedule) must equal the one `kiln run` reports for its buffers. Kernels
the planner does not see (mobilenet_v2's inverted-residual blocks were once matched after
lowering) would make them differ.

    check_memory.py --kiln BUILD/bin/kiln --model BUILD/models/mobilenet_v2/model.onnx

Exit status: 0 equal, 1 different or a kiln failure, 77 when the model is missing.
"""
import argparse
import os
import re
import subprocess
import sys

ARENA = re.compile(r"arena [0-9.]+ [KMG]?i?B \(liveness lower bound [^)]*\)")


def arena(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        print(f"check_memory.py: {' '.join(cmd)} failed:\n{p.stdout}{p.stderr}")
        return None
    found = ARENA.findall(p.stdout)
    if not found:
        print(f"check_memory.py: no arena line in the output of {' '.join(cmd)}:\n{p.stdout}")
        return None
    return found[0]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kiln", required=True, help="the kiln executable")
    p.add_argument("--model", required=True, help="an ONNX model (tools/export_models.py)")
    p.add_argument("--backend", default="cpu")
    args = p.parse_args()
    if not os.path.exists(args.model):
        print(f"check_memory.py: {args.model} does not exist; skipping")
        return 77
    common = [args.model, "--backend", args.backend]
    got = {
        "explain": arena([args.kiln, "explain"] + common),
        "explain --no-code": arena([args.kiln, "explain", "--no-code"] + common),
        "run": arena([args.kiln, "run"] + common + ["--random-inputs", "--no-cache"]),
    }
    for name, line in got.items():
        print(f"{name}: {line}")
    if None in got.values() or len(set(got.values())) != 1:
        print("check_memory.py: kiln explain and kiln run plan different memory")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
