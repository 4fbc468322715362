//! Properties of the tir passes over generated PrimFuncs: every pass's output verifies, the
//! output is deterministic, and a second run of the pass over its own output is stable.
//!
//! The generator draws a small function from a tape of random numbers (so proptest shrinks
//! the tape): nested `serial` / `unroll` / `vectorized` loops with static ranges, `if`s,
//! `let`s, `eval`s and stores whose indices are `floormod(…, 16)` of random affine and
//! non-affine integer expressions over the loop and `let` variables (always in bounds, never
//! a static division by zero). Inside a `vectorized` loop every access of `%A` is at
//! `floormod(add(%v, c), 16)` for its variable `%v` and one constant `c`, so its iterations
//! are independent, as the loop kind promises. Two-dimensional buffers (the strided, offset
//! output `%M` and `alloc`ated temporaries) are read and written outside vectorized loops.
//!
//! The semantics property: the interpreter ([`run_prim_func`]) gives the same `%A` before and
//! after each pass, for random `%n` and `%I`, whenever the input runs without error.

use std::sync::Arc;

use passel_engine::interp::{run_prim_func, PrimArg, PrimScalar};
use passel_engine::ir::{parse_module, DType, Tensor};
use passel_engine::tir::{print_prim_func, tree_verdict, verify_prim_func, PrimFunc};
use passel_passes::tir::{
    common_subexpr_elim, flatten_buffer, loop_partition, narrow_datatype, remove_no_op, simplify, storage_rewrite,
    unroll_loop, vectorize_loop,
};
use proptest::prelude::*;

struct Gen<'a> {
    tape: &'a [u32],
    pos: usize,
    vars: Vec<String>,
    n_vars: usize,
    out: String,
    stmts: usize,
    /// Inside a `vectorized` loop: its variable and the offset of the one `%A` element each
    /// iteration may touch (so iterations are independent, as the loop kind promises).
    vec: Option<(String, u32)>,
    /// The two-dimensional buffers in scope: `%M` and the `alloc`s around.
    grids: Vec<String>,
}

