"""Loop-level passes (TVM's ``tvm.tir.transform``): the ``prim_func_pass`` decorator, the
``PrimFuncPass`` kind and the registered tir passes ``Simplify()``, ``RemoveNoOp()``,
``UnrollLoop()``, ``VectorizeLoop()``, ``LoopPartition()``, ``FlattenBuffer()``,
``StorageRewrite()``, ``CommonSubexprElimTIR()`` and ``NarrowDataType()`` (configured by the
``tir.*`` config keys, see ``PassContext.list_configs()``)."""

from __future__ import annotations

from ..transform import PrimFuncPass, get_pass, prim_func_pass

__all__ = [
    "PrimFuncPass",
    "prim_func_pass",
    "Simplify",
    "RemoveNoOp",
    "UnrollLoop",
    "VectorizeLoop",
    "LoopPartition",
    "FlattenBuffer",
    "StorageRewrite",
    "CommonSubexprElimTIR",
    "NarrowDataType",
]


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


def VectorizeLoop() -> PrimFuncPass:
    """TVM's ``tir.transform.VectorizeLoop``: ``vectorized`` loops of constant extent become
    ``ramp`` / ``broadcast`` vector statements (``tir.disable_vectorize`` serializes them)."""
    return _registered("VectorizeLoop")


def LoopPartition() -> PrimFuncPass:
    """TVM's ``tir.transform.LoopPartition``, configured by ``tir.LoopPartition.*`` keys."""
    return _registered("LoopPartition")


def FlattenBuffer() -> PrimFuncPass:
    """TVM's ``tir.transform.FlattenBuffer``: every buffer access gets one flat index."""
    return _registered("FlattenBuffer")


def StorageRewrite() -> PrimFuncPass:
    """TVM's ``tir.transform.StorageRewrite``: sibling allocations share storage."""
    return _registered("StorageRewrite")


def CommonSubexprElimTIR() -> PrimFuncPass:
    """TVM's ``tir.transform.CommonSubexprElimTIR`` (``tir.disable_cse_tir``,
    ``tir.enable_equiv_terms_in_cse_tir``)."""
    return _registered("CommonSubexprElimTIR")


def NarrowDataType() -> PrimFuncPass:
    """TVM's ``tir.transform.NarrowDataType(32)``: i64 loops whose ranges fit become i32."""
    return _registered("NarrowDataType")


def _registered(name: str) -> PrimFuncPass:
    p = get_pass(name)
    assert isinstance(p, PrimFuncPass), f"{name} is registered as a {type(p).__name__}"
    return p
