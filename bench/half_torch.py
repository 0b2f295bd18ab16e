#!/usr/bin/python3
"""half_torch.py - PyTorch's linear at bench/half_bench.c's shapes, float32
and bfloat16, for comparison with half_bench's table.

    /usr/bin/python3 bench/half_torch.py [threads]

Medians of 21 calls after 3 warm-up calls, ms and GFLOP/s. Debian's
PyTorch 1.13 runs bfloat16 linear on oneDNN (vdpbf16ps where the CPU has
AVX-512-BF16) and float32 on OpenBLAS, whose own threads
torch.set_num_threads does not limit (OPENBLAS_NUM_THREADS does).
"""
import sys
import time

import torch

threads = int(sys.argv[1]) if len(sys.argv) > 1 else 1
torch.set_num_threads(threads)
SHAPES = [(32, 784, 512), (197, 384, 1536), (197, 1536, 384), (128, 256, 1024), (1024, 1024, 1024)]
print(f"torch {torch.__version__}, {threads} thread(s)")
for dt in (torch.float32, torch.bfloat16):
    for m, k, n in SHAPES:
        g = torch.Generator().manual_seed(0)
        x, w, b = (torch.randn(*s, generator=g).to(dt) for s in ((m, k), (n, k), (n,)))
        with torch.no_grad():
            for _ in range(3):
                torch.nn.functional.linear(x, w, b)
            ts = []
            for _ in range(21):
                t0 = time.perf_counter()
                torch.nn.functional.linear(x, w, b)
                ts.append(time.perf_counter() - t0)
        t = sorted(ts)[10] * 1e3
        print(f"{m}x{k}x{n:<6d} {str(dt):15s} {t:8.3f} ms {2 * m * k * n / t * 1e-6:7.1f} GFLOP/s")
