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
not_contains() { ! grep -q -- "$2" "$1" || { echo "  $1 has '$2'"; return 1; }; }
one_line() { # one_line FILE TEXT: FILE is exactly one line, containing TEXT
    [ "$(wc -l < "$1")" -eq 1 ] || { echo "  $1 is not one line: $(cat "$1")"; return 1; }
    contains "$1" "$2"
}
one_object() { # one_object FILE: FILE is one JSON object (as jansson indents it) and nothing else
    [ "$(head -n 1 "$1")" = "{" ] && [ "$(tail -n 1 "$1")" = "}" ] && [ "$(grep -c '^[{}]' "$1")" -eq 2 ] ||
        { echo "  $1 is not exactly one JSON object"; return 1; }
}

"$DEMO" "$dir/mlp.pt2" > /dev/null || { echo "demo failed"; exit 1; }

check inspect expect_rc 0 "$T" inspect "$dir/mlp.pt2"
cp "$dir/out" "$dir/mlp_inspect"
check inspect_text contains "$dir/out" "p_fc1_weight: PARAMETER target='fc1.weight'"
check inspect_ops contains "$dir/out" "linear                       2"
check inspect_json expect_rc 0 "$T" inspect "$dir/mlp.pt2" --json
check inspect_json_text contains "$dir/out" '"kind": "USER_INPUT"'
cp "$dir/out" "$dir/mlp_inspect_json"
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
check bench_inputs expect_rc 0 "$T" bench "$dir/c.pt2" "$SRC/tests/fixtures/onnx/dynamic_x.npy" --runs 3 --warmup 0
check bench_named_input expect_rc 0 "$T" bench "$dir/c.pt2" "x=$SRC/tests/fixtures/onnx/dynamic_x.npy" --runs 3
check convert_report expect_rc 0 "$T" convert --report "$SRC/tests/fixtures/onnx/resnet.onnx"
# threads and cpu levels through a run context
check run_threads1 expect_rc 0 "$T" run "$dir/mlp.pt2" --threads 1 --out "$dir/t1"
check run_threads2 expect_rc 0 "$T" run "$dir/mlp.pt2" --threads 2 --out "$dir/t2"
check run_threads_same cmp "$dir/t1/output_0.npy" "$dir/t2/output_0.npy"
check run_cpu_reference expect_rc 0 "$T" run "$dir/mlp.pt2" --cpu-level reference
check run_cpu_reference_out contains "$dir/out" "output_0: float32\[2, 3\] = \[-0.482763"
# usage errors are one line naming the problem and where the help is
check usage_cmd expect_rc 2 "$T" frobnicate
check usage_cmd_msg one_line "$dir/err" "unknown command 'frobnicate' (see 'tpexport --help')"
check usage_file expect_rc 2 "$T" run
check usage_file_msg one_line "$dir/err" "missing FILE (see 'tpexport run --help')"
check usage_opt expect_rc 2 "$T" inspect "$dir/mlp.pt2" --bogus
check usage_opt_msg one_line "$dir/err" "unknown option '--bogus' (see 'tpexport inspect --help')"
# --out naming a file fails before anything runs
: > "$dir/a_file"
check run_out_file expect_rc 3 "$T" run "$dir/mlp.pt2" --out "$dir/a_file"
check run_out_file_msg one_line "$dir/err" "is not a directory"
check run_out_file_quiet not_contains "$dir/out" "output_0"
check run_threads0 expect_rc 2 "$T" run "$dir/mlp.pt2" --threads 0
check run_threads0_msg one_line "$dir/err" "--threads"
check run_repeat_bad expect_rc 2 "$T" run "$dir/mlp.pt2" --repeat 2x
# inspect plans the program on its example inputs
check inspect_plan contains "$dir/mlp_inspect" \
    "arena: [0-9]* bytes, packed weights: [0-9]* bytes, steps: [0-9]* ([0-9]* fast, [0-9]* reference, [0-9]* fused, [0-9]* in place)"
