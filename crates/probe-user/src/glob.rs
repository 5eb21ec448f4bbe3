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

/// True when `text` matches `pattern` (see the module docs for the syntax); an empty pattern
/// matches any text. The one matcher of the workspace: probe-sema's
/// [`field_matches`](probe_sema::field_matches), which the tests below pin to gmatch's rules.
pub use probe_sema::field_matches as glob_match;

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