impl Gen<'_> {
    fn next(&mut self, n: u32) -> u32 {
        let v = self.tape.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        v % n.max(1)
    }

    fn expr(&mut self, depth: u32) -> String {
        let choice = if depth == 0 { self.next(3) } else { self.next(12) };
        match choice {
            0 => format!("{}", self.next(9) as i64 - 4),
            1 | 2 if !self.vars.is_empty() => {
                let i = self.next(self.vars.len() as u32) as usize;
                self.vars[i].clone()
            }
            1 | 2 => "%n".to_string(),
            3 => format!("add({}, {})", self.expr(depth - 1), self.expr(depth - 1)),
            4 => format!("sub({}, {})", self.expr(depth - 1), self.expr(depth - 1)),
            5 => format!("mul({}, {})", self.expr(depth - 1), self.next(5) as i64 - 1),
            6 => format!("mul({}, {})", self.expr(depth - 1), self.expr(depth - 1)),
            7 => format!("floordiv({}, {})", self.expr(depth - 1), self.next(4) + 1),
            8 => format!("floormod({}, {})", self.expr(depth - 1), self.next(4) + 1),
            9 => format!("min({}, {})", self.expr(depth - 1), self.expr(depth - 1)),
            10 => format!("select({}, {}, {})", self.cond(depth - 1), self.expr(depth - 1), self.expr(depth - 1)),
            _ => match (self.next(3), self.vec.clone()) {
                (0, Some((v, c))) => format!("%A[floormod(add({v}, {c}), 16)]"),
                (0, None) => format!("%A[floormod({}, 16)]", self.expr(depth - 1)),
                (1, None) => {
                    let k = self.next(self.grids.len() as u32) as usize;
                    let m = self.grids[k].clone();
                    format!("{m}[floormod({}, 2), floormod({}, 3)]", self.expr(depth - 1), self.expr(depth - 1))
                }
                _ => format!("%I[floormod({}, 16)]", self.expr(depth - 1)),
            },
        }
    }

    fn cond(&mut self, depth: u32) -> String {
        let op = ["lt", "le", "eq", "ne", "gt", "ge"][self.next(6) as usize];
        let c = format!("{op}({}, {})", self.expr(depth), self.expr(depth));
        match self.next(4) {
            0 => format!("not({c})"),
            1 => format!("and({c}, {})", if self.next(2) == 0 { "true" } else { "false" }),
            _ => c,
        }
    }

    fn fresh(&mut self, prefix: &str) -> String {
        self.n_vars += 1;
        format!("%{prefix}{}", self.n_vars)
    }

    fn block(&mut self, depth: u32, indent: usize) {
        let n = 1 + self.next(3);
        for _ in 0..n {
            if self.stmts > 24 {
                return;
            }
            self.stmts += 1;
            let pad = "  ".repeat(indent);
            let kind = if depth == 0 { self.next(3) } else { self.next(8) };
            match kind {
                1 if self.vec.is_none() && self.next(2) == 0 => {
                    let k = self.next(self.grids.len() as u32) as usize;
                    let m = self.grids[k].clone();
                    let (i, j, value) = (self.expr(2), self.expr(2), self.expr(2));
                    self.out.push_str(&format!("{pad}{m}[floormod({i}, 2), floormod({j}, 3)] = {value};\n"));
                }
                6 if self.next(3) == 0 => {
                    let t = self.fresh("T");
                    self.out.push_str(&format!("{pad}alloc {t}: Buffer[(2, 3), i64] {{\n"));
                    self.grids.push(t);
                    self.block(depth - 1, indent + 1);
                    self.grids.pop();
                    self.out.push_str(&format!("{pad}}}\n"));
                }
                0 | 1 => {
                    let idx = match self.vec.clone() {
                        Some((v, c)) => format!("add({v}, {c})"),
                        None => self.expr(2),
                    };
                    let value = self.expr(2);
                    self.out.push_str(&format!("{pad}%A[floormod({idx}, 16)] = {value};\n"));
                }
                7 if self.vec.is_none() => {
                    let v = self.fresh("v");
                    let (min, extent, c) = (self.next(3), self.next(7), self.next(16));
                    self.out.push_str(&format!("{pad}for {v} in vectorized({min}, {extent}) {{\n"));
                    self.vars.push(v.clone());
                    self.vec = Some((v, c));
                    self.block(depth - 1, indent + 1);
                    self.vec = None;
                    self.vars.pop();
                    self.out.push_str(&format!("{pad}}}\n"));
                }
                2 => {
                    let e = self.expr(2);
                    self.out.push_str(&format!("{pad}eval {e};\n"));
                }
                3 | 4 => {
                    let v = self.fresh("i");
                    let kind = if self.next(3) == 0 { "unroll" } else { "serial" };
                    let (min, extent) = (self.next(3), self.next(4));
                    self.out.push_str(&format!("{pad}for {v} in {kind}({min}, {extent}) {{\n"));
                    self.vars.push(v);
                    self.block(depth - 1, indent + 1);
                    self.vars.pop();
                    self.out.push_str(&format!("{pad}}}\n"));
                }
                5 => {
                    let c = self.cond(1);
                    self.out.push_str(&format!("{pad}if ({c}) {{\n"));
                    self.block(depth - 1, indent + 1);
                    if self.next(2) == 0 {
                        self.out.push_str(&format!("{pad}}} else {{\n"));
                        self.block(depth - 1, indent + 1);
                    }
                    self.out.push_str(&format!("{pad}}}\n"));
                }
                _ => {
                    let v = self.fresh("x");
                    let value = self.expr(2);
                    self.out.push_str(&format!("{pad}let {v} = {value} {{\n"));
                    self.vars.push(v);
                    self.block(depth - 1, indent + 1);
                    self.vars.pop();
                    self.out.push_str(&format!("{pad}}}\n"));
                }
            }
        }
    }
}

fn generate(tape: &[u32]) -> String {
    let mut g = Gen {
        tape,
        pos: 0,
        vars: Vec::new(),
        n_vars: 0,
        out: String::new(),
        stmts: 0,
        vec: None,
        grids: vec!["%M".to_string()],
    };
    g.out.push_str(
        "prim @f(%n: i64, %I: Buffer[(16,), i64], %A: Buffer[(16,), i64], %M: Buffer[(2, 3), i64, strides=[4, 1], offset=1]) {\n",
    );
    g.block(3, 1);
    g.out.push_str("}\n");
    g.out
}

/// A pass as a plain function of one PrimFunc.
type PassFn = fn(&Arc<PrimFunc>) -> Arc<PrimFunc>;