check inspect_plan_json contains "$dir/mlp_inspect_json" '"packed_bytes": [0-9]'
# inspect shows user inputs' and outputs' dtype and symbolic shape
check inspect_io expect_rc 0 "$T" inspect "$SRC/tests/fixtures/tensorplay/dynamic.pt2"
check inspect_io_in contains "$dir/out" "z: USER_INPUT  float32\[2\*batch, 4\]"
check inspect_io_out contains "$dir/out" "add_0: USER_OUTPUT  float32\[batch, 3\]"
check inspect_io_json expect_rc 0 "$T" inspect "$SRC/tests/fixtures/tensorplay/dynamic.pt2" --json
check inspect_io_json_shape contains "$dir/out" '"2\*batch",'
check inspect_no_plan expect_rc 0 "$T" inspect "$dir/mlp.pt2" --no-plan
check inspect_no_plan_text not_contains "$dir/out" "arena:"
# bench (nothing about speed is asserted: only that it runs and reports)
check bench expect_rc 0 "$T" bench "$dir/mlp.pt2" --runs 20 --warmup 1
check bench_latency contains "$dir/out" "latency: *median [0-9.]* ms, p90 [0-9.]* ms, min [0-9.]* ms, mean [0-9.]* ms"
check bench_runs contains "$dir/out" "runs: *20 timed after 1 warm-up"
check bench_plan contains "$dir/out" "arena: [0-9]* bytes, packed weights: [0-9]* bytes, steps: [0-9]* ("
check bench_rss contains "$dir/out" "peak RSS: *[1-9][0-9]* bytes"
check bench_entry contains "$dir/out" "tp_run_execute"
check bench_min_time expect_rc 0 "$T" bench "$dir/mlp.pt2" --min-time 0.05 --threads 2 --example
check bench_min_time_runs contains "$dir/out" "2 threads"
check bench_profile expect_rc 0 "$T" bench "$dir/mlp.pt2" --runs 10 --profile
check bench_profile_linear contains "$dir/out" "^  linear  *[a-z0-9]*  *2 "
# relu is fused into the first linear's epilogue; the reference level runs it as its own step
check bench_profile_reference expect_rc 0 "$T" bench "$dir/mlp.pt2" --runs 3 --profile --cpu-level reference
check bench_profile_relu contains "$dir/out" "^  relu  *reference "
# --profile-nodes: one row per node, its name last
check bench_profile_nodes expect_rc 0 "$T" bench "$dir/mlp.pt2" --runs 4 --profile-nodes
check bench_profile_nodes_header contains "$dir/out" "^  op  *variant  *calls  *ms  *%  *spread ms  node$"
check bench_profile_nodes_linear contains "$dir/out" "^  linear  *[a-z0-9]*  *1  *[0-9.]*  *[0-9.]*%  *[0-9.]*  linear$"
check bench_profile_nodes_linear_1 contains "$dir/out" "^  linear  *[a-z0-9]*  *1  *[0-9.]*  *[0-9.]*%  *[0-9.]*  linear_1$"
# one thread: nothing waits at a step's end
check bench_profile_spread_1t contains "$dir/out" "^  total  *[0-9.]*  *100.0%  *0.000$"
check bench_profile_nodes_json expect_rc 0 "$T" bench "$dir/mlp.pt2" --runs 2 --profile-nodes --json
check bench_profile_nodes_json_node contains "$dir/out" '"node": "linear_1"'
check bench_profile_nodes_json_spread contains "$dir/out" '"spread_ms": 0'
check bench_json expect_rc 0 "$T" bench "$dir/mlp.pt2" --runs 5 --json --profile
check bench_json_no_node not_contains "$dir/out" '"node"'
cp "$dir/out" "$dir/bench.json"
for key in median_ms p90_ms min_ms mean_ms runs threads cpu_level arena_bytes packed_bytes steps fast_steps \
    reference_steps peak_rss_bytes ops; do
    check "bench_json_$key" contains "$dir/bench.json" "^  \"$key\": "
done
check bench_json_runs contains "$dir/bench.json" '"runs": 5,'
check bench_json_median_positive contains "$dir/bench.json" '"median_ms": [0-9.]*[1-9]'
check bench_json_op contains "$dir/bench.json" '"op": "linear"'
check bench_json_only one_object "$dir/bench.json"
if command -v python3 > /dev/null 2>&1; then # optional: a real JSON parser
    check bench_json_parses python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["median_ms"] > 0 and d["runs"] == 5 and any(o["op"] == "linear" for o in d["ops"])' "$dir/bench.json"
