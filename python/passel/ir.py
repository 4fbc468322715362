"""The IR: modules, functions, expressions, types, and tools to rebuild functions.

A ``Module`` (TVM's ``IRModule``) is an ordered map from global names to ``Function``s and
loop-level ``passel.tir.PrimFunc``s (one namespace, graph functions first); all wrap the Rust
objects (no copy crosses the boundary; a module copy is O(1)). A Python pass
reads a function with ``ExprVisitor`` (or ``Function.bindings`` and ``Expr``: ``kind``,
``op``, ``args``, ``attrs``, ``type``), rewrites it with ``ExprMutator`` (both run on the
engine's walker and rewriting layer) and builds new functions with ``FunctionBuilder``. A pass that changes nothing must return the function it was given (the
same object), so the engine and sessions can skip work.
"""

from __future__ import annotations

from typing import Any, List, Sequence, Set, Union

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
    "ExprVisitor",
    "ExprMutator",
    "RewriteBuilder",
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
        return self.const_raw(*_const_args(value))


def _const_args(value: Any) -> "tuple[str, List[int], bytes]":
    import numpy as np

    arr = np.asarray(value)
    arr = np.asarray(arr, dtype=arr.dtype.newbyteorder("<"), order="C")
    return arr.dtype.name, list(arr.shape), arr.tobytes()


class RewriteBuilder(_passel.RewriteBuilder):
    """``ExprMutator.builder``: builds replacement expressions inside a hook (see
    ``passel._passel.RewriteBuilder`` for every method)."""

    def const(self, value: Any) -> Value:
        """A constant from a numpy array (or anything ``numpy.asarray`` accepts)."""
        return self.const_raw(*_const_args(value))


# ``Expr.kind`` -> the name of the hook TVM gives that kind (an ``apply`` of a global or a
# function value is a call in TVM; a block is Relax's ``SeqExpr``).
_HOOKS = {
    "var": "visit_var_",
    "global": "visit_global_var_",
    "const": "visit_constant_",
    "call": "visit_call_",
    "apply": "visit_call_",
    "tuple": "visit_tuple_",
    "proj": "visit_tuple_getitem_",
    "if": "visit_if_",
    "func": "visit_function_",
    "block": "visit_seq_expr_",
}


class ExprVisitor:
    """A read-only walk over a function (TVM's ``PyExprVisitor``).

    ``visit_function(func)`` visits the parameters, then the body with the engine's walker, in
    evaluation order: every node goes through ``visit_expr``, which dispatches on its kind to
    ``visit_var_``, ``visit_global_var_``, ``visit_constant_``, ``visit_call_`` (operator
    calls and applications of globals or function values), ``visit_tuple_``,
    ``visit_tuple_getitem_``, ``visit_if_``, ``visit_function_`` (nested functions) and
    ``visit_seq_expr_`` (blocks); ``visit_binding(var, value)`` is called after each
    binding's value. ``visit_expr`` is memoised: each node's hook runs once, however often the
    node is used (a variable at its binding or parameter, not at every use). The walker visits
    a compound node's hook before its operands and then walks the operands itself, so an
    override need not call ``super()`` for the walk to go on; calling ``self.visit_expr`` on
    an operand early is allowed (it is not visited again).
    """

    _visited: Set[Expr]

    def visit_function(self, func: Function) -> None:
        """Visits ``func``: its parameters, then its body."""
        self._visited = set()
        for p in func.params:
            self.visit_expr(p)
        _passel.walk_expr(func.body, self)

    def visit_expr(self, expr: Expr) -> None:
        """Dispatches ``expr`` to its ``visit_*_`` hook, once per node."""
        visited = self.__dict__.setdefault("_visited", set())
        if expr in visited:
            return
        visited.add(expr)
        getattr(self, _HOOKS[expr.kind])(expr)

    def visit_binding(self, var: Expr, value: Expr) -> None:
        """``let var = value`` (``value`` was visited): visits the variable."""
        self.visit_expr(var)

    def visit_var_(self, var: Expr) -> None:
        """A variable (a parameter, a bound variable, a nested function's parameter)."""

    def visit_global_var_(self, gv: Expr) -> None:
        """A reference to a global function."""

    def visit_constant_(self, const: Expr) -> None:
        """A constant (``const_value(const)`` is its numpy value)."""

    def visit_call_(self, call: Expr) -> None:
        """An operator call (``call.op``) or an application (``call.callee``)."""

    def visit_tuple_(self, tup: Expr) -> None:
        """A tuple."""

    def visit_tuple_getitem_(self, proj: Expr) -> None:
        """A tuple projection ``proj.tuple.index``."""

    def visit_if_(self, ite: Expr) -> None:
        """``if (cond) { then_ } else { else_ }``; both branches are walked."""

    def visit_function_(self, fn: Expr) -> None:
        """A nested function: visits its parameters (its body is walked next)."""
        for p in fn.params:
            self.visit_expr(p)

    def visit_seq_expr_(self, block: Expr) -> None:
        """A block of bindings and its result."""


