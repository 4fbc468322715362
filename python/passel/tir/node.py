"""Loop-level node objects with TVM's names (``tvm.tir.For``, ``tvm.tir.Add``, …).

Every node is an immutable value. Its constructor arguments (``_args``) are its fields; the
fields in ``_kids`` hold child nodes (a node, a list of nodes, or None), which is what the
generic walks of ``stmt_functor`` enter. Binders (a loop's ``loop_var``, a ``LetStmt``'s
``var``) and buffers are fields but not children, as in TVM's visitors.

Types are TVM's spellings: ``"float32"``, ``"int64"``, ``"bool"``, ``"float32x4"``.
"""

from __future__ import annotations

import enum
from typing import Any, ClassVar, List, Optional, Sequence, Tuple, Union

__all__ = [
    "Node",
    "PrimExpr",
    "Stmt",
    "Var",
    "Buffer",
    "decl_buffer",
    "const",
]


class Node:
    """A loop-level node: a ``PrimExpr`` or a ``Stmt``."""

    _args: ClassVar[Tuple[str, ...]] = ()
    _kids: ClassVar[Tuple[str, ...]] = ()
    # The fields of `_kids` that hold statements (the others hold expressions).
    _stmt_kids: ClassVar[Tuple[str, ...]] = ()
    _type_key: ClassVar[str] = "tir.Node"

    def _children(self) -> List["Node"]:
        return [c for _, c in self._child_fields()]

    def _child_fields(self) -> List[Tuple[str, "Node"]]:
        """``(field, child)`` for every child, in order (None fields have none)."""
        out: List[Tuple[str, Node]] = []
        for f in self._kids:
            v = getattr(self, f)
            if isinstance(v, (list, tuple)):
                out.extend((f, c) for c in v)
            elif v is not None:
                out.append((f, v))
        return out

    def _rebuild(self, kids: Sequence["Node"]) -> "Node":
        """A copy of this node with its children replaced by ``kids`` (in ``_children``'s order)."""
        it = iter(kids)
        args: List[Any] = []
        for f in self._args:
            v = getattr(self, f)
            if f in self._kids:
                if isinstance(v, (list, tuple)):
                    v = [next(it) for _ in v]
                elif v is not None:
                    v = next(it)
            args.append(v)
        return type(self)(*args)

    def __repr__(self) -> str:
        fields = ", ".join(f"{f}={getattr(self, f)!r}" for f in self._args)
        return f"{type(self).__name__}({fields})"


def _lanes(dtype: str) -> int:
    base, sep, lanes = dtype.rpartition("x")
    if sep and base and lanes.isdigit():
        return int(lanes)
    return 1


def _elem(dtype: str) -> str:
    base, sep, lanes = dtype.rpartition("x")
    if sep and base and lanes.isdigit():
        return base
    return dtype


def _with_lanes(dtype: str, lanes: int) -> str:
    return _elem(dtype) if lanes == 1 else f"{_elem(dtype)}x{lanes}"


_INT_DTYPES = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "i8", "i16", "i32", "i64",
               "u8", "u16", "u32", "u64", "bool"}


def const(value: Union[int, float, bool], dtype: str = "int32") -> "PrimExpr":
    """An immediate of ``dtype`` (TVM's ``tir.const``)."""
    if _elem(dtype) in _INT_DTYPES:
        if isinstance(value, float):
            raise TypeError(f"a float immediate {value} of integer type {dtype}")
        return IntImm(dtype, int(value))
    return FloatImm(dtype, float(value))


def _expr(value: Any, like: "PrimExpr") -> "PrimExpr":
    """``value`` as a PrimExpr: a Python number becomes an immediate of ``like``'s type."""
    if isinstance(value, PrimExpr):
        return value
    if isinstance(value, (bool, int, float)):
        return const(value, _elem(like.dtype))
    raise TypeError(f"expected a PrimExpr or a number, got {type(value).__name__}")


