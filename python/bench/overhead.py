"""Measures what the Python boundary costs (python/README numbers come from here).

1. A Rust pipeline called from Python vs the same pipeline run inside Rust
   (``_passel.time_in_rust``: same process, same module object, no Python between runs).
2. A trivial Python function pass (returns its function) over every function: its whole
   run time is an upper bound on what it adds to a pipeline.

Usage: python python/bench/overhead.py CHAIN.pir [threads...]
(make CHAIN.pir with ``passel gen chain --functions 10000 --ops 50``). Build the package in
release mode first (``pip install ./python`` or ``maturin develop --release``).
"""

from __future__ import annotations

import sys
import time

from passel import _passel, ir, transform
from passel.transform import PassContext

PIPELINE = "FoldConstant,EliminateCommonSubexpr,DeadCodeElimination,SimplifyExpr"
REPEATS = 5


def best_of(f, repeats: int = REPEATS) -> float:
    """Best time of ``f()``; its result is dropped after the clock stops, as
    ``_passel.time_in_rust`` drops each output after its clock stops (freeing a 10k-function
    module is not part of running the pipeline, and timing it on one side only is unfair)."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        out = f()
        best = min(best, time.perf_counter() - start)
        del out
    return best


def main() -> None:
    path = sys.argv[1]
    threads = [int(t) for t in sys.argv[2:]] or [1, 2]
    mod = ir.Module.from_file(path)
    print(f"{path}: {len(mod)} functions; best of {REPEATS}")
    seq = transform.pipeline(PIPELINE)
    trivial = transform.function_pass(lambda func, m, ctx: func, opt_level=0, name="Trivial")
    for n in threads:
        with PassContext(opt_level=3, num_threads=n) as ctx:
            seq(mod)  # warm the pool and caches
            # Alternated, best of each: the machine is noisy (±15%).
            rust, py = float("inf"), float("inf")
            for _ in range(3):
                rust = min(rust, _passel.time_in_rust(seq._handle, mod, ctx, REPEATS))
                py = min(py, best_of(lambda: seq(mod)))
            print(
                f"threads={n}: pipeline from Rust {rust * 1e3:.1f} ms, from Python {py * 1e3:.1f} ms, "
                f"overhead {(py / rust - 1) * 100:+.2f}%"
            )
            t_py = best_of(lambda: trivial(mod))
            print(
                f"threads={n}: trivial Python function pass {t_py * 1e3:.1f} ms "
                f"({t_py / len(mod) * 1e6:.2f} us/function)"
            )


if __name__ == "__main__":
    main()
