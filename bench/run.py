#!/usr/bin/env python3
"""Kiln against ONNX Runtime (CPU execution provider) on the same models and inputs.

    /usr/bin/python3 bench/run.py [--models resnet18,...] [--threads 1,2] [--repeat 20]
                                  [--rounds 3] [--kiln build/bin/kiln] [--models-dir build/models]

For each model and thread count the two engines run interleaved, `--rounds` times each (every
round: `kiln bench` then ONNX Runtime, each a fresh process with warm-up runs before `--repeat`
timed runs); a model's latency is the median of its round medians. The outputs of the two engines
are compared first (max |kiln - ort| / max |ort| <= 1e-4). The table gives both latencies, the
ratio ORT/Kiln (above 1: Kiln is faster), the peak resident memory of each process (Kiln's
timed rounds compile from the ONNX file without the cache; the "cached" column is a process that
loads the compiled model from the compile cache instead, as a deployment would), and the
geometric mean of the ratios per thread count. Then, per model and thread count, a roofline line
(`kiln bench --roofline`, unless --no-roofline): the copy bandwidth and the f32 matmul rate
measured in that process, and how close a fused memory-bound kernel, the model's memory-bound
kernels and its contraction kernels come to them. Not part of the test suite: it measures.

    /usr/bin/python3 bench/run.py --zoo [--zoo-dir DIR] [--models NAME,...] [--threads 1,2]

runs the model zoo of bench/zoo.py instead (see bench/zoo_run.py): per model the latencies and
ratio at each thread count, Kiln's slowest kernel class and its share of the roofline, the
largest relative error against ONNX Runtime and torch, or the one-line error of a model Kiln (or
ONNX Runtime) fails on.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEFAULT_MODELS = "resnet18,mobilenet_v2,transformer_encoder,decoder_lm,resnet50,vit,bert"


def run(cmd, **kw):
    """Runs cmd under /usr/bin/time; returns (stdout, peak RSS in MiB)."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as t:
        p = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", t.name] + cmd,
                           capture_output=True, text=True, **kw)
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{p.stderr[-2000:]}")
        rss_kib = int(t.read().strip().splitlines()[-1])
    return p.stdout, rss_kib / 1024.0


def cpu_summary():
    """The CPU's model name, core count and widest vector extension (from /proc/cpuinfo)."""
    name, flags = "unknown CPU", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and name == "unknown CPU":
                    name = value.strip()
                elif key.strip() == "flags" and not flags:
                    flags = set(value.split())
    except OSError:
        pass
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    return f"{name}, {os.cpu_count()} cores, {isa}"


def graph_inputs(model):
    import onnx
    m = onnx.load(model, load_external_data=False)
    init = {i.name for i in m.graph.initializer}
    return [i.name for i in m.graph.input if i.name not in init]


def percent(rate, ceiling):
    return f"{100.0 * rate / ceiling:.0f}%" if ceiling > 0 and rate > 0 else "-"