class PrimExpr(Node):
    """A scalar or vector expression. ``dtype`` is its type. Arithmetic builds nodes
    (``a + 1``, ``i // 8``: floor division, ``i % 8``: floor modulo, ``a < b``); Python
    numbers take the other operand's type. ``==`` is identity (use ``EQ(a, b)``)."""

    dtype: str

    def __add__(self, o: Any) -> "PrimExpr":
        return Add(self, _expr(o, self))

    def __radd__(self, o: Any) -> "PrimExpr":
        return Add(_expr(o, self), self)

    def __sub__(self, o: Any) -> "PrimExpr":
        return Sub(self, _expr(o, self))

    def __rsub__(self, o: Any) -> "PrimExpr":
        return Sub(_expr(o, self), self)

    def __mul__(self, o: Any) -> "PrimExpr":
        return Mul(self, _expr(o, self))

    def __rmul__(self, o: Any) -> "PrimExpr":
        return Mul(_expr(o, self), self)

    def __floordiv__(self, o: Any) -> "PrimExpr":
        return FloorDiv(self, _expr(o, self))

    def __rfloordiv__(self, o: Any) -> "PrimExpr":
        return FloorDiv(_expr(o, self), self)

    def __mod__(self, o: Any) -> "PrimExpr":
        return FloorMod(self, _expr(o, self))

    def __rmod__(self, o: Any) -> "PrimExpr":
        return FloorMod(_expr(o, self), self)

    def __truediv__(self, o: Any) -> "PrimExpr":
        return Div(self, _expr(o, self))

    def __neg__(self) -> "PrimExpr":
        return Sub(_expr(0, self), self)

    def __lt__(self, o: Any) -> "PrimExpr":
        return LT(self, _expr(o, self))

    def __le__(self, o: Any) -> "PrimExpr":
        return LE(self, _expr(o, self))

    def __gt__(self, o: Any) -> "PrimExpr":
        return GT(self, _expr(o, self))

    def __ge__(self, o: Any) -> "PrimExpr":
        return GE(self, _expr(o, self))


class Stmt(Node):
    """A statement."""


# ---- leaves ----


class Var(PrimExpr):
    """A scalar variable (TVM's ``tir.Var``; ``te.var``). One object is one variable."""

    _args = ("name", "dtype")
    _type_key = "tir.Var"

    def __init__(self, name: str, dtype: str = "int32") -> None:
        if _lanes(dtype) != 1:
            raise ValueError(f"variable {name!r} of vector type {dtype}: variables are scalars")
        self.name = name
        self.dtype = dtype

    def __repr__(self) -> str:
        return f"Var({self.name!r}, {self.dtype!r})"


class IntImm(PrimExpr):
    """An integer (or ``bool``) immediate."""

    _args = ("dtype", "value")
    _type_key = "tir.IntImm"

    def __init__(self, dtype: str, value: int) -> None:
        self.dtype = dtype
        self.value = int(value)


class FloatImm(PrimExpr):
    """A float immediate."""

    _args = ("dtype", "value")
    _type_key = "tir.FloatImm"

    def __init__(self, dtype: str, value: float) -> None:
        self.dtype = dtype
        self.value = float(value)


class Buffer:
    """A buffer (TVM's ``tir.Buffer``): ``name``, ``dtype``, ``shape``, ``strides`` (empty:
    compact row-major), ``elem_offset``, ``scope``. One object is one buffer. ``A[i, j]`` is
    a ``BufferLoad``."""

    def __init__(
        self,
        name: str,
        dtype: str,
        shape: Sequence[int],
        strides: Sequence[int] = (),
        elem_offset: int = 0,
        scope: str = "global",
    ) -> None:
        self.name = name
        self.dtype = dtype
        self.shape: Tuple[int, ...] = tuple(int(d) for d in shape)
        self.strides: Tuple[int, ...] = tuple(int(s) for s in strides)
        self.elem_offset = int(elem_offset)
        self.scope = scope

    def __getitem__(self, indices: Any) -> "BufferLoad":
        idx = list(indices) if isinstance(indices, tuple) else [indices]
        return BufferLoad(self, [_index(i) for i in idx])

    def __repr__(self) -> str:
        return f"Buffer({self.name!r}, {self.dtype!r}, {list(self.shape)!r})"


def _index(i: Any) -> PrimExpr:
    if isinstance(i, PrimExpr):
        return i
    if isinstance(i, int) and not isinstance(i, bool):
        return IntImm("int64", i)
    raise TypeError(f"a buffer index must be a PrimExpr or an int, got {type(i).__name__}")


def decl_buffer(
    shape: Sequence[int],
    dtype: str = "float32",
    name: str = "buffer",
    strides: Sequence[int] = (),
    elem_offset: int = 0,
    scope: str = "global",
) -> Buffer:
    """A new buffer (TVM's ``tir.decl_buffer``)."""
    return Buffer(name, dtype, shape, strides, elem_offset, scope)


# ---- operators ----


class _Binary(PrimExpr):
    _args = ("a", "b")
    _kids = ("a", "b")
    op: ClassVar[str] = ""

    def __init__(self, a: PrimExpr, b: PrimExpr) -> None:
        self.a = a
        self.b = b
        self.dtype = self._result(a)

    def _result(self, a: PrimExpr) -> str:
        return a.dtype


class _Compare(_Binary):
    def _result(self, a: PrimExpr) -> str:
        return _with_lanes("bool", _lanes(a.dtype))


class Add(_Binary):
    """``a + b``."""

    op = "add"
    _type_key = "tir.Add"


class Sub(_Binary):
    """``a - b``."""

    op = "sub"
    _type_key = "tir.Sub"


class Mul(_Binary):
    """``a * b``."""

    op = "mul"
    _type_key = "tir.Mul"


