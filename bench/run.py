#!/usr/bin/env python3
"""run.py - time tpexport against onnxruntime, PyTorch and tensorplay.

Normally started by bench/run.sh (which prepares the venv and the build):

    bench/.venv/bin/python bench/run.py [--models a,b] [--threads 1,2] [--quick]

Steps: generate the models (gen_models.py under /usr/bin/python3, torch 1.13),
convert each ONNX file with `tpexport convert`, then for each model and thread
count time every peer, interleaved in rounds, check tpexport's output against
torch's, and write OUT/results.md and OUT/results.json.

Peers:
  ort         onnxruntime InferenceSession, intra_op_num_threads=N, inter_op 1,
              sequential execution, graph optimisations ALL (in a worker process)
  torch       PyTorch 1.13 eager nn.Module, torch.set_num_threads(N),
              inference_mode (worker process under /usr/bin/python3)
  tensorplay  tensorplay.export.load(<m>.pt2) - the archive tpexport converted -
              .module() called under inference_mode, set_num_threads(N) (worker)
  tpexport    `tpexport bench FILE --threads N --warmup W --runs R --json inputs`,
              one fresh process per round (falls back to `tpexport run --repeat R`
              while `bench` does not exist; those numbers are marked '~' and are
              not comparable: a mean including the first call, threads not set)

The same file is the peers' worker: `run.py --worker ort|torch|tensorplay`
reads one JSON request per line on stdin and answers one JSON line.
"""
import argparse
import json
import math
import os
import platform
import random
import re
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SYS_PY = "/usr/bin/python3"


# ---- worker side --------------------------------------------------------------

class Worker:
    """One peer, living in its own process; models are loaded once per (model, threads)."""

    def __init__(self, kind, out_dir, threads):
        self.kind, self.out, self.threads = kind, out_dir, threads
        self.cache_model, self.cache = None, {}
        import numpy as np
        self.np = np
        if kind == "ort":
            import onnxruntime as ort
            self.lib = ort
            self.version = ort.__version__
        elif kind == "torch":
            import torch
            sys.path.insert(0, HERE)
            import gen_models
            self.lib, self.gen = torch, gen_models
            torch.set_num_interop_threads(1)
            torch.set_num_threads(threads)
            # which BLAS libblas.so.3 resolved to (Debian's torch has no MKL;
            # libtorch links it, so it is mapped once torch is imported)
            blas = "?"
            try:
                with open("/proc/self/maps") as f:
                    libs = {os.path.basename(l.split()[-1]) for l in f if "blas" in l}
                blas = ",".join(sorted(libs)) or "none"
            except OSError:
                pass
            self.version = f"{torch.__version__} (BLAS {blas}, OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')})"
        elif kind == "tensorplay":
            import tensorplay
            self.lib = tensorplay
            if hasattr(tensorplay, "set_num_interop_threads"):
                tensorplay.set_num_interop_threads(1)
            # fixed for the process: tensorplay refuses to change it once work has run
            tensorplay.set_num_threads(threads)
            self.version = tensorplay.__version__
        else:
            raise ValueError(kind)
        with open(os.path.join(out_dir, "models.json")) as f:
            self.manifest = json.load(f)["models"]

    def inputs(self, model):
        m = self.manifest[model]
        return {i["name"]: self.np.load(os.path.join(self.out, i["file"])) for i in m["inputs"]}

    def prepare(self, model):
        """A zero-argument callable running the model once, returning flat numpy outputs."""
        threads = self.threads
        if self.cache_model != model:
            self.cache_model, self.cache = model, {}
        key = 0
        if key in self.cache:
            fn = self.cache[key]
        else:
            feeds = self.inputs(model)
            if self.kind == "ort":
                ort = self.lib
                so = ort.SessionOptions()
                so.intra_op_num_threads = threads
                so.inter_op_num_threads = 1
                so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
                so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
                sess = ort.InferenceSession(os.path.join(self.out, f"{model}.onnx"), so,
                                            providers=["CPUExecutionProvider"])

                def fn(sess=sess, feeds=feeds):
                    return sess.run(None, feeds)
            elif self.kind == "torch":
                torch = self.lib
                mod = self.gen.build(model, os.path.join(self.out, f"{model}.state.pt"))
                args = [torch.from_numpy(feeds[i["name"]]) for i in self.manifest[model]["inputs"]]

                def fn(mod=mod, args=args):
                    with torch.inference_mode():
                        y = mod(*args)
                    return [t.numpy() for t in _flatten(y)]
            else:
                tp = self.lib
                ep = tp.export.load(os.path.join(self.out, f"{model}.pt2"))
                mod = ep.module()
                kw = {n: tp.from_numpy(feeds[n]) for n in ep.graph_signature.user_inputs}

                def fn(mod=mod, kw=kw):
                    with tp.inference_mode():
                        y = mod(**kw)
                    return [t.numpy() for t in _flatten(y)]
            self.cache[key] = fn
        return fn

    def handle(self, req):
        if req["threads"] != self.threads:
            raise ValueError(f"worker runs {self.threads} threads, asked for {req['threads']}")
        fn = self.prepare(req["model"])
        if req["cmd"] == "check":
            outs = fn()
            return {"max_rel_err": max_rel_err(outs, load_refs(self.out, self.manifest[req["model"]]))}
        for _ in range(req["warmup"]):
            fn()
        times = []
        for _ in range(req["runs"]):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
        return {"times_ms": times}


