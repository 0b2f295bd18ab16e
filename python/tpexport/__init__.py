"""tpexport: tensorplay's ExportedProgram API on the tpexport C runtime.

Load an exported program (a tensorplay ``.pt2`` archive) or import an ONNX
model, then call it with numpy arrays::

    import numpy as np
    import tpexport

    ep = tpexport.load("model.pt2")
    out = ep(np.ones((2, 4), np.float32))

Calls follow tensorplay's semantics (the C library implements them):
arguments bind to the user inputs positionally and by keyword, missing ones
come from the example inputs, inputs are checked against the program's
dynamic-shape constraints, buffer mutations are written back into the
program's state, and the outputs come back in their original tree
(tuples, lists, dicts).

Arrays are not copied: C-contiguous (or positively strided), natively
ordered, writable inputs of a supported dtype are borrowed for the call, and
outputs are numpy arrays viewing the result memory. ``state_dict`` and
friends return views of the program's state: writing to them changes the
state (call :meth:`ExportedProgram.invalidate_plans` after writing a
parameter or constant in place: compiled plans may hold packed copies).

Errors raise the exception that the library's status kind maps to, with the
library's message; the status name is in the exception's ``status``
attribute (see :data:`STATUS_EXCEPTIONS`).

The GIL is released while programs load, save and run; several Python
threads may call one program at once.
"""

from __future__ import annotations

import enum
import math
import os
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple, Union

from . import _C
from ._C import DecompositionTable

__all__ = [
    "ExportedProgram",
    "ExportGraphSignature",
    "InputKind",
    "OutputKind",
    "InputSpec",
    "OutputSpec",
    "TensorArgument",
    "SymIntArgument",
    "SymFloatArgument",
    "SymBoolArgument",
    "ConstantArgument",
    "CustomObjArgument",
    "TokenArgument",
    "ValueRange",
    "EqualityConstraint",
    "DimRule",
    "ModuleCallSignature",
    "ModuleCallEntry",
    "CallSpec",
    "IOInfo",
    "IODim",
    "UnliftedModule",
    "GraphModule",
    "DecompositionTable",
    "load",
    "load_buffer",
    "save",
    "save_buffer",
    "verify",
    "from_onnx",
    "default_decompositions",
    "empty_decompositions",
    "set_num_threads",
    "get_num_threads",
    "STATUS_EXCEPTIONS",
    "__version__",
    "library_version",
]

__version__ = "0.1.0"
#: Version of the C runtime the extension was built with.
library_version: str = _C.version

#: The exception each library status raises (the rest of a kind's range
#: raises the kind's exception).
STATUS_EXCEPTIONS: Dict[str, type] = {
    "TP_ERR_INVALID_ARG": ValueError,
    "TP_ERR_INDEX": IndexError,
    "TP_ERR_MISSING": ValueError,
    "TP_ERR_DUPLICATE": ValueError,
    "TP_ERR_STATE": RuntimeError,
    "TP_ERR_NOT_FOUND": KeyError,
    "TP_ERR_CANCELLED": RuntimeError,
    "TP_ERR_TYPE": TypeError,
    "TP_ERR_SHAPE": ValueError,
    "TP_ERR_CONSTRAINT": ValueError,
    "TP_ERR_CORRUPT": ValueError,
    "TP_ERR_IO": OSError,
    "TP_ERR_VERIFY": ValueError,
    "TP_ERR_UNSUPPORTED": NotImplementedError,
    "TP_ERR_NOMEM": MemoryError,
    "TP_ERR_INTERNAL": RuntimeError,
}

