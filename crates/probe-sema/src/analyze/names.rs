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
    "system",
    "raise",
    "stop",
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
    "substr",
    "strchr",
    "strrchr",
    "strstr",
    "index",
    "rindex",
    "lltostr",
    "rand",
    "progenyof",
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

/// Edit distance with adjacent transpositions (optimal string alignment), for "did you mean":
/// `pdi` is one edit from `pid`.
pub(crate) fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let (n, m) = (a.len(), b.len());
    let mut d = vec![vec![0usize; m + 1]; n + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=n {
        for j in 1..=m {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
        }
    }
    d[n][m]
}

/// The closest candidates to `name` (distance at most a third of its length, at least 1), best first.
pub(super) fn nearest<'c>(
    name: &str,
    candidates: impl IntoIterator<Item = &'c str>,
    max: usize,
) -> Vec<String> {
    let limit = (name.chars().count() / 3).max(1);
    let mut scored: Vec<(usize, &str)> = candidates
        .into_iter()
        .map(|c| (edit_distance(name, c), c))
        .filter(|(d, c)| *d <= limit && *c != name)
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
        assert_eq!(edit_distance("read", "read"), 0);
        assert_eq!(edit_distance("raed", "read"), 1);
        assert_eq!(edit_distance("pdi", "pid"), 1);
        assert_eq!(edit_distance("opn", "open"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
    }
}
