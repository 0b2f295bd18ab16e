"""Calling programs: tensorplay's semantics through tp_program_call."""
import threading

import numpy as np
import pytest

import tpexport
from conftest import case_runs, fixture


def flat(v):
    if isinstance(v, (tuple, list)):
        return [x for item in v for x in flat(item)]
    if isinstance(v, dict):
        return [x for item in v.values() for x in flat(item)]
    return [v]


@pytest.mark.parametrize("case", ["mlp", "cnn", "ops", "dynamic"])
def test_outputs_match_tensorplay(case):
    ep = tpexport.load(fixture("tensorplay", case + ".pt2"))
    names, runs = case_runs(case)
    for inputs, outputs, _ in runs:
        got = flat(ep(*[inputs[n] for n in names]))
        assert len(got) == len(outputs)
        for g, e in zip(got, outputs):
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


def test_kwargs_bind_by_name(dynamic):
    names, runs = case_runs("dynamic")
    inputs, outputs, _ = runs[0]
    got = dynamic(**inputs)
    for g, e in zip(flat(got), outputs):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
    got = dynamic(inputs["x"], z=inputs["z"], y=inputs["y"])
    for g, e in zip(flat(got), outputs):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


def test_missing_inputs_come_from_examples(mlp):
    x = mlp.example_inputs["x"]
    np.testing.assert_array_equal(mlp(), mlp(np.array(x)))


def test_mutation_write_back_over_calls(counter):
    names, runs = case_runs("counter")
    for inputs, outputs, state in runs:
        (out,) = flat(counter(*[inputs[n] for n in names]))
        np.testing.assert_allclose(out, outputs[0], rtol=1e-5, atol=1e-6)
        for target, expected in state.items():
            np.testing.assert_allclose(counter.get_state(target), expected, rtol=1e-5, atol=1e-6)
    assert counter.get_state("count")[0] == 2.0
    assert int(counter.get_state("bn.num_batches_tracked")) == 2


def test_tree_inputs_and_outputs():
    ep = tpexport.load(fixture("cli", "structured.pt2"))
    xs0, xs1 = np.load(fixture("cli", "xs0.npy")), np.load(fixture("cli", "xs1.npy"))
    got = ep((xs0, xs1), {"k": 4, "scale": 0.25}, True)
    np.testing.assert_allclose(got, np.load(fixture("cli", "expected_k4.npy")), rtol=1e-6)
    # A list where the program recorded a tuple is a structure mismatch.
    with pytest.raises(ValueError):
        ep([xs0, xs1], {"k": 4, "scale": 0.25}, True)


def test_scalar_outputs_in_a_tuple():
    ep = tpexport.load(fixture("cli", "scalar_outputs.pt2"))
    out = ep(np.ones((2, 3), np.float32))
    assert isinstance(out, tuple) and len(out) == 4
    np.testing.assert_array_equal(out[0], np.full((2, 3), 2, np.float32))
    assert out[1:] == (3, 0.5, True)
    assert type(out[1]) is int and type(out[2]) is float and type(out[3]) is bool


def test_dict_of_programs_outputs():
    progs = tpexport.load(fixture("tensorplay", "two_programs_fixed.pt2"))
    enc, dec = progs["enc"], progs["dec"]
    h = enc()
    out = dec(h)
    assert isinstance(out, np.ndarray)


def test_constraints_checked(dynamic):
    b = np.zeros((3, 4), np.float32)
    z = np.zeros((6, 4), np.float32)
    dynamic(b, b, z)
    dynamic.check_inputs(b, b, z)
    with pytest.raises(ValueError, match="must equal") as e:
        dynamic(b, np.zeros((2, 4), np.float32), z)
    assert e.value.status == "TP_ERR_CONSTRAINT"
    with pytest.raises(ValueError, match="batch <= 16"):
        big = np.zeros((17, 4), np.float32)
        dynamic(big, big, np.zeros((34, 4), np.float32))
    with pytest.raises(ValueError):
        dynamic.check_inputs(b, b, np.zeros((5, 4), np.float32))  # z must be 2 * batch


def test_num_threads_per_call_and_per_program(mlp):
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    ref = mlp(x)
    np.testing.assert_array_equal(mlp.call((x,), num_threads=2), ref)
    np.testing.assert_array_equal(mlp.call(kwargs={"x": x}, num_threads=1), ref)
    mlp.num_threads = 2
    assert mlp.num_threads == 2
    np.testing.assert_array_equal(mlp(x), ref)
    mlp.num_threads = 0
    with pytest.raises(ValueError):
        mlp.num_threads = -1
    with pytest.raises(ValueError):
        mlp.call((x,), num_threads=-2)


def test_library_thread_default():
    old = tpexport.get_num_threads()
    try:
        tpexport.set_num_threads(2)
        assert tpexport.get_num_threads() == 2
        with pytest.raises(ValueError):
            tpexport.set_num_threads(0)
    finally:
        tpexport.set_num_threads(old)


def test_calls_from_several_threads():
    ep = tpexport.load(fixture("tensorplay", "cnn.pt2"))
    names, runs = case_runs("cnn")
    inputs, outputs, _ = runs[0]
    args = [inputs[n] for n in names]
    errors, results = [], []

    def work():
        try:
            for _ in range(20):
                results.append(flat(ep(*args)))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(results) == 80
    for r in results:
        for g, e in zip(r, outputs):
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


def test_mutating_program_from_several_threads_loses_no_update(counter):
    x = np.random.default_rng(1).standard_normal((2, 3, 2, 2)).astype(np.float32)

    def work():
        for _ in range(10):
            counter(x)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert counter.get_state("count")[0] == 30.0


def test_calls_release_the_gil():
    # With a huge switch interval the interpreter never takes the GIL from
    # the main thread by force: the woken thread can only run while a call
    # has released it. The calls are long (a convolution network on 64
    # images) so that the woken thread gets to take the GIL before the call
    # returns and the main thread takes it back.
    import sys

    ep = tpexport.from_onnx(fixture("onnx", "dynamic.onnx"))
    x = np.zeros((64,) + np.load(fixture("onnx", "dynamic_x.npy")).shape[1:], np.float32)
    ev, ran = threading.Event(), []
    t = threading.Thread(target=lambda: (ev.wait(), ran.append(True)))
    t.start()
    old = sys.getswitchinterval()
    sys.setswitchinterval(1000.0)
    try:
        ev.set()
        calls = 0
        while not ran and calls < 200:
            ep(x)
            calls += 1
        assert ran, "no other thread ran during 200 calls"
    finally:
        sys.setswitchinterval(old)
        t.join()
