//! `einsum` (ONNX Einsum): a sum of products over labelled axes, written as an `equation`
//! such as `"bij,bjk->bik"`.
//!
//! The equation names each axis of each argument by a letter; `...` stands for the axes not
//! named (numpy broadcasting applies to them across arguments). Without `->` the output is the
//! letters that appear once, in alphabetical order, after the broadcast axes (numpy's implicit
//! mode). A letter repeated within one argument takes its diagonal. The kernel walks every
//! combination of the labels once (cost: the product of all label lengths times the number of
//! arguments), accumulating floats in f64 and integers with wrapping arithmetic.

use super::elementwise::IntElem;
use super::{
    arr, elements, invalid, out_dims, shape_str, tensor_arg, type_err, types_of, with_elem, with_int, Elem, KResult,
};
use crate::ir::{AttrValue, Attrs, DType, Tensor, Type};
use crate::op::{KernelCtx, OpError};

const OP: &str = "einsum";

/// A parsed equation against concrete shapes.
pub(crate) struct Plan {
    /// Length of every label (letters first, then one label per broadcast axis).
    pub(crate) sizes: Vec<u64>,
    /// Per argument, the label of each of its axes.
    pub(crate) inputs: Vec<Vec<usize>>,
    /// The labels of the output axes.
    pub(crate) output: Vec<usize>,
}

/// One term of an equation: its letters, and where among them `...` stands (if it does).
type Term = (Vec<char>, Option<usize>);

/// The terms of one side.
fn terms(side: &str) -> Result<Vec<Term>, OpError> {
    side.split(',')
        .map(|t| {
            let t = t.trim();
            let mut letters = Vec::new();
            let mut ellipsis = None;
            let mut rest = t;
            while !rest.is_empty() {
                if let Some(r) = rest.strip_prefix("...") {
                    if ellipsis.replace(letters.len()).is_some() {
                        return Err(type_err(OP, format_args!("term {t:?} has `...` twice")));
                    }
                    rest = r;
                    continue;
                }
                let c = rest.chars().next().unwrap_or(' ');
                if !c.is_ascii_alphabetic() {
                    return Err(type_err(OP, format_args!("term {t:?}: {c:?} is not a letter or `...`")));
                }
                letters.push(c);
                rest = &rest[c.len_utf8()..];
            }
            Ok((letters, ellipsis))
        })
        .collect()
}

