"""`bench/run.py --zoo`: Kiln against ONNX Runtime over the model zoo of bench/zoo.py.

Per model: one cold `kiln bench` compiles it (its compile time; the compiled model goes into a
compile cache private to the model), `kiln run` and ONNX Runtime compute the outputs for the
model's input, which are compared with each other and with torch's (max |a - b| / max |b| over
every output). Then per thread count and round, `kiln bench --roofline --json` (loading the
compiled model from that cache; the timed runs come before the per-kernel ones) and ONNX Runtime
run interleaved, in turn first. A model's line gives both medians and the ratio ORT/Kiln per
thread count: the median over rounds of each round's ratio, so that a slow phase of a shared host
weighs on both engines of a round instead of on one model's ratio (the geomean of the ratios of
the medians is printed too). Then Kiln's slowest kernel class at the first thread count: of
memory-bound kernels (loop, reduction), contraction kernels and the others (attention, opaque),
the class that takes the most kernel time, its share of that time and its rate as a share of its
ceiling (copy bandwidth or f32 matmul rate, measured in the same process). A model that Kiln or
ONNX Runtime fails on gets one line with the error and the script goes on.
"""
import json
import math
import os
import signal
import subprocess
import sys
import tempfile

import numpy as np

from run import cpu_summary, graph_inputs, percent

HERE = os.path.dirname(os.path.abspath(__file__))


def run(cmd, timeout):
    """Runs cmd in its own process group; returns (stdout, None). Past `timeout` seconds the whole
    group is killed (a compile that never ends) and subprocess.TimeoutExpired raised."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except BaseException:  # the timeout, Ctrl-C or SIGTERM (see run_zoo): no orphan left running
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        raise
    if p.returncode != 0:
        raise RuntimeError(err[-2000:] or f"exit status {p.returncode}")
    return out, None



def one_line(error):
    """The line of an error worth reading: the last one that says error, else the last one."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    if not lines:
        return type(error).__name__
    for line in reversed(lines):
        if "error" in line.lower() or "fail" in line.lower():
            return line[:240]
    return lines[-1][:240]


def slowest_class(roof):
    """(class, share of kernel time, rate as a share of its ceiling) from the roofline object."""
    mem, con, oth = roof["memory_kernels"], roof["contraction_kernels"], roof["other_kernels"]
    total = mem["ms"] + con["ms"] + oth["ms"]
    if total <= 0:
        return "-", 0.0, "-"
    classes = [("memory", mem["ms"], percent(mem["gbs"], roof["copy_gbs"]) + " of copy"),
               ("contraction", con["ms"], percent(con["gflops"], roof["matmul_gflops"]) +
                " of matmul"),
               ("other", oth["ms"], "no ceiling")]
    name, ms, share = max(classes, key=lambda c: c[1])
    return name, ms / total, share


def rel_error(got_dir, want):
    """max |got - want| / max |want| over the outputs; want: output name -> array."""
    worst = 0.0
    for name, w in want.items():
        w = w.astype(np.float64)
        g = np.load(os.path.join(got_dir, name + ".npy")).astype(np.float64)
        if g.shape != w.shape:
            raise RuntimeError(f"output {name}: shape {g.shape}, expected {w.shape}")
        scale = max(float(np.max(np.abs(w))) if w.size else 0.0, 1e-30)
        worst = max(worst, float(np.max(np.abs(g - w))) / scale if w.size else 0.0)
    return worst


