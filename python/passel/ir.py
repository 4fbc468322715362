"""The IR: modules, functions, expressions, types, and tools to rebuild functions.

A ``Module`` (TVM's ``IRModule``) is an ordered map from global names to ``Function``s; both
wrap the Rust objects (no copy crosses the boundary; a module copy is O(1)). A Python pass
walks a function through ``Function.bindings`` and ``Expr`` (``kind``, ``op``, ``args``,
``attrs``, ``type``) and builds a new one with ``FunctionBuilder`` or by subclassing
``ExprMutator``. A pass that changes nothing must return the function it was given (the
same object), so the engine and sessions can skip work.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Union

from . import _passel
from ._passel import Expr, Function, Module, Type, Value

IRModule = Module

__all__ = [
    "Module",
    "IRModule",
    "Function",
    "Expr",
    "Type",
    "Value",
    "TensorType",
    "TupleType",
    "FuncType",
    "FunctionBuilder",
    "ExprMutator",
    "structural_equal",
    "structural_hash",
    "const_value",
    "list_ops",
]


def TensorType(shape: Sequence[int], dtype: str = "float32") -> Type:
    """A tensor type, e.g. ``TensorType([1, 16], "float32")``."""
    return Type.tensor(list(shape), dtype)


def TupleType(fields: Sequence[Type]) -> Type:
    """A tuple type."""
    return Type.tuple(list(fields))


def FuncType(params: Sequence[Type], ret: Type) -> Type:
    """A function type."""
    return Type.func(list(params), ret)


def structural_equal(a: Union[Module, Function], b: Union[Module, Function]) -> bool:
    """TVM's ``structural_equal`` for modules and functions (variable names do not matter)."""
    if isinstance(a, Module) and isinstance(b, Module):
        return a.structural_equal(b)
    if isinstance(a, Function) and isinstance(b, Function):
        return a.structural_equal(b)
    return False


def structural_hash(x: Union[Module, Function]) -> int:
    """TVM's ``structural_hash``: equal for structurally equal modules or functions."""
    return x.structural_hash()


def list_ops() -> List[str]:
    """The names of the registered operators, sorted."""
    return sorted(name for name, _pattern, _doc in _passel.list_ops())


def _from_raw(raw: Any) -> Any:
    import numpy as np

    if isinstance(raw, list):
        return [_from_raw(r) for r in raw]
    dtype, shape, data = raw
    return np.frombuffer(data, dtype=np.dtype(dtype).newbyteorder("<")).reshape(shape).astype(dtype)


def const_value(expr: Expr) -> Any:
    """The value of a constant expression (``expr.kind == "const"``) as a numpy array."""
    raw = expr.const_raw()
    if raw is None:
        raise ValueError(f"{expr!r} is not a constant")
    return _from_raw(raw)


class FunctionBuilder(_passel.FunctionBuilder):
    """Builds a new function (see ``passel._passel.FunctionBuilder`` for every method).

    Example::

        b = FunctionBuilder()
        x = b.param("x", TensorType([4]))
        y = b.let("y", b.call("add", [x, x]))
        func = b.finish(y, ret_type=TensorType([4]))
    """

    def const(self, value: Any) -> Value:
        """A constant from a numpy array (or anything ``numpy.asarray`` accepts)."""
        import numpy as np

        arr = np.asarray(value)
        arr = np.asarray(arr, dtype=arr.dtype.newbyteorder("<"), order="C")
        return self.const_raw(arr.dtype.name, list(arr.shape), arr.tobytes())


class ExprMutator:
    """Rewrites a function binding by binding, in the spirit of TVM's ``PyExprMutator``.

    ``visit_function(func)`` rebuilds ``func`` with a fresh ``FunctionBuilder``
    (``self.builder``): parameters are copied, then every top-level binding's value goes
    through ``visit_binding`` (default: ``visit_expr``) and is bound again, then the result.
    ``visit_expr`` dispatches calls to ``visit_call`` (default: rebuild the call from the
    visited arguments), maps variables through ``self.env`` and copies everything else.
    Override ``visit_call`` or ``visit_binding`` to rewrite. When the rebuilt function is
    structurally equal to the input, the input itself is returned (TVM's "functional
    update"), so an unchanged function stays the same object.
    """

    builder: FunctionBuilder
    env: Dict[Expr, Value]

    def visit_function(self, func: Function) -> Function:
        """Rebuilds ``func`` through the visit methods."""
        b = FunctionBuilder()
        self.builder = b
        self.env = {}
        for p in func.params:
            self.env[p] = b.param(p.name or "p", p.type)
        body = func.body
        bindings = body.bindings if body.kind == "block" else []
        for var, value in bindings:
            new = self.visit_binding(var, value)
            self.env[var] = b.let(var.name or "v", new, var.type)
        result = body.result if body.kind == "block" else body
        assert result is not None
        out = self.visit_expr(result)
        attrs = func.attrs
        new_func = b.finish(out, func.ret_type, attrs if attrs else None)
        return func if new_func.structural_equal(func) else new_func

    def visit_binding(self, var: Expr, value: Expr) -> Value:
        """The new value bound to ``var`` (default: ``visit_expr(value)``)."""
        return self.visit_expr(value)

    def visit_expr(self, expr: Expr) -> Value:
        """Dispatches on ``expr.kind``."""
        if expr.kind == "call":
            return self.visit_call(expr)
        if expr.kind == "var" and expr in self.env:
            return self.env[expr]
        return self.builder.copy(expr, self.env)

    def visit_call(self, call: Expr) -> Value:
        """Rebuilds an operator call from its visited arguments."""
        args = [self.visit_expr(a) for a in call.args]
        op = call.op
        assert op is not None
        return self.builder.call(op, args, call.attrs, call.type)

