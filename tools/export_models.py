#!/usr/bin/env python3
"""Exports a few real model architectures to ONNX, with one input and torch's output, for Kiln's
model tests (tests/models) and benchmarks.

Run with Debian's Python, which has torch, torchvision and onnx:

    /usr/bin/python3 tools/export_models.py [OUT_DIR] [--models NAME,...] [--opset N]

OUT_DIR defaults to build/models. Each model gets a folder OUT_DIR/NAME holding

    model.onnx                       the exported model (static shapes unless the name says so)
    input_0.npy, expected_0.npy      one input and torch's output for it
    test_data_set_0/input_0.pb       the same as TensorProtos, so the folder is also an ONNX
    test_data_set_0/output_0.pb      backend test (`kiln conformance OUT_DIR` runs it)

Weights are random (torch.manual_seed), never downloaded; batch-norm statistics come from a few
train-mode forward passes on random batches before eval(). The output is deterministic.
"""
import argparse
import inspect
import math
import os
import sys
import time

import numpy as np

try:
    import onnx
    import onnx.numpy_helper
    import torch
    import torch.nn as nn
    import torchvision
except ImportError as e:  # the model tests skip when this happens
    print(f"export_models.py: cannot import {e.name}: install python3-torch, "
          f"python3-torchvision and python3-onnx (Debian) and use /usr/bin/python3",
          file=sys.stderr)
    sys.exit(77)

SEED = 0


def calibrate_batch_norm(model, shape, passes=2):
    """Fills batch-norm running statistics with train-mode passes on random batches."""
    model.train()
    with torch.no_grad():
        for _ in range(passes):
            model(torch.randn(*shape))
    model.eval()


def make_resnet18():
    model = torchvision.models.resnet18(weights=None)
    calibrate_batch_norm(model, (2, 3, 224, 224))
    return model, torch.randn(1, 3, 224, 224)


def make_resnet18_dynbatch():
    # The same network (same seed, same weights) with a symbolic batch dimension "N"; the test
    # feeds a batch of 2.
    model, _ = make_resnet18()
    return model, torch.randn(2, 3, 224, 224)


def make_mobilenet_v2():
    model = torchvision.models.mobilenet_v2(weights=None)
    calibrate_batch_norm(model, (2, 3, 224, 224))
    return model, torch.randn(1, 3, 224, 224)


def make_shufflenet_v2():
    # 16 channel shuffles (reshape, transpose, reshape) chained through splits and
    # concatenations: the network whose index expressions once grew without bound.
    model = torchvision.models.shufflenet_v2_x0_5(weights=None)
    calibrate_batch_norm(model, (2, 3, 224, 224))
    return model, torch.randn(1, 3, 224, 224)


