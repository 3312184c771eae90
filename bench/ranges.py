#!/usr/bin/env python3
"""One compile over a range of sizes against a compile for each size, side by side.

For each thread count, compiles MODEL once over the ranges (`kiln compile --dim N=LO..HI`, one
--dim per symbol) and, at each sampled size, times that artifact and a compile specialised to the
size (`kiln bench --dim N=SIZE --no-cache`) on the same seeded random inputs, alternating them for
--rounds rounds. Prints per size the two medians (the median of the rounds' medians) and range /
specialised (1.00 = as fast; the target is at most 1.10), then the two compile times.

    /usr/bin/python3 bench/ranges.py --model build/models/resnet18_dynbatch/model.onnx \\
        --dim N=1..64 --sizes 1,8,17,32,64 --threads 1,2
    /usr/bin/python3 bench/ranges.py --model bert_dynamic.onnx --dim N=1..32 --dim S=1..512 \\
        --sizes "N=1,S=16;N=4,S=128;N=3,S=37;N=8,S=384;N=32,S=64"

--backend cuda times the GPU (--threads does not apply there: give one, 1).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def bench(kiln, program, dims, threads, repeat, extra=()):
    """(median run ms, compile ms) of `kiln bench` on seeded random inputs sized by `dims`
    (SYMBOL=SIZE or SYMBOL=LO..HI entries); `extra` holds the backend."""
    cmd = [kiln, "bench", program, "--random-inputs", "--threads", str(threads),
           "--repeat", str(repeat), "--json"] + list(extra)
    for d in dims:
        cmd += ["--dim", d]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"ranges.py: {' '.join(cmd)} failed:\n{out.stderr.strip()}")
    r = json.loads(out.stdout)
    if "recompile_ms" in r:
        sys.exit(f"ranges.py: {program} compiled again for {dims}: not in its range")
    return r["run_ms"]["median"], r["compile_ms"]["total"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kiln", default="build/bin/kiln")
    p.add_argument("--model", required=True)
    p.add_argument("--dim", required=True, action="append",
                   help="SYMBOL=LO..HI, a range (repeat for several symbols)")
    p.add_argument("--sizes", required=True,
                   help="sizes in the ranges: comma-separated numbers for one symbol, else "
                        "';'-separated entries such as N=4,S=128")
    p.add_argument("--backend", default="cpu")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args()
    if len(args.dim) == 1 and ";" not in args.sizes and "=" not in args.sizes:
        symbol = args.dim[0].split("=", 1)[0]
        points = [[f"{symbol}={s}"] for s in args.sizes.split(",")]
    else:
        points = [entry.split(",") for entry in args.sizes.split(";")]
    backend = ["--backend", args.backend]
    with tempfile.TemporaryDirectory() as tmp:
        print(f"{args.model} on {args.backend}: one compile over {' '.join(args.dim)} against one per size "
              f"(median ms of {args.rounds} rounds of {args.repeat} runs)")
        print("| threads | size | range | specialised | range / specialised |")
        print("| ---: | ---: | ---: | ---: | ---: |")
        for t in [int(x) for x in args.threads.split(",")]:
            artifact = os.path.join(tmp, f"range{t}.kiln")
            cmd = [args.kiln, "compile", args.model, "--threads", str(t), "-o", artifact] + backend
            for d in args.dim:
                cmd += ["--dim", d]
            out = subprocess.run(cmd, capture_output=True, text=True)
            if out.returncode != 0:
                sys.exit(f"ranges.py: kiln compile failed:\n{out.stderr.strip()}")
            compiles = []
            for point in points:
                ranged, special = [], []
                for _ in range(args.rounds):
                    ranged.append(bench(args.kiln, artifact, point, t, args.repeat, backend)[0])
                    ms, compile_ms = bench(args.kiln, args.model, point, t, args.repeat,
                                           ["--no-cache"] + backend)
                    special.append(ms)
                    compiles.append(compile_ms)
                r, s = statistics.median(ranged), statistics.median(special)
                print(f"| {t} | {' '.join(point)} | {r:.4f} | {s:.4f} | {r / s:.2f} |")
            # The range's cold compile, timed as the specialised ones are (median of --rounds).
            range_compile = statistics.median(
                bench(args.kiln, args.model, args.dim, t, 1, ["--no-cache"] + backend)[1]
                for _ in range(args.rounds))
            print(f"compile at {t} thread(s): range {range_compile:.0f} ms, specialised median "
                  f"{statistics.median(compiles):.0f} ms "
                  f"({range_compile / statistics.median(compiles):.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
