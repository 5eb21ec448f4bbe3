//! Issue 22: kernel limits the code generator can predict are reported at the clause that crosses
//! them, with a hint, instead of the loader's raw "total number of maps per program has reached the
//! limit of 64" or the verifier's "BPF program is too large".

use probe_codegen::{CodegenOptions, MAX_MAPS_PER_PROGRAM, compile};
use probe_sema::{
    DtraceProbe, ProbeArgs, ProbeInfo, ProbeKind, SemaOptions, StaticCatalog, analyze,
};
use probe_syntax::{SourceFile, SourceMap, parse, render_all};

fn catalog() -> StaticCatalog {
    let dtrace = |name: &str, p| ProbeInfo {
        provider: "dtrace".into(),
        module: String::new(),
        function: String::new(),
        name: name.into(),
        args: ProbeArgs::None,
        kind: ProbeKind::Dtrace(p),
    };
    StaticCatalog {
        probes: vec![
            dtrace("BEGIN", DtraceProbe::Begin),
            dtrace("END", DtraceProbe::End),
        ],
    }
}

/// Compiles `text`: the programs' map counts, or the rendered diagnostic.
fn build(text: &str) -> Result<Vec<usize>, String> {
    let file = SourceFile::new("limits.d", text);
    let (program, diags) = parse(&file);
    let map: SourceMap = file.into();
    assert!(
        !diags.iter().any(|d| d.is_error()),
        "{}",
        render_all(&diags, &map)
    );
    let checked =
        analyze(&program, &catalog(), &SemaOptions::default()).map_err(|d| render_all(&d, &map))?;
    match compile(&checked, &CodegenOptions::default()) {
        Ok(l) => Ok(l
            .programs
            .iter()
            .map(|p| {
                let mut m: Vec<usize> = p.map_refs.iter().map(|r| r.map).collect();
                m.sort();
                m.dedup();
                m.len()
            })
            .collect()),
        Err(e) => Err(render_all(&[e.diagnostic()], &map)),
    }
}

#[test]
fn issue_22_too_many_aggregations_is_a_located_error() {
    // 62 keyed aggregations, the ring buffer and the scratch map: 64 maps, the most a program may
    // use; one more aggregation crosses the limit, at its clause (line 64).
    let text: String = (0..62)
        .map(|i| format!("BEGIN {{ @a{i}[1] = count(); }}\n"))
        .collect();
    assert_eq!(build(&text), Ok(vec![MAX_MAPS_PER_PROGRAM]));
    let text: String = (0..70)
        .map(|i| format!("BEGIN {{ @a{i}[1] = count(); }}\n"))
        .collect();
    let e = build(&text).unwrap_err();
    let first = e.lines().next().unwrap();
    assert!(
        first.starts_with(
            "limits.d:63:1: error: this clause makes its probe's BPF program use 65 maps"
        ) && first.ends_with(&format!(
            "above the kernel's limit of {MAX_MAPS_PER_PROGRAM} per program"
        )),
        "{e}"
    );
    assert!(e.contains("hint: each aggregation"), "{e}");
}

#[test]
fn issue_22_many_begin_clauses_compile() {
    let counts = build(&"BEGIN { x = 1; }\n".repeat(5000)).unwrap();
    assert_eq!(counts.len(), 1);
    assert!(counts[0] <= MAX_MAPS_PER_PROGRAM, "{counts:?}");
}

#[test]
fn issue_22_too_many_variables_is_a_located_error() {
    // 80 associative arrays and 200 thread-locals: one map each, so the 63rd crosses the limit.
    for (what, each) in [
        ("arrays", "a{i}[1] = 1;"),
        ("thread-locals", "self->t{i} = 1;"),
    ] {
        let text: String = (0..200)
            .map(|i| format!("BEGIN {{ {} }}\n", each.replace("{i}", &i.to_string())))
            .collect();
        let e = build(&text).unwrap_err();
        assert!(
            e.starts_with(
                "limits.d:63:1: error: this clause makes its probe's BPF program use 65 maps"
            ),
            "{what}: {e}"
        );
    }
}
