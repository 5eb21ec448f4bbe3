//! The names D knows (actions, subroutines, aggregating functions, built-in variables) and the
//! "did you mean" suggestions drawn from them.

/// Names of actions (statement-level calls that record or act).
pub(super) const ACTIONS: &[&str] = &[
    "trace",
    "printf",
    "printa",
    "exit",
    "clear",
    "trunc",
    "normalize",
    "denormalize",
    "speculate",
    "commit",
    "discard",
    "tracemem",
    "print",
    "setopt",
    "system",
    "raise",
    "stop",
    "copyout",
    "copyoutstr",
    "chill",
    "panic",
    "breakpoint",
];
/// Names of subroutines (calls with a value).
pub(super) const SUBROUTINES: &[&str] = &[
    "copyinstr",
    "copyin",
    "strlen",
    "strjoin",
    "stringof",
    "basename",
    "dirname",
    "toupper",
    "tolower",
    "strtoll",
    "strtok",
    "substr",
    "strchr",
    "strrchr",
    "strstr",
    "index",
    "rindex",
    "lltostr",
    "rand",
    "progenyof",
    "getmajor",
    "getminor",
    "speculation",
    "htons",
    "ntohs",
    "htonl",
    "ntohl",
    "htonll",
    "ntohll",
    "stack",
    "ustack",
    "sym",
    "func",
    "mod",
    "usym",
    "ufunc",
    "umod",
    "uaddr",
    "inet_ntoa",
    "inet_ntoa6",
    "inet_ntop",
    "alloca",
    "bcopy",
    "copyinto",
    "mutex_owned",
    "mutex_owner",
    "mutex_type_adaptive",
    "mutex_type_spin",
    "rw_read_held",
    "rw_write_held",
    "rw_iswriter",
];
/// Aggregating functions.
pub(super) const AGG_FUNCS: &[&str] = &[
    "count",
    "sum",
    "avg",
    "min",
    "max",
    "stddev",
    "quantize",
    "lquantize",
    "llquantize",
];
/// Built-in variable names (for suggestions).
pub(super) const BUILTINS: &[&str] = &[
    "pid",
    "tid",
    "ppid",
    "uid",
    "gid",
    "execname",
    "cpu",
    "timestamp",
    "vtimestamp",
    "walltimestamp",
    "probeprov",
    "probemod",
    "probefunc",
    "probename",
    "arg0",
    "arg1",
    "arg2",
    "arg3",
    "arg4",
    "arg5",
    "arg6",
    "arg7",
    "arg8",
    "arg9",
    "args",
    "errno",
    "curthread",
    "epid",
    "id",
    "caller",
    "ucaller",
    "stackdepth",
    "ustackdepth",
];

/// Names longer than this (in characters) get no "did you mean" suggestion: nobody misspells a
/// 300-character name by a few letters, and it bounds the edit-distance work per candidate to
/// 256 × 341 cells (issue 22: a 1 MiB unknown name took minutes against full-length tables).
pub(crate) const SUGGEST_MAX_CHARS: usize = 256;

/// A name to compare against candidates, with the largest edit distance still worth suggesting.
pub(crate) struct Near {
    chars: Vec<char>,
    max: usize,
}

impl Near {
    /// `name` with at most `max` edits, or `None` when `name` is too long to suggest for
    /// ([`SUGGEST_MAX_CHARS`]).
    pub(crate) fn new(name: &str, max: usize) -> Option<Near> {
        let chars: Vec<char> = name.chars().take(SUGGEST_MAX_CHARS + 1).collect();
        (chars.len() <= SUGGEST_MAX_CHARS).then_some(Near { chars, max })
    }

