"""passel.tir: the Python view of PrimFuncs (read, build, print, compare, parse), module access
to PrimFuncs, stmt_functor, and PrimFunc passes written in Python running through the engine's
PrimFuncPass with instruments, opt levels, timing, threads and errors as for every pass."""

from __future__ import annotations

import threading
from typing import Any, List

import numpy as np
import pytest

import passel
from passel import instrument, ir, tir, transform
from passel.transform import PassContext

# Every statement and expression kind of the loop level, parsed from text.
EVERY = """
#[global_symbol="every"]
prim @every(%A: Buffer[(8,), f32], %I: Buffer[(8,), i32], %n: i64, %B: Buffer[(8,), f32], %C: Buffer[(2, 4), f32, strides=[4, 1], scope="global"]) {
  for %i in serial(0, 8) {
    let %j = floormod(add(%i, 1), 8);
    if (lt(%i, %n)) {
      %B[%i] = select(gt(%A[%i], 0.0f), exp(%A[%i]), neg(%A[%i]));
    } else {
      %B[%i] = let %t = %A[%j] in mul(%t, 2.0f);
    }
  }
  for %k in parallel(0, 2) {
    %B[ramp(mul(%k, 4), 1, 4)] = add(%A[ramp(mul(%k, 4), 1, 4)], broadcast(1.0f, 4));
  }
  alloc %T: Buffer[(8,), f32];
  decl %V: Buffer[(2, 4), f32] = %T;
  for %u in unroll(0, 2) {
    for %v in vectorized(0, 4) {
      %V[%u, %v] = cast(%I[add(mul(%u, 4), %v)], f32);
      %C[%u, %v] = sub(%V[%u, %v], %B[add(mul(%u, 4), %v)]);
    }
  }
  attr "pragma_unroll_explicit" = 1 {
    eval select(and(or(eq(%n, 1), ne(%n, 2)), not(le(%n, 3))), min(div(%n, 2), mod(%n, 3)), max(sub(%n, 1), floordiv(%n, 2)));
  }
  if (ge(%n, 0)) {
    eval 0;
  }
}
"""

LOWERED = """
def @main(%x: Tensor[(16,), f32]) -> Tensor[(16,), f32] {
  call_tir(@add_one, %x)
}

#[global_symbol="add_one"]
prim @add_one(%A: Buffer[(16,), f32], %B: Buffer[(16,), f32]) {
  for %i in serial(0, 16) {
    %B[%i] = add(%A[%i], 1.0f);
  }
}

#[SkipOptimization]
prim @skipped(%A: Buffer[(4,), f32]) {
  for %i in serial(0, 4) {
    %A[%i] = 0.0f;
  }
}
"""


def every() -> tir.PrimFunc:
    f = tir.PrimFunc.from_text(EVERY)
    assert isinstance(f, tir.PrimFunc)
    return f


def kinds(node: tir.Node) -> List[str]:
    seen: List[str] = []
    tir.stmt_functor.post_order_visit(node, lambda x: seen.append(type(x).__name__))
    return seen


# ---- reading ----


def test_params_and_buffers_give_name_dtype_shape_strides_scope():
    f = every()
    assert [type(p).__name__ for p in f.params] == ["Buffer", "Buffer", "Var", "Buffer", "Buffer"]
    a, i, n, b, c = f.params
    assert (a.name, a.dtype, a.shape) == ("A", "float32", (8,))
    assert (i.name, i.dtype) == ("I", "int32")
    assert isinstance(n, tir.Var) and (n.name, n.dtype) == ("n", "int64")
    assert (c.shape, c.strides, c.elem_offset, c.scope) == ((2, 4), (4, 1), 0, "global")
    assert [x.name for x in f.buffers] == ["A", "I", "B", "C"]
    assert f.buffer_map["B"] is b
    assert f.attrs == {"global_symbol": "every"}


