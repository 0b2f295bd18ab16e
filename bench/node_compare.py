"""Where tpexport and onnxruntime spend their time on one bench/ model,
side by side, grouped by the model's module path (the ONNX node names the
torch exporter writes, e.g. /features/features.2/features.2.0/block/block.0).

    bench/.venv/bin/python bench/node_compare.py efficientnet_b0 [--threads N]
        [--depth D] [--tpexport PATH] [--min-time S] [--runs R]

Our side: `tpexport bench bench/out/<m>.pt2 --profile-nodes` (the archive
bench/run.sh converted, on its example inputs), per node. onnxruntime's: its own
profiler over R runs (enable_profiling), the median per node. Each node
is put in the group of the first D components of its module path; a
tpexport node is matched to the ONNX node it came from by operator and
order (the k-th conv2d or conv1d step is the k-th Conv node, the k-th
matmul the k-th MatMul or Gemm), so what tpexport fused into a convolution or GEMM (batch
norm, bias, activation, residual add) counts in that node's group, as
onnxruntime's fused nodes count in theirs. Steps it cannot match are listed
as "other:<op>". onnxruntime names a fused node after one of its parts
(ResNet's conv + relu after the relu), so pick a depth at which both
sides' fusions land in one group: a block (2 for the transformers and
ResNets, /layer4/layer4.0; 5 for torchvision's MBConv blocks, the default).
Both sides' profiles include their profiling overhead:
compare groups within one run, not with bench/run.sh's medians, and repeat.

--flops adds each group's multiply-adds x 2 (MFLOP) of its Conv, MatMul
and Gemm nodes in their direct form (2 x output elements x the reduction
length; what Winograd saves counts as speed), from ONNX shape inference
on the example inputs, and both sides' GFLOP/s; --peak G (the threads'
FMA peak in GFLOP/s: bench/fma_peak.c's single-core figure times the
threads) adds them as percentages of it.
"""
import argparse
import collections
import json
import os
import re
import signal
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def module_path(name, depth):
    """The module path of an ONNX node name: its components up to the first
    capitalised one (the exporter's op names - Conv, MatMul - and
    onnxruntime's fusions - Conv_output_0_nchwc, MatMulAddFusion - are
    capitalised, torch module attributes are not); at most depth of them."""
    if name.startswith("fused "):  # onnxruntime: "fused /net/net.0/Gemm"
        name = name[len("fused "):]
    parts = []
    for p in name.split("/"):
        if not p:
            continue
        if p[0].isupper():
            break
        parts.append(p)
    return "/" + "/".join(parts[:depth]) if parts else name


def ours(exe, out, m, threads, min_time):
    # the archive's example inputs: `tpexport convert` stores the model's own input shapes
    args = [exe, "bench", os.path.join(out, m + ".pt2"), "--threads", str(threads), "--min-time", str(min_time),
            "--profile-nodes"]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"node_compare.py: {' '.join(args)} failed: {r.stderr.strip()}")
    steps = []  # (op, ms, node)
    for line in r.stdout.splitlines():
        f = line.split()
        # op variant calls ms % spread node
        if len(f) == 7 and f[4].endswith("%") and f[2].isdigit():
            steps.append((f[0], float(f[3]), f[6]))
    return steps


def ort_profile(path, threads, runs):
    import numpy as np
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.enable_profiling = True
    so.profile_file_prefix = os.path.join(os.path.dirname(path), "node_compare_ort")
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    base = path[:-len(".onnx")]
    feeds = {i.name: np.load(f"{base}.in.{i.name}.npy") for i in s.get_inputs()}
    for _ in range(runs):
        s.run(None, feeds)
    prof = s.end_profiling()
    try:
        with open(prof) as f:
            events = json.load(f)
    finally:
        os.remove(prof)
    per = collections.defaultdict(list)
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            per[e["name"][:-len("_kernel_time")]].append(e["dur"] / 1000.0)
    return {n: statistics.median(v) for n, v in per.items()}


