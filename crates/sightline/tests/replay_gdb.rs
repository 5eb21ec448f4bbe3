//! Issue #13, the debugger: `sightline replay --gdb` and `--gdbserver` on recordings of C guests
//! (`crates/replay/tests/guests/gdb_*.c`, built here with `gcc -g -O0`). gdb runs in batch mode;
//! its output is compared with the values the recorded run printed (they depend on bytes the
//! program read from /dev/urandom, so only a replay of the recorded input shows them), and the
//! replay's output with the recorded output.
//!
//! Everything runs through the `sightline` binary (no in-process replay), one test at a time
//! ([`LOCK`]: each replay pins itself to a CPU and the gdb sessions are slow enough).

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;

static LOCK: Mutex<()> = Mutex::new(());

/// `None` (after saying why) without root, gdb or gcc; else the lock and a temporary directory.
fn start() -> Option<(std::sync::MutexGuard<'static, ()>, tempfile::TempDir)> {
    if !test_support::privileged("records and replays with ptrace") {
        return None;
    }
    if !["gdb", "gcc"].iter().all(|t| test_support::require_tool(t)) {
        return None;
    }
    let guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    Some((guard, tempfile::tempdir().unwrap()))
}

/// Builds `crates/replay/tests/guests/<name>.c` into `dir` with `-g -O0`.
fn guest(name: &str, dir: &Path) -> PathBuf {
    let src = test_support::workspace_root().join(format!("crates/replay/tests/guests/{name}.c"));
    let out = dir.join(name);
    let st = Command::new("gcc")
        .args(["-g", "-O0", "-pthread", "-o"])
        .arg(&out)
        .arg(&src)
        .status()
        .expect("run gcc");
    assert!(st.success(), "gcc failed for {}", src.display());
    out
}

fn sightline() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sightline"))
}

/// Records `exe` into `<tmp>/rec`; returns the directory and the recorded stdout.
fn record(tmp: &Path, exe: &Path) -> (PathBuf, String) {
    let dir = tmp.join("rec");
    let out = sightline()
        .arg("record")
        .arg("-o")
        .arg(&dir)
        .arg("--")
        .arg(exe)
        .stdin(Stdio::null())
        .output()
        .expect("run sightline record");
    assert!(
        out.status.code().is_some(),
        "record failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (dir, String::from_utf8(out.stdout).unwrap())
}

/// Runs `sightline replay --gdb DIR -- -batch -x <cmds>` with `cmds` as gdb's command file;
/// returns the exit code, stdout (the program's output and gdb's) and stderr.
fn replay_with_gdb(tmp: &Path, dir: &Path, cmds: &str) -> (i32, String, String) {
    let file = tmp.join("cmds.gdb");
    std::fs::write(&file, cmds).unwrap();
    let out = sightline()
        .args(["replay", "--gdb"])
        .arg(dir)
        .args(["--", "-nx", "-batch", "-x"])
        .arg(&file)
        .stdin(Stdio::null())
        .output()
        .expect("run sightline replay --gdb");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// True when `lines` appear in `text` in this order (other lines may come between).
fn in_order(text: &str, lines: &[&str]) -> bool {
    let mut it = text.lines();
    lines.iter().all(|want| it.any(|l| l == *want))
}

/// True when each of `pieces` occurs in `text` after the previous one ends. The guest and gdb
/// share the replay's stdout, so gdb's text can be glued onto a guest line
/// ("[Inferior 1 (process 14787square(1) = 118"); the guest's own output, written at once,
/// stays contiguous.
fn in_order_within(text: &str, pieces: &[&str]) -> bool {
    let mut rest = text;
    pieces.iter().all(|want| match rest.find(want) {
        Some(i) => {
            rest = &rest[i + want.len()..];
            true
        }
        None => false,
    })
}

/// The value printed after `label` in the recorded output (`square(1) = 123` → "123").
fn after<'a>(text: &'a str, label: &str) -> &'a str {
    let i = text
        .find(label)
        .unwrap_or_else(|| panic!("{label} in {text}"))
        + label.len();
    text[i..].split_whitespace().next().unwrap()
}

