//! Pivot Tracing in D (Mace, Roelke, Fonseca, "Pivot Tracing", SOSP 2015): the built-in-like
//! variables `causal_task` (the task key of the current thread, 0: none), `causal_activity`
//! (its activity label, "" when none) and `causal_baggage["KEY"]` (the value of baggage item KEY
//! that the task carries, set in any process it went through; "" when absent), so that any
//! probe can group by request or by what an earlier process put in the baggage (a
//! happened-before join):
//!
//! ```text
//! syscall::read:return /causal_task/ { @[causal_task] = sum(arg0); }
//! syscall::read:return /causal_task/ { @[causal_baggage["client"]] = sum(arg0); }
//! ```
//!
//! `causal_task` and `causal_activity` are D `inline`s over per-thread arrays that a
//! `causal:context` clause keeps, prepended to the user's program ([`prelude`]).
//! `causal_baggage["KEY"]` (KEY a string constant) is rewritten ([`rewrite_baggage`]) to an
//! `inline` of the same kind, one per key, whose array the `causal:context` clause fills by
//! scanning the published baggage (`,key=value,...,`, its fourth argument) for `",KEY="`.
//! A thread's values are known from its first `causal:context` after the program started
//! (docs/causal-accounting.md, "Pivot Tracing in D").

use std::path::PathBuf;

use probe_syntax::lexer::{Lexer, Tok};

/// The name a program uses for baggage items.
pub const BAGGAGE_NAME: &str = "causal_baggage";

/// Why a program's `causal_baggage` cannot be rewritten.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PivotError {
    /// `causal_baggage` not followed by `["KEY"]` with KEY a string constant.
    #[error(
        "causal_baggage at byte {0}: give the key as a string constant, as in causal_baggage[\"client\"]"
    )]
    NotConstantKey(u32),
    /// A key that cannot be a W3C baggage key (empty, or not an HTTP token).
    #[error("causal_baggage[{0:?}]: a baggage key is a token (letters, digits, !#$%&'*+-.^_`|~)")]
    BadKey(String),
}

/// The D prelude defining `causal_task` and `causal_activity` for the processes of `exes`, and
/// `causal_baggage_N` for each baggage key `keys[N]` (as [`rewrite_baggage`] numbers them).
pub fn prelude(exes: &[PathBuf], keys: &[String]) -> String {
    let mut d = String::from(
        "uint64_t causal_task_of[int];\nstring causal_activity_of[int];\n\
         inline uint64_t causal_task = causal_task_of[tid];\n\
         inline string causal_activity = causal_activity_of[tid];\n",
    );
    for (n, _) in keys.iter().enumerate() {
        d.push_str(&format!(
            "string causal_baggage_of_{n}[int];\n\
             inline string causal_baggage_{n} = causal_baggage_of_{n}[tid];\n"
        ));
    }
    for exe in exes {
        d.push_str(&format!(
            "causal:{}::context {{ causal_task_of[tid] = arg0; causal_activity_of[tid] = copyinstr(arg2);",
            exe.display()
        ));
        if !keys.is_empty() {
            d.push_str(" this->causal_bag = copyinstr(arg3);");
        }
        for (n, key) in keys.iter().enumerate() {
            // The value runs from after ",KEY=" to the next ",", which the published form
            // always has (it ends with one).
            let pat = format!(",{key}=");
            d.push_str(&format!(
                "\n  this->causal_at = index(this->causal_bag, \"{pat}\");\
                 \n  this->causal_from = this->causal_at + {len};\
                 \n  causal_baggage_of_{n}[tid] = this->causal_at < 0 ? \"\" : \
                 substr(this->causal_bag, this->causal_from, \
                 index(this->causal_bag, \",\", this->causal_from) - this->causal_from);",
                len = pat.len()
            ));
        }
        d.push_str(" }\n");
    }
    d
}

