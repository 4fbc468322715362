//! `TfIdfVectorizer` over integer tokens, decomposed at import as onnx's reference counts:
//! an n-gram of the pool (`pool_int64s`, sizes `min_gram_length..=max_gram_length`) occurs at
//! start `s` with skip distance `d` when tokens `s, s+d, …, s+(n-1)d` equal it; unigrams count
//! at distance 1 only, longer n-grams at every distance `1..=max_skip_count + 1`. For each size
//! and distance the importer emits one `equal` per n-gram position (the shifted tokens, a
//! `strided_slice`, against the pool's column, broadcast over the pool), their `logical_and`,
//! and a `sum` over the starts; a constant 0/1 `matmul` adds the per-n-gram counts into their
//! `ngram_indexes` slots, and the weighting (`TF`, `IDF`, `TFIDF`, with or without `weights`)
//! is elementwise. String pools are refused (passel has no string tensors).

use super::*;

pub(super) fn tfidf_vectorizer(cx: &mut Cx<'_>) -> R<Vec<Option<Val>>> {
    let x = cx.input(0)?;
    let dtype = x.ty().dtype;
    if !matches!(dtype, DType::I32 | DType::I64) {
        return Err(format!("X must be int32 or int64 tokens, got {dtype} (string tokens are not supported)").into());
    }
    let shape = x.shape();
    let (rows, len, batched) = match shape.as_slice() {
        [] => (1, 1, false),
        &[l] => (1, l, false),
        &[b, l] if b > 0 => (b, l, true),
        s => return Err(format!("X must be [C] or [B, C] with B > 0, got {s:?}").into()),
    };
    let min_n = cx.int_opt("min_gram_length")?.ok_or("attribute `min_gram_length` is required")?;
    let max_n = cx.int_opt("max_gram_length")?.ok_or("attribute `max_gram_length` is required")?;
    let max_skip = cx.int_opt("max_skip_count")?.ok_or("attribute `max_skip_count` is required")?;
    if min_n < 1 || max_n < min_n || max_skip < 0 {
        return Err(format!(
            "min_gram_length {min_n}, max_gram_length {max_n} and max_skip_count {max_skip} must satisfy \
             1 <= min <= max, skip >= 0"
        )
        .into());
    }
    let mode = cx.string("mode", "")?;
    if !matches!(mode.as_str(), "TF" | "IDF" | "TFIDF") {
        return Err(format!("attribute `mode` = {mode:?} is not supported (TF, IDF, TFIDF)").into());
    }
    let counts = cx.ints_opt("ngram_counts")?.ok_or("attribute `ngram_counts` is required")?;
    let indexes = cx.ints_opt("ngram_indexes")?.ok_or("attribute `ngram_indexes` is required")?;
    if cx.attr_index("pool_strings").is_some() {
        return Err("attribute `pool_strings`: string pools are not supported (passel has no string tensors)".into());
    }
    let pool = cx.ints_opt("pool_int64s")?.ok_or("attribute `pool_int64s` is required")?;
    let weights = cx.floats_opt("weights")?.unwrap_or_default();
    let out_size = indexes.iter().copied().max().map_or(0, |m| m + 1);
    if out_size < 1 || indexes.iter().any(|&i| i < 0) {
        return Err(format!("ngram_indexes {indexes:?} must be non-negative and not empty").into());
    }
    let out_size = out_size as u64;
    if !weights.is_empty() && weights.len() as u64 != out_size {
        return Err(format!("{} weights for an output of {out_size}", weights.len()).into());
    }
    // The pool's n-grams by size, each with its output slot; a repeated n-gram keeps the later
    // id (as the reference's trie does).
    let mut by_size: Vec<Vec<(Vec<i64>, u64)>> = Vec::new();
    let mut id = 0usize;
    for (i, &start) in counts.iter().enumerate() {
        let n = i + 1;
        let end = counts.get(i + 1).copied().unwrap_or(pool.len() as i64);
        if start < 0 || end < start || end as usize > pool.len() {
            return Err(format!("ngram_counts {counts:?} do not split the pool of {} tokens", pool.len()).into());
        }
        let grams = (end - start) as usize / n;
        let mut these: Vec<(Vec<i64>, u64)> = Vec::new();
        for g in 0..grams {
            let slot = *indexes.get(id + g).ok_or(format!("ngram_indexes has no entry for n-gram {}", id + g))?;
            if (min_n..=max_n).contains(&(n as i64)) {
                let at = start as usize + g * n;
                let gram = pool[at..at + n].to_vec();
                these.retain(|(other, _)| *other != gram);
                these.push((gram, slot as u64));
            }
        }
        id += grams;
        by_size.push(these);
    }
    let x2 = cx.reshape(&x, &[rows, len], true)?;
    let mut total: Option<Val> = None;
    for (i, grams) in by_size.iter().enumerate() {
        let n = i as u64 + 1;
        if grams.is_empty() {
            continue;
        }
        let p = grams.len() as u64;
        let distances = if n == 1 { 1 } else { max_skip as u64 + 1 };
        let mut size_count: Option<Val> = None;
        for d in 1..=distances {
            let span = (n - 1) * d;
            if span >= len {
                break;
            }
            let starts = len - span;
            let mut hit: Option<Val> = None;
            for k in 0..n {
                let attrs = Attrs::new()
                    .with("begin", ints(&[k * d]))
                    .with("end", ints(&[k * d + starts]))
                    .with("axes", ints(&[1]));
                let tokens = cx.call_tmp("strided_slice", &[&x2], attrs)?;
                let tokens = cx.reshape(&tokens, &[rows, starts, 1], true)?;
                let column: Vec<f64> = grams.iter().map(|(g, _)| g[k as usize] as f64).collect();
                let column = Tensor::from_f64s(&[1, 1, p], dtype, &column).map_err(|e| e.to_string())?;
                let eq =
                    cx.call_tmp("equal", &[&tokens, &Val::Const(Arc::new(Constant::Dense(column)))], Attrs::new())?;
                hit = Some(match hit {
                    None => eq,
                    Some(h) => cx.call_tmp("logical_and", &[&h, &eq], Attrs::new())?,
                });
            }
            let hit = hit.ok_or("an n-gram has no tokens")?;
            let hit = cx.call_tmp("cast", &[&hit], Attrs::new().with("dtype", AttrValue::DType(DType::F32)))?;
            let attrs = Attrs::new().with("axis", ints_i(&[1])).with("keepdims", AttrValue::Bool(false));
            let c = cx.call_tmp("sum", &[&hit], attrs)?;
            size_count = Some(match size_count {
                None => c,
                Some(s) => cx.call_tmp("add", &[&s, &c], Attrs::new())?,
            });
        }
        let Some(size_count) = size_count else { continue };
        let mut slots = vec![0.0; (p * out_size) as usize];
        for (g, (_, slot)) in grams.iter().enumerate() {
            slots[g * out_size as usize + *slot as usize] = 1.0;
        }
        let slots = Tensor::from_f64s(&[p, out_size], DType::F32, &slots).map_err(|e| e.to_string())?;
        let c = cx.call_tmp("matmul", &[&size_count, &Val::Const(Arc::new(Constant::Dense(slots)))], Attrs::new())?;
        total = Some(match total {
            None => c,
            Some(t) => cx.call_tmp("add", &[&t, &c], Attrs::new())?,
        });
    }
    let freq = total.unwrap_or_else(|| filled(&[rows, out_size], DType::F32, 0.0));
    let w = || -> R<Val> {
        let t = Tensor::from_f64s(&[out_size], DType::F32, &weights.iter().map(|&v| f64::from(v)).collect::<Vec<_>>())
            .map_err(|e| e.to_string())?;
        Ok(Val::Const(Arc::new(Constant::Dense(t))))
    };
    let y = match (mode.as_str(), weights.is_empty()) {
        ("TF", _) | ("TFIDF", true) => freq,
        ("TFIDF", false) => cx.call_tmp("multiply", &[&freq, &w()?], Attrs::new())?,
        (_, empty) => {
            let present = cx.call_tmp("greater", &[&freq, &Cx::scalar(DType::F32, 0.0)], Attrs::new())?;
            let on = if empty { Cx::scalar(DType::F32, 1.0) } else { w()? };
            cx.call_tmp("where", &[&present, &on, &Cx::scalar(DType::F32, 0.0)], Attrs::new())?
        }
    };
    let out = if batched { vec![rows, out_size] } else { vec![out_size] };
    one(cx.reshape(&y, &out, false)?)
}
