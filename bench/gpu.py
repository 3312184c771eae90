#!/usr/bin/env python3
"""Kiln's cuda backend against torch eager on the GPU, side by side in one run, in f32.

    python3 bench/gpu.py --kiln BUILD/bin/kiln [--models resnet50,bert] [--repeat 50]

Each model of tools/export_models.py is built with its seeded weights, exported to ONNX, run by
`kiln bench --backend cuda` (compile time, then the median wall time of whole runs: inputs copied
to the device, outputs copied back), and by torch eager on the same GPU (median of CUDA-event
times with the input already on the device, synchronised). It prints per model both times and
torch / kiln (above 1: Kiln faster), then the geometric mean. Kiln's time includes the copies
across the bus, torch's does not.
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


def torch_ms(model, x, repeat):
    model = model.cuda().eval()
    x = x.cuda()
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


def kiln_bench(kiln, folder, repeat):
    cmd = [kiln, "bench", os.path.join(folder, "model.onnx"), "--backend", "cuda", "--no-cache",
           "--input", os.path.join(folder, "input_0.npy"), "--repeat", str(repeat), "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip())
    return json.loads(out.stdout)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kiln", required=True)
    p.add_argument("--models", default="resnet50,resnet18,mobilenet_v2,vit,bert,decoder_lm")
    p.add_argument("--repeat", type=int, default=50)
    args = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False  # f32 on both sides
    torch.backends.cudnn.allow_tf32 = False
    print(f"{'model':16} {'kiln compile':>13} {'kiln run':>10} {'torch eager':>12} {'ratio':>7}")
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            export_models.export(name, tmp, 14)
            folder = os.path.join(tmp, name)
            torch.manual_seed(export_models.SEED)  # the same weights and input as exported
            model, x = export_models.MODELS[name]()
            try:
                k = kiln_bench(args.kiln, folder, args.repeat)
            except RuntimeError as e:
                print(f"{name:16} kiln failed: {e}")
                continue
            t = torch_ms(model, x, args.repeat)
            kms = k["run_ms"]["median"]
            ratios.append(t / kms)
            print(f"{name:16} {k['compile_ms']['total']:10.0f} ms {kms:7.3f} ms {t:9.3f} ms "
                  f"{t / kms:6.2f}x", flush=True)
    if ratios:
        geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        print(f"geomean torch eager / kiln: {geo:.2f}x over {len(ratios)} models")


if __name__ == "__main__":
    main()
