"""Two passes TVM users write by hand, in passel: a pattern rewrite and a module pass that
renames a function and adds a new one.

- ``FuseMulAdd``-style pattern rewrite (a function pass): ``add(multiply(x, a), multiply(x, b))``
  becomes ``multiply(x, add(a, b))``, matched on the input and built over the rewritten
  operands, in every function body, ``if`` branch and nested function.
- ``OutlineRelu`` (a module pass): adds a global ``@relu_helper`` built with
  ``FunctionBuilder``, replaces each ``relu(x)`` by ``@relu_helper(x)``, and renames ``@main``
  to ``@entry`` (rewriting the references to it), all through TVM's in-place module API.

``main()`` returns the rewritten module; ``tests/test_examples.py`` checks it and its values.
"""

from __future__ import annotations

from typing import Optional

from passel import ir, transform
from passel.transform import PassContext

SOURCE = """
def @main(%c: Tensor[(), bool], %x: Tensor[(4,), f32], %a: Tensor[(4,), f32], %b: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  let %t = add(multiply(%x, %a), multiply(%x, %b));
  let %r = if (%c) { relu(%t) } else { @twice(%t) };
  %r
}

def @twice(%y: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  let %f = fn (%z: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
    add(multiply(%z, 2.0f), multiply(%z, 3.0f))
  };
  %f(%y)
}

def @uses_main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  @main(true, %x, %x, %x)
}
"""


def _mul_operands(e: ir.Expr) -> Optional[tuple[ir.Expr, ir.Expr]]:
    if e.kind == "call" and e.op == "multiply":
        x, y = e.args
        return x, y
    return None


class DistributeMultiply(ir.ExprMutator):
    """``add(multiply(x, a), multiply(x, b))`` → ``multiply(x, add(a, b))``."""

    def visit_call_(self, call: ir.Expr) -> ir.Value:
        if call.op == "add":
            lhs, rhs = (_mul_operands(arg) for arg in call.args)
            if lhs is not None and rhs is not None and lhs[0] == rhs[0]:
                b = self.builder
                x, a, c = (self.visit_expr(e) for e in (lhs[0], lhs[1], rhs[1]))
                return b.call("multiply", [x, b.call("add", [a, c])])
        return self.visit_expr_post_order(call)


@transform.function_pass(opt_level=1, name="DistributeMultiply")
def distribute_multiply(func: ir.Function, mod: ir.Module, ctx: PassContext) -> ir.Function:
    return DistributeMultiply().visit_function(func)


class CallHelper(ir.ExprMutator):
    """``relu(x)`` → ``@relu_helper(x)``; ``@main`` → ``@entry``."""

    def visit_call_(self, call: ir.Expr) -> ir.Value:
        if call.op == "relu":
            b = self.builder
            return b.apply(b.global_ref("relu_helper"), [self.visit_expr(call.args[0])])
        return self.visit_expr_post_order(call)

    def visit_global_var_(self, gv: ir.Expr) -> ir.Value:
        if gv.name == "main":
            return self.builder.global_ref("entry")
        return self.visit_expr_post_order(gv)


def relu_helper() -> ir.Function:
    b = ir.FunctionBuilder()
    t = ir.TensorType([4], "float32")
    y = b.param("y", t)
    return b.finish(b.call("relu", [y]), ret_type=t)


@transform.module_pass(opt_level=1, name="OutlineRelu")
def outline_relu(mod: ir.Module, ctx: PassContext) -> ir.Module:
    # A pass must not change its input in place (testing.immutable_module checks it): work on
    # a copy, then use TVM's in-place API on the copy.
    out = ir.Module(dict(mod.functions))
    for name, func in mod.functions.items():
        out.update_func(name, CallHelper().visit_function(func))
    out["relu_helper"] = relu_helper()
    entry = out["main"]
    out.remove("main")
    out["entry"] = entry
    return out


def main() -> ir.Module:
    mod = ir.Module.parse(SOURCE)
    with PassContext(opt_level=3, config={"testing.immutable_module": True}):
        out = transform.Sequential([distribute_multiply, outline_relu, transform.get_pass("InferType")])(mod)
    return out


if __name__ == "__main__":
    print(main())
