//! A unified line diff (Myers' O(ND) algorithm) for `PrintIrInstrument::diff`.
//!
//! The common prefix and suffix are trimmed first (a pass usually changes a few lines of a
//! function), then Myers' greedy search runs on the rest keeping, per edit distance d, only the
//! 2d + 3 diagonal entries it reached: memory is O(D²) for D changed lines and time O((N + M)·D),
//! so typical diffs cost little however long the function. Beyond [`MAX_EDITS`] changed lines
//! the middle is shown as one hunk that removes every old line and adds every new one.

use std::fmt::Write as _;

/// Edit distance above which the diff gives up on a minimal script (see the module docs).
pub const MAX_EDITS: usize = 2000;

/// Context lines around each change.
const CONTEXT: usize = 3;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Same(usize, usize),
    Del(usize),
    Ins(usize),
}

/// The unified diff of `old` and `new` (by lines), with `---`/`+++` labels and `@@` hunks; empty
/// when they are equal.
pub fn unified_diff(old: &str, new: &str, old_label: &str, new_label: &str) -> String {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    if a == b {
        return String::new();
    }
    let ops = edit_script(&a, &b);
    let mut out = format!("--- {old_label}\n+++ {new_label}\n");
    // Hunks: runs of ops around changes, with CONTEXT equal lines either side.
    let changes: Vec<usize> =
        ops.iter().enumerate().filter(|(_, o)| !matches!(o, Op::Same(..))).map(|(i, _)| i).collect();
    let mut i = 0;
    while i < changes.len() {
        let start = changes[i].saturating_sub(CONTEXT);
        let mut end = changes[i];
        while i < changes.len() && changes[i] <= end + 2 * CONTEXT + 1 {
            end = changes[i];
            i += 1;
        }
        let end = (end + CONTEXT + 1).min(ops.len());
        let hunk = &ops[start..end];
        let (mut old_start, mut new_start) = (None, None);
        let (mut old_len, mut new_len) = (0, 0);
        for op in hunk {
            match *op {
                Op::Same(x, y) => {
                    old_start.get_or_insert(x);
                    new_start.get_or_insert(y);
                    old_len += 1;
                    new_len += 1;
                }
                Op::Del(x) => {
                    old_start.get_or_insert(x);
                    old_len += 1;
                }
                Op::Ins(y) => {
                    new_start.get_or_insert(y);
                    new_len += 1;
                }
            }
        }
        // A side with no lines in the hunk starts after the position before it (GNU style).
        let pos = |first: Option<usize>, len: usize, before: usize| match first {
            Some(x) if len > 0 => x + 1,
            _ => before,
        };
        let (old_before, new_before) = position_before(&ops[..start]);
        let _ = writeln!(
            out,
            "@@ -{},{} +{},{} @@",
            pos(old_start, old_len, old_before),
            old_len,
            pos(new_start, new_len, new_before),
            new_len
        );
        for op in hunk {
            let _ = match *op {
                Op::Same(x, _) => writeln!(out, " {}", a[x]),
                Op::Del(x) => writeln!(out, "-{}", a[x]),
                Op::Ins(y) => writeln!(out, "+{}", b[y]),
            };
        }
    }
    out
}

/// Lines of the old and the new text that `ops` covers.
fn position_before(ops: &[Op]) -> (usize, usize) {
    ops.iter().fold((0, 0), |(x, y), op| match op {
        Op::Same(..) => (x + 1, y + 1),
        Op::Del(_) => (x + 1, y),
        Op::Ins(_) => (x, y + 1),
    })
}

/// A shortest edit script from `a` to `b`.
fn edit_script(a: &[&str], b: &[&str]) -> Vec<Op> {
    let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let suffix = a[prefix..].iter().rev().zip(b[prefix..].iter().rev()).take_while(|(x, y)| x == y).count();
    let (am, bm) = (&a[prefix..a.len() - suffix], &b[prefix..b.len() - suffix]);
    let mut ops: Vec<Op> = (0..prefix).map(|i| Op::Same(i, i)).collect();
    match myers(am, bm) {
        Some(middle) => ops.extend(middle.into_iter().map(|op| match op {
            Op::Same(x, y) => Op::Same(x + prefix, y + prefix),
            Op::Del(x) => Op::Del(x + prefix),
            Op::Ins(y) => Op::Ins(y + prefix),
        })),
        None => {
            ops.extend((0..am.len()).map(|x| Op::Del(x + prefix)));
            ops.extend((0..bm.len()).map(|y| Op::Ins(y + prefix)));
        }
    }
    let (sa, sb) = (a.len() - suffix, b.len() - suffix);
    ops.extend((0..suffix).map(|i| Op::Same(sa + i, sb + i)));
    ops
}

