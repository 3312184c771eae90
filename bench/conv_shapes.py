#!/usr/bin/env python3
"""Small ONNX models whose convolutions library kernels used to run in reference code: a
spectrogram stem (one input channel), a waveform stem (1-D, one channel, long window), 1-D dilated
convolutions, U-Net up-sampling (transposed convolutions) and grouped / 3-D convolutions.

    /usr/bin/python3 bench/conv_shapes.py OUT_DIR

Each model gets OUT_DIR/NAME/{model.onnx, input_0.npy, expected_0.npy} (seeded weights), the
layout bench/run.py --models-dir reads:

    /usr/bin/python3 bench/run.py --models-dir OUT_DIR --models stem_1ch,wave_1d,dilated_1d,unet_up,grouped_3d
    build/bin/kiln bench OUT_DIR/unet_up/model.onnx --threads 1 --roofline
"""
import os
import sys

import numpy as np
import torch
import torch.nn as nn

class Stem1ch(nn.Module):  # spectrogram stem: one input channel
    def __init__(s):
        super().__init__()
        s.c1 = nn.Conv2d(1, 32, 3, padding=1)
        s.c2 = nn.Conv2d(32, 32, 3, padding=1)
    def forward(s, x):
        return s.c2(torch.relu(s.c1(x)))


class Wave1d(nn.Module):  # waveform stem: 1-D, one input channel, long window
    def __init__(s):
        super().__init__()
        s.c1 = nn.Conv1d(1, 64, 80, stride=4, padding=38)
        s.c2 = nn.Conv1d(64, 64, 3, padding=1)
    def forward(s, x):
        return s.c2(torch.relu(s.c1(x)))


class Dilated1d(nn.Module):  # TCN / WaveNet: 1-D dilated convolutions
    def __init__(s):
        super().__init__()
        s.cs = nn.ModuleList([nn.Conv1d(64, 64, 3, dilation=d, padding=d) for d in (1, 2, 4, 8)])
    def forward(s, x):
        for c in s.cs:
            x = x + torch.relu(c(x))
        return x


class UNetUp(nn.Module):  # U-Net up-sampling: transposed convolutions
    def __init__(s):
        super().__init__()
        s.u1 = nn.ConvTranspose2d(128, 64, 2, stride=2)
        s.c1 = nn.Conv2d(64, 64, 3, padding=1)
        s.u2 = nn.ConvTranspose2d(64, 32, 3, stride=2, padding=1, output_padding=1)
        s.c2 = nn.Conv2d(32, 32, 3, padding=1)
    def forward(s, x):
        x = torch.relu(s.c1(s.u1(x)))
        return s.c2(torch.relu(s.u2(x)))


class Grouped3d(nn.Module):  # grouped 2-D and a 3-D convolution
    def __init__(s):
        super().__init__()
        s.g = nn.Conv2d(64, 64, 3, padding=1, groups=4)
        s.d = nn.Conv3d(8, 16, 3, padding=1)
    def forward(s, x):
        y = torch.relu(s.g(x))
        return s.d(y.reshape(1, 8, 8, 32, 32))

def models():
    """Name -> (module, input shape). Built after torch.manual_seed, so the weights are fixed."""
    return {
        "stem_1ch": (Stem1ch(), (1, 1, 128, 128)),
        "wave_1d": (Wave1d(), (1, 1, 16000)),
        "dilated_1d": (Dilated1d(), (1, 64, 4000)),
        "unet_up": (UNetUp(), (1, 128, 32, 32)),
        "grouped_3d": (Grouped3d(), (1, 64, 32, 32)),
    }


def export(name, model, shape, out):
    folder = os.path.join(out, name)
    os.makedirs(folder, exist_ok=True)
    model.eval()
    x = torch.randn(*shape)
    with torch.no_grad():
        y = model(x)
    torch.onnx.export(model, (x,), os.path.join(folder, "model.onnx"), opset_version=14,
                      input_names=["input"], output_names=["output"])
    np.save(os.path.join(folder, "input_0.npy"), x.numpy())
    np.save(os.path.join(folder, "expected_0.npy"), y.numpy())
    print(name, tuple(y.shape))


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    torch.manual_seed(0)
    for name, (model, shape) in models().items():
        export(name, model, shape, sys.argv[1])


if __name__ == "__main__":
    main()
