#!/usr/bin/python3
"""gen_models.py - build the benchmark models and export them to ONNX.

Run with Debian's /usr/bin/python3 (python3-torch 1.13, python3-torchvision
0.14), not the venv:

    /usr/bin/python3 bench/gen_models.py [--out bench/out] [--models a,b] [--opset 17] [--force]

For every model: random weights (torch.manual_seed(0) before building it),
BatchNorm running statistics calibrated on random data (so activations keep
a sane scale, as in a trained network), eval mode, then

    OUT/<m>.onnx              static shapes, opset --opset (13-17)
    OUT/<m>.in.<name>.npy     the input(s), named as the ONNX graph inputs
    OUT/<m>.out.<i>.npy       torch's output(s), flattened, for the correctness check
    OUT/<m>.state.pt          the state dict, so the torch peer times the same weights
    OUT/models.json           manifest: inputs (name, shape, dtype), outputs, opset, versions

The same file is imported by run.py's torch worker (build(name)) to get the
eager nn.Module back. Model names are fixed; see MODELS.
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))


# ---- models -----------------------------------------------------------------

class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))

    def forward(self, x):
        return self.net(x)


class SmallCNN(nn.Module):
    """[conv3x3(pad1)-BN-ReLU-maxpool2] x 2 (3->32->64), flatten, linear -> 10 on 3x32x32."""

    def __init__(self):
        super().__init__()
        layers = []
        for cin, cout in ((3, 32), (32, 64)):
            layers += [nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(), nn.MaxPool2d(2)]
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(64 * 8 * 8, 10)

    def forward(self, x):
        return self.fc(torch.flatten(self.features(x), 1))


class Chain(nn.Module):
    """n elementwise ops cycling add-const, mul-const, relu, neg, sub-const (per-node overhead)."""

    def __init__(self, n=1000):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.n = n
        # Per cycle x -> m - b * relu-free(x + a): slope -b with b alternating 2
        # and 0.5, m keeping values in [0, R], so the output still depends on
        # the input after 1000 ops. Python floats: scalar constants in ONNX.
        self.consts, r = [], 4.0
        for i, a in enumerate(torch.rand((n + 4) // 5, generator=g).tolist()):
            b = 2.0 if i % 2 == 0 else 0.5
            self.consts.append((a, b, b * (r + a)))
            r *= b

    def forward(self, x):
        for i in range(self.n):
            a, b, m = self.consts[i // 5]
            k = i % 5
            if k == 0:
                x = x + a
            elif k == 1:
                x = x * b
            elif k == 2:
                x = torch.relu(x)
            elif k == 3:
                x = -x
            else:
                x = x - (-m)
        return x


class ManualAttention(nn.Module):
    """Multi-head self-attention written out: q @ k^T / sqrt(d), (mask), softmax, @ v."""

    def __init__(self, d, heads, fused_qkv=False):
        super().__init__()
        self.h, self.dh = heads, d // heads
        self.fused = fused_qkv
        if fused_qkv:
            self.qkv = nn.Linear(d, 3 * d)
        else:
            self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.proj = nn.Linear(d, d)

    def forward(self, x, mask=None):
        b, t, d = x.shape
        if self.fused:
            q, k, v = self.qkv(x).split(d, dim=2)
        else:
            q, k, v = self.q(x), self.k(x), self.v(x)
        q = q.reshape(b, t, self.h, self.dh).transpose(1, 2)
        k = k.reshape(b, t, self.h, self.dh).transpose(1, 2)
        v = v.reshape(b, t, self.h, self.dh).transpose(1, 2)
        att = q @ k.transpose(-2, -1) / math.sqrt(self.dh)
        if mask is not None:
            att = att.masked_fill(mask, float("-inf"))
        att = torch.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        return self.proj(y)


class ManualEncoderLayer(nn.Module):
    """Post-LN encoder layer (as nn.TransformerEncoderLayer's default), hand-written attention."""

    def __init__(self, d=256, heads=4, ff=1024):
        super().__init__()
        self.attn = ManualAttention(d, heads)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.ff1, self.ff2 = nn.Linear(d, ff), nn.Linear(ff, d)

    def forward(self, x):
        x = self.ln1(x + self.attn(x))
        return self.ln2(x + self.ff2(F.relu(self.ff1(x))))


class AttnManual(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([ManualEncoderLayer() for _ in range(2)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class PreLNBlock(nn.Module):
    """GPT-2 / ViT block: x + attn(ln(x)), x + mlp(ln(x)), GELU."""

    def __init__(self, d, heads, mlp, gelu_approx):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = ManualAttention(d, heads, fused_qkv=True)
        self.fc1, self.fc2 = nn.Linear(d, mlp), nn.Linear(mlp, d)
        self.act = nn.GELU(approximate=gelu_approx)

    def forward(self, x, mask=None):
        x = x + self.attn(self.ln1(x), mask)
        return x + self.fc2(self.act(self.fc1(self.ln2(x))))


class GPT2(nn.Module):
    def __init__(self, vocab=1000, seq=128, d=256, heads=4, layers=4):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.blocks = nn.ModuleList([PreLNBlock(d, heads, 4 * d, "tanh") for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.wte.weight  # tied, as GPT-2
        self.register_buffer("causal", torch.ones(seq, seq, dtype=torch.bool).triu(1).view(1, 1, seq, seq))
        self.register_buffer("pos", torch.arange(seq).unsqueeze(0))

    def forward(self, idx):
        t = idx.shape[1]
        x = self.wte(idx) + self.wpe(self.pos[:, :t])
        mask = self.causal[:, :, :t, :t]
        for b in self.blocks:
            x = b(x, mask)
        return self.head(self.ln_f(x))


class ViT(nn.Module):
    def __init__(self, img=224, patch=16, d=384, heads=6, mlp=1536, layers=6, classes=1000):
        super().__init__()
        self.patch = nn.Conv2d(3, d, patch, stride=patch)
        n = (img // patch) ** 2
        self.cls = nn.Parameter(torch.randn(1, 1, d) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, n + 1, d) * 0.02)
        self.blocks = nn.ModuleList([PreLNBlock(d, heads, mlp, "none") for _ in range(layers)])
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        for b in self.blocks:
            x = b(x)
        return self.head(self.norm(x)[:, 0])


class Audio1D(nn.Module):
    def __init__(self):
        super().__init__()
        layers = []
        for cin, cout in ((1, 32), (32, 64), (64, 128), (128, 128)):
            layers += [nn.Conv1d(cin, cout, 5, stride=2), nn.BatchNorm1d(cout), nn.ReLU()]
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool1d(1)
        self.fc = nn.Linear(128, 10)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.features(x)), 1))


def _tv(name):
    import torchvision
    return getattr(torchvision.models, name)(weights=None)


def _transformer():
    layer = nn.TransformerEncoderLayer(256, 4, dim_feedforward=1024, dropout=0.0, batch_first=True)
    enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
    for m in enc.modules():  # the layers are deep copies of one: give each its own weights
        if m is not enc and hasattr(m, "reset_parameters"):
            m.reset_parameters()
        elif isinstance(m, nn.MultiheadAttention):
            m._reset_parameters()
    return enc


def _f32(*shape):
    return ("float32", shape)


# name -> (constructor, {input name: (dtype, shape)}, description)
MODELS = {
    "mlp": (MLP, {"x": _f32(32, 784)}, "MLP 784-512-512-10, ReLU, batch 32"),
    "cnn_b1": (SmallCNN, {"x": _f32(1, 3, 32, 32)}, "2x[conv3x3-BN-ReLU-maxpool] 3->32->64 + linear, batch 1"),
    "cnn_b8": (SmallCNN, {"x": _f32(8, 3, 32, 32)}, "same CNN, batch 8"),
    "resnet18": (lambda: _tv("resnet18"), {"x": _f32(1, 3, 224, 224)}, "torchvision resnet18"),
    "transformer": (_transformer, {"x": _f32(1, 128, 256)}, "nn.TransformerEncoder 2 layers d256 h4 ff1024"),
    "chain1000": (Chain, {"x": _f32(1, 16)}, "1000 elementwise ops on 1x16 (per-node overhead)"),
    "attn_manual": (AttnManual, {"x": _f32(1, 128, 256)}, "2-layer encoder, hand-written attention, d256 h4"),
    "gpt2": (GPT2, {"idx": ("int64", (1, 128))}, "GPT-2-style decoder 4 layers d256 h4, causal, vocab 1000"),
    "vit_s": (ViT, {"x": _f32(1, 3, 224, 224)}, "ViT-S/16-style, 6 layers d384 h6 mlp1536, 197 tokens"),
    "resnet50": (lambda: _tv("resnet50"), {"x": _f32(1, 3, 224, 224)}, "torchvision resnet50"),
    "mobilenet_v2": (lambda: _tv("mobilenet_v2"), {"x": _f32(1, 3, 224, 224)}, "torchvision mobilenet_v2"),
    "efficientnet_b0": (lambda: _tv("efficientnet_b0"), {"x": _f32(1, 3, 224, 224)}, "torchvision efficientnet_b0"),
    "audio1d_b1": (Audio1D, {"x": _f32(1, 1, 16000)}, "4x[conv1d k5 s2-BN-ReLU] 1->32->64->128->128, avg pool, linear, batch 1"),
    "audio1d_b4": (Audio1D, {"x": _f32(4, 1, 16000)}, "same 1-D conv model, batch 4"),
}


def make_inputs(name, seed=1):
    """The benchmark inputs of a model, as numpy arrays (deterministic)."""
    rng = np.random.default_rng(seed)
    out = {}
    for iname, (dtype, shape) in MODELS[name][1].items():
        if dtype == "int64":
            out[iname] = rng.integers(0, 1000, size=shape, dtype=np.int64)
        else:
            out[iname] = rng.standard_normal(shape).astype(dtype)
    return out


def _calibrate_bn(model, name):
    """Give BatchNorm layers running statistics of random data (cumulative average)."""
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return
    for m in bns:
        m.reset_running_stats()
        m.momentum = None
    model.train()
    g = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for _ in range(2):
            xs = []
            for iname, (dtype, shape) in MODELS[name][1].items():
                shape = (max(4, shape[0]),) + tuple(shape[1:])
                xs.append(torch.randn(shape, generator=g))
            model(*xs)
    for m in bns:
        m.momentum = 0.1


def build(name, state_path=None):
    """The eval-mode nn.Module of `name`: seeded random init, or the saved state dict."""
    torch.manual_seed(0)
    model = MODELS[name][0]()
    if state_path is not None:
        model.load_state_dict(torch.load(state_path))
    else:
        _calibrate_bn(model, name)
    return model.eval()


def _flatten(v):
    if isinstance(v, (tuple, list)):
        return [x for item in v for x in _flatten(item)]
    return [v]


def generate(name, out_dir, opset):
    model = build(name)
    inputs = make_inputs(name)
    names = list(inputs)
    args = tuple(torch.from_numpy(inputs[n]) for n in names)
    with torch.no_grad():
        outs = [t.numpy() for t in _flatten(model(*args))]
    onnx_path = os.path.join(out_dir, f"{name}.onnx")
    # Exported with grad enabled so nn.TransformerEncoderLayer takes its
    # exportable (non fast-path) branch; the weights require grad.
    torch.onnx.export(
        model, args, onnx_path, opset_version=opset, input_names=names,
        output_names=[f"y{i}" if len(outs) > 1 else "y" for i in range(len(outs))],
        do_constant_folding=True, dynamic_axes=None,
    )
    for n in names:
        np.save(os.path.join(out_dir, f"{name}.in.{n}.npy"), inputs[n])
    for i, o in enumerate(outs):
        np.save(os.path.join(out_dir, f"{name}.out.{i}.npy"), o)
    torch.save(model.state_dict(), os.path.join(out_dir, f"{name}.state.pt"))
    return {
        "description": MODELS[name][2],
        "onnx": f"{name}.onnx",
        "opset": opset,
        "onnx_bytes": os.path.getsize(onnx_path),
        "params": sum(p.numel() for p in model.parameters()),
        "inputs": [{"name": n, "dtype": str(inputs[n].dtype), "shape": list(inputs[n].shape),
                    "file": f"{name}.in.{n}.npy"} for n in names],
        "outputs": [{"dtype": str(o.dtype), "shape": list(o.shape), "file": f"{name}.out.{i}.npy"}
                    for i, o in enumerate(outs)],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(HERE, "out"))
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated subset (default: all)")
    ap.add_argument("--opset", type=int, default=17, help="ONNX opset, 13-17 (default 17)")
    ap.add_argument("--force", action="store_true", help="regenerate models that already exist")
    a = ap.parse_args()
    names = [m for m in a.models.split(",") if m]
    bad = [m for m in names if m not in MODELS]
    if bad:
        sys.exit(f"gen_models.py: unknown model(s) {', '.join(bad)}; known: {', '.join(MODELS)}")
    os.makedirs(a.out, exist_ok=True)
    manifest_path = os.path.join(a.out, "models.json")
    manifest = {"models": {}}
    if os.path.exists(manifest_path):
        with open(manifest_path) as f:
            manifest = json.load(f)
    import torchvision
    manifest["generator"] = {"torch": torch.__version__, "torchvision": torchvision.__version__,
                             "numpy": np.__version__, "python": sys.version.split()[0]}
    failed = []
    for name in names:
        entry = manifest["models"].get(name)
        if (not a.force and entry and entry.get("opset") == a.opset
                and all(os.path.exists(os.path.join(a.out, f)) for f in
                        [entry["onnx"], f"{name}.state.pt"] + [i["file"] for i in entry["inputs"]]
                        + [o["file"] for o in entry["outputs"]])):
            print(f"{name:16s} up to date")
            continue
        t0 = time.time()
        try:
            manifest["models"][name] = generate(name, a.out, a.opset)
        except Exception as e:  # record and go on with the other models
            failed.append(name)
            print(f"{name:16s} FAILED: {type(e).__name__}: {e}", file=sys.stderr)
            manifest["models"].pop(name, None)
            continue
        m = manifest["models"][name]
        print(f"{name:16s} {m['params']:>10,d} params  {m['onnx_bytes'] / 1e6:7.2f} MB  "
              f"{time.time() - t0:5.1f} s")
        with open(manifest_path, "w") as f:
            json.dump(manifest, f, indent=1)
    with open(manifest_path, "w") as f:
        json.dump(manifest, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
