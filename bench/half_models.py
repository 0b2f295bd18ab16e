#!/usr/bin/python3
"""half_models.py - the benchmark models with bfloat16 weights: tpexport
against PyTorch 1.13 (its bfloat16 CPU kernels), same weights, one run.

    /usr/bin/python3 bench/half_models.py [--models transformer,gpt2,...] [--threads 1,2] [--runs 30]

Needs bench/out/ from a bench run (the models' float32 state and inputs)
and build/tpexport. For each model: the float32 module with bench/out's
weights, converted to bfloat16 and wrapped as x -> m(x.to(bfloat16)).float()
(so inputs and outputs stay float32 .npy files), exported to ONNX (opset
17) and converted with `tpexport convert`. Times `tpexport bench --json`
(medians of --runs calls, a fresh process) and PyTorch's eager module
(torch.set_num_threads, no_grad, medians of --runs calls) alternately,
three rounds, and prints the medians of the rounds, tpexport / PyTorch,
and the largest difference of tpexport's output from PyTorch's bfloat16
and float32 outputs (relative to the largest float32 output). Files go to
bench/out/half/. Not run by CI.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import gen_models  # noqa: E402

DEFAULT = "mlp,transformer,attn_manual,gpt2,vit_s"


class Wrapped(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, x):
        y = self.m(x.to(torch.bfloat16) if x.is_floating_point() else x)
        return y.float()


def prepare(name, out):
    m = gen_models.build(name).eval()
    m.load_state_dict(torch.load(os.path.join(HERE, "out", f"{name}.state.pt")))
    w = Wrapped(m.to(torch.bfloat16)).eval()
    inputs = gen_models.make_inputs(name)
    names = list(inputs)
    args = tuple(torch.from_numpy(inputs[n]) for n in names)
    onnx_path = os.path.join(out, f"{name}_bf16.onnx")
    pt2 = os.path.join(out, f"{name}_bf16.pt2")
    if not os.path.exists(pt2):
        # with grad enabled, as gen_models.py exports: nn.TransformerEncoderLayer
        # then takes its exportable branch
        torch.onnx.export(w, args, onnx_path, opset_version=17, input_names=names, do_constant_folding=True)
        subprocess.run([os.path.join(ROOT, "build", "tpexport"), "convert", onnx_path, "-o", pt2], check=True,
                       stdout=subprocess.DEVNULL)
    files = []
    for n in names:
        f = os.path.join(out, f"{name}.in.{n}.npy")
        np.save(f, inputs[n])
        files.append(f"{n}={f}")
    return w, m, args, pt2, files


def time_torch(w, args, threads, runs):
    torch.set_num_threads(threads)
    with torch.no_grad():
        for _ in range(3):
            w(*args)
        ts = []
        for _ in range(runs):
            t0 = time.perf_counter()
            w(*args)
            ts.append(time.perf_counter() - t0)
    return sorted(ts)[len(ts) // 2] * 1e3


def time_tpexport(pt2, files, threads, runs):
    r = subprocess.run([os.path.join(ROOT, "build", "tpexport"), "bench", pt2, "--threads", str(threads),
                        "--warmup", "3", "--runs", str(runs), "--json"] + files,
                       check=True, capture_output=True, text=True)
    return float(json.loads(r.stdout)["median_ms"])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=DEFAULT)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--runs", type=int, default=30)
    a = ap.parse_args()
    out = os.path.join(HERE, "out", "half")
    os.makedirs(out, exist_ok=True)
    torch.set_num_interop_threads(1)
    print(f"torch {torch.__version__}; bfloat16 weights; medians of 3 rounds of {a.runs} calls\n")
    print("| model | threads | PyTorch bf16 ms | tpexport bf16 ms | ratio | err vs PyTorch bf16 | err vs float32 |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name in a.models.split(","):
        w, m, args, pt2, files = prepare(name, out)
        res = os.path.join(out, f"{name}_bf16.res")
        subprocess.run([os.path.join(ROOT, "build", "tpexport"), "run", pt2, "--out", res] + files, check=True,
                       stdout=subprocess.DEVNULL)
        got = np.load(os.path.join(res, "output_0.npy"))
        with torch.no_grad():
            want16 = w(*args).numpy()
        f32 = np.load(os.path.join(HERE, "out", f"{name}.out.0.npy")).reshape(got.shape)
        scale = np.abs(f32).max()
        e16, e32 = np.abs(got - want16).max() / scale, np.abs(got - f32).max() / scale
        for th in [int(t) for t in a.threads.split(",")]:
            tt, tp = [], []
            for _ in range(3):
                tt.append(time_torch(w, args, th, a.runs))
                tp.append(time_tpexport(pt2, files, th, a.runs))
            mt, mp = sorted(tt)[1], sorted(tp)[1]
            print(f"| {name} | {th} | {mt:.3g} | {mp:.3g} | {mp / mt:.2f} | {e16:.1e} | {e32:.1e} |", flush=True)


if __name__ == "__main__":
    main()
