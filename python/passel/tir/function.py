"""``PrimFunc`` (TVM's ``tir.PrimFunc``) over the engine's, and the conversions between its
arenas (the native tables, see ``python/src/tir.rs``) and node objects."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from .. import _passel
from . import node as n
from .node import Buffer, Node, PrimExpr, Stmt, Var

__all__ = ["PrimFunc", "parse", "eval"]

Param = Union[Var, Buffer]


class PrimFunc:
    """A loop-level function: ``params`` (``Var``s and ``Buffer``s), a statement ``body`` and
    ``attrs`` (TVM's ``tir.PrimFunc``). Immutable; ``with_body`` makes a changed copy.

    ``PrimFunc(params, body, attrs=None)`` builds one from nodes (type-checked and verified:
    ``ValueError`` otherwise); ``PrimFunc.from_text`` parses ``.pir`` text; a module gives its
    PrimFuncs with ``mod[name]`` and ``mod.prim_functions``.
    """

    _native: Any

    def __init__(self, params: Sequence[Param], body: Stmt, attrs: Optional[Dict[str, Any]] = None) -> None:
        params = list(params)
        self._native = _build(params, body, attrs=dict(attrs or {}))
        self._tree: Optional[Tuple[List[Param], Stmt]] = (params, body)

    @classmethod
    def _wrap(cls, native: Any) -> "PrimFunc":
        f = cls.__new__(cls)
        f._native = native
        f._tree = None
        return f

    @staticmethod
    def from_text(text: str, name: Optional[str] = None) -> "PrimFunc":
        """The PrimFunc ``name`` of ``.pir`` text (parsed by the module parser: errors are
        ``passel.ParseError`` with ``line:col``); without ``name``, the text's only PrimFunc."""
        from ..ir import Module

        mod = Module.parse(text)
        prims = mod.prim_functions
        if name is None:
            if len(prims) != 1:
                raise ValueError(f"the text holds {len(prims)} PrimFuncs; name the one to take")
            return next(iter(prims.values()))
        name = name.lstrip("@")
        if name not in prims:
            raise KeyError(f"no PrimFunc @{name} in the text")
        return prims[name]

    def _nodes(self) -> Tuple[List[Param], Stmt]:
        if self._tree is None:
            self._tree = _from_tables(self._native.tables())
        return self._tree

    @property
    def params(self) -> List[Param]:
        """The parameters: ``Buffer``s and scalar ``Var``s, in order."""
        return list(self._nodes()[0])

    @property
    def buffers(self) -> List[Buffer]:
        """The buffer parameters, in order."""
        return [p for p in self._nodes()[0] if isinstance(p, Buffer)]

    @property
    def buffer_map(self) -> Dict[str, Buffer]:
        """The buffer parameters by name."""
        return {b.name: b for b in self.buffers}

    @property
    def body(self) -> Stmt:
        """The body statement."""
        return self._nodes()[1]

    @property
    def attrs(self) -> Dict[str, Any]:
        """The function attributes (a new dict each call)."""
        return dict(self._native.attrs())

    def with_body(self, body: Stmt) -> "PrimFunc":
        """A copy with ``body`` (TVM's ``PrimFunc.with_body``): same parameters and attributes.
        ``body`` may use this function's parameters and nodes of its body."""
        params = self._nodes()[0]
        out = PrimFunc._wrap(_build(params, body, attrs_of=self._native))
        out._tree = (list(params), body)
        return out

    def with_attrs(self, attrs: Dict[str, Any]) -> "PrimFunc":
        """A copy with the attributes ``attrs`` (replacing all of them)."""
        params, body = self._nodes()
        out = PrimFunc._wrap(_build(params, body, attrs=dict(attrs)))
        out._tree = (list(params), body)
        return out

    def script(self, name: str = "main") -> str:
        """The function as ``.pir`` text (``prim @name(…) { … }``)."""
        return str(self._native.script(name))

    def __str__(self) -> str:
        return self.script()

    def __repr__(self) -> str:
        return f"<passel.tir.PrimFunc with {len(self.params)} params>"

    def same_as(self, other: "PrimFunc") -> bool:
        """Whether both are the very same engine function (a pass that changed nothing)."""
        return bool(self._native.same_as(other._native))

    def structural_equal(self, other: "PrimFunc") -> bool:
        """Structural equality (names of variables and buffers do not matter)."""
        return bool(self._native.structural_equal(other._native))

    def structural_hash(self) -> int:
        """A hash consistent with ``structural_equal``."""
        return int(self._native.structural_hash())

    def verify(self, name: str = "main") -> None:
        """Runs the verifier; ``ValueError`` listing its errors."""
        errors = self._native.verify(name)
        if errors:
            raise ValueError("\n".join(errors))


def parse(text: str, name: Optional[str] = None) -> PrimFunc:
    """``PrimFunc.from_text``."""
    return PrimFunc.from_text(text, name)


def eval(func: PrimFunc, *args: Any, name: str = "main") -> Union[Any, List[Any]]:
    """Runs ``func`` in the interpreter: ``args`` (numpy arrays) bind its first buffer
    parameters; the remaining buffer parameters are allocated zero-filled and returned
    (destination passing): one array, or a list when there are several. Raises
    ``passel.PassError`` when the run fails (an access out of bounds, a division by zero)."""
    import numpy as np

    from ..ir import _from_raw

    raw = []
    for a in args:
        arr = np.asarray(a)
        arr = np.asarray(arr, dtype=arr.dtype.newbyteorder("<"), order="C")
        raw.append((arr.dtype.name, list(arr.shape), arr.tobytes()))
    out = [_from_raw(r) for r in _passel.eval_prim(func._native, name, raw)]
    return out[0] if len(out) == 1 else out


# ---- native tables <-> nodes ----


def _from_tables(tables: Any) -> Tuple[List[Param], Stmt]:
    params_t, vars_t, bufs_t, exprs_t, stmts_t, body = tables
    vars_ = [Var(name, ty) for name, ty in vars_t]
    bufs = [Buffer(name, dt, shape, strides, off, scope) for name, dt, shape, strides, off, scope in bufs_t]
    exprs: List[PrimExpr] = []
    for e in exprs_t:
        tag, ty = e[0], e[1]
        x: PrimExpr
        if tag == "int":
            x = n.IntImm(ty, e[2])
        elif tag == "float":
            x = n.FloatImm(ty, e[2])
        elif tag == "var":
            x = vars_[e[2]]
        elif tag == "bin":
            x = n.BINARY[e[2]](exprs[e[3]], exprs[e[4]])
        elif tag == "not":
            x = n.Not(exprs[e[2]])
        elif tag == "select":
            x = n.Select(exprs[e[2]], exprs[e[3]], exprs[e[4]])
        elif tag == "cast":
            x = n.Cast(ty, exprs[e[2]])
        elif tag == "load":
            x = n.BufferLoad(bufs[e[2]], [exprs[i] for i in e[3]])
        elif tag == "call":
            x = n.Call(ty, e[2], [exprs[i] for i in e[3]])
        elif tag == "ramp":
            x = n.Ramp(exprs[e[2]], exprs[e[3]], n._lanes(ty))
        elif tag == "broadcast":
            x = n.Broadcast(exprs[e[2]], n._lanes(ty))
        elif tag == "let":
            x = n.Let(vars_[e[2]], exprs[e[3]], exprs[e[4]])
        else:
            raise ValueError(f"unknown expression kind {tag!r}")
        exprs.append(x)
    stmts: List[Stmt] = []
    for s in stmts_t:
        tag = s[0]
        st: Stmt
        if tag == "for":
            st = n.For(vars_[s[1]], exprs[s[2]], exprs[s[3]], s[4], stmts[s[5]])
        elif tag == "store":
            st = n.BufferStore(bufs[s[1]], exprs[s[3]], [exprs[i] for i in s[2]])
        elif tag == "let":
            st = n.LetStmt(vars_[s[1]], exprs[s[2]], stmts[s[3]])
        elif tag == "if":
            st = n.IfThenElse(exprs[s[1]], stmts[s[2]], None if s[3] is None else stmts[s[3]])
        elif tag == "seq":
            st = n.SeqStmt([stmts[i] for i in s[1]])
        elif tag == "alloc":
            st = n.AllocBuffer(bufs[s[1]], stmts[s[2]])
        elif tag == "decl":
            st = n.DeclBuffer(bufs[s[1]], bufs[s[2]], stmts[s[3]])
        elif tag == "eval":
            st = n.Evaluate(exprs[s[1]])
        elif tag == "attr":
            st = n.AttrStmt(s[1], exprs[s[2]], stmts[s[3]])
        else:
            raise ValueError(f"unknown statement kind {tag!r}")
        stmts.append(st)
    params: List[Param] = [vars_[i] if kind == "var" else bufs[i] for kind, i in params_t]
    return params, stmts[body]


class _Tables:
    """Flattens node trees into the native tables, post-order, without recursion."""

    def __init__(self) -> None:
        self.vars: List[Tuple[str, str]] = []
        self.bufs: List[Tuple[str, str, List[int], List[int], int, str]] = []
        self.exprs: List[Tuple[Any, ...]] = []
        self.stmts: List[Tuple[Any, ...]] = []
        self.var_ids: Dict[int, int] = {}
        self.buf_ids: Dict[int, int] = {}
        self.keep: List[Any] = []  # keeps the keyed objects alive while ids are in use

    def var(self, v: Var) -> int:
        if not isinstance(v, Var):
            raise TypeError(f"expected a Var, got {type(v).__name__}")
        i = self.var_ids.get(id(v))
        if i is None:
            i = self.var_ids[id(v)] = len(self.vars)
            self.vars.append((v.name, v.dtype))
            self.keep.append(v)
        return i

    def buf(self, b: Buffer) -> int:
        if not isinstance(b, Buffer):
            raise TypeError(f"expected a Buffer, got {type(b).__name__}")
        i = self.buf_ids.get(id(b))
        if i is None:
            i = self.buf_ids[id(b)] = len(self.bufs)
            self.bufs.append((b.name, b.dtype, list(b.shape), list(b.strides), b.elem_offset, b.scope))
            self.keep.append(b)
        return i

    def tree(self, root: Node) -> int:
        """Appends ``root``'s tree; returns its index in its table."""
        out: List[int] = []
        stack: List[Tuple[Node, bool]] = [(root, False)]
        while stack:
            node, ready = stack.pop()
            if not isinstance(node, Node):
                raise TypeError(f"expected a tir node, got {type(node).__name__}")
            if not ready:
                stack.append((node, True))
                for field, k in reversed(node._child_fields()):
                    want = Stmt if field in node._stmt_kids else PrimExpr
                    if not isinstance(k, want):
                        raise TypeError(
                            f"{type(node).__name__}.{field} must be a {want.__name__}, got {type(k).__name__}"
                        )
                    stack.append((k, False))
                continue
            count = len(node._children())
            kids = out[len(out) - count :] if count else []
            if count:
                del out[len(out) - count :]
            out.append(self.entry(node, kids))
        return out[0]

    def entry(self, x: Node, k: List[int]) -> int:
        if isinstance(x, PrimExpr):
            t = x.dtype
            e: Tuple[Any, ...]
            if isinstance(x, Var):
                e = ("var", t, self.var(x))
            elif isinstance(x, n.IntImm):
                e = ("int", t, x.value)
            elif isinstance(x, n.FloatImm):
                e = ("float", t, x.value)
            elif isinstance(x, n._Binary):
                e = ("bin", t, x.op, k[0], k[1])
            elif isinstance(x, n.Not):
                e = ("not", t, k[0])
            elif isinstance(x, n.Select):
                e = ("select", t, k[0], k[1], k[2])
            elif isinstance(x, n.Cast):
                e = ("cast", t, k[0])
            elif isinstance(x, n.BufferLoad):
                e = ("load", t, self.buf(x.buffer), k)
            elif isinstance(x, n.Call):
                e = ("call", t, x.op, k)
            elif isinstance(x, n.Ramp):
                e = ("ramp", t, k[0], k[1])
            elif isinstance(x, n.Broadcast):
                e = ("broadcast", t, k[0])
            elif isinstance(x, n.Let):
                e = ("let", t, self.var(x.var), k[0], k[1])
            else:
                raise TypeError(f"unknown expression node {type(x).__name__}")
            self.exprs.append(e)
            return len(self.exprs) - 1
        s: Tuple[Any, ...]
        if isinstance(x, n.For):
            s = ("for", self.var(x.loop_var), k[0], k[1], x.kind.value, k[2])
        elif isinstance(x, n.BufferStore):
            s = ("store", self.buf(x.buffer), k[1:], k[0])
        elif isinstance(x, n.LetStmt):
            s = ("let", self.var(x.var), k[0], k[1])
        elif isinstance(x, n.IfThenElse):
            s = ("if", k[0], k[1], k[2] if x.else_case is not None else None)
        elif isinstance(x, n.SeqStmt):
            s = ("seq", k)
        elif isinstance(x, n.AllocBuffer):
            s = ("alloc", self.buf(x.buffer), k[0])
        elif isinstance(x, n.DeclBuffer):
            s = ("decl", self.buf(x.buffer), self.buf(x.data), k[0])
        elif isinstance(x, n.Evaluate):
            s = ("eval", k[0])
        elif isinstance(x, n.AttrStmt):
            s = ("attr", x.attr_key, k[0], k[1])
        else:
            raise TypeError(f"unknown statement node {type(x).__name__}")
        self.stmts.append(s)
        return len(self.stmts) - 1


def _build(params: Sequence[Param], body: Stmt, attrs: Optional[Dict[str, Any]] = None, attrs_of: Any = None) -> Any:
    if not isinstance(body, Stmt):
        raise TypeError(f"a PrimFunc body is a Stmt, got {type(body).__name__}")
    t = _Tables()
    ps: List[Tuple[str, int]] = []
    for p in params:
        if isinstance(p, Buffer):
            ps.append(("buffer", t.buf(p)))
        elif isinstance(p, Var):
            ps.append(("var", t.var(p)))
        else:
            raise TypeError(f"a PrimFunc parameter is a Var or a Buffer, got {type(p).__name__}")
    root = t.tree(body)
    return _passel.PrimFuncHandle.from_tables(ps, t.vars, t.bufs, t.exprs, t.stmts, root, attrs, attrs_of)
