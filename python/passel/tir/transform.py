"""Loop-level passes (TVM's ``tvm.tir.transform``): the ``prim_func_pass`` decorator, the
``PrimFuncPass`` kind and the registered tir passes ``Simplify()``, ``RemoveNoOp()`` and
``UnrollLoop()`` (configured by the ``tir.*`` config keys, see
``PassContext.list_configs()``)."""

from __future__ import annotations

from ..transform import PrimFuncPass, get_pass, prim_func_pass

__all__ = ["PrimFuncPass", "prim_func_pass", "Simplify", "RemoveNoOp", "UnrollLoop"]


def Simplify() -> PrimFuncPass:
    """TVM's ``tir.transform.Simplify``: constant folding, canonical affine index forms,
    conditions decided by loop ranges."""
    return _registered("Simplify")


def RemoveNoOp() -> PrimFuncPass:
    """TVM's ``tir.transform.RemoveNoOp``: removes statements without effect."""
    return _registered("RemoveNoOp")


def UnrollLoop() -> PrimFuncPass:
    """TVM's ``tir.transform.UnrollLoop``, configured by ``tir.UnrollLoop.*`` keys."""
    return _registered("UnrollLoop")


def _registered(name: str) -> PrimFuncPass:
    p = get_pass(name)
    assert isinstance(p, PrimFuncPass), f"{name} is registered as a {type(p).__name__}"
    return p