    /// The edit distance with adjacent transpositions (optimal string alignment) from the name to
    /// `b` when it is at most the maximum, else `None`: `pdi` is one edit from `pid`.
    ///
    /// Work is O(n·m) for the two lengths only when they differ by at most the maximum (the
    /// distance is at least their difference), with three rows of memory and an early exit once a
    /// whole row exceeds the maximum; a candidate far longer than the name costs O(name length).
    pub(crate) fn distance(&self, b: &str) -> Option<usize> {
        let a = &self.chars;
        let n = a.len();
        let limit = n + self.max;
        let b: Vec<char> = b.chars().take(limit + 1).collect();
        let m = b.len();
        if n.abs_diff(m) > self.max {
            return None;
        }
        let mut prev2 = vec![0usize; m + 1];
        let mut prev: Vec<usize> = (0..=m).collect();
        let mut cur = vec![0usize; m + 1];
        for i in 1..=n {
            cur[0] = i;
            let mut row_min = i;
            for j in 1..=m {
                let cost = usize::from(a[i - 1] != b[j - 1]);
                let mut v = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
                if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                    v = v.min(prev2[j - 2] + 1);
                }
                cur[j] = v;
                row_min = row_min.min(v);
            }
            if row_min > self.max {
                return None;
            }
            std::mem::swap(&mut prev2, &mut prev);
            std::mem::swap(&mut prev, &mut cur);
        }
        Some(prev[m]).filter(|&d| d <= self.max)
    }
}

/// The closest candidates to `name` (distance at most a third of its length, at least 1), best first.
/// None for a name longer than [`SUGGEST_MAX_CHARS`].
pub(super) fn nearest<'c>(
    name: &str,
    candidates: impl IntoIterator<Item = &'c str>,
    max: usize,
) -> Vec<String> {
    let limit = (name.chars().take(SUGGEST_MAX_CHARS * 3).count() / 3).max(1);
    let Some(near) = Near::new(name, limit) else {
        return Vec::new();
    };
    let mut scored: Vec<(usize, &str)> = candidates
        .into_iter()
        .filter(|c| *c != name)
        .filter_map(|c| Some((near.distance(c)?, c)))
        .collect();
    scored.sort();
    scored.dedup();
    keep_best(scored)
        .into_iter()
        .take(max)
        .map(|(_, c)| c.to_string())
        .collect()
}

/// Keeps the candidates close to the best one: an exact-but-one match hides the weaker ones
/// (`opn` → `open`, not also `bpf`); otherwise one more edit than the best is tolerated.
pub(super) fn keep_best<T>(sorted: Vec<(usize, T)>) -> Vec<(usize, T)> {
    let Some(best) = sorted.first().map(|(d, _)| *d) else {
        return sorted;
    };
    let slack = if best <= 1 { 0 } else { 1 };
    sorted
        .into_iter()
        .filter(|(d, _)| *d <= best + slack)
        .collect()
}

pub(super) fn did_you_mean(list: &[String]) -> Option<String> {
    match list {
        [] => None,
        [one] => Some(format!("did you mean `{one}`?")),
        many => Some(format!(
            "did you mean {}?",
            many.iter()
                .map(|s| format!("`{s}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance_basics() {
        let d = |a: &str, b: &str| Near::new(a, 10).unwrap().distance(b);
        assert_eq!(d("read", "read"), Some(0));
        assert_eq!(d("raed", "read"), Some(1));
        assert_eq!(d("pdi", "pid"), Some(1));
        assert_eq!(d("opn", "open"), Some(1));
        assert_eq!(d("", "abc"), Some(3));
        assert_eq!(d("kitten", "sitting"), Some(3));
        assert_eq!(Near::new("kitten", 2).unwrap().distance("sitting"), None);
        assert_eq!(Near::new("abc", 2).unwrap().distance("abcdefgh"), None);
    }

    #[test]
    fn issue_22_long_names_get_no_suggestion() {
        assert!(Near::new(&"x".repeat(SUGGEST_MAX_CHARS), 1).is_some());
        assert!(Near::new(&"x".repeat(SUGGEST_MAX_CHARS + 1), 1).is_none());
        let long = "f".repeat(1 << 20);
        assert!(nearest(&long, ["count", "sum", &long[..1000]], 3).is_empty());
        assert_eq!(
            nearest("cuont", ["count", "sum"], 3),
            vec!["count".to_string()]
        );
    }
}
