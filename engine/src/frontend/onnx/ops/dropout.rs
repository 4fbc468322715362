//! `Dropout`. In inference (no `training_mode`, or a zero ratio) it is the identity with an
//! all-true mask. In training mode with a `seed` attribute its mask is drawn at import the way
//! onnx's reference draws it — numpy's `RandomState(seed).uniform(0, 1, X.shape) >= ratio`,
//! the MT19937 generator with numpy's 53-bit doubles — so the output equals the reference's
//! and is the same on every run, as a seeded reference run is. (onnxruntime seeds its own
//! generator: the same model draws another mask there; ONNX leaves the generator to the
//! runtime.) Without a seed the mask would be fresh randomness on every run, which passel,
//! whose operators are pure, does not model: that case is refused.

use super::*;

pub(super) fn dropout(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let x = cx.input(0)?;
    let attr_ratio = cx.float_opt("ratio")?;
    let seed = cx.int_opt("seed")?;
    let training = cx.const_floats(2, "training_mode")?.is_some_and(|v| v.iter().any(|&t| t != 0.0));
    let ratio = match cx.opt(1) {
        Some(_) if training => match cx.const_floats(1, "ratio")?.as_deref() {
            Some(&[r]) => r,
            _ => return Err("input 1 (ratio) must be a scalar known at import".into()),
        },
        _ => attr_ratio.unwrap_or(0.5),
    };
    if !training || ratio == 0.0 {
        let mask = filled(&x.shape(), DType::Bool, 1.0);
        return Ok(vec![Some(x), Some(mask)]);
    }
    let dtype = x.ty().dtype;
    if !(0.0..1.0).contains(&ratio) || !dtype.is_float() {
        return Err(format!(
            "training-mode dropout needs a float input and a ratio in [0, 1), got {dtype} and {ratio}"
        )
        .into());
    }
    let seed = seed.ok_or(
        "training_mode = true with a nonzero ratio and no `seed`: its mask is fresh randomness on every run, which \
         passel does not model",
    )?;
    let seed = u32::try_from(seed)
        .map_err(|_| NodeError::from(format!("attribute `seed` = {seed} must be between 0 and 2^32 - 1")))?;
    let shape = x.shape();
    let count = product(&shape)?;
    if count > cx.em_fold_limit() {
        return Err(format!("a mask of {count} elements is too large to draw at import").into());
    }
    let mut rng = Mt19937::new(seed);
    let keep: Vec<bool> = (0..count).map(|_| rng.next_f64() >= ratio).collect();
    let scale = 1.0 / (1.0 - ratio);
    let factors: Vec<f64> = keep.iter().map(|&k| if k { scale } else { 0.0 }).collect();
    let factors = Tensor::from_f64s(&shape, dtype, &factors).map_err(|e| e.to_string())?;
    let y = cx.call("multiply", &[&x, &Val::Const(Arc::new(Constant::Dense(factors)))], Attrs::new())?;
    let mask: Vec<f64> = keep.iter().map(|&k| f64::from(u8::from(k))).collect();
    let mask = Tensor::from_f64s(&shape, DType::Bool, &mask).map_err(|e| e.to_string())?;
    Ok(vec![Some(y), Some(Val::Const(Arc::new(Constant::Dense(mask))))])
}

/// The Mersenne Twister MT19937 seeded as numpy's `RandomState(seed)` seeds it.
struct Mt19937 {
    state: [u32; 624],
    pos: usize,
}

impl Mt19937 {
    fn new(seed: u32) -> Mt19937 {
        let mut state = [0u32; 624];
        state[0] = seed;
        for i in 1..624 {
            let prev = state[i - 1];
            state[i] = 1_812_433_253u32.wrapping_mul(prev ^ (prev >> 30)).wrapping_add(i as u32);
        }
        Mt19937 { state, pos: 624 }
    }

    fn next_u32(&mut self) -> u32 {
        if self.pos >= 624 {
            for k in 0..624 {
                let y = (self.state[k] & 0x8000_0000) | (self.state[(k + 1) % 624] & 0x7fff_ffff);
                let mag = if y & 1 == 1 { 0x9908_b0df } else { 0 };
                self.state[k] = self.state[(k + 397) % 624] ^ (y >> 1) ^ mag;
            }
            self.pos = 0;
        }
        let mut y = self.state[self.pos];
        self.pos += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// numpy's `random_sample`: a double in [0, 1) from 53 random bits.
    fn next_f64(&mut self) -> f64 {
        let a = self.next_u32() >> 5;
        let b = self.next_u32() >> 6;
        (f64::from(a) * 67_108_864.0 + f64::from(b)) / 9_007_199_254_740_992.0
    }
}

#[cfg(test)]
mod tests {
    use super::Mt19937;

    /// Values from numpy 2: `RandomState(0).uniform(0, 1, 3)` and the 1000th of seed 5.
    #[test]
    fn mt19937_draws_what_numpy_draws() {
        let mut r = Mt19937::new(0);
        let first: Vec<f64> = (0..3).map(|_| r.next_f64()).collect();
        assert_eq!(first, [0.548_813_503_927_324_8, 0.715_189_366_372_419_5, 0.602_763_376_071_643_9]);
        let mut r = Mt19937::new(5);
        let last = (0..1000).map(|_| r.next_f64()).last();
        assert_eq!(last, Some(0.790_593_094_643_621_8));
    }
}
