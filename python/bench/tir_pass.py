"""Measures Python PrimFunc passes: what a pass body costs per PrimFunc when it only returns
its function (the boundary), when it reads the body as node objects and rebuilds it
(``ir_transform`` + ``with_body``: the conversion both ways), next to the Rust ``Simplify``.

Usage: python python/bench/tir_pass.py [N]   (N generated PrimFuncs of one 64-iteration loop,
default 1000; one thread). Build the package in release mode for numbers to quote
(``pip install ./python`` or ``maturin develop --release``).
"""

from __future__ import annotations

import sys
import time
from typing import Any

from passel import ir, tir
from passel.transform import Pass, PassContext

REPEATS = 3


def module(n: int) -> ir.Module:
    return ir.Module.parse(
        "\n".join(
            f"prim @p{k}(%A: Buffer[(64,), f32], %B: Buffer[(64,), f32]) {{\n"
            f"  for %i in serial(0, 64) {{\n    %B[%i] = add(mul(%A[%i], 2.0f), {k}.0f);\n  }}\n}}\n"
            for k in range(n)
        )
    )


@tir.transform.prim_func_pass(opt_level=0)
def noop(f: tir.PrimFunc, m: ir.Module, c: PassContext) -> tir.PrimFunc:
    return f


@tir.transform.prim_func_pass(opt_level=0)
def parallel(f: tir.PrimFunc, m: ir.Module, c: PassContext) -> tir.PrimFunc:
    def post(op: Any) -> Any:
        return tir.For(op.loop_var, op.min, op.extent, tir.ForKind.PARALLEL, op.body)

    return f.with_body(tir.stmt_functor.ir_transform(f.body, None, post, ["tir.For"]))


def best(p: Pass, mod: ir.Module) -> float:
    out = float("inf")
    for _ in range(REPEATS):
        with PassContext(num_threads=1):
            start = time.perf_counter()
            p(mod)
            out = min(out, time.perf_counter() - start)
    return out


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    mod = module(n)
    for name, p in [("noop", noop), ("read + rebuild", parallel), ("Simplify (Rust)", tir.transform.Simplify())]:
        t = best(p, mod)
        print(f"{name}: {t * 1e3:.1f} ms for {n} PrimFuncs ({t / n * 1e6:.1f} us each)")


if __name__ == "__main__":
    main()
