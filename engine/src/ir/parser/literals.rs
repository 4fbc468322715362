//! Literals of the `.pir` text format: scalars, dense tensors, fills and attribute values.

use std::sync::Arc;

use half::f16;
use ndarray::{ArcArray, IxDyn};

use super::{PResult, Parser};
use crate::ir::attrs::AttrValue;
use crate::ir::expr::Span;
use crate::ir::lexer::{Kw, Tok, Token};
use crate::ir::tensor::{Constant, Fill, Tensor, TensorData};
use crate::ir::ty::DType;

impl<'s> Parser<'s> {
    /// A scalar literal: `2.0f`, `1.5f16`, `3i64`, `3i32`, bare `2.0` (f32) or `3` (i64).
    pub(super) fn scalar_literal(&mut self) -> PResult<Constant> {
        let t = self.bump();
        let text = self.text(t);
        let split = (t.aux - t.start) as usize;
        let (body, suffix) = text.split_at(split);
        let is_float = body.contains(['.', 'e', 'E', 'n']);
        let dtype = match suffix {
            "" if is_float => DType::F32,
            "" => DType::I64,
            "f" | "f32" => DType::F32,
            "f16" => DType::F16,
            "i64" if !is_float => DType::I64,
            "i32" if !is_float => DType::I32,
            "f64" => DType::F64,
            "i8" if !is_float => DType::I8,
            "i16" if !is_float => DType::I16,
            "u8" if !is_float => DType::U8,
            "u16" if !is_float => DType::U16,
            "u32" if !is_float => DType::U32,
            "u64" if !is_float => DType::U64,
            _ => {
                let span = Span { start: t.start, end: t.end };
                return Err(self.error_at(span, format!("invalid number literal `{text}`")));
            }
        };
        // A finite literal that rounds to infinity (`1e39f`) is out of range, not `inf`.
        let finite_text = !body.contains("inf");
        let data = match dtype {
            DType::F32 => body
                .parse::<f32>()
                .ok()
                .filter(|v| !v.is_infinite() || !finite_text)
                .map(|v| TensorData::F32(scalar(v))),
            DType::F16 => body
                .parse::<f64>()
                .ok()
                .map(f16::from_f64)
                .filter(|v| !v.is_infinite() || !finite_text)
                .map(|v| TensorData::F16(scalar(v))),
            DType::I64 => body.parse::<i64>().ok().map(|v| TensorData::I64(scalar(v))),
            DType::I32 => body.parse::<i32>().ok().map(|v| TensorData::I32(scalar(v))),
            DType::Bool => None,
            DType::F64 => body
                .parse::<f64>()
                .ok()
                .filter(|v| !v.is_infinite() || !finite_text)
                .map(|v| TensorData::F64(scalar(v))),
            small => int_in_range(body, small).and_then(|v| small_int_data(small, &[v], IxDyn(&[])).ok()),
        };
        match data {
            Some(d) => Ok(Constant::Dense(Tensor(d))),
            None => {
                let span = Span { start: t.start, end: t.end };
                Err(self.error_at(span, format!("number `{text}` is out of range for {dtype}")))
            }
        }
    }

    /// One element of a dense tensor or a fill parameter, as the text of a number without a
    /// suffix, a float bit pattern `0x…`, `nan`, `inf`, or a bool.
    fn element(&mut self) -> PResult<(Token, &'s str)> {
        let t = self.tok;
        let text = self.text(t);
        let ok = match t.kind {
            Tok::Number => t.aux == t.end || text.starts_with("0x"),
            Tok::Ident => matches!(text, "nan" | "inf" | "true" | "false"),
            _ => false,
        };
        if !ok {
            return Err(self.unexpected("a number"));
        }
        self.bump();
        Ok((t, text))
    }

    fn float_element(&mut self) -> PResult<f64> {
        let (t, text) = self.element()?;
        if text.starts_with("0x") {
            return self.f64_bits(t, text);
        }
        match text.parse::<f64>() {
            Ok(v) => Ok(v),
            Err(_) => {
                let span = Span { start: t.start, end: t.end };
                Err(self.error_at(span, format!("expected a float, found `{text}`")))
            }
        }
    }

