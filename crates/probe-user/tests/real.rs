//! probe-user on real binaries of this machine, checked against binutils (`readelf`, `objdump`).

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use probe_user::argspec::{ArgLocation, Reg};
use probe_user::disasm::decode_function;
use probe_user::elf::{ElfFile, ElfKind, SymbolTable};
use probe_user::list::{PidSiteKind, Target, list_usdt, pid_sites};
use probe_user::usdt::probes;
use probe_user::{FileOffset, VirtAddr};

const LIBC: &str = "/usr/lib/x86_64-linux-gnu/libc.so.6";
const PYTHON: &str = "/usr/bin/python3.11";
const LIBSTDCXX: &str = "/usr/lib/x86_64-linux-gnu/libstdc++.so.6";

fn run(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{cmd}: {e}"));
    assert!(
        out.status.success(),
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf8")
}

/// Defined FUNC/IFUNC symbols of one table as `readelf -W` lists them: (name, addr).
fn readelf_funcs(path: &str, dynsym: bool) -> BTreeSet<(String, u64)> {
    let text = run(
        "readelf",
        &["-W", if dynsym { "--dyn-syms" } else { "--syms" }, path],
    );
    let mut out = BTreeSet::new();
    let mut in_table = false;
    for line in text.lines() {
        if line.starts_with("Symbol table") {
            in_table = line.contains(if dynsym { "'.dynsym'" } else { "'.symtab'" });
            continue;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        if !in_table || f.len() < 8 || !f[0].ends_with(':') {
            continue;
        }
        if !(f[3] == "FUNC" || f[3] == "IFUNC") || f[6] == "UND" {
            continue;
        }
        let addr = u64::from_str_radix(f[1], 16).unwrap();
        if addr == 0 {
            continue;
        }
        let name = f[7].split('@').next().unwrap().to_string();
        out.insert((name, addr));
    }
    out
}

#[test]
fn libc_and_python_functions_match_readelf() {
    for (path, kind) in [(LIBC, ElfKind::Dynamic), (PYTHON, ElfKind::Executable)] {
        let elf = ElfFile::open(path).unwrap();
        assert_eq!(elf.kind(), kind, "{path}");
        let ours: BTreeSet<(String, u64)> = elf
            .functions()
            .iter()
            .map(|f| (f.name.clone(), f.addr.0))
            .collect();
        let theirs = readelf_funcs(path, true);
        assert!(
            theirs.len() > 1000,
            "{path}: only {} functions",
            theirs.len()
        );
        let only_ours: Vec<_> = ours.difference(&theirs).take(10).collect();
        let only_theirs: Vec<_> = theirs.difference(&ours).take(10).collect();
        assert!(
            only_ours.is_empty() && only_theirs.is_empty(),
            "{path}: only ours {only_ours:?}, only readelf {only_theirs:?}"
        );
        // Stripped: everything came from .dynsym.
        assert!(
            elf.functions()
                .iter()
                .all(|f| f.table == SymbolTable::Dynsym)
        );
    }
}

/// `objdump -F` prints each function label's file offset; ours must agree.
#[test]
fn file_offsets_match_objdump() {
    for (path, func) in [
        (LIBC, "malloc"),
        (LIBC, "getpid"),
        (PYTHON, "PyObject_GetAttr"),
        (PYTHON, "Py_Main"),
    ] {
        let elf = ElfFile::open(path).unwrap();
        let f = elf
            .function(func)
            .unwrap_or_else(|| panic!("{func} in {path}"));
        let text = run(
            "objdump",
            &[
                "-d",
                "-F",
                &format!("--start-address={:#x}", f.addr.0),
                &format!("--stop-address={:#x}", f.addr.0 + 1),
                path,
            ],
        );
        let want = text
            .lines()
            .find_map(|l| l.split("(File Offset: ").nth(1))
            .map(|s| {
                u64::from_str_radix(s.trim_end_matches("):").trim_start_matches("0x"), 16).unwrap()
            })
            .unwrap_or_else(|| panic!("no file offset in objdump output:\n{text}"));
        assert_eq!(f.offset, FileOffset(want), "{path} {func}");
        assert_eq!(elf.vaddr_of_offset(f.offset), Some(f.addr));
    }
    // Non-PIE: file offsets are far below the addresses.
    let py = ElfFile::open(PYTHON).unwrap();
    let m = py.function("Py_Main").unwrap();
    assert!(m.addr.0 >= 0x400000 && m.offset.0 < m.addr.0);
}

/// Instruction starts of `objdump -d` for a range.
fn objdump_starts(path: &Path, start: u64, end: u64) -> Vec<u64> {
    let text = run(
        "objdump",
        &[
            "-d",
            "--no-show-raw-insn",
            &format!("--start-address={start:#x}"),
            &format!("--stop-address={end:#x}"),
            path.to_str().unwrap(),
        ],
    );
    text.lines()
        .filter_map(|l| {
            let (a, rest) = l.trim_start().split_once(":\t")?;
            (!rest.trim().is_empty()).then(|| u64::from_str_radix(a, 16).ok())?
        })
        .collect()
}

#[test]
fn instruction_boundaries_match_objdump() {
    let dir = tempfile::tempdir().unwrap();
    let target = common::build_target(dir.path(), "t", &[]);
    let elf = ElfFile::open(&target).unwrap();
    let mut checked = 0;
    for name in ["main", "add", "classify"] {
        let f = elf.function(name).unwrap();
        let code = decode_function(&elf, f).unwrap();
        let ours: Vec<u64> = code.offsets().map(|o| f.addr.0 + o).collect();
        assert_eq!(
            ours,
            objdump_starts(&target, f.addr.0, f.addr.0 + f.size),
            "{name}"
        );
        checked += 1;
    }
    // classify has three returns or a shared one: at least one `ret`, all at boundaries.
    let c = elf.function("classify").unwrap();
    let code = decode_function(&elf, c).unwrap();
    assert!(code.return_sites().count() >= 1);
    // A sample of libc: every 50th sized function.
    let libc = ElfFile::open(LIBC).unwrap();
    for f in libc.functions().iter().filter(|f| f.size > 0).step_by(50) {
        let code = decode_function(&libc, f).unwrap_or_else(|e| panic!("{e}"));
        let ours: Vec<u64> = code.offsets().map(|o| f.addr.0 + o).collect();
        assert_eq!(
            ours,
            objdump_starts(Path::new(LIBC), f.addr.0, f.addr.0 + f.size),
            "libc {}",
            f.name
        );
        checked += 1;
    }
    assert!(checked > 40, "checked {checked}");
}

#[test]
fn pid_sites_entry_return_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let target = common::build_target(dir.path(), "t", &[]);
    let elf = ElfFile::open(&target).unwrap();
    let add = elf.function("add").unwrap().clone();
    let (e, _) = pid_sites(&elf, "add", "entry").unwrap();
    assert_eq!(e.len(), 1);
    assert_eq!(e[0].offset, add.offset);
    let (r, _) = pid_sites(&elf, "add", "return").unwrap();
    let ret_offs: Vec<u64> = r.iter().map(|s| s.offset.0 - add.offset.0).collect();
    // The return sites are exactly the `ret`s objdump shows.
    let text = run(
        "objdump",
        &[
            "-d",
            &format!("--start-address={:#x}", add.addr.0),
            &format!("--stop-address={:#x}", add.addr.0 + add.size),
            target.to_str().unwrap(),
        ],
    );
    let want: Vec<u64> = text
        .lines()
        .filter(|l| l.trim_end().ends_with("ret"))
        .filter_map(|l| u64::from_str_radix(l.trim_start().split(':').next()?, 16).ok())
        .map(|a| a - add.addr.0)
        .collect();
    assert_eq!(ret_offs, want);
    assert!(matches!(
        r[0].kind,
        PidSiteKind::Return {
            tail_call: false,
            ..
        }
    ));
    // Every instruction; an offset inside an instruction is refused.
    let (all, _) = pid_sites(&elf, "main", "").unwrap();
    let main = elf.function("main").unwrap();
    assert_eq!(
        all.len(),
        objdump_starts(&target, main.addr.0, main.addr.0 + main.size).len()
    );
    let second = match all[1].kind {
        PidSiteKind::Instruction { offset } => offset,
        _ => panic!(),
    };
    assert!(pid_sites(&elf, "main", &format!("{second:x}")).is_ok());
    if second > 1 {
        let err = pid_sites(&elf, "main", &format!("{:x}", second - 1))
            .unwrap_err()
            .to_string();
        assert!(err.contains("not an instruction boundary"), "{err}");
    }
    // Globs over functions.
    let (globbed, _) = pid_sites(&elf, "cla*", "entry").unwrap();
    assert_eq!(
        globbed
            .iter()
            .map(|s| s.function.as_str())
            .collect::<Vec<_>>(),
        vec!["classify"]
    );
}

#[test]
fn stripped_binary_keeps_dynsym_functions() {
    let dir = tempfile::tempdir().unwrap();
    let full = common::build_target(dir.path(), "full", &["-rdynamic"]);
    let stripped = dir.path().join("stripped");
    std::fs::copy(&full, &stripped).unwrap();
    run("strip", &["--strip-all", stripped.to_str().unwrap()]);
    let a = ElfFile::open(&full).unwrap();
    let b = ElfFile::open(&stripped).unwrap();
    assert_eq!(a.kind(), ElfKind::Dynamic);
    let fa = a.function("add").unwrap();
    let fb = b.function("add").unwrap();
    assert_eq!(fa.table, SymbolTable::Symtab);
    assert_eq!(fb.table, SymbolTable::Dynsym);
    assert_eq!((fa.addr, fa.offset, fa.size), (fb.addr, fb.offset, fb.size));
    assert_eq!(readelf_funcs(stripped.to_str().unwrap(), false).len(), 0);
}

/// Parses `readelf -n` stapsdt blocks: (provider, name, location, semaphore, args).
fn readelf_notes(path: &str) -> Vec<(String, String, u64, u64, String)> {
    let text = run("readelf", &["-n", path]);
    let hex = |t: &str| u64::from_str_radix(t.trim().trim_start_matches("0x"), 16).unwrap();
    let mut out = Vec::new();
    let (mut prov, mut name, mut loc, mut sem) = (String::new(), String::new(), 0, 0);
    for line in text.lines().map(str::trim) {
        if let Some(v) = line.strip_prefix("Provider: ") {
            prov = v.to_string();
        } else if let Some(v) = line.strip_prefix("Name: ") {
            name = v.to_string();
        } else if let Some(v) = line.strip_prefix("Location: ") {
            // "0x..., Base: 0x..., Semaphore: 0x..."
            loc = hex(v.split(',').next().unwrap());
            sem = hex(v.split("Semaphore: ").nth(1).unwrap());
        } else if let Some(v) = line.strip_prefix("Arguments:") {
            out.push((prov.clone(), name.clone(), loc, sem, v.trim().to_string()));
        }
    }
    out
}

#[test]
fn python_and_libstdcxx_notes_match_readelf() {
    for (path, provider, min) in [(PYTHON, "python", 8), (LIBSTDCXX, "libstdcxx", 3)] {
        let elf = ElfFile::open(path).unwrap();
        let ours = probes(&elf).unwrap();
        let theirs = readelf_notes(path);
        assert!(ours.len() >= min, "{path}: {} probes", ours.len());
        assert_eq!(ours.len(), theirs.len());
        for (p, t) in ours.iter().zip(&theirs) {
            assert_eq!(p.provider, t.0);
            assert_eq!(p.name, t.1);
            assert_eq!(p.arg_text, t.4);
            assert_eq!(p.args.len(), t.4.split_whitespace().count());
            assert_eq!(p.pc, VirtAddr(t.2), "{path} {}", p.name);
            assert_eq!(p.semaphore.map_or(0, |s| s.0), t.3);
            assert_eq!(p.provider, provider);
            assert_eq!(elf.vaddr_of_offset(p.pc_offset), Some(p.pc));
            assert!(
                !p.function.is_empty() || path == PYTHON,
                "{} has no function",
                p.name
            );
        }
    }
    // Python's probes all have semaphores, in .probes; libstdc++'s none.
    let py = probes(&ElfFile::open(PYTHON).unwrap()).unwrap();
    assert!(py.iter().all(|p| p.semaphore_offset.is_some()));
    let ret: Vec<_> = py
        .iter()
        .filter(|p| p.matches_name("function-return"))
        .collect();
    assert_eq!(ret.len(), 1);
    assert_eq!(ret[0].dtrace_name(), "function-return");
    // function__return's arguments: filename, function name (pointers) and line number.
    assert_eq!(ret[0].args.len(), 3);
    assert_eq!((ret[0].args[2].size, ret[0].args[2].signed), (4, true));
    let cxx = probes(&ElfFile::open(LIBSTDCXX).unwrap()).unwrap();
    assert!(cxx.iter().all(|p| p.semaphore.is_none()));
    assert!(cxx.iter().any(|p| p.name == "throw"));
}

#[test]
fn c_program_notes_with_and_without_semaphores() {
    let dir = tempfile::tempdir().unwrap();
    for (name, flags, has_sem) in [
        ("nosem", &[][..], false),
        ("sem", &["-DWITH_SEM"][..], true),
    ] {
        let bin = common::build_target(dir.path(), name, flags);
        let elf = ElfFile::open(&bin).unwrap();
        let ps = probes(&elf).unwrap();
        assert_eq!(ps.len(), 1, "{name}");
        let p = &ps[0];
        assert_eq!(
            (p.provider.as_str(), p.name.as_str(), p.function.as_str()),
            ("sl_test", "tick", "main")
        );
        assert_eq!(p.semaphore.is_some(), has_sem, "{name}");
        if let Some(s) = p.semaphore {
            // The semaphore is the variable the program declared.
            assert_eq!(elf.symbol_addr("sl_test_tick_semaphore"), Some(s));
            assert_eq!(p.semaphore_offset, Some(elf.file_offset(s).unwrap()));
        }
        // -4@%r12d style register, then -8@..., then the global via %rip.
        assert_eq!(p.args.len(), 3);
        assert_eq!((p.args[0].size, p.args[0].signed), (4, true));
        match &p.args[2].loc {
            ArgLocation::Static { symbol, addr, .. } => {
                assert_eq!(symbol.as_deref(), Some("counter"));
                assert_eq!(*addr, elf.symbol_addr("counter"));
            }
            other => panic!("{name}: arg2 {other:?}"),
        }
        assert!(
            matches!(
                p.args[0].loc,
                ArgLocation::Register {
                    reg: Reg::R12 | Reg::Rbx | Reg::Rbp | Reg::R13 | Reg::R14 | Reg::R15,
                    ..
                }
            ) || matches!(p.args[0].loc, ArgLocation::Register { .. })
        );
        let rows = list_usdt(&Target::File(bin.clone()), "sl_test", "", "", "tick").unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(
            (
                rows[0].provider.as_str(),
                rows[0].module.as_str(),
                rows[0].function.as_str(),
                rows[0].name.as_str()
            ),
            ("sl_test", name, "main", "tick")
        );
    }
}

/// `syscall` instructions in `[addr, addr + size)` of `path`, counted by objdump.
fn objdump_syscalls(path: &str, addr: u64, size: u64) -> usize {
    let text = run(
        "objdump",
        &[
            "-d",
            &format!("--start-address={addr:#x}"),
            &format!("--stop-address={:#x}", addr + size),
            path,
        ],
    );
    text.lines()
        .filter(|l| l.split('\t').nth(2).is_some_and(|i| i.trim() == "syscall"))
        .count()
}

/// Session 4's harm to the target: a uprobe on a `syscall` instruction (libc's `brk`, `getpid`)
/// kills the traced process, so instruction probes leave every one out and count it; the count
/// equals objdump's, and every other instruction is still offered.
#[test]
fn syscall_instructions_are_left_out_and_counted() {
    let elf = ElfFile::open(LIBC).unwrap();
    let mut total = 0;
    for name in ["brk", "getpid", "__write", "__close"] {
        let f = elf
            .functions()
            .iter()
            .find(|f| f.name == name)
            .unwrap_or_else(|| panic!("{name} in libc"));
        let want = objdump_syscalls(LIBC, f.addr.0, f.size);
        assert!(want >= 1, "{name} has a syscall instruction");
        let (sites, skipped) = pid_sites(&elf, name, "").unwrap();
        assert_eq!(skipped.system_call, want, "{name}");
        let code = decode_function(&elf, f).unwrap();
        let kernel = code
            .insns
            .iter()
            .filter(|i| i.refusal == Some(probe_user::disasm::Refusal::Kernel))
            .count();
        assert_eq!(sites.len() + want + kernel, code.insns.len(), "{name}");
        // Naming the syscall's offset is an error that says why.
        let at = code
            .insns
            .iter()
            .find(|i| i.refusal == Some(probe_user::disasm::Refusal::SystemCall))
            .unwrap()
            .offset;
        let err = pid_sites(&elf, name, &format!("{at:x}")).unwrap_err();
        assert!(err.to_string().contains("syscall instructions"), "{err}");
        total += want;
    }
    assert!(total >= 4);
}

/// Session 4's harm to the target: `_start` never returns, and a uretprobe on its entry (the old
/// fallback for a function without return sites) overwrote `argc`. Its return plan is now
/// `Never`, so `pid$target:a.out::return` offers no probe there; a function that returns keeps
/// its return sites.
#[test]
fn functions_that_never_return_get_no_return_probe() {
    use probe_user::list::{ReturnPlan, return_plan};
    let py = ElfFile::open(PYTHON).unwrap();
    let f = |name: &str| {
        py.functions()
            .iter()
            .find(|f| f.name == name)
            .unwrap_or_else(|| panic!("{name} in python"))
            .clone()
    };
    assert_eq!(return_plan(&py, &f("_start")), ReturnPlan::Never);
    match return_plan(&py, &f("PyMem_RawMalloc")) {
        ReturnPlan::Sites(s) => assert!(!s.is_empty()),
        other => panic!("PyMem_RawMalloc: {other:?}"),
    }
    let (sites, skipped) = pid_sites(&py, "_start", "return").unwrap();
    assert!(sites.is_empty());
    assert_eq!(skipped.never_return, 1);
    let cat = probe_user::provider::catalog(probe_user::provider::UserSites::new());
    use probe_sema::catalog::{ProbeCatalog, ProbeDescPattern};
    let rets = cat.matching(&ProbeDescPattern::new("pid", PYTHON, "_start", "return"));
    assert!(rets.is_empty(), "{rets:?}");
    let entries = cat.matching(&ProbeDescPattern::new("pid", PYTHON, "_start", "entry"));
    assert_eq!(entries.len(), 1);
}
