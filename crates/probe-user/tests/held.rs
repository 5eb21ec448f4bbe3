//! [`probe_user::held::HeldCommand`]: a held command never runs until released; dropping it held
//! kills and reaps it (no zombie, nothing left stopped).

use probe_user::held::{HeldCommand, HeldError};

/// The state letter of `/proc/PID/stat` (`T`/`t` stopped, `Z` zombie), `None` once reaped.
fn state(pid: u32) -> Option<char> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    s.rsplit_once(')')
        .and_then(|(_, rest)| rest.trim_start().chars().next())
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
    let e = HeldCommand::spawn(
        std::path::Path::new("/nonexistent/cmd"),
        &["cmd".to_string()],
    )
    .unwrap_err();
    match e {
        HeldError::CannotExecute { source, .. } => {
            assert_eq!(source.raw_os_error(), Some(libc::ENOENT))
        }
        e => panic!("unexpected {e}"),
    }
    let e = HeldCommand::spawn(std::path::Path::new("/etc/passwd"), &["passwd".to_string()])
        .unwrap_err();
    match e {
        HeldError::CannotExecute { source, .. } => {
            assert_eq!(source.raw_os_error(), Some(libc::EACCES))
        }
        e => panic!("unexpected {e}"),
    }
}

/// Run in a child copy of this test binary (`HELD_EXITKILL_FILE` set): creates a held `touch` of
/// that file, prints its pid and waits to be killed.
fn exitkill_helper(file: &str) {
    let argv = vec!["touch".to_string(), file.to_string()];
    let held = HeldCommand::spawn(std::path::Path::new("/usr/bin/touch"), &argv).unwrap();
    // The harness may have printed "test NAME ... " on this line already.
    println!("HELD_PID {}", held.pid);
    std::mem::forget(held);
    loop {
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
}

#[test]
fn killed_tracer_takes_the_held_command_with_it() {
    if let Ok(file) = std::env::var("HELD_EXITKILL_FILE") {
        exitkill_helper(&file);
        return;
    }
    if !test_support::privileged("ptrace-holding a child") {
        return;
    }
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ran.txt");
    let mut helper = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "killed_tracer_takes_the_held_command_with_it",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("HELD_EXITKILL_FILE", &file)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(helper.stdout.take().unwrap()).lines();
    let pid: u32 = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|l| {
            l.split_once("HELD_PID ")
                .map(|(_, p)| p.trim().parse().unwrap())
        })
        .expect("the helper prints the held pid");
    assert_eq!(state(pid), Some('t'), "held in a ptrace stop");
    // The tracer dies without releasing it: PTRACE_O_EXITKILL kills the command.
    helper.kill().unwrap();
    helper.wait().unwrap();
    let mut gone = false;
    for _ in 0..200 {
        // Reparented and reaped by init (or a subreaper), or a zombie not yet reaped: not running.
        if matches!(state(pid), None | Some('Z')) {
            gone = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(
        gone,
        "the held command outlived its tracer: state {:?}",
        state(pid)
    );
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(!file.exists(), "the held command ran after its tracer died");
}

/// Regression (a CI run hung in two library tests): held commands created at the same time by
/// several threads each inherited the others' hand-off pipes and waited for each other forever.
/// Every one of them must be held, released and run to its exit status.
#[test]
fn commands_held_by_concurrent_threads_each_run() {
    if !test_support::privileged("ptrace-holding a child") {
        return;
    }
    const THREADS: usize = 4;
    const ROUNDS: usize = 25;
    let start = std::sync::Arc::new(std::sync::Barrier::new(THREADS));
    let (done, finished) = std::sync::mpsc::channel();
    for t in 0..THREADS {
        let (start, done) = (start.clone(), done.clone());
        std::thread::spawn(move || {
            for round in 0..ROUNDS {
                start.wait();
                let code = (t * ROUNDS + round) % 100;
                let argv = vec!["sh".into(), "-c".into(), format!("exit {code}")];
                let mut held = HeldCommand::spawn(std::path::Path::new("/bin/sh"), &argv).unwrap();
                held.release().unwrap();
                let status = loop {
                    if let Some(s) = held.try_wait().unwrap() {
                        break s;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(1));
                };
                done.send((code, status)).unwrap();
            }
        });
    }
    drop(done);
    for _ in 0..THREADS * ROUNDS {
        let (code, status) = finished
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("held commands created concurrently are stuck");
        assert_eq!(status, code as i32);
    }
}
