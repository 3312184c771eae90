#!/usr/bin/env python3
"""Kiln's cuda backend against torch eager on the GPU, side by side in one run.

    python3 bench/gpu.py --kiln BUILD/bin/kiln [--models resnet50,bert] [--repeat 50]
                         [--precision f32|f16|bf16]

Each model of tools/export_models.py is built with its seeded weights, exported to ONNX, run by
`kiln bench --backend cuda --precision P` and by torch eager on the same GPU (the model and its
float input cast to P; TF32 off). Both sides are timed by CUDA events around the model's work,
median of --repeat runs after warm-up: Kiln's `device_ms` (its launches, the copies of inputs and
outputs excluded), torch's with the input already on the device. It also prints Kiln's wall time
of whole runs (copies across the bus included) and compile time, then per model torch / kiln
(above 1: Kiln faster) and the geometric mean.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import export_models  # noqa: E402  (tools/export_models.py: the models and their seeds)
import torch  # noqa: E402


DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def torch_ms(model, x, repeat, precision):
    dtype = DTYPES[precision]
    model = model.to(dtype).cuda().eval()
    x = (x.to(dtype) if x.is_floating_point() else x).cuda()
    with torch.no_grad():
        for _ in range(5):
            model(x)
        torch.cuda.synchronize()
        times = []
        for _ in range(repeat):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            model(x)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def kiln_bench(kiln, folder, repeat, precision, warmup=3):
    """`kiln bench`'s JSON, compiled through a compile cache in the model's folder: the first
    call compiles cold, a second one loads the cache."""
    cmd = [kiln, "bench", os.path.join(folder, "model.onnx"), "--backend", "cuda",
           "--cache-dir", os.path.join(folder, "cache"), "--precision", precision,
           "--input", os.path.join(folder, "input_0.npy"), "--repeat", str(repeat),
           "--warmup", str(warmup), "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip())
    return json.loads(out.stdout)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kiln", required=True)
    p.add_argument("--models", default="resnet50,resnet18,mobilenet_v2,vit,bert,decoder_lm")
    p.add_argument("--repeat", type=int, default=50)
    p.add_argument("--precision", choices=sorted(DTYPES), default="f32")
    args = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False  # f32 on both sides
    torch.backends.cudnn.allow_tf32 = False
    print(f"precision {args.precision}; times are medians of CUDA-event times, "
          "'kiln wall' includes the copies across the bus")
    print(f"{'model':16} {'compile':>9} {'cached':>9} {'kiln wall':>10} {'kiln':>10} "
          f"{'torch eager':>12} {'ratio':>7}")
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            export_models.export(name, tmp, 14)
            folder = os.path.join(tmp, name)
            torch.manual_seed(export_models.SEED)  # the same weights and input as exported
            model, x = export_models.MODELS[name]()
            try:
                k = kiln_bench(args.kiln, folder, args.repeat, args.precision)
                cached = kiln_bench(args.kiln, folder, 1, args.precision, warmup=0)
            except RuntimeError as e:
                print(f"{name:16} kiln failed: {e}")
                continue
            t = torch_ms(model, x, args.repeat, args.precision)
            wall = k["run_ms"]["median"]
            kms = k["device_ms"]["median"]
            ratios.append(t / kms)
            print(f"{name:16} {k['compile_ms']['total']:6.0f} ms "
                  f"{cached['compile_ms']['total']:6.1f} ms {wall:7.3f} ms {kms:7.3f} ms "
                  f"{t:9.3f} ms {t / kms:6.2f}x", flush=True)
    if ratios:
        geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        print(f"geomean torch eager / kiln: {geo:.2f}x over {len(ratios)} models")


if __name__ == "__main__":
    main()