class ExprMutator:
    """A rewrite of a function (TVM's ``PyExprMutator``), run by the engine's rewriting layer.

    ``visit_function(func)`` rewrites every node of ``func`` (nested functions and ``if``
    branches included), operands before their users. For each node, ``visit_expr(node)``
    dispatches to the hook for its kind (the same names as ``ExprVisitor``), which returns the
    node's replacement as a ``Value``:

    - ``self.visit_expr(operand)``: the rewritten value of an operand (memoised: operands are
      rewritten before their users, so this never rewrites twice);
    - ``self.visit_expr_post_order(node)``: the node rebuilt over its rewritten operands (what
      every hook returns by default);
    - a value built with ``self.builder`` (``call``, ``apply``, ``tuple``, ``proj``, ``if_``,
      ``global_ref``, ``const``) over such values.

    Returning another value for a variable substitutes every use of it (its binding is
    dropped). ``visit_binding(var, value)`` returning False drops a binding. A hook may look at
    the input freely (``node.args[0].op``…). When every hook returned its default, the result
    is ``func`` itself (the same object), so an unchanged function costs passes and sessions
    nothing; the output is checked by the verifier. An exception raised by a hook propagates
    as itself.
    """

    builder: RewriteBuilder

    def visit_function(self, func: Function) -> Function:
        """Rewrites ``func`` through the hooks; returns it unchanged when nothing changed."""
        self.builder = RewriteBuilder()
        return _passel.mutate_function(func, self, self.builder)

    def visit_expr(self, expr: Expr) -> Value:
        """The rewritten value of ``expr``: memoised, or dispatched to its hook."""
        done = self.builder.lookup(expr)
        if done is not None:
            return done
        result: Value = getattr(self, _HOOKS[expr.kind])(expr)
        return result

    def visit_expr_post_order(self, expr: Expr) -> Value:
        """``expr`` rebuilt over its rewritten operands (the default of every hook)."""
        return self.builder.post_order(expr)

    def visit_binding(self, var: Expr, value: Expr) -> bool:
        """Whether ``let var = value`` stays (default: yes)."""
        return True

    def visit_var_(self, var: Expr) -> Value:
        return self.visit_expr_post_order(var)

    def visit_global_var_(self, gv: Expr) -> Value:
        return self.visit_expr_post_order(gv)

    def visit_constant_(self, const: Expr) -> Value:
        return self.visit_expr_post_order(const)

    def visit_call_(self, call: Expr) -> Value:
        return self.visit_expr_post_order(call)

    def visit_tuple_(self, tup: Expr) -> Value:
        return self.visit_expr_post_order(tup)

    def visit_tuple_getitem_(self, proj: Expr) -> Value:
        return self.visit_expr_post_order(proj)

    def visit_if_(self, ite: Expr) -> Value:
        return self.visit_expr_post_order(ite)

    def visit_function_(self, fn: Expr) -> Value:
        return self.visit_expr_post_order(fn)

    def visit_seq_expr_(self, block: Expr) -> Value:
        return self.visit_expr_post_order(block)
