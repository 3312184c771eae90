#!/usr/bin/env python3
"""The benchmark's model zoo: torchvision 0.14's classification families (one or two sizes each),
its segmentation models and detection backbones, recurrent models, 1-D convolutional audio
models, encoder-decoder and U-Net shapes, transformers of several widths and sequence lengths, and
small models for op patterns none of those cover. Weights are random (torch.manual_seed), never
downloaded; batch-norm statistics come from train-mode passes on random batches, as in
tools/export_models.py. Inputs are small (224x224 or less, short sequences) so that the whole zoo
runs in minutes on a small machine.

    /usr/bin/python3 bench/zoo.py OUT_DIR [--models NAME,...] [--list]

Each model gets OUT_DIR/NAME/{model.onnx, input_0.npy, expected_0.npy, expected_1.npy, ...}
(outputs named output_0, output_1, ...), the layout `bench/run.py --zoo` reads (it calls this
script for the models missing from its --zoo-dir). Where torch has a GPU, also
low_precision.json: torch's own f16 and bf16 error per output (tests/models/check_model.py).
Models are not committed: export them where you like.
"""
import argparse
import inspect
import json
import math
import os
import sys
import time

import numpy as np

try:
    import onnx
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import torchvision
    import torchvision.models as tvm
    from torchvision.models import detection as tvd
    from torchvision.models import segmentation as tvs
except ImportError as e:
    print(f"zoo.py: cannot import {e.name}: install python3-torch, python3-torchvision and "
          f"python3-onnx (Debian) and use /usr/bin/python3", file=sys.stderr)
    sys.exit(77)

SEED = 0


def image(size=224, channels=3):
    return (1, channels, size, size)


# ---------------------------------------------------------------------------------------------
# Wrappers: every model returns a tensor or a tuple of tensors.

class Outputs(nn.Module):
    """Returns a dict's (segmentation: {'out': ...}; backbones: feature maps by level) values as
    a tuple, in the dict's order."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        y = self.model(x)
        return tuple(y.values()) if isinstance(y, dict) else y


# ---------------------------------------------------------------------------------------------
# Recurrent models.

class RnnTagger(nn.Module):
    """Token ids [1, S] -> per-token logits: embedding, an LSTM or GRU, a linear head."""

    def __init__(self, cell="lstm", vocab=1000, emb=128, hidden=256, layers=1, bidirectional=False,
                 classes=32):
        super().__init__()
        self.emb = nn.Embedding(vocab, emb)
        rnn = nn.LSTM if cell == "lstm" else nn.GRU
        self.rnn = rnn(emb, hidden, num_layers=layers, bidirectional=bidirectional,
                       batch_first=True)
        self.head = nn.Linear(hidden * (2 if bidirectional else 1), classes)

    def forward(self, ids):
        y, _ = self.rnn(self.emb(ids))
        return self.head(y)


class RnnEncoder(nn.Module):
    """Feature frames [1, T, F] -> the last hidden state: a speech-style recurrent encoder."""

    def __init__(self, cell="gru", features=80, hidden=256, layers=2, bidirectional=False):
        super().__init__()
        rnn = nn.LSTM if cell == "lstm" else nn.GRU
        self.rnn = rnn(features, hidden, num_layers=layers, bidirectional=bidirectional,
                       batch_first=True)

    def forward(self, x):
        y, _ = self.rnn(x)
        return y


# ---------------------------------------------------------------------------------------------
# 1-D convolutional audio models.

class M5(nn.Module):
    """M5 (Dai et al. 2017): a raw-waveform classifier, one input channel, long first window."""

    def __init__(self, channels=64, classes=35):
        super().__init__()
        c = channels
        self.net = nn.Sequential(
            nn.Conv1d(1, c, 80, stride=16), nn.BatchNorm1d(c), nn.ReLU(), nn.MaxPool1d(4),
            nn.Conv1d(c, c, 3), nn.BatchNorm1d(c), nn.ReLU(), nn.MaxPool1d(4),
            nn.Conv1d(c, 2 * c, 3), nn.BatchNorm1d(2 * c), nn.ReLU(), nn.MaxPool1d(4),
            nn.Conv1d(2 * c, 2 * c, 3), nn.BatchNorm1d(2 * c), nn.ReLU(), nn.MaxPool1d(4))
        self.fc = nn.Linear(2 * c, classes)

    def forward(self, x):
        return self.fc(self.net(x).mean(dim=2))


class WaveFeatureEncoder(nn.Module):
    """wav2vec 2.0's feature encoder (7 strided 1-D convolutions, group norm first, GELU), at a
    reduced width."""

    def __init__(self, width=256):
        super().__init__()
        layers = []
        spec = [(10, 5)] + [(3, 2)] * 4 + [(2, 2)] * 2
        cin = 1
        for i, (k, s) in enumerate(spec):
            layers.append(nn.Conv1d(cin, width, k, stride=s, bias=False))
            if i == 0:
                layers.append(nn.GroupNorm(width, width))
            layers.append(nn.GELU())
            cin = width
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x).transpose(1, 2)


class Tcn(nn.Module):
    """A temporal convolutional network: causal dilated 1-D convolutions with residuals."""

    def __init__(self, channels=64, levels=6, kernel=3):
        super().__init__()
        self.inp = nn.Conv1d(40, channels, 1)
        self.convs = nn.ModuleList(
            nn.Conv1d(channels, channels, kernel, dilation=2 ** i, padding=(kernel - 1) * 2 ** i)
            for i in range(levels))
        self.out = nn.Conv1d(channels, 10, 1)

    def forward(self, x):
        x = self.inp(x)
        t = x.shape[2]
        for c in self.convs:
            x = x + torch.relu(c(x)[:, :, :t])
        return self.out(x)


class KwsCnn(nn.Module):
    """A keyword-spotting CNN on a log-mel spectrogram [1, 1, 40, 101]: one-channel stem."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(1, 64, (20, 8)), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(64, 64, (10, 4)), nn.BatchNorm2d(64), nn.ReLU())
        self.fc = nn.Linear(64, 12)

    def forward(self, x):
        return self.fc(self.net(x).mean(dim=(2, 3)))


