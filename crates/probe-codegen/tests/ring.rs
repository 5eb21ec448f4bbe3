//! Issue 15: `bufpolicy=ring` in the kernel ([`probe_codegen::layout::KernelRing`]): the slot
//! size is the largest record of a probe-fired program, the ring holds `bufsize / slot` records
//! per CPU, and BEGIN/END/ERROR records keep the ring buffer.

use probe_codegen::layout::MapRole;
use probe_codegen::{CodegenOptions, Layout, compile};
use probe_sema::{
    DtraceProbe, ProbeArgs, ProbeInfo, ProbeKind, SemaOptions, StaticCatalog, analyze,
};
use probe_syntax::{SourceFile, SourceMap, parse, render_all};

fn catalog() -> StaticCatalog {
    let probe = |provider: &str, name: &str, kind| ProbeInfo {
        provider: provider.into(),
        module: String::new(),
        function: String::new(),
        name: name.into(),
        args: ProbeArgs::None,
        kind,
    };
    StaticCatalog {
        probes: vec![
            probe("dtrace", "BEGIN", ProbeKind::Dtrace(DtraceProbe::Begin)),
            probe("dtrace", "END", ProbeKind::Dtrace(DtraceProbe::End)),
            probe(
                "profile",
                "tick-1s",
                ProbeKind::Profile {
                    period_ns: 1_000_000_000,
                    every_cpu: false,
                },
            ),
        ],
    }
}

fn build(text: &str, ring: Option<u64>) -> Layout {
    build_with(text, ring, 0)
}

fn build_with(text: &str, ring: Option<u64>, bypass: usize) -> Layout {
    let file = SourceFile::new("r.d", text);
    let (program, diags) = parse(&file);
    let map: SourceMap = file.into();
    assert!(
        !diags.iter().any(|d| d.is_error()),
        "{}",
        render_all(&diags, &map)
    );
    let checked = analyze(&program, &catalog(), &SemaOptions::default()).unwrap();
    let opts = CodegenOptions {
        ncpus: 2,
        kernel_ring: ring,
        ring_bypass_last: bypass,
        ..CodegenOptions::default()
    };
    compile(&checked, &opts).unwrap()
}

#[test]
fn slots_are_the_largest_probe_record() {
    // A printf of one int: 32-byte header + 8; of a string: + 256 (strsize). BEGIN's record is
    // larger still and does not count.
    let l = build(
        "BEGIN { printf(\"%s %s\", execname, execname); } tick-1s { printf(\"%d\", 1); } tick-1s { printf(\"%s\", execname); }",
        Some(16384),
    );
    let r = l.kernel_ring.expect("a kernel ring");
    assert_eq!(r.slot_size, 288);
    assert_eq!(r.slots, 16384 / 288);
    assert_eq!(l.maps[r.map].role, MapRole::RecordRing);
    assert_eq!(l.maps[r.map].max_entries, 2 * (16384 / 288));
    assert_eq!(l.maps[r.map].value_size, 288);
    assert_eq!(l.maps[r.head].role, MapRole::RingHead);
}

#[test]
fn no_ring_without_the_option_or_without_probe_records() {
    assert_eq!(
        build("tick-1s { printf(\"%d\", 1); }", None).kernel_ring,
        None
    );
    assert_eq!(
        build("BEGIN { printf(\"%d\", 1); }", Some(16384)).kernel_ring,
        None
    );
}

#[test]
fn bypassed_last_clauses_do_not_size_the_slots() {
    // The flight recorder's clauses come last and keep the ring buffer: the 40-byte record
    // alone sizes the slots.
    let l = build_with(
        "tick-1s { printf(\"%d\", 1); } tick-1s { printf(\"%s\", execname); }",
        Some(16384),
        1,
    );
    let r = l.kernel_ring.expect("a kernel ring");
    assert_eq!((r.slot_size, r.slots), (40, 16384 / 40));
    // Only the first clause's program looks the ring up; the bypassed one submits to the
    // ring buffer (helper 130, bpf_ringbuf_output).
    let uses_ring: Vec<bool> = l
        .programs
        .iter()
        .map(|p| p.map_refs.iter().any(|m| m.map == r.map))
        .collect();
    assert!(uses_ring.iter().any(|&u| u), "{uses_ring:?}");
    let to_ringbuf = l.programs.iter().any(|p| {
        p.insns
            .iter()
            .any(|i| i.code == 0x85 && i.imm == probe_codegen::insn::helper::RINGBUF_OUTPUT)
    });
    assert!(to_ringbuf);
}

fn build_fill(text: &str, bytes: u64) -> Result<Layout, probe_codegen::CodegenError> {
    let file = SourceFile::new("f.d", text);
    let (program, _) = parse(&file);
    let checked = analyze(&program, &catalog(), &SemaOptions::default()).unwrap();
    let opts = CodegenOptions {
        ncpus: 2,
        kernel_ring: Some(bytes),
        kernel_fill: true,
        ..CodegenOptions::default()
    };
    compile(&checked, &opts)
}

#[test]
fn fill_keeps_one_slot_per_recording_end_clause() {
    // END's string record (288 bytes) sizes the slots under fill; two END clauses that record
    // keep two slots apart, the third records nothing.
    let l = build_fill(
        "tick-1s { printf(\"%d\", 1); } END { printf(\"%s\", execname); } END { trace(2); } END { n = 1; }",
        16384,
    )
    .unwrap();
    let r = l.kernel_ring.expect("a kernel ring");
    assert!(r.fill);
    assert_eq!((r.slot_size, r.slots), (288, 16384 / 288));
    assert_eq!(r.probe_slots, 16384 / 288 - 2);
    // Under ring, END keeps the ring buffer: the probe record alone sizes the slots.
    let ring = build(
        "tick-1s { printf(\"%d\", 1); } END { printf(\"%s\", execname); }",
        Some(16384),
    );
    let r = ring.kernel_ring.expect("a kernel ring");
    assert!(!r.fill);
    assert_eq!((r.slot_size, r.probe_slots), (40, 16384 / 40));
}

#[test]
fn fill_refuses_an_end_reserve_larger_than_the_buffer() {
    let e = build_fill(
        "tick-1s { trace(1); } END { trace(2); } END { trace(3); }",
        40,
    )
    .unwrap_err();
    assert!(
        e.message
            .starts_with("END enablings exceed size of principal buffer"),
        "{}",
        e.message
    );
    assert!(build_fill("tick-1s { trace(1); } END { trace(2); }", 40).is_ok());
}
