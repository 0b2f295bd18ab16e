"""Zero-copy rules: inputs borrowed, outputs and state viewed."""
import gc
import sys

import numpy as np
import pytest

import tpexport
from tpexport import _C
from conftest import addr, fixture


@pytest.mark.parametrize(
    "dtype", [np.float32, np.float64, np.float16, np.int64, np.int32, np.int16, np.int8, np.uint8, np.bool_]
)
def test_contiguous_inputs_are_borrowed(dtype):
    x = (np.arange(24) % 3).astype(dtype).reshape(2, 3, 4)
    t = _C._as_tensor(x)  # the tensor an input becomes, viewed back as an array
    assert addr(t) == addr(x)
    assert t.dtype == x.dtype and t.shape == x.shape
    x[0, 0, 0] = 1
    assert t[0, 0, 0] == 1


def test_positive_strides_are_borrowed_too():
    base = np.arange(60, dtype=np.float32).reshape(6, 10)
    x = base[::2, 1::3]
    t = _C._as_tensor(x)
    assert addr(t) == addr(x)
    np.testing.assert_array_equal(t, x)
    assert t.strides == x.strides


def test_copies_when_it_must():
    # Negative strides, read-only memory and foreign byte order are copied
    # (or refused), never borrowed.
    base = np.arange(6, dtype=np.float32)
    rev = base[::-1]
    t = _C._as_tensor(rev)
    np.testing.assert_array_equal(t, rev)
    assert addr(t) != addr(rev)
    ro = np.arange(4, dtype=np.float32)
    ro.flags.writeable = False
    t = _C._as_tensor(ro)
    np.testing.assert_array_equal(t, ro)
    assert addr(t) != addr(ro)
    with pytest.raises(TypeError, match="byte order"):
        _C._as_tensor(np.arange(4, dtype=">f4"))
    with pytest.raises(TypeError, match="no tpexport dtype"):
        _C._as_tensor(np.arange(4, dtype=np.uint16))
    with pytest.raises(TypeError):
        _C._as_tensor(np.arange(4, dtype=np.complex64))


def test_buffer_protocol_and_array_interface_inputs():
    x = np.arange(6, dtype=np.float32)
    m = memoryview(x)
    t = _C._as_tensor(m)
    assert addr(t) == addr(x)

    class Iface:  # only __array_interface__
        def __init__(self, a):
            self.a = a
            self.__array_interface__ = a.__array_interface__

    t = _C._as_tensor(Iface(x))
    assert addr(t) == addr(x)
    with pytest.raises(TypeError, match="unsupported input"):
        _C._as_tensor(object())


def test_borrowed_input_is_held_only_while_needed(mlp):
    x = np.ones((2, 4), np.float32)
    before = sys.getrefcount(x)
    for _ in range(5):
        mlp(x)
    gc.collect()
    assert sys.getrefcount(x) == before


def test_outputs_view_the_result_memory(mlp):
    x = np.ones((2, 4), np.float32)
    out = mlp(x)
    assert out.flags.writeable and out.flags.c_contiguous
    # The array's base is a memory view of a TensorRef that holds the result
    # tensor: the array is the library's memory, not a copy of it.
    assert isinstance(out.base, memoryview)
    assert isinstance(out.base.obj, _C.TensorRef)
    assert addr(np.asarray(out.base.obj)) == addr(out)
    # Outputs outlive the program.
    del mlp
    gc.collect()
    np.testing.assert_allclose(out.sum(axis=1), [1.0, 1.0], rtol=1e-6)


def test_state_views_are_the_program_state(counter):
    sd = counter.state_dict
    count = sd["count"]
    assert addr(count) == addr(counter.get_state("count"))
    assert addr(count) == addr(dict(counter.named_buffers())["count"])
    x = np.ones((2, 3, 2, 2), np.float32)
    counter(x)
    assert count[0] == 1.0  # the mutation was written into the viewed memory
    count[0] = 10.0  # and writing the view changes the program's state
    out = counter(x)
    assert counter.get_state("count")[0] == 11.0
    bn = counter.copy()  # a copy owns cloned state
    assert addr(bn.get_state("count")) != addr(count)
    assert out.shape == x.shape


def test_writing_a_parameter_view(mlp):
    x = np.ones((2, 4), np.float32)
    w = mlp.state_dict["fc2.weight"]
    b = mlp.state_dict["fc2.bias"]
    w[...] = 0
    b[...] = np.array([0.0, 1.0, 2.0], np.float32)
    mlp.invalidate_plans()  # plans may hold packed copies of parameters
    out = mlp(x)
    e = np.exp([0.0, 1.0, 2.0])
    np.testing.assert_allclose(out[0], e / e.sum(), rtol=1e-6)


def test_example_inputs_are_read_only(mlp):
    ex = mlp.example_inputs
    assert list(ex) == ["x"]
    x = ex["x"]
    assert not x.flags.writeable
    with pytest.raises(ValueError):
        x[0, 0] = 1


def test_zero_size_and_scalar_inputs():
    t = _C._as_tensor(np.zeros((0, 3), np.float32))
    assert t.shape == (0, 3)
    t = _C._as_tensor(np.float32(2.5))
    assert t.shape == () and t == 2.5


def test_dlpack_inputs():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)

    class DL:  # only the DLPack protocol
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kwargs):
            return self.a.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    t = _C._as_tensor(DL(x))
    np.testing.assert_array_equal(t, x)
    if np.from_dlpack(DL(x)).flags.writeable:  # numpy >= 2.1 gives writable views
        assert addr(t) == addr(x)
