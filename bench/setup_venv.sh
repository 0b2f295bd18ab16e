#!/bin/bash
# setup_venv.sh - prepare what bench/run.py needs (not run in CI).
#
#   bench/.venv            python3 -m venv with numpy, onnx, onnxruntime, tensorplay
#                          (bench/requirements.txt); PYTHON picks the interpreter
#                          (default python3)
#   /usr/bin/python3       Debian's python3-torch 1.13 + python3-torchvision 0.14,
#                          installed with apt-get when missing (needs root); used to
#                          generate the models and as the PyTorch peer
#
# Idempotent: an existing venv whose imports work is kept; REINSTALL=1 recreates it.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
VENV=${VENV:-$HERE/.venv}
PYTHON=${PYTHON:-python3}
SYS_PY=${SYS_PY:-/usr/bin/python3}

if ! "$SYS_PY" -c 'import torch, torchvision' >/dev/null 2>&1; then
    echo "== installing python3-torch python3-torchvision (Debian) for $SYS_PY"
    if [ "$(id -u)" != 0 ]; then
        echo "setup_venv.sh: need root for apt-get (or install python3-torch python3-torchvision yourself)" >&2
        exit 1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-torch python3-torchvision >/dev/null
fi
# Debian's torch calls the system BLAS (libblas.so.3). With only libblas3
# (the reference BLAS, which python3-torch pulls in) its linear layers run at
# ~4 GFLOP/s, 40x slower than with OpenBLAS, and PyTorch is no real peer;
# libopenblas0-pthread takes over libblas.so.3 through update-alternatives.
# run.py sets OPENBLAS_NUM_THREADS to each worker's thread count (torch's
# set_num_threads does not reach OpenBLAS's own threads).
if ! ls /usr/lib/*/openblas*/libopenblas.so.0 >/dev/null 2>&1; then # any of Debian's OpenBLAS variants
    echo "== installing libopenblas0-pthread (Debian) as PyTorch's BLAS"
    if [ "$(id -u)" != 0 ]; then
        echo "setup_venv.sh: need root for apt-get (or install libopenblas0-pthread yourself)" >&2
        exit 1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libopenblas0-pthread >/dev/null
fi
"$SYS_PY" -c 'import torch, torchvision; print("torch", torch.__version__, "torchvision", torchvision.__version__, "(" + __import__("sys").executable + ")")'

if [ "${REINSTALL:-0}" = 1 ]; then rm -rf "$VENV"; fi
check='import numpy, onnx, onnxruntime, tensorplay'
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "$check" >/dev/null 2>&1; then
    echo "== creating $VENV ($PYTHON -m venv; pip install -r bench/requirements.txt)"
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --upgrade pip
    "$VENV/bin/pip" install --quiet -r "$HERE/requirements.txt"
fi

# ORT must load and run a model, not only import
"$VENV/bin/python" - <<'PY'
import numpy as np, onnx, onnx.helper as h, onnxruntime as ort, tensorplay
g = h.make_graph([h.make_node("Relu", ["x"], ["y"])], "g",
                 [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])],
                 [h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])])
m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
m.ir_version = 8
s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
y = s.run(None, {"x": np.array([-1.0, 2.0], np.float32)})[0]
assert y.tolist() == [0.0, 2.0], y
print("onnxruntime", ort.__version__, "runs; onnx", onnx.__version__, "numpy", np.__version__,
      "tensorplay", tensorplay.__version__)
PY
