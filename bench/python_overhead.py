"""What the Python module costs over the C++ API, and a model captured from torch against the
same model through ONNX. Measurements, not tests: it prints numbers and ratios.

    PYTHONPATH=build/python /usr/bin/python3 bench/python_overhead.py [--threads N] [--quick]

1. Call overhead: a small model (a 2-layer perceptron, batch 1) run through the C++ API alone
   (Executable::runInto in a C++ loop) and through Python (exe(x) on numpy arrays, exe(x) on
   torch tensors through DLPack, exe.run(None, feeds)). The target: at most 10 us more.
2. Capture against ONNX: resnet18 and a transformer encoder (torchvision / torch.nn, seeded
   random weights), compiled by kiln.compile(module) and from an ONNX export of the same
   module, run on the same input. The target: as fast.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np

import kiln

MLP = """func @main(%x: f32[1,64], %w1: f32[64,128], %w2: f32[128,10]) -> (f32[1,10]) {
  %h = f32[1,128] dot_general(%x, %w1) {lhs_contracting = [1], rhs_contracting = [0]}
  %r = f32[1,128] tanh(%h)
  %y = f32[1,10] dot_general(%r, %w2) {lhs_contracting = [1], rhs_contracting = [0]}
  return %y
}
"""


def per_call(fn, seconds):
    """Median of 5 rounds of the mean seconds per call, each round about seconds/5 long."""
    fn()
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < 0.05:
        fn()
        n += 1
    n = max(1, int(n * seconds / 5 / 0.05))
    rounds = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        rounds.append((time.perf_counter() - start) / n)
    return statistics.median(rounds)


def overhead(threads, seconds):
    rng = np.random.default_rng(0)
    exe = kiln.compile_kir(MLP, threads=threads)
    x = rng.standard_normal((1, 64), dtype=np.float32)
    w1 = rng.standard_normal((64, 128), dtype=np.float32)
    w2 = rng.standard_normal((128, 10), dtype=np.float32)
    native = statistics.median(exe._time_native([x, w1, w2], 2000) for _ in range(5))
    rows = [("C++ API (Executable::runInto)", native)]
    rows.append(("Python exe(x, w1, w2), numpy", per_call(lambda: exe(x, w1, w2), seconds)))
    feeds = {"x": x, "w1": w1, "w2": w2}
    rows.append(("Python exe.run(None, feeds)", per_call(lambda: exe.run(None, feeds), seconds)))
    try:
        import torch
        tx, t1, t2 = (torch.from_numpy(a) for a in (x, w1, w2))
        rows.append(("Python exe(x, w1, w2), torch (DLPack)",
                     per_call(lambda: exe(tx, t1, t2), seconds)))
    except ImportError:
        pass
    print("1. call overhead on a small model (2-layer perceptron, batch 1)")
    for name, t in rows:
        extra = "" if t is native else f"   +{(t - native) * 1e6:6.2f} us ({t / native:.2f}x)"
        print(f"   {name:40s} {t * 1e6:8.2f} us{extra}")
    print("   target: at most 10 us over the C++ API")


def capture_vs_onnx(threads, seconds):
    import torch
    import torchvision
    torch.manual_seed(0)
    resnet = torchvision.models.resnet18(weights=None).eval()
    layer = torch.nn.TransformerEncoderLayer(128, 4, 512, dropout=0.0, batch_first=True)
    encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()
    models = [("resnet18", resnet, torch.randn(1, 3, 224, 224)),
              ("transformer encoder", encoder, torch.randn(1, 32, 128))]
    print("2. a model captured from torch against the same model through ONNX "
          f"({threads or 'all'} threads)")
    for name, module, x in models:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "m.onnx")
            torch.onnx.export(module, (x,), path, input_names=["x"], opset_version=13)
            try:
                start = time.perf_counter()
                captured = kiln.compile(module, example_inputs=(x,), threads=threads)
                t_capture = time.perf_counter() - start
                start = time.perf_counter()
                onnx_exe = kiln.compile(path, threads=threads)
                t_onnx = time.perf_counter() - start
            except kiln.KilnError as e:
                print(f"   {name}: not compiled: {str(e).splitlines()[0]}")
                continue
        xn = x.numpy()
        run_c = per_call(lambda: captured(x), seconds)
        run_o = per_call(lambda: onnx_exe(xn), seconds)
        print(f"   {name:20s} captured {run_c * 1e3:8.3f} ms  onnx {run_o * 1e3:8.3f} ms  "
              f"ratio {run_c / run_o:.3f}   (compile: capture {t_capture:.2f} s, "
              f"onnx {t_onnx:.2f} s)")
    print("   target: ratio <= 1 (as fast)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=0, help="threads per run (0: all)")
    parser.add_argument("--quick", action="store_true", help="shorter measurements")
    args = parser.parse_args()
    seconds = 0.5 if args.quick else 2.0
    overhead(1, seconds)
    try:
        import torch  # noqa: F401
        import torchvision  # noqa: F401
    except ImportError as e:
        print(f"2. skipped: {e} (install python3-torch python3-torchvision)")
        return 0
    capture_vs_onnx(args.threads, seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
