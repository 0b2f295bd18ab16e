"""Per-call overhead of the Python package over the C library (issue #15:
at most 5 us more than C on a tiny program). Times, in one run, the same
one-op archive called from Python (ExportedProgram.__call__ on a numpy
input: argument conversion, tp_program_call, the output array) and from C
(`tpexport bench`, which times tp_run_execute, the allocation-free entry
point) and prints both medians and the difference.

    make test-python        # builds the package into build-py/venv
    build-py/venv/bin/python bench/py_overhead.py [ARCHIVE] [--tpexport PATH]

ARCHIVE defaults to tests/fixtures/tensorplay_ops/relu.pt2 (relu of a 3x4
tensor). Like every timing, run it on a quiet machine and repeat.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import tpexport

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def py_median_us(ep, x, rounds=15, calls=2000):
    for _ in range(200):
        ep(x)
    meds = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            ep(x)
        meds.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(meds)


def c_median_us(tool, archive, x):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "x.npy")
        np.save(path, x)
        r = subprocess.run([tool, "bench", archive, "--threads", "1", "--warmup", "200", "--runs", "20000", "--json",
                            path], capture_output=True, text=True, check=True)
    return json.loads(r.stdout[r.stdout.index("{"):])["median_ms"] * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("archive", nargs="?", default=os.path.join(ROOT, "tests/fixtures/tensorplay_ops/relu.pt2"))
    ap.add_argument("--tpexport", default=os.path.join(ROOT, "build", "tpexport"))
    a = ap.parse_args()
    ep = tpexport.load(a.archive)
    if isinstance(ep, dict):
        ep = next(iter(ep.values()))
    x = np.asarray(ep.example_inputs["x0"] if isinstance(ep.example_inputs, dict) and "x0" in ep.example_inputs
                   else np.random.RandomState(0).randn(3, 4).astype(np.float32))
    ep.num_threads = 1
    c_us = c_median_us(a.tpexport, a.archive, x)
    py_us = py_median_us(ep, x)
    print("archive: %s" % os.path.relpath(a.archive, ROOT))
    print("C (tp_run_execute):      %7.2f us per call" % c_us)
    print("Python (ep(x), numpy):   %7.2f us per call" % py_us)
    print("Python overhead:         %7.2f us (issue #15 asks at most 5)" % (py_us - c_us))


if __name__ == "__main__":
    sys.exit(main())
