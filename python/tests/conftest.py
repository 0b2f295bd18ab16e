import json
import os

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(REPO, "tests", "fixtures")


def fixture(*parts):
    return os.path.join(FIXTURES, *parts)


def case_runs(case):
    """The runs tensorplay recorded for tests/fixtures/tensorplay/<case>
    (tests/fixtures/gen_tensorplay.py): [(inputs, outputs, state)]."""
    d = fixture("tensorplay", case)
    with open(os.path.join(d, "case.json")) as f:
        c = json.load(f)
    runs = []
    for r in c["runs"]:
        inputs = {k: np.load(os.path.join(d, v)) for k, v in r["inputs"].items()}
        outputs = [np.load(os.path.join(d, v)) for v in r["outputs"]]
        state = {k: np.load(os.path.join(d, v)) for k, v in r["state"].items()}
        runs.append((inputs, outputs, state))
    return c["inputs"], runs


def addr(a):
    return a.__array_interface__["data"][0]


@pytest.fixture
def mlp():
    import tpexport

    return tpexport.load(fixture("tensorplay", "mlp.pt2"))


@pytest.fixture
def counter():
    import tpexport

    return tpexport.load(fixture("tensorplay", "counter.pt2"))


@pytest.fixture
def dynamic():
    import tpexport

    return tpexport.load(fixture("tensorplay", "dynamic.pt2"))
