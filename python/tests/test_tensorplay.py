"""Side by side with tensorplay: archives written by the real tensorplay
(gen_tensorplay.py) give the same outputs, output trees, in-place input
updates and state as tensorplay over several calls. The recorded runs need
only numpy; test_live_* also run tensorplay itself when it is installed."""
import json
import os

import numpy as np
import pytest

import tpexport
from conftest import addr

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
CASES = ["stateful", "convnet", "inplace_input", "dtypes", "classifier"]


def tree(v):
    if isinstance(v, tuple):
        return "tuple(" + ", ".join(tree(x) for x in v) + ")"
    if isinstance(v, list):
        return "list(" + ", ".join(tree(x) for x in v) + ")"
    if isinstance(v, dict):
        return "dict(" + ", ".join(f"{k}={tree(x)}" for k, x in v.items()) + ")"
    return "*"


def leaves(v):
    if isinstance(v, (tuple, list)):
        return [x for item in v for x in leaves(item)]
    if isinstance(v, dict):
        return [x for item in v.values() for x in leaves(item)]
    return [v]


def close(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def tp_numpy(tp, t):
    if t.dtype == tp.bfloat16:
        t = t.float()
    return t.detach().numpy()


def value(a):
    return a.item() if a.ndim == 0 and a.dtype != np.float32 else a.copy()


def test_dtypes_of_outputs():
    ep = tpexport.load(os.path.join(HERE, "dtypes.pt2"))
    x = np.array([[1.5, -2.25, 3.0], [0.5, 0.0, -1.0]], np.float32)
    bf, h, i32, b = ep(x, np.array([[1, 2, -3], [0, 1, 2]], np.int64))
    assert bf.dtype == np.float32 and h.dtype == np.float16 and i32.dtype == np.int32 and b.dtype == np.bool_
    np.testing.assert_array_equal(bf, x * 2)
    np.testing.assert_array_equal(h, (x + 1).astype(np.float16))
    np.testing.assert_array_equal(i32, [[3, 6, -9], [0, 3, 6]])
    np.testing.assert_array_equal(b, [[False, True, False], [False, False, True]])


@pytest.mark.parametrize("case", CASES)
def test_recorded_runs(case):
    meta = json.load(open(os.path.join(HERE, case + ".json")))
    rec = np.load(os.path.join(HERE, case + ".npz"))
    ep = tpexport.load(os.path.join(HERE, case + ".pt2"))
    assert ep.graph_signature.user_inputs == meta["inputs"]
    assert ep.graph_signature.buffers == meta["state"]
    for r in range(meta["runs"]):
        values = {n: value(rec[f"r{r}_in_{n}"]) for n in meta["inputs"]}
        pos = [values[n] for n in meta["inputs"] if n not in meta["kwargs"]]
        kw = {n: values[n] for n in meta["kwargs"]}
        out = ep(*pos, **kw)
        assert tree(out) == meta["tree"][r]
        got = leaves(out)
        k = 0
        while f"r{r}_out{k}" in rec:
            close(got[k], rec[f"r{r}_out{k}"])
            k += 1
        assert k == len(got)
        for n, v in values.items():
            if f"r{r}_after_{n}" in rec:
                close(v, rec[f"r{r}_after_{n}"])
        for target in meta["state"]:
            close(ep.get_state(target), rec[f"r{r}_state_{target}"])


def test_non_persistent_buffer():
    ep = tpexport.load(os.path.join(HERE, "stateful.pt2"))
    sig = ep.graph_signature
    assert sig.non_persistent_buffers == ["ema"]
    assert "ema" not in ep.state_dict and "steps" in ep.state_dict
    assert "ema" in ep.constants
    assert dict(ep.named_buffers()).keys() == {"steps", "ema"}
    ema = next(s for s in sig.input_specs if s.target == "ema")
    assert ema.persistent is False
    assert list(sig.buffers_to_mutate.values()).count("ema") == 2


def test_in_place_input_update_writes_the_callers_array():
    # The program adds y into x in place: tpexport runs on the caller's
    # memory (borrowed, not copied), so the caller's array changes, as the
    # tensor does in tensorplay.
    ep = tpexport.load(os.path.join(HERE, "inplace_input.pt2"))
    x = np.ones((2, 3), np.float32)
    y = np.full((2, 3), 2.0, np.float32)
    before = addr(x)
    out = ep(x, y)
    assert addr(x) == before
    np.testing.assert_array_equal(x, np.full((2, 3), 3.0))
    np.testing.assert_array_equal(out, np.full((2, 3), 7.0))


@pytest.mark.parametrize("case", CASES)
def test_live_against_tensorplay(case):
    tp = pytest.importorskip("tensorplay")
    meta = json.load(open(os.path.join(HERE, case + ".json")))
    rec = np.load(os.path.join(HERE, case + ".npz"))
    path = os.path.join(HERE, case + ".pt2")
    theirs = tp.export.load(path)
    ours = tpexport.load(path)
    rng = np.random.default_rng(7)
    for r in range(4):
        values = {}
        for n in meta["inputs"]:
            a = rec[f"r{r % meta['runs']}_in_{n}"]
            values[n] = a.item() if a.ndim == 0 else rng.standard_normal(a.shape).astype(a.dtype)
        pos = [n for n in meta["inputs"] if n not in meta["kwargs"]]
        mine = {n: (v.copy() if isinstance(v, np.ndarray) else v) for n, v in values.items()}
        tps = {n: (tp.from_numpy(v.copy()) if isinstance(v, np.ndarray) else v) for n, v in values.items()}
        got = ours(*[mine[n] for n in pos], **{n: mine[n] for n in meta["kwargs"]})
        want = theirs(*[tps[n] for n in pos], **{n: tps[n] for n in meta["kwargs"]})
        assert tree(got) == tree(want)
        for g, w in zip(leaves(got), leaves(want)):
            close(g, tp_numpy(tp, w))
        for n in meta["inputs"]:
            if isinstance(mine[n], np.ndarray):
                close(mine[n], tp_numpy(tp, tps[n]))
        for target in meta["state"]:
            close(ours.get_state(target), tp_numpy(tp, theirs._resolve_state_value(target)))


def test_tensorplay_tensors_are_borrowed():
    tp = pytest.importorskip("tensorplay")
    x = tp.from_numpy(np.ones((2, 3), np.float32))
    y = tp.from_numpy(np.full((2, 3), 2.0, np.float32))
    assert addr(tpexport._C._as_tensor(x)) == x.data_ptr()
    ep = tpexport.load(os.path.join(HERE, "inplace_input.pt2"))
    out = ep(x, y)  # tensorplay tensors in, updated in place like numpy arrays
    np.testing.assert_array_equal(x.numpy(), np.full((2, 3), 3.0))
    np.testing.assert_array_equal(out, np.full((2, 3), 7.0))