def test_every_node_kind_is_read_and_a_variable_is_one_object():
    f = every()
    seen = set(kinds(f.body))
    statements = {"For", "BufferStore", "LetStmt", "IfThenElse", "SeqStmt", "AllocBuffer", "DeclBuffer", "Evaluate",
                  "AttrStmt"}
    expressions = {"Var", "IntImm", "FloatImm", "Add", "Sub", "Mul", "Div", "Mod", "FloorDiv", "FloorMod", "Min", "Max",
                   "EQ", "NE", "LT", "LE", "GT", "GE", "And", "Or", "Not", "Select", "Cast", "BufferLoad", "Call",
                   "Ramp", "Broadcast", "Let"}
    assert statements | expressions <= seen, sorted((statements | expressions) - seen)
    first = f.body
    assert isinstance(first, tir.SeqStmt)
    loop = first[0]
    assert isinstance(loop, tir.For) and loop.kind is tir.ForKind.SERIAL
    assert isinstance(loop.extent, tir.IntImm) and loop.extent.value == 8 and loop.extent.dtype == "int64"
    # The loop variable is the same object in the binder and in every use.
    uses = []
    tir.stmt_functor.post_order_visit(loop.body, lambda x: uses.append(x) if isinstance(x, tir.Var) else None)
    assert any(u is loop.loop_var for u in uses)
    vec = first[1]
    assert isinstance(vec, tir.For) and vec.kind is tir.ForKind.PARALLEL
    store = vec.body
    assert isinstance(store, tir.BufferStore) and store.value.dtype == "float32x4"
    assert isinstance(store.indices[0], tir.Ramp) and store.indices[0].lanes == 4


def test_script_and_str_print_pir_and_reparse_to_a_structurally_equal_function():
    f = every()
    text = f.script("every")
    assert text.startswith('#[global_symbol="every"]\nprim @every(%A: Buffer[(8,), f32]')
    assert str(f) == f.script()
    again = tir.parse(text)
    assert again.structural_equal(f) and again.structural_hash() == f.structural_hash()
    assert not again.same_as(f)


def test_with_body_of_the_same_body_rebuilds_an_equal_function():
    f = every()
    g = f.with_body(f.body)
    assert g.script("every") == f.script("every")
    assert g.structural_equal(f) and not g.same_as(f)
    assert g.attrs == f.attrs


def test_structural_equality_sees_a_changed_loop_kind():
    f = every()

    def to_serial(op: tir.Node) -> Any:
        assert isinstance(op, tir.For)
        return tir.For(op.loop_var, op.min, op.extent, tir.ForKind.SERIAL, op.body)

    g = f.with_body(tir.stmt_functor.ir_transform(f.body, None, to_serial, ["tir.For"]))
    assert not g.structural_equal(f)
    assert "parallel" not in g.script() and "unroll(" not in g.script() and "vectorized" not in g.script()


# ---- building ----


def test_a_prim_func_built_from_nodes_runs_in_the_interpreter():
    a = tir.decl_buffer((4, 8), "float32", "A")
    b = tir.decl_buffer((4, 8), "float32", "B")
    i, j = tir.Var("i", "int64"), tir.Var("j", "int64")
    body = tir.For(i, 0, 4, tir.ForKind.SERIAL,
                   tir.For(j, 0, 8, tir.ForKind.SERIAL,
                           tir.BufferStore(b, a[i, j] * 2.0 + tir.Cast("float32", i * 8 + j), [i, j])))
    f = tir.PrimFunc([a, b], body)
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    np.testing.assert_array_equal(tir.eval(f, x), x * 2 + np.arange(32).reshape(4, 8))
    assert "for %j in serial(0, 8)" in f.script()


