//! The `random` workload: well-typed random graphs. Function `@fI` takes one to three
//! parameters of type `T = Tensor[(n, n), f32]` or `V = Tensor[(n,), f32]` (the first is always
//! `T`) and returns a `T`. Its body is a random sequence of bindings drawn from: elementwise
//! unary and binary ops, ops with scalar constants, `bias_add` and broadcasting adds of a `V`,
//! reductions (`mean` to a `V`), `dense` / `matmul` with seeded fill weights, `softmax`, calls of
//! earlier functions `@fJ` (J < I, so the call graph is acyclic), tuples and projections, `if`s
//! on `greater(sum(x), 0.0f)` with nested branch blocks, and nested functions (which capture
//! outer variables) that are then called. Constant subexpressions, duplicated expressions,
//! identities and unused values appear naturally, so every standard pass has work.
//!
//! The generator tracks which variables of which type are in scope; nested blocks are generated
//! with an explicit depth bound (`max_depth`, at most [`MAX_DEPTH`]), so nesting never grows
//! with any other option.

use passel_engine::ir::{Function, Module, NodeId, Type};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::emit::{f32_ty, int, ints, item_seed, Emit};

/// The deepest nesting of `if` branches and nested functions the generator makes.
pub const MAX_DEPTH: usize = 8;

/// Options of [`random`].
#[derive(Clone, Debug)]
pub struct RandomOptions {
    /// Number of functions.
    pub functions: usize,
    /// Steps of each function's top-level block (each makes one to a few bindings; nested
    /// blocks make a third as many).
    pub bindings: usize,
    /// `n` of the tensor types `(n, n)` and `(n,)`.
    pub size: u64,
    /// Maximum nesting of `if` branches and nested functions (clamped to `MAX_DEPTH`, 8).
    pub max_depth: usize,
    /// Seed.
    pub seed: u64,
}

impl Default for RandomOptions {
    fn default() -> Self {
        RandomOptions { functions: 20, bindings: 20, size: 4, max_depth: 2, seed: 0 }
    }
}

/// A parameter kind: `T` (matrix) or `V` (vector).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    T,
    V,
}

/// Builds the module: `@f0`, `@f1`, ….
pub fn random(opts: &RandomOptions) -> Module {
    let sigs: Vec<Vec<Kind>> = (0..opts.functions)
        .map(|i| {
            let mut rng = ChaCha8Rng::seed_from_u64(item_seed(opts.seed, i as u64) ^ 0x5151);
            let n = rng.gen_range(1..=3);
            (0..n).map(|p| if p == 0 || rng.gen_bool(0.5) { Kind::T } else { Kind::V }).collect()
        })
        .collect();
    let mut module = Module::new();
    for i in 0..opts.functions {
        let func = Gen::function(opts, &sigs, i);
        module.add(&format!("f{i}"), func).expect("generated names are unique");
    }
    module
}

struct Gen<'a> {
    e: Emit,
    rng: ChaCha8Rng,
    opts: &'a RandomOptions,
    /// Signatures of the functions this one may call.
    callees: &'a [Vec<Kind>],
    t_ty: Type,
    /// Variables in scope, by type.
    ts: Vec<NodeId>,
    vs: Vec<NodeId>,
}

impl<'a> Gen<'a> {
    fn function(opts: &'a RandomOptions, sigs: &'a [Vec<Kind>], i: usize) -> Function {
        let seed = item_seed(opts.seed, i as u64);
        let n = opts.size.max(1);
        let mut g = Gen {
            e: Emit::new(seed),
            rng: ChaCha8Rng::seed_from_u64(seed),
            opts,
            callees: &sigs[..i],
            t_ty: f32_ty(&[n, n]),
            ts: Vec::new(),
            vs: Vec::new(),
        };
        let params: Vec<NodeId> = sigs[i]
            .iter()
            .enumerate()
            .map(|(p, &k)| {
                let var = g.e.param(&format!("p{p}"), g.ty(k));
                match k {
                    Kind::T => g.ts.push(var),
                    Kind::V => g.vs.push(var),
                }
                var
            })
            .collect();
        let result = g.steps(opts.bindings, 0);
        let t_ty = g.t_ty.clone();
        g.e.finish(&params, result, t_ty)
    }

    fn ty(&self, k: Kind) -> Type {
        match k {
            Kind::T => self.t_ty.clone(),
            Kind::V => f32_ty(&[self.opts.size.max(1)]),
        }
    }

    /// A `T` in scope, usually one of the last three made, so most values feed later ones and
    /// the graph is deep rather than mostly dead.
    fn pick_t(&mut self) -> NodeId {
        let n = self.ts.len();
        if n > 3 && self.rng.gen_bool(0.7) {
            return self.ts[n - 1 - self.rng.gen_range(0..3)];
        }
        self.ts[self.rng.gen_range(0..n)]
    }

    /// A `V` in scope, made from a `T` by a reduction if there is none.
    fn pick_v(&mut self) -> NodeId {
        if self.vs.is_empty() || self.rng.gen_bool(0.2) {
            let t = self.pick_t();
            let axis = self.rng.gen_range(0..2);
            let v = self.e.call("mean", &[t], ints("axis", &[axis]));
            self.vs.push(v);
            return v;
        }
        self.vs[self.rng.gen_range(0..self.vs.len())]
    }

