//! Signal windows: `HannWindow`, `HammingWindow` and `BlackmanWindow`, constants computed at
//! import (their length is an input that must be known then, and nothing else varies), with
//! onnx's reference formulas: `n = 0..size`, `N = size` (periodic, the default) or `size - 1`.

use super::*;

/// Which window.
#[derive(Clone, Copy)]
pub(super) enum SignalWindow {
    Hann,
    Hamming,
    Blackman,
}

pub(super) fn window(cx: &mut Cx<'_>, kind: SignalWindow) -> R<Vec<Option<Val>>> {
    let size = match cx.const_ints(0, "size")?.as_deref() {
        Some([n]) => *n,
        Some(v) => return Err(format!("input 0 (size) must hold one value, got {}", v.len())),
        None => return Err("input 0 (size) is missing".into()),
    };
    let periodic = cx.int("periodic", 1)? != 0;
    let dtype = tensor::dtype_of(cx.int("output_datatype", 1)? as i32)
        .map_err(|e| format!("attribute `output_datatype`: {e}"))?;
    let n = u64::try_from(size).map_err(|_| format!("input 0 (size) must not be negative, got {size}"))?;
    if n > cx.em_fold_limit() {
        return Err(format!("a window of {n} elements is too large to make at import"));
    }
    let big_n = if periodic { size } else { size - 1 } as f64;
    let pi = std::f64::consts::PI;
    let v: Vec<f64> = (0..size)
        .map(|i| {
            let i = i as f64;
            match kind {
                SignalWindow::Hann => (i * pi / big_n).sin().powi(2),
                SignalWindow::Hamming => {
                    let alpha = 25.0 / 46.0;
                    alpha - (i * pi * 2.0 / big_n).cos() * (1.0 - alpha)
                }
                SignalWindow::Blackman => {
                    0.42 - 0.5 * (i * pi * 2.0 / big_n).cos() + 0.08 * (i * pi * 4.0 / big_n).cos()
                }
            }
        })
        .collect();
    let t = Tensor::from_f64s(&[n], dtype, &v).map_err(|e| e.to_string())?;
    one(Val::Const(Arc::new(Constant::Dense(t))))
}