class Div(_Binary):
    """``a / b`` (integers: truncating, TVM's ``Div``)."""

    op = "div"
    _type_key = "tir.Div"


class Mod(_Binary):
    """``a % b`` truncating (TVM's ``Mod``)."""

    op = "mod"
    _type_key = "tir.Mod"


class FloorDiv(_Binary):
    """Division rounding toward negative infinity."""

    op = "floordiv"
    _type_key = "tir.FloorDiv"


class FloorMod(_Binary):
    """Modulo of ``FloorDiv``."""

    op = "floormod"
    _type_key = "tir.FloorMod"


class Min(_Binary):
    """``min(a, b)``."""

    op = "min"
    _type_key = "tir.Min"


class Max(_Binary):
    """``max(a, b)``."""

    op = "max"
    _type_key = "tir.Max"


class EQ(_Compare):
    """``a == b``."""

    op = "eq"
    _type_key = "tir.EQ"


class NE(_Compare):
    """``a != b``."""

    op = "ne"
    _type_key = "tir.NE"


class LT(_Compare):
    """``a < b``."""

    op = "lt"
    _type_key = "tir.LT"


class LE(_Compare):
    """``a <= b``."""

    op = "le"
    _type_key = "tir.LE"


class GT(_Compare):
    """``a > b``."""

    op = "gt"
    _type_key = "tir.GT"


class GE(_Compare):
    """``a >= b``."""

    op = "ge"
    _type_key = "tir.GE"


class And(_Binary):
    """Logical and of ``bool``s."""

    op = "and"
    _type_key = "tir.And"


class Or(_Binary):
    """Logical or of ``bool``s."""

    op = "or"
    _type_key = "tir.Or"


BINARY = {c.op: c for c in (Add, Sub, Mul, Div, Mod, FloorDiv, FloorMod, Min, Max, EQ, NE, LT, LE, GT, GE, And, Or)}


class Not(PrimExpr):
    """Logical negation of a ``bool``."""

    _args = ("a",)
    _kids = ("a",)
    _type_key = "tir.Not"

    def __init__(self, a: PrimExpr) -> None:
        self.a = a
        self.dtype = a.dtype


class Select(PrimExpr):
    """``select(condition, true_value, false_value)``: both arms are evaluated."""

    _args = ("condition", "true_value", "false_value")
    _kids = ("condition", "true_value", "false_value")
    _type_key = "tir.Select"

    def __init__(self, condition: PrimExpr, true_value: PrimExpr, false_value: PrimExpr) -> None:
        self.condition = condition
        self.true_value = true_value
        self.false_value = false_value
        self.dtype = true_value.dtype


class Cast(PrimExpr):
    """A conversion of ``value`` to ``dtype`` (lanes stay)."""

    _args = ("dtype", "value")
    _kids = ("value",)
    _type_key = "tir.Cast"

    def __init__(self, dtype: str, value: PrimExpr) -> None:
        self.dtype = _with_lanes(dtype, _lanes(value.dtype))
        self.value = value


class BufferLoad(PrimExpr):
    """``buffer[indices]`` (a vector load with a ``Ramp`` index)."""

    _args = ("buffer", "indices")
    _kids = ("indices",)
    _type_key = "tir.BufferLoad"

    def __init__(self, buffer: Buffer, indices: Sequence[PrimExpr]) -> None:
        self.buffer = buffer
        self.indices: List[PrimExpr] = list(indices)
        lanes = max((_lanes(i.dtype) for i in self.indices), default=1)
        self.dtype = _with_lanes(buffer.dtype, lanes)


class Call(PrimExpr):
    """An intrinsic call: ``op`` is its name (``"exp"``, ``"sqrt"``, ``"pow"``, …)."""

    _args = ("dtype", "op", "args")
    _kids = ("args",)
    _type_key = "tir.Call"

    def __init__(self, dtype: str, op: str, args: Sequence[PrimExpr]) -> None:
        self.dtype = dtype
        self.op = op
        self.args: List[PrimExpr] = list(args)


class Ramp(PrimExpr):
    """``base + k * stride`` for lanes ``k = 0 .. lanes-1``."""

    _args = ("base", "stride", "lanes")
    _kids = ("base", "stride")
    _type_key = "tir.Ramp"

    def __init__(self, base: PrimExpr, stride: PrimExpr, lanes: int) -> None:
        self.base = base
        self.stride = stride
        self.lanes = int(lanes)
        self.dtype = _with_lanes(base.dtype, self.lanes)


class Broadcast(PrimExpr):
    """``value`` in every one of ``lanes`` lanes."""

    _args = ("value", "lanes")
    _kids = ("value",)
    _type_key = "tir.Broadcast"

    def __init__(self, value: PrimExpr, lanes: int) -> None:
        self.value = value
        self.lanes = int(lanes)
        self.dtype = _with_lanes(value.dtype, self.lanes)


