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