/// Rewrites every `causal_baggage["KEY"]` in D program `src` to `causal_baggage_N`, N the
/// index of KEY in `keys` (appended there when new), leaving everything else as written.
/// Works on the D tokens, so the name inside a string or a comment is not touched.
///
/// # Errors
/// [`PivotError::NotConstantKey`] when `causal_baggage` is not indexed by one string constant
/// (its byte offset in `src`); [`PivotError::BadKey`] when the key cannot be a baggage key
/// (a key with a `"` or `\` could not even be written into the prelude).
pub fn rewrite_baggage(src: &str, keys: &mut Vec<String>) -> Result<String, PivotError> {
    let mut lx = Lexer::new(src, 0);
    let mut diags = Vec::new();
    let mut toks = Vec::new();
    loop {
        let t = lx.next_token(&mut diags);
        if t.tok == Tok::Eof {
            break;
        }
        toks.push(t);
    }
    let mut out = String::with_capacity(src.len());
    let mut copied = 0usize;
    let mut i = 0;
    while i < toks.len() {
        if toks[i].tok != Tok::Ident(BAGGAGE_NAME.into()) {
            i += 1;
            continue;
        }
        let start = toks[i].span.start;
        let (Some(Tok::Punct("[")), Some(Tok::Str(key)), Some(Tok::Punct("]"))) = (
            toks.get(i + 1).map(|t| &t.tok),
            toks.get(i + 2).map(|t| &t.tok),
            toks.get(i + 3).map(|t| &t.tok),
        ) else {
            return Err(PivotError::NotConstantKey(start));
        };
        let tchar = |c: u8| c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c);
        if key.is_empty() || !key.bytes().all(tchar) {
            return Err(PivotError::BadKey(key.clone()));
        }
        let n = match keys.iter().position(|k| k == key) {
            Some(n) => n,
            None => {
                keys.push(key.clone());
                keys.len() - 1
            }
        };
        out.push_str(&src[copied..start as usize]);
        out.push_str(&format!("causal_baggage_{n}"));
        copied = toks[i + 3].span.end as usize;
        i += 4;
    }
    out.push_str(&src[copied..]);
    Ok(out)
}

/// A whole Pivot Tracing program for the processes of `exes`: each source of `sources`
/// rewritten ([`rewrite_baggage`]) and the [`prelude`] with the keys they use, which goes before
/// them.
///
/// # Errors
/// As [`rewrite_baggage`].
pub fn program(exes: &[PathBuf], sources: &[&str]) -> Result<(String, Vec<String>), PivotError> {
    let mut keys = Vec::new();
    let rewritten = sources
        .iter()
        .map(|s| rewrite_baggage(s, &mut keys))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((prelude(exes, &keys), rewritten))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prelude_names_each_executable() {
        let d = prelude(&[PathBuf::from("/srv/a"), PathBuf::from("/srv/b")], &[]);
        assert!(d.contains("inline uint64_t causal_task = causal_task_of[tid];"));
        assert!(d.contains("causal:/srv/a::context {"));
        assert!(d.contains("causal:/srv/b::context {"));
        assert!(!d.contains("arg3"), "no baggage scan without keys");
    }

    #[test]
    fn baggage_uses_are_rewritten_per_key() {
        let mut keys = vec![];
        let src = "syscall::read:return /causal_baggage[\"client\"] != \"\"/ \
                   { @[causal_baggage[ \"client\" ], causal_baggage[\"tier\"]] = sum(arg0); \
                   printf(\"causal_baggage[\\\"x\\\"]\"); } /* causal_baggage[1] */";
        let out = rewrite_baggage(src, &mut keys).unwrap();
        assert_eq!(keys, ["client", "tier"]);
        assert_eq!(
            out,
            "syscall::read:return /causal_baggage_0 != \"\"/ \
             { @[causal_baggage_0, causal_baggage_1] = sum(arg0); \
             printf(\"causal_baggage[\\\"x\\\"]\"); } /* causal_baggage[1] */"
        );
        // A second source reuses the numbering.
        assert_eq!(
            rewrite_baggage("BEGIN { trace(causal_baggage[\"tier\"]); }", &mut keys).unwrap(),
            "BEGIN { trace(causal_baggage_1); }"
        );
        assert_eq!(
            rewrite_baggage("BEGIN { x = \"a\"; trace(causal_baggage[x]); }", &mut keys),
            Err(PivotError::NotConstantKey(23))
        );
        assert_eq!(
            rewrite_baggage("BEGIN { trace(causal_baggage[\"a b\"]); }", &mut keys),
            Err(PivotError::BadKey("a b".into()))
        );
        let d = prelude(&[PathBuf::from("/srv/a")], &keys);
        assert!(d.contains("inline string causal_baggage_1 = causal_baggage_of_1[tid];"));
        assert!(d.contains("index(this->causal_bag, \",tier=\")"));
        assert!(d.contains("this->causal_from = this->causal_at + 6;"));
    }
}
