"""The loop level (TVM's ``tvm.tir``): ``PrimFunc``s over buffers, as Python objects.

A ``PrimFunc`` wraps the engine's (the Rust function is shared, never copied). Reading it
(``params``, ``buffers``, ``body``) gives TVM-style node objects — statements ``For``,
``BufferStore``, ``LetStmt``, ``IfThenElse``, ``SeqStmt``, ``AllocBuffer``, ``DeclBuffer``,
``Evaluate``, ``AttrStmt`` and expressions ``Var``, ``IntImm``, ``FloatImm``, ``Add`` …
``FloorMod``, ``Min``, ``Max``, comparisons, ``And`` / ``Or`` / ``Not``, ``Select``, ``Cast``,
``BufferLoad``, ``Call`` (intrinsics by name: ``"exp"``, ``"sqrt"``, …), ``Ramp``,
``Broadcast``, ``Let`` — made on first access from the function's arenas, in one forward loop
(no recursion on input depth). Nodes are immutable values; a variable or buffer is one object
wherever it is used.

Writing: build nodes (``PrimExpr`` arithmetic works: ``i * 8 + j``, ``A[i]`` is a
``BufferLoad``), then ``func.with_body(stmt)`` or ``PrimFunc(params, body)``; the engine's
builder checks every type and the verifier the result (``ValueError`` otherwise).
``stmt_functor.post_order_visit`` / ``ir_transform`` / ``substitute`` are TVM's helpers.
``PrimFunc.from_text`` parses ``.pir`` text; ``script()`` / ``str()`` print it.

Passes: ``passel.tir.transform.prim_func_pass`` (TVM's decorator) and the registered tir
passes (``Simplify()``, ``RemoveNoOp()``, ``UnrollLoop()``). ``passel.tir.eval`` runs a
PrimFunc in the interpreter.
"""

from __future__ import annotations

from . import stmt_functor, transform
from .function import PrimFunc, eval, parse
from .node import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    AllocBuffer,
    And,
    AttrStmt,
    Broadcast,
    Buffer,
    BufferLoad,
    BufferStore,
    Call,
    Cast,
    DeclBuffer,
    Div,
    Evaluate,
    FloatImm,
    FloorDiv,
    FloorMod,
    For,
    ForKind,
    IfThenElse,
    IntImm,
    Let,
    LetStmt,
    Max,
    Min,
    Mod,
    Mul,
    Node,
    Not,
    Or,
    PrimExpr,
    Ramp,
    Select,
    SeqStmt,
    Stmt,
    Sub,
    Var,
    const,
    decl_buffer,
)

__all__ = [
    "PrimFunc",
    "parse",
    "eval",
    "transform",
    "stmt_functor",
    "Node",
    "PrimExpr",
    "Stmt",
    "Var",
    "Buffer",
    "decl_buffer",
    "const",
    "IntImm",
    "FloatImm",
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Mod",
    "FloorDiv",
    "FloorMod",
    "Min",
    "Max",
    "EQ",
    "NE",
    "LT",
    "LE",
    "GT",
    "GE",
    "And",
    "Or",
    "Not",
    "Select",
    "Cast",
    "BufferLoad",
    "Call",
    "Ramp",
    "Broadcast",
    "Let",
    "ForKind",
    "For",
    "BufferStore",
    "LetStmt",
    "IfThenElse",
    "SeqStmt",
    "AllocBuffer",
    "DeclBuffer",
    "Evaluate",
    "AttrStmt",
]
