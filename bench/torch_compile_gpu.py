"""torch.compile(backend="kiln") against eager PyTorch on the GPU, side by side in one run: the
same module and CUDA inputs, CUDA-event times of each call (Kiln's includes Dynamo's guards and
the Python call), medians. Needs torch >= 2 with a GPU and the kiln module of a cuda build
(PYTHONPATH=build-gpu/python)."""

import argparse
import os
import sys

import torch

import kiln  # noqa: F401  (registers backend="kiln")

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import export_models  # noqa: E402


def models():
    import torchvision

    torch.manual_seed(0)
    yield "resnet50", torchvision.models.resnet50(weights=None), torch.randn(1, 3, 224, 224)
    yield "bert", export_models.BertEncoder(), torch.randint(0, 30522, (1, 128))


def median_ms(fn, x, repeat):
    times = []
    for _ in range(repeat + 3):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(x)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    times = sorted(times[3:])
    return times[len(times) // 2]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    if hasattr(torch.backends, "mha"):
        torch.backends.mha.set_fastpath_enabled(False)  # the encoder's parts, on both sides
    print("f32; CUDA-event times of each call, medians")
    print(f"{'model':10} {'eager':>10} {'kiln':>10} {'eager / kiln':>13}")
    with torch.no_grad():
        for name, model, x in models():
            model, x = model.cuda().eval(), x.cuda()
            torch._dynamo.reset()
            compiled = torch.compile(model, backend="kiln", dynamic=False)
            compiled(x)
            eager, ours = median_ms(model, x, args.repeat), median_ms(compiled, x, args.repeat)
            print(f"{name:10} {eager:8.3f}ms {ours:8.3f}ms {eager / ours:12.2f}x")


if __name__ == "__main__":
    main()
