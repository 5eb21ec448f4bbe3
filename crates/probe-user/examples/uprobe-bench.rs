//! Benchmark driver for `bench/probe-user-bench.sh` (root).
//!
//! - `uprobe-bench hits PATH FUNCTION`: attaches a counting BPF program to FUNCTION's entry in
//!   PATH (every process) with one uprobe_multi link, prints `attached`, waits for a line on stdin,
//!   prints the hit count and exits.
//! - `uprobe-bench attach PATH N`: attaches a counting program to the entries of the first N
//!   probeable functions of PATH (one uprobe_multi link), detaches, and prints
//!   `load_ms attach_ms detach_ms total_ms`.
//! - `uprobe-bench list PATH N`: prints those N function names, one a line (for bpftrace).

use std::io::BufRead;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::Instant;

use probe_user::disasm::decode_function;
use probe_user::elf::ElfFile;
use probe_user::uprobe::{self as sys, UprobeSite};

fn insn(op: u8, dst: u8, src: u8, off: i16, imm: i32) -> u64 {
    u64::from(op)
        | (u64::from(dst | (src << 4)) << 8)
        | (u64::from(off as u16) << 16)
        | (u64::from(imm as u32) << 32)
}

/// `map[0] += 1` (atomic), the same work as bpftrace's `@ = count()` minus its per-CPU map.
fn count_program(map_fd: i32) -> Vec<[u8; 8]> {
    [
        insn(0x62, 10, 0, -4, 0), // *(u32 *)(r10 - 4) = 0
        insn(0x18, 1, 1, 0, map_fd),
        0,
        insn(0xbf, 2, 10, 0, 0),
        insn(0x07, 2, 0, 0, -4),
        insn(0x85, 0, 0, 0, 1), // bpf_map_lookup_elem
        insn(0x15, 0, 0, 2, 0),
        insn(0xb7, 1, 0, 0, 1),
        insn(0xdb, 0, 1, 0, 0), // lock *(u64 *)(r0) += r1
        insn(0xb7, 0, 0, 0, 0),
        insn(0x95, 0, 0, 0, 0),
    ]
    .map(u64::to_le_bytes)
    .to_vec()
}

/// The first `n` functions (by name) whose entry the kernel can probe and that are not ifunc
/// resolvers.
fn pick(elf: &ElfFile, n: usize) -> Vec<(String, u64)> {
    let mut fs: Vec<_> = elf
        .functions()
        .iter()
        .filter(|f| !f.ifunc && f.size > 0 && !f.name.starts_with('_'))
        .filter(|f| {
            decode_function(elf, f).is_ok_and(|c| c.insns.first().is_some_and(|i| i.probeable))
        })
        .map(|f| (f.name.clone(), f.offset.0))
        .collect();
    fs.sort();
    fs.dedup_by(|a, b| a.0 == b.0 || a.1 == b.1);
    fs.truncate(n);
    fs
}

/// A one-entry `BPF_MAP_TYPE_ARRAY` of u64 counters.
fn array_map() -> std::os::fd::OwnedFd {
    probe_sys::bpf::map_create(probe_sys::bpf::map_type::ARRAY, 4, 8, 1, 0, "sl_bench").unwrap()
}

/// The counter of an [`array_map`].
fn lookup0(map: &std::os::fd::OwnedFd) -> u64 {
    let mut v = [0u8; 8];
    probe_sys::bpf::map_lookup(map, &0u32.to_le_bytes(), &mut v).unwrap();
    u64::from_le_bytes(v)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: uprobe-bench hits PATH FUNCTION | attach PATH N | list PATH N";
    let (Some(mode), Some(path)) = (args.get(1), args.get(2)) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let path = Path::new(path);
    let elf = ElfFile::open(path).unwrap_or_else(|e| panic!("{e}"));
    match mode.as_str() {
        "hits" => {
            let f = elf
                .function(&args[3])
                .unwrap_or_else(|| panic!("no function {}", args[3]));
            let map = array_map();
            let prog =
                sys::load_multi_program(&count_program(map.as_raw_fd()), "sl_bench").unwrap();
            let site = UprobeSite {
                offset: f.offset,
                ref_ctr_offset: None,
                cookie: 0,
            };
            let link =
                sys::attach_uprobe_multi(prog.as_raw_fd(), path, &[site], None, false).unwrap();
            println!("attached");
            let mut line = String::new();
            std::io::stdin().lock().read_line(&mut line).unwrap();
            println!("{}", lookup0(&map));
            drop(link);
        }
        "attach1" => {
            // One program and one single-site link per function, closed concurrently (how the
            // runtime attaches one program per probe).
            let n: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(100);
            let funcs = pick(&elf, n);
            let t0 = Instant::now();
            let map = array_map();
            let mut held = Vec::new();
            for (_, off) in &funcs {
                let prog =
                    sys::load_multi_program(&count_program(map.as_raw_fd()), "sl_bench").unwrap();
                let site = UprobeSite {
                    offset: probe_user::FileOffset(*off),
                    ref_ctr_offset: None,
                    cookie: 0,
                };
                let link =
                    sys::attach_uprobe_multi(prog.as_raw_fd(), path, &[site], None, false).unwrap();
                held.push((link, prog));
            }
            let t1 = Instant::now();
            let parallel = args.get(4).is_some_and(|a| a == "parallel");
            if parallel {
                std::thread::scope(|s| {
                    for h in held {
                        s.spawn(move || drop(h));
                    }
                });
            } else {
                drop(held);
            }
            let t2 = Instant::now();
            let ms = |a: Instant, b: Instant| (b - a).as_secs_f64() * 1e3;
            println!(
                "attach {:.1} ms, detach {:.1} ms ({})",
                ms(t0, t1),
                ms(t1, t2),
                if parallel { "parallel" } else { "sequential" }
            );
        }
        "attach" | "list" => {
            let n: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(100);
            let funcs = pick(&elf, n);
            if mode == "list" {
                for (name, _) in funcs {
                    println!("{name}");
                }
                return;
            }
            let t0 = Instant::now();
            let map = array_map();
            let prog =
                sys::load_multi_program(&count_program(map.as_raw_fd()), "sl_bench").unwrap();
            let t1 = Instant::now();
            let sites: Vec<UprobeSite> = funcs
                .iter()
                .enumerate()
                .map(|(i, (_, off))| UprobeSite {
                    offset: probe_user::FileOffset(*off),
                    ref_ctr_offset: None,
                    cookie: i as u64,
                })
                .collect();
            let link =
                sys::attach_uprobe_multi(prog.as_raw_fd(), path, &sites, None, false).unwrap();
            let t2 = Instant::now();
            drop(link);
            drop(prog);
            let t3 = Instant::now();
            let ms = |a: Instant, b: Instant| (b - a).as_secs_f64() * 1e3;
            println!(
                "{:.3} {:.3} {:.3} {:.3} {}",
                ms(t0, t1),
                ms(t1, t2),
                ms(t2, t3),
                ms(t0, t3),
                sites.len()
            );
        }
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    }
}
