#!/bin/sh
# test_cli.sh - the tpexport command end to end: every subcommand on an
# archive made by the demo, its outputs, and its exit codes for bad input.
# Usage: test_cli.sh TPEXPORT DEMO SOURCE_DIR   (ctest passes them)
T=$1 DEMO=$2 SRC=$3
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
passed=0 failed=0
check() { # check NAME COND...
    name=$1; shift
    if "$@"; then passed=$((passed + 1)); else echo "FAIL $name"; failed=$((failed + 1)); fi
}
expect_rc() { # expect_rc WANT CMD...: run CMD, compare its exit status
    want=$1; shift
    "$@" > "$dir/out" 2> "$dir/err"
    rc=$?
    [ "$rc" -eq "$want" ] || { echo "  '$*' exited $rc, expected $want: $(cat "$dir/err")"; return 1; }
}
contains() { grep -q -- "$2" "$1" || { echo "  $1 lacks '$2'"; return 1; }; }

"$DEMO" "$dir/mlp.pt2" > /dev/null || { echo "demo failed"; exit 1; }

check inspect expect_rc 0 "$T" inspect "$dir/mlp.pt2"
check inspect_text contains "$dir/out" "p_fc1_weight: PARAMETER target='fc1.weight'"
check inspect_ops contains "$dir/out" "linear                       2"
check inspect_json expect_rc 0 "$T" inspect "$dir/mlp.pt2" --json
check inspect_json_text contains "$dir/out" '"kind": "USER_INPUT"'
check print expect_rc 0 "$T" print "$dir/mlp.pt2"
check print_text contains "$dir/out" "user_inputs            = \['x'\]"
check verify expect_rc 0 "$T" verify "$dir/mlp.pt2"
check verify_text contains "$dir/out" ": ok"
check run expect_rc 0 "$T" run "$dir/mlp.pt2" --out "$dir/o"
check run_summary contains "$dir/out" "output_0: float32\[2, 3\] = \[-0.482763"
check run_file test -s "$dir/o/output_0.npy"
# the output written can be fed back as an input of the wrong shape
check run_bad_input expect_rc 1 "$T" run "$dir/mlp.pt2" "x=$dir/o/output_0.npy"
check run_bad_input_msg contains "$dir/err" "x.shape\[1\] = 3 must equal 4 (static dim)"
check run_unknown_program expect_rc 1 "$T" run "$dir/mlp.pt2" --program nope
check decompose expect_rc 0 "$T" decompose "$dir/mlp.pt2" -o "$dir/dec.pt2"
check decomposed_runs expect_rc 0 "$T" run "$dir/dec.pt2"
check decomposed_same contains "$dir/out" "output_0: float32\[2, 3\] = \[-0.482763"
check decomposed_no_linear expect_rc 0 "$T" print "$dir/dec.pt2"
check decomposed_matmul contains "$dir/out" "matmul"
check convert expect_rc 0 "$T" convert "$SRC/tests/fixtures/onnx/dynamic.onnx" -o "$dir/c.pt2" --dynamic batch=1:8
check convert_run expect_rc 0 "$T" run "$dir/c.pt2" "$SRC/tests/fixtures/onnx/dynamic_x.npy"
check convert_report expect_rc 0 "$T" convert --report "$SRC/tests/fixtures/onnx/resnet.onnx"
# errors
check missing_file expect_rc 3 "$T" inspect "$dir/none.pt2"
check missing_file_msg contains "$dir/err" "cannot open"
printf 'not a zip' > "$dir/bad.pt2"
check verify_bad expect_rc 1 "$T" verify "$dir/bad.pt2"
check usage expect_rc 2 "$T" frobnicate
check usage_option expect_rc 2 "$T" run "$dir/mlp.pt2" --bogus
check decompose_no_out expect_rc 2 "$T" decompose "$dir/mlp.pt2"
check help expect_rc 0 "$T" run --help
check help_text contains "$dir/out" "usage: tpexport run FILE"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
