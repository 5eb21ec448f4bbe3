//! Shell-style pattern matching of probe-description fields (module and function names).
//!
//! DTrace matches the four fields of a probe description with the rules of `gmatch(3GEN)`
//! (DTrace guide, "Probe Descriptions"): `*` matches any string (also empty), `?` any one
//! character, `[abc]`/`[a-z]` one character of a set, `[!abc]` one character outside a set, and `\`
//! quotes the next character. An empty pattern matches everything, as an empty field does.

/// True when `pattern` contains a glob metacharacter (`*`, `?`, `[` or `\`).
///
/// A pattern without one names exactly one thing, which lets callers look it up directly (and say
/// "no such function" instead of "nothing matched").
pub fn is_glob(pattern: &str) -> bool {
    pattern.contains(['*', '?', '[', '\\'])
}

/// True when `text` matches `pattern` (see the module docs for the syntax).
///
/// An empty pattern matches any text. An unclosed `[` is matched as a literal `[`, as `gmatch` does.
/// Runs in O(len(pattern) × len(text)) with the classic single-backtrack algorithm.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    if pattern.is_empty() {
        return true;
    }
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0usize, 0usize);
    // Position after the last `*` seen, and the text position it is trying to absorb up to.
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() {
            match p[pi] {
                '*' => {
                    star = Some((pi + 1, ti));
                    pi += 1;
                    continue;
                }
                '?' => {
                    pi += 1;
                    ti += 1;
                    continue;
                }
                '[' => {
                    if let Some((matched, next)) = match_class(&p, pi, t[ti]) {
                        if matched {
                            pi = next;
                            ti += 1;
                            continue;
                        }
                    } else if t[ti] == '[' {
                        pi += 1;
                        ti += 1;
                        continue;
                    }
                }
                '\\' if pi + 1 < p.len() => {
                    if p[pi + 1] == t[ti] {
                        pi += 2;
                        ti += 1;
                        continue;
                    }
                }
                c => {
                    if c == t[ti] {
                        pi += 1;
                        ti += 1;
                        continue;
                    }
                }
            }
        }
        // Mismatch: let the last `*` absorb one more character, or fail.
        match star {
            Some((sp, st)) => {
                pi = sp;
                ti = st + 1;
                star = Some((sp, st + 1));
            }
            None => return false,
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// Matches the bracket expression starting at `p[start] == '['` against `c`.
///
/// Returns `(matched, index after the closing ']')`, or `None` when the bracket is not closed.
fn match_class(p: &[char], start: usize, c: char) -> Option<(bool, usize)> {
    let mut i = start + 1;
    let negate = i < p.len() && (p[i] == '!' || p[i] == '^');
    if negate {
        i += 1;
    }
    let mut matched = false;
    let mut first = true;
    while i < p.len() {
        if p[i] == ']' && !first {
            return Some((matched != negate, i + 1));
        }
        first = false;
        let lo = p[i];
        if i + 2 < p.len() && p[i + 1] == '-' && p[i + 2] != ']' {
            let hi = p[i + 2];
            if lo <= c && c <= hi {
                matched = true;
            }
            i += 3;
        } else {
            if lo == c {
                matched = true;
            }
            i += 1;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_and_wildcards() {
        assert!(glob_match("malloc", "malloc"));
        assert!(!glob_match("malloc", "malloc2"));
        assert!(!glob_match("malloc", "mallo"));
        assert!(glob_match("", "anything"));
        assert!(glob_match("*", ""));
        assert!(glob_match("mall*", "malloc"));
        assert!(glob_match("*alloc", "malloc"));
        assert!(glob_match("*alloc", "calloc"));
        assert!(!glob_match("*alloc", "allocate"));
        assert!(glob_match("m?lloc", "malloc"));
        assert!(!glob_match("m?lloc", "mlloc"));
        assert!(glob_match("*a*b*c*", "xxaxxbxxcxx"));
        assert!(!glob_match("*a*b*c*", "xxaxxcxxbxx"));
        assert!(glob_match("lib*.so.?", "libc.so.6"));
    }

    #[test]
    fn classes_and_escapes() {
        assert!(glob_match("[cm]alloc", "calloc"));
        assert!(glob_match("[cm]alloc", "malloc"));
        assert!(!glob_match("[cm]alloc", "palloc"));
        assert!(glob_match("[!cm]alloc", "palloc"));
        assert!(!glob_match("[!cm]alloc", "malloc"));
        assert!(glob_match("f[0-9]", "f7"));
        assert!(!glob_match("f[0-9]", "fa"));
        assert!(glob_match("a\\*b", "a*b"));
        assert!(!glob_match("a\\*b", "axb"));
        // An unclosed bracket is a literal.
        assert!(glob_match("a[b", "a[b"));
        assert!(is_glob("a*"));
        assert!(!is_glob("malloc"));
    }
}