def roofline_text(roof):
    """One line from `kiln bench --roofline --json`'s "roofline" object."""
    c, m = roof["copy_gbs"], roof["matmul_gflops"]
    mem, con = roof["memory_kernels"], roof["contraction_kernels"]
    return (f"copy {c:.1f} GB/s, f32 matmul {m:.1f} GFLOP/s; fused gelu "
            f"{percent(roof['fused_gelu_gbs'], c)} of copy; {mem['count']} memory-bound kernels "
            f"{percent(mem['gbs'], c)} of copy; {con['count']} contraction kernels "
            f"{percent(con['gflops'], m)} of matmul")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=None, help=f"comma-separated (default: {DEFAULT_MODELS}; "
                   "with --zoo: the whole zoo)")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--repeat", type=int, default=None, help="timed runs (default 20; --zoo: 10)")
    p.add_argument("--warmup", type=int, default=None, help="warm-up runs (default 3; --zoo: 2)")
    p.add_argument("--rounds", type=int, default=None, help="rounds (default 3; --zoo: 1)")
    p.add_argument("--kiln", default=os.path.join(ROOT, "build", "bin", "kiln"))
    p.add_argument("--models-dir", default=os.path.join(ROOT, "build", "models"))
    p.add_argument("--no-roofline", action="store_true", help="skip the roofline lines")
    p.add_argument("--zoo", action="store_true",
                   help="run the model zoo of bench/zoo.py instead (exported into --zoo-dir when "
                   "missing): see bench/zoo_run.py")
    p.add_argument("--zoo-dir", default=os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "kiln-zoo"))
    p.add_argument("--timeout", type=int, default=600,
                   help="--zoo: seconds one Kiln or ORT process may take (default 600)")
    args = p.parse_args()
    zoo = args.zoo
    for name, default, zoo_default in (("repeat", 20, 10), ("warmup", 3, 2), ("rounds", 3, 1)):
        if getattr(args, name) is None:
            setattr(args, name, zoo_default if zoo else default)
    print(f"machine: {cpu_summary()}", flush=True)

    subprocess.run(["bash", os.path.join(HERE, "setup.sh")], check=True, stdout=subprocess.DEVNULL)
    if zoo:
        import zoo_run
        return zoo_run.run_zoo(args)
    models = [m for m in (args.models or DEFAULT_MODELS).split(",") if m]
    missing = [m for m in models if not os.path.exists(os.path.join(args.models_dir, m, "model.onnx"))]
    if missing:
        subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "tools", "export_models.py"),
                        args.models_dir, "--models", ",".join(missing)], check=True)
    threads = [int(t) for t in args.threads.split(",")]
    rows, roofs = [], []
    for name in models:
        folder = os.path.join(args.models_dir, name)
        model = os.path.join(folder, "model.onnx")
        inputs = sorted(f for f in os.listdir(folder) if f.startswith("input_") and f.endswith(".npy"))
        names = graph_inputs(model)
        kiln_in = sum([["--input", f"{n}={os.path.join(folder, f)}"] for n, f in zip(names, inputs)], [])
        ort_in = sum([["--input", f"{n}={os.path.join(folder, f)}"] for n, f in zip(names, inputs)], [])
        # Agreement of the outputs.
        with tempfile.TemporaryDirectory() as out:
            run([args.kiln, "run", model, "--no-cache", "--output-dir", os.path.join(out, "kiln")]
                + kiln_in)
            run(["node", os.path.join(HERE, "ort_bench.js"), model, "--repeat", "1", "--warmup", "0",
                 "--output-dir", os.path.join(out, "ort")] + ort_in)
            worst = 0.0
            for f in os.listdir(os.path.join(out, "ort")):
                want = np.load(os.path.join(out, "ort", f)).astype(np.float64)
                got = np.load(os.path.join(out, "kiln", f)).astype(np.float64)
                scale = max(float(np.max(np.abs(want))), 1e-30)
                worst = max(worst, float(np.max(np.abs(got - want))) / scale)
        agree = "ok" if worst <= 1e-4 else "MISMATCH"
        # A cached compile: the second kiln bench with a fresh cache directory loads the entry the
        # first wrote (its peak RSS is that of a deployment that loads compiled code).
        with tempfile.TemporaryDirectory() as cache:
            for _ in range(2):
                out, cached_rss = run([args.kiln, "bench", model, "--json", "--cache-dir", cache,
                                       "--repeat", "1", "--warmup", "0"] + kiln_in)
            r = json.loads(out)
            cached_ms = r["compile_ms"]["cache_load"] if r["cache"] == "hit" else float("nan")
        for t in threads:
            kiln_ms, ort_ms, kiln_rss, ort_rss, compile_ms = [], [], 0.0, 0.0, []
            for _ in range(args.rounds):
                out, rss = run([args.kiln, "bench", model, "--json", "--threads", str(t), "--no-cache",
                                "--repeat", str(args.repeat), "--warmup", str(args.warmup)] + kiln_in)
                r = json.loads(out)
                kiln_ms.append(r["run_ms"]["median"])
                compile_ms.append(r["compile_ms"]["total"])
                kiln_rss = max(kiln_rss, rss)
                out, rss = run(["node", os.path.join(HERE, "ort_bench.js"), model, "--threads", str(t),
                                "--repeat", str(args.repeat), "--warmup", str(args.warmup)] + ort_in)
                ort_ms.append(json.loads(out)["run_ms"]["median"])
                ort_rss = max(ort_rss, rss)
            k, o = float(np.median(kiln_ms)), float(np.median(ort_ms))
            rows.append((name, t, k, o, o / k, kiln_rss, ort_rss, float(np.median(compile_ms)), agree,
                         worst, cached_ms, cached_rss))
            print(f"{name:22} {t} thr  kiln {k:9.3f} ms  ort {o:9.3f} ms  ort/kiln {o / k:6.3f}  "
                  f"rss kiln {kiln_rss:7.1f} (cached {cached_rss:6.1f}) MiB ort {ort_rss:7.1f} MiB  "
                  f"compile {rows[-1][7]:7.1f} ms  "
                  f"cached {cached_ms:6.1f} ms  outputs {agree} ({worst:.2g})", flush=True)
            if not args.no_roofline:
                out, _ = run([args.kiln, "bench", model, "--json", "--roofline", "--threads", str(t),
                              "--no-cache", "--repeat", "5", "--warmup", "1"] + kiln_in)
                roof = json.loads(out)["roofline"]
                roofs.append((name, t, roof))
                print(f"{'':22} {t} thr  roofline: {roofline_text(roof)}", flush=True)
    print()
    print("| model | threads | Kiln median (ms) | ORT median (ms) | ORT/Kiln | Kiln peak RSS (MiB) | "
          "Kiln peak RSS, cached (MiB) | ORT peak RSS (MiB) | Kiln compile (ms) | cached compile (ms) "
          "| outputs |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]:.3f} | {r[3]:.3f} | {r[4]:.3f} | {r[5]:.1f} | {r[11]:.1f} | "
              f"{r[6]:.1f} | {r[7]:.1f} | {r[10]:.1f} | {r[8]} ({r[9]:.1g}) |")
    if roofs:
        print()
        print("| model | threads | copy (GB/s) | f32 matmul (GFLOP/s) | fused gelu, % of copy | "
              "memory-bound kernels, % of copy | contraction kernels, % of matmul |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        for name, t, roof in roofs:
            c, m = roof["copy_gbs"], roof["matmul_gflops"]
            print(f"| {name} | {t} | {c:.1f} | {m:.1f} | {percent(roof['fused_gelu_gbs'], c)} | "
                  f"{percent(roof['memory_kernels']['gbs'], c)} | "
                  f"{percent(roof['contraction_kernels']['gflops'], m)} |")
    for t in threads:
        ratios = [r[4] for r in rows if r[1] == t]
        if ratios:
            g = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
            print(f"geomean ORT/Kiln at {t} thread{'s' if t > 1 else ''}: {g:.3f} "
                  f"(slowest model: {min(ratios):.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
