//! `sightline probe -A` / `-a` (anonymous tracing pinned under /sys/fs/bpf/sightline/anon) and
//! `--recover` (the buffers of a ring-policy run killed with SIGKILL):
//! docs/probe-pinning.md. The anonymous directory is one per machine, so one test uses it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn probe(args: &[&str]) -> Output {
    crate::sightline()
        .arg("probe")
        .args(args)
        .output()
        .expect("run sightline")
}

/// Compiles tests/probe/workloads/getpid_n.c as `dir/name` (its command name: `name`).
fn getpid_workload(dir: &Path, name: &str) -> PathBuf {
    let src = test_support::workspace_root().join("tests/probe/workloads/getpid_n.c");
    let out = dir.join(name);
    let st = Command::new("gcc")
        .args(["-O1", "-o"])
        .arg(&out)
        .arg(&src)
        .status()
        .expect("run gcc");
    assert!(st.success(), "gcc {}", src.display());
    out
}

/// Runs the workload: `n` getpid(2) calls, on CPU 0 (`taskset`), so that the kernel ring, read
/// CPU after CPU, holds its records in the order they were made.
fn getpids(bin: &Path, n: u32) {
    let st = if test_support::require_tool("taskset") {
        Command::new("taskset")
            .args(["-c", "0"])
            .arg(bin)
            .arg(n.to_string())
            .status()
    } else {
        Command::new(bin).arg(n.to_string()).status()
    }
    .unwrap();
    assert!(st.success());
}

/// The kernel ids of the links (`link-*`) and programs (`prog-*`) pinned in `dir`.
fn pinned_ids(dir: &Path) -> (Vec<u32>, Vec<u32>) {
    let (mut links, mut progs) = (Vec::new(), Vec::new());
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let path = std::ffi::CString::new(e.path().to_str().unwrap()).unwrap();
        let fd = probe_sys::bpf::obj_get(&path).unwrap();
        let id = probe_sys::bpf::obj_id(std::os::fd::AsRawFd::as_raw_fd(&fd)).unwrap();
        if name.starts_with("link-") {
            links.push(id);
        } else if name.starts_with("prog-") {
            progs.push(id);
        }
    }
    (links, progs)
}