fi
check bench_reference expect_rc 0 "$T" bench "$dir/mlp.pt2" --runs 3 --json --cpu-level reference
check bench_reference_level contains "$dir/out" '"cpu_level": "reference"'
check bench_reference_no_fast contains "$dir/out" '"fast_steps": 0,'
check bench_bad_input expect_rc 1 "$T" bench "$dir/mlp.pt2" "x=$dir/o/output_0.npy" --runs 3
check bench_bad_input_msg contains "$dir/err" "x.shape\[1\] = 3 must equal 4 (static dim)"
check bench_runs_bad expect_rc 2 "$T" bench "$dir/mlp.pt2" --runs 2abc
check bench_runs_bad_msg one_line "$dir/err" "--runs needs an integer"
check bench_runs_zero expect_rc 2 "$T" bench "$dir/mlp.pt2" --runs 0
check bench_threads0 expect_rc 2 "$T" bench "$dir/mlp.pt2" --threads 0
check bench_threads0_msg one_line "$dir/err" "--threads needs an integer"
check bench_threads_neg expect_rc 2 "$T" bench "$dir/mlp.pt2" --threads -1
check bench_threads_neg_msg one_line "$dir/err" "--threads needs an integer"
check bench_warmup_bad expect_rc 2 "$T" bench "$dir/mlp.pt2" --warmup 1.5
check bench_min_time_bad expect_rc 2 "$T" bench "$dir/mlp.pt2" --min-time 0
check bench_cpu_bad expect_rc 2 "$T" bench "$dir/mlp.pt2" --cpu-level fast
check bench_cpu_bad_msg one_line "$dir/err" "--cpu-level"
check bench_no_value expect_rc 2 "$T" bench "$dir/mlp.pt2" --runs
check bench_no_value_msg one_line "$dir/err" "needs a value"
check bench_unknown_program expect_rc 1 "$T" bench "$dir/mlp.pt2" --program nope
check bench_help expect_rc 0 "$T" bench --help
check bench_help_text contains "$dir/out" "usage: tpexport bench FILE"
check main_help_bench expect_rc 0 "$T" --help
check main_help_bench_text contains "$dir/out" "  bench "
# errors
check missing_file expect_rc 3 "$T" inspect "$dir/none.pt2"
check missing_file_msg contains "$dir/err" "cannot open"
printf 'not a zip' > "$dir/bad.pt2"
check verify_bad expect_rc 1 "$T" verify "$dir/bad.pt2"
check usage expect_rc 2 "$T" frobnicate
check usage_option expect_rc 2 "$T" run "$dir/mlp.pt2" --bogus
check decompose_no_out expect_rc 2 "$T" decompose "$dir/mlp.pt2"
# PyTorch's own archives: run one torch.export.save wrote, save it again in both formats
TA=$SRC/tests/fixtures/torch_export
check torch_run expect_rc 0 "$T" run "$TA/counter.pt2"
check torch_run_examples contains "$dir/out" "inputs: the archive's example inputs"
check torch_run_values contains "$dir/out" "output_1: float32\[1\] = \[2\]"
check torch_save expect_rc 0 "$T" save "$TA/counter.pt2" -o "$dir/rt.pt2" --format torch
check torch_save_msg contains "$dir/out" "PyTorch's format"
check torch_saved_runs expect_rc 0 "$T" run "$dir/rt.pt2" "x=$TA/counter.case0.in0.npy" "y=$TA/counter.case0.in1.npy"
check torch_saved_inspect expect_rc 0 "$T" inspect "$dir/rt.pt2"
check torch_saved_dims contains "$dir/out" "x.shape\[0\]: s"
check torch_to_tensorplay expect_rc 0 "$T" save "$TA/counter.pt2" -o "$dir/tp.pt2"
check torch_to_tensorplay_runs expect_rc 0 "$T" run "$dir/tp.pt2"
check save_bad_format expect_rc 2 "$T" save "$TA/counter.pt2" -o "$dir/x.pt2" --format onnx
check save_bad_format_msg contains "$dir/err" "unknown format 'onnx'"
check torch_unknown_op expect_rc 1 "$T" run "$TA/unknown_op.pt2"
check torch_unknown_op_msg contains "$dir/err" "unsupported op aten.frobnicate.default"
check help expect_rc 0 "$T" run --help
check help_text contains "$dir/out" "usage: tpexport run FILE"
# --state-out: every parameter and buffer after the last call, named by its state name
TPF=$SRC/tests/fixtures/tensorplay
check state_out expect_rc 0 "$T" run "$TPF/counter.pt2" "x=$TPF/counter/run0_in_x.npy" --state-out "$dir/st"
check state_out_line contains "$dir/out" "^state: 6 tensors written to $dir/st\$"
for s in bn.weight bn.bias bn.running_mean bn.running_var bn.num_batches_tracked count; do
    check "state_out_$s" test -s "$dir/st/$s.npy"
