"""Batch inference on Ray Data with tpexport (``pip install ./python[ray]``).

:class:`BatchPredictor` is a callable class for
``ray.data.Dataset.map_batches``: each Ray worker constructs it once,
loading the archive (weights mapped from the file, copy-on-write, so the
workers of one machine share the page cache instead of copying weights),
and then calls the program on each batch::

    import ray
    from tpexport.ray import BatchPredictor

    ds = ray.data.from_numpy(images)            # column "data"
    out = ds.map_batches(
        BatchPredictor,
        fn_constructor_kwargs={"path": "model.pt2", "input_columns": ["data"]},
        batch_size=32, batch_format="numpy", concurrency=2)

Batches are dicts of numpy arrays (``batch_format="numpy"``). The program's
user inputs are read from ``input_columns`` (default: columns named like
the user inputs), passed positionally without a copy when the column is
contiguous, and the flattened outputs are written to ``output_columns``
(default: the program's user output names). The batch size must satisfy the
program's constraints on the batch dim (export it with a dynamic batch).

This module does not import ray: only the class is defined here, and Ray
imports it in its workers.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

import numpy as np

import tpexport


def _leaves(v: Any) -> List[Any]:
    if isinstance(v, (tuple, list)):
        return [x for item in v for x in _leaves(item)]
    if isinstance(v, dict):
        return [x for item in v.values() for x in _leaves(item)]
    return [v]


class BatchPredictor:
    """Runs an exported program on batches of a Ray dataset.

    Args:
        path: the archive (.pt2) or, with ``onnx=True``, an ONNX model.
        program: which program of a multi-program archive (by name).
        input_columns: batch columns fed to the user inputs, in order
            (default: the user input names).
        output_columns: names of the flattened outputs (default: the user
            output names).
        keep_columns: also return the input batch's columns.
        num_threads: threads per call (0: the library default).
        mmap: map the weights from the file (default) instead of copying.
        onnx: import ``path`` as an ONNX model; ``dynamic`` as for
            :func:`tpexport.from_onnx`.
    """

    def __init__(
        self,
        path: str,
        *,
        program: Optional[str] = None,
        input_columns: Optional[Sequence[str]] = None,
        output_columns: Optional[Sequence[str]] = None,
        keep_columns: bool = False,
        num_threads: int = 0,
        mmap: bool = True,
        onnx: bool = False,
        dynamic: Optional[Dict[str, Any]] = None,
    ):
        if onnx:
            ep = tpexport.from_onnx(path, dynamic=dynamic)
        else:
            ep = tpexport.load(path, mmap=mmap)
        if isinstance(ep, dict):
            if program is None:
                raise ValueError(f"{path} holds several programs {sorted(ep)}: choose one with program=")
            ep = ep[program]
        elif program is not None and program != "model":
            raise ValueError(f"{path} holds one program; program={program!r} does not name it")
        self.program = ep
        sig = ep.graph_signature
        self.input_columns = list(input_columns) if input_columns is not None else sig.user_inputs
        self.output_columns = list(output_columns) if output_columns is not None else sig.user_outputs
        self.keep_columns = keep_columns
        self.num_threads = num_threads

    def __call__(self, batch: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        missing = [c for c in self.input_columns if c not in batch]
        if missing:
            raise KeyError(f"batch has no column(s) {missing} (columns: {sorted(batch)})")
        args = tuple(batch[c] for c in self.input_columns)
        out = _leaves(self.program.call(args, num_threads=self.num_threads))
        if len(out) != len(self.output_columns):
            raise ValueError(f"the program returned {len(out)} outputs for output_columns {self.output_columns}")
        result: Dict[str, np.ndarray] = dict(batch) if self.keep_columns else {}
        for name, value in zip(self.output_columns, out):
            result[name] = np.asarray(value)
        return result
