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
    let mut opts = SemaOptions {
        script_name: Some(name.to_string()),
        pid: Some(4242),
        ..Default::default()
    };
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
    test_support::check_golden(&dir, "d", 5, render_case);
}
