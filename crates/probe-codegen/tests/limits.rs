//! Issue 22: kernel limits the code generator can predict are reported at the clause that crosses
//! them, with a hint, instead of the loader's raw "total number of maps per program has reached the
//! limit of 64" or the verifier's "BPF program is too large".

use probe_codegen::{CodegenOptions, MAX_MAPS_PER_PROGRAM, MAX_PENDING_BRANCHES, compile};
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
fn issue_22_aggregations_share_maps() {
    // 62 aggregations were 62 maps (the kernel allows 64 per program). Aggregations of one shape
    // share one: here the scratch map, the statistics (drops when the map is full) and one
    // aggregation map.
    let text: String = (0..62)
        .map(|i| format!("BEGIN {{ @a{i}[1] = count(); }}\n"))
        .collect();
    assert_eq!(build(&text), Ok(vec![3]));
    // Unkeyed ones are slots of one array, which cannot be full: no statistics.
    let unkeyed: String = (0..200)
        .map(|i| format!("BEGIN {{ @u{i} = sum(1); }}\n"))
        .collect();
    assert_eq!(build(&unkeyed), Ok(vec![2]));
    // Keyed and unkeyed, other key sizes and other value sizes are other shapes.
    let mixed = "BEGIN { @a[1] = count(); @b[2] = count(); @c = count(); @d[\"x\", 1] = count(); @e[1] = quantize(1); }";
    assert_eq!(build(mixed), Ok(vec![2 + 4]));
}

#[test]
fn issue_22_too_many_maps_is_a_located_error() {
    // Still reachable with aggregations of 70 different shapes (lquantize's value size follows its
    // range): the scratch map and 63 of them make 64, the clause that adds the 65th is the error,
    // with the limit and a hint.
    let text: String = (0..70)
        .map(|i| format!("BEGIN {{ @a{i} = lquantize(1, 0, {}, 1); }}\n", i + 2))
        .collect();
    let e = build(&text).unwrap_err();
    let first = e.lines().next().unwrap();
    assert_eq!(
        first,
        format!(
            "limits.d:64:1: error[D_UNKNOWN]: this clause makes its probe's BPF program use 65 maps, above the kernel's limit of {MAX_MAPS_PER_PROGRAM} per program"
        ),
        "{e}"
    );
    assert!(e.contains("hint: each aggregation"), "{e}");
}

#[test]
fn issue_22_many_aggregations_compile() {
    // Their key sizes were found by one walk of the program per aggregation (quadratic); 2,500
    // aggregations in 2,500 clauses compile into one shared map.
    let text: String = (0..2500)
        .map(|i| format!("BEGIN {{ @a{i}[\"k\"] = count(); }}\n"))
        .collect();
    assert_eq!(build(&text), Ok(vec![3]));
}

#[test]
fn issue_22_too_many_branches_is_a_located_error() {
    // The verifier keeps the far side of every conditional jump pending and gives up past 8192
    // ("The sequence of 8193 jumps is too complex"): each of these clauses has 3 (the lookup, the
    // create, the second lookup), so clause 2731 crosses it.
    let text: String = (0..3000)
        .map(|i| format!("BEGIN {{ @a{i}[\"k\"] = count(); }}\n"))
        .collect();
    let e = build(&text).unwrap_err();
    assert!(
        e.starts_with(&format!(
            "limits.d:2731:1: error[D_UNKNOWN]: this clause makes its probe's BPF program have 8194 conditional branches, above the verifier's limit of {MAX_PENDING_BRANCHES} pending ones\n"
        )),
        "{e}"
    );
    assert!(e.contains("hint: merge clauses"), "{e}");
}

#[test]
fn issue_22_many_begin_clauses_compile() {
    let counts = build(&"BEGIN { x = 1; }\n".repeat(5000)).unwrap();
    assert_eq!(counts.len(), 1);
    assert!(counts[0] <= MAX_MAPS_PER_PROGRAM, "{counts:?}");
}

#[test]
fn issue_22_variables_share_maps() {
    // 80 associative arrays and 200 thread-locals were a map each, over the kernel's 64 per
    // program. Now variables of one shape share a map: here one for the arrays, one for the
    // thread-locals, plus the scratch map and the statistics (drops when a map is full).
    let arrays: String = (0..80)
        .map(|i| format!("BEGIN {{ a{i}[1] = {i}; }}\n"))
        .collect();
    let tls: String = (0..200)
        .map(|i| format!("BEGIN {{ self->t{i} = {i}; }}\n"))
        .collect();
    assert_eq!(build(&arrays), Ok(vec![3]));
    assert_eq!(build(&tls), Ok(vec![3]));
    assert_eq!(build(&format!("{arrays}{tls}")), Ok(vec![4]));
    // Different value sizes (a string) and key shapes get their own map.
    let mixed = "BEGIN { self->s = \"x\"; self->n = 1; a[1] = 1; b[1, 2] = 1; c[\"k\"] = 1; }";
    assert_eq!(build(mixed), Ok(vec![2 + 2 + 3]));
}