# C enum values (include/tpexport/signature.h, module.h).
_VIEW = {
    "user_inputs": 0,
    "parameters": 1,
    "buffers": 2,
    "non_persistent_buffers": 3,
    "lifted_tensor_constants": 4,
    "lifted_custom_objs": 5,
    "input_tokens": 6,
    "output_tokens": 7,
    "user_outputs": 8,
}
_MAP = {
    "inputs_to_parameters": 0,
    "inputs_to_buffers": 1,
    "inputs_to_lifted_tensor_constants": 2,
    "buffers_to_mutate": 3,
    "parameters_to_mutate": 4,
    "user_inputs_to_mutate": 5,
}
_FILTER_PARAMETERS, _FILTER_BUFFERS, _FILTER_CONSTANTS, _FILTER_STATE_DICT, _FILTER_ALL = range(5)


def set_num_threads(n: int) -> None:
    """Set the library's default thread count (1..256) for calls of programs
    whose ``num_threads`` is 0. The calling thread takes part: n threads
    means n - 1 pool workers."""
    _C.set_num_threads(n)


def get_num_threads() -> int:
    """The library's default thread count (initially 1)."""
    return _C.get_num_threads()


def default_decompositions() -> DecompositionTable:
    """A new copy of the default decomposition table (the built-in rewrites
    of composite ops into core ops). ``table.add_softmax()`` adds the opt-in
    softmax / log_softmax entries, ``table.remove("op")`` drops one."""
    return _C.default_decompositions()


def empty_decompositions() -> DecompositionTable:
    """An empty decomposition table."""
    return _C.empty_decompositions()


# ---- signature -------------------------------------------------------------


class InputKind(enum.Enum):
    USER_INPUT = "USER_INPUT"
    PARAMETER = "PARAMETER"
    BUFFER = "BUFFER"
    CONSTANT_TENSOR = "CONSTANT_TENSOR"
    CUSTOM_OBJ = "CUSTOM_OBJ"
    TOKEN = "TOKEN"


class OutputKind(enum.Enum):
    USER_OUTPUT = "USER_OUTPUT"
    LOSS_OUTPUT = "LOSS_OUTPUT"
    BUFFER_MUTATION = "BUFFER_MUTATION"
    PARAMETER_MUTATION = "PARAMETER_MUTATION"
    GRADIENT_TO_PARAMETER = "GRADIENT_TO_PARAMETER"
    GRADIENT_TO_USER_INPUT = "GRADIENT_TO_USER_INPUT"
    USER_INPUT_MUTATION = "USER_INPUT_MUTATION"
    TOKEN = "TOKEN"


@dataclass(frozen=True)
class TensorArgument:
    name: str


@dataclass(frozen=True)
class SymIntArgument:
    name: str


@dataclass(frozen=True)
class SymFloatArgument:
    name: str


@dataclass(frozen=True)
class SymBoolArgument:
    name: str


@dataclass(frozen=True)
class TokenArgument:
    name: str


@dataclass(frozen=True)
class CustomObjArgument:
    name: str
    class_fqn: str


@dataclass(frozen=True)
class ConstantArgument:
    name: str
    value: Union[int, float, bool, str, None]


ArgumentSpec = Union[
    TensorArgument,
    SymIntArgument,
    SymFloatArgument,
    SymBoolArgument,
    TokenArgument,
    CustomObjArgument,
    ConstantArgument,
]


def _arg(t: tuple) -> ArgumentSpec:
    kind, name, class_fqn, value = t
    if kind == "TENSOR":
        return TensorArgument(name)
    if kind == "SYM_INT":
        return SymIntArgument(name)
    if kind == "SYM_FLOAT":
        return SymFloatArgument(name)
    if kind == "SYM_BOOL":
        return SymBoolArgument(name)
    if kind == "TOKEN":
        return TokenArgument(name)
    if kind == "CUSTOM_OBJ":
        return CustomObjArgument(name, class_fqn)
    return ConstantArgument(name, value)


@dataclass(frozen=True)
class InputSpec:
    """One placeholder of the graph: what it is and, for state, its target."""

    kind: InputKind
    arg: ArgumentSpec
    target: Optional[str]
    persistent: Optional[bool] = None


@dataclass(frozen=True)
class OutputSpec:
    """One flattened output of the graph."""

    kind: OutputKind
    arg: ArgumentSpec
    target: Optional[str]