def measure(name, folder, args, threads, tmp):
    """One model's result: a dict with the times per thread count or an "error"."""
    model = os.path.join(folder, "model.onnx")
    inputs = sorted(f for f in os.listdir(folder) if f.startswith("input_") and f.endswith(".npy"))
    io = sum([["--input", f"{n}={os.path.join(folder, f)}"]
              for n, f in zip(graph_inputs(model), inputs)], [])
    expected = sorted(f for f in os.listdir(folder) if f.startswith("expected_"))
    torch_out = {f"output_{f[len('expected_'):-len('.npy')]}": np.load(os.path.join(folder, f))
                 for f in expected}
    cache = os.path.join(tmp, "cache")
    ort = ["node", os.path.join(HERE, "ort_bench.js"), model]
    res = {"name": name}
    to = {"timeout": args.timeout}
    # ONNX Runtime first: a model it cannot run is no measure of Kiln.
    try:
        run(ort + ["--repeat", "1", "--warmup", "0", "--output-dir", os.path.join(tmp, "ort")]
            + io, **to)
    except subprocess.TimeoutExpired as e:
        res["error"] = f"ORT: no result in {e.timeout:.0f} s"
        return res
    except Exception as e:
        res["error"] = "ORT: " + one_line(e)
        return res
    stage = "compile"
    try:
        out, _ = run([args.kiln, "bench", model, "--json", "--cache-dir", cache, "--repeat", "1",
                      "--warmup", "0", "--threads", str(threads[0])] + io, **to)
        res["compile_ms"] = json.loads(out)["compile_ms"]["total"]
        stage = "run"
        run([args.kiln, "run", model, "--cache-dir", cache, "--threads", str(threads[0]),
             "--output-dir", os.path.join(tmp, "kiln")] + io, **to)
        ort_out = {n: np.load(os.path.join(tmp, "ort", n + ".npy")) for n in torch_out}
        res["err_ort"] = rel_error(os.path.join(tmp, "kiln"), ort_out)
        res["err_torch"] = rel_error(os.path.join(tmp, "kiln"), torch_out)
        res["err_ort_torch"] = rel_error(os.path.join(tmp, "ort"), torch_out)
        stage = "bench"
        for t in threads:
            kiln_ms, ort_ms = [], []
            for r in range(args.rounds):
                roof = [] if args.no_roofline or r > 0 else ["--roofline"]

                def kiln_round():
                    out, _ = run([args.kiln, "bench", model, "--json", "--cache-dir", cache,
                                  "--threads", str(t), "--repeat", str(args.repeat), "--warmup",
                                  str(args.warmup)] + roof + io, **to)
                    k = json.loads(out)
                    kiln_ms.append(k["run_ms"]["median"])
                    if roof:
                        res[f"roof_{t}"] = k["roofline"]

                def ort_round():
                    out, _ = run(ort + ["--threads", str(t), "--repeat", str(args.repeat),
                                        "--warmup", str(args.warmup)] + io, **to)
                    ort_ms.append(json.loads(out)["run_ms"]["median"])

                for step in ((kiln_round, ort_round) if r % 2 == 0 else (ort_round, kiln_round)):
                    step()
            paired = float(np.median([o / k for k, o in zip(kiln_ms, ort_ms)]))
            res[t] = (float(np.median(kiln_ms)), float(np.median(ort_ms)), paired)
    except subprocess.TimeoutExpired as e:
        res["error"] = f"Kiln {stage}: no result in {e.timeout:.0f} s"
    except Exception as e:
        res["error"] = f"Kiln {stage}: " + one_line(e)
    return res


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def row_text(res, threads):
    """The markdown row of one model."""
    if "error" in res:
        return f"| {res['name']} | " + " | ".join(["-"] * 3 * len(threads)) + \
            f" | - | - | {res['error'].replace('|', '/')} |"
    cells = []
    for t in threads:
        if t in res:
            k, o, ratio = res[t]
            cells += [f"{k:.2f}", f"{o:.2f}", f"{ratio:.2f}"]
        else:
            cells += ["-", "-", "-"]
    roof = res.get(f"roof_{threads[0]}")
    if roof:
        cls, time_share, rate = slowest_class(roof)
        slow = f"{cls}: {100 * time_share:.0f}% of time, {rate}"
    else:
        slow = "-"
    err = f"{res['err_ort']:.1g} / {res['err_torch']:.1g}"
    if max(res["err_ort"], res["err_torch"]) > 1e-4:
        err += " MISMATCH"
    return f"| {res['name']} | " + " | ".join(cells) + \
        f" | {res['compile_ms']:.0f} | {slow} | {err} |"


def run_zoo(args):
    import zoo
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwinds through run()'s cleanup
    threads = [int(t) for t in args.threads.split(",")]
    names = [m for m in (args.models or ",".join(zoo.ZOO)).split(",") if m]
    missing = [m for m in names
               if not os.path.exists(os.path.join(args.zoo_dir, m, "model.onnx"))]
    if missing:
        # Export failures are reported by zoo.py; those models are listed below as not exported.
        subprocess.run(["/usr/bin/python3", os.path.join(HERE, "zoo.py"), args.zoo_dir,
                        "--models", ",".join(missing)], stderr=subprocess.DEVNULL)
    print(f"zoo: {len(names)} models from {args.zoo_dir}; threads {args.threads}, "
          f"{args.rounds} round(s) of {args.repeat} runs after {args.warmup}", flush=True)
    results = []
    for name in names:
        folder = os.path.join(args.zoo_dir, name)
        if not os.path.exists(os.path.join(folder, "model.onnx")):
            res = {"name": name, "error": "export: torch.onnx.export failed (bench/zoo.py)"}
        else:
            with tempfile.TemporaryDirectory() as tmp:
                res = measure(name, folder, args, threads, tmp)
        results.append(res)
        print(row_text(res, threads), flush=True)
    print()
    print(f"machine: {cpu_summary()}")
    head = "| model | " + " | ".join(
        f"Kiln {t}t (ms) | ORT {t}t (ms) | ORT/Kiln {t}t" for t in threads) + \
        f" | compile (ms) | slowest kernel class at {threads[0]}t | max rel. error vs ORT / torch |"
    print(head)
    print("| --- | " + " | ".join(["---:"] * (3 * len(threads) + 1)) + " | --- | --- |")
    for res in results:
        print(row_text(res, threads))
    print()
    failed = [r for r in results if "error" in r]
    for t in threads:
        ratios = [r[t][2] for r in results if t in r]
        if ratios:
            slow = sum(1 for x in ratios if x < 1)
            of_medians = geomean([r[t][1] / r[t][0] for r in results if t in r])
            print(f"geomean ORT/Kiln at {t} thread{'s' if t > 1 else ''} over {len(ratios)} "
                  f"models: {geomean(ratios):.3f} (slowest {min(ratios):.3f}; {slow} slower than "
                  f"ORT; ratios of the medians: {of_medians:.3f})")
    print(f"{len(failed)} of {len(results)} models without a result"
          + (": " + ", ".join(r["name"] for r in failed) if failed else ""))
    return 0
