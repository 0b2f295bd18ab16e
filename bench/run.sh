#!/bin/bash
# run.sh - the whole benchmark in one command (not run in CI):
#
#   bash bench/run.sh [run.py options]      e.g. --quick --models mlp,resnet18 --threads 1,2
#
# 1. bench/setup_venv.sh   (bench/.venv with onnxruntime/onnx/numpy/tensorplay;
#                           Debian python3-torch/torchvision for /usr/bin/python3)
# 2. builds the tpexport command (Release) in $BUILD (default build-bench);
#    SKIP_BUILD=1 uses what is there; TPEXPORT=path uses another binary
# 3. bench/run.py: generate models, convert, time, check, write bench/out/results.{md,json}
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
BUILD=${BUILD:-$ROOT/build-bench}

bash "$HERE/setup_venv.sh"
if [ -z "${TPEXPORT:-}" ]; then
    if [ "${SKIP_BUILD:-0}" != 1 ]; then
        echo "== building tpexport (Release) in $BUILD"
        [ -f "$BUILD/CMakeCache.txt" ] || cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
        cmake --build "$BUILD" -j "$(nproc)" --target tpexport_cli >/dev/null
    fi
    export TPEXPORT=$BUILD/tpexport
fi
exec "$HERE/.venv/bin/python" "$HERE/run.py" "$@"