def make_transformer_encoder():
    layer = nn.TransformerEncoderLayer(d_model=128, nhead=4, dim_feedforward=512, dropout=0.0,
                                       activation="gelu", batch_first=True)
    model = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
    model.eval()
    return model, torch.randn(1, 32, 128)


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention written with matmul and softmax and a causal mask."""

    def __init__(self, d_model, heads, seq_len):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        mask = torch.triu(torch.ones(seq_len, seq_len, dtype=torch.bool), diagonal=1)
        self.register_buffer("mask", mask)

    def forward(self, x):
        b, s, d = x.shape
        hd = d // self.heads
        q, k, v = self.qkv(x).split(d, dim=2)
        q = q.reshape(b, s, self.heads, hd).transpose(1, 2)
        k = k.reshape(b, s, self.heads, hd).transpose(1, 2)
        v = v.reshape(b, s, self.heads, hd).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(hd)
        scores = scores.masked_fill(self.mask[:s, :s], float("-inf"))
        att = torch.softmax(scores, dim=-1)
        y = torch.matmul(att, v).transpose(1, 2).reshape(b, s, d)
        return self.proj(y)


class Block(nn.Module):
    def __init__(self, d_model, heads, seq_len):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, heads, seq_len)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(),
                                 nn.Linear(4 * d_model, d_model))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class DecoderLM(nn.Module):
    """A small GPT-style decoder-only language model: token ids [B, S] -> logits [B, S, vocab]."""

    def __init__(self, vocab=512, d_model=128, heads=4, layers=2, seq_len=32):
        super().__init__()
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(seq_len, d_model)
        self.blocks = nn.Sequential(*[Block(d_model, heads, seq_len) for _ in range(layers)])
        self.ln = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab)
        self.register_buffer("positions", torch.arange(seq_len).unsqueeze(0))

    def forward(self, ids):
        x = self.tok(ids) + self.pos(self.positions[:, : ids.shape[1]])
        return self.head(self.ln(self.blocks(x)))


def make_decoder_lm():
    model = DecoderLM()
    model.eval()
    return model, torch.randint(0, 512, (1, 32), dtype=torch.int64)


def make_resnet50():
    model = torchvision.models.resnet50(weights=None)
    calibrate_batch_norm(model, (2, 3, 224, 224))
    return model, torch.randn(1, 3, 224, 224)


def make_vit():
    # ViT-S/16: 12 layers, width 384, 6 heads, MLP 1536, 224x224 images.
    model = torchvision.models.VisionTransformer(image_size=224, patch_size=16, num_layers=12,
                                                 num_heads=6, hidden_dim=384, mlp_dim=1536)
    # torchvision starts the classifier at zero (so every output would be 0): random instead.
    nn.init.normal_(model.heads.head.weight, std=0.02)
    nn.init.normal_(model.heads.head.bias, std=0.02)
    model.eval()
    return model, torch.randn(1, 3, 224, 224)


class BertEncoder(nn.Module):
    """A BERT-style encoder (BERT-mini sizes): token, position and segment embeddings, layer
    norm, post-norm transformer layers with GELU, token ids [B, S] -> hidden states [B, S, D]."""

    def __init__(self, vocab=30522, d_model=256, heads=4, layers=4, ff=1024, seq_len=128):
        super().__init__()
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(seq_len, d_model)
        self.seg = nn.Embedding(2, d_model)
        self.ln = nn.LayerNorm(d_model, eps=1e-12)
        layer = nn.TransformerEncoderLayer(d_model, heads, ff, dropout=0.0, activation="gelu",
                                           batch_first=True, layer_norm_eps=1e-12)
        self.encoder = nn.TransformerEncoder(layer, num_layers=layers, enable_nested_tensor=False)
        self.register_buffer("positions", torch.arange(seq_len).unsqueeze(0))
        self.register_buffer("segments", torch.zeros(1, seq_len, dtype=torch.int64))

    def forward(self, ids):
        s = ids.shape[1]
        x = self.tok(ids) + self.pos(self.positions[:, :s]) + self.seg(self.segments[:, :s])
        return self.encoder(self.ln(x))


def make_bert():
    model = BertEncoder()
    model.eval()
    return model, torch.randint(0, 30522, (1, 128), dtype=torch.int64)


def make_bert_dynamic():
    # The BERT-style encoder with batch and sequence as dynamic axes (N, S), positions up to 512:
    # one compile over N = 1..32, S = 1..512 (bench/ranges.py).
    model = BertEncoder(seq_len=512)
    model.eval()
    return model, torch.randint(0, 30522, (3, 37), dtype=torch.int64)


def make_resnet50_b64():
    model, _ = make_resnet50()
    return model, torch.randn(64, 3, 224, 224)


def make_bert_base_b8():
    # BERT-base sizes: 12 layers, width 768, 12 heads, FFN 3072; batch 8, sequence 128.
    model = BertEncoder(d_model=768, heads=12, layers=12, ff=3072)
    model.eval()
    return model, torch.randint(0, 30522, (8, 128), dtype=torch.int64)


# The models of the test suite (tests/models exports these).
TEST_MODELS = ["resnet18", "resnet18_dynbatch", "mobilenet_v2", "shufflenet_v2",
               "transformer_encoder", "decoder_lm"]

MODELS = {
    "resnet50": make_resnet50,
    "vit": make_vit,
    "bert": make_bert,
    "resnet18": make_resnet18,
    "resnet18_dynbatch": make_resnet18_dynbatch,
    "mobilenet_v2": make_mobilenet_v2,
    "shufflenet_v2": make_shufflenet_v2,
    "transformer_encoder": make_transformer_encoder,
    "decoder_lm": make_decoder_lm,
    "bert_dynamic": make_bert_dynamic,
    # The GPU benchmark's larger shapes (bench/gpu.py).
    "resnet50_b64": make_resnet50_b64,
    "bert_base_b8": make_bert_base_b8,
}


# Models whose inputs and outputs keep more than a dynamic batch.
DYNAMIC_AXES = {"bert_dynamic": {"input": {0: "N", 1: "S"}, "output": {0: "N", 1: "S"}}}


def save_pb(array, name, path):
    tensor = onnx.numpy_helper.from_array(array, name)
    with open(path, "wb") as f:
        f.write(tensor.SerializeToString())


def export(name, out_dir, opset):
    torch.manual_seed(SEED)
    model, x = MODELS[name]()
    folder = os.path.join(out_dir, name)
    os.makedirs(os.path.join(folder, "test_data_set_0"), exist_ok=True)
    path = os.path.join(folder, "model.onnx")
    dynamic = DYNAMIC_AXES.get(name, {"input": {0: "N"}, "output": {0: "N"}}
                               if name.endswith("_dynbatch") else None)
    # Grad mode stays on: under no_grad, nn.TransformerEncoder takes a fused fast path
    # (aten::_transformer_encoder_layer_fwd) that has no ONNX export. The reference output is
    # computed the same way, so it matches the exported graph's computation.
    expected = model(x).detach()
    # TrainingMode.PRESERVE exports the eval-mode model as it is: torch's default (EVAL) would fold
    # each BatchNormalization into the convolution before it, a job Kiln's fold-batch-norm pass
    # does itself, so the exported graphs keep their batch norms (inference mode) for Kiln to fold.
    # torch >= 2.5 defaults to its dynamo exporter, which traces differently; the TorchScript
    # exporter (Debian's torch 1.13 has only it) keeps the exports alike everywhere.
    legacy = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    torch.onnx.export(model, (x,), path, opset_version=opset, input_names=["input"],
                      output_names=["output"], dynamic_axes=dynamic, do_constant_folding=True,
                      training=torch.onnx.TrainingMode.PRESERVE, **legacy)
    onnx.checker.check_model(onnx.load(path))
    x_np, y_np = x.numpy(), expected.numpy()
    np.save(os.path.join(folder, "input_0.npy"), x_np)
    np.save(os.path.join(folder, "expected_0.npy"), y_np)
    save_pb(x_np, "input", os.path.join(folder, "test_data_set_0", "input_0.pb"))
    save_pb(y_np, "output", os.path.join(folder, "test_data_set_0", "output_0.pb"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", nargs="?", default="build/models")
    parser.add_argument("--models", default=",".join(TEST_MODELS),
                        help="comma-separated subset of: " + ", ".join(MODELS) +
                        " (default: the test suite's: " + ",".join(TEST_MODELS) + "; the others "
                        "are larger, for bench/run.py)")
    parser.add_argument("--opset", type=int, default=14)
    args = parser.parse_args()
    names = [n for n in args.models.split(",") if n]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        parser.error("unknown model(s): " + ", ".join(unknown))
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    for name in names:
        start = time.time()
        export(name, args.out_dir, args.opset)
        print(f"exported {name} to {os.path.join(args.out_dir, name)} "
              f"in {time.time() - start:.1f} s")


if __name__ == "__main__":
    main()
