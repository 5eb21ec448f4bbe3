//! [`probe_user::held::HeldCommand`]: a held command never runs until released; dropping it held
//! kills and reaps it (no zombie, nothing left stopped).

use probe_user::held::{HeldCommand, HeldError};

/// The state letter of `/proc/PID/stat` (`T`/`t` stopped, `Z` zombie), `None` once reaped.
fn state(pid: u32) -> Option<char> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    s.rsplit_once(')').and_then(|(_, rest)| rest.trim_start().chars().next())
}

#[test]
fn dropped_while_held_is_killed_and_reaped() {
    if !test_support::privileged("ptrace-holding a child") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ran.txt");
    let argv = vec!["touch".to_string(), file.display().to_string()];
    let held = HeldCommand::spawn(std::path::Path::new("/usr/bin/touch"), &argv).unwrap();
    let pid = held.pid;
    assert!(held.is_held());
    assert_eq!(state(pid), Some('t'), "held in a ptrace stop");
    drop(held);
    assert_eq!(state(pid), None, "killed and reaped");
    // SAFETY: waitpid with WNOHANG on a pid; status is a valid int.
    let r = unsafe { libc::waitpid(pid as libc::pid_t, &mut 0, libc::WNOHANG) };
    assert_eq!(r, -1, "no child left to reap");
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(!file.exists(), "the held command ran");
}

#[test]
fn released_runs_and_reports_its_status() {
    if !test_support::privileged("ptrace-holding a child") {
        return;
    }
    let argv = vec!["sh".to_string(), "-c".to_string(), "exit 7".to_string()];
    let mut held = HeldCommand::spawn(std::path::Path::new("/bin/sh"), &argv).unwrap();
    held.release().unwrap();
    assert!(!held.is_held());
    let mut status = None;
    for _ in 0..500 {
        status = held.try_wait().unwrap();
        if status.is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(status, Some(7));
}

#[test]
fn cannot_execute_is_reported_before_fork() {
    let e = HeldCommand::spawn(std::path::Path::new("/nonexistent/cmd"), &["cmd".to_string()]).unwrap_err();
    match e {
        HeldError::CannotExecute { source, .. } => assert_eq!(source.raw_os_error(), Some(libc::ENOENT)),
        e => panic!("unexpected {e}"),
    }
    let e = HeldCommand::spawn(std::path::Path::new("/etc/passwd"), &["passwd".to_string()]).unwrap_err();
    match e {
        HeldError::CannotExecute { source, .. } => assert_eq!(source.raw_os_error(), Some(libc::EACCES)),
        e => panic!("unexpected {e}"),
    }
}
