"""Signature views, state, constraints, metadata, printing, module(),
run_decompositions(), validate()."""
import math

import numpy as np
import pytest

import tpexport
from tpexport import InputKind, OutputKind, TensorArgument
from conftest import fixture


def test_graph_signature_views(counter):
    sig = counter.graph_signature
    assert sig.user_inputs == ["x"]
    assert sig.parameters == ["bn.weight", "bn.bias"]
    assert sig.buffers == ["count", "bn.running_mean", "bn.running_var", "bn.num_batches_tracked"]
    assert sig.non_persistent_buffers == []
    assert sig.inputs_to_parameters == {"p_bn_weight": "bn.weight", "p_bn_bias": "bn.bias"}
    assert sig.inputs_to_buffers["b_count"] == "count"
    assert sig.buffers_to_mutate == {"add_": "count", "add__0": "bn.num_batches_tracked"}
    assert sig.parameters_to_mutate == {} and sig.user_inputs_to_mutate == {}
    assert sig.user_outputs == ["mul"]
    assert sig.lifted_tensor_constants == [] and sig.lifted_custom_objs == []
    assert sig.input_tokens == [] and sig.output_tokens == []
    kinds = [s.kind for s in sig.input_specs]
    assert kinds.count(InputKind.BUFFER) == 4 and kinds[-1] is InputKind.USER_INPUT
    b = next(s for s in sig.input_specs if s.target == "count")
    assert b.kind is InputKind.BUFFER and b.persistent is True and b.arg == TensorArgument("b_count")
    p = next(s for s in sig.input_specs if s.target == "bn.weight")
    assert p.persistent is None
    x = sig.input_specs[-1]
    assert x.target is None and x.arg.name == "x"
    outs = sig.output_specs
    assert [o.kind for o in outs] == [OutputKind.BUFFER_MUTATION] * 2 + [OutputKind.USER_OUTPUT]
    assert outs[0].target == "count" and outs[2].target is None
    assert "b_count: BUFFER target='count' persistent=True" in str(sig)


def test_non_persistent_buffers_and_constants():
    progs = tpexport.load(fixture("tensorplay", "two_programs_fixed.pt2"))
    dec = progs["dec"]
    sig = dec.graph_signature
    assert sig.buffers and set(sig.non_persistent_buffers) <= set(sig.buffers)
    names = set(sig.non_persistent_buffers) | set(sig.lifted_tensor_constants)
    assert set(dec.constants) == names
    assert set(dec.tensor_constants) == set(sig.lifted_tensor_constants)
    for n in sig.non_persistent_buffers:
        assert n not in dec.state_dict


def test_state_accessors(mlp):
    sd = mlp.state_dict
    assert list(sd) == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert sd["fc1.weight"].shape == (8, 4) and sd["fc1.weight"].dtype == np.float32
    assert [n for n, _ in mlp.named_parameters()] == list(sd)
    assert len(list(mlp.parameters())) == 4
    assert list(mlp.named_buffers()) == [] and list(mlp.buffers()) == []
    assert mlp.constants == {} and mlp.tensor_constants == {}
    with pytest.raises(KeyError) as e:
        mlp.get_state("nope")
    assert e.value.status == "TP_ERR_NOT_FOUND"


def test_constraints_and_dynamic_shapes(dynamic):
    rc = dynamic.range_constraints
    assert rc["batch"] == {"min": 1, "max": 16} and rc["batch"].lower == 1 and rc["batch"].upper == 16
    (eq,) = dynamic.equality_constraints
    assert eq.sites == (("x", 0), ("y", 0)) and eq.name == "batch"
    ds = dynamic.dynamic_shapes
    assert ds["x"][0].kind == "symbol" and ds["x"][0].symbol == "batch"
    assert ds["z"][0].kind == "derived" and ds["z"][0].scale == 2
    x = dynamic.inputs[0]
    assert x.name == "x" and x.dtype == "float32"
    assert x.shape[0].size == -1 and x.shape[0].symbol == "batch" and x.shape[0].max == 16
    assert x.shape[1].size == 4
    assert len(dynamic.outputs) == 3


def test_unbounded_range_from_onnx():
    ep = tpexport.from_onnx(fixture("onnx", "dynamic.onnx"))
    assert ep.range_constraints["batch"].upper == math.inf


def test_metadata(counter):
    cg = counter.module_call_graph
    assert cg[0].fqn == "" and cg[1].fqn == "bn"
    assert cg[1].signature.inputs == [TensorArgument("x")]
    assert cg[0].signature.forward_arg_names[-1] == "x"
    cs = counter.call_spec
    assert cs.in_spec.startswith("TreeSpec(tuple") and cs.out_spec == "*"
    ex = counter.example_inputs
    assert list(ex) == ["x"] and ex["x"].shape == (2, 3, 2, 2)
    assert tpexport.load(fixture("cli", "no_examples.pt2")).example_inputs == {}
    structured = tpexport.load(fixture("cli", "structured.pt2")).example_inputs
    assert list(structured) == ["xs", "cfg", "flag"]
    assert isinstance(structured["xs"], tuple) and structured["cfg"] == {"k": 3, "scale": 0.5}
    assert structured["flag"] is True


