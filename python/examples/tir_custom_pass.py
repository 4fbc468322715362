"""TVM's "Writing a Customized Pass" tutorial (``gallery/how_to/extend_tvm/low_level_custom_pass.py``)
ported to passel: a loop-level pass written in Python with ``tir.transform.prim_func_pass``
that splits every loop whose extent is a multiple of 8 into an outer serial loop and an inner
vectorized loop of 8, with TVM's ``post_order_visit``, ``substitute`` and ``ir_transform``.

What differs from TVM: the PrimFunc comes from lowering a graph ``add`` with ``LegalizeOps``
(passel has no ``te.create_schedule`` / ``tvm.lower``), the pass runs as a pass of a
``Sequential`` (TVM's ``tir.add_lower_pass`` config is its lowering pipeline's hook), the new
loop variables take the old one's type (TVM's ``te.var`` defaults to int32, the type of its
loops; passel's are int64), and the list of loops is reset per PrimFunc. The rest is the
tutorial's code. Run: ``python python/examples/tir_custom_pass.py``.
"""

from __future__ import annotations

from typing import List, Optional

import numpy as np

import passel
from passel import ir, tir, transform
from passel.transform import PassContext

GRAPH = """
def @main(%a: Tensor[(128,), f32], %b: Tensor[(128,), f32]) -> Tensor[(128,), f32] {
  add(%a, %b)
}
"""

loops: List[tir.For] = []


def find_width8(op: tir.Node) -> None:
    """Find all the 'tir.For' nodes whose extent can be divided by 8."""
    if isinstance(op, tir.For):
        if isinstance(op.extent, tir.IntImm):
            if op.extent.value % 8 == 0:
                loops.append(op)


def vectorize8(op: tir.Node) -> Optional[tir.Node]:
    """Split can vectorize the loops found in `find_width8`."""
    if op in loops:
        assert isinstance(op, tir.For) and isinstance(op.extent, tir.IntImm)
        extent = op.extent.value
        name = op.loop_var.name
        lo, li = tir.Var(name + "_outer", op.loop_var.dtype), tir.Var(name + "_inner", op.loop_var.dtype)
        body = tir.stmt_functor.substitute(op.body, {op.loop_var: lo * 8 + li})
        body = tir.For(li, 0, 8, tir.ForKind.VECTORIZED, body)
        body = tir.For(lo, 0, extent // 8, tir.ForKind.SERIAL, body)
        return body
    return None


@tir.transform.prim_func_pass(opt_level=0)
def vectorize(f: tir.PrimFunc, mod: ir.Module, ctx: PassContext) -> tir.PrimFunc:
    loops.clear()
    tir.stmt_functor.post_order_visit(f.body, find_width8)
    if not loops:
        return f
    # The last list argument indicates what kinds of nodes will be transformed.
    # Thus, in this case only `For` nodes will call `vectorize8`
    return f.with_body(tir.stmt_functor.ir_transform(f.body, None, vectorize8, ["tir.For"]))


def main() -> ir.Module:
    mod = ir.Module.parse(GRAPH)
    with PassContext(opt_level=3):
        lowered = transform.Sequential([transform.LegalizeOps()])(mod)
        out = transform.Sequential([vectorize, tir.transform.Simplify()])(lowered)
    print(out)
    a = np.random.default_rng(0).standard_normal(128).astype(np.float32)
    b = np.random.default_rng(1).standard_normal(128).astype(np.float32)
    np.testing.assert_allclose(passel.eval(out, a, b), a + b, rtol=1e-6)
    return out


if __name__ == "__main__":
    main()