class ExportGraphSignature:
    """The graph signature of a program: input and output specs, and the
    derived views tensorplay's ExportGraphSignature has (computed by the C
    library)."""

    def __init__(self, program: "ExportedProgram"):
        self._p = program
        self.input_specs: List[InputSpec] = [
            InputSpec(InputKind(k), _arg(a), t, pers) for k, a, t, pers in program._input_specs()
        ]
        self.output_specs: List[OutputSpec] = [
            OutputSpec(OutputKind(k), _arg(a), t) for k, a, t in program._output_specs()
        ]

    def _view(self, name: str) -> List[str]:
        return self._p._view(_VIEW[name])

    def _map(self, name: str) -> Dict[str, str]:
        return self._p._map(_MAP[name])

    @property
    def user_inputs(self) -> List[str]:
        """Names of the user-input placeholders, in order."""
        return self._view("user_inputs")

    @property
    def user_outputs(self) -> List[str]:
        """Names of the user (and loss) outputs, in order."""
        return self._view("user_outputs")

    @property
    def parameters(self) -> List[str]:
        """Targets of the lifted parameters."""
        return self._view("parameters")

    @property
    def buffers(self) -> List[str]:
        """Targets of the lifted buffers (persistent or not)."""
        return self._view("buffers")

    @property
    def non_persistent_buffers(self) -> List[str]:
        return self._view("non_persistent_buffers")

    @property
    def lifted_tensor_constants(self) -> List[str]:
        return self._view("lifted_tensor_constants")

    @property
    def lifted_custom_objs(self) -> List[str]:
        return self._view("lifted_custom_objs")

    @property
    def input_tokens(self) -> List[str]:
        return self._view("input_tokens")

    @property
    def output_tokens(self) -> List[str]:
        return self._view("output_tokens")

    @property
    def inputs_to_parameters(self) -> Dict[str, str]:
        """Placeholder name -> parameter target."""
        return self._map("inputs_to_parameters")

    @property
    def inputs_to_buffers(self) -> Dict[str, str]:
        """Placeholder name -> buffer target."""
        return self._map("inputs_to_buffers")

    @property
    def inputs_to_lifted_tensor_constants(self) -> Dict[str, str]:
        return self._map("inputs_to_lifted_tensor_constants")

    @property
    def buffers_to_mutate(self) -> Dict[str, str]:
        """Mutation output name -> buffer target."""
        return self._map("buffers_to_mutate")

    @property
    def parameters_to_mutate(self) -> Dict[str, str]:
        return self._map("parameters_to_mutate")

    @property
    def user_inputs_to_mutate(self) -> Dict[str, str]:
        return self._map("user_inputs_to_mutate")

    def is_param(self, name: str) -> bool:
        """Is placeholder `name` a lifted parameter?"""
        return self._p._is_param(name)

    def is_buffer(self, name: str) -> bool:
        """Is placeholder `name` a lifted buffer?"""
        return self._p._is_buffer(name)

    def __str__(self) -> str:
        return self._p._signature_string()

    def __repr__(self) -> str:
        return f"ExportGraphSignature(input_specs={self.input_specs!r}, output_specs={self.output_specs!r})"


# ---- constraints and metadata --------------------------------------------------


class ValueRange(dict):
    """A symbol's range, as tensorplay gives it: {"min": lower, "max":
    upper}; upper is math.inf when unbounded. Also ``.lower`` / ``.upper``
    (torch's ValueRanges names)."""

    def __init__(self, lower: int, upper: Union[int, float]):
        super().__init__(min=lower, max=upper)

    @property
    def lower(self) -> int:
        return self["min"]

    @property
    def upper(self) -> Union[int, float]:
        return self["max"]

    def __repr__(self) -> str:
        return f"ValueRange(min={self['min']}, max={self['max']})"


