//! The `transformer` workload: a stack of pre-norm transformer encoder layers on a
//! `Tensor[(seq, hidden), f32]` activation. Attention: `layer_norm`, query/key/value `dense`
//! projections, `matmul(q, transpose(k))` scaled by `1/sqrt(hidden)`, `softmax`, `matmul` with
//! the values, an output projection and a residual `add`. Feed-forward: `layer_norm`, `dense` to
//! `ffn` features, `bias_add`, `gelu`, `dense` back, residual `add`. Single-head attention keeps
//! every tensor 2-d.
//!
//! With `per_block` each layer is three functions — `@layerI` calls `@attentionI` then `@ffnI` —
//! otherwise one function `@layerI` holds both blocks. `@main` calls the layers in turn and
//! applies a final `layer_norm`. Weights are seeded fills.

use passel_engine::ir::{Module, NodeId};

use super::emit::{f32_ty, int, item_seed, Emit};

/// Options of [`transformer`].
#[derive(Clone, Debug)]
pub struct TransformerOptions {
    /// Encoder layers.
    pub layers: usize,
    /// Sequence length.
    pub seq: u64,
    /// Hidden size.
    pub hidden: u64,
    /// Inner size of the feed-forward block.
    pub ffn: u64,
    /// One function per block (attention, feed-forward) plus one per layer, instead of one
    /// function per layer.
    pub per_block: bool,
    /// Seed of the weights.
    pub seed: u64,
}

impl Default for TransformerOptions {
    fn default() -> Self {
        TransformerOptions { layers: 4, seq: 16, hidden: 32, ffn: 64, per_block: false, seed: 0 }
    }
}

/// Builds the encoder: `@main` then, per layer, `@layerI` (and `@attentionI`, `@ffnI`).
pub fn transformer(opts: &TransformerOptions) -> Module {
    let ty = f32_ty(&[opts.seq, opts.hidden]);
    let mut module = Module::new();

    let mut e = Emit::new(item_seed(opts.seed, u64::MAX));
    let x = e.param("x", ty.clone());
    let mut cur = x;
    for i in 0..opts.layers {
        cur = apply(&mut e, &format!("layer{i}"), cur);
    }
    let out = layer_norm(&mut e, cur, opts.hidden);
    module.add("main", e.finish(&[x], out, ty.clone())).expect("generated names are unique");

    for i in 0..opts.layers {
        let seed = item_seed(opts.seed, i as u64);
        let mut e = Emit::new(seed);
        let x = e.param("x", ty.clone());
        let out = if opts.per_block {
            let a = apply(&mut e, &format!("attention{i}"), x);
            apply(&mut e, &format!("ffn{i}"), a)
        } else {
            let a = attention(&mut e, x, opts);
            ffn(&mut e, a, opts)
        };
        module.add(&format!("layer{i}"), e.finish(&[x], out, ty.clone())).expect("generated names are unique");
        if opts.per_block {
            let block = |name: &str, salt: u64, body: fn(&mut Emit, NodeId, &TransformerOptions) -> NodeId| {
                let mut e = Emit::new(seed ^ salt);
                let x = e.param("x", ty.clone());
                let out = body(&mut e, x, opts);
                (format!("{name}{i}"), e.finish(&[x], out, ty.clone()))
            };
            for (name, func) in [block("attention", 1 << 62, attention), block("ffn", 1 << 61, ffn)] {
                module.add(&name, func).expect("generated names are unique");
            }
        }
    }
    module
}

/// `let %hN = @name(x)`.
fn apply(e: &mut Emit, name: &str, x: NodeId) -> NodeId {
    let g = e.b.global(name);
    let value = e.b.apply(g, &[x]);
    e.bind("h", value)
}

fn layer_norm(e: &mut Emit, x: NodeId, hidden: u64) -> NodeId {
    let gamma = e.full(&[hidden], 1.0);
    let beta = e.full(&[hidden], 0.0);
    e.call("layer_norm", &[x, gamma, beta], int("axis", -1))
}

fn attention(e: &mut Emit, x: NodeId, opts: &TransformerOptions) -> NodeId {
    let h = opts.hidden;
    let scale = 1.0 / (h.max(1) as f64).sqrt();
    let ln = layer_norm(e, x, h);
    let proj = |e: &mut Emit, input: NodeId| {
        let w = e.weight(&[h, h], scale);
        e.call0("dense", &[input, w])
    };
    let q = proj(e, ln);
    let k = proj(e, ln);
    let v = proj(e, ln);
    let kt = e.call0("transpose", &[k]);
    let scores = e.call0("matmul", &[q, kt]);
    let s = e.scalar(scale as f32);
    let scaled = e.call0("multiply", &[scores, s]);
    let p = e.call("softmax", &[scaled], int("axis", -1));
    let attn = e.call0("matmul", &[p, v]);
    let o = proj(e, attn);
    e.call0("add", &[x, o])
}

fn ffn(e: &mut Emit, x: NodeId, opts: &TransformerOptions) -> NodeId {
    let (h, f) = (opts.hidden, opts.ffn);
    let ln = layer_norm(e, x, h);
    let w1 = e.weight(&[f, h], 1.0 / (h.max(1) as f64).sqrt());
    let up = e.call0("dense", &[ln, w1]);
    let b1 = e.weight(&[f], 0.1);
    let biased = e.call("bias_add", &[up, b1], int("axis", -1));
    let act = e.call0("gelu", &[biased]);
    let w2 = e.weight(&[h, f], 1.0 / (f.max(1) as f64).sqrt());
    let down = e.call0("dense", &[act, w2]);
    e.call0("add", &[x, down])
}