    /// Emits `n` random steps into the current block and returns the newest `T` in scope for
    /// its result (made by the block unless it made none).
    fn steps(&mut self, n: usize, depth: usize) -> NodeId {
        for _ in 0..n {
            let t = self.step(depth);
            self.ts.push(t);
        }
        self.ts[self.ts.len() - 1]
    }

    /// One step: emits one or more bindings and returns a new `T`.
    fn step(&mut self, depth: usize) -> NodeId {
        let nested = depth < self.opts.max_depth.min(MAX_DEPTH);
        let n = self.opts.size.max(1);
        match self.rng.gen_range(0..16) {
            0..=2 => {
                let name = ["relu", "tanh", "sigmoid", "negative", "gelu"][self.rng.gen_range(0..5)];
                let a = self.pick_t();
                self.e.call0(name, &[a])
            }
            3 | 4 => {
                let name = ["add", "subtract", "multiply", "maximum", "minimum"][self.rng.gen_range(0..5)];
                let (a, b) = (self.pick_t(), self.pick_t());
                self.e.call0(name, &[a, b])
            }
            5 => {
                // Identities and small constants: work for SimplifyExpr.
                let (name, c) = match self.rng.gen_range(0..3) {
                    0 => ("multiply", 1.0),
                    1 => ("add", 0.0),
                    _ => ("multiply", self.rng.gen_range(-4..=4) as f32 * 0.25),
                };
                let a = self.pick_t();
                let c = self.e.scalar(c);
                self.e.call0(name, &[a, c])
            }
            6 => {
                let (a, v) = (self.pick_t(), self.pick_v());
                if self.rng.gen_bool(0.5) {
                    self.e.call("bias_add", &[a, v], int("axis", 1))
                } else {
                    self.e.call0("add", &[a, v])
                }
            }
            7 => {
                let a = self.pick_t();
                if self.rng.gen_bool(0.5) {
                    let w = self.e.weight(&[n, n], 0.5);
                    self.e.call0("dense", &[a, w])
                } else {
                    let b = self.pick_t();
                    self.e.call0("matmul", &[a, b])
                }
            }
            8 => {
                let a = self.pick_t();
                self.e.call("softmax", &[a], int("axis", -1))
            }
            9 => {
                // A constant subexpression: work for FoldConstant.
                let (w, c) = (self.e.weight(&[n, n], 1.0), self.e.full(&[n, n], 0.5));
                let k = self.e.call0("multiply", &[w, c]);
                let a = self.pick_t();
                self.e.call0("add", &[a, k])
            }
            10 => {
                // The same expression twice: work for EliminateCommonSubexpr.
                let a = self.pick_t();
                let x = self.e.call0("tanh", &[a]);
                let y = self.e.call0("tanh", &[a]);
                self.e.call0("add", &[x, y])
            }
            11 if !self.callees.is_empty() => {
                let j = self.rng.gen_range(0..self.callees.len());
                let args: Vec<NodeId> = self.callees[j]
                    .iter()
                    .map(|&k| match k {
                        Kind::T => self.pick_t(),
                        Kind::V => self.pick_v(),
                    })
                    .collect();
                let g = self.e.b.global(&format!("f{j}"));
                let value = self.e.b.apply(g, &args);
                self.e.bind("r", value)
            }
            12 => {
                let (a, v) = (self.pick_t(), self.pick_v());
                let swap = self.rng.gen_bool(0.5);
                let fields = if swap { [v, a] } else { [a, v] };
                let tuple = self.e.b.tuple(&fields);
                let t = self.e.bind("t", tuple);
                let value = self.e.b.proj(t, if swap { 1 } else { 0 });
                self.e.bind("v", value)
            }
            13 if nested => {
                let a = self.pick_t();
                let s = self.e.call0("sum", &[a]);
                let zero = self.e.scalar(0.0);
                let cond = self.e.call0("greater", &[s, zero]);
                let then_ = self.nested_block(depth);
                let else_ = self.nested_block(depth);
                let value = self.e.b.if_(cond, then_, else_);
                self.e.bind("if", value)
            }
            14 if nested => {
                let p = self.e.param(&format!("q{}", self.e.b.num_nodes()), self.t_ty.clone());
                self.ts.push(p);
                let body = self.nested_block(depth);
                self.ts.retain(|&t| t != p);
                let t_ty = self.t_ty.clone();
                let value = self.e.b.closure(&[p], body, Some(t_ty), Default::default());
                let f = self.e.bind("fn", value);
                let a = self.pick_t();
                let call = self.e.b.apply(f, &[a]);
                self.e.bind("v", call)
            }
            _ => {
                let a = self.pick_t();
                let name = ["relu", "tanh"][self.rng.gen_range(0..2)];
                self.e.call0(name, &[a])
            }
        }
    }

    /// A nested block: one op on the newest `T`, then up to a third of the top-level steps; its
    /// variables go out of scope when it ends.
    fn nested_block(&mut self, depth: usize) -> NodeId {
        let (nt, nv) = (self.ts.len(), self.vs.len());
        self.e.open();
        // Start from the newest `T` in scope (a nested function's parameter, for one).
        let newest = self.ts[self.ts.len() - 1];
        let first = self.e.call0(["relu", "tanh", "sigmoid"][self.rng.gen_range(0..3)], &[newest]);
        self.ts.push(first);
        let steps = self.rng.gen_range(0..=(self.opts.bindings / 3).max(1));
        let result = self.steps(steps, depth + 1);
        let block = self.e.close(result);
        self.ts.truncate(nt);
        self.vs.truncate(nv);
        block
    }
}