#[test]
fn gdb_breaks_prints_a_local_watches_a_global_and_sees_the_exit() {
    let Some((_g, tmp)) = start() else { return };
    let exe = guest("gdb_target", tmp.path());
    let (dir, recorded) = record(tmp.path(), &exe);
    let square1 = after(&recorded, "square(1) = ");
    let noise = after(&recorded, "noise ");
    let pid = after(&recorded, " pid ");
    let cmds = "break square\ncontinue\nprint x\nnext\nprint local\nprint noise\nstep\nstep\n\
                print $pc == (long)&main\ndelete\nwatch counter\ncontinue\ncontinue\ndelete\n\
                info proc mappings\nmonitor when\ncontinue\n";
    let (code, out, err) = replay_with_gdb(tmp.path(), &dir, cmds);
    assert_eq!(code, 3, "the replayed program's exit code\n{out}\n{err}");
    assert!(
        in_order(
            &out,
            &[
                "$1 = 1",
                &format!("$2 = {square1}"),
                &format!("$3 = {noise}"),
                "Old value = 10",
                "New value = 20",
                "Old value = 20",
                "New value = 30",
                &format!("[Inferior 1 (process {pid}) exited with code 03]"),
            ]
        ),
        "gdb's values must be the recorded run's\n{out}\n{err}"
    );
    // `step` from `return local;` left square for main, inside it (not at main's first byte).
    assert!(out.contains("$4 = 0"), "{out}");
    assert!(out.contains("main () at "), "stepped back into main\n{out}");
    // `info proc mappings` reads /proc/PID/maps through the server: the executable is mapped.
    assert!(
        out.lines()
            .any(|l| l.contains("r-xp") && l.trim_end().ends_with(&*exe.to_string_lossy())),
        "{out}"
    );
    // `monitor when` (gdb prints a monitor's output on its stderr): some events replayed (open,
    // read, ... before the loop), not all.
    let when: u64 = after(&err, "Events replayed: ")
        .trim_end_matches(';')
        .parse()
        .unwrap();
    let total = replay::format::Recording::open(&dir).unwrap().records.len() as u64;
    assert!(when > 0 && when < total, "{when} of {total}");
    // The program's own output is the recorded one, line for line.
    let lines: Vec<&str> = recorded.lines().collect();
    assert!(
        in_order_within(&out, &lines),
        "recorded output\n{recorded}\nreplayed\n{out}"
    );
    assert!(!err.contains("diverge"), "{err}");
}

#[test]
fn a_write_from_gdb_is_announced_and_its_divergence_reported() {
    let Some((_g, tmp)) = start() else { return };
    let exe = guest("gdb_target", tmp.path());
    let (dir, _) = record(tmp.path(), &exe);
    // The last square is printed from a changed `noise`: the write to stdout differs.
    let cmds = "break square if x == 4\ncontinue\nset var noise = noise + 1\ncontinue\n";
    let (code, out, err) = replay_with_gdb(tmp.path(), &dir, cmds);
    assert!(
        err.contains("gdb wrote memory: the replay will diverge"),
        "{err}"
    );
    assert!(
        out.contains("the replay cannot go on") || err.contains("diverge"),
        "{out}\n{err}"
    );
    assert!(
        err.contains("replay diverged") || err.contains("divergence"),
        "{err}"
    );
    assert_ne!(
        code, 3,
        "a diverged replay does not exit as the recording did"
    );
}

#[test]
fn gdb_stops_at_a_recorded_signal_and_the_replay_delivers_it() {
    let Some((_g, tmp)) = start() else { return };
    let exe = guest("gdb_signal", tmp.path());
    let (dir, recorded) = record(tmp.path(), &exe);
    assert_eq!(recorded, "alarms 1\n");
    let cmds = "handle SIGALRM stop print\nhbreak on_alarm\ncontinue\nprint alarms\ncontinue\n\
                print sig\nstepi\nprint $pc\nstepi\nprint $pc\ncontinue\n";
    let (code, out, err) = replay_with_gdb(tmp.path(), &dir, cmds);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        in_order(
            &out,
            &[
                "Program received signal SIGALRM, Alarm clock.",
                "$1 = 0",
                "$2 = 14",
                "alarms 1",
            ]
        ),
        "{out}\n{err}"
    );
    assert!(out.contains("Breakpoint 1, on_alarm (sig=14)"), "{out}");
    // Two single steps: two different, increasing instruction addresses in on_alarm.
    let pcs: Vec<u64> = out
        .lines()
        .filter_map(|l| l.split_once(" <on_alarm+"))
        .filter_map(|(a, _)| a.rsplit(' ').next())
        .filter_map(|a| u64::from_str_radix(a.trim_start_matches("0x"), 16).ok())
        .collect();
    assert_eq!(pcs.len(), 2, "{out}");
    assert!(pcs[0] < pcs[1], "{pcs:x?}");
    assert!(out.contains("exited normally"), "{out}");
    // Continuing with the recorded signal is what a replay does: no warning.
    assert!(!err.contains("delivers"), "{err}");
}

