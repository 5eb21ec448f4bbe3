//! Golden tests of the analysis: each `tests/golden/NAME.d` is parsed and analyzed against the test
//! catalog (tests/common); the dump of the checked program, or the rendered diagnostics, must equal
//! `NAME.expected`. A first line `// args: a b c` sets the macro arguments; `// target: N` sets
//! `$target`.
//!
//! `UPDATE_GOLDEN=1 cargo test -p probe-sema --test golden` rewrites the expectations; review every
//! diff by eye before committing.

mod common;

use probe_sema::{SemaOptions, analyze, dump};
use probe_syntax::{SourceFile, SourceMap, parse, render_all};
use std::path::Path;

fn render_case(name: &str, text: &str) -> String {
    let mut opts = SemaOptions { script_name: Some(name.to_string()), pid: Some(4242), ..Default::default() };
    for line in text.lines().take_while(|l| l.starts_with("//")) {
        if let Some(a) = line.strip_prefix("// args:") {
            opts.macro_args = a.split_whitespace().map(String::from).collect();
        }
        if let Some(t) = line.strip_prefix("// target:") {
            opts.target_pid = Some(t.trim().parse().unwrap());
        }
        if let Some(x) = line.strip_prefix("// -x") {
            let x = x.trim();
            let (n, v) = match x.split_once('=') {
                Some((n, v)) => (n.to_string(), Some(v.to_string())),
                None => (x.to_string(), None),
            };
            opts.options.push((n, v));
        }
    }
    let file = SourceFile::new(name, text);
    let (program, mut diags) = parse(&file);
    let map: SourceMap = file.into();
    if diags.iter().any(|d| d.is_error()) {
        return format!("--- parse errors\n{}", render_all(&diags, &map));
    }
    match analyze(&program, &common::catalog(), &opts) {
        Ok(p) => {
            let mut out = dump::program(&p);
            diags.extend(p.warnings.iter().cloned());
            if !diags.is_empty() {
                out.push_str("--- warnings\n");
                out.push_str(&render_all(&diags, &map));
            }
            out
        }
        Err(d) => {
            diags.extend(d);
            format!("--- errors\n{}", render_all(&diags, &map))
        }
    }
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
    assert!(cases.len() >= 5, "golden cases missing from {}", dir.display());
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