done
# one call: the mutated buffers are tensorplay's after its first call (same bytes)
for s in count bn.running_mean bn.running_var; do
    check "state_out_same_$s" cmp "$dir/st/$s.npy" "$TPF/counter/run0_state_$(echo $s | tr . _).npy"
done
# three calls: count (float32 [1]) is 3.0 = 0x40400000, num_batches_tracked (int64 []) is 3
check state_out_repeat expect_rc 0 "$T" run "$TPF/counter.pt2" "x=$TPF/counter/run0_in_x.npy" --repeat 3 --state-out "$dir/st3"
check state_out_count3 test "$(od -An -tx1 -j128 "$dir/st3/count.npy" | tr -d ' \n')" = "00004040"
check state_out_nbt3 test "$(od -An -tx1 -j128 "$dir/st3/bn.num_batches_tracked.npy" | tr -d ' \n')" = "0300000000000000"
check state_out_file expect_rc 3 "$T" run "$TPF/counter.pt2" --state-out "$dir/a_file"
check state_out_file_msg one_line "$dir/err" "tpexport: --state-out '$dir/a_file' is not a directory"
check state_out_file_quiet not_contains "$dir/out" "output_0"
check state_out_no_value expect_rc 2 "$T" run "$TPF/counter.pt2" --state-out
check state_out_no_value_msg one_line "$dir/err" "tpexport: run: option '--state-out' needs a value"
check state_out_help expect_rc 0 "$T" run --help
check state_out_help_text contains "$dir/out" "  --state-out DIR "
# non-tensor outputs (tensorplay's forward returns x * 2, 3, 0.5, True): printed, and written by
# --out as 0-d int64 / float64 / bool arrays (the bytes np.save writes for np.array(3) etc.)
CLI=$SRC/tests/fixtures/cli
check scalar_out expect_rc 0 "$T" run "$CLI/scalar_outputs.pt2" --out "$dir/so"
check scalar_out_0 contains "$dir/out" "^output_0: float32\[2, 3\] = \[-4, -2, 0, 2, 4, 6\]\$"
check scalar_out_1 contains "$dir/out" "^output_1: 3\$"
check scalar_out_2 contains "$dir/out" "^output_2: 0.5\$"
check scalar_out_3 contains "$dir/out" "^output_3: True\$"
npy_is() { # npy_is FILE DESCR DATA_HEX: a 0-d .npy of that dtype holding those bytes
    head -c 128 "$1" | grep -q "{'descr': '$2', 'fortran_order': False, 'shape': (), }" &&
        [ "$(od -An -tx1 -j128 "$1" | tr -d ' \n')" = "$3" ] || { echo "  $1 is not a 0-d $2 of $3"; return 1; }
}
check scalar_out_int npy_is "$dir/so/output_1.npy" "<i8" "0300000000000000"
check scalar_out_float npy_is "$dir/so/output_2.npy" "<f8" "000000000000e03f"
check scalar_out_bool npy_is "$dir/so/output_3.npy" "|b1" "01"
check scalar_out_tensor test -s "$dir/so/output_0.npy"
check scalar_out_quiet test ! -s "$dir/err"
# structured and scalar inputs: tuple/list items by position, dict items by key, python
# numbers and bools as literals; the outputs are tensorplay's (same bytes)
OPS=$SRC/tests/fixtures/tensorplay_ops
check bind_list expect_rc 0 "$T" run "$OPS/list_input.pt2" "xs.0=$OPS/list_input/run1_in_xs_0.npy" \
    "xs.1=$OPS/list_input/run1_in_xs_1.npy" --out "$dir/bl"
