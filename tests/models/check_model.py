#!/usr/bin/env python3
"""Runs one exported model (tools/export_models.py or bench/zoo.py: input_<i>.npy and
expected_<i>.npy beside model.onnx) with `kiln run` and compares each of Kiln's outputs with
torch's: max |kiln - torch| / max |torch| must be at most --tolerance (default 1e-4).

    check_model.py --kiln BUILD/bin/kiln --model-dir BUILD/models/resnet18 --work-dir DIR

On the cpu backend the model also goes through the compile cache (a fresh --cache-dir in the work
dir: the first run must miss and write the entry, a second run must load it, and both must match),
and with --aot through `kiln compile` and `kiln run MODEL.kiln`. With --kiln-opt, the kernel IR
the compile dumps (before and after the schedule) must read back through `kiln-opt --kernels` as
the same text.

In f16 and bf16 the limit of an output is --tolerance or, where the model folder has
low_precision.json (bench/zoo.py on a GPU), 1.25 times torch's own error in that precision when
that is larger: how far a model's outputs move when its activations are rounded to 8 or 11 bits
is the model's property (deep ResNets in bf16 move 7-15% in torch too), and Kiln rounds at other
points than torch (once per fused kernel), so either may land a little higher; a wrong kernel
still misses by orders of magnitude. Where torch's own output is not finite in that precision
(activations past f16's range) the check is skipped and says so.

Exit status: 0 pass, 1 mismatch or kiln failure, 77 when the model folder is missing (the export
fixture could not run, e.g. without torch) or the precision cannot hold the model.
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kiln", required=True, help="the kiln executable")
    p.add_argument("--model-dir", required=True, help="a folder written by export_models.py")
    p.add_argument("--work-dir", required=True, help="where kiln writes its outputs")
    p.add_argument("--backend", default="interp")
    p.add_argument("--opt-level", type=int, choices=[0, 1], default=1,
                   help="kiln run -O level: 1 runs the default pipeline first, 0 does not")
    p.add_argument("--tolerance", type=float, default=1e-4)
    p.add_argument("--precision", default="f32", choices=["f32", "tf32", "f16", "bf16"],
                   help="kiln run --precision (give a tolerance that suits it)")
    p.add_argument("--kiln-opt", help="the kiln-opt executable: check the kernel IR round trip")
    p.add_argument("--dim", action="append", default=[],
                   help="SYMBOL=SIZE or SYMBOL=LO..HI, passed to kiln as --dim (repeatable)")
    p.add_argument("--aot", action="store_true",
                   help="compile ahead of time (kiln compile) and run the artifact")
    args = p.parse_args()

    model = os.path.join(args.model_dir, "model.onnx")
    if not os.path.exists(model):
        print(f"check_model.py: {model} does not exist (run tools/export_models.py); skipping")
        return 77
    if os.path.realpath(args.work_dir) == os.path.realpath(args.model_dir):
        print("check_model.py: --work-dir must differ from --model-dir (its .npy files are "
              "replaced)")
        return 1
    os.makedirs(args.work_dir, exist_ok=True)
    wants = numbered(args.model_dir, "expected")
    args.limits = limits(args, len(wants))
    if args.limits is None:
        return 77
    inputs = []
    for path in numbered(args.model_dir, "input"):
        inputs += ["--input", path]
    for d in args.dim:
        inputs += ["--dim", d]
    if args.aot:
        artifact = os.path.join(args.work_dir, "model.kiln")
        if kiln(args, ["compile", model, "-o", artifact]) is None:
            return 1
        runs = [("aot", ["run", artifact] + inputs)]
    elif args.backend == "cpu":
        cache = os.path.join(args.work_dir, "cache")
        shutil.rmtree(cache, ignore_errors=True)
        run = ["run", "--backend", "cpu", f"-O{args.opt_level}", model, "--cache-dir", cache]
        dump = ["--dump-dir", os.path.join(args.work_dir, "dump")] if args.kiln_opt else []
        if dump:
            shutil.rmtree(dump[1], ignore_errors=True)
            os.makedirs(dump[1])
        runs = [("compile-cache miss", run + inputs + dump), ("compile-cache hit", run + inputs)]
    else:
        runs = [("", ["run", "--backend", args.backend, f"-O{args.opt_level}", model,
                      "--precision", args.precision] + inputs)]
    for what, cmd in runs:
        for old in glob.glob(os.path.join(args.work_dir, "*.npy")):
            os.remove(old)
        out = kiln(args, cmd + ["--output-dir", args.work_dir])
        if out is None:
            return 1
        if what.startswith("compile-cache") and f"compile cache {what.split()[-1]}" not in out:
            print(f"FAIL: expected a compile-cache {what.split()[-1]} in kiln's report")
            return 1
        outputs = output_files(args.work_dir, len(wants))
        if outputs is None:
            return 1
        for i, (path, want) in enumerate(zip(outputs, wants)):
            if not compare(args, what, i, np.load(path), np.load(want)):
                return 1
    if args.kiln_opt and args.backend == "cpu" and not args.aot:
        return check_kernel_text(args, os.path.join(args.work_dir, "dump"))
    return 0


def limits(args, count):
    """The limit of each output (the module docstring); None, after saying why, where torch's own
    run in this precision is not finite."""
    path = os.path.join(args.model_dir, "low_precision.json")
    if args.precision not in ("f16", "bf16") or not os.path.exists(path):
        return [(args.tolerance, "")] * count
    with open(path) as f:
        torch_errors = json.load(f)[args.precision]
    if any(e is None for e in torch_errors):
        print(f"SKIP: {os.path.basename(args.model_dir)} in {args.precision}: torch's own "
              f"{args.precision} output is not finite (values past the type's range); the "
              f"precision cannot hold this model")
        return None
    out = []
    for e in torch_errors[:count] + [0.0] * (count - len(torch_errors)):
        if 1.25 * e > args.tolerance:
            out.append((1.25 * e, f", torch's own {args.precision} error {e:.3g} x 1.25"))
        else:
            out.append((args.tolerance, ""))
    return out


def numbered(folder, stem):
    """folder/stem_0.npy, stem_1.npy, ... in order of their number."""
    paths = glob.glob(os.path.join(folder, f"{stem}_*.npy"))
    return sorted(paths, key=lambda p: int(p.rsplit("_", 1)[1].split(".")[0]))


def output_files(work_dir, count):
    """Kiln's output files in the model's output order: one file, or output_<i>.npy (the names
    the exporters give several outputs); None with a FAIL line otherwise."""
    found = sorted(glob.glob(os.path.join(work_dir, "*.npy")))
    if count == 1 and len(found) == 1:
        return found
    named = [os.path.join(work_dir, f"output_{i}.npy") for i in range(count)]
    if len(found) == count and all(p in found for p in named):
        return named
    print(f"FAIL: expected {count} output .npy files in {work_dir}, found {found}")
    return None


def compare(args, what, index, got, want):
    """max |got - want| / max |want| within --tolerance, printed; False on a mismatch."""
    if got.shape != want.shape or got.dtype != want.dtype:
        print(f"FAIL: output {index} {got.dtype}{list(got.shape)}, expected "
              f"{want.dtype}{list(want.shape)}")
        return False
    scale = float(np.max(np.abs(want))) if want.size else 0.0
    diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
    err = float(np.max(diff)) if diff.size else 0.0
    ratio = err / scale if scale > 0 else err
    limit, why = args.limits[index]
    verdict = "PASS" if ratio <= limit else "FAIL"
    print(f"{verdict}: {os.path.basename(args.model_dir)} output {index} -O{args.opt_level} "
          f"{what}: max|diff| {err:.3g}, max|ref| {scale:.3g}, ratio {ratio:.3g} "
          f"(limit {limit:.3g}{why})")
    return verdict == "PASS"


def check_kernel_text(args, dump):
    """The dumped kernel IR parses, verifies and prints as the same text."""
    for name in ["kernels.txt", "kernels-scheduled.txt"]:
        path = os.path.join(dump, name)
        proc = subprocess.run([args.kiln_opt, path, "--kernels"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
        with open(path) as f:
            text = f.read()
        count = text.count("\nkernel ") + text.startswith("kernel ")
        if proc.returncode != 0 or proc.stdout != text:
            print(f"FAIL: {path} does not read back through kiln-opt --kernels: "
                  f"{proc.stderr.strip() or 'the text differs'}")
            return 1
        print(f"PASS: {name}: {count} kernels parse, verify and print as the same text")
    return 0


def kiln(args, cmd):
    """Runs kiln with `cmd`; returns its stdout, or None (after saying why) when it fails."""
    cmd = [args.kiln] + cmd
    print("running:", " ".join(cmd), flush=True)
    start = time.time()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    print(proc.stdout, end="")
    if proc.returncode != 0:
        print(f"FAIL: kiln exited with status {proc.returncode} after {time.time() - start:.1f} s")
        return None
    return proc.stdout


if __name__ == "__main__":
    sys.exit(main())