class Let(PrimExpr):
    """``let var = value in body``."""

    _args = ("var", "value", "body")
    _kids = ("value", "body")
    _type_key = "tir.Let"

    def __init__(self, var: Var, value: PrimExpr, body: PrimExpr) -> None:
        self.var = var
        self.value = value
        self.body = body
        self.dtype = body.dtype


# ---- statements ----


class ForKind(str, enum.Enum):
    """How a loop's iterations run (TVM's ``tir.ForKind``)."""

    SERIAL = "serial"
    PARALLEL = "parallel"
    VECTORIZED = "vectorized"
    UNROLLED = "unroll"


class For(Stmt):
    """``for loop_var in kind(min, extent) { body }``."""

    _args = ("loop_var", "min", "extent", "kind", "body")
    _kids = ("min", "extent", "body")
    _type_key = "tir.For"
    _stmt_kids = ("body",)

    def __init__(
        self, loop_var: Var, min: Any, extent: Any, kind: Union[ForKind, str], body: Stmt
    ) -> None:
        self.loop_var = loop_var
        self.min = _expr(min, loop_var)
        self.extent = _expr(extent, loop_var)
        self.kind = ForKind(kind)
        self.body = body


class BufferStore(Stmt):
    """``buffer[indices] = value``."""

    _args = ("buffer", "value", "indices")
    _kids = ("value", "indices")
    _type_key = "tir.BufferStore"

    def __init__(self, buffer: Buffer, value: Any, indices: Sequence[Any]) -> None:
        self.buffer = buffer
        self.indices: List[PrimExpr] = [_index(i) for i in indices]
        self.value = value if isinstance(value, PrimExpr) else const(value, buffer.dtype)


class LetStmt(Stmt):
    """``let var = value`` over ``body``."""

    _args = ("var", "value", "body")
    _kids = ("value", "body")
    _type_key = "tir.LetStmt"
    _stmt_kids = ("body",)

    def __init__(self, var: Var, value: PrimExpr, body: Stmt) -> None:
        self.var = var
        self.value = value
        self.body = body


class IfThenElse(Stmt):
    """``if (condition) { then_case } else { else_case }`` (``else_case`` may be None)."""

    _args = ("condition", "then_case", "else_case")
    _kids = ("condition", "then_case", "else_case")
    _type_key = "tir.IfThenElse"
    _stmt_kids = ("then_case", "else_case")

    def __init__(self, condition: PrimExpr, then_case: Stmt, else_case: Optional[Stmt] = None) -> None:
        self.condition = condition
        self.then_case = then_case
        self.else_case = else_case


class SeqStmt(Stmt):
    """Statements in order."""

    _args = ("seq",)
    _kids = ("seq",)
    _type_key = "tir.SeqStmt"
    _stmt_kids = ("seq",)

    def __init__(self, seq: Sequence[Stmt]) -> None:
        self.seq: List[Stmt] = list(seq)

    def __len__(self) -> int:
        return len(self.seq)

    def __getitem__(self, i: int) -> Stmt:
        return self.seq[i]


class AllocBuffer(Stmt):
    """A fresh, zero-filled ``buffer`` visible in ``body`` (TVM's ``Allocate`` + ``DeclBuffer``;
    ``.pir``'s ``alloc``)."""

    _args = ("buffer", "body")
    _kids = ("body",)
    _type_key = "tir.AllocBuffer"
    _stmt_kids = ("body",)

    def __init__(self, buffer: Buffer, body: Stmt) -> None:
        self.buffer = buffer
        self.body = body


class DeclBuffer(Stmt):
    """``buffer``, a view of ``data``'s storage, visible in ``body`` (``.pir``'s ``decl``)."""

    _args = ("buffer", "data", "body")
    _kids = ("body",)
    _type_key = "tir.DeclBuffer"
    _stmt_kids = ("body",)

    def __init__(self, buffer: Buffer, data: Buffer, body: Stmt) -> None:
        self.buffer = buffer
        self.data = data
        self.body = body


class Evaluate(Stmt):
    """Evaluates ``value`` and drops it."""

    _args = ("value",)
    _kids = ("value",)
    _type_key = "tir.Evaluate"

    def __init__(self, value: PrimExpr) -> None:
        self.value = value


class AttrStmt(Stmt):
    """An annotation ``attr_key = value`` of the region ``body`` (e.g.
    ``"pragma_unroll_explicit"``)."""

    _args = ("attr_key", "value", "body")
    _kids = ("value", "body")
    _type_key = "tir.AttrStmt"
    _stmt_kids = ("body",)

    def __init__(self, attr_key: str, value: PrimExpr, body: Stmt) -> None:
        self.attr_key = attr_key
        self.value = value
        self.body = body
