//! `sightline probe -c`: the command is created held and never runs when the D program is given up
//! (DTrace: a created process is released with `PRELEASE_KILL`, illumos `dt_proc_destroy`); a
//! command that cannot be executed is an error (exit 2); `-l -c` lists the command's probes.

use std::path::Path;
use std::process::Output;

fn probe(dir: &Path, args: &[&str]) -> Output {
    crate::sightline()
        .arg("probe")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run sightline")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Pids of the processes whose command line holds `marker` as a whole argument.
fn processes_with_arg(marker: &str) -> Vec<u32> {
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        if cmd.split(|&b| b == 0).any(|a| a == marker.as_bytes()) {
            v.push(pid);
        }
    }
    v
}

#[test]
fn unmatched_target_probe_kills_the_held_command() {
    if !test_support::privileged("creating a held -c command") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = probe(
        dir.path(),
        &[
            "-c",
            "touch ran.txt",
            "-n",
            "pid$target:libc.so.6:nosuchfn:entry { }",
        ],
    );
    assert_eq!(out.status.code(), Some(2), "stderr: {}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("does not match any probes"),
        "stderr: {}",
        text(&out.stderr)
    );
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(
        !dir.path().join("ran.txt").exists(),
        "the -c command ran although the script failed"
    );
}

#[test]
fn failed_compile_leaves_no_process_behind() {
    if !test_support::privileged("creating a held -c command") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // A unique argument: the command, if it ran (or stayed held), would show it in its cmdline.
    let marker = format!("7{}.25", std::process::id());
    let cmd = format!("sleep {marker}");
    let out = probe(
        dir.path(),
        &[
            "-c",
            &cmd,
            "-n",
            "pid$target:a.out:no_such_function_xyz:entry { }",
        ],
    );
    assert_eq!(out.status.code(), Some(2), "stderr: {}", text(&out.stderr));
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(
        processes_with_arg(&marker),
        Vec::<u32>::new(),
        "the -c command survived"
    );
}