check bind_list_same cmp "$dir/bl/output_0.npy" "$OPS/list_input/run1_out0.npy"
check bind_list_no_example_line not_contains "$dir/out" "^inputs:"
check bind_dict expect_rc 0 "$T" run "$OPS/dict_input.pt2" "d.b=$OPS/dict_input/run1_in_d_b.npy" \
    "d.a=$OPS/dict_input/run1_in_d_a.npy" --out "$dir/bd"
check bind_dict_same cmp "$dir/bd/output_0.npy" "$OPS/dict_input/run1_out0.npy"
check bind_scalars expect_rc 0 "$T" run "$OPS/scalar_inputs.pt2" "x=$OPS/scalar_inputs/run1_in_x.npy" k=3 s=0.5 \
    --out "$dir/bs"
check bind_scalars_same cmp "$dir/bs/output_0.npy" "$OPS/scalar_inputs/run1_out0.npy"
check bind_scalars_positional expect_rc 0 "$T" run "$OPS/scalar_inputs.pt2" "$OPS/scalar_inputs/run1_in_x.npy" 3 0.5 \
    --out "$dir/bs2"
check bind_scalars_positional_same cmp "$dir/bs2/output_0.npy" "$OPS/scalar_inputs/run1_out0.npy"
check bind_tuple_dict_bool expect_rc 0 "$T" run "$CLI/structured.pt2" "xs.0=$CLI/xs0.npy" "xs.1=$CLI/xs1.npy" \
    cfg.k=4 cfg.scale=0.25 flag=true --out "$dir/bt"
check bind_tuple_dict_bool_same cmp "$dir/bt/output_0.npy" "$CLI/expected_k4.npy"
check bind_tuple_dict_bool_out contains "$dir/out" "^output_0: float32\[2, 3\] = \[3.75, 7.875, 12, 16.125, 20.25, 24.375\]\$"
# a big-endian .npy input ('>f4') gives the same result
check bind_big_endian expect_rc 0 "$T" run "$CLI/structured.pt2" "xs.0=$CLI/xs0_be.npy" "xs.1=$CLI/xs1.npy" \
    cfg.k=4 cfg.scale=0.25 flag=True --out "$dir/bbe"
check bind_big_endian_same cmp "$dir/bbe/output_0.npy" "$CLI/expected_k4.npy"
# bad bindings are usage errors naming the piece
usage_is() { # usage_is FILE MESSAGE: exactly "tpexport: MESSAGE (see 'tpexport run --help')"
    [ "$(cat "$1")" = "tpexport: $2 (see 'tpexport run --help')" ] || { echo "  $1 is '$(cat "$1")'"; return 1; }
}
check bind_missing expect_rc 2 "$T" run "$CLI/structured.pt2" "xs.0=$CLI/xs0.npy" cfg.k=4
check bind_missing_msg usage_is "$dir/err" \
    "missing inputs xs.1, cfg.scale, flag: give every input, or none to use the stored example inputs"
check bind_missing_quiet not_contains "$dir/out" "output_0"
check bind_missing_one expect_rc 2 "$T" run "$SRC/tests/fixtures/tensorplay/dynamic.pt2" \
    "x=$SRC/tests/fixtures/tensorplay/dynamic/run1_in_x.npy" "z=$SRC/tests/fixtures/tensorplay/dynamic/run1_in_z.npy"
check bind_missing_one_msg usage_is "$dir/err" \
    "missing input y: give every input, or none to use the stored example inputs"
check bind_whole_tuple expect_rc 2 "$T" run "$CLI/structured.pt2" "xs=$CLI/xs0.npy"
check bind_whole_tuple_msg usage_is "$dir/err" "input 'xs' is a tuple of 2: give each item, as xs.0=... xs.1=..."
check bind_whole_dict expect_rc 2 "$T" run "$CLI/structured.pt2" cfg=3
check bind_whole_dict_msg usage_is "$dir/err" \
    "input 'cfg' is a dict with keys k, scale: give each item, as cfg.k=... cfg.scale=..."
check bind_extra_item expect_rc 2 "$T" run "$CLI/structured.pt2" "xs.0=$CLI/xs0.npy" "xs.1=$CLI/xs1.npy" \
    "xs.2=$CLI/xs1.npy" cfg.k=4 cfg.scale=0.25 flag=true
