//! Golden tests of the parser: each `tests/golden/NAME.d` is parsed; the AST dump (see
//! `probe_syntax::dump`) followed by the rendered diagnostics must equal `NAME.expected`.
//!
//! `UPDATE_GOLDEN=1 cargo test -p probe-syntax --test golden` rewrites the expectations; review
//! every diff by eye before committing.

use probe_syntax::{SourceFile, SourceMap, dump, parse, render_all};
use std::path::Path;

fn render_case(name: &str, text: &str) -> String {
    let file = SourceFile::new(name, text);
    let (program, diags) = parse(&file);
    let map: SourceMap = file.into();
    let mut out = dump::program(&program);
    if !diags.is_empty() {
        out.push_str("--- diagnostics\n");
        out.push_str(&render_all(&diags, &map));
    }
    out
}

#[test]
fn golden() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let update = std::env::var("UPDATE_GOLDEN").is_ok_and(|v| v == "1");
    let mut cases: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "d"))
        .collect();
    cases.sort();
    assert!(cases.len() >= 10, "golden cases missing from {}", dir.display());
    let mut failures = Vec::new();
    for case in &cases {
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(case).unwrap();
        let got = render_case(&name, &text);
        let exp_path = case.with_extension("expected");
        if update {
            std::fs::write(&exp_path, &got).unwrap();
            continue;
        }
        match std::fs::read_to_string(&exp_path) {
            Ok(want) if want == got => {}
            Ok(want) => failures.push(format!("{name}: mismatch\n--- expected\n{want}--- got\n{got}")),
            Err(_) => failures.push(format!("{name}: no {} (run with UPDATE_GOLDEN=1)\n--- got\n{got}", exp_path.display())),
        }
    }
    assert!(failures.is_empty(), "{} golden case(s) failed:\n{}", failures.len(), failures.join("\n"));
}