pub(crate) fn plan(args: &[Type], attrs: &Attrs) -> Result<Plan, OpError> {
    let equation: &str = match attrs.get("equation") {
        Some(AttrValue::Str(s)) => s,
        Some(v) => return Err(type_err(OP, format_args!("attribute `equation` must be str, got {}", v.kind_name()))),
        None => return Err(type_err(OP, "missing attribute `equation`")),
    };
    let (lhs, rhs) = match equation.split_once("->") {
        Some((l, r)) => (l, Some(r)),
        None => (equation, None),
    };
    let ins = terms(lhs)?;
    if ins.len() != args.len() {
        return Err(type_err(
            OP,
            format_args!("the equation has {} inputs, but {} arguments were given", ins.len(), args.len()),
        ));
    }
    let shapes: Vec<&[u64]> =
        (0..args.len()).map(|i| tensor_arg(OP, args, i).map(|t| &t.shape[..])).collect::<Result<_, _>>()?;
    let dtype = tensor_arg(OP, args, 0)?.dtype;
    for i in 1..args.len() {
        if tensor_arg(OP, args, i)?.dtype != dtype {
            return Err(type_err(OP, "the arguments must have one dtype"));
        }
    }
    // The broadcast axes: as many as the most any argument has.
    let mut n_broadcast = 0;
    for ((letters, ell), shape) in ins.iter().zip(&shapes) {
        match ell {
            Some(_) if shape.len() >= letters.len() => n_broadcast = n_broadcast.max(shape.len() - letters.len()),
            None if shape.len() == letters.len() => {}
            _ => {
                return Err(type_err(
                    OP,
                    format_args!(
                        "term {:?} does not match an argument of shape {}",
                        letters.iter().collect::<String>(),
                        shape_str(shape)
                    ),
                ))
            }
        }
    }
    let mut letters: Vec<char> = Vec::new();
    // `None`: a letter whose length is not known yet.
    let mut sizes: Vec<Option<u64>> = vec![Some(1); n_broadcast];
    let mut inputs = Vec::with_capacity(args.len());
    for ((term, ell), shape) in ins.iter().zip(&shapes) {
        let nb = shape.len() - term.len();
        let mut labels = Vec::with_capacity(shape.len());
        for (k, &c) in term.iter().enumerate() {
            if *ell == Some(k) {
                labels.extend(n_broadcast - nb..n_broadcast);
            }
            let l = match letters.iter().position(|&x| x == c) {
                Some(p) => n_broadcast + p,
                None => {
                    letters.push(c);
                    sizes.push(None);
                    sizes.len() - 1
                }
            };
            labels.push(l);
        }
        if *ell == Some(term.len()) {
            labels.extend(n_broadcast - nb..n_broadcast);
        }
        for (&l, &d) in labels.iter().zip(shape.iter()) {
            if l < n_broadcast {
                // Broadcast axes follow numpy: 1 stretches.
                match sizes[l] {
                    Some(s) if s != 1 && d != 1 && s != d => {
                        return Err(type_err(
                            OP,
                            format_args!("the `...` axes of the arguments do not broadcast ({s} vs {d})"),
                        ))
                    }
                    Some(1) => sizes[l] = Some(d),
                    _ => {}
                }
            } else {
                match sizes[l] {
                    Some(s) if s != d => {
                        return Err(type_err(
                            OP,
                            format_args!("label {:?} has lengths {s} and {d}", letters[l - n_broadcast]),
                        ))
                    }
                    _ => sizes[l] = Some(d),
                }
            }
        }
        inputs.push(labels);
    }
    let sizes: Vec<u64> = sizes.into_iter().map(|s| s.unwrap_or(0)).collect();
    let output = match rhs {
        Some(r) => {
            let out = terms(r)?;
            let [(term, ell)] = &out[..] else {
                return Err(type_err(OP, "the output side must be one term"));
            };
            let mut labels = Vec::new();
            for (k, &c) in term.iter().enumerate() {
                if *ell == Some(k) {
                    labels.extend(0..n_broadcast);
                }
                let p = letters
                    .iter()
                    .position(|&l| l == c)
                    .ok_or_else(|| type_err(OP, format_args!("output label {c:?} is not in any input")))?;
                if labels.contains(&(n_broadcast + p)) {
                    return Err(type_err(OP, format_args!("output label {c:?} repeats")));
                }
                labels.push(n_broadcast + p);
            }
            if *ell == Some(term.len()) {
                labels.extend(0..n_broadcast);
            }
            if ell.is_none() && n_broadcast > 0 && sizes[..n_broadcast].iter().any(|&d| d != 1) {
                return Err(type_err(OP, "the output must keep the `...` axes"));
            }
            labels
        }
        None => {
            let mut once: Vec<char> = letters
                .iter()
                .copied()
                .filter(|&c| ins.iter().map(|(t, _)| t.iter().filter(|&&l| l == c).count()).sum::<usize>() == 1)
                .collect();
            once.sort_unstable();
            (0..n_broadcast)
                .chain(once.iter().filter_map(|c| letters.iter().position(|l| l == c).map(|p| n_broadcast + p)))
                .collect()
        }
    };
    Ok(Plan { sizes, inputs, output })
}

/// Type relation of `einsum(args…, equation)`.
pub(crate) fn einsum_rel(args: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    if args.is_empty() {
        return Err(type_err(OP, "expected at least one argument"));
    }
    let p = plan(args, attrs)?;
    let x = tensor_arg(OP, args, 0)?;
    if x.dtype == DType::Bool {
        return Err(type_err(OP, "expected numeric tensors, got dtype bool"));
    }
    Ok(Type::tensor(p.output.iter().map(|&l| p.sizes[l]).collect::<Vec<_>>(), x.dtype))
}