#[test]
fn a_forked_child_runs_through_the_parents_breakpoint() {
    let Some((_g, tmp)) = start() else { return };
    let exe = guest("gdb_fork", tmp.path());
    let (dir, recorded) = record(tmp.path(), &exe);
    assert_eq!(recorded, "child 6\nparent 3 12\n");
    let cmds = "break work\ncontinue\nprint n\ncontinue\nprint n\ncontinue\n";
    let (code, out, err) = replay_with_gdb(tmp.path(), &dir, cmds);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        in_order(&out, &["$1 = 1", "child 6", "$2 = 4", "parent 3 12"]),
        "{out}\n{err}"
    );
    assert_eq!(out.matches("Breakpoint 1, work").count(), 2, "{out}");
    assert!(out.contains("exited normally"), "{out}");
}

#[test]
fn after_detach_the_replay_runs_to_its_recorded_end() {
    let Some((_g, tmp)) = start() else { return };
    let exe = guest("gdb_target", tmp.path());
    let (dir, recorded) = record(tmp.path(), &exe);
    // A breakpoint and a watchpoint are set when gdb leaves: neither may stop or change the rest.
    let cmds = "break square\ncontinue\nwatch counter\ncontinue\ndetach\n";
    let (code, out, err) = replay_with_gdb(tmp.path(), &dir, cmds);
    assert_eq!(code, 3, "{out}\n{err}");
    assert!(
        in_order(&out, &["Old value = 10", "New value = 20"]),
        "{out}"
    );
    assert!(err.contains("gdb detached; the replay runs on"), "{err}");
    let lines: Vec<&str> = recorded.lines().collect();
    assert!(
        in_order_within(&out, &lines),
        "recorded\n{recorded}\nreplayed\n{out}"
    );
}

#[test]
fn reverse_continue_returns_to_the_previous_breakpoint_hit() {
    let Some((_g, tmp)) = start() else { return };
    let exe = guest("gdb_target", tmp.path());
    let (dir, recorded) = record(tmp.path(), &exe);
    let square2 = after(&recorded, "square(2) = ");
    // At square(3), back to square(2): its argument and local are the recorded run's; forward
    // again to square(3), then to the end.
    let cmds = "break square\ncontinue\ncontinue\ncontinue\nprint x\nreverse-continue\nprint x\n\
                next\nprint local\ncontinue\nprint x\ndelete\ncontinue\n";
    let (code, out, err) = replay_with_gdb(tmp.path(), &dir, cmds);
    assert_eq!(code, 3, "{out}\n{err}");
    assert!(
        in_order(
            &out,
            &["$1 = 3", "$2 = 2", &format!("$3 = {square2}"), "$4 = 3",]
        ),
        "{out}\n{err}"
    );
    // The replay ran again from the start for it, but the program's output is written once.
    for line in recorded.lines() {
        assert_eq!(out.matches(line).count(), 1, "{line:?} in\n{out}");
    }
    assert!(out.contains("exited with code 03"), "{out}");
}

/// A raw protocol client: sends packets, reads replies (acknowledgements on).
struct Client {
    s: std::net::TcpStream,
    r: BufReader<std::net::TcpStream>,
}

impl Client {
    fn request(&mut self, data: &str) -> String {
        let sum = data.bytes().fold(0u8, |a, b| a.wrapping_add(b));
        write!(self.s, "${data}#{sum:02x}").unwrap();
        self.s.flush().unwrap();
        self.reply()
    }