#[test]
fn begin_exit_does_not_run_the_command() {
    if !test_support::privileged("creating a held -c command") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = probe(
        dir.path(),
        &[
            "-q",
            "-c",
            "touch ran.txt",
            "-n",
            "BEGIN { printf(\"begin\\n\"); exit(3); }",
        ],
    );
    assert_eq!(out.status.code(), Some(3), "stderr: {}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim_end(), "begin");
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(
        !dir.path().join("ran.txt").exists(),
        "the -c command ran after exit() in BEGIN"
    );
}

#[test]
fn released_command_still_runs() {
    if !test_support::privileged("creating a held -c command") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = probe(
        dir.path(),
        &[
            "-q",
            "-c",
            "touch ran.txt",
            "-n",
            "syscall::exit_group:entry /pid == $target/ { printf(\"exit\\n\"); }",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim_end(), "exit");
    assert!(dir.path().join("ran.txt").exists());
}

#[test]
fn missing_or_not_executable_command_is_an_error() {
    if !test_support::privileged("creating a held -c command") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = probe(dir.path(), &["-c", "./nonexistent", "-n", "BEGIN {}"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        "sightline: -c ./nonexistent: cannot execute: No such file or directory (os error 2)\n"
    );
    assert_eq!(text(&out.stdout), "", "nothing is traced");
    let out = probe(dir.path(), &["-c", "/etc/passwd", "-n", "BEGIN {}"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        "sightline: -c /etc/passwd: cannot execute: Permission denied (os error 13)\n"
    );
    // A directory: execve(2) says EACCES.
    let out = probe(dir.path(), &["-c", "/tmp", "-n", "BEGIN {}"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("-c /tmp: cannot execute: Permission denied"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn exec_failure_seen_only_by_execve_is_an_error() {
    if !test_support::privileged("creating a held -c command") {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("badinterp");
    std::fs::write(&script, "#!/nonexistent/interpreter\necho ran > ran.txt\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = probe(dir.path(), &["-q", "-c", "./badinterp", "-n", "BEGIN {}"]);
    assert_eq!(out.status.code(), Some(2), "stderr: {}", text(&out.stderr));
    assert!(
        text(&out.stderr)
            .contains("sightline: -c ./badinterp: cannot execute: No such file or directory"),
        "stderr: {}",
        text(&out.stderr)
    );
    assert!(!dir.path().join("ran.txt").exists());
}

#[test]
fn script_without_interpreter_line_runs_under_sh() {
    if !test_support::privileged("creating a held -c command") {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("plain");
    std::fs::write(&script, "echo \"ran $1\" > ran.txt\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = probe(dir.path(), &["-q", "-c", "./plain one", "-n", "BEGIN {}"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("ran.txt")).unwrap(),
        "ran one\n"
    );
}

#[test]
fn list_with_command_lists_its_probes_and_never_runs_it() {
    if !test_support::privileged("creating a held -c command") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("{}/ran-{}.txt", dir.path().display(), std::process::id());
    let cmd = format!("touch {marker}");
    let out = probe(
        dir.path(),
        &["-l", "-c", &cmd, "-n", "pid$target:libc.so.6:malloc:entry"],
    );
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let rows: Vec<&str> = stdout.lines().skip(1).collect();
    assert_eq!(rows.len(), 1, "one malloc entry probe:\n{stdout}");
    let f: Vec<&str> = rows[0].split_whitespace().collect();
    assert!(
        f[1].starts_with("pid") && f[1][3..].parse::<u32>().is_ok(),
        "{stdout}"
    );
    assert_eq!(&f[2..], ["libc.so.6", "malloc", "entry"]);
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(!Path::new(&marker).exists(), "-l -c ran the command");
    assert_eq!(
        processes_with_arg(&marker),
        Vec::<u32>::new(),
        "the -l -c command survived"
    );
}

#[test]
fn path_lookup_skips_files_that_are_not_executable() {
    if !test_support::privileged("creating a held -c command") {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    // execvp(3): a file without execute permission earlier in PATH is skipped...
    std::fs::write(a.join("sl-cmd"), "echo wrong > ran.txt\n").unwrap();
    std::fs::set_permissions(a.join("sl-cmd"), std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::write(b.join("sl-cmd"), "#!/bin/sh\necho right > ran.txt\n").unwrap();
    std::fs::set_permissions(b.join("sl-cmd"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}:/usr/bin:/bin", a.display(), b.display());
    let out = crate::sightline()
        .args(["probe", "-q", "-c", "sl-cmd", "-n", "BEGIN {}"])
        .env("PATH", &path)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("ran.txt")).unwrap(),
        "right\n"
    );
    // ... and when it is the only one, the error is execve's EACCES.
    let out = crate::sightline()
        .args(["probe", "-q", "-c", "sl-cmd", "-n", "BEGIN {}"])
        .env("PATH", a.display().to_string())
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        "sightline: -c sl-cmd: cannot execute: Permission denied (os error 13)\n"
    );
}

/// Waits (up to 5 s) until no process has `marker` as an argument; returns the ones left.
fn wait_gone(marker: &str) -> Vec<u32> {
    for _ in 0..50 {
        let left = processes_with_arg(marker);
        if left.is_empty() {
            return left;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    processes_with_arg(marker)
}

#[test]
fn exit_action_kills_the_running_command() {
    if !test_support::privileged("running a -c command under probes") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("8{}.5", std::process::id());
    let cmd = format!("sleep {marker}");
    let out = probe(
        dir.path(),
        &["-q", "-c", &cmd, "-n", "tick-300ms { exit(0); }"],
    );
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    assert_eq!(
        wait_gone(&marker),
        Vec::<u32>::new(),
        "the -c command outlived sightline's exit()"
    );
}

#[test]
fn ctrl_c_kills_the_running_command() {
    if !test_support::privileged("running a -c command under probes") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("9{}.5", std::process::id());
    let cmd = format!("sleep {marker}");
    let mut child = crate::sightline()
        .args(["probe", "-q", "-c", &cmd, "-n", "tick-10s { }"])
        .current_dir(dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run sightline");
    // Wait until the command runs (released: its cmdline is the sleep's).
    let mut running = false;
    for _ in 0..100 {
        if !processes_with_arg(&marker).is_empty() {
            running = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(running, "the -c command never started");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let pid = child.id() as i32;
    let _ = std::process::Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status();
    let status = child.wait().expect("wait sightline");
    assert_eq!(status.code(), Some(0));
    assert_eq!(
        wait_gone(&marker),
        Vec::<u32>::new(),
        "the -c command outlived Ctrl-C"
    );
}

#[test]
fn a_p_process_is_released_never_killed() {
    if !test_support::privileged("tracing a -p process") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("6{}.5", std::process::id());
    let mut victim = std::process::Command::new("sleep")
        .arg(&marker)
        .spawn()
        .expect("start sleep");
    let pid = victim.id().to_string();
    let out = probe(
        dir.path(),
        &["-q", "-p", &pid, "-n", "tick-300ms { exit(0); }"],
    );
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    std::thread::sleep(std::time::Duration::from_millis(200));
    let alive = victim.try_wait().expect("try_wait").is_none();
    let _ = victim.kill();
    let _ = victim.wait();
    assert!(alive, "sightline killed the -p process");
}

#[test]
fn compile_only_checks_and_runs_nothing() {
    if !test_support::privileged("creating a held -c command") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = probe(
        dir.path(),
        &[
            "-e",
            "-c",
            "touch ran.txt",
            "-n",
            "BEGIN { printf(\"begin\\n\"); exit(0); }",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "", "-e traced something");
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(!dir.path().join("ran.txt").exists(), "-e ran the command");
    // A compile error is still reported, with its location.
    let bad = probe(dir.path(), &["-e", "-n", "BEGIN { x = ; }"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        text(&bad.stderr).contains("-n:1:13: error"),
        "{}",
        text(&bad.stderr)
    );
}

#[test]
fn show_program_lists_each_bpf_program() {
    let dir = tempfile::tempdir().unwrap();
    let out = probe(
        dir.path(),
        &["-e", "-S", "-n", "BEGIN { exit(0); } END { @ = count(); }"],
    );
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("sl_begin (RawTracepoint, Begin): clause 1, "),
        "{err}"
    );
    assert!(err.contains(": clause 2, "), "{err}");
    assert!(err.contains("    0: r6 = r1\n"), "{err}");
    assert!(err.contains(": exit\n"), "{err}");
}

#[test]
fn zero_matches_allowed_with_z_and_zdefs() {
    if !test_support::privileged("loading BPF programs") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let prog = "nosuch:::probe { printf(\"never\\n\"); } BEGIN { printf(\"ran\\n\"); exit(0); }";
    let refused = probe(dir.path(), &["-q", "-n", prog]);
    assert_eq!(refused.status.code(), Some(2));
    for flag in [&["-Z"][..], &["-x", "zdefs"][..]] {
        let mut args = vec!["-q"];
        args.extend_from_slice(flag);
        args.extend_from_slice(&["-n", prog]);
        let out = probe(dir.path(), &args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{flag:?}: {}",
            text(&out.stderr)
        );
        assert_eq!(text(&out.stdout), "ran\n\n", "{flag:?}");
    }
}

#[test]
fn version_names_the_d_language_and_sightline() {
    let dir = tempfile::tempdir().unwrap();
    let out = probe(dir.path(), &["-V"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        text(&out.stdout),
        format!(
            "sightline: D language as DTrace 1.13 (Sightline {})\n",
            env!("CARGO_PKG_VERSION")
        )
    );
}

#[test]
fn help_lists_every_option_the_analysis_knows() {
    let dir = tempfile::tempdir().unwrap();
    let out = probe(dir.path(), &["--help"]);
    let help = text(&out.stdout);
    for opt in [
        "aggpack",
        "aggrate",
        "aggsize",
        "aggsortkey",
        "aggsortkeypos",
        "aggsortpos",
        "aggsortrev",
        "agghist",
        "aggzoom",
        "bufpolicy",
        "bufsize",
        "cleanrate",
        "defaultargs",
        "destructive",
        "dynvarsize",
        "flowindent",
        "nspec",
        "quiet",
        "rawbytes",
        "specsize",
        "stackframes",
        "strsize",
        "switchrate",
        "ustackframes",
        "zdefs",
    ] {
        assert!(help.contains(opt), "--help does not list -x {opt}");
    }
}

/// Issue 22, "control never drops": under a drop storm (a 16 KiB ring buffer, five 4 KiB records
/// per tick, a consumer held up by a full stdout pipe) the ERROR records of most faults are
/// lost, yet every fault is reported: the errors printed one by one plus the per-CPU "N errors
/// on CPU k (their ERROR records were dropped)" lines equal the faulting firings (exactly 300,
/// counted by the program itself), and `exit()` and END still work: the `exit()` runs once, and
/// its record usually finds the ring full (it used to be lost then, and the run never ended).
#[test]
fn errors_reach_the_consumer_under_a_drop_storm() {
    use std::io::Read;
    use std::process::Stdio;
    if !test_support::privileged("loads BPF programs") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let flood = "tick-1ms { printf(\"%4000s\\n\", execname); }\n".repeat(5);
    let script = format!(
        "#pragma D option bufsize=16k\n#pragma D option strsize=4056\n{flood}\
         tick-1ms /n < 300/ {{ n++; trace(*(int *)0); }}\n\
         tick-1ms /n >= 300 && !done/ {{ done = 1; exit(0); }}\n\
         END {{ printf(\"end n=%d\\n\", n); }}\n"
    );
    std::fs::write(dir.path().join("storm.d"), script).unwrap();
    let mut child = crate::sightline()
        .args(["probe", "-q", "-s", "storm.d"])
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run sightline");
    let mut err_pipe = child.stderr.take().unwrap();
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        err_pipe.read_to_string(&mut s).unwrap();
        s
    });
    // Hold the consumer up: nothing reads its stdout for a while, so it blocks writing and the
    // ring buffer stays full while the faults happen.
    std::thread::sleep(std::time::Duration::from_secs(2));
    let out = child.wait_with_output().unwrap();
    let err = err_reader.join().unwrap();
    let so = text(&out.stdout);
    assert!(out.status.success(), "stderr: {err}");
    assert!(
        so.contains("end n=300\n"),
        "END's output: {}",
        &so[so.len().saturating_sub(200)..]
    );
    let printed = err.matches("error on enabled probe ID").count() as u64;
    let lost: u64 = err
        .lines()
        .filter(|l| l.contains("(their ERROR records were dropped)"))
        .map(|l| {
            l.trim_start_matches("sightline: ")
                .split_whitespace()
                .next()
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or_else(|| panic!("count in {l}"))
        })
        .sum();
    assert_eq!(printed + lost, 300, "printed {printed}, lost {lost}\n{err}");
    assert!(lost > 0, "the storm dropped ERROR records: {err}");
    assert!(err.contains(" drops on CPU "), "{err}");
}

/// The kernel's lockdown mode (`none`, `integrity`, `confidentiality`): the bracketed word of
/// `/sys/kernel/security/lockdown`, read through a private securityfs mount when that file is
/// absent; `None` when it cannot be read.
fn lockdown_mode() -> Option<String> {
    let parse = |s: &str| {
        let start = s.find('[')? + 1;
        let end = start + s[start..].find(']')?;
        Some(s[start..end].to_string())
    };
    if let Ok(s) = std::fs::read_to_string("/sys/kernel/security/lockdown") {
        return parse(&s);
    }
    let dir = tempfile::tempdir().ok()?;
    let d = dir.path().to_str()?;
    let mounted = std::process::Command::new("mount")
        .args(["-t", "securityfs", "none", d])
        .status()
        .ok()?
        .success();
    if !mounted {
        return None;
    }
    let s = std::fs::read_to_string(dir.path().join("lockdown")).ok();
    let _ = std::process::Command::new("umount").arg(d).status();
    parse(&s?)
}

/// `copyoutstr()` and `copyout()` with -w: where kernel lockdown withholds
/// `bpf_probe_write_user` (this machine: `integrity`) the run is an error naming lockdown and
/// the mode, and the target never runs; without lockdown the string reaches the target's
/// buffer (`echo hello`'s write prints `HIllo`: two bytes, no NUL, as `maxlen` is 2).
#[test]
fn copyout_writes_user_memory_or_names_lockdown() {
    if !test_support::privileged("loading copyout() programs") {
        return;
    }
    let Some(mode) = lockdown_mode() else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "cannot read the kernel's lockdown mode"
        );
        eprintln!("skipped: cannot read the kernel's lockdown mode");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for prog in [
        "syscall::write:entry /pid == $target/ { copyoutstr(\"HI\", arg1, 2); }",
        "syscall::write:entry /pid == $target/ { this->b = copyin(arg1, 2); copyout(this->b, arg1 + 3, 2); }",
    ] {
        let out = probe(
            dir.path(),
            &["-q", "-w", "-c", "/bin/echo hello", "-n", prog],
        );
        let (so, se) = (text(&out.stdout), text(&out.stderr));
        if mode == "none" {
            assert_eq!(out.status.code(), Some(0), "{prog}: {se}");
            let want = if prog.contains("copyoutstr") {
                "HIllo\n"
            } else {
                "helhe\n"
            };
            assert!(so.starts_with(want), "{prog}: stdout {so:?}");
        } else {
            assert_eq!(out.status.code(), Some(2), "{prog}: {se}");
            assert!(
                se.contains(
                    "need the kernel's bpf_probe_write_user helper, which this kernel refuses"
                ) && se.contains(&format!("kernel lockdown is `{mode}`")),
                "{prog}: {se}"
            );
            assert!(!so.contains("hello"), "the target ran: {so:?}");
        }
    }
}
