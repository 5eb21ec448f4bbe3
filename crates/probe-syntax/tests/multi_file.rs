//! Several sources in one program (`-n` clauses and `-s` files): spans stay global, so every
//! diagnostic names its own file, line and column.

use probe_syntax::{SourceMap, dump, parse, render_all};

#[test]
fn diagnostics_name_the_file_they_come_from() {
    let mut map = SourceMap::new();
    let a = map.add("-n#1", "BEGIN { x = 1; }");
    let b = map.add(
        "script.d",
        "#!/usr/sbin/dtrace -s\n\nEND\n{\n\ty = 2 +;\n}\n",
    );
    let (mut program, mut diags) = parse(map.file(a));
    assert!(diags.is_empty());
    let (p2, d2) = parse(map.file(b));
    program.extend(p2);
    diags.extend(d2);
    assert_eq!(
        dump::program(&program),
        "(clause :::BEGIN\n  (= x 1)\n)\n(clause :::END\n)\n"
    );
    assert_eq!(
        render_all(&diags, &map),
        "script.d:5:9: error[D_SYNTAX]: expected an expression, found `;`\n\
         \x20  5 | \ty = 2 +;\n\
         \x20    | \t       ^\n\
         hint: an operand is missing\n"
    );
    // The clause spans point into their own files.
    let clauses: Vec<_> = program.clauses().collect();
    assert_eq!(map.file_of(clauses[0].span.start).unwrap().name(), "-n#1");
    assert_eq!(
        map.file_of(clauses[1].span.start).unwrap().name(),
        "script.d"
    );
    assert_eq!(map.slice(clauses[1].probes[0].span), "END");
}

#[test]
fn deep_nesting_is_a_diagnostic_not_a_crash() {
    for (open, close) in [
        ("(", ")"),
        ("!", ""),
        ("if (1) ", ""),
        ("1 + ", ""),
        ("", "[0]"),
    ] {
        let n = 100_000;
        let body = if open.starts_with("if") {
            format!("{}x = 1;", open.repeat(n))
        } else {
            // `1 + 1 + ...` and `a[0][0]...` nest by iteration, the others by recursion.
            format!("x = {}a{};", open.repeat(n), close.repeat(n))
        };
        let file = probe_syntax::SourceFile::new("deep.d", format!("BEGIN {{ {body} }}"));
        let (_, diags) = parse(&file);
        assert_eq!(diags.len(), 1, "{diags:?}");
        assert!(
            diags[0].message.contains("nested more than 100 levels"),
            "{}",
            diags[0].message
        );
    }
}