def test_a_built_prim_func_goes_into_a_module_and_runs_through_call_tir():
    mod = ir.Module.parse("""
def @main(%x: Tensor[(16,), f32]) -> Tensor[(16,), f32] {
  call_tir(@twice, %x)
}

prim @twice(%A: Buffer[(16,), f32], %B: Buffer[(16,), f32]) {
  eval 0;
}
""")
    old = mod["twice"]
    a, b = old.params
    i = tir.Var("i", "int64")
    mod["twice"] = old.with_body(tir.For(i, 0, 16, tir.ForKind.SERIAL, tir.BufferStore(b, a[i] + a[i], [i])))
    mod.verify()
    x = np.linspace(-1, 1, 16, dtype=np.float32)
    np.testing.assert_array_equal(passel.eval(mod, x), x + x)


def test_a_type_error_in_a_built_tree_is_a_value_error_naming_it():
    a = tir.decl_buffer((4,), "int32", "A")
    i = tir.Var("i", "int64")
    with pytest.raises(ValueError, match=r"store of f32 into buffer `%A` of i32"):
        tir.PrimFunc([a], tir.For(i, 0, 4, tir.ForKind.SERIAL, tir.BufferStore(a, tir.FloatImm("float32", 1.0), [i])))
    with pytest.raises(TypeError, match=r"For.body must be a Stmt, got Add"):
        tir.PrimFunc([a], tir.For(i, 0, 4, tir.ForKind.SERIAL, i + 1))  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        tir.For(i, 0, 4, "sideways", tir.Evaluate(i))


def test_an_out_of_bounds_access_is_caught_by_the_verifier_or_the_interpreter():
    a = tir.decl_buffer((4,), "float32", "A")
    i = tir.Var("i", "int64")
    # Outside for every value of the loop variable: the verifier refuses the function.
    with pytest.raises(ValueError, match="does not verify") as e:
        tir.PrimFunc([a], tir.For(i, 0, 4, tir.ForKind.SERIAL, tir.BufferStore(a, 0.0, [i + 4])))
    assert "index 0 of buffer `%A`" in str(e.value)
    # Outside for some values only: the interpreter stops at the first bad access.
    f = tir.PrimFunc([a], tir.For(i, 0, 8, tir.ForKind.SERIAL, tir.BufferStore(a, 0.0, [i])))
    with pytest.raises(passel.PassError, match=r"in @f: out-of-bounds store `%A\[4\]`"):
        tir.eval(f, name="f")


def test_from_text_errors_carry_line_and_column_and_names_are_checked():
    with pytest.raises(passel.ParseError, match=r"3:"):
        tir.parse("\nprim @f(%A: Buffer[(4,), f32]) {\n  %A[0] = nosuch(1.0f);\n}\n")
    with pytest.raises(KeyError):
        tir.parse(LOWERED, "nosuch")
    with pytest.raises(ValueError, match="2 PrimFuncs"):
        tir.parse(LOWERED)
    assert tir.parse(LOWERED, "@add_one").params[0].name == "A"


def test_substitute_replaces_uses_and_keeps_unchanged_nodes():
    f = tir.parse(LOWERED, "add_one")
    loop = f.body
    assert isinstance(loop, tir.For)
    same = tir.stmt_functor.substitute(loop.body, {})
    assert same is loop.body
    store = loop.body
    assert isinstance(store, tir.BufferStore)
    moved = tir.stmt_functor.substitute(store.value, {loop.loop_var: 15 - loop.loop_var})
    assert moved is not store.value
    g = f.with_body(tir.For(loop.loop_var, loop.min, loop.extent, loop.kind,
                            tir.BufferStore(store.buffer, moved, store.indices)))
    x = np.arange(16, dtype=np.float32)
    np.testing.assert_array_equal(tir.eval(g, x), x[::-1] + 1)


def test_ir_transform_preorder_replaces_a_subtree_without_entering_it():
    f = every()
    entered: List[str] = []

    def pre(op: tir.Node) -> Any:
        if isinstance(op, tir.AttrStmt):
            return tir.Evaluate(tir.IntImm("int64", 7))
        return None

    def post(op: tir.Node) -> Any:
        entered.append(type(op).__name__)
        return None

    out = tir.stmt_functor.ir_transform(f.body, pre, post)
    assert "Min" not in entered and "Max" not in entered
    assert "attr" not in f.with_body(out).script() and "eval 7;" in f.with_body(out).script()


