#!/usr/bin/env python3
"""Writes the MLIR equivalent of a `passel gen chain` module, for comparing passel's text path
with mlir-opt's (docs/performance.md, "Parse, verify and print").

Usage:
    passel gen chain --functions 10000 --ops 50 --seed 1 > /tmp/chain.pir
    python3 scripts/chain_mlir.py /tmp/chain.pir > /tmp/chain.mlir
    mlir-opt /tmp/chain.mlir -o /tmp/chain.out.mlir                                   # parse + print
    mlir-opt /tmp/chain.mlir --pass-pipeline='builtin.module(func.func(canonicalize,cse))' -o …

Each `def @fK(%x: Tensor[(8, 8), f32]) -> …` becomes a `func.func @fK(%x: tensor<8x8xf32>)`
with one MLIR operation per passel operator call, on the same tensor type:

    add / multiply / subtract / maximum  ->  arith.addf / arith.mulf / arith.subf / arith.maximumf
    negative                             ->  arith.negf
    tanh                                 ->  math.tanh
    relu                                 ->  arith.maximumf with a 0.0 constant
    sigmoid                              ->  math.exp (MLIR has no sigmoid; a pure elementwise
                                             unary operation of the same form, never folded here)

MLIR does not broadcast, so a scalar literal (`0.5f`) becomes a splat constant of the tensor
type, `arith.constant dense<5.000000e-01> : tensor<8x8xf32>`; each distinct literal of a
function is one constant at the top of the function (where MLIR's canonical form puts them),
so MLIR parses fewer operations than passel parses literal uses. Only the chain's forms are
accepted: anything else is an error naming the line.
"""

import re
import sys

BINARY = {"add": "arith.addf", "multiply": "arith.mulf", "subtract": "arith.subf", "maximum": "arith.maximumf"}
UNARY = {"negative": "arith.negf", "tanh": "math.tanh", "sigmoid": "math.exp"}

DEF = re.compile(r"^def @(\w+)\(%x: Tensor\[\(([0-9, ]+)\), f32\]\) -> Tensor\[\(([0-9, ]+)\), f32\] \{$")
LET = re.compile(r"^  let %(\w+) = (\w+)\(([^()]*)\);$")
RESULT = re.compile(r"^  %(\w+)$")
LITERAL = re.compile(r"^-?[0-9]+(\.[0-9]+)?(e-?[0-9]+)?f$")


def fail(lineno, line, why):
    sys.exit(f"line {lineno}: {why}: {line!r}")


def convert(lines, out):
    func = None  # (name, tensor type, body lines, constants by literal)
    for lineno, line in enumerate(lines, 1):
        line = line.rstrip("\n")
        if func is None:
            if line == "":
                continue
            m = DEF.match(line)
            if not m or m.group(2) != m.group(3):
                fail(lineno, line, "expected `def @f(%x: Tensor[(…), f32]) -> <same type> {`")
            dims = [d.strip() for d in m.group(2).split(",") if d.strip()]
            func = (m.group(1), f"tensor<{'x'.join(dims)}xf32>", [], {})
            continue
        name, ty, body, consts = func

        def operand(text):
            text = text.strip()
            if text.startswith("%"):
                return text
            if not LITERAL.match(text):
                fail(lineno, line, f"unsupported operand `{text}`")
            value = float(text[:-1])
            if value not in consts:
                consts[value] = f"%cst{len(consts)}"
            return consts[value]

        if line == "}":
            out.write(f"func.func @{name}(%x: {ty}) -> {ty} {{\n")
            for value, cname in consts.items():
                out.write(f"  {cname} = arith.constant dense<{value:e}> : {ty}\n")
            out.writelines(body)
            out.write("}\n")
            func = None
            continue
        m = RESULT.match(line)
        if m:
            body.append(f"  return %{m.group(1)} : {ty}\n")
            continue
        m = LET.match(line)
        if not m:
            fail(lineno, line, "expected `let %v = op(args);`")
        var, op, args = m.group(1), m.group(2), [a for a in m.group(3).split(",")]
        if op in BINARY and len(args) == 2:
            a, b = operand(args[0]), operand(args[1])
            body.append(f"  %{var} = {BINARY[op]} {a}, {b} : {ty}\n")
        elif op in UNARY and len(args) == 1:
            body.append(f"  %{var} = {UNARY[op]} {operand(args[0])} : {ty}\n")
        elif op == "relu" and len(args) == 1:
            body.append(f"  %{var} = arith.maximumf {operand(args[0])}, {operand('0.0f')} : {ty}\n")
        else:
            fail(lineno, line, f"unsupported operator `{op}` with {len(args)} arguments")
    if func is not None:
        sys.exit("unterminated function at end of input")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: chain_mlir.py CHAIN.pir > CHAIN.mlir")
    with open(sys.argv[1]) as f:
        convert(f, sys.stdout)


if __name__ == "__main__":
    main()
