//! Kernel-layer tests: maps, program load, test runs, ring buffer, raw tracepoints (root only).

use probe_codegen::insn::*;
use probe_runtime::ringbuf::RingBuf;
use probe_sys::bpf::{self as sys, ProgLoad, VerifierLog, attach_type, map_type, prog_type};

fn raw_tp<'a>(insns: &'a [[u8; 8]], name: &'a str) -> ProgLoad<'a> {
    ProgLoad {
        prog_type: prog_type::RAW_TRACEPOINT,
        expected_attach_type: attach_type::NONE,
        insns,
        name,
        log: VerifierLog::OnError,
    }
}

fn load(asm: Asm, maps: &[&std::os::fd::OwnedFd]) -> std::os::fd::OwnedFd {
    use std::os::fd::AsRawFd;
    let (mut insns, refs) = asm.finish();
    for r in refs {
        insns[r.insn].imm = maps[r.map].as_raw_fd();
    }
    let bytes: Vec<[u8; 8]> = insns.iter().map(|i| i.to_bytes()).collect();
    match sys::prog_load(&raw_tp(&bytes, "t")) {
        Ok(fd) => fd,
        Err(e) => panic!("{e}\n{}", e.verifier_log.as_deref().unwrap_or_default()),
    }
}

#[test]
fn test_run_writes_our_tgid_to_the_ring_buffer() {
    if !test_support::privileged("loads a BPF program") {
        return;
    }
    let rb = sys::map_create(map_type::RINGBUF, 0, 0, 4096 * 4, 0, "rb").unwrap();
    let mut a = Asm::new();
    a.call(helper::GET_CURRENT_PID_TGID);
    a.alu_imm(Alu::Rsh, R0, 32);
    a.stx(Size::DW, R10, -8, R0);
    a.ld_map(R1, 0);
    a.mov(R2, R10);
    a.alu_imm(Alu::Add, R2, -8);
    a.mov_imm(R3, 8);
    a.mov_imm(R4, 0);
    a.call(helper::RINGBUF_OUTPUT);
    a.mov_imm(R0, 7);
    a.exit();
    let prog = load(a, &[&rb]);
    let ret = sys::prog_test_run_raw_tp(&prog, &[]).unwrap();
    assert_eq!(ret, 7);
    let mut ring = RingBuf::new(rb, 4096 * 4).unwrap();
    let mut got = Vec::new();
    ring.consume(|r| got.push(u64::from_le_bytes(r[..8].try_into().unwrap())));
    assert_eq!(got, vec![std::process::id() as u64]);
}

#[test]
fn verifier_rejection_returns_the_log() {
    if !test_support::privileged("loads a BPF program") {
        return;
    }
    let mut a = Asm::new();
    a.ldx(Size::DW, R0, R2, 0); // r2 is uninitialized
    a.exit();
    let (insns, _) = a.finish();
    let bytes: Vec<[u8; 8]> = insns.iter().map(|i| i.to_bytes()).collect();
    let err = sys::prog_load(&raw_tp(&bytes, "bad")).unwrap_err();
    assert_eq!(err.call, "bpf(BPF_PROG_LOAD)");
    let log = err.verifier_log.unwrap_or_default();
    assert!(log.contains("R2 !read_ok"), "log: {log}");
}

#[test]
fn hash_map_update_lookup_iterate_delete() {
    if !test_support::privileged("creates a BPF map") {
        return;
    }
    let m = sys::map_create(map_type::HASH, 4, 8, 16, 0, "h").unwrap();
    for k in 1u32..=3 {
        sys::map_update(&m, &k.to_le_bytes(), &(k as u64 * 10).to_le_bytes()).unwrap();
    }
    let mut v = [0u8; 8];
    assert!(sys::map_lookup(&m, &2u32.to_le_bytes(), &mut v).unwrap());
    assert_eq!(u64::from_le_bytes(v), 20);
    let mut keys = Vec::new();
    let mut cur: Option<[u8; 4]> = None;
    let mut next = [0u8; 4];
    while sys::map_next_key(&m, cur.as_ref().map(|k| &k[..]), &mut next).unwrap() {
        keys.push(u32::from_le_bytes(next));
        cur = Some(next);
    }
    keys.sort();
    assert_eq!(keys, vec![1, 2, 3]);
    assert!(sys::map_delete(&m, &2u32.to_le_bytes()).unwrap());
    assert!(!sys::map_lookup(&m, &2u32.to_le_bytes(), &mut v).unwrap());
}

#[test]
fn verifier_rejection_names_the_clause_and_quotes_the_reason() {
    if !test_support::privileged("loads a BPF program") {
        return;
    }
    use probe_codegen::layout::*;
    let mut a = Asm::new();
    a.ldx(Size::DW, R0, R2, 0); // R2 was never written
    a.exit();
    let (insns, map_refs) = a.finish();
    let layout = Layout {
        maps: vec![
            MapSpec {
                name: "rb".into(),
                kind: MapKind::RingBuf,
                key_size: 0,
                value_size: 0,
                max_entries: 16384,
                no_prealloc: false,
                role: MapRole::Records,
            },
            MapSpec {
                name: "st".into(),
                kind: MapKind::PercpuArray,
                key_size: 4,
                value_size: 8,
                max_entries: STAT_COUNT,
                no_prealloc: false,
                role: MapRole::Stats,
            },
        ],
        programs: vec![ProgSpec {
            name: "bad".into(),
            kind: ProgKind::RawTracepoint,
            attach: Attach::Begin,
            insns,
            map_refs,
            clauses: vec![1],
            probes: vec![0],
        }],
        probes: vec![ProbeRef {
            name: "dtrace:::BEGIN".into(),
        }],
        ringbuf: 0,
        stats: 1,
        ..Layout::default()
    };
    let err = probe_runtime::session::Session::load(layout, false).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.starts_with("clause 2 (dtrace:::BEGIN): the BPF verifier rejected the program: "),
        "{msg}"
    );
    assert!(msg.contains("R2 !read_ok"), "{msg}");
    match err {
        probe_runtime::session::RuntimeError::Verifier { log, .. } => {
            assert!(log.contains("R2 !read_ok"))
        }
        e => panic!("not a verifier error: {e}"),
    }
}
