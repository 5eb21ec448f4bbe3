//! The front end never panics: every golden script of both crates, mutated thousands of ways
//! (characters deleted, inserted, duplicated, including multi-byte ones), goes through the parser,
//! the analysis and the diagnostic renderer. Every rendered error names `file:line:col` or has no
//! location at all.

mod common;

use probe_sema::{SemaOptions, analyze};
use probe_syntax::{SourceFile, SourceMap, parse, render_all};
use std::path::Path;

/// A small deterministic generator (64-bit LCG, Knuth's MMIX constants) so failures reproduce.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const PIECES: &[&str] = &[
    "(",
    ")",
    "{",
    "}",
    "[",
    "]",
    "/",
    "*",
    ";",
    ",",
    ":",
    "\"",
    "'",
    "\\",
    "@",
    "$",
    "#",
    "->",
    "?",
    "=",
    "é",
    "\n",
    " ",
    "0x",
    "9",
    "self",
    "this",
    "args",
    "count()",
    "printf(",
    "/*",
    "//",
    "#pragma D option ",
];

fn mutate(text: &str, rng: &mut Lcg) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(chars.len() + 1);
        match rng.below(3) {
            0 if !chars.is_empty() => {
                let n = 1 + rng.below(5);
                let end = (at + n).min(chars.len());
                if at < end {
                    chars.drain(at..end);
                }
            }
            1 => {
                let p = PIECES[rng.below(PIECES.len())];
                for (i, c) in p.chars().enumerate() {
                    chars.insert(at + i, c);
                }
            }
            _ => {
                let end = (at + rng.below(12)).min(chars.len());
                let dup: Vec<char> = chars[at.min(end)..end].to_vec();
                for (i, c) in dup.into_iter().enumerate() {
                    chars.insert(end + i, c);
                }
            }
        }
    }
    chars.into_iter().collect()
}

#[test]
fn mutated_scripts_never_panic() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut scripts = Vec::new();
    for dir in [
        root.join("tests/golden"),
        root.join("../probe-syntax/tests/golden"),
    ] {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            if e.path().extension().is_some_and(|x| x == "d") {
                scripts.push(std::fs::read_to_string(e.path()).unwrap());
            }
        }
    }
    assert!(scripts.len() > 20);
    let catalog = common::catalog();
    let opts = SemaOptions {
        macro_args: vec!["1".into(), "x".into()],
        target_pid: Some(1234),
        ..Default::default()
    };
    let mut rng = Lcg(0x5167_4e11);
    let mut with_errors = 0;
    for round in 0..60 {
        for s in &scripts {
            let text = mutate(s, &mut rng);
            let file = SourceFile::new("m.d", text.clone());
            let (program, diags) = parse(&file);
            let map: SourceMap = file.into();
            let mut all = diags;
            if let Err(d) = analyze(&program, &catalog, &opts) {
                all.extend(d);
            }
            let out = render_all(&all, &map);
            if !all.is_empty() {
                with_errors += 1;
            }
            for line in out
                .lines()
                .filter(|l| l.contains(": error") || l.starts_with("error"))
            {
                assert!(
                    line.starts_with("m.d:") || line.starts_with("error"),
                    "round {round}: bad diagnostic line {line:?} for input:\n{text}"
                );
            }
        }
    }
    // The mutations must actually break scripts, or this test proves nothing.
    assert!(
        with_errors > 500,
        "only {with_errors} mutated scripts had diagnostics"
    );
}

#[test]
fn deepest_accepted_nesting_analyzes_without_overflow() {
    // Just under the parser's nesting limit (100), in a test thread (2 MiB stack): the analysis recurses
    // over the same depth and must not overflow. Each shape nests differently per level.
    let catalog = common::catalog();
    // `!` and `~` keep one node per level (`-` would lex `--`); parentheses and subscripts cost the
    // parser two or three levels each.
    for (prefix, suffix, n) in [
        ("!", "", 95),
        ("~", "", 95),
        ("(1 + ", ")", 30),
        ("x[", "]", 30),
        ("~(", ")", 30),
        ("if (1) ", "", 90),
        ("1 + ", "", 95),
        ("x[0] + 1 - ", "", 45),
    ] {
        let body = if prefix.starts_with("if") {
            format!("x[0] = 1; {}y = 1;", prefix.repeat(n))
        } else {
            format!("x[0] = 1; y = {}1{};", prefix.repeat(n), suffix.repeat(n))
        };
        let file = SourceFile::new("deep.d", format!("BEGIN {{ {body} }}"));
        let (program, diags) = parse(&file);
        assert!(diags.is_empty(), "{prefix}: {diags:?}");
        let _ = analyze(&program, &catalog, &SemaOptions::default());
        let _ = probe_sema::needs_kernel_types(&program);
    }
}
