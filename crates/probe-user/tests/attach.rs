//! Uprobe attach on a real process (root): uprobe_multi links and perf-event uprobes, entry,
//! return sites, uretprobes, USDT sites with kernel-maintained and self-maintained semaphores,
//! instruction probes at scale, and symbolization.

mod common;

use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use probe_user::argspec::{ArgLocation, Reg};
use probe_user::elf::ElfFile;
use probe_user::list::{PidSite, pid_sites};
use probe_user::maps::ProcessMaps;
use probe_user::semaphore::{self, SemaphoreGuard, repair_stale};
use probe_user::symbolize::Symbolizer;
use probe_user::uprobe::{self as sys, UprobeSite};
use probe_user::usdt::probes;
use probe_user::{AbsAddr, FileOffset};

const N: u64 = 10;

struct Prog {
    map: OwnedFd,
    prog: OwnedFd,
}

impl Prog {
    fn new(reg: Reg, multi: bool) -> Prog {
        let map = common::array_map(64);
        let insns = common::counter_program(map.as_raw_fd(), reg.pt_regs_offset() as i16);
        let prog = common::load(&insns, multi, "sl_test_count");
        Prog { map, prog }
    }
    /// (hits, register sum) for cookie `c`.
    fn get(&self, c: u32) -> (u64, u64) {
        (
            common::lookup(&self.map, c),
            common::lookup(&self.map, c + 8),
        )
    }
}