check bind_extra_item_msg usage_is "$dir/err" "unknown input 'xs.2': xs is a tuple of 2"
check bind_extra_key expect_rc 2 "$T" run "$CLI/structured.pt2" cfg.z=1
check bind_extra_key_msg usage_is "$dir/err" "unknown input 'cfg.z': cfg is a dict with keys k, scale"
check bind_into_leaf expect_rc 2 "$T" run "$CLI/structured.pt2" flag.0=1
check bind_into_leaf_msg usage_is "$dir/err" "unknown input 'flag.0': flag is a bool"
check bind_unknown expect_rc 2 "$T" run "$CLI/structured.pt2" nope=1
check bind_unknown_msg usage_is "$dir/err" "unknown input 'nope': the program's inputs are xs, cfg, flag"
check bind_bad_int expect_rc 2 "$T" run "$CLI/structured.pt2" cfg.k=4.5
check bind_bad_int_msg usage_is "$dir/err" "input 'cfg.k' is an int, not '4.5'"
check bind_bad_float expect_rc 2 "$T" run "$CLI/structured.pt2" cfg.scale=half
check bind_bad_float_msg usage_is "$dir/err" "input 'cfg.scale' is a float, not 'half'"
check bind_bad_bool expect_rc 2 "$T" run "$CLI/structured.pt2" flag=yes
check bind_bad_bool_msg usage_is "$dir/err" "input 'flag' is a bool (true or false), not 'yes'"
check bind_literal_tensor expect_rc 2 "$T" run "$CLI/structured.pt2" xs.0=3
check bind_literal_tensor_msg usage_is "$dir/err" "input 'xs.0' is a tensor: give a .npy file, not '3'"
check bind_twice expect_rc 2 "$T" run "$CLI/structured.pt2" "xs.0=$CLI/xs0.npy" "xs.0=$CLI/xs1.npy"
check bind_twice_msg usage_is "$dir/err" "input 'xs.0' given twice"
check bind_too_many expect_rc 2 "$T" run "$OPS/scalar_inputs.pt2" "$OPS/scalar_inputs/run1_in_x.npy" 3 0.5 7
check bind_too_many_msg usage_is "$dir/err" "too many inputs: '7' would be input 4, the program takes 3"
check bind_no_file expect_rc 3 "$T" run "$CLI/structured.pt2" "xs.0=$dir/none.npy"
check bind_no_file_msg one_line "$dir/err" "tpexport: input 'xs.0': cannot open '$dir/none.npy'"
# example inputs: only without inputs or with --example, and the output says so
check example_none expect_rc 0 "$T" run "$CLI/structured.pt2"
check example_none_line contains "$dir/out" "^inputs: the archive's example inputs\$"
check example_none_out contains "$dir/out" "^output_0: float32\[2, 3\] = \[-2.5, -0.5, 1.5, 3.5, 5.5, 7.5\]\$"
check example_flag expect_rc 0 "$T" run "$CLI/structured.pt2" --example
check example_flag_line contains "$dir/out" "^inputs: the archive's example inputs\$"
check example_flag_inputs expect_rc 2 "$T" run "$CLI/structured.pt2" --example flag=true
check example_flag_inputs_msg usage_is "$dir/err" "--example takes no inputs (it uses the stored ones)"
DYN=$SRC/tests/fixtures/tensorplay/dynamic
check example_given_no_line expect_rc 0 "$T" run "$DYN.pt2" "$DYN/run1_in_x.npy" "$DYN/run1_in_y.npy" \
    "z=$DYN/run1_in_z.npy" --out "$dir/dy"
check example_given_same cmp "$dir/dy/output_1.npy" "$DYN/run1_out1.npy"
check example_given_no_line_text not_contains "$dir/out" "^inputs:"
check bench_partial expect_rc 2 "$T" bench "$SRC/tests/fixtures/tensorplay/dynamic.pt2" \
    "x=$SRC/tests/fixtures/tensorplay/dynamic/run1_in_x.npy" --runs 1