    /// A float attribute or fill parameter written as its f64 bit pattern: `0x` and 16 hex
    /// digits (how NaNs other than the canonical one print).
    fn f64_bits(&mut self, t: Token, text: &str) -> PResult<f64> {
        let hex = &text[2..];
        match (hex.len() == 16).then(|| u64::from_str_radix(hex, 16).ok()).flatten() {
            Some(b) => Ok(f64::from_bits(b)),
            None => {
                let span = Span { start: t.start, end: t.end };
                Err(self
                    .error_at(span, format!("invalid float `{text}`: an f64 bit pattern is `0x` and 16 hex digits")))
            }
        }
    }

    /// `tensor<(shape), dtype>[v, …]`.
    #[inline(never)]
    pub(super) fn dense(&mut self) -> PResult<Constant> {
        let start = self.expect_kw(Kw::Tensor)?.start;
        let ty = self.tensor_type()?;
        self.expect(Tok::LBrack, "`[`")?;
        let (mut f32s, mut f16s, mut i64s, mut i32s, mut bools) = (vec![], vec![], vec![], vec![], vec![]);
        // f64 elements, and the integers of the dtypes narrower or wider than i32 / i64
        // (i8, i16, u8 … u64), range-checked per element.
        let (mut f64s, mut small): (Vec<f64>, Vec<i128>) = (vec![], vec![]);
        while !self.at(Tok::RBrack) {
            let (t, text) = self.element()?;
            if let Some(hex) = text.strip_prefix("0x") {
                let width = match ty.dtype {
                    DType::F32 => 8,
                    DType::F16 => 4,
                    DType::F64 => 16,
                    _ => 0,
                };
                let bits = (width > 0 && hex.len() == width).then(|| u64::from_str_radix(hex, 16).ok()).flatten();
                match (bits, ty.dtype) {
                    (Some(b), DType::F32) => f32s.push(f32::from_bits(b as u32)),
                    (Some(b), DType::F64) => f64s.push(f64::from_bits(b)),
                    (Some(b), _) => f16s.push(f16::from_bits(b as u16)),
                    (None, _) => {
                        let span = Span { start: t.start, end: t.end };
                        let want = match width {
                            0 => format!("{} values have no bit-pattern form", ty.dtype),
                            w => format!("a {} bit pattern is `0x` and {w} hex digits", ty.dtype),
                        };
                        return Err(self.error_at(span, format!("invalid element `{text}`: {want}")));
                    }
                }
                if !self.eat(Tok::Comma) {
                    break;
                }
                continue;
            }
            let finite_text = !text.contains("inf");
            let ok = match ty.dtype {
                DType::F32 => text
                    .parse::<f32>()
                    .ok()
                    .filter(|v| !v.is_infinite() || !finite_text)
                    .map(|v| f32s.push(v))
                    .is_some(),
                DType::F16 => text
                    .parse::<f64>()
                    .ok()
                    .map(f16::from_f64)
                    .filter(|v| !v.is_infinite() || !finite_text)
                    .map(|v| f16s.push(v))
                    .is_some(),
                DType::I64 => text.parse::<i64>().map(|v| i64s.push(v)).is_ok(),
                DType::I32 => text.parse::<i32>().map(|v| i32s.push(v)).is_ok(),
                DType::Bool => match text {
                    "true" => Some(true),
                    "false" => Some(false),
                    _ => None,
                }
                .map(|v| bools.push(v))
                .is_some(),
                DType::F64 => text
                    .parse::<f64>()
                    .ok()
                    .filter(|v| !v.is_infinite() || !finite_text)
                    .map(|v| f64s.push(v))
                    .is_some(),
                other => int_in_range(text, other).map(|v| small.push(v)).is_some(),
            };
            if !ok {
                let span = Span { start: t.start, end: t.end };
                return Err(self.error_at(span, format!("`{text}` is not a valid {} value", ty.dtype)));
            }
            if !self.eat(Tok::Comma) {
                break;
            }
        }
        self.expect(Tok::RBrack, "`,` or `]`")?;
        let found = f32s.len() + f16s.len() + i64s.len() + i32s.len() + bools.len() + f64s.len() + small.len();
        let expected = ty.num_elements();
        if expected != Some(found as u64) {
            let span = self.span_from(start);
            let expected = expected.map_or_else(|| "more than 2^64".to_string(), |n| n.to_string());
            return Err(
                self.error_at(span, format!("tensor of shape {:?} needs {expected} values, got {found}", ty.shape))
            );
        }
        let dims = IxDyn(&ty.shape.iter().map(|&d| d as usize).collect::<Vec<_>>());
        let shaped = match ty.dtype {
            DType::F32 => ArcArray::from_shape_vec(dims, f32s).map(TensorData::F32),
            DType::F16 => ArcArray::from_shape_vec(dims, f16s).map(TensorData::F16),
            DType::I64 => ArcArray::from_shape_vec(dims, i64s).map(TensorData::I64),
            DType::I32 => ArcArray::from_shape_vec(dims, i32s).map(TensorData::I32),
            DType::Bool => ArcArray::from_shape_vec(dims, bools).map(TensorData::Bool),
            DType::F64 => ArcArray::from_shape_vec(dims, f64s).map(TensorData::F64),
            other => small_int_data(other, &small, dims),
        };
        match shaped {
            Ok(d) => Ok(Constant::Dense(Tensor(d))),
            Err(e) => {
                let span = self.span_from(start);
                Err(self.error_at(span, format!("invalid tensor: {e}")))
            }
        }
    }

