#!/bin/sh
# onnx_wheel_report.sh - the optional ONNX conformance report on the newer
# backend test data of the `onnx` wheel from PyPI (docs/onnx.md, "Newer test
# data"). Not run by CI: it needs the network once, to install the wheel.
#
#   tools/onnx_wheel_report.sh [RUNNER] [-- RUNNER-OPTIONS...]
#
# RUNNER defaults to build/tpexport_onnx_conformance. Environment:
#   ONNX_VENV     venv folder (default /tmp/onnxvenv; created when missing)
#   ONNX_VERSION  pip version spec for onnx (default: the newest release)
#   ONNX_DATA     where the generated node cases go (default $ONNX_VENV/node-data)
#
# Recent wheels ship the pytorch-converted, pytorch-operator, simple, light
# and real suites but no longer the node suite; the node cases are then
# written from the wheel's own generators (onnx.backend.test.case.node), the
# same code that produces the data in onnx's source tree.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
runner=${1:-$here/../build/tpexport_onnx_conformance}
[ $# -gt 0 ] && shift
[ "${1:-}" = "--" ] && shift
venv=${ONNX_VENV:-/tmp/onnxvenv}
py=$venv/bin/python

if [ ! -x "$runner" ]; then
    echo "onnx_wheel_report: runner '$runner' not found (cmake --build build --target tpexport_onnx_conformance)" >&2
    exit 2
fi
if [ ! -x "$py" ] || ! "$py" -c "import onnx" 2>/dev/null; then
    echo "onnx_wheel_report: creating $venv with onnx${ONNX_VERSION:+==$ONNX_VERSION}" >&2
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet "onnx${ONNX_VERSION:+==$ONNX_VERSION}"
fi

data=$("$py" -c "import os, onnx.backend.test as t; print(os.path.join(os.path.dirname(t.__file__), 'data'))")
version=$("$py" -c "import onnx; print(onnx.__version__)")
node=$data/node
if [ ! -d "$node" ]; then
    node=${ONNX_DATA:-$venv/node-data}/node
    if [ ! -f "$node/.onnx-$version" ]; then
        echo "onnx_wheel_report: writing the node cases of onnx $version to $node" >&2
        rm -rf "$node"
        "$py" -W ignore - "$(dirname "$node")" <<'EOF'
import argparse, sys
import onnx.backend.test.cmd_tools as tools
import onnx.backend.test.case.node as node_cases
# cmd_tools writes the cases model_test.collect_testcases() returns; give it the node cases.
tools.model_test.collect_testcases = lambda: node_cases.collect_testcases(None)
tools.generate_data(argparse.Namespace(output=sys.argv[1]))
EOF
        touch "$node/.onnx-$version"
    fi
fi

echo "onnx $version: $data ($node)"
set -- --quiet "$@"
for suite in "$node" "$data"/pytorch-converted "$data"/pytorch-operator "$data"/simple; do
    [ -d "$suite" ] && set -- "$@" "$suite"
done
exec "$runner" "$@"