check bench_partial_msg one_line "$dir/err" "missing inputs y, z: give every input, or none to use the stored example inputs (see 'tpexport bench --help')"
check bench_example expect_rc 0 "$T" bench "$CLI/structured.pt2" --runs 2 --warmup 0
check bench_example_line contains "$dir/out" "^inputs:  *the archive's example inputs\$"
check bench_example_json expect_rc 0 "$T" bench "$CLI/structured.pt2" --runs 2 --warmup 0 --json
check bench_example_json_key contains "$dir/out" '"example_inputs": true,'
check bench_given_json expect_rc 0 "$T" bench "$CLI/structured.pt2" "xs.0=$CLI/xs0.npy" "xs.1=$CLI/xs1.npy" \
    cfg.k=4 cfg.scale=0.25 flag=false --runs 2 --warmup 0 --json
check bench_given_json_key contains "$dir/out" '"example_inputs": false,'
# an archive without example inputs: inputs are required; with no example to say their kinds,
# literals read as bool, int or float and anything else as a .npy file
check no_examples expect_rc 2 "$T" run "$CLI/no_examples.pt2"
check no_examples_msg usage_is "$dir/err" "missing inputs x, k, s: the archive stores no example input for them"
check no_examples_flag expect_rc 2 "$T" run "$CLI/no_examples.pt2" --example
check no_examples_flag_msg usage_is "$dir/err" "missing inputs x, k, s: the archive stores no example input for them"
check no_examples_given expect_rc 0 "$T" run "$CLI/no_examples.pt2" "$CLI/xs0.npy" 2 s=0.5
check no_examples_given_out contains "$dir/out" "^output_0: float32\[2, 3\] = \[1.5, 1.75, 2, 2.25, 2.5, 2.75\]\$"
check no_examples_given_no_line not_contains "$dir/out" "^inputs:"
check help_inputs expect_rc 0 "$T" run --help
check help_inputs_dotted contains "$dir/out" "name.0=a.npy name.1=b.npy"
check help_inputs_key contains "$dir/out" "name.key=VALUE"
check help_inputs_literal contains "$dir/out" "name=3 name=0.5 name=true"
check help_inputs_example contains "$dir/out" "  --example "
# ONNX names (#14 item 1): identifiers kept as they are, others by the model's own name
ONNX=$SRC/tests/fixtures/onnx
check onnx_names_convert expect_rc 0 "$T" convert "$ONNX/names.onnx" -o "$dir/names.pt2"
check onnx_names_inspect expect_rc 0 "$T" inspect "$dir/names.pt2"
check onnx_names_input contains "$dir/out" "^    X: USER_INPUT  float32\[batch, 3\]\$"
check onnx_names_output contains "$dir/out" "^    logits: USER_OUTPUT  float32\[batch, 3\]\$"
check onnx_names_run expect_rc 0 "$T" run "$dir/names.pt2" X="$ONNX/names_x.npy"
check onnx_names_run_out contains "$dir/out" "^output_0: float32\[1, 3\] = \[1, 0, 3\]\$"
check onnx_dotted_convert expect_rc 0 "$T" convert "$ONNX/names_dotted.onnx" -o "$dir/dotted.pt2"
check onnx_dotted_run expect_rc 0 "$T" run "$dir/dotted.pt2" input.1="$ONNX/names_x.npy"
check onnx_dotted_run_out contains "$dir/out" "^output_0: float32\[1, 3\] = \[-1, 2, -3\]\$"
check onnx_dotted_ident expect_rc 0 "$T" run "$dir/dotted.pt2" input_1="$ONNX/names_x.npy"
check onnx_dotted_unknown expect_rc 2 "$T" run "$dir/dotted.pt2" input.2="$ONNX/names_x.npy"
check onnx_dotted_unknown_msg contains "$dir/err" "unknown input 'input.2': the program's inputs are input_1"
# the wrong kind of file for a command, and --dynamic naming no dim (#14 item 5)
check onnx_given_to_run expect_rc 1 "$T" run "$ONNX/names.onnx"
check onnx_given_to_run_msg contains "$dir/err" "names.onnx is an ONNX model, not an archive: convert it first ('tpexport convert"
check archive_given_to_convert expect_rc 1 "$T" convert "$dir/names.pt2" -o "$dir/again.pt2"
check archive_given_to_convert_msg contains "$dir/err" "names.pt2 is an archive (.pt2), not an ONNX model"
check dynamic_no_dim expect_rc 1 "$T" convert "$ONNX/names.onnx" -o "$dir/n2.pt2" --dynamic nosuch=1:4
check dynamic_no_dim_msg contains "$dir/err" "names.onnx: dim range 'nosuch' names no dim of the model (its symbolic dims: batch)"
check dynamic_no_dim_once not_contains "$dir/err" "names.onnx: .*names.onnx:"
# shape-data graph inputs: named when refused, specialised with --input-value (#14 item 4)
check shape_input_refused expect_rc 1 "$T" convert "$ONNX/pad_axes_input.onnx" -o "$dir/pa.pt2"
check shape_input_refused_msg contains "$dir/err" "graph input 'axes' is read as shape data: give its value with --input-value axes=FILE.npy"
check shape_input_axes_given expect_rc 0 "$T" convert "$ONNX/pad_axes_input.onnx" -o "$dir/pa.pt2" --input-value axes="$ONNX/unsqueeze_axes.npy"
check shape_input_axes_run expect_rc 0 "$T" run "$dir/pa.pt2" x="$ONNX/names_x.npy"
check shape_input_axes_out contains "$dir/out" "output_0: float32\[1, 5\] = \[0, 1, -2, 3, 0\]"
# Unsqueeze's axes read when the program runs (no specialisation)
check unsqueeze_runtime expect_rc 0 "$T" convert "$ONNX/unsqueeze_input.onnx" -o "$dir/ui.pt2"
check unsqueeze_runtime_run expect_rc 0 "$T" run "$dir/ui.pt2" x="$ONNX/unsqueeze_x.npy" axes="$ONNX/unsqueeze_axes.npy"
check unsqueeze_runtime_out contains "$dir/out" "output_0: float32\[2, 1, 3\] = \[0, 1, 2, 3, 4, 5\]"
check shape_input_runtime expect_rc 0 "$T" convert "$ONNX/reshape_input.onnx" -o "$dir/rr.pt2"
check shape_input_runtime_run expect_rc 0 "$T" run "$dir/rr.pt2" x="$ONNX/reshape_x.npy" shape="$ONNX/reshape_shape.npy"
check shape_input_runtime_out contains "$dir/out" "output_0: float32\[4, 3, 2\] = \[0, 1, 2, 3, 4, 5"
check shape_input_given expect_rc 0 "$T" convert "$ONNX/reshape_input.onnx" -o "$dir/ri.pt2" --input-value shape="$ONNX/reshape_shape.npy"
check shape_input_run expect_rc 0 "$T" run "$dir/ri.pt2" x="$ONNX/reshape_x.npy"
check shape_input_run_out contains "$dir/out" "output_0: float32\[4, 3, 2\] = \[0, 1, 2, 3, 4, 5"
check shape_input_no_input expect_rc 1 "$T" convert "$ONNX/reshape_input.onnx" -o "$dir/ri.pt2" --input-value nosuch="$ONNX/reshape_shape.npy"
check shape_input_no_input_msg contains "$dir/err" "input value 'nosuch' names no graph input (its inputs: x, shape)"
check shape_input_dtype expect_rc 1 "$T" convert "$ONNX/reshape_input.onnx" -o "$dir/ri.pt2" --input-value shape="$ONNX/reshape_x.npy"
check shape_input_dtype_msg contains "$dir/err" "value given for graph input 'shape' is float32, the input is declared int64"
check shape_input_bad_spec expect_rc 2 "$T" convert "$ONNX/reshape_input.onnx" -o "$dir/ri.pt2" --input-value shape
# dynamic batch and sequence axes: one conversion runs at every size (#14 item 2)
check gpt2_convert expect_rc 0 "$T" convert "$ONNX/gpt2.onnx" -o "$dir/gpt2.pt2" --dynamic batch=1:8 --dynamic seq=1:16
check gpt2_run1 expect_rc 0 "$T" run "$dir/gpt2.pt2" x="$ONNX/gpt2_x1.npy"
check gpt2_run1_out contains "$dir/out" "output_0: float32\[1, 5, 50\]"
check gpt2_run3 expect_rc 0 "$T" run "$dir/gpt2.pt2" x="$ONNX/gpt2_x3.npy"
check gpt2_run3_out contains "$dir/out" "output_0: float32\[3, 16, 50\]"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