    /// `full<T>(v)`, `uniform<T>(seed=s, low=a, high=b)`, `normal<T>(seed=s, mean=m, std=d)`.
    #[inline(never)]
    pub(super) fn fill(&mut self) -> PResult<Constant> {
        let t = self.bump();
        let kind = self.text(t);
        let ty = self.tensor_type()?;
        self.expect(Tok::LParen, "`(`")?;
        let fill = if kind == "full" {
            let start = self.tok.start;
            let v = self.float_element()?;
            let span = self.span_from(start);
            let fits = match ty.dtype {
                DType::I64 => v.fract() == 0.0 && v >= i64::MIN as f64 && v < i64::MAX as f64,
                DType::I32 => v.fract() == 0.0 && v >= i32::MIN as f64 && v <= i32::MAX as f64,
                DType::Bool => v == 0.0 || v == 1.0,
                DType::F32 => !v.is_finite() || (v as f32).is_finite(),
                DType::F16 => !v.is_finite() || f16::from_f64(v).is_finite(),
                DType::F64 => true,
                other => {
                    let (lo, hi) = other.int_range().unwrap_or((0, -1));
                    v.fract() == 0.0 && v >= lo as f64 && v <= hi as f64 && (v as i128) <= hi
                }
            };
            if !fits {
                return Err(self.error_at(span, format!("fill value {v} is not a valid {} value", ty.dtype)));
            }
            Fill::Full(v)
        } else {
            self.named("seed")?;
            let t = self.expect(Tok::Number, "a seed")?;
            let Ok(seed_v) = self.text(t).parse::<u64>() else {
                let span = Span { start: t.start, end: t.end };
                return Err(self.error_at(span, format!("invalid seed `{}`", self.text(t))));
            };
            self.expect(Tok::Comma, "`,`")?;
            let (k1, k2) = if kind == "uniform" { ("low", "high") } else { ("mean", "std") };
            self.named(k1)?;
            let a = self.float_element()?;
            self.expect(Tok::Comma, "`,`")?;
            self.named(k2)?;
            let b = self.float_element()?;
            if kind == "uniform" {
                if !a.is_finite() || !b.is_finite() || a > b {
                    let span = self.span_from(t.start);
                    return Err(self.error_at(
                        span,
                        format!("uniform needs finite bounds with low <= high, got low={a}, high={b}"),
                    ));
                }
                Fill::Uniform { seed: seed_v, low: a, high: b }
            } else {
                Fill::Normal { seed: seed_v, mean: a, std: b }
            }
        };
        self.expect(Tok::RParen, "`)`")?;
        Ok(Constant::Fill { ty, fill })
    }

    /// `key=` of a fill parameter.
    fn named(&mut self, key: &str) -> PResult<()> {
        if !(self.at(Tok::Ident) && self.text(self.tok) == key) {
            return Err(self.unexpected(&format!("`{key}`")));
        }
        self.bump();
        self.expect(Tok::Eq, "`=`")?;
        Ok(())
    }