# ---- modules ----


def test_a_module_gets_sets_iterates_and_removes_prim_funcs():
    mod = ir.Module.parse(LOWERED)
    assert mod.names() == ["main", "add_one", "skipped"] and len(mod) == 3
    assert list(mod) == mod.names() and "add_one" in mod and "@skipped" in mod
    assert isinstance(mod["main"], ir.Function) and isinstance(mod["add_one"], tir.PrimFunc)
    assert list(mod.prim_functions) == ["add_one", "skipped"]
    assert [type(f).__name__ for f in mod.functions.values()] == ["Function", "PrimFunc", "PrimFunc"]
    f = mod["add_one"]
    assert mod["add_one"].same_as(f)
    copy = ir.Module(mod.functions)
    assert copy.structural_equal(mod) and copy.same_as(mod)
    mod["extra"] = f
    assert mod.names()[-1] == "extra" and mod["extra"].same_as(f)
    del mod["extra"]
    mod.remove("skipped")
    assert mod.names() == ["main", "add_one"]
    assert mod.without_function("add_one").names() == ["main"]
    assert mod.with_function("k", f).names() == ["main", "add_one", "k"]
    with pytest.raises(TypeError, match="passel.tir.PrimFunc"):
        mod["x"] = 3  # type: ignore[assignment]
    # A name changes kind when set to the other kind, in place or by update.
    mod["main"] = f
    assert isinstance(mod["main"], tir.PrimFunc) and mod.names() == ["add_one", "main"]
    graph = ir.Module.parse(LOWERED)
    mod.update(graph)
    assert isinstance(mod["main"], ir.Function) and mod.names() == ["main", "add_one", "skipped"]
    with pytest.raises(TypeError, match="passel.tir.eval"):
        passel.eval(mod, np.zeros(16, np.float32), entry="add_one")


# ---- passes ----


def make_parallel(func: tir.PrimFunc, mod: ir.Module, ctx: PassContext) -> tir.PrimFunc:
    def post(op: tir.Node) -> Any:
        assert isinstance(op, tir.For)
        if op.kind is tir.ForKind.PARALLEL:
            return None
        return tir.For(op.loop_var, op.min, op.extent, tir.ForKind.PARALLEL, op.body)

    body = tir.stmt_functor.ir_transform(func.body, None, post, ["tir.For"])
    return func if body is func.body else func.with_body(body)


def test_a_python_prim_func_pass_rewrites_loops_and_the_result_evaluates_the_same():
    parallel = tir.transform.prim_func_pass(make_parallel, opt_level=0, name="Parallel")
    assert isinstance(parallel, transform.PrimFuncPass) and parallel.info.name == "Parallel"
    mod = ir.Module.parse(LOWERED)
    out = parallel(mod)
    assert "for %i in parallel(0, 16)" in out["add_one"].script()
    # SkipOptimization PrimFuncs and graph functions are left as they were.
    assert out["skipped"].same_as(mod["skipped"]) and out["main"].same_as(mod["main"])
    x = np.arange(16, dtype=np.float32)
    np.testing.assert_array_equal(passel.eval(out, x), passel.eval(mod, x))
    # Nothing left to change: the very same module.
    assert parallel(out).same_as(out)


def test_a_python_pass_rewrites_a_store():
    @tir.transform.prim_func_pass(opt_level=0)
    def times_three(func: tir.PrimFunc, mod: ir.Module, ctx: PassContext) -> tir.PrimFunc:
        def post(op: tir.Node) -> Any:
            assert isinstance(op, tir.BufferStore)
            return tir.BufferStore(op.buffer, op.value * 3.0, op.indices)

        return func.with_body(tir.stmt_functor.ir_transform(func.body, None, post, ["tir.BufferStore"]))

    out = times_three(ir.Module.parse(LOWERED))
    x = np.arange(16, dtype=np.float32)
    np.testing.assert_array_equal(passel.eval(out, x), (x + 1) * 3)