@dataclass(frozen=True)
class EqualityConstraint:
    """Sites (user input, dim) whose sizes must be equal; name is the
    shared dim's name or None."""

    sites: Tuple[Tuple[str, int], ...]
    name: Optional[str]


@dataclass(frozen=True)
class DimRule:
    """How one dim of a user input may vary: kind "static" (exactly
    ``value``), "symbol" (the symbol ``symbol``) or "derived"
    (``scale * symbol + offset``)."""

    kind: str
    value: int
    symbol: Optional[str]
    scale: int
    offset: int


@dataclass(frozen=True)
class ModuleCallSignature:
    inputs: List[ArgumentSpec]
    outputs: List[ArgumentSpec]
    in_spec: Optional[str]
    out_spec: Optional[str]
    forward_arg_names: List[str] = field(default_factory=list)


@dataclass(frozen=True)
class ModuleCallEntry:
    fqn: str
    signature: Optional[ModuleCallSignature]


@dataclass(frozen=True)
class CallSpec:
    """Tree specs (torch's TreeSpec repr) of the user inputs ((args,
    kwargs)) and outputs, or None."""

    in_spec: Optional[str]
    out_spec: Optional[str]


@dataclass(frozen=True)
class IODim:
    """One dim of an input or output: size (-1 when dynamic), the symbol
    and affine relation size = scale * symbol + offset, and its range
    (max None when unbounded)."""

    size: int
    symbol: Optional[str]
    scale: int
    offset: int
    min: int
    max: Optional[int]


@dataclass(frozen=True)
class IOInfo:
    """A user input or output: name, kind ("TENSOR", "SYM_INT", ...),
    dtype name (or None) and dims (or None when unknown)."""

    name: str
    kind: str
    dtype: Optional[str]
    shape: Optional[List[IODim]]


def _io(t: tuple) -> IOInfo:
    name, kind, dtype, dims = t
    return IOInfo(name, kind, dtype, None if dims is None else [IODim(*d) for d in dims])


# ---- the unlifted module ---------------------------------------------------------


class UnliftedModule:
    """A self-contained module equivalent to the program: state is read
    through get_attr nodes from its module tree (sharing the program's state
    tensors), mutations are written into that state, and the placeholders are
    the user inputs only. Returned by :meth:`ExportedProgram.module`.

    Calls interpret the graph holding the GIL."""

    def __init__(self, m: "_C.Module"):
        self._m = m

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._m(*args, **kwargs)

    forward = __call__

    def named_parameters(self) -> Iterator[Tuple[str, Any]]:
        for name, arr, _, _ in self._m.named_state(_FILTER_PARAMETERS):
            yield name, arr

    def parameters(self) -> Iterator[Any]:
        for _, arr in self.named_parameters():
            yield arr

    def named_buffers(self) -> Iterator[Tuple[str, Any]]:
        for name, arr, _, _ in self._m.named_state(_FILTER_BUFFERS):
            yield name, arr

    def buffers(self) -> Iterator[Any]:
        for _, arr in self.named_buffers():
            yield arr

    def state_dict(self) -> Dict[str, Any]:
        return {name: arr for name, arr, _, _ in self._m.named_state(_FILTER_STATE_DICT)}

    @property
    def code(self) -> str:
        """The forward graph as text."""
        return self._m.code()

    def train(self, mode: bool = True) -> "UnliftedModule":
        self._m.train(mode)
        return self

    def eval(self) -> "UnliftedModule":
        return self.train(False)

    @property
    def training(self) -> bool:
        return self._m.is_training()

    def __repr__(self) -> str:
        return f"<tpexport.UnliftedModule {self._m.type_name()}>"


# ---- the graph module (flat contract) ----------------------------------------------


