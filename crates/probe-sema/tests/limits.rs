//! Issue 22: compile time stays linear in the program size, and every name length the user
//! controls has a limit with a located diagnostic. These assert the result (accepted, or which
//! error where); the timings are in bench/compile-bench.sh, never here.

mod common;

use probe_sema::{PROBE_FIELD_LIMITS, SemaOptions, analyze};
use probe_syntax::{SourceFile, SourceMap, parse, render_all};

/// Parses and analyzes `text`: the number of clauses, or the rendered diagnostics.
fn check(text: &str) -> Result<usize, String> {
    let file = SourceFile::new("limits.d", text);
    let (program, diags) = parse(&file);
    let map: SourceMap = file.into();
    if diags.iter().any(|d| d.is_error()) {
        return Err(render_all(&diags, &map));
    }
    match analyze(&program, &common::catalog(), &SemaOptions::default()) {
        Ok(p) => Ok(p.clauses.len()),
        Err(d) => Err(render_all(&d, &map)),
    }
}

#[test]
fn issue_22_long_probe_names_are_a_located_error() {
    for len in [16_000, 64_000] {
        let e = check(&format!("syscall::{}:entry {{ }}", "a".repeat(len))).unwrap_err();
        assert!(
            e.starts_with(&format!(
                "limits.d:1:10: error[D_PDESC_INVAL]: probe function is {len} bytes long, above the limit of 1024\n"
            )),
            "{}",
            &e[..200]
        );
        assert!(e.contains("hint: no function is that long"));
        assert_eq!(e.matches("error[").count(), 1, "one diagnostic");
    }
    let e = check(&format!("{}:::entry {{ }}", "p".repeat(65))).unwrap_err();
    assert!(
        e.starts_with(
            "limits.d:1:1: error[D_PDESC_INVAL]: probe provider is 65 bytes long, above the limit of 64\n"
        ),
        "{e}"
    );
    let e = check(&format!("syscall::read:{} {{ }}", "n".repeat(100))).unwrap_err();
    assert!(
        e.starts_with("limits.d:1:15: error[D_PDESC_INVAL]: probe name is 100 bytes long"),
        "{e}"
    );
    let e = check(&format!("pid1234:{}:main:entry {{ }}", "/m".repeat(2049))).unwrap_err();
    assert!(
        e.starts_with(
            "limits.d:1:9: error[D_PDESC_INVAL]: probe module is 4098 bytes long, above the limit of 4096"
        ),
        "{e}"
    );
    assert_eq!(PROBE_FIELD_LIMITS.map(|(_, l)| l), [64, 4096, 1024, 64]);
    // At the limit: an ordinary no-match, with no suggestion work beyond the bound.
    let e = check(&format!("syscall::{}:entry {{ }}", "a".repeat(1024))).unwrap_err();
    assert!(e.contains("does not match any probes"), "{}", &e[..200]);
}

#[test]
fn issue_22_huge_unknown_function_is_reported_without_suggestions() {
    let e = check(&format!("BEGIN {{ {}(); }}", "f".repeat(1 << 20))).unwrap_err();
    assert!(
        e.starts_with("limits.d:1:9: error[D_FUNC_UNDEF]: unknown function `fff"),
        "{}",
        &e[..100]
    );
    assert!(!e.contains("did you mean"));
    // A short misspelling still gets its suggestion.
    let e = check("BEGIN { x = cuont(); }").unwrap_err();
    assert!(e.contains("did you mean"), "{e}");
}

#[test]
fn issue_22_five_thousand_begin_clauses_compile() {
    assert_eq!(check(&"BEGIN { x = 1; }\n".repeat(5000)), Ok(5000));
}
