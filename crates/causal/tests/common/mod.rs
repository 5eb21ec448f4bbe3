//! Running the `causal-test-child` binary (`crates/causal/src/bin/causal-test-child.rs`): the child
//! processes of the tests that need a fresh reporter or a second process.
#![allow(dead_code, reason = "each test binary uses a part of this module")]

use std::path::PathBuf;
use std::process::Command;

/// The `causal-test-child` binary (`crates/causal/src/bin/causal-test-child.rs`), which Cargo
/// builds for every integration test of this crate and names in `CARGO_BIN_EXE_causal-test-child`.
pub fn test_child() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_causal-test-child"))
}

/// The command that runs `scenario` of `test_child`, with the reporter's sink off unless the
/// caller sets `SIGHTLINE_CAUSAL_SINK`.
pub fn child_command(scenario: &str) -> Command {
    let mut cmd = Command::new(test_child());
    cmd.arg(scenario).env("SIGHTLINE_CAUSAL_SINK", "off");
    cmd
}

/// Runs `cmd` to its end and returns its stdout.
///
/// # Panics
/// When it cannot run or exits unsuccessfully (the message holds its stdout and stderr).
pub fn stdout_of(mut cmd: Command) -> String {
    let out = cmd.output().expect("run test_child");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{cmd:?}: {}\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Runs `scenario` of `test_child` with `env` set and returns its stdout (see [`stdout_of`]).
pub fn run_child(scenario: &str, env: &[(&str, &str)]) -> String {
    let mut cmd = child_command(scenario);
    cmd.envs(env.iter().copied());
    stdout_of(cmd)
}

/// The rest of the first stdout line that contains `key`, trimmed.
///
/// # Panics
/// When no line contains it.
pub fn line_value<'a>(stdout: &'a str, key: &str) -> &'a str {
    stdout
        .lines()
        .find_map(|l| l.split_once(key).map(|(_, v)| v.trim()))
        .unwrap_or_else(|| panic!("no {key:?} in {stdout}"))
}
