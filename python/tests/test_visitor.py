"""ExprVisitor and ExprMutator (TVM's PyExprVisitor / PyExprMutator) over a module holding every
expression kind, and the FunctionBuilder making every kind."""

from __future__ import annotations

from typing import Dict, List, Tuple

import numpy as np
import pytest

import passel
from passel import ir

# Every expression kind: variables, a global, constants, operator calls, an apply of a global,
# an apply of a function value, a tuple, a projection, an if with a block in a branch, a nested
# function, and blocks.
EVERY_KIND = """
def @helper(%y: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  relu(%y)
}

def @main(%c: Tensor[(), bool], %x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  let %g = @helper(%x);
  let %f = fn (%p: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
    let %q = negative(%p);
    add(%q, 1.0f)
  };
  let %t = (%g, %f(%x));
  let %s = %t.1;
  let %r = if (%c) { let %e = exp(%s); %e } else { %t.0 };
  multiply(%r, 2.0f)
}
"""

HOOKS = [
    "visit_var_",
    "visit_global_var_",
    "visit_constant_",
    "visit_call_",
    "visit_tuple_",
    "visit_tuple_getitem_",
    "visit_if_",
    "visit_function_",
    "visit_seq_expr_",
]


@pytest.fixture
def every_kind() -> ir.Module:
    return ir.Module.parse(EVERY_KIND)


class Recorder(ir.ExprVisitor):
    def __init__(self) -> None:
        self.log: List[Tuple[str, str]] = []

    def _rec(self, hook: str, e: ir.Expr) -> None:
        self.log.append((hook, e.name or e.op or e.kind))

    def visit_var_(self, var: ir.Expr) -> None:
        self._rec("visit_var_", var)

    def visit_global_var_(self, gv: ir.Expr) -> None:
        self._rec("visit_global_var_", gv)

    def visit_constant_(self, const: ir.Expr) -> None:
        self._rec("visit_constant_", const)

    def visit_call_(self, call: ir.Expr) -> None:
        self._rec("visit_call_", call)

    def visit_tuple_(self, tup: ir.Expr) -> None:
        self._rec("visit_tuple_", tup)

    def visit_tuple_getitem_(self, proj: ir.Expr) -> None:
        self._rec("visit_tuple_getitem_", proj)

    def visit_if_(self, ite: ir.Expr) -> None:
        self._rec("visit_if_", ite)

    def visit_function_(self, fn: ir.Expr) -> None:
        self._rec("visit_function_", fn)
        super().visit_function_(fn)

    def visit_seq_expr_(self, block: ir.Expr) -> None:
        self._rec("visit_seq_expr_", block)

    def visit_binding(self, var: ir.Expr, value: ir.Expr) -> None:
        self.log.append(("visit_binding", f"{var.name}={value.name or value.op or value.kind}"))
        super().visit_binding(var, value)


def test_expr_visitor_hits_every_hook_once_per_node_in_evaluation_order(every_kind):
    v = Recorder()
    v.visit_function(every_kind["main"])
    hooks = {h for h, _ in v.log}
    assert hooks == set(HOOKS) | {"visit_binding"}
    # Parameters first, then the body in evaluation order; a variable once (at its binding or
    # parameter), a compound node before its operands.
    assert v.log == [
        ("visit_var_", "c"),
        ("visit_var_", "x"),
        ("visit_seq_expr_", "block"),
        ("visit_call_", "apply"),
        ("visit_global_var_", "helper"),
        ("visit_binding", "g=apply"),
        ("visit_var_", "g"),
        ("visit_function_", "func"),
        ("visit_var_", "p"),
        ("visit_seq_expr_", "block"),
        ("visit_call_", "negative"),
        ("visit_binding", "q=negative"),
        ("visit_var_", "q"),
        ("visit_call_", "add"),
        ("visit_constant_", "const"),
        ("visit_binding", "f=func"),
        ("visit_var_", "f"),
        ("visit_tuple_", "tuple"),
        ("visit_call_", "apply"),
        ("visit_binding", "t=tuple"),
        ("visit_var_", "t"),
        ("visit_tuple_getitem_", "proj"),
        ("visit_binding", "s=proj"),
        ("visit_var_", "s"),
        ("visit_if_", "if"),
        ("visit_seq_expr_", "block"),
        ("visit_call_", "exp"),
        ("visit_binding", "e=exp"),
        ("visit_var_", "e"),
        ("visit_tuple_getitem_", "proj"),
        ("visit_binding", "r=if"),
        ("visit_var_", "r"),
        ("visit_call_", "multiply"),
        ("visit_constant_", "const"),
    ]


def test_expr_visitor_exception_propagates_as_itself(every_kind):
    class Boom(ir.ExprVisitor):
        def visit_if_(self, ite: ir.Expr) -> None:
            raise KeyError("no if here")

    with pytest.raises(KeyError, match="no if here"):
        Boom().visit_function(every_kind["main"])


class Identity(ir.ExprMutator):
    """Calls every hook and records it; returns every default."""

    def __init__(self) -> None:
        self.hits: Dict[str, int] = {}

    def visit_expr(self, expr: ir.Expr) -> ir.Value:
        return super().visit_expr(expr)

    def __getattribute__(self, name: str):  # type: ignore[no-untyped-def]
        attr = object.__getattribute__(self, name)
        if name in HOOKS or name == "visit_binding":
            hits = object.__getattribute__(self, "hits")
            hits[name] = hits.get(name, 0) + 1
        return attr


def test_expr_mutator_hits_every_hook_and_returns_the_same_function_when_nothing_changes(every_kind):
    for name in every_kind:
        m = Identity()
        f = every_kind[name]
        assert m.visit_function(f).same_as(f)
    m = Identity()
    m.visit_function(every_kind["main"])
    assert set(m.hits) == set(HOOKS) | {"visit_binding"}
    assert m.hits["visit_binding"] == 7  # g, f, q, t, s, e, r