/// Starts `target N wait`: it blocks reading stdin until `go` is called.
/// Returns once the target is blocked in its read (so its libraries are mapped).
fn start(bin: &Path) -> Child {
    let mut child = Command::new(bin)
        .args([&N.to_string(), "wait"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    for _ in 0..400 {
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat
            .rsplit(')')
            .next()
            .and_then(|r| r.split_whitespace().next())
            .unwrap_or("");
        if maps.contains("libc.so.6") && state == "S" {
            return child;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    child.kill().ok();
    child.wait().ok();
    panic!("target {pid} did not reach its read");
}

/// Lets the target run and returns its output line.
fn go(mut child: Child) -> String {
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "target failed: {:?}", out.status);
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn sites(s: &[PidSite], cookie: u64) -> Vec<UprobeSite> {
    s.iter()
        .map(|s| UprobeSite {
            offset: s.offset,
            ref_ctr_offset: None,
            cookie,
        })
        .collect()
}

fn build(flags: &[&str]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let bin = common::build_target(dir.path(), "t", flags);
    (dir, bin)
}

#[test]
fn multi_link_entry_return_and_uretprobe_are_exact() {
    if !test_support::privileged("attaches uprobes") {
        return;
    }
    assert!(sys::uprobe_multi_supported());
    let (_d, bin) = build(&[]);
    let elf = ElfFile::open(&bin).unwrap();
    let entry = pid_sites(&elf, "add", "entry").unwrap().0;
    let rets = pid_sites(&elf, "add", "return").unwrap().0;
    let child = start(&bin);
    let pid = child.id();
    let p_entry = Prog::new(Reg::Rdi, true);
    let p_ret = Prog::new(Reg::Rax, true);
    let p_uret = Prog::new(Reg::Rax, true);
    let _l1 = sys::attach_uprobe_multi(
        p_entry.prog.as_raw_fd(),
        &bin,
        &sites(&entry, 0),
        Some(pid),
        false,
    )
    .unwrap();
    let _l2 = sys::attach_uprobe_multi(
        p_ret.prog.as_raw_fd(),
        &bin,
        &sites(&rets, 1),
        Some(pid),
        false,
    )
    .unwrap();
    let _l3 = sys::attach_uprobe_multi(
        p_uret.prog.as_raw_fd(),
        &bin,
        &sites(&entry, 2),
        Some(pid),
        true,
    )
    .unwrap();
    let out = go(child);
    assert_eq!(out, "10 60");
    // add(i, 1) for i in 0..10: arg0 sums to 45, the return value to 55.
    assert_eq!(p_entry.get(0), (N, 45));
    assert_eq!(p_ret.get(1), (N, 55));
    assert_eq!(p_uret.get(2), (N, 55));
}

#[test]
fn pid_filter_excludes_other_processes() {
    if !test_support::privileged("attaches uprobes") {
        return;
    }
    let (_d, bin) = build(&[]);
    let elf = ElfFile::open(&bin).unwrap();
    let entry = pid_sites(&elf, "add", "entry").unwrap().0;
    let a = start(&bin);
    let b = start(&bin);
    let p = Prog::new(Reg::Rdi, true);
    let _l = sys::attach_uprobe_multi(
        p.prog.as_raw_fd(),
        &bin,
        &sites(&entry, 0),
        Some(a.id()),
        false,
    )
    .unwrap();
    go(b);
    go(a);
    assert_eq!(p.get(0).0, N);
    // By path (no pid): every process running the file.
    let p2 = Prog::new(Reg::Rdi, true);
    let _l2 = sys::attach_uprobe_multi(p2.prog.as_raw_fd(), &bin, &sites(&entry, 0), None, false)
        .unwrap();
    let (c, d) = (start(&bin), start(&bin));
    go(c);
    go(d);
    assert_eq!(p2.get(0).0, 2 * N);
}

#[test]
fn perf_event_fallback_attaches() {
    if !test_support::privileged("attaches uprobes") {
        return;
    }
    let (_d, bin) = build(&[]);
    let elf = ElfFile::open(&bin).unwrap();
    let entry = pid_sites(&elf, "add", "entry").unwrap().0;
    let rets = pid_sites(&elf, "classify", "return").unwrap().0;
    let child = start(&bin);
    let pid = child.id();
    let p = Prog::new(Reg::Rdi, false);
    let q = Prog::new(Reg::Rax, false);
    let site = sites(&entry, 0)[0];
    let _e = sys::attach_uprobe_perf(p.prog.as_raw_fd(), &bin, site, Some(pid), false).unwrap();
    let _r: Vec<_> = sites(&rets, 0)
        .into_iter()
        .map(|s| sys::attach_uprobe_perf(q.prog.as_raw_fd(), &bin, s, Some(pid), false).unwrap())
        .collect();
    assert_eq!(go(child), "10 60");
    assert_eq!(p.get(0), (N, 45));
    // classify(i - 2): -1, -1, 0, then 1 seven times.
    assert_eq!(q.get(0), (N, 5u64.wrapping_sub(0)));
    // A bad offset: the error names bpf(BPF_LINK_CREATE).
    let m = Prog::new(Reg::Rdi, true);
    let bad = UprobeSite {
        offset: FileOffset(1 << 40),
        ref_ctr_offset: None,
        cookie: 0,
    };
    let err = sys::attach_uprobe_multi(m.prog.as_raw_fd(), &bin, &[bad], None, false).unwrap_err();
    assert_eq!(
        err.syscall().map(|e| e.call),
        Some("bpf(BPF_LINK_CREATE)"),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        format!("attaching 1 site(s) of {}", bin.display())
    );
}

#[test]
fn usdt_with_kernel_semaphore_fires_and_reads_args() {
    if !test_support::privileged("attaches uprobes") {
        return;
    }
    let (_d, bin) = build(&["-DWITH_SEM"]);
    let elf = ElfFile::open(&bin).unwrap();
    let probe = probes(&elf).unwrap().remove(0);
    let ArgLocation::Register { reg, byte: 0 } = probe.args[0].loc else {
        panic!("arg0 {:?}", probe.args[0])
    };
    let child = start(&bin);
    let pid = child.id();
    let maps = ProcessMaps::read(pid).unwrap();
    let module = maps.module(&bin, &elf).unwrap();
    let sem_addr = module.abs(probe.semaphore.unwrap());
    assert_eq!(semaphore::read(pid, sem_addr).unwrap(), 0);
    let p = Prog::new(reg, true);
    let site = UprobeSite {
        offset: probe.pc_offset,
        ref_ctr_offset: probe.semaphore_offset,
        cookie: 3,
    };
    let link =
        sys::attach_uprobe_multi(p.prog.as_raw_fd(), &bin, &[site], Some(pid), false).unwrap();
    // The kernel incremented the semaphore in the running process.
    assert_eq!(semaphore::read(pid, sem_addr).unwrap(), 1);
    let out = go(child);
    drop(link);
    // The program saw the semaphore set on every iteration, and the probe fired every time with
    // arg0 = i.
    assert_eq!(out, "10 60");
    let (hits, sum) = p.get(3);
    assert_eq!(hits, N);
    assert_eq!(sum & 0xffff_ffff, 45);
}

#[test]
fn usdt_semaphore_through_proc_mem_is_restored() {
    if !test_support::privileged("writes /proc/PID/mem") {
        return;
    }
    let (_d, bin) = build(&["-DWITH_SEM"]);
    let elf = ElfFile::open(&bin).unwrap();
    let probe = probes(&elf).unwrap().remove(0);
    let rec = tempfile::tempdir().unwrap();
    let child = start(&bin);
    let pid = child.id();
    let module = ProcessMaps::read(pid).unwrap().module(&bin, &elf).unwrap();
    let sem = module.abs(probe.semaphore.unwrap());
    let p = Prog::new(Reg::Rax, true);
    let site = UprobeSite {
        offset: probe.pc_offset,
        ref_ctr_offset: None,
        cookie: 0,
    };
    let _link =
        sys::attach_uprobe_multi(p.prog.as_raw_fd(), &bin, &[site], Some(pid), false).unwrap();
    let mut guard = SemaphoreGuard::new(rec.path());
    assert_eq!(guard.increment(pid, sem).unwrap(), 1);
    assert!(guard.record_path().exists());
    // Restore while the process still runs (as on Ctrl-C): back to 0, record gone.
    assert_eq!(guard.restore(), 1);
    assert_eq!(semaphore::read(pid, sem).unwrap(), 0);
    assert!(!guard.record_path().exists());
    // Set again, then let the program run: every iteration sees it, the probe fires each time.
    guard.increment(pid, sem).unwrap();
    let out = go(child);
    assert_eq!(out, "10 60");
    assert_eq!(p.get(0).0, N);
    drop(guard); // the process is gone: nothing to undo, no error.
}

#[test]
fn stale_semaphore_records_are_repaired() {
    if !test_support::privileged("writes /proc/PID/mem") {
        return;
    }
    let (_d, bin) = build(&["-DWITH_SEM"]);
    let elf = ElfFile::open(&bin).unwrap();
    let probe = probes(&elf).unwrap().remove(0);
    let rec = tempfile::tempdir().unwrap();
    let child = start(&bin);
    let pid = child.id();
    let sem = ProcessMaps::read(pid)
        .unwrap()
        .module(&bin, &elf)
        .unwrap()
        .abs(probe.semaphore.unwrap());
    // A "crashed" owner: a process that has exited, whose record says it incremented `sem`.
    let dead = Command::new("true").spawn().unwrap();
    let dead_pid = dead.id();
    let dead_start = semaphore::start_time(dead_pid).unwrap_or(1);
    let mut dead = dead;
    dead.wait().unwrap();
    semaphore::adjust(pid, sem, 1).unwrap();
    let start = semaphore::start_time(pid).unwrap();
    std::fs::write(
        rec.path().join(format!("{dead_pid}.sem")),
        format!("{dead_pid} {dead_start}\n{pid} {start} {:x}\n", sem.0),
    )
    .unwrap();
    // A live owner's record (ours) is left alone.
    let me = std::process::id();
    let live = rec.path().join(format!("{me}.sem"));
    std::fs::write(
        &live,
        format!("{me} {}\n", semaphore::start_time(me).unwrap()),
    )
    .unwrap();
    let repairs = repair_stale(rec.path());
    assert_eq!(repairs.len(), 1);
    assert_eq!((repairs[0].restored, repairs[0].gone), (1, 0));
    assert_eq!(semaphore::read(pid, sem).unwrap(), 0);
    assert!(live.exists());
    assert_eq!(go(child), "0 60");
}

#[test]
fn every_instruction_at_scale_leaves_target_intact() {
    if !test_support::privileged("attaches uprobes") {
        return;
    }
    let (_d, bin) = build(&[]);
    let unprobed = go(start(&bin));
    let elf = ElfFile::open(&bin).unwrap();
    let (own, _) = pid_sites(&elf, "*", "").unwrap();
    let libc_path = Path::new("/usr/lib/x86_64-linux-gnu/libc.so.6");
    let libc = ElfFile::open(libc_path).unwrap();
    // Every instruction of libc's malloc/free family and string functions that decode.
    let mut lib_sites = Vec::new();
    for pat in [
        "*malloc*",
        "*free*",
        "str*",
        "__libc_start*",
        "exit",
        "_IO_*",
    ] {
        lib_sites.extend(pid_sites(&libc, pat, "").unwrap().0);
    }
    lib_sites.sort_by_key(|s| s.offset);
    lib_sites.dedup_by_key(|s| s.offset);
    assert!(
        own.len() + lib_sites.len() > 2000,
        "{} + {}",
        own.len(),
        lib_sites.len()
    );
    let child = start(&bin);
    let pid = child.id();
    let p = Prog::new(Reg::Rax, true);
    let l1 = sys::attach_uprobe_multi(p.prog.as_raw_fd(), &bin, &sites(&own, 0), Some(pid), false)
        .unwrap();
    let l2 = sys::attach_uprobe_multi(
        p.prog.as_raw_fd(),
        libc_path,
        &sites(&lib_sites, 1),
        Some(pid),
        false,
    )
    .unwrap();
    let out = go(child);
    drop((l1, l2));
    assert_eq!(out, unprobed);
    assert!(p.get(0).0 > 10 * N, "own hits {}", p.get(0).0);
    assert!(p.get(1).0 > 0, "libc hits");
}

#[test]
fn symbolizes_process_addresses_after_exit() {
    if !test_support::privileged("reads another process's maps") {
        return;
    }
    let (_d, bin) = build(&[]);
    let elf = ElfFile::open(&bin).unwrap();
    let add = elf.function("add").unwrap().clone();
    let child = start(&bin);
    let pid = child.id();
    let module = ProcessMaps::read(pid).unwrap().module(&bin, &elf).unwrap();
    let libc = ElfFile::open("/usr/lib/x86_64-linux-gnu/libc.so.6").unwrap();
    let maps = ProcessMaps::read(pid).unwrap();
    let libc_path = maps.resolve_module("libc.so.6").remove(0);
    let libc_mod = maps.module(&libc_path, &libc).unwrap();
    let malloc = libc.function("malloc").unwrap();
    let mut s = Symbolizer::new();
    assert!(s.remember(pid));
    go(child);
    // The process has exited; its remembered maps still resolve.
    let main = elf.function("main").unwrap();
    assert_eq!(
        s.resolve(pid, AbsAddr(module.abs(main.addr).0 + 4)).frame(),
        "t`main+0x4"
    );
    assert_eq!(
        s.resolve(pid, AbsAddr(module.abs(main.addr).0 + 4)).sym(),
        "t`main"
    );
    assert_eq!(s.resolve(pid, module.abs(add.addr)).frame(), "t`add");
    let m = s.resolve(pid, AbsAddr(libc_mod.abs(malloc.addr).0 + 0x10));
    assert_eq!(m.module.as_deref(), Some("libc.so.6"));
    assert_eq!(m.offset, 0x10);
    assert!(m.function.is_some());
    assert_eq!(s.resolve(pid, AbsAddr(0x10)).frame(), "0x10");
}

/// The catalog and the attach module together, as the runtime uses them.
#[test]
fn catalog_probes_attach_through_attach_module() {
    use probe_sema::catalog::{ProbeCatalog, ProbeDescPattern, ProbeKind};
    use probe_user::attach::{AttachRequest, attach};
    use probe_user::provider::{UserSites, catalog};
    if !test_support::privileged("attaches uprobes") {
        return;
    }
    let (_d, bin) = build(&["-DWITH_SEM"]);
    let child = start(&bin);
    let pid = child.id();
    let cat = catalog(UserSites::new());
    // pid$target:a.out:add:return -> a uretprobe; arg1 (rax) sums to 55.
    let ret = cat.matching(&ProbeDescPattern::new(
        &format!("pid{pid}"),
        "a.out",
        "add",
        "return",
    ));
    assert_eq!(ret.len(), 1);
    let ProbeKind::Uprobe {
        path,
        offset,
        ret: true,
        pid: Some(p),
    } = &ret[0].kind
    else {
        panic!("{:?}", ret[0].kind)
    };
    assert_eq!(*p, pid);
    let pr = Prog::new(Reg::Rax, false);
    let req = AttachRequest {
        path: Path::new(path),
        offsets: &[FileOffset(*offset)],
        ret: true,
        pid: Some(pid),
        semaphore: None,
        multi_prog: false,
        cookies: &[],
    };
    let a1 = attach(pr.prog.as_raw_fd(), &req).unwrap();
    assert_eq!(a1.len(), 1);
    // sl_test$target:::tick with its semaphore, through a uprobe_multi link.
    let usdt = cat.matching(&ProbeDescPattern::new(
        &format!("sl_test{pid}"),
        "",
        "",
        "tick",
    ));
    assert_eq!(usdt.len(), 1);
    assert_eq!(usdt[0].provider, format!("sl_test{pid}"));
    assert_eq!(
        (usdt[0].module.as_str(), usdt[0].function.as_str()),
        ("t", "main")
    );
    let ProbeKind::Usdt {
        path,
        offset,
        semaphore: Some(sem),
        ..
    } = &usdt[0].kind
    else {
        panic!()
    };
    let pu = Prog::new(Reg::Rax, true);
    let req = AttachRequest {
        path: Path::new(path),
        offsets: &[FileOffset(*offset)],
        ret: false,
        pid: Some(pid),
        semaphore: Some(FileOffset(*sem)),
        multi_prog: true,
        cookies: &[],
    };
    let a2 = attach(pu.prog.as_raw_fd(), &req).unwrap();
    // The kernel's counter took: nothing set by hand.
    assert_eq!(a2.self_set_semaphores, 0);
    assert_eq!(go(child), "10 60");
    assert_eq!(pr.get(0), (N, 55));
    assert_eq!(pu.get(0).0, N);
    drop((a1, a2));
}

/// `-c`: probes resolved against the files a held command will map, attached before it execs,
/// catch its first calls; the USDT semaphore is set from its first instruction.
#[test]
fn held_command_probes_fire_from_the_start() {
    use probe_sema::catalog::{ProbeCatalog, ProbeDescPattern, ProbeKind};
    use probe_user::attach::{AttachRequest, attach};
    use probe_user::provider::{UserSites, catalog};
    if !test_support::privileged("attaches uprobes") {
        return;
    }
    let (_d, bin) = build(&["-DWITH_SEM"]);
    // Held before exec: a shell waiting for a line, then exec'ing the target (same pid).
    let mut child = Command::new("sh")
        .args(["-c", &format!("read x; exec {} {N}", bin.display())])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let cat = catalog(UserSites::with_held_command(pid, bin.clone()));
    let one = |prov: &str, module: &str, func: &str, name: &str| {
        let m = cat.matching(&ProbeDescPattern::new(prov, module, func, name));
        assert_eq!(m.len(), 1, "{prov}:{module}:{func}:{name}");
        m.into_iter().next().unwrap()
    };
    let add = one(&format!("pid{pid}"), "a.out", "add", "entry");
    let malloc = one(&format!("pid{pid}"), "libc.so.6", "malloc", "entry");
    let tick = one(&format!("sl_test{pid}"), "", "", "tick");
    let mut held = Vec::new();
    let mut progs = Vec::new();
    for (info, reg) in [(&add, Reg::Rdi), (&malloc, Reg::Rdi), (&tick, Reg::Rax)] {
        let p = Prog::new(reg, true);
        let (path, offset, sem) = match &info.kind {
            ProbeKind::Uprobe { path, offset, .. } => (path.clone(), *offset, None),
            ProbeKind::Usdt {
                path,
                offset,
                semaphore,
                ..
            } => (path.clone(), *offset, semaphore.map(FileOffset)),
            k => panic!("{k:?}"),
        };
        let req = AttachRequest {
            path: Path::new(&path),
            offsets: &[FileOffset(offset)],
            ret: false,
            pid: Some(pid),
            semaphore: sem,
            multi_prog: true,
            cookies: &[],
        };
        held.push(attach(p.prog.as_raw_fd(), &req).unwrap());
        progs.push(p);
    }
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "10 60",
        "the semaphore was set from the start"
    );
    assert_eq!(progs[0].get(0), (N, 45));
    // malloc(16 * (i % 4 + 1)) ten times: sizes sum to 16 * (1+2+3+4+1+2+3+4+1+2) = 368; the
    // shell before exec and stdio add a few more calls.
    let (mallocs, sizes) = progs[1].get(0);
    assert!(mallocs >= N, "malloc entries {mallocs}");
    assert!(sizes >= 368, "malloc sizes {sizes}");
    assert_eq!(progs[2].get(0).0, N);
    drop(held);
}

/// The lld layout: the semaphore's file page is also mapped by the RELRO segment, so under `-c`
/// the kernel's reference counter updates the wrong mapping (bpftrace 0.17 never fires such
/// probes). The entry-point setter makes every iteration see it set.
#[test]
fn lld_semaphore_set_from_entry_point_under_held_command() {
    use probe_sema::catalog::{ProbeCatalog, ProbeDescPattern, ProbeKind};
    use probe_user::attach::{AttachRequest, attach};
    use probe_user::provider::{UserSites, catalog};
    if !test_support::privileged("attaches uprobes") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = common::build_rust_sem(dir.path());
    let elf = ElfFile::open(&bin).unwrap();
    let probe = probes(&elf).unwrap().remove(0);
    assert!(
        elf.page_shared_by_segments(probe.semaphore_offset.unwrap()),
        "not the lld layout this test is about"
    );
    // Kernel counter only (what the attach does when the process is already running): 0 hits.
    let run = |use_setter: bool| -> (String, u64) {
        let mut child = Command::new("sh")
            .args(["-c", &format!("read x; exec {} {N}", bin.display())])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        let cat = catalog(UserSites::with_held_command(pid, bin.clone()));
        let m = cat.matching(&ProbeDescPattern::new(&format!("rs{pid}"), "", "", "hit"));
        assert_eq!(m.len(), 1);
        let ProbeKind::Usdt {
            path,
            offset,
            semaphore: Some(sem),
            ..
        } = &m[0].kind
        else {
            panic!()
        };
        let p = Prog::new(Reg::Rdi, true);
        let held = if use_setter {
            let req = AttachRequest {
                path: Path::new(path),
                offsets: &[FileOffset(*offset)],
                ret: false,
                pid: Some(pid),
                semaphore: Some(FileOffset(*sem)),
                multi_prog: true,
                cookies: &[],
            };
            let a = attach(p.prog.as_raw_fd(), &req).unwrap();
            assert!(a.has_entry_setter());
            Ok(a)
        } else {
            let site = UprobeSite {
                offset: FileOffset(*offset),
                ref_ctr_offset: Some(FileOffset(*sem)),
                cookie: 0,
            };
            Err(sys::attach_uprobe_multi(
                p.prog.as_raw_fd(),
                Path::new(path),
                &[site],
                Some(pid),
                false,
            )
            .unwrap())
        };
        child.stdin.take().unwrap().write_all(b"go\n").unwrap();
        let out = child.wait_with_output().unwrap();
        drop(held);
        // (iterations that saw the semaphore, arg0 sum)
        (
            String::from_utf8_lossy(&out.stdout).trim().to_string(),
            p.get(0).1,
        )
    };
    // FIXME(kernel): the reference counter alone misses this layout under -c; this asserts today's
    // kernel behaviour that the setter exists for.
    assert_eq!(run(false), ("0".to_string(), 0));
    // With the setter: all N iterations see the semaphore, and arg0 (0..N) sums to 45.
    assert_eq!(run(true), ("10".to_string(), 45));
}

/// At a uprobe, `regs->ip` is the probed instruction's address (the kernel sets it before running
/// handlers), on both attach paths: RIP-relative USDT arguments are computed from it.
#[test]
fn uprobe_ip_is_the_probe_address() {
    if !test_support::privileged("attaches uprobes") {
        return;
    }
    let (_d, bin) = build(&[]);
    let elf = ElfFile::open(&bin).unwrap();
    let add = elf.function("add").unwrap().clone();
    let child = start(&bin);
    let pid = child.id();
    let module = ProcessMaps::read(pid).unwrap().module(&bin, &elf).unwrap();
    let site = UprobeSite {
        offset: add.offset,
        ref_ctr_offset: None,
        cookie: 0,
    };
    let pm = Prog::new(Reg::Rip, true);
    let pp = Prog::new(Reg::Rip, false);
    let _l =
        sys::attach_uprobe_multi(pm.prog.as_raw_fd(), &bin, &[site], Some(pid), false).unwrap();
    let _e = sys::attach_uprobe_perf(pp.prog.as_raw_fd(), &bin, site, Some(pid), false).unwrap();
    go(child);
    let want = N.wrapping_mul(module.abs(add.addr).0);
    assert_eq!(pm.get(0), (N, want), "uprobe_multi");
    assert_eq!(pp.get(0), (N, want), "perf event");
}