def test_signature_predicates(counter):
    sig = counter.graph_signature
    assert sig.is_param("p_bn_weight") and not sig.is_param("b_count") and not sig.is_param("x")
    assert sig.is_buffer("b_count") and not sig.is_buffer("p_bn_weight")


def test_call_exported(counter):
    x = np.random.default_rng(6).standard_normal((2, 3, 2, 2)).astype(np.float32)
    ref = counter.copy()
    run = tpexport.ExportedProgram.call_exported(counter)
    np.testing.assert_allclose(run(x), ref(x), rtol=1e-6)
    assert counter.get_state("count")[0] == 1.0  # mutations applied
    np.testing.assert_allclose(run(x=x), ref(x), rtol=1e-6)
    with pytest.raises(ValueError):
        run(x, x)


def test_printing(mlp, capsys):
    s = str(mlp)
    assert s.startswith("def forward(self, p_fc1_weight")
    assert "user_inputs            = ['x']" in s
    assert mlp.print_readable() == s
    assert capsys.readouterr().out.strip() == s.strip()
    assert mlp.print_readable(print_output=False) == s
    assert capsys.readouterr().out == ""
    code = mlp.code
    assert "torch.ops.aten.linear.default" in code and "user_inputs" not in code
    assert repr(mlp).startswith("<tpexport.ExportedProgram")


def test_validate(mlp):
    mlp.validate()


def test_run_decompositions(mlp):
    x = np.random.default_rng(2).standard_normal((2, 4)).astype(np.float32)
    ref = mlp(x)
    d = mlp.run_decompositions()
    assert isinstance(d, tpexport.ExportedProgram)
    assert "aten.linear" not in d.code and "aten.softmax" in d.code
    np.testing.assert_allclose(d(x), ref, rtol=1e-5, atol=1e-7)
    t = tpexport.default_decompositions()
    assert "linear" in t and "aten.linear.default" in t and "softmax" not in t
    t.add_softmax()
    assert "softmax" in t
    d2 = mlp.run_decompositions(t)
    assert "aten.softmax" not in d2.code and "aten.exp" in d2.code
    np.testing.assert_allclose(d2(x), ref, rtol=1e-5, atol=1e-7)
    t2 = tpexport.default_decompositions()
    t2.remove("linear")
    assert "linear" not in t2 and "linear" not in t2.copy()
    assert "aten.linear" in mlp.run_decompositions(t2).code
    with pytest.raises(KeyError):
        t2.remove("linear")
    with pytest.raises(KeyError):
        t2.remove("no_such_op")
    assert "aten.linear" in mlp.run_decompositions({}).code
    assert "aten.linear" in mlp.run_decompositions(tpexport.empty_decompositions()).code
    with pytest.raises(TypeError):
        mlp.run_decompositions({"linear": lambda *a: None})
    with pytest.raises(TypeError):
        mlp._run_decompositions(3)


def test_module(counter):
    m = counter.module()
    assert "self.count" in m.code
    x = np.random.default_rng(3).standard_normal((2, 3, 2, 2)).astype(np.float32)
    ref = counter.copy()
    out = m(x)
    np.testing.assert_allclose(out, ref(x), rtol=1e-5, atol=1e-6)
    # The module shares the program's state: its mutation is the program's.
    assert counter.get_state("count")[0] == 1.0
    assert dict(m.named_buffers())["count"][0] == 1.0
    assert [n for n, _ in m.named_parameters()] == ["bn.weight", "bn.bias"]
    assert set(m.state_dict()) == set(counter.state_dict)
    assert len(list(m.parameters())) == 2 and len(list(m.buffers())) == 4
    assert m.training in (True, False)
    m.eval()
    assert m.training is False
    counter.invalidate_unlifted()
    with pytest.raises(RuntimeError, match="invalidated") as e:
        m(x)
    assert e.value.status == "TP_ERR_STATE"
    m2 = counter.module()
    np.testing.assert_allclose(m2(x), ref(x), rtol=1e-5, atol=1e-6)


def test_copy_is_independent(counter):
    c = counter.copy()
    c(np.ones((2, 3, 2, 2), np.float32))
    assert c.get_state("count")[0] == 1.0
    assert counter.get_state("count")[0] == 0.0


def test_not_constructible():
    with pytest.raises(TypeError):
        tpexport.ExportedProgram()


def test_graph_module_flat_contract(counter):
    x = np.random.default_rng(8).standard_normal((2, 3, 2, 2)).astype(np.float32)
    ref = counter.copy()
    gm = counter.graph_module
    assert gm.code == counter.code
    assert gm.print_readable(print_output=False) == counter.code
    sig = counter.graph_signature
    flat = [x if s.kind is InputKind.USER_INPUT else counter.get_state(s.target).copy() for s in sig.input_specs]
    raw = gm(*flat)
    assert isinstance(raw, list) and len(raw) == len(sig.output_specs)
    np.testing.assert_allclose(raw[-1], ref(x), rtol=1e-6)
    assert raw[0][0] == 1.0  # the new value of count: a mutation output
    assert counter.get_state("count")[0] == 0.0  # nothing written back
    with pytest.raises(ValueError):
        gm(x)
