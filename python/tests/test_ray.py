"""tpexport.ray on a local Ray cluster: map_batches over a dataset of
images gives the results of one single-process call. Skipped when ray is
not installed (pip install ./python[ray])."""
import os

import numpy as np
import pytest

import tpexport
from tpexport.ray import BatchPredictor

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
ARCHIVE = os.path.join(HERE, "classifier.pt2")


def images(n=40):
    return np.random.default_rng(5).standard_normal((n, 1, 8, 8)).astype(np.float32)


def test_batch_predictor_without_ray():
    x = images(10)
    pred = BatchPredictor(ARCHIVE, input_columns=["image"], output_columns=["logits"], keep_columns=True)
    out = pred({"image": x, "id": np.arange(10)})
    np.testing.assert_array_equal(out["id"], np.arange(10))
    np.testing.assert_allclose(out["logits"], tpexport.load(ARCHIVE)(x), rtol=1e-6)
    with pytest.raises(KeyError, match="no column"):
        pred({"other": x})
    with pytest.raises(ValueError):
        BatchPredictor(ARCHIVE, program="nope")


def test_default_columns():
    pred = BatchPredictor(ARCHIVE)
    assert pred.input_columns == tpexport.load(ARCHIVE).graph_signature.user_inputs
    out = pred({pred.input_columns[0]: images(3)})
    assert list(out) == pred.output_columns and out[pred.output_columns[0]].shape == (3, 3)


def test_map_batches_on_a_local_cluster():
    ray = pytest.importorskip("ray")
    x = images(40)
    expected = tpexport.load(ARCHIVE)(x)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    try:
        ds = ray.data.from_items([{"id": i, "image": x[i]} for i in range(len(x))])
        out = ds.map_batches(
            BatchPredictor,
            fn_constructor_kwargs={
                "path": ARCHIVE,
                "input_columns": ["image"],
                "output_columns": ["logits"],
                "keep_columns": True,
            },
            batch_size=8,
            batch_format="numpy",
            concurrency=2,
        )
        rows = sorted(out.take_all(), key=lambda r: r["id"])
    finally:
        ray.shutdown()
    got = np.stack([r["logits"] for r in rows])
    assert [r["id"] for r in rows] == list(range(40))
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
