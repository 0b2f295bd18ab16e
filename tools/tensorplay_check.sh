#!/bin/sh
# tensorplay_check.sh - shows the real tensorplay package loading archives
# that tpexport wrote and getting the same outputs as `tpexport run`.
# Not run in CI (it needs the tensorplay wheel from PyPI).
#
#   tools/tensorplay_check.sh            # build in ./build, venv in /tmp/tpvenv
#   BUILD=build-x TP_VENV=/path/venv tools/tensorplay_check.sh
#
# Steps: build the tpexport command, the demo (examples/demo_mlp.c) and the
# export example (examples/export_model.c, a dynamic batch); write their
# archives; create the venv with `pip install tensorplay numpy` if missing;
# then for each archive run `tpexport run` twice - on the embedded example
# inputs and on random inputs of the example shapes (the export example's
# batch changed to 5, inside its range) - and load the same archive with
# tensorplay.export.load, call it the same two ways and compare every
# flattened output within rtol 1e-5. Exit status 0 when all match.
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
VENV=${TP_VENV:-/tmp/tpvenv}
WORK=$(mktemp -d /tmp/tensorplay_check.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

echo "== building tpexport, the demo and the export example in $BUILD"
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
    cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build "$BUILD" -j "$(nproc)" --target tpexport_cli tpexport_demo tpexport_export_model >/dev/null

if [ ! -x "$VENV/bin/python" ]; then
    echo "== creating $VENV (pip install tensorplay numpy)"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet tensorplay numpy
fi
PY="$VENV/bin/python"
"$PY" -c 'import tensorplay, numpy; print("tensorplay", getattr(tensorplay, "__version__", "?"), "numpy", numpy.__version__)'

echo "== writing archives with tpexport"
"$BUILD/tpexport_demo" "$WORK/demo.pt2" >"$WORK/demo.log"
"$BUILD/tpexport_export_model" "$WORK/model.pt2" >"$WORK/model.log"
echo "demo.pt2 ($(wc -c <"$WORK/demo.pt2") bytes), model.pt2 ($(wc -c <"$WORK/model.pt2") bytes)"

# Random inputs shaped like the archive's .npy example inputs; prints
# name=path arguments for `tpexport run`, in the signature's order.
cat >"$WORK/inputs.py" <<'EOF'
import io, json, os, sys, zipfile
import numpy as np
archive, out_dir, batch = sys.argv[1], sys.argv[2], sys.argv[3]
z = zipfile.ZipFile(archive)
doc = json.loads(z.read("models/model.json"))
names = [s["arg"]["name"] for s in doc["signature"]["input_specs"] if s["kind"] == "USER_INPUT"]
rng = np.random.default_rng(1)
args = []
for n in names:
    ex = np.load(io.BytesIO(z.read(f"data/sample_inputs/model/{n}.npy")))
    shape = list(ex.shape)
    if batch != "-" and shape:
        shape[0] = int(batch)
    path = os.path.join(out_dir, f"in_{n}.npy")
    np.save(path, rng.standard_normal(shape).astype(ex.dtype))
    args.append(f"{n}={path}")
print(" ".join(args))
EOF

cat >"$WORK/compare.py" <<'EOF'
import io, os, sys
import numpy as np
import tensorplay as tp
archive, example_dir, random_dir = sys.argv[1:4]
program = tp.export.load(io.BytesIO(open(archive, "rb").read()))
names = list(program.graph_signature.user_inputs)

def flat(v):
    if isinstance(v, (tuple, list)):
        return [x for item in v for x in flat(item)]
    if isinstance(v, dict):
        return [x for item in v.values() for x in flat(item)]
    return [v]

def compare(label, got, out_dir):
    want = sorted(f for f in os.listdir(out_dir) if f.startswith("output_"))
    assert len(got) == len(want), f"{label}: tensorplay gave {len(got)} outputs, tpexport {len(want)}"
    worst = 0.0
    for g, f in zip(got, sorted(want, key=lambda s: int(s[7:-4]))):
        w = np.load(os.path.join(out_dir, f))
        g = np.ascontiguousarray(g.detach().numpy())
        assert g.shape == w.shape, f"{label} {f}: shape {g.shape} vs {w.shape}"
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, err_msg=f"{label} {f}")
        worst = max(worst, float(np.max(np.abs(g.astype(np.float64) - w))) if w.size else 0.0)
    print(f"  {label}: {len(got)} output(s) {[tuple(np.shape(x.detach().numpy())) for x in got]} match (max |diff| {worst:.2e})")

compare("example inputs", flat(program()), example_dir)
args = [tp.from_numpy(np.load(os.path.join(random_dir, f"in_{n}.npy"))) for n in names]
compare("random inputs ", flat(program(*args)), random_dir)
EOF

status=0
for case in demo:- model:5; do
    name=${case%%:*}
    batch=${case#*:}
    archive="$WORK/$name.pt2"
    mkdir -p "$WORK/$name/example" "$WORK/$name/random"
    echo "== $name.pt2"
    "$BUILD/tpexport" run "$archive" --out "$WORK/$name/example" >"$WORK/$name/run1.log"
    inputs=$("$PY" "$WORK/inputs.py" "$archive" "$WORK/$name/random" "$batch")
    # shellcheck disable=SC2086
    "$BUILD/tpexport" run "$archive" $inputs --out "$WORK/$name/random" >"$WORK/$name/run2.log"
    echo "  tpexport run: $(grep -c . "$WORK/$name/run1.log") summary lines; random inputs: $inputs" | sed "s|$WORK/||g"
    if "$PY" "$WORK/compare.py" "$archive" "$WORK/$name/example" "$WORK/$name/random"; then
        echo "ok   $name.pt2: tensorplay loads it and reproduces tpexport's outputs"
    else
        echo "FAIL $name.pt2"
        status=1
    fi
done
exit $status
