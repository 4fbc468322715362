//! Small shared helpers.

/// Candidates within a small edit distance of `name`, closest first (ties in input order).
pub fn suggest<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let lower = name.to_ascii_lowercase().replace(['-', '_'], "");
    let mut scored: Vec<(usize, &'a str)> = candidates
        .filter_map(|c| {
            let cl = c.to_ascii_lowercase().replace(['-', '_'], "");
            let d = edit_distance(&lower, &cl);
            let limit = (lower.len().max(cl.len()) / 3).max(2);
            (d <= limit || cl.contains(&lower) && lower.len() >= 3).then_some((d, c))
        })
        .collect();
    scored.sort_by_key(|&(d, _)| d);
    scored.into_iter().take(3).map(|(_, c)| c).collect()
}

/// Levenshtein distance.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        cur[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + (ca != cb) as usize).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}
