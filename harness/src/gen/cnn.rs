//! The `cnn` workload: a residual convolutional network on NCHW images. `@main` applies a stem
//! convolution (3 input channels to `channels`), calls each residual block in turn, then
//! averages over the spatial axes and classifies with a dense layer. Each block is its own
//! function `@blockI(%x: Tensor[(N, C, H, W), f32])`:
//! `relu(add(x, bn(conv(relu(bn(conv(x)))))))` with 3×3 convolutions (padding 1, so shapes are
//! kept), inference batch norm (`batch_norm(…).0`) and seeded fill weights.

use passel_engine::ir::{Attrs, Function, Module, NodeId};

use super::emit::{f32_ty, int, ints, item_seed, Emit};

/// Options of [`cnn`].
#[derive(Clone, Debug)]
pub struct CnnOptions {
    /// Residual blocks (one function each).
    pub blocks: usize,
    /// Images per batch.
    pub batch: u64,
    /// Channels of every block.
    pub channels: u64,
    /// Height and width of the images.
    pub image: u64,
    /// Output classes.
    pub classes: u64,
    /// Seed of the weights.
    pub seed: u64,
}

impl Default for CnnOptions {
    fn default() -> Self {
        CnnOptions { blocks: 4, batch: 1, channels: 16, image: 16, classes: 10, seed: 0 }
    }
}

/// Builds the network: `@main` then `@block0`, `@block1`, ….
pub fn cnn(opts: &CnnOptions) -> Module {
    let (n, c, hw) = (opts.batch, opts.channels, opts.image);
    let img_ty = f32_ty(&[n, 3, hw, hw]);
    let act_ty = f32_ty(&[n, c, hw, hw]);
    let mut module = Module::new();

    let mut e = Emit::new(item_seed(opts.seed, u64::MAX));
    let x = e.param("image", img_ty);
    let w = e.weight(&[c, 3, 3, 3], 0.2);
    let stem = e.call("conv2d", &[x, w], conv_attrs());
    let mut cur = e.call0("relu", &[stem]);
    for i in 0..opts.blocks {
        let g = e.b.global(&format!("block{i}"));
        let value = e.b.apply(g, &[cur]);
        cur = e.bind("h", value);
    }
    let pooled = e.call("mean", &[cur], ints("axis", &[2, 3]));
    let fc = e.weight(&[opts.classes, c], 0.2);
    let logits = e.call0("dense", &[pooled, fc]);
    let bias = e.weight(&[opts.classes], 0.1);
    let out = e.call("bias_add", &[logits, bias], int("axis", -1));
    module.add("main", e.finish(&[x], out, f32_ty(&[n, opts.classes]))).expect("generated names are unique");

    for i in 0..opts.blocks {
        let mut e = Emit::new(item_seed(opts.seed, i as u64));
        let x = e.param("x", act_ty.clone());
        let a = conv_bn(&mut e, x, c);
        let a = e.call0("relu", &[a]);
        let b = conv_bn(&mut e, a, c);
        let sum = e.call0("add", &[x, b]);
        let out = e.call0("relu", &[sum]);
        let func: Function = e.finish(&[x], out, act_ty.clone());
        module.add(&format!("block{i}"), func).expect("generated names are unique");
    }
    module
}

fn conv_attrs() -> Attrs {
    ints("padding", &[1, 1]).with("strides", passel_engine::ir::AttrValue::Ints(vec![1, 1].into()))
}

/// `batch_norm(conv2d(x, W), gamma, beta, mean, var).0` with `c` channels in and out.
fn conv_bn(e: &mut Emit, x: NodeId, c: u64) -> NodeId {
    let scale = 1.0 / ((c * 9).max(1) as f64).sqrt();
    let w = e.weight(&[c, c, 3, 3], scale);
    let conv = e.call("conv2d", &[x, w], conv_attrs());
    let gamma = e.full(&[c], 1.0);
    let beta = e.weight(&[c], 0.1);
    let mean = e.weight(&[c], 0.1);
    let var = e.full(&[c], 1.0);
    let bn = e.call("batch_norm", &[conv, gamma, beta, mean, var], int("axis", 1));
    let out = e.b.proj(bn, 0);
    e.bind("bn", out)
}