def node_flops(model, feeds):
    """Direct-form FLOPs (2 x multiply-adds) of each Conv, MatMul and Gemm
    node, by name, with the graph inputs fixed to the example inputs'
    shapes."""
    import onnx
    from onnx import shape_inference
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for i in m.graph.input:
        if i.name in feeds:
            dims = i.type.tensor_type.shape.dim
            for d, n in zip(dims, feeds[i.name].shape):
                d.Clear()
                d.dim_value = int(n)
    m = shape_inference.infer_shapes(m)
    shapes = {}
    for v in list(m.graph.value_info) + list(m.graph.input) + list(m.graph.output):
        t = v.type.tensor_type
        if t.HasField("shape") and all(d.HasField("dim_value") for d in t.shape.dim):
            shapes[v.name] = [d.dim_value for d in t.shape.dim]
    for t in m.graph.initializer:
        shapes[t.name] = list(t.dims)
    out = {}
    for n in m.graph.node:
        if n.op_type not in ("Conv", "MatMul", "Gemm"):
            continue
        y, a, b = shapes.get(n.output[0]), shapes.get(n.input[0]), shapes.get(n.input[1])
        if not y or not a or not b:
            continue
        elems = 1
        for d in y:
            elems *= d
        if n.op_type == "Conv":  # weight: cout x cin/groups x kernel...
            red = 1
            for d in b[1:]:
                red *= d
        elif n.op_type == "MatMul":
            red = a[-1]
        else:  # Gemm: A may be transposed (transA)
            trans_a = next((x.i for x in n.attribute if x.name == "transA"), 0)
            red = a[0] if trans_a else a[-1]
        out[n.name] = 2.0 * elems * red
    return out


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # quiet under `| head`
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--depth", type=int, default=5, help="module path components per group (default 5)")
    ap.add_argument("--tpexport", default=None, help="default build-bench/tpexport, else build/tpexport")
    ap.add_argument("--out", default=os.path.join(HERE, "out"))
    ap.add_argument("--min-time", type=float, default=3.0)
    ap.add_argument("--runs", type=int, default=50, help="onnxruntime runs under its profiler")
    ap.add_argument("--flops", action="store_true", help="each group's MFLOP and both sides' GFLOP/s")
    ap.add_argument("--peak", type=float, default=0.0,
                    help="with --flops: the threads' FMA peak in GFLOP/s, for percentages of it")
    a = ap.parse_args()
    exe = a.tpexport or next((p for p in (os.path.join(ROOT, "build-bench", "tpexport"),
                                          os.path.join(ROOT, "build", "tpexport")) if os.path.exists(p)), None)
    if not exe:
        sys.exit("node_compare.py: no tpexport binary (build it or pass --tpexport)")
    import onnx
    path = os.path.join(a.out, a.model + ".onnx")
    graph = onnx.load(path).graph
    by_kind = collections.defaultdict(list)  # our op -> ONNX node names in order
    for n in graph.node:
        if n.op_type == "Conv":  # a model's convolutions are all 1-D or all 2-D here
            by_kind["conv1d"].append(n.name)
            by_kind["conv2d"].append(n.name)
        elif n.op_type in ("MatMul", "Gemm"):
            by_kind["matmul"].append(n.name)

    a_ms = collections.defaultdict(float)
    for op, ms, node in ours(exe, a.out, a.model, a.threads, a.min_time):
        mm = re.fullmatch(r"(conv1d|conv2d|matmul)(?:_(\d+))?", node)
        names = by_kind.get(mm.group(1), []) if mm else []
        k = int(mm.group(2) or 0) if mm else -1
        key = module_path(names[k], a.depth) if 0 <= k < len(names) else "other:" + op
        a_ms[key] += ms
    b_ms = collections.defaultdict(float)
    for name, ms in ort_profile(path, a.threads, a.runs).items():
        b_ms[module_path(name, a.depth)] += ms
    flops = collections.defaultdict(float)
    if a.flops:
        import numpy as np
        model = onnx.load(path)
        base = path[:-len(".onnx")]
        feeds = {i.name: np.load(f"{base}.in.{i.name}.npy", mmap_mode="r") for i in model.graph.input
                 if os.path.exists(f"{base}.in.{i.name}.npy")}
        for name, f in node_flops(model, feeds).items():
            flops[module_path(name, a.depth)] += f

    keys = sorted(set(a_ms) | set(b_ms), key=lambda k: -max(a_ms.get(k, 0.0), b_ms.get(k, 0.0)))
    print(f"{a.model}, {a.threads} thread(s): ms per call (profiled), grouped by the first {a.depth} "
          f"components of the module path")
    def rate(f, ms):  # GFLOP/s and, with --peak, its percentage
        if not f or not ms:
            return f" {'':>7s}" + (f" {'':>6s}" if a.peak else "")
        g = f / ms / 1e6
        return f" {g:7.1f}" + (f" {100.0 * g / a.peak:5.1f}%" if a.peak else "")

    head = f"{'group':60s} {'tpexport':>9s} {'ORT':>9s} {'ratio':>6s}"
    if a.flops:
        pct = f" {'%':>6s}" if a.peak else ""
        head += f" {'MFLOP':>8s} {'tp GF/s':>7s}{pct} {'ORTGF/s':>7s}{pct}"
    print(head)
    for k in keys + ["total"]:
        if k == "total":
            x, y, f = sum(a_ms.values()), sum(b_ms.values()), sum(flops.values())
        else:
            x, y, f = a_ms.get(k, 0.0), b_ms.get(k, 0.0), flops.get(k, 0.0)
        line = f"{k[:60]:60s} {x:9.3f} {y:9.3f} {x / y if y else float('nan'):6.2f}"
        if a.flops:
            line += f" {f / 1e6:8.1f}" + rate(f, x) + rate(f, y)
        print(line)


if __name__ == "__main__":
    main()
