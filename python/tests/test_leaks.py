"""Every tp_ object the package makes is freed: the library's allocator
holds as many blocks after a workload (once everything is dropped) as
before it."""
import gc

import numpy as np
import pytest

import tpexport
from tpexport import _C
from conftest import fixture


def workload(tmp_path):
    ep = tpexport.load(fixture("tensorplay", "counter.pt2"))
    x = np.ones((2, 3, 2, 2), np.float32)
    out = ep(x)
    out2 = ep.call((x,), num_threads=2)
    ep.num_threads = 1
    ep(x)
    sd = ep.state_dict
    sig = ep.graph_signature
    _ = (sig.input_specs, sig.buffers_to_mutate, sig.user_inputs, str(sig), str(ep), ep.code)
    _ = (ep.range_constraints, ep.module_call_graph, ep.call_spec, ep.example_inputs, ep.inputs, ep.outputs)
    m = ep.module()
    m(x)
    _ = dict(m.named_buffers())
    ep.invalidate_unlifted()
    d = ep.run_decompositions()
    t = tpexport.default_decompositions()
    t.add_softmax()
    d2 = ep.run_decompositions(t)
    c = ep.copy()
    tpexport.save(tmp_path / "a.pt2", {"a": ep, "b": d})
    back = tpexport.load(tmp_path / "a.pt2")
    data = tpexport.save_buffer(c)
    tpexport.load_buffer(data)
    dyn = tpexport.load(fixture("tensorplay", "dynamic.pt2"))
    for bad in (lambda: ep(np.ones((2, 3), np.int64)), lambda: dyn(np.zeros((17, 4), np.float32)),
                lambda: ep.get_state("nope"), lambda: tpexport.load(tmp_path / "missing.pt2"),
                lambda: ep(1, 2, 3), lambda: m(x)):
        with pytest.raises(Exception):
            bad()
    onnx = tpexport.from_onnx(fixture("onnx", "dynamic.onnx"), dynamic={"batch": (1, 4)})
    onnx(np.load(fixture("onnx", "dynamic_x.npy")))
    # Borrowed inputs kept by outputs: none here, but keep outputs alive past the program.
    del ep, d, d2, c, back, m, dyn, onnx, t
    gc.collect()
    return out, out2, sd


def test_no_tp_objects_leak(tmp_path):
    workload(tmp_path)  # warm-up: one-time caches (thread pool, registries)
    gc.collect()
    before = _C._live_blocks()
    for _ in range(3):
        kept = workload(tmp_path)
        assert _C._live_blocks() > before  # the kept outputs and state hold memory
        del kept
        gc.collect()
    assert _C._live_blocks() == before