# ---------------------------------------------------------------------------------------------
# Encoder-decoder and U-Net shapes.

def conv_block(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(),
                         nn.Conv2d(cout, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU())


class UNet(nn.Module):
    """U-Net (Ronneberger et al.): four levels down with max pooling, up with transposed
    convolutions and skip concatenations."""

    def __init__(self, base=16, classes=2):
        super().__init__()
        w = [base, 2 * base, 4 * base, 8 * base, 16 * base]
        self.down = nn.ModuleList([conv_block(3, w[0])] +
                                  [conv_block(w[i], w[i + 1]) for i in range(4)])
        self.up = nn.ModuleList(nn.ConvTranspose2d(w[i + 1], w[i], 2, stride=2)
                                for i in reversed(range(4)))
        self.dec = nn.ModuleList(conv_block(2 * w[i], w[i]) for i in reversed(range(4)))
        self.head = nn.Conv2d(w[0], classes, 1)

    def forward(self, x):
        skips = []
        for i, d in enumerate(self.down):
            x = d(x if i == 0 else F.max_pool2d(x, 2))
            skips.append(x)
        skips.pop()
        for u, d in zip(self.up, self.dec):
            x = d(torch.cat([u(x), skips.pop()], dim=1))
        return self.head(x)


class ConvAutoencoder(nn.Module):
    """A convolutional autoencoder: strided convolutions down, transposed convolutions (3x3,
    stride 2, output padding) up, sigmoid output."""

    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(3, 32, 3, 2, 1), nn.ReLU(), nn.Conv2d(32, 64, 3, 2, 1),
                                 nn.ReLU(), nn.Conv2d(64, 128, 3, 2, 1), nn.ReLU())
        self.dec = nn.Sequential(
            nn.ConvTranspose2d(128, 64, 3, 2, 1, output_padding=1), nn.ReLU(),
            nn.ConvTranspose2d(64, 32, 3, 2, 1, output_padding=1), nn.ReLU(),
            nn.ConvTranspose2d(32, 3, 3, 2, 1, output_padding=1), nn.Sigmoid())

    def forward(self, x):
        return self.dec(self.enc(x))


