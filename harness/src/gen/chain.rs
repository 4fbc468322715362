//! The `chain` workload: many independent functions, each a chain of elementwise operations on
//! a small tensor, with work for the standard passes mixed in: constant subexpressions (for
//! FoldConstant), duplicated subexpressions (for EliminateCommonSubexpr), dead values (for
//! DeadCodeElimination) and algebraic identities (for SimplifyExpr).

use passel_engine::ir::{Attrs, Constant, DType, FunctionBuilder, Module, NodeId, Type};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::op;

/// Options of [`chain`].
#[derive(Clone, Debug)]
pub struct ChainOptions {
    /// Number of functions.
    pub functions: usize,
    /// Operations on the main chain of each function (extra dead and duplicate bindings come on
    /// top, about one in five).
    pub ops: usize,
    /// Shape of every tensor.
    pub shape: Vec<u64>,
    /// Seed of the generator.
    pub seed: u64,
}

impl Default for ChainOptions {
    fn default() -> Self {
        ChainOptions { functions: 100, ops: 50, shape: vec![8, 8], seed: 0 }
    }
}

/// Builds the chain workload: functions `@f0`, `@f1`, … each of type `fn(T) -> T`.
pub fn chain(opts: &ChainOptions) -> Module {
    let mut module = Module::new();
    for (name, func) in chain_functions(opts) {
        module.add(&name, func).expect("generated names are unique");
    }
    module
}

/// The functions of [`chain`], made one at a time as the iterator is advanced (how `passel gen
/// chain` prints a workload larger than memory).
pub fn chain_functions(opts: &ChainOptions) -> impl Iterator<Item = (String, passel_engine::ir::Function)> + '_ {
    (0..opts.functions).map(move |i| {
        // One stream per function, so function i is the same whatever the function count.
        let mut rng = ChaCha8Rng::seed_from_u64(opts.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ i as u64);
        (format!("f{i}"), chain_function(opts, &mut rng))
    })
}

fn chain_function(opts: &ChainOptions, rng: &mut ChaCha8Rng) -> passel_engine::ir::Function {
    let ty = Type::tensor(opts.shape.clone(), DType::F32);
    let mut b = FunctionBuilder::new();
    let x = b.var("x", Some(ty.clone()));
    let mut bindings: Vec<(NodeId, NodeId)> = Vec::with_capacity(opts.ops * 2);
    let mut cur = x;
    let mut n = 0usize;
    let mut fresh = |b: &mut FunctionBuilder, prefix: &str| {
        n += 1;
        b.var(&format!("{prefix}{n}"), None)
    };
    let scalar = |b: &mut FunctionBuilder, v: f32| b.constant(Constant::scalar_f32(v));
    let unary = ["relu", "tanh", "sigmoid", "negative"];
    for _ in 0..opts.ops {
        let value = match rng.gen_range(0..10) {
            // A constant subexpression: FoldConstant turns it into one constant.
            0 => {
                let (c1, c2) = (scalar(&mut b, rng.gen_range(1..4) as f32), scalar(&mut b, 0.5));
                let prod = b.call(op("multiply"), &[c1, c2], Attrs::new());
                let c = fresh(&mut b, "c");
                bindings.push((c, prod));
                b.call(op("add"), &[cur, c], Attrs::new())
            }
            // A duplicated subexpression: EliminateCommonSubexpr merges the two bindings.
            1 => {
                let k = rng.gen_range(1..8) as f32 * 0.25;
                let k1 = scalar(&mut b, k);
                let a1 = b.call(op("multiply"), &[cur, k1], Attrs::new());
                let d1 = fresh(&mut b, "v");
                bindings.push((d1, a1));
                let k2 = scalar(&mut b, k);
                let a2 = b.call(op("multiply"), &[cur, k2], Attrs::new());
                let d2 = fresh(&mut b, "v");
                bindings.push((d2, a2));
                b.call(op("add"), &[d1, d2], Attrs::new())
            }
            // A dead value: DeadCodeElimination removes it.
            2 => {
                let e = b.call(op("tanh"), &[cur], Attrs::new());
                let dead = fresh(&mut b, "dead");
                bindings.push((dead, e));
                let name = unary[rng.gen_range(0..unary.len())];
                b.call(op(name), &[cur], Attrs::new())
            }
            // An identity: SimplifyExpr removes it.
            3 => {
                let (name, v) = if rng.gen_bool(0.5) { ("multiply", 1.0) } else { ("add", 0.0) };
                let c = scalar(&mut b, v);
                b.call(op(name), &[cur, c], Attrs::new())
            }
            4..=6 => {
                let name = unary[rng.gen_range(0..unary.len())];
                b.call(op(name), &[cur], Attrs::new())
            }
            _ => {
                let name = ["add", "multiply", "subtract", "maximum"][rng.gen_range(0..4)];
                let c = scalar(&mut b, rng.gen_range(-4..=4) as f32 * 0.125);
                b.call(op(name), &[cur, c], Attrs::new())
            }
        };
        let v = fresh(&mut b, "v");
        bindings.push((v, value));
        cur = v;
    }
    let body = b.block(&bindings, cur);
    b.finish(&[x], body, Some(ty), Attrs::new())
}