/// Myers' greedy forward search; `None` when more than [`MAX_EDITS`] edits are needed.
fn myers(a: &[&str], b: &[&str]) -> Option<Vec<Op>> {
    let (n, m) = (a.len() as isize, b.len() as isize);
    let max = (n + m) as usize;
    if max == 0 {
        return Some(Vec::new());
    }
    let off = max as isize + 1;
    let mut v = vec![0isize; 2 * max + 3];
    // trace[d] holds v[-d-1 ..= d+1] as it was when iteration d started.
    let mut trace: Vec<Vec<isize>> = Vec::new();
    let mut found = None;
    'search: for d in 0..=(max.min(MAX_EDITS) as isize) {
        trace.push(v[(off - d - 1) as usize..=(off + d + 1) as usize].to_vec());
        let mut k = -d;
        while k <= d {
            let mut x = if k == -d || (k != d && v[(off + k - 1) as usize] < v[(off + k + 1) as usize]) {
                v[(off + k + 1) as usize]
            } else {
                v[(off + k - 1) as usize] + 1
            };
            let mut y = x - k;
            while x < n && y < m && a[x as usize] == b[y as usize] {
                x += 1;
                y += 1;
            }
            v[(off + k) as usize] = x;
            if x >= n && y >= m {
                found = Some(d);
                break 'search;
            }
            k += 2;
        }
    }
    let d_end = found?;
    let mut ops = Vec::new();
    let (mut x, mut y) = (n, m);
    for d in (0..=d_end).rev() {
        let tv = &trace[d as usize];
        let at = |k: isize| tv[(k + d + 1) as usize];
        let k = x - y;
        let (prev_x, prev_y) = if d == 0 {
            (0, 0)
        } else {
            let prev_k = if k == -d || (k != d && at(k - 1) < at(k + 1)) { k + 1 } else { k - 1 };
            let px = at(prev_k);
            (px, px - prev_k)
        };
        while x > prev_x && y > prev_y {
            x -= 1;
            y -= 1;
            ops.push(Op::Same(x as usize, y as usize));
        }
        if d > 0 {
            if x == prev_x {
                y -= 1;
                ops.push(Op::Ins(y as usize));
            } else {
                x -= 1;
                ops.push(Op::Del(x as usize));
            }
        }
    }
    ops.reverse();
    Some(ops)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(n: usize) -> String {
        (0..n).map(|i| format!("line {i}\n")).collect()
    }

    #[test]
    fn equal_texts_have_no_diff() {
        assert_eq!(unified_diff("a\nb\n", "a\nb\n", "x", "y"), "");
    }

    #[test]
    fn one_changed_line_gets_three_lines_of_context() {
        let old = lines(10);
        let new = old.replace("line 5\n", "line five\n");
        let d = unified_diff(&old, &new, "old", "new");
        assert_eq!(
            d,
            "--- old\n+++ new\n@@ -3,7 +3,7 @@\n line 2\n line 3\n line 4\n-line 5\n+line five\n line 6\n line 7\n line 8\n"
        );
    }

    #[test]
    fn distant_changes_make_two_hunks_and_insertions_and_deletions_count() {
        let old = lines(30);
        let new = old.replace("line 2\n", "").replace("line 25\n", "line 25\nextra\n");
        let d = unified_diff(&old, &new, "o", "n");
        assert_eq!(d.matches("@@ ").count(), 2, "{d}");
        assert!(d.contains("@@ -1,6 +1,5 @@\n line 0\n line 1\n-line 2\n"), "{d}");
        assert!(d.contains("@@ -24,6 +23,7 @@\n"), "{d}");
        assert!(d.contains(" line 25\n+extra\n line 26\n"), "{d}");
    }

    #[test]
    fn diff_from_and_to_empty() {
        assert_eq!(unified_diff("", "a\nb\n", "o", "n"), "--- o\n+++ n\n@@ -0,0 +1,2 @@\n+a\n+b\n");
        assert_eq!(unified_diff("a\n", "", "o", "n"), "--- o\n+++ n\n@@ -1,1 +0,0 @@\n-a\n");
    }

    #[test]
    fn applying_the_script_rebuilds_the_new_text() {
        // A pseudo-random pair: the script's Same/Ins lines, in order, are the new text and its
        // Same/Del lines the old one; and it is minimal against a brute-force LCS.
        let mut seed = 7u64;
        for _ in 0..50 {
            let mut next = || {
                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (seed >> 33) as usize
            };
            let a: Vec<String> = (0..next() % 12).map(|_| format!("{}", next() % 4)).collect();
            let b: Vec<String> = (0..next() % 12).map(|_| format!("{}", next() % 4)).collect();
            let (ar, br): (Vec<&str>, Vec<&str>) =
                (a.iter().map(|s| s.as_str()).collect(), b.iter().map(|s| s.as_str()).collect());
            let ops = edit_script(&ar, &br);
            let old: Vec<&str> = ops
                .iter()
                .filter_map(|o| match *o {
                    Op::Same(x, _) | Op::Del(x) => Some(ar[x]),
                    Op::Ins(_) => None,
                })
                .collect();
            let new: Vec<&str> = ops
                .iter()
                .filter_map(|o| match *o {
                    Op::Same(_, y) => Some(br[y]),
                    Op::Ins(y) => Some(br[y]),
                    Op::Del(_) => None,
                })
                .collect();
            assert_eq!((old, new), (ar.clone(), br.clone()));
            let same = ops.iter().filter(|o| matches!(o, Op::Same(..))).count();
            assert_eq!(same, lcs(&ar, &br), "{ar:?} {br:?}");
        }
    }

    fn lcs(a: &[&str], b: &[&str]) -> usize {
        let mut t = vec![vec![0; b.len() + 1]; a.len() + 1];
        for i in 0..a.len() {
            for j in 0..b.len() {
                t[i + 1][j + 1] = if a[i] == b[j] { t[i][j] + 1 } else { t[i][j + 1].max(t[i + 1][j]) };
            }
        }
        t[a.len()][b.len()]
    }
}
