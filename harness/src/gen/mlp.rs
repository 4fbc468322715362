//! The `mlp` workload: a multi-layer perceptron. Each layer is its own function
//! `@layerI(%x: Tensor[(batch, in), f32]) -> Tensor[(batch, out), f32]` computing
//! `act(bias_add(dense(x, W), b))` with seeded fill weights; `@main` calls the layers in turn
//! and ends with a softmax. The first layer maps `input` features to `width`, the others keep
//! `width` — or, with `varied_widths`, each layer but the last maps to its own width drawn
//! from the seed in `[width / 2, 2 * width]`, so that every layer has its own shapes (lowering
//! then makes about one kernel per layer: the loop level's many-PrimFunc workload).

use passel_engine::ir::{Module, Type};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::emit::{f32_ty, int, item_seed, Emit};

/// The activation after each dense layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// `relu` everywhere.
    Relu,
    /// `gelu` everywhere.
    Gelu,
    /// `relu` or `gelu`, chosen per layer from the seed.
    Mixed,
}

/// Options of [`mlp`].
#[derive(Clone, Debug)]
pub struct MlpOptions {
    /// Dense layers (one function each).
    pub layers: usize,
    /// Rows of the input batch.
    pub batch: u64,
    /// Input features.
    pub input: u64,
    /// Hidden width (features of every layer's output).
    pub width: u64,
    /// Activation after each layer.
    pub activation: Activation,
    /// Seed of the weights (and of the activations when mixed).
    pub seed: u64,
    /// Each layer but the last has its own output width, drawn from the seed in
    /// `[width / 2, 2 * width]`.
    pub varied_widths: bool,
}

impl Default for MlpOptions {
    fn default() -> Self {
        MlpOptions {
            layers: 8,
            batch: 4,
            input: 32,
            width: 64,
            activation: Activation::Mixed,
            seed: 0,
            varied_widths: false,
        }
    }
}

/// Builds the MLP: `@main` then `@layer0`, `@layer1`, ….
pub fn mlp(opts: &MlpOptions) -> Module {
    let mut module = Module::new();
    let x_ty = f32_ty(&[opts.batch, opts.input]);
    let h_ty = f32_ty(&[opts.batch, opts.width]);
    let out_ty = if opts.layers == 0 { x_ty.clone() } else { h_ty };

    let mut e = Emit::new(item_seed(opts.seed, u64::MAX));
    let x = e.param("x", x_ty.clone());
    let mut cur = x;
    for i in 0..opts.layers {
        let g = e.b.global(&format!("layer{i}"));
        let value = e.b.apply(g, &[cur]);
        cur = e.bind("h", value);
    }
    let out = e.call("softmax", &[cur], int("axis", -1));
    module.add("main", e.finish(&[x], out, out_ty)).expect("generated names are unique");

    let mut in_features = opts.input;
    for i in 0..opts.layers {
        let mut rng = ChaCha8Rng::seed_from_u64(item_seed(opts.seed, i as u64));
        let relu = match opts.activation {
            Activation::Relu => true,
            Activation::Gelu => false,
            Activation::Mixed => rng.gen_bool(0.5),
        };
        let out_features = if opts.varied_widths && i + 1 < opts.layers {
            let lo = (opts.width / 2).max(1);
            rng.gen_range(lo..=opts.width.saturating_mul(2).max(lo))
        } else {
            opts.width
        };
        let func = layer(
            item_seed(opts.seed, i as u64),
            f32_ty(&[opts.batch, in_features]),
            f32_ty(&[opts.batch, out_features]),
            relu,
        );
        module.add(&format!("layer{i}"), func).expect("generated names are unique");
        in_features = out_features;
    }
    module
}

fn layer(seed: u64, x_ty: Type, out_ty: Type, relu: bool) -> passel_engine::ir::Function {
    let features = |t: &Type| t.as_tensor().map(|t| t.shape[1]).unwrap_or(1);
    let (in_features, out_features) = (features(&x_ty), features(&out_ty));
    let mut e = Emit::new(seed);
    let x = e.param("x", x_ty);
    let scale = 1.0 / (in_features.max(1) as f64).sqrt();
    let w = e.weight(&[out_features, in_features], scale);
    let d = e.call0("dense", &[x, w]);
    let bias = e.weight(&[out_features], 0.1);
    let biased = e.call("bias_add", &[d, bias], int("axis", -1));
    let act = e.call0(if relu { "relu" } else { "gelu" }, &[biased]);
    e.finish(&[x], act, out_ty)
}
