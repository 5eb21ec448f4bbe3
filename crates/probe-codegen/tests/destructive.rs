//! Issue 15: the destructive actions that act in the kernel. `chill()` spins on the
//! `bpf_iter_num` kfuncs (their BTF ids come from the runtime), inside DTrace's per-CPU budget;
//! `copyout()`/`copyoutstr()` call `bpf_probe_write_user` (helper 36).

use probe_codegen::insn::{Insn, PSEUDO_KFUNC_CALL, helper};
use probe_codegen::layout::MapRole;
use probe_codegen::lower::IterNumKfuncs;
use probe_codegen::{CodegenOptions, Layout, compile};
use probe_sema::{
    DtraceProbe, ProbeArgs, ProbeInfo, ProbeKind, SemaOptions, StaticCatalog, analyze,
};
use probe_syntax::{SourceFile, SourceMap, parse, render_all};

fn catalog() -> StaticCatalog {
    StaticCatalog {
        probes: vec![ProbeInfo {
            provider: "dtrace".into(),
            module: String::new(),
            function: String::new(),
            name: "BEGIN".into(),
            args: ProbeArgs::None,
            kind: ProbeKind::Dtrace(DtraceProbe::Begin),
        }],
    }
}

/// Compiles `text` with destructive actions allowed: the layout, or the rendered diagnostic.
fn build(text: &str, kfuncs: Option<IterNumKfuncs>) -> Result<Layout, String> {
    let file = SourceFile::new("d.d", text);
    let (program, diags) = parse(&file);
    let map: SourceMap = file.into();
    assert!(
        !diags.iter().any(|d| d.is_error()),
        "{}",
        render_all(&diags, &map)
    );
    let sema = SemaOptions {
        options: vec![("destructive".into(), None)],
        ..SemaOptions::default()
    };
    let checked = analyze(&program, &catalog(), &sema).map_err(|d| render_all(&d, &map))?;
    let opts = CodegenOptions {
        kfuncs,
        ..CodegenOptions::default()
    };
    compile(&checked, &opts).map_err(|e| render_all(&[e.diagnostic()], &map))
}

fn insns(l: &Layout) -> Vec<Insn> {
    l.programs.iter().flat_map(|p| p.insns.clone()).collect()
}

const IDS: IterNumKfuncs = IterNumKfuncs {
    new: 70001,
    next: 70002,
    destroy: 70003,
};

#[test]
fn chill_spins_on_the_iterator_kfuncs_with_a_per_cpu_budget() {
    let l = build("BEGIN { chill(1000); }", Some(IDS)).unwrap();
    let calls: Vec<i32> = insns(&l)
        .iter()
        .filter(|i| i.code == 0x85 && i.src == PSEUDO_KFUNC_CALL)
        .map(|i| i.imm)
        .collect();
    assert_eq!(calls, vec![70001, 70002, 70003]);
    let budget: Vec<_> = l
        .maps
        .iter()
        .filter(|m| m.role == MapRole::ChillBudget)
        .collect();
    assert_eq!(budget.len(), 1);
    assert_eq!((budget[0].value_size, budget[0].max_entries), (16, 1));
    // chill_max (500 ms) is the bound checked.
    assert!(
        insns(&l)
            .iter()
            .any(|i| i.code == 0x25 && i.imm == 500_000_000),
        "no `> 500000000` test"
    );
}

#[test]
fn chill_without_the_kfuncs_is_an_error_naming_them() {
    let e = build("BEGIN { chill(1000); }", None).unwrap_err();
    assert!(
        e.contains("chill() needs the kernel's bpf_iter_num kfuncs"),
        "{e}"
    );
}

#[test]
fn copyout_and_copyoutstr_call_probe_write_user() {
    for text in [
        "BEGIN { copyout(copyin(0, 8), 4096, 8); }",
        "BEGIN { copyoutstr(\"abc\", 4096, 4); }",
    ] {
        let l = build(text, None).unwrap();
        let n = insns(&l)
            .iter()
            .filter(|i| i.code == 0x85 && i.src == 0 && i.imm == helper::PROBE_WRITE_USER)
            .count();
        assert_eq!(n, 1, "{text}");
    }
}

#[test]
fn copyout_size_must_be_a_constant_within_copyin_max() {
    let e = build("BEGIN { copyout(0, 4096, 4097); }", None).unwrap_err();
    assert!(e.contains("copyout() size 4097 is out of range"), "{e}");
    let e = build("BEGIN { n = 4; copyout(0, 4096, n); }", None).unwrap_err();
    assert!(
        e.contains("copyout() size must be a non-negative integer constant"),
        "{e}"
    );
}