def _flatten(v):
    if isinstance(v, (tuple, list)):
        return [x for item in v for x in _flatten(item)]
    if isinstance(v, dict):
        return [x for item in v.values() for x in _flatten(item)]
    return [v]


def load_refs(out_dir, entry):
    import numpy as np
    return [np.load(os.path.join(out_dir, o["file"])) for o in entry["outputs"]]


def max_rel_err(outs, refs):
    """max |got - want| / max |want| over all outputs (normwise; inf on a shape mismatch)."""
    import numpy as np
    if len(outs) != len(refs):
        return float("inf")
    worst = 0.0
    for got, want in zip(outs, refs):
        got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
        if got.shape != want.shape:
            return float("inf")
        scale = max(float(np.max(np.abs(want))) if want.size else 0.0, 1e-30)
        err = float(np.max(np.abs(got - want))) / scale if want.size else 0.0
        worst = max(worst, err if math.isfinite(err) else float("inf"))
    return worst


def worker_main(kind, out_dir, threads):
    w = Worker(kind, out_dir, threads)
    print(json.dumps({"ready": True, "version": w.version}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            resp = w.handle(json.loads(line))
        except Exception as e:  # report, keep serving
            resp = {"error": f"{type(e).__name__}: {e}"[:2000]}
        print(json.dumps(resp), flush=True)


# ---- driver side --------------------------------------------------------------

class PeerProc:
    def __init__(self, kind, python, out_dir, threads):
        self.kind = kind
        # OpenBLAS (Debian's torch's BLAS, numpy's) keeps a thread pool of its
        # own that torch.set_num_threads does not size: without this a
        # 1-thread torch peer runs its matrix products on every core.
        env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads))
        self.p = subprocess.Popen([python, os.path.abspath(__file__), "--worker", kind, "--out", out_dir,
                                   "--worker-threads", str(threads)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1, env=env)
        hello = self._read()
        if not hello or "version" not in hello:
            raise RuntimeError(f"{kind} worker did not start")
        self.version = hello["version"]

    def _read(self):
        line = self.p.stdout.readline()
        return json.loads(line) if line else None

    def ask(self, **req):
        self.p.stdin.write(json.dumps(req) + "\n")
        self.p.stdin.flush()
        resp = self._read()
        if resp is None:
            raise RuntimeError(f"{self.kind} worker died (exit {self.p.wait()})")
        if "error" in resp:
            raise RuntimeError(resp["error"])
        return resp

    def pause(self, on):
        """SIGSTOP an idle worker so its thread pools cannot spin while another peer is timed."""
        if self.p.poll() is None:
            os.kill(self.p.pid, signal.SIGSTOP if on else signal.SIGCONT)

    def close(self):
        self.pause(False)
        try:
            self.p.stdin.close()
            self.p.wait(timeout=30)
        except Exception:
            self.p.kill()


class Tpexport:
    kind = "tpexport"

    def __init__(self, exe, out_dir):
        self.exe, self.out = exe, out_dir
        self.version = self._cmd(["--version"]).stdout.strip() or "?"
        h = self._cmd(["bench", "--help"])
        self.has_bench = h.returncode == 0
        self.bench_help = h.stdout if self.has_bench else ""
        self.run_help = self._cmd(["run", "--help"]).stdout
        self.inputs_cache = {}
        self.last_extra = {}

    def _cmd(self, args, timeout=None):
        return subprocess.run([self.exe] + args, capture_output=True, text=True, timeout=timeout)

    def input_args(self, model, entry):
        """name=path for each user input, names from `inspect --json`, else positional."""
        if model not in self.inputs_cache:
            files = [os.path.join(self.out, i["file"]) for i in entry["inputs"]]
            args = files
            r = self._cmd(["inspect", os.path.join(self.out, f"{model}.pt2"), "--json"])
            if r.returncode == 0:
                try:
                    prog = json.loads(r.stdout)["programs"][0]
                    names = [i["name"] for i in prog["inputs"] if i["kind"] == "USER_INPUT"]
                    by_name = {i["name"]: f for i, f in zip(entry["inputs"], files)}
                    if len(names) == len(files):
                        # same name when the importer kept it, else the ONNX order
                        args = [f"{n}={by_name.get(n, files[k])}" for k, n in enumerate(names)]
                except (ValueError, KeyError, IndexError):
                    pass
            self.inputs_cache[model] = args
        return self.inputs_cache[model]

    def time(self, model, entry, threads, warmup, runs, timeout):
        pt2 = os.path.join(self.out, f"{model}.pt2")
        ins = self.input_args(model, entry)
        if self.has_bench:
            r = self._cmd(["bench", pt2, "--threads", str(threads), "--warmup", str(warmup),
                           "--runs", str(runs), "--json"] + ins, timeout=timeout)
            if r.returncode != 0:
                raise RuntimeError(_last_line(r.stderr) or f"tpexport bench exit {r.returncode}")
            d = _parse_json_object(r.stdout)
            self.last_extra = {k: d[k] for k in ("arena_bytes", "threads", "p90_ms", "min_ms") if k in d}
            if MASK_AVX512 and d.get("cpu_level") == "avx512":
                raise RuntimeError("--mask-avx512: tpexport still ran at the AVX-512 level (the shim did not load?)")
            if isinstance(d.get("times_ms"), list) and d["times_ms"]:
                return {"times_ms": [float(t) for t in d["times_ms"]], "comparable": True}
            return {"round": {"median_ms": float(d["median_ms"]), "p90_ms": float(d.get("p90_ms", d["median_ms"])),
                              "min_ms": float(d.get("min_ms", d["median_ms"])), "runs": int(d.get("runs", runs))},
                    "comparable": True}
        args = ["run", pt2] + ins + ["--repeat", str(warmup + runs)]
        r = self._cmd(args, timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError(_last_line(r.stderr) or f"tpexport run exit {r.returncode}")
        m = re.search(r"time: ([0-9.]+) ms", r.stdout)
        if not m:
            raise RuntimeError("no 'time:' line in tpexport run's output")
        return {"times_ms": [float(m.group(1))], "comparable": False}

    def outputs(self, model, entry, threads, timeout):
        """Run once with --out and return the flat outputs (numpy)."""
        import numpy as np
        d = os.path.join(self.out, "tpexport_out", model)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(os.path.dirname(d), exist_ok=True)
        args = ["run", os.path.join(self.out, f"{model}.pt2")] + self.input_args(model, entry) + ["--out", d]
        if "--threads" in self.run_help:
            args += ["--threads", str(threads)]
        r = self._cmd(args, timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError(_last_line(r.stderr) or f"tpexport run exit {r.returncode}")
        return [np.load(os.path.join(d, f"output_{i}.npy")) for i in range(len(entry["outputs"]))]


def _last_line(s):
    lines = [l for l in (s or "").strip().splitlines() if l.strip()]
    return lines[-1][:500] if lines else ""


def _parse_json_object(s):
    s = s.strip()
    try:
        return json.loads(s)
    except ValueError:
        start = s.rfind("\n{")
        return json.loads(s[start + 1:] if start >= 0 else s[s.index("{"):])


def stats(samples):
    """median / p90 / min over pooled per-run samples, or over per-round summaries."""
    times, rounds = samples["times"], samples["rounds"]
    if times and not rounds:
        t = sorted(times)
        return {"median_ms": _pct(t, 50), "p90_ms": _pct(t, 90), "min_ms": t[0], "runs": len(t)}
    if rounds:  # tpexport bench without times_ms: median of round medians
        med = sorted(r["median_ms"] for r in rounds)
        return {"median_ms": _pct(med, 50), "p90_ms": _pct(sorted(r["p90_ms"] for r in rounds), 50),
                "min_ms": min(r["min_ms"] for r in rounds), "runs": sum(r["runs"] for r in rounds)}
    return None


def _pct(sorted_vals, p):
    if not sorted_vals:
        return None
    k = (len(sorted_vals) - 1) * p / 100.0
    lo, hi = math.floor(k), math.ceil(k)
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (k - lo)


MASK_AVX512 = False  # set by --mask-avx512: every timed process runs under bench/cpuid_mask.c


def enable_avx512_mask(out_dir):
    """Build bench/cpuid_mask.c and preload it (CPUID_MASK=avx512) into every process run.py starts."""
    global MASK_AVX512
    flags = open("/proc/cpuinfo").read()
    if " avx512f" not in flags:
        raise SystemExit("run.py: --mask-avx512: this CPU has no AVX-512 to hide")
    if " cpuid_fault" not in flags:
        raise SystemExit("run.py: --mask-avx512: no CPUID faulting (cpuid_fault) on this machine")
    so = os.path.join(os.path.abspath(out_dir), "cpuid_mask.so")
    r = subprocess.run(["gcc", "-O2", "-Wall", "-Wextra", "-shared", "-fPIC", os.path.join(HERE, "cpuid_mask.c"),
                        "-o", so], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit("run.py: --mask-avx512: building cpuid_mask.so failed:\n" + r.stderr)
    os.environ["LD_PRELOAD"] = so + (":" + os.environ["LD_PRELOAD"] if os.environ.get("LD_PRELOAD") else "")
    os.environ["CPUID_MASK"] = "avx512"
    MASK_AVX512 = True


def machine_info():
    info = {"platform": platform.platform(), "python": sys.version.split()[0]}
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            k, _, v = line.partition(":")
            v = v.strip()
            if k == "Model name":
                info["cpu"] = v
            elif k == "CPU(s)":
                info["cpus"] = int(v)
            elif k == "Thread(s) per core":
                info["threads_per_core"] = int(v)
            elif k == "Flags":
                flags = set(v.split())
                info["isa"] = [f for f in ("avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
                                           "avx512_bf16", "amx_tile", "amx_bf16") if f in flags]
    except OSError:
        pass
    if MASK_AVX512:
        info["isa"] = [f for f in info.get("isa", []) if not f.startswith("avx512")] + ["(AVX-512 hidden by bench/cpuid_mask.c)"]
        info["avx512_masked"] = True
    info["nproc"] = os.cpu_count()
    try:
        with open("/proc/loadavg") as f:
            info["loadavg_at_start"] = f.read().split()[:3]
    except OSError:
        pass
    return info


def git_rev():
    try:
        rev = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return rev + ("+dirty" if dirty else "")
    except OSError:
        return "?"


def fmt_ms(v):
    if v is None:
        return "-"
    if v >= 100:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    if v >= 1:
        return f"{v:.2f}"
    return f"{v:.3f}"


def fmt_err(e):
    if e is None:
        return "-"
    if isinstance(e, str):
        return "failed (see Errors)"
    return "inf" if not math.isfinite(e) else f"{e:.1e}"


PEER_COLS = [("ort", "ORT ms"), ("torch", "torch ms"), ("tensorplay", "tensorplay ms")]


def render_md(res):
    m = res["machine"]
    lines = [
        "# tpexport benchmark",
        "",
        f"- date: {res['date']}",
        f"- machine: {m.get('cpu', '?')}, {m.get('cpus', m.get('nproc'))} CPUs, ISA {' '.join(m.get('isa', []))}, "
        f"load at start {' '.join(m.get('loadavg_at_start', []))}",
        f"- tpexport: {res['versions'].get('tpexport')} (tree {res['versions'].get('tree')}), "
        f"timing via `{res['tpexport_timing']}`",
        "- peers: " + ", ".join(f"{k} {v}" for k, v in res["versions"].items() if k not in ("tpexport", "tree")),
        f"- mode: {res['settings']['mode']}, rounds {res['settings']['rounds']}, "
        f"target {res['settings']['target_s']} s / measurement, min runs {res['settings']['min_runs']}",
        "",
        "Medians in ms. ratio = tpexport / best peer (< 1: tpexport faster). "
        "err = max |tpexport - torch| / max |torch|. `~`: tpexport timed by `tpexport run` (not comparable).",
        "",
        "| model | threads | ORT ms | torch ms | tensorplay ms | tpexport ms | ratio (best) | max rel err |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in res["rows"]:
        cells = [row["model"], str(row["threads"])]
        for k, _ in PEER_COLS:
            p = row["peers"].get(k, {})
            cells.append(fmt_ms(p.get("median_ms")) if "median_ms" in p else ("err" if "error" in p else "-"))
        t = row["peers"].get("tpexport", {})
        if "median_ms" in t:
            cells.append(("~" if not t.get("comparable", True) else "") + fmt_ms(t["median_ms"]))
        else:
            cells.append("err" if "error" in t else "-")
        cells.append(f"{'~' if not t.get('comparable', True) else ''}{row['ratio']:.2f} ({row['best_peer']})"
                     if row.get("ratio") is not None else "-")
        cells.append(fmt_err(row.get("max_rel_err")))
        lines.append("| " + " | ".join(cells) + " |")
    notes = []
    for name, mi in res["models"].items():
        if mi.get("error"):
            notes.append(f"- {name}: {mi['error']}")
    for row in res["rows"]:
        for k, p in row["peers"].items():
            if "error" in p:
                notes.append(f"- {row['model']} threads {row['threads']} {k}: {p['error']}")
        if isinstance(row.get("max_rel_err"), str):
            notes.append(f"- {row['model']} threads {row['threads']} correctness: {row['max_rel_err']}")
    if notes:
        lines += ["", "## Errors", ""] + notes
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", choices=["ort", "torch", "tensorplay"], help=argparse.SUPPRESS)
    ap.add_argument("--worker-threads", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--out", default=os.path.join(HERE, "out"), help="work/result folder (default bench/out)")
    ap.add_argument("--models", default="", help="comma-separated models (default: all of gen_models.MODELS)")
    ap.add_argument("--threads", default="1,2", help="thread counts (default 1,2)")
    ap.add_argument("--quick", action="store_true", help="few runs: 1 round, >= 3 runs, ~0.3 s per measurement")
    ap.add_argument("--peers", default="ort,torch,tensorplay,tpexport", help="which to time (default all)")
    ap.add_argument("--tpexport", default=os.environ.get("TPEXPORT", os.path.join(ROOT, "build-bench", "tpexport")))
    ap.add_argument("--rounds", type=int, help="interleaved rounds per measurement (default 3, quick 1)")
    ap.add_argument("--target-s", type=float, help="wanted time per measurement, all rounds (default 2, quick 0.3)")
    ap.add_argument("--min-runs", type=int, help="runs per measurement at least (default 20, quick 3)")
    ap.add_argument("--max-s", type=float, help="cap per measurement: fewer runs for slow models (default 30, quick 5)")
    ap.add_argument("--timeout-s", type=float, default=900, help="kill a tpexport command after this long")
    ap.add_argument("--no-gen", action="store_true", help="use the models already in --out")
    ap.add_argument("--mask-avx512", action="store_true",
                    help="hide AVX-512 from every peer's cpuid (bench/cpuid_mask.c): time the AVX2 + FMA paths; "
                         "results go to OUT/results-avx2.{md,json}")
    a = ap.parse_args()
    if a.worker:
        return worker_main(a.worker, a.out, a.worker_threads)
    if a.mask_avx512:
        enable_avx512_mask(a.out)
    res_name = "results-avx2" if a.mask_avx512 else "results"

    rounds = a.rounds or (1 if a.quick else 3)
    target_s = a.target_s or (0.3 if a.quick else 2.0)
    min_runs = a.min_runs or (3 if a.quick else 20)
    max_s = a.max_s or (5.0 if a.quick else 30.0)
    warmup = 1 if a.quick else 3
    threads_list = [int(t) for t in a.threads.split(",") if t]
    peers_wanted = [p for p in a.peers.split(",") if p]
    os.makedirs(a.out, exist_ok=True)

    sys.path.insert(0, HERE)
    if a.models:
        models = [m for m in a.models.split(",") if m]
    else:
        src = open(os.path.join(HERE, "gen_models.py")).read()  # no torch in this interpreter
        block = src[src.index("MODELS = {"):src.index("\n}\n", src.index("MODELS = {"))]
        models = re.findall(r'^    "([a-z0-9_]+)":', block, re.M)

    # 1. models
    if not a.no_gen:
        print(f"== generating models ({SYS_PY} gen_models.py)", flush=True)
        subprocess.run([SYS_PY, os.path.join(HERE, "gen_models.py"), "--out", a.out, "--models", ",".join(models)])
    with open(os.path.join(a.out, "models.json")) as f:
        manifest = json.load(f)
    res = {"date": time.strftime("%Y-%m-%d %H:%M:%S %z"), "machine": machine_info(),
           "settings": {"mode": "quick" if a.quick else "full", "rounds": rounds, "target_s": target_s,
                        "min_runs": min_runs, "max_s": max_s, "warmup": warmup, "threads": threads_list},
           "versions": {}, "models": {}, "rows": []}
    gen = manifest.get("generator", {})
    res["versions"].update({k: gen[k] for k in ("torch", "torchvision") if k in gen})

    # 2. convert
    tpx = None
    if not os.access(a.tpexport, os.X_OK):
        print(f"run.py: no tpexport at {a.tpexport} (build it, or pass --tpexport)", file=sys.stderr)
    else:
        tpx = Tpexport(a.tpexport, a.out)
        res["versions"]["tpexport"] = tpx.version
        res["versions"]["tree"] = git_rev()
        res["tpexport_timing"] = "tpexport bench" if tpx.has_bench else "tpexport run --repeat (fallback)"
        if not tpx.has_bench:
            print("note: `tpexport bench` does not exist yet: timing `tpexport run --repeat` (marked ~, not comparable)")
    print("== converting (tpexport convert)", flush=True)
    for m in models:
        mi = res["models"][m] = {}
        entry = manifest["models"].get(m)
        if entry is None:
            mi["error"] = "model generation failed (see gen_models.py output)"
            print(f"{m:16s} {mi['error']}")
            continue
        mi.update(description=entry["description"], params=entry["params"], opset=entry["opset"])
        if tpx is None:
            continue
        pt2 = os.path.join(a.out, f"{m}.pt2")
        if os.path.exists(pt2):
            os.unlink(pt2)
        t0 = time.perf_counter()
        r = subprocess.run([tpx.exe, "convert", os.path.join(a.out, entry["onnx"]), "-o", pt2],
                           capture_output=True, text=True)
        mi["convert_s"] = round(time.perf_counter() - t0, 3)
        if r.returncode != 0:
            mi["error"] = "convert failed: " + (_last_line(r.stderr) or f"exit {r.returncode}")
        else:
            mi["pt2_bytes"] = os.path.getsize(pt2)
        print(f"{m:16s} {mi.get('error', 'ok')} ({mi['convert_s']:.2f} s)", flush=True)

    # 3. peers: one worker process per (peer, thread count), all started up front
    procs = {}  # (kind, threads) -> PeerProc
    venv_py = sys.executable
    for kind, py in (("ort", venv_py), ("torch", SYS_PY), ("tensorplay", venv_py)):
        if kind not in peers_wanted:
            continue
        try:
            for n in threads_list:
                procs[kind, n] = PeerProc(kind, py, a.out, n)
            res["versions"][kind if kind != "ort" else "onnxruntime"] = procs[kind, threads_list[0]].version
        except Exception as e:
            print(f"run.py: peer {kind} unavailable: {e}", file=sys.stderr)
            for n in threads_list:
                procs.pop((kind, n), None)
    try:
        import numpy
        res["versions"]["numpy"] = numpy.__version__
    except ImportError:
        pass
    timers = {k: True for k, _ in procs}
    if tpx is not None and "tpexport" in peers_wanted:
        timers["tpexport"] = tpx

    def only(key):
        """Let only procs[key] run (None: no worker); the others are stopped."""
        for k, p in procs.items():
            p.pause(k != key)
        time.sleep(0.05)  # let the previous peer's spinning threads go idle

    def measure(kind, m, threads, w, runs):
        only((kind, threads) if kind != "tpexport" else None)
        if kind == "tpexport":
            return tpx.time(m, manifest["models"][m], threads, w, runs, a.timeout_s)
        return procs[kind, threads].ask(cmd="time", model=m, threads=threads, warmup=w, runs=runs)

    print("== timing", flush=True)
    hdr = f"{'model':16s} {'thr':>3s} " + " ".join(f"{k:>11s}" for k in timers) + "   ratio   err"
    print(hdr, flush=True)
    for m in models:
        mi = res["models"][m]
        if "params" not in mi:
            continue
        kinds = [k for k in timers if not (k in ("tpexport", "tensorplay") and "error" in mi)]
        err_tpx = None
        for threads in threads_list:
            row = {"model": m, "threads": threads, "peers": {}}
            samples = {k: {"times": [], "rounds": []} for k in kinds}
            comparable = True
            # probe: warm up and estimate one run
            est = {}
            for k in list(kinds):
                try:
                    r = measure(k, m, threads, warmup, 1)
                    est[k] = r["times_ms"][0] if "times_ms" in r else r["round"]["median_ms"]
                    comparable &= r.get("comparable", True)
                except Exception as e:
                    row["peers"][k] = {"error": str(e)[:500]}
                    kinds.remove(k)
                    continue
            plan = {}
            for k in kinds:
                t = max(est[k], 1e-3) / 1e3
                n = max(min_runs, math.ceil(target_s / t))
                if n * t > max_s:
                    n = max(1 if a.quick else 3, math.floor(max_s / t))
                n = min(n, 100000)
                plan[k] = max(1, math.ceil(n / rounds))
            for rd in range(rounds):
                order = kinds[rd % len(kinds):] + kinds[:rd % len(kinds)] if kinds else []
                for k in order:
                    if k in row["peers"]:
                        continue
                    # fresh tpexport processes warm up again (fewer runs when one run is slow)
                    w = (warmup if est[k] * warmup < 2000 else 1) if k == "tpexport" else 1
                    try:
                        r = measure(k, m, threads, w, plan[k])
                    except Exception as e:
                        row["peers"][k] = {"error": str(e)[:500]}
                        continue
                    if "round" in r:
                        samples[k]["rounds"].append(r["round"])
                    else:
                        samples[k]["times"].extend(r["times_ms"])
            for k in kinds:
                if k in row["peers"]:
                    continue
                s = stats(samples[k])
                if s:
                    row["peers"][k] = s
                    if k == "tpexport":
                        s["comparable"] = comparable and tpx.has_bench
                        s.update({f"tpexport_{x}": v for x, v in tpx.last_extra.items() if x == "arena_bytes"})
            # correctness: tpexport's outputs against torch's saved ones (each thread count if run has --threads)
            if tpx is not None and "error" not in mi and (err_tpx is None or "--threads" in tpx.run_help):
                try:
                    err_tpx = max_rel_err(tpx.outputs(m, manifest["models"][m], threads, a.timeout_s),
                                          load_refs(a.out, manifest["models"][m]))
                except Exception as e:
                    err_tpx = f"run failed: {str(e)[:300]}"
            row["max_rel_err"] = err_tpx
            if threads == threads_list[0]:
                for k in ("ort", "tensorplay"):
                    if (k, threads) in procs and k in kinds and "error" not in row["peers"].get(k, {}):
                        try:
                            only((k, threads))
                            mi[f"{k}_max_rel_err"] = procs[k, threads].ask(cmd="check", model=m, threads=threads)["max_rel_err"]
                        except Exception as e:
                            mi[f"{k}_max_rel_err"] = f"error: {e}"[:300]
            peer_meds = {k: p["median_ms"] for k, p in row["peers"].items() if k != "tpexport" and "median_ms" in p}
            t = row["peers"].get("tpexport", {})
            if peer_meds and "median_ms" in t:
                best = min(peer_meds, key=peer_meds.get)
                row["best_peer"], row["ratio"] = best, t["median_ms"] / peer_meds[best]
            res["rows"].append(row)
            cells = []
            for k in timers:
                p = row["peers"].get(k, {})
                cells.append(f"{fmt_ms(p['median_ms']):>11s}" if "median_ms" in p else f"{'err' if 'error' in p else '-':>11s}")
            ratio = f"{row['ratio']:6.2f}" if row.get("ratio") is not None else "     -"
            print(f"{m:16s} {threads:3d} " + " ".join(cells) + f"  {ratio}  {fmt_err(row['max_rel_err'])}", flush=True)
            for k, p in row["peers"].items():
                if "error" in p:
                    print(f"    {k}: {p['error'][:300]}", flush=True)
    for p in procs.values():
        p.close()

    md = render_md(res)
    with open(os.path.join(a.out, res_name + ".md"), "w") as f:
        f.write(md)
    with open(os.path.join(a.out, res_name + ".json"), "w") as f:
        json.dump(res, f, indent=1, default=str)
    print()
    print(md)
    print(f"wrote {os.path.join(a.out, res_name + '.md')} and {res_name}.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