def test_expr_mutator_rewrites_inside_nested_functions_and_if_branches(every_kind):
    class NegToMul(ir.ExprMutator):
        def visit_call_(self, call: ir.Expr) -> ir.Value:
            if call.op in ("negative", "exp"):
                x = self.visit_expr(call.args[0])
                return self.builder.call("multiply", [x, self.builder.const(np.float32(-1.0))])
            return self.visit_expr_post_order(call)

    out = ir.Module({n: NegToMul().visit_function(f) for n, f in every_kind.functions.items()})
    text = out.script()
    assert "negative" not in text and "exp(" not in text
    assert "let %q = multiply(%p, -1.0f)" in text
    assert "let %e = multiply(%s, -1.0f)" in text
    out.verify()
    c = np.array(True)
    x = np.array([1.0, -2.0], dtype=np.float32)
    # main(c, x) = 2 * -(relu-free) ... checked against numpy:
    s = -x + 1.0
    np.testing.assert_allclose(passel.eval(out, c, x), 2.0 * (-s))


def test_expr_mutator_substitutes_a_variable_and_renames_globals(every_kind):
    class Rename(ir.ExprMutator):
        def visit_global_var_(self, gv: ir.Expr) -> ir.Value:
            if gv.name == "helper":
                return self.builder.global_ref("relu_helper")
            return self.visit_expr_post_order(gv)

    main = Rename().visit_function(every_kind["main"])
    assert "@relu_helper(%x)" in main.script()

    class DropG(ir.ExprMutator):
        def visit_var_(self, var: ir.Expr) -> ir.Value:
            if var.name == "s":
                # %s = %t.1: use the apply %f(%x) behind it directly.
                return self.builder.proj(self.visit_expr(main_t), 0)
            return self.visit_expr_post_order(var)

    main_t = [v for v, _ in every_kind["main"].bindings if v.name == "t"][0]
    out = DropG().visit_function(every_kind["main"])
    assert "let %s" not in out.script()
    assert "exp(%t.0)" in out.script()


def test_expr_mutator_builds_apply_tuple_proj_and_if(every_kind):
    class Wrap(ir.ExprMutator):
        def visit_call_(self, call: ir.Expr) -> ir.Value:
            if call.op == "multiply":
                b = self.builder
                r = self.visit_expr_post_order(call)
                t = b.tuple([r, b.apply(b.global_ref("helper"), [self.visit_expr(call.args[0])])])
                c = self.visit_expr(every_kind["main"].params[0])
                return b.if_(c, b.proj(t, 0), b.proj(t, 1))
            return self.visit_expr_post_order(call)

    out = Wrap().visit_function(every_kind["main"])
    assert "if (%c) {" in out.script()
    assert "@helper(%r)" in out.script()


def test_expr_mutator_binding_hook_drops_bindings_and_errors_are_clear(every_kind):
    class Drop(ir.ExprMutator):
        def visit_binding(self, var: ir.Expr, value: ir.Expr) -> bool:
            return var.name != "q"

        def visit_var_(self, var: ir.Expr) -> ir.Value:
            if var.name == "q":
                return self.visit_expr(fn_param)
            return self.visit_expr_post_order(var)

    nested = [v for _, v in every_kind["main"].bindings if v.kind == "func"][0]
    fn_param = nested.params[0]
    out = Drop().visit_function(every_kind["main"])
    assert "add(%p, 1.0f)" in out.script() and "negative" not in out.script()

    class Bad(ir.ExprMutator):
        def visit_call_(self, call: ir.Expr) -> ir.Value:
            return 3  # type: ignore[return-value]

    with pytest.raises(TypeError, match="must return a passel.ir.Value"):
        Bad().visit_function(every_kind["main"])

    class Loop(ir.ExprMutator):
        def visit_call_(self, call: ir.Expr) -> ir.Value:
            return self.visit_expr(call)

    with pytest.raises(ValueError, match="inside its own hook"):
        Loop().visit_function(every_kind["main"])

    class Raises(ir.ExprMutator):
        def visit_tuple_getitem_(self, proj: ir.Expr) -> ir.Value:
            raise ArithmeticError("boom")

    with pytest.raises(ArithmeticError, match="boom"):
        Raises().visit_function(every_kind["main"])


def test_function_builder_makes_every_expression_kind():
    b = ir.FunctionBuilder()
    t2 = ir.TensorType([2], "float32")
    c = b.param("c", ir.TensorType([], "bool"))
    x = b.param("x", t2)
    g = b.let("g", b.apply(b.global_ref("helper"), [x]))
    p = b.var("p", t2)
    q = b.var("q")
    fn = b.fn([p], b.block([(q, b.call("negative", [p]))], b.call("add", [q, b.const(np.float32(1.0))])), t2)
    f = b.let("f", fn)
    t = b.let("t", b.tuple([g, b.apply(f, [x])]))
    s = b.let("s", b.proj(t, 1))
    e = b.var("e")
    r = b.let("r", b.if_(c, b.block([(e, b.call("exp", [s]))], e), b.proj(t, 0)))
    main = b.finish(b.call("multiply", [r, b.const(np.float32(2.0))]), ret_type=t2)
    helper = ir.Module.parse(EVERY_KIND)["helper"]
    built = ir.Module({"helper": helper, "main": main})
    assert built.structural_equal(ir.Module.parse(EVERY_KIND))

    with pytest.raises(ValueError, match=r'unknown operator `relu_helper`; to call a global function use apply\(global_ref\("relu_helper"\), args\)'):
        ir.FunctionBuilder().call("relu_helper", [])
