//! Helpers shared by probe-user's integration tests: building the C test target, and a tiny BPF
//! program that counts hits and sums a register per attach cookie.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// This directory (`crates/probe-user/tests/common`), found from this file's own path so that the
/// CLI tests of the `sightline` crate, which include this module, find the same sources.
pub fn here() -> PathBuf {
    test_support::workspace_root()
        .join(file!())
        .parent()
        .expect("a file has a directory")
        .to_path_buf()
}

/// Compiles `tests/common/target.c` into `dir` with extra gcc flags; returns the binary.
pub fn build_target(dir: &Path, name: &str, flags: &[&str]) -> PathBuf {
    let src = here().join("target.c");
    let out = dir.join(name);
    let st = Command::new("gcc")
        .args(["-O1", "-g0", "-o"])
        .arg(&out)
        .arg(&src)
        .args(flags)
        .status()
        .expect("run gcc");
    assert!(st.success(), "gcc {flags:?} failed");
    out
}

fn insn(op: u8, dst: u8, src: u8, off: i16, imm: i32) -> u64 {
    u64::from(op)
        | (u64::from(dst | (src << 4)) << 8)
        | (u64::from(off as u16) << 16)
        | (u64::from(imm as u32) << 32)
}

/// A kprobe-type program: `slot[cookie] += 1; slot[cookie + 8] += *(u64 *)(ctx + reg_off)`.
pub fn counter_program(map_fd: i32, reg_off: i16) -> Vec<u64> {
    let ld_map = |v: &mut Vec<u64>| {
        v.push(insn(0x18, 1, 1, 0, map_fd)); // r1 = map (BPF_PSEUDO_MAP_FD)
        v.push(0);
    };
    let mut v = vec![
        insn(0xbf, 6, 1, 0, 0),   // r6 = r1 (ctx)
        insn(0x85, 0, 0, 0, 174), // call bpf_get_attach_cookie
        insn(0xbf, 7, 0, 0, 0),   // r7 = r0
        insn(0x63, 10, 7, -4, 0), // *(u32 *)(r10 - 4) = r7
    ];
    ld_map(&mut v);
    v.extend([
        insn(0xbf, 2, 10, 0, 0), // r2 = r10
        insn(0x07, 2, 0, 0, -4), // r2 += -4
        insn(0x85, 0, 0, 0, 1),  // call bpf_map_lookup_elem
        insn(0x15, 0, 0, 2, 0),  // if r0 == 0 goto +2
        insn(0xb7, 1, 0, 0, 1),  // r1 = 1
        insn(0xdb, 0, 1, 0, 0),  // lock *(u64 *)(r0 + 0) += r1
        insn(0x07, 7, 0, 0, 8),  // r7 += 8
        insn(0x63, 10, 7, -4, 0),
    ]);
    ld_map(&mut v);
    v.extend([
        insn(0xbf, 2, 10, 0, 0),
        insn(0x07, 2, 0, 0, -4),
        insn(0x85, 0, 0, 0, 1),
        insn(0x15, 0, 0, 2, 0),
        insn(0x79, 1, 6, reg_off, 0), // r1 = *(u64 *)(r6 + reg_off)
        insn(0xdb, 0, 1, 0, 0),
        insn(0xb7, 0, 0, 0, 0), // r0 = 0
        insn(0x95, 0, 0, 0, 0), // exit
    ]);
    v
}

/// Compiles `tests/common/rust_sem.rs` with rustc (default linker: lld) into `dir`.
pub fn build_rust_sem(dir: &Path) -> PathBuf {
    let src = here().join("rust_sem.rs");
    let out = dir.join("rust_sem");
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let st = Command::new(rustc)
        .args(["-O", "--edition", "2024", "-o"])
        .arg(&out)
        .arg(&src)
        .status()
        .expect("run rustc");
    assert!(st.success(), "rustc failed");
    out
}

/// A `BPF_MAP_TYPE_ARRAY` of `entries` u64 values (u32 keys).
pub fn array_map(entries: u32) -> std::os::fd::OwnedFd {
    probe_sys::bpf::map_create(probe_sys::bpf::map_type::ARRAY, 4, 8, entries, 0, "sl_test")
        .unwrap()
}

/// The u64 at `key` of an [`array_map`].
pub fn lookup(map: &std::os::fd::OwnedFd, key: u32) -> u64 {
    let mut v = [0u8; 8];
    probe_sys::bpf::map_lookup(map, &key.to_le_bytes(), &mut v).unwrap();
    u64::from_le_bytes(v)
}

/// Loads `insns` as a kprobe-type program, for uprobe_multi links when `multi`.
pub fn load(insns: &[u64], multi: bool, name: &str) -> std::os::fd::OwnedFd {
    use probe_sys::bpf::{ProgLoad, VerifierLog, attach_type, prog_type};
    let bytes: Vec<[u8; 8]> = insns.iter().map(|i| i.to_le_bytes()).collect();
    probe_sys::bpf::prog_load(&ProgLoad {
        prog_type: prog_type::KPROBE,
        expected_attach_type: if multi {
            attach_type::TRACE_UPROBE_MULTI
        } else {
            attach_type::NONE
        },
        insns: &bytes,
        name,
        log: VerifierLog::OnError,
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", e.verifier_log.clone().unwrap_or_default()))
}