class GraphModule:
    """The program's graph as a callable with the flat contract, like
    tensorplay's ``ep.graph_module``: one value per placeholder in graph
    order (lifted state first, then the user inputs' leaves), returning the
    raw flattened outputs as a list (mutation outputs first). Nothing is
    bound, checked (but the count) or written back."""

    def __init__(self, program: "ExportedProgram"):
        self._p = program

    def __call__(self, *flat_inputs: Any) -> List[Any]:
        return self._p._call_flat(*flat_inputs)

    forward = __call__

    @property
    def code(self) -> str:
        return self._p._graph_code()

    def print_readable(self, print_output: bool = True) -> str:
        s = self._p._graph_code()
        if print_output:
            print(s)
        return s

    def __repr__(self) -> str:
        return "<tpexport.GraphModule>"


# ---- the program -------------------------------------------------------------------


class ExportedProgram(_C.Program):
    """An exported program: graph, signature, state, example inputs and
    constraints. Call it like the module it came from::

        out = ep(x, y)            # or ep(x=x, y=y)
        out = ep.call((x, y), num_threads=2)

    Obtain programs from :func:`load`, :func:`from_onnx`,
    :meth:`run_decompositions` or :meth:`copy`.
    """

    def __init__(self, *args: Any, **kwargs: Any):
        raise TypeError("ExportedProgram cannot be created directly: use tpexport.load or tpexport.from_onnx")

    # __call__(*args, **kwargs), call(args, kwargs, num_threads),
    # validate(), invalidate_unlifted(), invalidate_plans() and num_threads
    # come from the C type.

    # -- signature and state --

    @property
    def graph_signature(self) -> ExportGraphSignature:
        """The graph signature (input/output specs and their views)."""
        return ExportGraphSignature(self)

    @property
    def state_dict(self) -> Dict[str, Any]:
        """Parameters and persistent buffers by target: numpy views of the
        program's state (writes change the state)."""
        return {name: arr for name, arr, _, _ in self._named_state(_FILTER_STATE_DICT)}

    def named_parameters(self) -> Iterator[Tuple[str, Any]]:
        """(target, array view) for each parameter, in signature order."""
        for name, arr, _, _ in self._named_state(_FILTER_PARAMETERS):
            yield name, arr

    def parameters(self) -> Iterator[Any]:
        for _, arr in self.named_parameters():
            yield arr

    def named_buffers(self) -> Iterator[Tuple[str, Any]]:
        """(target, array view) for each buffer, persistent or not."""
        for name, arr, _, _ in self._named_state(_FILTER_BUFFERS):
            yield name, arr

    def buffers(self) -> Iterator[Any]:
        for _, arr in self.named_buffers():
            yield arr

    @property
    def constants(self) -> Dict[str, Any]:
        """Lifted tensor constants and non-persistent buffers (as
        tensorplay's ExportedProgram.constants)."""
        return {name: arr for name, arr, _, _ in self._named_state(_FILTER_CONSTANTS)}

    @property
    def tensor_constants(self) -> Dict[str, Any]:
        """Constant tensors only (no buffers)."""
        return {name: arr for name, arr, kind, _ in self._named_state(_FILTER_CONSTANTS) if kind == "constant"}

    def get_state(self, target: str) -> Any:
        """The state tensor stored under target (KeyError if absent)."""
        return self._get_state(target)[0]

    # -- constraints and metadata --

    @property
    def range_constraints(self) -> Dict[str, ValueRange]:
        """Symbol -> ValueRange(lower, upper)."""
        return {n: ValueRange(lo, math.inf if hi is None else hi) for n, lo, hi in self._ranges()}

    @property
    def equality_constraints(self) -> List[EqualityConstraint]:
        return [EqualityConstraint(tuple(sites), name) for sites, name in self._equalities()]

    @property
    def dynamic_shapes(self) -> Dict[str, Dict[int, DimRule]]:
        """User input (or path such as "xs[0]") -> {dim: DimRule}."""
        out: Dict[str, Dict[int, DimRule]] = {}
        for inp, dim, kind, value, symbol, scale, offset in self._dim_rules():
            out.setdefault(inp, {})[dim] = DimRule(kind, value, symbol, scale, offset)
        return out

    @property
    def module_call_graph(self) -> List[ModuleCallEntry]:
        entries = []
        for fqn, sig in self._module_calls():
            if sig is not None:
                ins, outs, in_spec, out_spec, names = sig
                sig = ModuleCallSignature([_arg(a) for a in ins], [_arg(a) for a in outs], in_spec, out_spec, names)
            entries.append(ModuleCallEntry(fqn, sig))
        return entries

    @property
    def call_spec(self) -> CallSpec:
        return CallSpec(*self._specs())

    @property
    def example_inputs(self) -> Dict[str, Any]:
        """User input name -> recorded example input (read-only arrays), as
        tensorplay gives them; inputs without one are left out."""
        out = {}
        for name in self._view(_VIEW["user_inputs"]):
            got = self._example_input(name)
            if got is not None:
                out[name] = got[0]
        return out

    @property
    def inputs(self) -> List[IOInfo]:
        """User inputs: dtype and (symbolic) shape."""
        return [_io(t) for t in self._input_info()]

    @property
    def outputs(self) -> List[IOInfo]:
        """User outputs, by shape inference at the example inputs."""
        return [_io(t) for t in self._output_info()]

    @property
    def graph_module(self) -> GraphModule:
        """The graph with the flat contract (see :class:`GraphModule`)."""
        return GraphModule(self)

    # -- text --

    @property
    def code(self) -> str:
        """The graph as readable code."""
        return self._graph_code()

    def print_readable(self, print_output: bool = True) -> str:
        """The graph and signature as text; printed unless print_output is
        False. Returns the text."""
        s = self._to_string()
        if print_output:
            print(s)
        return s

    def __str__(self) -> str:
        return self._to_string()

    def __repr__(self) -> str:
        sig = self.graph_signature
        return (
            f"<tpexport.ExportedProgram user_inputs={sig.user_inputs} "
            f"parameters={len(sig.parameters)} buffers={len(sig.buffers)}>"
        )

    # -- transforms --

    def run_decompositions(self, decomp_table: Optional[Union[DecompositionTable, Mapping]] = None) -> "ExportedProgram":
        """A new program with the ops that have an entry in decomp_table
        rewritten into simpler ops (None: the default table; an empty dict:
        no rewrites), dead code removed and re-validated."""
        if isinstance(decomp_table, Mapping):
            if len(decomp_table):
                raise TypeError(
                    "custom Python decompositions are not supported: pass None, {}, or a DecompositionTable "
                    "(tpexport.default_decompositions())"
                )
            decomp_table = _C.empty_decompositions()
        return self._run_decompositions(decomp_table)

    def module(self) -> UnliftedModule:
        """The unlifted module (built on first use and cached; shares the
        program's state)."""
        return UnliftedModule(self._module())

    def copy(self) -> "ExportedProgram":
        """A deep copy (state cloned)."""
        return self._copy()

    @staticmethod
    def call_exported(program: "ExportedProgram"):
        """A callable running program through the flat contract on user
        arguments (state filled, mutations applied, outputs rebuilt), as
        tensorplay's ExportedProgram.call_exported."""

        def runner(*args: Any, **kwargs: Any) -> Any:
            return program._call_exported(*args, **kwargs)

        return runner

    def check_inputs(self, *args: Any, **kwargs: Any) -> None:
        """Check inputs against the program (count, structure, dtypes,
        dims, constraints) without running it."""
        self._check_inputs(*args, **kwargs)


