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
    test_support::check_golden(&dir, "d", 10, render_case);
}