/// The cost of `einsum`: every combination of the labels, once per argument.
pub(crate) fn einsum_cost(args: &[Type], attrs: &Attrs, out: &Type) -> u64 {
    match plan(args, attrs) {
        Ok(p) => p
            .sizes
            .iter()
            .fold(1u64, |n, &d| n.saturating_mul(d.max(1)))
            .saturating_mul(args.len() as u64)
            .saturating_add(elements(out)),
        Err(_) => u64::MAX,
    }
}

/// Kernel of `einsum`.
pub(crate) fn einsum(args: &[Tensor], attrs: &Attrs, _ctx: &mut KernelCtx) -> KResult {
    let ty = einsum_rel(&types_of(args), attrs)?;
    let (shape, dtype) = out_dims(&ty)?;
    let p = plan(&types_of(args), attrs)?;
    // The work is bounded like the result: the folding cost budget keeps large ones unfolded,
    // and the interpreter runs what the model asks.
    let sizes: Vec<usize> = p.sizes.iter().map(|&d| d as usize).collect();
    let total = sizes
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .ok_or_else(|| invalid(OP, "too many label combinations"))?;
    // Per argument, the stride of each label (summed when a label repeats: the diagonal).
    let strides: Vec<Vec<usize>> = p
        .inputs
        .iter()
        .zip(args)
        .map(|(labels, t)| {
            let st = super::scatter::strides(t.shape());
            let mut per = vec![0usize; sizes.len()];
            for (&l, (&s, &d)) in labels.iter().zip(st.iter().zip(t.shape())) {
                // A length-1 axis under a broadcast label stays at index 0.
                if d != 1 {
                    per[l] += s;
                }
            }
            per
        })
        .collect();
    let out_strides = {
        let st = super::scatter::strides(&shape);
        let mut per = vec![0usize; sizes.len()];
        for (&l, &s) in p.output.iter().zip(&st) {
            per[l] = s;
        }
        per
    };
    fn walk(
        sizes: &[usize],
        total: usize,
        strides: &[Vec<usize>],
        out_strides: &[usize],
        mut f: impl FnMut(&[usize], usize),
    ) {
        let mut idx = vec![0usize; sizes.len()];
        let mut offs = vec![0usize; strides.len()];
        let mut o = 0usize;
        for _ in 0..total {
            f(&offs, o);
            for l in (0..sizes.len()).rev() {
                idx[l] += 1;
                for (a, st) in strides.iter().enumerate() {
                    offs[a] += st[l];
                }
                o += out_strides[l];
                if idx[l] < sizes[l] {
                    break;
                }
                for (a, st) in strides.iter().enumerate() {
                    offs[a] -= st[l] * sizes[l];
                }
                o -= out_strides[l] * sizes[l];
                idx[l] = 0;
            }
        }
    }
    let n_out: usize = shape.iter().product();
    let out = if dtype.is_float() {
        with_elem!(dtype, T => {
            let flats: Vec<Vec<f64>> = args.iter().map(|t| Ok(arr::<T>(OP, t)?.iter().map(|v| v.to_f64()).collect())).collect::<Result<_, OpError>>()?;
            let mut acc = vec![0.0f64; n_out];
            walk(&sizes, total, &strides, &out_strides, |offs, o| {
                acc[o] += flats.iter().zip(offs).map(|(f, &k)| f[k]).product::<f64>();
            });
            let v: Vec<T> = acc.into_iter().map(T::from_f64).collect();
            T::wrap(ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&shape), v).map_err(|e| invalid(OP, e))?.into_shared())
        })
    } else {
        with_int!(dtype, T => {
            let flats: Vec<Vec<T>> = args.iter().map(|t| Ok(arr::<T>(OP, t)?.iter().copied().collect())).collect::<Result<_, OpError>>()?;
            let mut acc = vec![T::ZERO; n_out];
            walk(&sizes, total, &strides, &out_strides, |offs, o| {
                let prod = flats.iter().zip(offs).fold(T::from_i64(1), |p, (f, &k)| p.wmul(f[k]));
                acc[o] = acc[o].wadd(prod);
            });
            T::wrap(ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&shape), acc).map_err(|e| invalid(OP, e))?.into_shared())
        })
    };
    Ok(vec![out])
}
