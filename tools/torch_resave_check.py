"""Every tensorplay one-function archive (tests/fixtures/tensorplay_ops/)
saved by `tpexport save --format torch`, loaded by PyTorch's own
torch.export.load and run on tensorplay's recorded inputs: how much of
what tpexport runs it can hand to PyTorch. Prints the counts and every
failure; not part of CI (needs torch 2.x in a venv).

    /work/venvs/torch2/bin/python tools/torch_resave_check.py [--tpexport build/tpexport] [case ...]

A case counts as passing when every run's outputs equal tensorplay's within
the case's rtol/atol (NaN matching NaN). Cases with state carried between
runs are called on one module in order, as tensorplay ran them.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
from torch.utils._pytree import tree_leaves

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
OPS = os.path.join(ROOT, "tests", "fixtures", "tensorplay_ops")


def value(spec, case_dir):
    if isinstance(spec, str):
        return torch.from_numpy(np.load(os.path.join(case_dir, spec)))
    (kind, v), = spec.items()
    if kind in ("int", "float", "bool"):
        return v
    if kind == "none":
        return None
    if kind in ("list", "tuple"):
        items = [value(x, case_dir) for x in v]
        return items if kind == "list" else tuple(items)
    if kind == "dict":
        return {k: value(x, case_dir) for k, x in v.items()}
    raise ValueError(kind)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tpexport", default=os.path.join(ROOT, "build", "tpexport"))
    ap.add_argument("cases", nargs="*")
    a = ap.parse_args()
    cases = a.cases or sorted(f[:-4] for f in os.listdir(OPS) if f.endswith(".pt2"))
    tmp = tempfile.mkdtemp()
    counts = {"pass": 0, "save": 0, "load": 0, "run": 0, "differ": 0}
    failures = []
    for name in cases:
        case_dir = os.path.join(OPS, name)
        with open(os.path.join(case_dir, "case.json")) as f:
            meta = json.load(f)
        out = os.path.join(tmp, name + ".pt2")
        r = subprocess.run([a.tpexport, "save", os.path.join(OPS, name + ".pt2"), "-o", out, "--format", "torch"],
                           capture_output=True, text=True)
        if r.returncode:
            counts["save"] += 1
            failures.append((name, "save", r.stderr.strip().split(": ")[-1][:160]))
            continue
        try:
            mod = torch.export.load(out).module()
        except Exception as e:
            counts["load"] += 1
            failures.append((name, "torch.export.load", f"{type(e).__name__}: {str(e).splitlines()[-1][:160]}"))
            continue
        ok = True
        for run in meta["runs"]:
            try:
                kwargs = {k: value(v, case_dir) for k, v in run["inputs"].items()}
                args = [kwargs.pop(n) for n in meta["inputs"] if n in kwargs]
                got = [t for t in tree_leaves(mod(*args, **kwargs)) if isinstance(t, torch.Tensor)]
            except Exception as e:
                counts["run"] += 1
                failures.append((name, "run", f"{type(e).__name__}: {str(e).splitlines()[-1][:160] if str(e) else ''}"))
                ok = False
                break
            want = [np.load(os.path.join(case_dir, f)) for f in run["outputs"]]
            same = len(got) == len(want) and all(
                g.shape == tuple(w.shape) and np.allclose(g.detach().numpy().astype(np.float64) if g.dtype != torch.bool else g.numpy(),
                                                           w.astype(np.float64) if w.dtype != bool else w,
                                                           rtol=meta.get("rtol", 1e-5), atol=meta.get("atol", 1e-6), equal_nan=True)
                for g, w in zip(got, want))
            if not same:
                counts["differ"] += 1
                failures.append((name, "differs", f"{len(got)} outputs vs {len(want)}"))
                ok = False
                break
        counts["pass"] += ok
    for name, stage, msg in failures:
        print(f"{name}: {stage}: {msg}")
    print(f"\n{counts['pass']} of {len(cases)} tensorplay archives saved by tpexport in PyTorch's format load in "
          f"torch.export.load ({torch.__version__}) and give tensorplay's outputs; "
          f"failures: save {counts['save']}, load {counts['load']}, run {counts['run']}, different {counts['differ']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
