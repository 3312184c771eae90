"""A torchvision model captured from PyTorch into Kiln's IR (no ONNX), run on torch tensors.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/torchvision_model.py [resnet18]

Weights are random (torch.manual_seed): nothing is downloaded.
"""

import sys
import time

import torch
import torchvision

import kiln


def main():
    name = sys.argv[1] if len(sys.argv) > 1 else "resnet18"
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(weights=None)
    # Batch-norm statistics from two train-mode passes: fresh ones make activations vanish.
    model.train()
    with torch.no_grad():
        for _ in range(2):
            model(torch.randn(2, 3, 224, 224))
    model.eval()
    x = torch.randn(1, 3, 224, 224)
    start = time.perf_counter()
    compiled = kiln.compile(model, example_inputs=(x,))
    print(f"{name}: captured and compiled in {time.perf_counter() - start:.2f} s")
    with torch.no_grad():
        ref = model(x)
    y = compiled(x)                       # torch in, torch out (DLPack, no copies)
    print("max difference from eager:", float((y - ref).abs().max()),
          "(output scale", float(ref.abs().max()), ")")
    runs = 20
    start = time.perf_counter()
    for _ in range(runs):
        compiled(x)
    print(f"Kiln: {(time.perf_counter() - start) / runs * 1e3:.2f} ms per run")
    info = compiled.explain()
    print(f"{len(info['kernels'])} kernels; memory: {info['memory']['summary']}")


if __name__ == "__main__":
    main()
