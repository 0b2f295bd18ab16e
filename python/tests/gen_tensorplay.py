"""Write the side-by-side fixtures of test_tensorplay.py with the real
tensorplay (pip package `tensorplay`, plus numpy):

    python3 -m venv build-py/tpvenv && build-py/tpvenv/bin/pip install tensorplay numpy
    build-py/tpvenv/bin/python python/tests/gen_tensorplay.py

For each case, under python/tests/fixtures/:
  <case>.pt2   the archive tensorplay.export.save wrote
  <case>.json  {"inputs": [user input names], "kwargs": [names passed by
               keyword], "runs": n, "state": [targets], "tree": [structure
               of each run's output]}
  <case>.npz   per run r: r{r}_in_{name} (inputs before the call),
               r{r}_out{k} (flattened outputs), r{r}_after_{name} (inputs
               after the call: in-place updates of inputs),
               r{r}_state_{target} (state after the call)

Runs go to the program tensorplay loaded back from the archive, one after
the other (state carries over), as a user of the archive would call it.
"""

import io
import json
import os

import numpy as np
import tensorplay as tp
import tensorplay.nn as nn
import tensorplay.nn.functional as F
from tensorplay.export import Dim

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures")


def arr(t):
    if t.dtype == tp.bfloat16:  # numpy has no bfloat16 (tpexport gives float32 too)
        t = t.float()
    return np.array(t.detach().numpy(), copy=True, order="C")


def tree(v):
    """The output structure, as text: tuple(...), list(...), dict(k=...), *."""
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


class Stateful(nn.Module):
    """A persistent step counter and a non-persistent running mean (two
    mutations of one buffer), a float keyword argument, tuple/list outputs."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.register_buffer("steps", tp.zeros(1))
        self.register_buffer("ema", tp.zeros(3), persistent=False)

    def forward(self, x, scale: float = 1.0):
        y = F.relu(self.fc(x)) * scale
        self.steps.add_(1)
        self.ema.mul_(0.5).add_(y.mean(0) * 0.5)
        return y * self.steps, [y.sum(1), self.ema * 1.0]


class ConvNet(nn.Module):
    """Conv2d, BatchNorm2d in training mode (running stats mutate), pooling,
    a dynamic batch."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4, 2)

    def forward(self, img):
        h = F.relu(self.bn(self.conv(img)))
        h = F.adaptive_avg_pool2d(h, (1, 1)).flatten(1)
        return self.fc(h)


class InPlaceInput(nn.Module):
    """Adds y into x in place and returns a function of the updated x."""

    def forward(self, x, y):
        x.add_(y)
        return x * 2 + 1


def make_classifier():
    """An eval-mode image classifier with a dynamic batch (the Ray test's
    model: no state changes, so batches may run in any order)."""
    return nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1),
        nn.BatchNorm2d(4),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(64, 3),
    ).eval()


class Dtypes(nn.Module):
    """Outputs of several dtypes: bfloat16 (numpy has none: float32 in
    tpexport), float16, int32, bool."""

    def forward(self, x, i):
        return x.to(tp.bfloat16) * 2, x.to(tp.float16) + 1, (i * 3).to(tp.int32), i > 1


def rnd(rng, *shape):
    return tp.from_numpy(rng.standard_normal(shape).astype(np.float32))


def write(name, model, example_args, runs, kwargs=None, example_kwargs=None, dynamic_shapes=None):
    kwargs = kwargs or []
    ep = tp.export.export(model, *example_args, dynamic_shapes=dynamic_shapes, **(example_kwargs or {}))
    buf = io.BytesIO()
    tp.export.save(ep, buf)
    data = buf.getvalue()
    with open(os.path.join(OUT, name + ".pt2"), "wb") as f:
        f.write(data)
    program = tp.export.load(io.BytesIO(data))
    names = list(program.graph_signature.user_inputs)
    state = list(program.graph_signature.buffers)
    arrays, trees = {}, []
    for r, values in enumerate(runs):
        values = [tp.from_numpy(arr(v).copy()) if isinstance(v, tp.Tensor) else v for v in values]
        pos = [v for n, v in zip(names, values) if n not in kwargs]
        kw = {n: v for n, v in zip(names, values) if n in kwargs}
        for n, v in zip(names, values):
            arrays[f"r{r}_in_{n}"] = arr(v) if isinstance(v, tp.Tensor) else np.array(v)
        out = program(*pos, **kw)
        trees.append(tree(out))
        for k, leaf in enumerate(leaves(out)):
            arrays[f"r{r}_out{k}"] = arr(leaf)
        for n, v in zip(names, values):
            if isinstance(v, tp.Tensor):
                arrays[f"r{r}_after_{n}"] = arr(v)
        for target in state:
            arrays[f"r{r}_state_{target}"] = arr(program._resolve_state_value(target))
    np.savez(os.path.join(OUT, name + ".npz"), **arrays)
    with open(os.path.join(OUT, name + ".json"), "w") as f:
        json.dump({"inputs": names, "kwargs": kwargs, "runs": len(runs), "state": state, "tree": trees}, f, indent=1)


def main():
    os.makedirs(OUT, exist_ok=True)
    tp.manual_seed(0)
    rng = np.random.default_rng(0)
    x = rnd(rng, 2, 4)
    write("stateful", Stateful(), (x,), [(rnd(rng, 2, 4), s) for s in (1.0, 2.0, 0.5)],
          kwargs=["scale"], example_kwargs={"scale": 1.0})
    batch = Dim("batch", min=1, max=8)
    img = rnd(rng, 2, 2, 5, 5)
    write("convnet", ConvNet().train(), (img,), [(rnd(rng, b, 2, 5, 5),) for b in (2, 3, 1)],
          dynamic_shapes={"img": {0: batch}})
    write("inplace_input", InPlaceInput(), (rnd(rng, 2, 3), rnd(rng, 2, 3)),
          [(rnd(rng, 2, 3), rnd(rng, 2, 3)) for _ in range(3)])
    ints = [tp.from_numpy(rng.integers(-3, 4, (2, 3)).astype(np.int64)) for _ in range(3)]
    write("dtypes", Dtypes(), (rnd(rng, 2, 3), ints[0]), [(rnd(rng, 2, 3), i) for i in ints])
    batch = Dim("batch", min=1, max=64)
    write("classifier", make_classifier(), (rnd(rng, 4, 1, 8, 8),), [(rnd(rng, b, 1, 8, 8),) for b in (4, 7)],
          dynamic_shapes={"input": {0: batch}})


if __name__ == "__main__":
    main()