_C._set_program_class(ExportedProgram)


# ---- archives and ONNX --------------------------------------------------------------


def _programs(loaded, extra_files):
    progs, extra, _mapped = loaded
    if extra_files is not None:
        extra_files.update(extra)
    if len(progs) == 1:
        return progs[0][1]
    return dict(progs)


def load(
    path: Union[str, os.PathLike], *, extra_files: Optional[Dict[str, bytes]] = None, mmap: bool = True
) -> Union[ExportedProgram, Dict[str, ExportedProgram]]:
    """Load a tensorplay archive (.pt2). Returns the program, or a dict
    name -> program when the archive holds several. Weights are mapped from
    the file (copy-on-write) unless mmap is False. extra_files, when given,
    receives the archive's extra files (name -> bytes). Programs are
    validated."""
    return _programs(_C.load(os.fspath(path), mmap=mmap), extra_files)


def load_buffer(
    data: Union[bytes, bytearray, memoryview], *, extra_files: Optional[Dict[str, bytes]] = None
) -> Union[ExportedProgram, Dict[str, ExportedProgram]]:
    """Load an archive from memory (copied)."""
    return _programs(_C.load_buffer(data), extra_files)


def _entries(programs):
    if isinstance(programs, _C.Program):
        return [("model", programs)]
    if isinstance(programs, Mapping):
        return list(programs.items())
    raise TypeError(f"expected an ExportedProgram or a dict of them, got {type(programs).__name__}")


