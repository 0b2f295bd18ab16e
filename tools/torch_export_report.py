"""Export torchvision models with PyTorch's own torch.export (random
weights, a dynamic batch), save them with torch.export.save - as exported
(training IR) and after run_decompositions() (core ATen) - run each archive
with `tpexport run` and compare with PyTorch's output; then write it again
with `tpexport save --format torch`, load that with torch.export.load and
run it in PyTorch (the last column). Prints a markdown table; not part of CI (it needs torch 2.x + torchvision in a venv and
minutes of CPU).

    python -m venv /work/venvs/torch2
    /work/venvs/torch2/bin/pip install torch numpy && /work/venvs/torch2/bin/pip install --no-deps torchvision
    /work/venvs/torch2/bin/python tools/torch_export_report.py [--tpexport build/tpexport] [model ...]
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torchvision
from torch.export import Dim

MODELS = ["resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0", "regnet_y_400mf",
          "squeezenet1_1", "shufflenet_v2_x1_0", "mnasnet0_5", "densenet121", "googlenet", "alexnet", "vgg11",
          "convnext_tiny", "swin_t", "vit_b_16", "maxvit_t", "deeplabv3_mobilenet_v3_large", "lraspp_mobilenet_v3_large"]


def build(name):
    torch.manual_seed(0)
    if name.startswith(("deeplabv3", "lraspp", "fcn")):
        m = getattr(torchvision.models.segmentation, name)(weights=None, weights_backbone=None)
    else:
        kw = {"aux_logits": False, "init_weights": True} if name == "googlenet" else {}
        m = getattr(torchvision.models, name)(weights=None, **kw)
    with torch.no_grad():  # zero-initialised heads would make every output 0
        for p in m.parameters():
            if p.abs().max() == 0:
                p.normal_(0, 0.02)
    return m.eval()


def leaves(out):
    if isinstance(out, dict):
        return [v for k, v in sorted(out.items())]
    return list(out) if isinstance(out, (tuple, list)) else [out]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tpexport", default=os.path.join(os.path.dirname(__file__), "..", "build", "tpexport"))
    ap.add_argument("models", nargs="*", default=MODELS)
    a = ap.parse_args()
    print(f"torch {torch.__version__}, torchvision {torchvision.__version__}; input 2x3x224x224, dynamic batch 1-8\n")
    print("| model | IR | nodes | load + run | max rel err vs torch | saved by tpexport, run by torch.export.load |")
    print("|---|---|---:|---|---:|---|")
    tmp = tempfile.mkdtemp()
    ok = total = rt_ok = 0
    for name in a.models:
        try:
            m = build(name)
            x = torch.randn(2, 3, 224, 224)
            with torch.no_grad():
                want = leaves(m(x))
            ep = torch.export.export(m, (x,), dynamic_shapes={"x": {0: Dim("batch", min=1, max=8)}})
        except Exception as e:  # a model torch cannot export is not ours to count
            print(f"| {name} | - | - | torch.export failed: {type(e).__name__} | - | - |")
            continue
        np.save(os.path.join(tmp, "x.npy"), x.numpy())
        for ir, prog in (("training", ep), ("core ATen", None)):
            total += 1
            if prog is None:
                prog = ep.run_decompositions()
            path = os.path.join(tmp, f"{name}.pt2")
            torch.export.save(prog, path)
            out_dir = os.path.join(tmp, "out")
            t0 = time.time()
            r = subprocess.run([a.tpexport, "run", path, "x=" + os.path.join(tmp, "x.npy"), "--out", out_dir],
                               capture_output=True, text=True)
            if r.returncode != 0:
                msg = (r.stderr.strip().splitlines() or ["?"])[-1].split(": ", 2)[-1][:110]
                print(f"| {name} | {ir} | {len(prog.graph.nodes)} | fails: {msg} | - | - |")
                continue
            err = 0.0
            for i, w in enumerate(want):
                got = np.load(os.path.join(out_dir, f"output_{i}.npy"))
                err = max(err, float(np.abs(got - w.numpy()).max() / max(np.abs(w.numpy()).max(), 1e-30)))
            ok += err < 1e-4
            back = os.path.join(tmp, f"{name}.tpexport.pt2")
            r = subprocess.run([a.tpexport, "save", path, "-o", back, "--format", "torch"], capture_output=True, text=True)
            if r.returncode != 0:
                rt = "save fails: " + (r.stderr.strip().splitlines() or ["?"])[-1].split(": ", 2)[-1][:80]
            else:
                try:
                    with torch.no_grad():
                        got = leaves(torch.export.load(back).module()(x))
                    e2 = max(float((g - w).abs().max() / max(w.abs().max(), 1e-30)) for g, w in zip(got, want))
                    rt = f"ok, {e2:.1e}"
                    rt_ok += e2 < 1e-4
                except Exception as e:
                    rt = f"fails: {type(e).__name__}: {str(e)[:80]}"
            print(f"| {name} | {ir} | {len(prog.graph.nodes)} | ok ({time.time() - t0:.1f} s) | {err:.1e} | {rt} |")
            sys.stdout.flush()
    print(f"\n{ok} of {total} archives load, run and match PyTorch within 1e-4 relative; "
          f"{rt_ok} of them saved again by tpexport load in torch.export.load and match too")


if __name__ == "__main__":
    main()