def test_the_class_form_takes_constructor_arguments():
    @tir.transform.prim_func_pass(opt_level=1, name="SetKind")
    class SetKind:
        def __init__(self, kind: tir.ForKind) -> None:
            self.kind = kind

        def transform_function(self, func: tir.PrimFunc, mod: ir.Module, ctx: PassContext) -> tir.PrimFunc:
            def post(op: tir.Node) -> Any:
                assert isinstance(op, tir.For)
                return tir.For(op.loop_var, op.min, op.extent, self.kind, op.body)

            return func.with_body(tir.stmt_functor.ir_transform(func.body, None, post, ["tir.For"]))

    p = SetKind(tir.ForKind.UNROLLED)
    assert isinstance(p, transform.PrimFuncPass) and p.info.opt_level == 1 and p.kind is tir.ForKind.UNROLLED
    assert "unroll(0, 16)" in p(ir.Module.parse(LOWERED))["add_one"].script()


def test_opt_levels_required_and_disabled_pass_apply_as_for_rust_passes():
    calls: List[str] = []

    @tir.transform.prim_func_pass(opt_level=3, required=["Simplify"])
    def late(func: tir.PrimFunc, mod: ir.Module, ctx: PassContext) -> tir.PrimFunc:
        calls.append("late")
        return func

    seq = transform.Sequential([late])
    mod = ir.Module.parse(LOWERED)
    names: List[str] = []

    @instrument.pass_instrument
    class Names:
        def run_before_pass(self, mod: ir.Module, info: transform.PassInfo) -> None:
            names.append(info.name)

    with PassContext(opt_level=2, instruments=[Names()]):
        seq(mod)
    assert calls == [] and names == ["sequential"]
    names.clear()
    with PassContext(opt_level=3, instruments=[Names()]):
        seq(mod)
    assert calls == ["late"] and names == ["sequential", "Simplify", "late"]
    with PassContext(opt_level=3, disabled_pass=["late"]):
        seq(mod)
    assert calls == ["late"]
    with PassContext(opt_level=0, required_pass=["late"]):
        seq(mod)
    assert calls == ["late", "late"]


def test_instruments_and_timing_see_a_python_prim_func_pass():
    events: List[str] = []

    @instrument.pass_instrument
    class Log:
        def should_run(self, mod: ir.Module, info: transform.PassInfo) -> bool:
            events.append(f"should_run {info.name}")
            return True

        def run_before_pass(self, mod: ir.Module, info: transform.PassInfo) -> None:
            events.append(f"before {info.name}")

        def run_after_pass(self, mod: ir.Module, info: transform.PassInfo) -> None:
            events.append(f"after {info.name} {'parallel' in mod.script()}")

    @tir.transform.prim_func_pass(opt_level=0, name="Parallel")
    def parallel(func: tir.PrimFunc, mod: ir.Module, ctx: PassContext) -> tir.PrimFunc:
        events.append("body")
        return make_parallel(func, mod, ctx)

    timing = instrument.PassTimingInstrument()
    with PassContext(instruments=[Log(), timing]):
        parallel(ir.Module.parse(LOWERED))
        report = timing.render()
    assert events == ["should_run Parallel", "before Parallel", "body", "after Parallel True"]
    assert "Parallel" in report


def test_python_prim_func_bodies_run_on_the_calling_thread_in_module_order():
    text = LOWERED.replace("#[SkipOptimization]\n", "") + "\n".join(
        f"prim @p{k}(%A: Buffer[(4,), f32]) {{\n  for %i in serial(0, 4) {{\n    %A[%i] = 1.0f;\n  }}\n}}\n"
        for k in range(6)
    )
    mod = ir.Module.parse(text)
    seen: List[Any] = []

    @tir.transform.prim_func_pass(opt_level=0)
    def record(func: tir.PrimFunc, mod: ir.Module, ctx: PassContext) -> tir.PrimFunc:
        seen.append((threading.get_ident(), func.params[0].shape))
        return make_parallel(func, mod, ctx)

    outs = []
    for threads in (1, 2):
        seen.clear()
        with PassContext(num_threads=threads):
            outs.append(record(mod).script())
        assert {t for t, _ in seen} == {threading.get_ident()}
        assert [s for _, s in seen] == [(16,), (4,)] + [(4,)] * 6
    assert outs[0] == outs[1]