/// Waits (the kernel frees released links and programs from a work queue) until no link or
/// program of these ids exists; false after 5 s.
fn all_gone(links: &[u32], progs: &[u32]) -> bool {
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(5) {
        let left = links
            .iter()
            .any(|&id| probe_sys::bpf::object_exists(id, true).unwrap())
            || progs
                .iter()
                .any(|&id| probe_sys::bpf::object_exists(id, false).unwrap());
        if !left {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// Removes the anonymous enabling if a failed test left it (its probes stay attached otherwise).
struct AnonCleanup;

impl Drop for AnonCleanup {
    fn drop(&mut self) {
        let dir = Path::new("/sys/fs/bpf/sightline/anon");
        if let Ok(entries) = std::fs::read_dir(dir) {
            for e in entries.flatten() {
                let _ = std::fs::remove_file(e.path());
            }
            let _ = std::fs::remove_dir(dir);
        }
    }
}

#[test]
fn an_anonymous_enabling_outlives_its_installer_and_the_claim_prints_exact_counts() {
    if !test_support::privileged("pins BPF programs under /sys/fs/bpf") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = getpid_workload(dir.path(), "anon_getpid");
    let script = dir.path().join("anon.d");
    std::fs::write(
        &script,
        "BEGIN { printf(\"installed\\n\"); }\n\
         syscall::getpid:entry /execname == \"anon_getpid\"/ { @calls = count(); }\n\
         syscall::getpid:entry /execname == \"anon_getpid\" && ++n <= 2/ { printf(\"call %d\\n\", n); }\n\
         tick-1ms /execname == \"no such command\"/ { @never = count(); }\n\
         sched:::sched_process_exec /execname == \"anon_getpid\"/ { @execs = count(); }\n\
         END { printf(\"claimed\\n\"); }\n",
    )
    .unwrap();
    let _cleanup = AnonCleanup;
    let unit = dir.path().join("sightline-anon.service");
    let anon = Path::new("/sys/fs/bpf/sightline/anon");
    let out = probe(&[
        "-A",
        "-s",
        script.to_str().unwrap(),
        "--boot-unit",
        unit.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "-A: {}", text(&out.stderr));
    // The installing process has exited; its enabling is pinned: a raw tracepoint link and
    // the tick's and the tracepoint's perf-event links, and the programs BEGIN, getpid, tick,
    // sched_process_exec, END.
    let (links, progs) = pinned_ids(anon);
    assert_eq!((links.len(), progs.len()), (3, 5), "{:?}", (links, progs));
    // The unit re-installs the same script at boot.
    let u = std::fs::read_to_string(&unit).unwrap();
    let exe = crate::bin().canonicalize().unwrap();
    let abs = script.canonicalize().unwrap();
    assert!(
        u.contains(&format!(
            "\nExecStart={} probe -A -s {}\n",
            exe.display(),
            abs.display()
        )),
        "{u}"
    );
    assert!(u.contains("\nDefaultDependencies=no\n") && u.contains("\nBefore=sysinit.target\n"));
    // systemd's own checker accepts it (the binary and the script exist, the syntax is right).
    if test_support::require_tool("systemd-analyze") {
        let v = Command::new("systemd-analyze")
            .arg("verify")
            .arg(&unit)
            .output()
            .unwrap();
        assert!(
            v.status.success(),
            "systemd-analyze verify: {}",
            text(&v.stderr)
        );
    }
    // A second -A is refused while one is installed.
    let again = probe(&["-A", "-s", script.to_str().unwrap()]);
    assert!(!again.status.success());
    assert!(
        text(&again.stderr).contains("installed already"),
        "{}",
        text(&again.stderr)
    );
    for n in [5, 7, 11] {
        getpids(&bin, n);
    }
    // -x keepanon prints and leaves it tracing (END does not run). @calls: 5 + 7 + 11 getpid
    // calls; @execs: 3 execs (a tracepoint through a pinned perf-event link).
    let kept = probe(&["-q", "-a", "-x", "keepanon"]);
    assert!(kept.status.success(), "{}", text(&kept.stderr));
    assert_eq!(
        text(&kept.stdout),
        "installed\ncall 1\ncall 2\n\n               23\n                3\n"
    );
    assert!(anon.join("link-0").exists());
    getpids(&bin, 4);
    let claimed = probe(&["-q", "-a"]);
    assert!(claimed.status.success(), "{}", text(&claimed.stderr));
    // BEGIN's record was read by the first claim; the kernel ring's records are kept.
    assert_eq!(
        text(&claimed.stdout),
        "call 1\ncall 2\nclaimed\n\n               27\n                4\n"
    );
    assert!(!anon.exists(), "the claim removes the pinned directory");
    assert!(
        all_gone(&links, &progs),
        "links {links:?} or programs {progs:?} still exist after the claim"
    );
    let none = probe(&["-a"]);
    assert!(!none.status.success());
    assert!(text(&none.stderr).contains("no anonymous enabling is installed"));
}

/// Starts `sightline probe -q -x bufpolicy=ring -n CLAUSE` and waits until its postmortem
/// directory (which appears once every probe is attached) is there.
fn ring_run(clause: &str) -> (std::process::Child, PathBuf) {
    let child = crate::sightline()
        .args(["probe", "-q", "-x", "bufpolicy=ring", "-n", clause])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let run = PathBuf::from(format!("/sys/fs/bpf/sightline/run-{}", child.id()));
    let t = Instant::now();
    while !run.join("layout").exists() {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "{} never appeared",
            run.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    (child, run)
}

/// One test for both: a ring run removes dead runs' directories, which --recover reads.
#[test]
fn recover_prints_what_a_killed_ring_run_had_buffered_and_a_new_run_removes_stale_ones() {
    if !test_support::privileged("pins BPF maps under /sys/fs/bpf") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = getpid_workload(dir.path(), "pm_getpid");
    let clause = "syscall::getpid:entry /execname == \"pm_getpid\"/ { @c = count(); printf(\"n=%d\\n\", ++n); }";
    let (mut child, run) = ring_run(clause);
    getpids(&bin, 4);
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(run.exists(), "a killed run leaves its buffers pinned");
    let out = probe(&["-q", "--recover"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("n=1\nn=2\nn=3\nn=4\n\n                4\n"),
        "{stdout}"
    );
    assert!(!run.exists(), "--recover removes what it printed");
    // A run that ends normally removes its own directory.
    let (child, run) = ring_run("tick-10ms { @ = count(); } tick-300ms { exit(0); }");
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!run.exists(), "{} outlived its run", run.display());
    // A killed one is removed by the next ring-policy run, which says so.
    let (mut child, run) = ring_run(clause);
    let pid = child.id();
    child.kill().unwrap();
    child.wait().unwrap();
    let out = probe(&["-q", "-x", "bufpolicy=ring", "-n", "BEGIN { exit(0); }"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains(&format!("removed the buffers pinned by dead run {pid} ")),
        "{}",
        text(&out.stderr)
    );
    assert!(!run.exists());
}

/// `-x postmortem` (issue 15): system-wide under the ring policy, a process the predicate
/// selects, started by nobody but the test, dies of SIGSEGV: sightline prints the ring's
/// records, then the signal, the fault address (segv_guest writes through 0x10) and the
/// thread's user stack (three frames in the guest at least), and stops by itself.
#[test]
fn postmortem_dumps_the_ring_when_any_selected_process_crashes() {
    if !test_support::privileged("attaches BPF programs system-wide") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let src = test_support::workspace_root().join("tests/probe/workloads/segv_guest.c");
    let guest = dir.path().join("segv_guest");
    let st = Command::new("gcc")
        .args(["-O0", "-fno-omit-frame-pointer", "-o"])
        .arg(&guest)
        .arg(&src)
        .status()
        .expect("run gcc");
    assert!(st.success());
    let child = crate::sightline()
        .args([
            "probe",
            "-q",
            "-x",
            "postmortem",
            "-n",
            "syscall::getpid:entry /execname == \"segv_guest\"/ { printf(\"getpid %d\\n\", n++); }",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Attached once its ring is pinned for --recover.
    let pinned = Path::new("/sys/fs/bpf/sightline").join(format!("run-{}", child.id()));
    let t0 = Instant::now();
    while !pinned.exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "sightline never attached"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let st = Command::new(&guest).arg("4").status().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&st),
        Some(11),
        "the guest dies of SIGSEGV"
    );
    let out = child.wait_with_output().unwrap();
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    let (ring, report) = stdout
        .split_once("\nsightline: pid ")
        .unwrap_or_else(|| panic!("no crash report in:\n{stdout}"));
    assert_eq!(ring, "getpid 0\ngetpid 1\ngetpid 2\ngetpid 3\n");
    let re = regex::Regex::new(
        r"\A\d+ \(segv_guest\) died of signal 11 \(SIGSEGV\), fault address 0x10, in thread \d+:\n\n(?: +\S+\n){3,}",
    )
    .unwrap();
    assert!(re.is_match(report), "{report}");
    assert!(!pinned.exists(), "the run removes its pins");
}
