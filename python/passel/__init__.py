"""passel: TVM's pass infrastructure over a parallel, incremental Rust engine.

The API follows TVM's Python names and semantics:

- ``passel.ir``: ``Module`` (TVM's ``IRModule``, mutable in place), ``Function``, ``Expr``,
  ``Type``, ``ExprVisitor`` / ``ExprMutator`` (TVM's ``PyExprVisitor`` / ``PyExprMutator``)
  and ``FunctionBuilder`` for writing passes.
- ``passel.transform`` (``tvm.ir.transform``): ``PassInfo``, ``PassContext``, ``Pass``,
  ``Sequential``, the ``module_pass`` / ``function_pass`` decorators, ``get_pass``,
  ``list_passes``, ``PrintIR``, textual pipelines and ``get_pipeline(opt_level)``.
- ``passel.tir`` (``tvm.tir``): ``PrimFunc`` and TVM-style loop-level nodes, ``stmt_functor``,
  ``tir.transform.prim_func_pass`` and the registered tir passes.
- ``passel.instrument`` (``tvm.ir.instrument``): ``PassInstrument``, ``pass_instrument``, the printing
  instruments (``PrintBeforeAll``, ``PrintAfterAll``, ``PassPrintingInstrument``, ``DumpIR``),
  ``PassTimingInstrument``.
- ``passel.Session``: incremental runs that recompute only what an edit can affect.
- ``passel.eval``: the reference interpreter on numpy arrays.

Rust passes run in parallel with the GIL released; Python passes run under the GIL, one call
per function, on the calling thread (see ``passel.transform``).
"""

from __future__ import annotations

from typing import Any, List, Union

from . import instrument, ir, tir, transform
from ._passel import DiagnosticError, OnnxError, ParseError, PassError, PassKeyError, PassTypeError, PassValueError, StageStats
from .session import Session, SessionRun

__all__ = [
    "ir",
    "transform",
    "tir",
    "instrument",
    "Session",
    "SessionRun",
    "StageStats",
    "PassError",
    "DiagnosticError",
    "PassValueError",
    "PassTypeError",
    "PassKeyError",
    "ParseError",
    "OnnxError",
    "eval",
]


def eval(mod: ir.Module, *args: Any, entry: str = "main") -> Union[Any, List[Any]]:
    """Runs function ``entry`` of ``mod`` in the reference interpreter.

    ``args`` are numpy arrays (or anything ``numpy.asarray`` accepts) of the parameter types;
    the result is a numpy array, or a list of them for a tuple result. Raises
    ``passel.PassError`` when evaluation fails (wrong argument types, an operator error).
    """
    import numpy as np

    raw = []
    for a in args:
        arr = np.asarray(a)
        arr = np.asarray(arr, dtype=arr.dtype.newbyteorder("<"), order="C")
        raw.append((arr.dtype.name, list(arr.shape), arr.tobytes()))
    return ir._from_raw(_passel_eval(mod, entry, raw))


def _passel_eval(mod: ir.Module, entry: str, raw: List[Any]) -> Any:
    from ._passel import eval_raw

    return eval_raw(mod, entry, raw)