def test_an_exception_in_a_prim_func_pass_propagates_as_itself():
    @tir.transform.prim_func_pass(opt_level=0)
    def boom(func: tir.PrimFunc, mod: ir.Module, ctx: PassContext) -> tir.PrimFunc:
        raise ValueError("no loops today")

    with pytest.raises(ValueError, match="no loops today") as e:
        boom(ir.Module.parse(LOWERED))
    assert not isinstance(e.value, passel.PassError)


def test_returning_something_else_is_a_type_error():
    @tir.transform.prim_func_pass(opt_level=0)
    def wrong(func: tir.PrimFunc, mod: ir.Module, ctx: PassContext) -> tir.PrimFunc:
        return mod  # type: ignore[return-value]

    with pytest.raises(passel.PassTypeError, match="must return a passel.tir.PrimFunc, got Module"):
        wrong(ir.Module.parse(LOWERED))


def test_immutable_module_catches_a_prim_func_pass_changing_its_input():
    @tir.transform.prim_func_pass(opt_level=0)
    def sneaky(func: tir.PrimFunc, mod: ir.Module, ctx: PassContext) -> tir.PrimFunc:
        mod["add_one"] = func.with_body(func.body)
        return func

    mod = ir.Module.parse(LOWERED)
    sneaky(mod)
    with PassContext(config={"testing.immutable_module": True}):
        with pytest.raises(passel.PassError, match="Immutable module has been modified in pass: sneaky"):
            sneaky(mod)


def test_registered_tir_passes_and_legalize_ops_from_python():
    names = {p["name"] for p in transform.list_passes() if p["kind"] == "prim_func"}
    assert names == {
        "Simplify",
        "RemoveNoOp",
        "UnrollLoop",
        "VectorizeLoop",
        "LoopPartition",
        "FlattenBuffer",
        "StorageRewrite",
        "CommonSubexprElimTIR",
        "NarrowDataType",
    }
    for name in sorted(names):
        assert getattr(tir.transform, name)().info.name == name
    graph = ir.Module.parse("""
def @main(%a: Tensor[(8,), f32], %b: Tensor[(8,), f32]) -> Tensor[(8,), f32] {
  let %c = add(%a, %b);
  let %d = multiply(%c, %c);
  %d
}
""")
    with PassContext(opt_level=3, config={"tir.UnrollLoop.auto_max_extent": 8}):
        lowered = transform.Sequential([transform.LegalizeOps()])(graph)
        assert list(lowered.prim_functions) == ["add", "multiply"]
        out = transform.Sequential(
            [tir.transform.Simplify(), tir.transform.RemoveNoOp(), tir.transform.UnrollLoop()]
        )(lowered)
    assert "for " not in out["add"].script()  # unrolled: extent 8 <= auto_max_extent
    a = np.arange(8, dtype=np.float32)
    b = np.ones(8, dtype=np.float32)
    np.testing.assert_allclose(passel.eval(out, a, b), (a + b) ** 2)
    np.testing.assert_allclose(passel.eval(graph, a, b), (a + b) ** 2)


def test_prim_func_pass_wants_an_opt_level_and_takes_traceable():
    with pytest.raises(ValueError, match="Please provide opt_level"):
        tir.transform.prim_func_pass(make_parallel)
    p = tir.transform.prim_func_pass(make_parallel, opt_level=0, traceable=True)
    assert p.info.name == "make_parallel"
    with pytest.raises(TypeError, match="traceable must be a bool"):
        tir.transform.prim_func_pass(make_parallel, opt_level=0, traceable="yes")  # type: ignore[call-overload]