class Seq2SeqTransformer(nn.Module):
    """nn.Transformer (encoder-decoder, causal target mask) with embeddings and a vocabulary
    head: (source ids, target ids) -> logits."""

    def __init__(self, vocab=1000, d_model=256, heads=4, layers=2, src_len=32, tgt_len=16):
        super().__init__()
        self.emb = nn.Embedding(vocab, d_model)
        self.pos = nn.Parameter(torch.randn(1, max(src_len, tgt_len), d_model) * 0.02)
        self.tf = nn.Transformer(d_model, heads, layers, layers, 4 * d_model, dropout=0.0,
                                 batch_first=True)
        self.head = nn.Linear(d_model, vocab)
        self.register_buffer("mask", self.tf.generate_square_subsequent_mask(tgt_len))

    def forward(self, src, tgt):
        s = self.emb(src) + self.pos[:, :src.shape[1]]
        t = self.emb(tgt) + self.pos[:, :tgt.shape[1]]
        return self.head(self.tf(s, t, tgt_mask=self.mask))


# ---------------------------------------------------------------------------------------------
# Transformers.

class Encoder(nn.Module):
    """A pre-norm transformer encoder over features [1, S, D] (nn.TransformerEncoder, GELU)."""

    def __init__(self, d_model, heads, layers):
        super().__init__()
        layer = nn.TransformerEncoderLayer(d_model, heads, 4 * d_model, dropout=0.0,
                                           activation="gelu", batch_first=True, norm_first=True)
        self.enc = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)

    def forward(self, x):
        return self.enc(x)


class GptBlock(nn.Module):
    def __init__(self, d, heads, seq, gelu="none"):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate=gelu),
                                 nn.Linear(4 * d, d))
        self.register_buffer("mask", torch.triu(torch.ones(seq, seq, dtype=torch.bool), 1))

    def forward(self, x):
        b, s, d = x.shape
        hd = d // self.heads
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (t.reshape(b, s, self.heads, hd).transpose(1, 2) for t in (q, k, v))
        a = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(hd)
        a = torch.softmax(a.masked_fill(self.mask[:s, :s], float("-inf")), dim=-1)
        x = x + self.proj(torch.matmul(a, v).transpose(1, 2).reshape(b, s, d))
        return x + self.mlp(self.ln2(x))


class Gpt(nn.Module):
    """A GPT-style decoder: token ids [1, S] -> logits [1, S, vocab]; `gelu="tanh"` takes GPT-2's
    tanh form of GELU (exported as its tanh, pow and products)."""

    def __init__(self, vocab=2048, d=256, heads=4, layers=4, seq=128, gelu="none"):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.blocks = nn.Sequential(*[GptBlock(d, heads, seq, gelu) for _ in range(layers)])
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab)
        self.register_buffer("positions", torch.arange(seq).unsqueeze(0))

    def forward(self, ids):
        x = self.tok(ids) + self.pos(self.positions[:, :ids.shape[1]])
        return self.head(self.ln(self.blocks(x)))


# ---------------------------------------------------------------------------------------------
# Op patterns the families above do not cover.

