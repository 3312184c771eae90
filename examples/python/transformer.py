"""A transformer encoder from torch.nn, captured into Kiln's IR, and called from four threads.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/transformer.py
"""

import threading

import torch

import kiln


def main():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=128, nhead=4, dim_feedforward=512,
                                             dropout=0.0, activation="gelu", batch_first=True)
    model = torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False).eval()
    x = torch.randn(1, 32, 128)
    compiled = kiln.compile(model, example_inputs=(x,))
    kinds = [k["kind"] for k in compiled.explain()["kernels"]]
    print(f"{len(kinds)} kernels:", ", ".join(f"{kinds.count(k)} {k}" for k in sorted(set(kinds))))

    inputs = [torch.randn(1, 32, 128) for _ in range(4)]
    results = [None] * 4

    def work(i):                          # the GIL is released while Kiln runs
        results[i] = compiled(inputs[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with torch.no_grad():
        worst = max(float((r - model(i)).abs().max()) for r, i in zip(results, inputs))
    print("largest difference from eager over 4 threads:", worst)


if __name__ == "__main__":
    main()