    /// An attribute value: bool, int, float, string, int list or dtype.
    #[inline(never)]
    pub(super) fn attr_value(&mut self) -> PResult<AttrValue> {
        let t = self.tok;
        let text = self.text(t);
        let span = Span { start: t.start, end: t.end };
        match t.kind {
            Tok::Ident => {
                let v = match text {
                    "true" => AttrValue::Bool(true),
                    "false" => AttrValue::Bool(false),
                    "nan" => AttrValue::Float(f64::NAN),
                    "inf" => AttrValue::Float(f64::INFINITY),
                    _ => match DType::from_name(text) {
                        Some(d) => AttrValue::DType(d),
                        None => return Err(self.unexpected("an attribute value")),
                    },
                };
                self.bump();
                Ok(v)
            }
            Tok::Number => {
                self.bump();
                if text.starts_with("0x") {
                    return self.f64_bits(t, text).map(AttrValue::Float);
                }
                if t.aux != t.end {
                    return Err(self.error_at(span, format!("attribute values take no suffix: `{text}`")));
                }
                if text.contains(['.', 'e', 'E', 'n']) {
                    text.parse::<f64>()
                        .map(AttrValue::Float)
                        .map_err(|_| self.error_at(span, format!("invalid float `{text}`")))
                } else {
                    text.parse::<i64>()
                        .map(AttrValue::Int)
                        .map_err(|_| self.error_at(span, format!("integer `{text}` is out of range for i64")))
                }
            }
            Tok::Str => {
                self.bump();
                match unescape(&text[1..text.len() - 1]) {
                    Some(s) => Ok(AttrValue::Str(s.into())),
                    None => Err(self.error_at(span, "invalid escape in string".into())),
                }
            }
            Tok::LBrack => {
                self.bump();
                let mut ints = Vec::new();
                while !self.at(Tok::RBrack) {
                    let t = self.expect(Tok::Number, "an integer")?;
                    match self.text(t).parse::<i64>() {
                        Ok(v) => ints.push(v),
                        Err(_) => {
                            let span = Span { start: t.start, end: t.end };
                            return Err(self.error_at(span, format!("invalid integer `{}`", self.text(t))));
                        }
                    }
                    if !self.eat(Tok::Comma) {
                        break;
                    }
                }
                self.expect(Tok::RBrack, "`,` or `]`")?;
                Ok(AttrValue::Ints(Arc::from(ints)))
            }
            _ => Err(self.unexpected("an attribute value")),
        }
    }
}

pub(super) fn scalar<T: Clone>(v: T) -> ArcArray<T, IxDyn> {
    ArcArray::from_elem(IxDyn(&[]), v)
}

/// Undoes the escapes of Rust's `{:?}` string formatting (which the printer uses).
fn unescape(s: &str) -> Option<String> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        out.push(match chars.next()? {
            'n' => '\n',
            't' => '\t',
            'r' => '\r',
            '0' => '\0',
            '\\' => '\\',
            '"' => '"',
            '\'' => '\'',
            'u' => {
                if chars.next()? != '{' {
                    return None;
                }
                let mut code = 0u32;
                let mut digits = 0;
                loop {
                    let c = chars.next()?;
                    if c == '}' {
                        if digits == 0 {
                            // `\u{}` names no character.
                            return None;
                        }
                        break;
                    }
                    code = code.checked_mul(16)?.checked_add(c.to_digit(16)?)?;
                    digits += 1;
                    if digits > 6 {
                        return None;
                    }
                }
                char::from_u32(code)?
            }
            _ => return None,
        });
    }
    Some(out)
}

/// An integer literal of `dtype` (i8, i16, u8 … u64), if it is one and in range.
fn int_in_range(text: &str, dtype: DType) -> Option<i128> {
    let v = text.parse::<i128>().ok()?;
    let (lo, hi) = dtype.int_range()?;
    (lo..=hi).contains(&v).then_some(v)
}

/// The tensor data of integers already checked by [`int_in_range`] for `dtype` (one of i8,
/// i16, u8, u16, u32, u64), so the narrowing casts are exact; `values` has `dims`' length.
fn small_int_data(dtype: DType, values: &[i128], dims: IxDyn) -> Result<TensorData, ndarray::ShapeError> {
    fn arr<T>(dims: IxDyn, values: &[i128], f: impl Fn(i128) -> T) -> Result<ArcArray<T, IxDyn>, ndarray::ShapeError> {
        ArcArray::from_shape_vec(dims, values.iter().map(|&x| f(x)).collect())
    }
    Ok(match dtype {
        DType::I8 => TensorData::I8(arr(dims, values, |v| v as i8)?),
        DType::I16 => TensorData::I16(arr(dims, values, |v| v as i16)?),
        DType::U8 => TensorData::U8(arr(dims, values, |v| v as u8)?),
        DType::U16 => TensorData::U16(arr(dims, values, |v| v as u16)?),
        DType::U32 => TensorData::U32(arr(dims, values, |v| v as u32)?),
        _ => TensorData::U64(arr(dims, values, |v| v as u64)?),
    })
}
