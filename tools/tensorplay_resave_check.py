"""tensorplay_resave_check.py - re-save the committed tensorplay archives with
tpexport's writer and load them back in the real tensorplay: every case of
tests/fixtures/tensorplay_ops/ is re-saved (`tpexport decompose --table none`,
which only copies and re-validates), loaded with tensorplay.export.load and
called on its recorded inputs; the outputs must match what tensorplay
recorded for the original archive (rtol 1e-5, atol 1e-6, NaN == NaN; the
random cases: the recorded dtype, shape and support). This
checks the callee each op is written as (src/archive/op_map.c's
TP_SERDE_WRITE entries) against tensorplay itself. Not run by ctest (it needs
the tensorplay venv).

    bench/.venv/bin/python tools/tensorplay_resave_check.py [--tpexport build/tpexport] [CASE...]

Exit status 0 when every case matches. Known: setitem_then_use (tpexport
writes y[1, ::2] = -3 as fill_ on a strided view; tensorplay 1.0's fill_ and
zero_ ignore a view's strides, its copy_ honours them).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import tensorplay as tp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASES = os.path.join(ROOT, "tests", "fixtures", "tensorplay_ops")


def decode(v, case_dir):
    if isinstance(v, str):
        return tp.tensor(np.load(os.path.join(case_dir, v)))
    (kind, x), = v.items()
    if kind in ("int", "float", "bool"):
        return {"int": int, "float": float, "bool": bool}[kind](x)
    if kind == "none":
        return None
    if kind in ("list", "tuple"):
        items = [decode(i, case_dir) for i in x]
        return items if kind == "list" else tuple(items)
    if kind == "dict":
        return {k: decode(i, case_dir) for k, i in x.items()}
    raise ValueError("unknown input " + kind)


def flat(v):
    if isinstance(v, (list, tuple)):
        return [x for i in v for x in flat(i)]
    if isinstance(v, dict):
        return [x for i in v.values() for x in flat(i)]
    return [v]


def check(name, tpexport, work):
    out = os.path.join(work, name + ".pt2")
    r = subprocess.run([tpexport, "decompose", os.path.join(CASES, name + ".pt2"), "-o", out, "--table", "none"],
                       capture_output=True, text=True)
    if r.returncode:
        return "re-save failed: " + r.stderr.strip()
    case_dir = os.path.join(CASES, name)
    with open(os.path.join(case_dir, "case.json")) as f:
        case = json.load(f)
    program = tp.export.load(out)
    for k, run in enumerate(case["runs"]):
        args = [decode(run["inputs"][n], case_dir) for n in case["inputs"]]
        got = flat(program(*args))
        if len(got) != len(run["outputs"]):
            return "run %d: %d outputs, %d recorded" % (k, len(got), len(run["outputs"]))
        for file, g in zip(run["outputs"], got):
            want = np.load(os.path.join(case_dir, file))
            g = np.asarray(g) if isinstance(g, (bool, int, float)) else np.asarray(g.numpy())
            sup = case.get("random")
            if sup:  # random draws: dtype, shape and support, as test_tp_ops checks them
                v = g.astype(np.float64)
                lo, hi = sup.get("low"), sup.get("high")
                if (g.dtype != want.dtype or g.shape != want.shape or (lo is not None and (v < lo).any())
                        or (hi is not None and (v > hi).any()) or (sup.get("integral") and (v != np.floor(v)).any())):
                    return "run %d: %s is not a draw of the recorded support" % (k, file)
                continue
            if g.shape != want.shape or not np.allclose(g, want, rtol=1e-5, atol=1e-6, equal_nan=True):
                return "run %d: %s differs" % (k, file)
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tpexport", default=os.path.join(ROOT, "build", "tpexport"))
    ap.add_argument("cases", nargs="*")
    a = ap.parse_args()
    names = a.cases or sorted(f[:-4] for f in os.listdir(CASES) if f.endswith(".pt2"))
    bad = 0
    with tempfile.TemporaryDirectory() as work:
        for name in names:
            try:
                problem = check(name, a.tpexport, work)
            except Exception as e:  # tensorplay failing to load or run the re-saved archive
                problem = "%s: %s" % (type(e).__name__, e)
            if problem:
                bad += 1
                print("FAIL %s: %s" % (name, problem))
    print("%d cases, %d failed" % (len(names), bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
