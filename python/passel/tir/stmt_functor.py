"""TVM's ``tir.stmt_functor`` helpers over node objects: ``post_order_visit``, ``ir_transform``
and ``substitute``. Each walks with an explicit stack (no recursion on input depth)."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, TypeVar, Union

from .node import Node, PrimExpr, Var, const

__all__ = ["post_order_visit", "ir_transform", "substitute"]

_N = TypeVar("_N", bound=Node)


def post_order_visit(node: Node, fvisit: Callable[[Node], Any]) -> None:
    """Calls ``fvisit`` on every node of the tree under ``node`` (statements and expressions,
    ``node`` included), children before their parent (TVM's ``post_order_visit``). A node
    object reached twice is visited twice."""
    stack: List[Tuple[Node, bool]] = [(node, False)]
    while stack:
        x, ready = stack.pop()
        if ready:
            fvisit(x)
            continue
        stack.append((x, True))
        for k in reversed(x._children()):
            stack.append((k, False))


def _transform(
    root: Node,
    preorder: Optional[Callable[[Node], Optional[Node]]],
    postorder: Optional[Callable[[Node], Optional[Node]]],
) -> Node:
    out: List[Node] = []
    stack: List[Tuple[Node, bool]] = [(root, False)]
    while stack:
        x, ready = stack.pop()
        if not ready:
            if preorder is not None:
                r = preorder(x)
                if r is not None:
                    out.append(r)
                    continue
            stack.append((x, True))
            for k in reversed(x._children()):
                stack.append((k, False))
            continue
        old = x._children()
        new = out[len(out) - len(old) :] if old else []
        if old:
            del out[len(out) - len(old) :]
        y = x._rebuild(new) if any(a is not b for a, b in zip(old, new)) else x
        if postorder is not None:
            r = postorder(y)
            if r is not None:
                y = r
        out.append(y)
    return out[0]


def ir_transform(
    stmt: _N,
    preorder: Optional[Callable[[Node], Optional[Node]]],
    postorder: Optional[Callable[[Node], Optional[Node]]],
    only_enable: Optional[Sequence[str]] = None,
) -> _N:
    """Rewrites the tree under ``stmt`` (TVM's ``ir_transform``): ``preorder(node)`` is called
    on the way down — a non-None result replaces the node and its subtree is not entered;
    otherwise the children are rewritten, the node rebuilt if one changed, and
    ``postorder(node)`` called on it — a non-None result replaces it. ``only_enable`` limits
    both callbacks to nodes of those type keys (``["tir.For", "tir.BufferStore"]``). Nodes
    that did not change are returned as they were (the same objects)."""
    keys = None if only_enable is None else set(only_enable)

    def gate(f: Optional[Callable[[Node], Optional[Node]]]) -> Optional[Callable[[Node], Optional[Node]]]:
        if f is None or keys is None:
            return f
        g = f
        return lambda x: g(x) if x._type_key in keys else None

    return _transform(stmt, gate(preorder), gate(postorder))  # type: ignore[return-value]


def substitute(node: _N, vmap: Dict[Var, Union[PrimExpr, int]]) -> _N:
    """``node`` with every use of a variable of ``vmap`` replaced by its value (TVM's
    ``substitute``; a Python int becomes an immediate of the variable's type). Binders are not
    replaced."""
    table: Dict[int, PrimExpr] = {}
    for v, e in vmap.items():
        table[id(v)] = e if isinstance(e, PrimExpr) else const(e, v.dtype)

    def post(x: Node) -> Optional[Node]:
        return table.get(id(x)) if isinstance(x, Var) else None

    return _transform(node, None, post)  # type: ignore[return-value]


