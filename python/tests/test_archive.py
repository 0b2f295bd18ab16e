"""load / save / load_buffer / save_buffer / verify / from_onnx."""
import os

import numpy as np
import pytest

import tpexport
from conftest import case_runs, fixture


def test_load_single_and_multi():
    ep = tpexport.load(fixture("tensorplay", "mlp.pt2"))
    assert isinstance(ep, tpexport.ExportedProgram)
    progs = tpexport.load(fixture("tensorplay", "two_programs_fixed.pt2"))
    assert isinstance(progs, dict) and list(progs) == ["enc", "dec"]
    assert all(isinstance(p, tpexport.ExportedProgram) for p in progs.values())


def test_load_without_mmap_and_pathlike(tmp_path):
    import pathlib

    ep = tpexport.load(pathlib.Path(fixture("tensorplay", "mlp.pt2")), mmap=False)
    names, runs = case_runs("mlp")
    inputs, outputs, _ = runs[0]
    np.testing.assert_allclose(ep(inputs["x"]), outputs[0], rtol=1e-5, atol=1e-6)


def test_save_and_load_back(tmp_path, counter):
    x = np.random.default_rng(4).standard_normal((2, 3, 2, 2)).astype(np.float32)
    counter(x)  # state after one call is what gets saved
    path = tmp_path / "c.pt2"
    tpexport.save(path, counter, extra_files={"note.txt": b"hello"})
    tpexport.verify(path)
    extra = {}
    back = tpexport.load(path, extra_files=extra)
    assert extra == {"note.txt": b"hello"}
    assert back.get_state("count")[0] == 1.0
    np.testing.assert_allclose(back(x), counter(x), rtol=1e-6)
    assert back.get_state("count")[0] == 2.0


def test_save_a_dict_of_programs(tmp_path):
    progs = tpexport.load(fixture("tensorplay", "two_programs_fixed.pt2"))
    path = str(tmp_path / "two.pt2")
    tpexport.save(path, progs)
    back = tpexport.load(path)
    assert list(back) == ["enc", "dec"]
    np.testing.assert_allclose(back["dec"](back["enc"]()), progs["dec"](progs["enc"]()), rtol=1e-6)


def test_buffers_round_trip(mlp):
    data = tpexport.save_buffer({"m": mlp})
    assert isinstance(data, bytes) and len(data) > 0
    back = tpexport.load_buffer(data)
    x = np.ones((2, 4), np.float32)
    np.testing.assert_array_equal(back(x), mlp(x))


def test_save_errors(tmp_path, mlp):
    with pytest.raises(TypeError):
        tpexport.save(tmp_path / "x.pt2", 3)
    with pytest.raises(ValueError):  # program names must match [A-Za-z0-9_.-]+
        tpexport.save(tmp_path / "x.pt2", {"bad name": mlp})
    with pytest.raises(OSError):
        tpexport.save(tmp_path / "no" / "such" / "dir.pt2", mlp)
    assert not os.path.exists(tmp_path / "x.pt2")


def test_verify_reports_corruption(tmp_path):
    p = tmp_path / "bad.pt2"
    data = bytearray(open(fixture("tensorplay", "mlp.pt2"), "rb").read())
    p.write_bytes(bytes(data[: len(data) // 2]))
    with pytest.raises(ValueError) as e:
        tpexport.verify(p)
    assert e.value.status == "TP_ERR_CORRUPT"


def test_from_onnx_matches_recorded_outputs():
    ep = tpexport.from_onnx(fixture("onnx", "resnet.onnx"))
    x = np.load(fixture("onnx", "resnet_x.npy"))
    y = np.load(fixture("onnx", "resnet_y.npy"))
    out = ep(x)
    got = out[0] if isinstance(out, tuple) else out
    np.testing.assert_allclose(got, y, rtol=1e-4, atol=1e-5)


def test_from_onnx_dynamic_ranges():
    x = np.load(fixture("onnx", "dynamic_x.npy"))
    for dyn in ({"batch": (1, 8)}, {"batch": "1:8"}, {"batch": (1, None)}, {"batch": 1}):
        ep = tpexport.from_onnx(fixture("onnx", "dynamic.onnx"), dynamic=dyn)
        rc = ep.range_constraints["batch"]
        assert rc.lower == 1
        out = ep(x)
        got = out[0] if isinstance(out, tuple) else out
        np.testing.assert_allclose(got, np.load(fixture("onnx", "dynamic_y.npy")), rtol=1e-4, atol=1e-5)
    ep = tpexport.from_onnx(fixture("onnx", "dynamic.onnx"), dynamic={"batch": (1, 2)})
    big = np.zeros((3,) + x.shape[1:], np.float32)
    with pytest.raises(ValueError, match="batch <= 2"):
        ep(big)
    with pytest.raises(TypeError):
        tpexport.from_onnx(fixture("onnx", "dynamic.onnx"), dynamic={"batch": object()})


def test_pytorch_archive():
    """An archive torch.export.save wrote (tests/fixtures/gen_torch_export.py):
    loads, exposes torch's signature and example inputs, and runs the calls
    PyTorch recorded in order (the buffer update accumulates)."""
    ep = tpexport.load(fixture("torch_export", "counter.pt2"))
    assert ep.graph_signature.buffers == ["count", "bn.running_mean", "bn.running_var", "bn.num_batches_tracked"]
    ex = ep.example_inputs
    assert ex["x"].shape == (5, 4) and ex["y"].shape == (3,)
    for k in range(3):
        x = np.load(fixture("torch_export", f"counter.case{k}.in0.npy"))
        y = np.load(fixture("torch_export", f"counter.case{k}.in1.npy"))
        h, d = ep(x, y)
        np.testing.assert_allclose(h, np.load(fixture("torch_export", f"counter.case{k}.out0.npy")), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(d["n"], np.load(fixture("torch_export", f"counter.case{k}.out1.npy")))


def test_save_in_pytorch_format(tmp_path):
    """format="torch" writes PyTorch's archive; it loads back with the same
    signature and outputs (torch.export.load reads it too: see
    tests/fixtures/gen_torch_export.py --torch-load)."""
    ep = tpexport.load(fixture("torch_export", "cnn.pt2"))
    x = np.load(fixture("torch_export", "cnn.case0.in0.npy"))
    want = np.load(fixture("torch_export", "cnn.case0.out0.npy"))
    path = tmp_path / "cnn_torch.pt2"
    tpexport.save(path, ep, format="torch")
    back = tpexport.load(path)
    np.testing.assert_allclose(back(x), want, rtol=1e-4, atol=1e-5)
    data = tpexport.save_buffer(ep, format="torch")
    assert data[:2] == b"PK"
    with pytest.raises(ValueError, match="format must be"):
        tpexport.save(path, ep, format="onnx")
    with pytest.raises(ValueError, match="extra_files"):
        tpexport.save(path, ep, format="torch", extra_files={"a": b"b"})
