"""Each status kind raises its exception with the library's message."""
import numpy as np
import pytest

import tpexport
from tpexport import _C
from conftest import fixture

CODES = {
    "TP_ERR_INVALID_ARG": 100,
    "TP_ERR_INDEX": 101,
    "TP_ERR_MISSING": 102,
    "TP_ERR_DUPLICATE": 103,
    "TP_ERR_STATE": 104,
    "TP_ERR_NOT_FOUND": 105,
    "TP_ERR_CANCELLED": 106,
    "TP_ERR_TYPE": 200,
    "TP_ERR_SHAPE": 300,
    "TP_ERR_CONSTRAINT": 301,
    "TP_ERR_CORRUPT": 400,
    "TP_ERR_IO": 401,
    "TP_ERR_VERIFY": 402,
    "TP_ERR_UNSUPPORTED": 500,
    "TP_ERR_NOMEM": 600,
    "TP_ERR_INTERNAL": 700,
}


@pytest.mark.parametrize("name", sorted(CODES))
def test_mapping_of_every_status(name):
    assert _C._status_name(CODES[name]) == name
    exc = tpexport.STATUS_EXCEPTIONS[name]
    with pytest.raises(exc, match="the message") as e:
        _C._raise(CODES[name], "the message")
    assert type(e.value) is exc
    assert e.value.status == name


# Real failures of each kind, raised by the library.


def test_type_error(mlp):
    with pytest.raises(TypeError, match="x has dtype int64 but the program expects float32") as e:
        mlp(np.ones((2, 4), np.int64))
    assert e.value.status == "TP_ERR_TYPE"


def test_value_errors(mlp):
    with pytest.raises(ValueError, match="expected at most 1 positional argument, got 2") as e:
        mlp(np.ones((2, 4), np.float32), np.ones(2, np.float32))
    assert e.value.status == "TP_ERR_INVALID_ARG"
    with pytest.raises(ValueError, match="unexpected keyword argument 'y'"):
        mlp(y=1)
    with pytest.raises(ValueError, match="duplicate value for argument 'x'") as e:
        mlp(np.ones((2, 4), np.float32), x=np.ones((2, 4), np.float32))
    assert e.value.status == "TP_ERR_DUPLICATE"
    with pytest.raises(ValueError) as e:
        mlp(np.ones((3, 4), np.float32))
    assert e.value.status in ("TP_ERR_CONSTRAINT", "TP_ERR_SHAPE")


def test_missing_input():
    ep = tpexport.load(fixture("cli", "no_examples.pt2"))
    with pytest.raises(ValueError, match="missing required export input") as e:
        ep(np.ones((2, 3), np.float32))
    assert e.value.status == "TP_ERR_MISSING"


def test_corrupt_archive(tmp_path):
    p = tmp_path / "garbage.pt2"
    p.write_bytes(b"PK\x03\x04" + b"\0" * 64)
    with pytest.raises(ValueError, match="zip") as e:
        tpexport.load(p)
    assert e.value.status == "TP_ERR_CORRUPT"
    with pytest.raises(ValueError):
        tpexport.load_buffer(b"not an archive")


def test_os_error(tmp_path):
    with pytest.raises(OSError, match="cannot open") as e:
        tpexport.load(tmp_path / "missing.pt2")
    assert e.value.status == "TP_ERR_IO"
    with pytest.raises(OSError):
        tpexport.from_onnx(tmp_path / "missing.onnx")


def test_not_implemented():
    with pytest.raises(NotImplementedError) as e:
        tpexport.load(fixture("tensorplay_refused", "one_hot_inferred_classes.pt2"))
    assert e.value.status == "TP_ERR_UNSUPPORTED"
    assert isinstance(e.value, RuntimeError)


def test_key_error(mlp):
    with pytest.raises(KeyError, match="nope"):
        mlp.get_state("nope")


def test_runtime_error_state(counter):
    m = counter.module()
    counter.invalidate_unlifted()
    with pytest.raises(RuntimeError) as e:
        m.named_parameters().__next__()
    assert e.value.status == "TP_ERR_STATE"


def test_memory_error():
    # A real TP_ERR_NOMEM: an input whose element count cannot be allocated
    # would need that much memory; the library refuses sizes past its
    # overflow checks instead. Use a rank above TP_MAX_DIMS for the shape
    # kind, and the mapping test above for MemoryError.
    x = np.zeros((1,) * 13, np.float32)
    with pytest.raises(ValueError, match="maximum rank") as e:
        _C._as_tensor(x)
    assert e.value.status == "TP_ERR_SHAPE"


def test_python_side_errors(mlp):
    with pytest.raises(TypeError, match="dict keys must be str"):
        mlp({1: 2})
    with pytest.raises(ValueError, match="int64"):
        mlp(2**70)