    fn reply(&mut self) -> String {
        let mut b = [0u8; 1];
        loop {
            self.r.read_exact(&mut b).unwrap();
            if b[0] == b'$' {
                break;
            }
        }
        let mut data = Vec::new();
        self.r.read_until(b'#', &mut data).unwrap();
        data.pop();
        let mut cs = [0u8; 2];
        self.r.read_exact(&mut cs).unwrap();
        let sum = data.iter().fold(0u8, |a, b| a.wrapping_add(*b));
        assert_eq!(
            u8::from_str_radix(std::str::from_utf8(&cs).unwrap(), 16).unwrap(),
            sum
        );
        self.s.write_all(b"+").unwrap();
        String::from_utf8_lossy(&data).into_owned()
    }
}

/// Starts `sightline replay --gdbserver 0 DIR` and returns it and the address it printed.
fn gdbserver(dir: &Path) -> (std::process::Child, String) {
    let mut child = sightline()
        .args(["replay", "--gdbserver", "0"])
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run sightline replay --gdbserver");
    let mut line = String::new();
    BufReader::new(child.stderr.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .split("listening for gdb on ")
        .nth(1)
        .and_then(|s| s.split(';').next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_owned();
    (child, addr)
}

#[test]
fn the_protocol_answers_queries_refuses_bad_requests_and_reports_the_exit() {
    let Some((_g, tmp)) = start() else { return };
    let exe = guest("gdb_target", tmp.path());
    let (dir, recorded) = record(tmp.path(), &exe);
    let pid: i32 = after(&recorded, " pid ").parse().unwrap();
    let (mut child, addr) = gdbserver(&dir);
    let s = std::net::TcpStream::connect(&addr).unwrap();
    let mut c = Client {
        r: BufReader::new(s.try_clone().unwrap()),
        s,
    };
    let sup = c.request("qSupported:multiprocess+;swbreak+");
    assert!(
        sup.contains("qXfer:features:read+") && sup.contains("PacketSize="),
        "{sup}"
    );
    assert_eq!(c.request("?"), format!("T05thread:p{pid:x}.{pid:x};"));
    assert!(sup.contains("ReverseContinue+"), "{sup}");
    // Backwards from the first instruction: the start of the history, at once.
    assert_eq!(
        c.request("bc"),
        format!("T05replaylog:begin;thread:p{pid:x}.{pid:x};")
    );
    assert_eq!(c.request("bs"), "", "reverse-step is not there");
    assert_eq!(c.request("vMustReplyEmpty"), "");
    assert_eq!(c.request("qNoSuchQuery"), "");
    assert_eq!(c.request("jUnknownPacket"), "");
    assert_eq!(c.request("m0,8"), "E14", "page 0 is not mapped");
    assert_eq!(c.request("Z0,8,1"), "E14");
    assert_eq!(c.request("Z9,1000,1"), "", "an unknown breakpoint type");
    assert_eq!(c.request("qfThreadInfo"), format!("mp{pid:x}.{pid:x}"));
    assert_eq!(c.request("qsThreadInfo"), "l");
    // 16 + 1 eight-byte, 7 four-byte, 8 ten-byte, 8 four-byte, 16 sixteen-byte, 1 four-byte and
    // 3 eight-byte registers, two hex digits a byte.
    let g = c.request("g");
    assert_eq!(
        g.len(),
        2 * (17 * 8 + 7 * 4 + 8 * 10 + 8 * 4 + 16 * 16 + 4 + 3 * 8)
    );
    // rip (register 16) is where the exec stop left the program: inside ld.so's first page range.
    let rip = u64::from_str_radix(&c.request("p10"), 16)
        .map(u64::swap_bytes)
        .unwrap();
    assert!(rip > 0x7fff_0000_0000, "{rip:#x}");
    let xml = c.request("qXfer:features:read:target.xml:0,3fff");
    assert!(xml.starts_with('l') && xml.contains("i386:x86-64"), "{xml}");
    let exec = c.request("qXfer:exec-file:read::0,fff");
    assert_eq!(exec, format!("l{}", exe.display()));
    // Continue to the end: the exit status the recording had, as a W reply.
    assert_eq!(c.request("c"), format!("W03;process:{pid:x}"));
    let st = child.wait().unwrap();
    assert_eq!(st.code(), Some(3));
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    assert_eq!(out, recorded);
}

#[test]
fn gdbserver_lists_the_threads_of_a_threaded_guest() {
    let Some((_g, tmp)) = start() else { return };
    let exe = guest("gdb_threads", tmp.path());
    let (dir, recorded) = record(tmp.path(), &exe);
    let rec = replay::format::Recording::open(&dir).unwrap();
    let groups = replay::format::thread_groups(&rec.records);
    let (pid, tids) = groups.iter().next().expect("one process");
    assert_eq!(tids.len(), 3, "main and two workers were recorded");
    let (mut child, addr) = gdbserver(&dir);
    let out = Command::new("gdb")
        .args(["-nx", "-batch", "-ex"])
        .arg(format!("target remote {addr}"))
        .args([
            "-ex",
            "break all_started",
            "-ex",
            "continue",
            "-ex",
            "print n",
            "-ex",
            "info threads",
            "-ex",
            "continue",
        ])
        .arg(&exe)
        .stdin(Stdio::null())
        .output()
        .expect("run gdb");
    let gdb_out = String::from_utf8_lossy(&out.stdout);
    let st = child.wait().unwrap();
    assert_eq!(st.code(), Some(0), "{gdb_out}");
    assert!(gdb_out.contains("$1 = 2"), "{gdb_out}");
    for tid in tids {
        assert!(
            gdb_out.contains(&format!("Thread {pid}.{tid} ")),
            "thread {tid} in `info threads`\n{gdb_out}"
        );
    }
    assert!(
        gdb_out.lines().any(|l| l.starts_with("* 1 ")
            && l.contains(&format!("Thread {pid}.{pid} "))
            && l.contains("all_started (n=2)")),
        "the stopped thread is main, in all_started\n{gdb_out}"
    );
    assert!(gdb_out.contains("exited normally"), "{gdb_out}");
    let mut replayed = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut replayed)
        .unwrap();
    assert_eq!(replayed, recorded);
}

/// Issue 13: `monitor go-live` in a gdb session on a replay ends the replay where gdb stopped it
/// and lets the program run on natively: here at the first `fprintf` of `running_sum`, after its
/// first line was replayed; gone live it writes that line's sum to its log file for real, reads
/// a new number from our stdin and ends with no tracer and no seccomp filter. The line replayed
/// before gdb's stop is written once.
#[test]
fn monitor_go_live_continues_the_program_natively_from_the_gdb_stop() {
    let Some((_g, tmp)) = start() else { return };
    let prog = guest("running_sum", tmp.path());
    let log = tmp.path().join("sums.log");
    let dir = tmp.path().join("rec");
    let mut rec = sightline()
        .arg("record")
        .arg("-o")
        .arg(&dir)
        .arg("--")
        .arg(&prog)
        .arg(&log)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    rec.stdin.take().unwrap().write_all(b"1\n").unwrap();
    let out = rec.wait_with_output().unwrap();
    let recorded = String::from_utf8_lossy(&out.stdout);
    assert!(
        recorded.starts_with("sum 1\nend 1 seccomp 2 tracer "),
        "{recorded}"
    );
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "1\n");
    let cmds = tmp.path().join("cmds.gdb");
    std::fs::write(&cmds, "break fprintf\ncontinue\nmonitor go-live\n").unwrap();
    let mut child = sightline()
        .args(["replay", "--gdb"])
        .arg(&dir)
        .args(["--", "-nx", "-batch", "-x"])
        .arg(&cmds)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"5\n").unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("the live program did not end within 120 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert_eq!(stdout.matches("sum 1\n").count(), 1, "{stdout}");
    assert!(
        stdout.contains("sum 6\nend 6 seccomp 0 tracer 0 rdtsc ok\n"),
        "{stdout}{stderr}"
    );
    // gdb prints the monitor command's answer on its stderr.
    assert!(
        format!("{stdout}{stderr}").contains("Going live where thread "),
        "{stdout}{stderr}"
    );
    assert!(stderr.contains(" live at event #"), "{stderr}");
    // Live, the program writes the log from where it was at the stop (offset 0, before its
    // first line): both sums.
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "1\n6\n");
}