def _torch_format(format: str, extra_files) -> bool:
    if format not in ("tensorplay", "torch"):
        raise ValueError(f"format must be 'tensorplay' or 'torch', not {format!r}")
    if format == "torch" and extra_files:
        raise ValueError("extra_files are not written in PyTorch's format")
    return format == "torch"


def save(
    path: Union[str, os.PathLike],
    programs: Union[ExportedProgram, Mapping[str, ExportedProgram]],
    *,
    extra_files: Optional[Mapping[str, bytes]] = None,
    format: str = "tensorplay",
) -> None:
    """Save one program (named "model") or a dict name -> program as a
    tensorplay archive, or with format="torch" as the archive PyTorch's
    torch.export.save writes (torch.export.load reads it; no extra files),
    atomically (a temporary file renamed over path)."""
    torch = _torch_format(format, extra_files)
    _C.save(os.fspath(path), _entries(programs), dict(extra_files or {}), torch)


def save_buffer(
    programs: Union[ExportedProgram, Mapping[str, ExportedProgram]],
    *,
    extra_files: Optional[Mapping[str, bytes]] = None,
    format: str = "tensorplay",
) -> bytes:
    """The archive :func:`save` would write, as bytes."""
    torch = _torch_format(format, extra_files)
    return _C.save_buffer(_entries(programs), dict(extra_files or {}), torch)


def verify(path: Union[str, os.PathLike]) -> None:
    """Check an archive completely; raises with every problem listed."""
    _C.verify(os.fspath(path))


def _dim_range(name, spec):
    if isinstance(spec, str):
        lo, _, hi = spec.partition(":")
        lo = int(lo)
        hi = None if hi in ("", "inf") else int(hi)
        return (name, lo, hi)
    if isinstance(spec, int):
        return (name, spec, None)
    if isinstance(spec, (tuple, list)) and len(spec) == 2:
        lo, hi = spec
        if hi is not None and isinstance(hi, float) and math.isinf(hi):
            hi = None
        return (name, int(lo), None if hi is None else int(hi))
    lo = getattr(spec, "min", None)
    if lo is not None:  # a tensorplay / torch Dim
        hi = getattr(spec, "max", None)
        if hi is not None and (not isinstance(hi, int) or hi >= 2**62):
            hi = None
        return (name, int(lo), hi)
    raise TypeError(f"dynamic[{name!r}]: expected (min, max), 'min:max', an int minimum or a Dim, got {spec!r}")


def from_onnx(
    path: Union[str, os.PathLike], dynamic: Optional[Mapping[str, Any]] = None, *, report_all: bool = False
) -> ExportedProgram:
    """Import an ONNX model as a program. dynamic maps dim_param names to
    ranges: (min, max) with max None (or math.inf) for unbounded,
    "min:max", an int minimum, or a Dim with .min/.max. report_all lists
    every unsupported node in the error, not just the first."""
    ranges = [_dim_range(k, v) for k, v in (dynamic or {}).items()]
    return _C.from_onnx(os.fspath(path), ranges, report_all=report_all)