class MixerBlock(nn.Module):
    def __init__(self, tokens, d):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.tok = nn.Sequential(nn.Linear(tokens, 2 * tokens), nn.GELU(),
                                 nn.Linear(2 * tokens, tokens))
        self.ch = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.tok(self.ln1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.ch(self.ln2(x))


class MlpMixer(nn.Module):
    """MLP-Mixer: token mixing through a transpose on every block."""

    def __init__(self, size=128, patch=16, d=256, depth=4, classes=100):
        super().__init__()
        tokens = (size // patch) ** 2
        self.stem = nn.Conv2d(3, d, patch, patch)
        self.blocks = nn.Sequential(*[MixerBlock(tokens, d) for _ in range(depth)])
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, classes)

    def forward(self, x):
        x = self.stem(x).flatten(2).transpose(1, 2)
        return self.head(self.ln(self.blocks(x)).mean(dim=1))


class PointNet(nn.Module):
    """PointNet classifier: shared per-point MLPs (1-D convolutions of kernel 1), a max over the
    points, a learned 3x3 input transform (batched matmul)."""

    def __init__(self, classes=40):
        super().__init__()

        def mlp(*w):
            return nn.Sequential(*[m for a, b in zip(w, w[1:])
                                   for m in (nn.Conv1d(a, b, 1), nn.BatchNorm1d(b), nn.ReLU())])

        self.tnet, self.tfc = mlp(3, 64, 128, 512), nn.Linear(512, 9)
        self.feat, self.head = mlp(3, 64, 128, 512), nn.Linear(512, classes)

    def forward(self, x):  # x: [1, 3, N]
        eye = torch.eye(3, device=x.device, dtype=x.dtype)  # x's device: the f16 check runs on a GPU
        t = self.tfc(self.tnet(x).amax(dim=2)).reshape(-1, 3, 3) + eye
        x = torch.bmm(t, x)
        return self.head(self.feat(x).amax(dim=2))


class SppNeck(nn.Module):
    """YOLO's spatial pyramid pooling: max pooling of stride 1 (5, 9, 13) and a concatenation,
    then SiLU convolutions and a nearest up-sampling."""

    def __init__(self, c=128):
        super().__init__()
        self.cv1 = nn.Sequential(nn.Conv2d(c, c // 2, 1), nn.BatchNorm2d(c // 2), nn.SiLU())
        self.pools = nn.ModuleList(nn.MaxPool2d(k, 1, k // 2) for k in (5, 9, 13))
        self.cv2 = nn.Sequential(nn.Conv2d(2 * c, c, 1), nn.BatchNorm2d(c), nn.SiLU())

    def forward(self, x):
        y = self.cv1(x)
        y = self.cv2(torch.cat([y] + [p(y) for p in self.pools], dim=1))
        return F.interpolate(y, scale_factor=2.0, mode="nearest")


class SqueezeExcite(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.fc1, self.fc2 = nn.Conv2d(c, c // 4, 1), nn.Conv2d(c // 4, c, 1)

    def forward(self, x):
        s = x.mean(dim=(2, 3), keepdim=True)
        return x * torch.sigmoid(self.fc2(torch.relu(self.fc1(s))))


class DepthwiseLarge(nn.Module):
    """ConvNeXt-style blocks: depthwise 7x7 and 5x5 convolutions, layer norm over channels in
    NHWC (permutes), squeeze-and-excitation, hardswish."""

    def __init__(self, c=96):
        super().__init__()
        self.stem = nn.Conv2d(3, c, 4, 4)
        self.dw7 = nn.Conv2d(c, c, 7, padding=3, groups=c)
        self.dw5 = nn.Conv2d(c, c, 5, padding=2, groups=c)
        self.ln = nn.LayerNorm(c)
        self.pw1, self.pw2 = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)
        self.se = SqueezeExcite(c)

    def forward(self, x):
        x = self.stem(x)
        y = self.ln(self.dw7(x).permute(0, 2, 3, 1))
        y = self.pw2(F.gelu(self.pw1(y))).permute(0, 3, 1, 2)
        x = x + y
        return F.hardswish(self.se(self.dw5(x)))


class StridedReduce(nn.Module):
    """Reductions and normalisations over non-contiguous axes: softmax over channels, mean and
    max over the height, instance norm, a sum over the batch of attention maps."""

    def __init__(self, c=64):
        super().__init__()
        self.conv = nn.Conv2d(3, c, 3, padding=1)
        self.inorm = nn.InstanceNorm2d(c, affine=True)

    def forward(self, x):
        x = self.conv(x)
        a = torch.softmax(x, dim=1)
        h = x.mean(dim=2, keepdim=True) + x.amax(dim=2, keepdim=True)
        return self.inorm(a * h) + x.sum(dim=3, keepdim=True)


class Upsampler(nn.Module):
    """Super-resolution shapes: bilinear resizing (align_corners both ways), pixel shuffle
    (depth-to-space) and its inverse, reflection padding."""

    def __init__(self, c=32):
        super().__init__()
        self.c1 = nn.Conv2d(3, c, 3, padding=1, padding_mode="reflect")
        self.c2 = nn.Conv2d(c, 3 * 4, 3, padding=1)
        self.shuffle, self.unshuffle = nn.PixelShuffle(2), nn.PixelUnshuffle(2)

    def forward(self, x):
        y = torch.relu(self.c1(x))
        y = self.shuffle(self.c2(y))
        z = F.interpolate(x, scale_factor=2.0, mode="bilinear", align_corners=False)
        w = F.interpolate(x, size=(2 * x.shape[2], 2 * x.shape[3]), mode="bilinear",
                          align_corners=True)
        return y + z + w, self.unshuffle(y)


class GatherScatter(nn.Module):
    """Index ops: an embedding bag (gather + sum), top-k, a one-hot by comparison, cumsum."""

    def __init__(self, vocab=5000, d=128):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.fc = nn.Linear(d, 64)

    def forward(self, ids):  # [1, S] int64
        e = self.emb(ids)
        scores = self.fc(e).cumsum(dim=1)
        top, idx = torch.topk(scores, 8, dim=2)
        onehot = (idx.unsqueeze(-1) == torch.arange(64, device=idx.device)).float().sum(dim=2)
        return e.sum(dim=1), top, onehot


# ---------------------------------------------------------------------------------------------
# The table.

def tv(fn, size=224, **kw):
    """A torchvision classifier with random weights and calibrated batch norm."""
    def make():
        return fn(weights=None, **kw), image(size)
    return make


def seg(fn, size):
    def make():
        return Outputs(fn(weights=None, weights_backbone=None, aux_loss=False)), image(size)
    return make


def det_backbone(fn, size, **kw):
    def make():
        model = fn(weights=None, weights_backbone=None, **kw)
        return Outputs(model.backbone), image(size)
    return make


def plain(fn, shape):
    def make():
        return fn(), shape
    return make


def tokens(fn, length, vocab):
    def make():
        return fn(), ((1, length), torch.int64, vocab)
    return make


def vit_tiny():
    # ViT-Ti/16 (width 192, 3 heads, 12 layers); torchvision zero-initialises the head.
    model = tvm.VisionTransformer(224, 16, 12, 3, 192, 768)
    nn.init.normal_(model.heads.head.weight, std=0.02)
    return model, image(224)


def vit_b_32():
    model = tvm.vit_b_32(weights=None)
    nn.init.normal_(model.heads.head.weight, std=0.02)
    return model, image(224)


def seq2seq():
    return Seq2SeqTransformer(), [((1, 32), torch.int64, 1000), ((1, 16), torch.int64, 1000)]


# name -> constructor returning (module, input spec); an input spec is a shape (random normal
# floats), (shape, torch.int64, high) for token ids, or a list of those for several inputs.
ZOO = {
    # torchvision classification, one or two sizes per family.
    "alexnet": tv(tvm.alexnet),
    "vgg11_bn": tv(tvm.vgg11_bn),  # 224: its adaptive pooling to 7x7 exports only from 7k
    "resnet18": tv(tvm.resnet18),
    "resnet50": tv(tvm.resnet50),
    "resnext50_32x4d": tv(tvm.resnext50_32x4d, 160),
    "wide_resnet50_2": tv(tvm.wide_resnet50_2, 128),
    "squeezenet1_1": tv(tvm.squeezenet1_1),
    "densenet121": tv(tvm.densenet121, 160),
    "inception_v3": tv(tvm.inception_v3, 160, aux_logits=False, init_weights=True),
    "googlenet": tv(tvm.googlenet, 224, aux_logits=False, init_weights=True),
    "shufflenet_v2_x1_0": tv(tvm.shufflenet_v2_x1_0),
    "mobilenet_v2": tv(tvm.mobilenet_v2),
    "mobilenet_v3_small": tv(tvm.mobilenet_v3_small),
    "mobilenet_v3_large": tv(tvm.mobilenet_v3_large),
    "mnasnet1_0": tv(tvm.mnasnet1_0),
    "efficientnet_b0": tv(tvm.efficientnet_b0),
    "efficientnet_v2_s": tv(tvm.efficientnet_v2_s, 160),
    "regnet_x_400mf": tv(tvm.regnet_x_400mf),
    "regnet_y_400mf": tv(tvm.regnet_y_400mf),
    "vit_tiny_16": vit_tiny,
    "vit_b_32": vit_b_32,
    "swin_t": tv(tvm.swin_t),
    "convnext_tiny": tv(tvm.convnext_tiny, 160),
    "maxvit_t": tv(tvm.maxvit_t),
    "r3d_18": lambda: (tvm.video.r3d_18(weights=None), (1, 3, 8, 64, 64)),  # a short clip
    # Segmentation models and detection backbones.
    "fcn_resnet50": seg(tvs.fcn_resnet50, 128),
    "deeplabv3_mobilenet_v3": seg(tvs.deeplabv3_mobilenet_v3_large, 224),
    "lraspp_mobilenet_v3": seg(tvs.lraspp_mobilenet_v3_large, 224),
    "fasterrcnn_resnet50_fpn_backbone": det_backbone(tvd.fasterrcnn_resnet50_fpn, 256),
    "fasterrcnn_mobilenet_v3_fpn_backbone": det_backbone(tvd.fasterrcnn_mobilenet_v3_large_fpn,
                                                         320),
    "ssdlite320_backbone": det_backbone(tvd.ssdlite320_mobilenet_v3_large, 320),
    # Recurrent models.
    "lstm_tagger": tokens(lambda: RnnTagger("lstm"), 32, 1000),
    "gru_tagger": tokens(lambda: RnnTagger("gru"), 32, 1000),
    "bilstm_tagger": tokens(lambda: RnnTagger("lstm", bidirectional=True), 32, 1000),
    "stacked_gru_encoder": plain(lambda: RnnEncoder("gru", layers=3), (1, 100, 80)),
    "bilstm_encoder": plain(lambda: RnnEncoder("lstm", layers=2, bidirectional=True),
                            (1, 100, 80)),
    # 1-D convolutional audio models.
    "m5_audio": plain(M5, (1, 1, 8000)),
    "wav2vec_features": plain(WaveFeatureEncoder, (1, 1, 16000)),
    "tcn": plain(Tcn, (1, 40, 400)),
    "kws_cnn": plain(KwsCnn, (1, 1, 40, 101)),
    # Encoder-decoder and U-Net shapes.
    "unet": plain(UNet, image(128)),
    "conv_autoencoder": plain(ConvAutoencoder, image(128)),
    "seq2seq_transformer": seq2seq,
    # Transformers of several widths and sequence lengths.
    "encoder_w128_s32": plain(lambda: Encoder(128, 4, 2), (1, 32, 128)),
    "encoder_w256_s128": plain(lambda: Encoder(256, 4, 4), (1, 128, 256)),
    "encoder_w512_s256": plain(lambda: Encoder(512, 8, 2), (1, 256, 512)),
    "encoder_w768_s16": plain(lambda: Encoder(768, 12, 2), (1, 16, 768)),
    "gpt_w256_s128": tokens(Gpt, 128, 2048),
    "gpt2_tanh_w384_s256": tokens(lambda: Gpt(d=384, heads=6, seq=256, gelu="tanh"), 256, 2048),
    # Op patterns none of the above cover.
    "mlp_mixer": plain(MlpMixer, image(128)),
    "pointnet": plain(PointNet, (1, 3, 1024)),
    "spp_neck": plain(SppNeck, (1, 128, 20, 20)),
    "depthwise_large": plain(DepthwiseLarge, image(128)),
    "strided_reduce": plain(StridedReduce, image(64)),
    "upsampler": plain(Upsampler, image(64)),
    "gather_topk": tokens(GatherScatter, 64, 5000),
}

def calibrate_batch_norm(model, inputs, passes=2):
    """Fills batch-norm running statistics with train-mode passes on random batches (batch 2, as
    tools/export_models.py; a batch of 1 would leave single-value statistics)."""
    if not any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules()):
        return
    model.train()
    with torch.no_grad():
        for _ in range(passes):
            model(*[torch.cat([x, torch.randn_like(x) if x.is_floating_point() else x])
                    for x in inputs])
    model.eval()


def make_inputs(spec):
    specs = spec if isinstance(spec, list) else [spec]
    out = []
    for s in specs:
        if isinstance(s, tuple) and len(s) == 3 and isinstance(s[1], torch.dtype):
            out.append(torch.randint(0, s[2], s[0], dtype=s[1]))
        else:
            out.append(torch.randn(*s))
    return out


def export(name, out_dir, opset):
    torch.manual_seed(SEED)
    model, spec = ZOO[name]()
    inputs = make_inputs(spec)
    calibrate_batch_norm(model, inputs)
    model.eval()
    folder = os.path.join(out_dir, name)
    os.makedirs(folder, exist_ok=True)
    # Grad mode stays on, as in tools/export_models.py: under no_grad nn.TransformerEncoder takes
    # a fused path that has no ONNX export.
    expected = model(*inputs)
    expected = list(expected) if isinstance(expected, (tuple, list)) else [expected]
    in_names = [f"input_{i}" for i in range(len(inputs))]
    out_names = [f"output_{i}" for i in range(len(expected))]
    legacy = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    tmp = os.path.join(folder, "model.onnx.tmp")
    torch.onnx.export(model, tuple(inputs), tmp, opset_version=opset, input_names=in_names,
                      output_names=out_names, do_constant_folding=True,
                      training=torch.onnx.TrainingMode.PRESERVE, **legacy)
    onnx.checker.check_model(tmp)
    for i, x in enumerate(inputs):
        np.save(os.path.join(folder, f"input_{i}.npy"), x.numpy())
    for i, y in enumerate(expected):
        np.save(os.path.join(folder, f"expected_{i}.npy"), y.detach().numpy())
    if torch.cuda.is_available():
        write_low_precision_errors(model, inputs, expected, folder)
    os.replace(tmp, os.path.join(folder, "model.onnx"))  # last: its presence means complete


def write_low_precision_errors(model, inputs, expected, folder):
    """torch's own error in f16 and bf16 on the GPU, per output, as check_model.py measures
    Kiln's (max |got - f32| / max |f32|; null where torch's output is not finite, e.g. values past
    f16's range): folder/low_precision.json, the floor of check_model.py's limit in those
    precisions. How much a model's outputs move in a low precision is the model's own property."""
    errors = {}
    for name, dtype in [("f16", torch.float16), ("bf16", torch.bfloat16)]:
        low = model.to("cuda", dtype)
        args = [x.to("cuda", dtype) if x.is_floating_point() else x.to("cuda") for x in inputs]
        with torch.no_grad():
            got = low(*args)
        got = list(got) if isinstance(got, (tuple, list)) else [got]
        errors[name] = []
        for g, want in zip(got, expected):
            g = g.float().cpu().double()
            want = want.detach().double()
            err = float((g - want).abs().max() / want.abs().max())
            errors[name].append(err if math.isfinite(err) else None)
        model.to("cpu", torch.float32)
    with open(os.path.join(folder, "low_precision.json"), "w") as f:
        json.dump(errors, f)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", nargs="?")
    parser.add_argument("--models", default="", help="comma-separated subset (default: all)")
    parser.add_argument("--opset", type=int, default=14)
    parser.add_argument("--list", action="store_true", help="print the zoo's names and exit")
    args = parser.parse_args()
    if args.list:
        print("\n".join(ZOO))
        return 0
    if not args.out_dir:
        parser.error("OUT_DIR is required")
    names = [n for n in args.models.split(",") if n] or list(ZOO)
    unknown = [n for n in names if n not in ZOO]
    if unknown:
        parser.error("unknown model(s): " + ", ".join(unknown))
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    failed = 0
    for name in names:
        start = time.time()
        try:
            export(name, args.out_dir, args.opset)
            print(f"exported {name} in {time.time() - start:.1f} s", flush=True)
        except Exception as e:  # one model's export failure does not stop the others
            failed += 1
            msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            print(f"FAILED {name}: {type(e).__name__}: {msg[:300]}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