fn passes() -> Vec<(&'static str, PassFn)> {
    vec![
        ("Simplify", simplify::simplify),
        ("RemoveNoOp", remove_no_op::remove_no_op),
        ("UnrollLoop", |f| unroll_loop::unroll_loop(f, unroll_loop::UnrollConfig::default())),
        ("UnrollLoop(auto)", |f| {
            let cfg = unroll_loop::UnrollConfig { auto_max_step: 16, auto_max_extent: 2, ..Default::default() };
            unroll_loop::unroll_loop(f, cfg)
        }),
        ("VectorizeLoop", |f| vectorize_loop::vectorize_loop(f, true)),
        ("VectorizeLoop(disabled)", |f| vectorize_loop::vectorize_loop(f, false)),
        ("VectorizeLoop,Simplify", |f| simplify::simplify(&vectorize_loop::vectorize_loop(f, true))),
        ("FlattenBuffer", flatten_buffer::flatten_buffer),
        ("StorageRewrite", storage_rewrite::storage_rewrite),
        ("NarrowDataType(32)", |f| narrow_datatype::narrow_datatype(f, 32)),
        ("NarrowDataType(8)", |f| narrow_datatype::narrow_datatype(f, 8)),
        ("CommonSubexprElimTIR", |f| common_subexpr_elim::common_subexpr_elim(f, true, false)),
        ("CommonSubexprElimTIR(identify_equiv_terms)", |f| common_subexpr_elim::common_subexpr_elim(f, true, true)),
        ("FlattenBuffer,Simplify", |f| simplify::simplify(&flatten_buffer::flatten_buffer(f))),
        ("LoopPartition", |f| loop_partition::loop_partition(f, loop_partition::PartitionConfig::default())),
        ("LoopPartition(const)", |f| {
            let cfg = loop_partition::PartitionConfig { partition_const_loop: true, ..Default::default() };
            loop_partition::loop_partition(f, cfg)
        }),
        ("LoopPartition(const, no_unroll_loop_with_extent_one),Simplify", |f| {
            let cfg = loop_partition::PartitionConfig {
                partition_const_loop: true,
                no_unroll_loop_with_extent_one: true,
                ..Default::default()
            };
            simplify::simplify(&loop_partition::loop_partition(f, cfg))
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn tir_passes_give_verified_deterministic_output(tape in proptest::collection::vec(any::<u32>(), 16..200)) {
        let src = generate(&tape);
        let m = parse_module(&src).unwrap_or_else(|e| panic!("generated text parses: {e}\n{src}"));
        let f = m.get_prim("f").expect("@f").clone();
        prop_assert!(verify_prim_func("f", &f).is_empty(), "generated function verifies:\n{src}");
        for (name, run) in passes() {
            let out = run(&f);
            let text = print_prim_func("f", &out);
            let errors = verify_prim_func("f", &out);
            prop_assert!(errors.is_empty(), "{name} broke the IR: {errors:?}\ninput:\n{src}\noutput:\n{text}");
            prop_assert_eq!(&print_prim_func("f", &run(&f)), &text, "{} is deterministic", name);
            // The tree walk that decides structural equality without printing agrees with the
            // texts whenever it decides.
            if let Some(same) = tree_verdict(&f, &out) {
                prop_assert_eq!(same, text == print_prim_func("f", &f), "tree_verdict on {}\n{}", name, text);
            }
            // The printed output parses back to the same function.
            let again = parse_module(&text).unwrap_or_else(|e| panic!("{name} output parses: {e}\n{text}"));
            prop_assert_eq!(&print_prim_func("f", again.get_prim("f").expect("@f")), &text);
        }
    }

    #[test]
    fn tir_passes_keep_what_the_interpreter_computes(
        tape in proptest::collection::vec(any::<u32>(), 16..200),
        n in -6i64..6,
        input in proptest::collection::vec(-8i64..8, 16),
    ) {
        let src = generate(&tape);
        let m = parse_module(&src).unwrap_or_else(|e| panic!("generated text parses: {e}\n{src}"));
        let f = m.get_prim("f").expect("@f").clone();
        let run = |func: &PrimFunc| {
            let vals: Vec<f64> = input.iter().map(|&v| v as f64).collect();
            let i = Tensor::from_f64s(&[16], DType::I64, &vals).expect("tensor");
            run_prim_func("f", func, vec![PrimArg::Scalar(PrimScalar::Int(n)), PrimArg::Buffer(i)])
                .map(|out| format!("{out:?}"))
        };
        let Ok(want) = run(&f) else { return Ok(()) };
        for (name, pass) in passes() {
            let out = pass(&f);
            let got = run(&out);
            prop_assert_eq!(
                got.as_ref().ok(),
                Some(&want),
                "{} changed the result: {:?}\ninput:\n{}\noutput:\n{}",
                name,
                got.as_ref().err(),
                src,
                print_prim_func("f", &out)
            );
        }
    }
}
