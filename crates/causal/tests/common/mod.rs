//! Running the `test_child` example (`crates/causal/examples/test_child.rs`): the child
//! processes of the tests that need a fresh reporter or a second process.
#![allow(dead_code, reason = "each test binary uses a part of this module")]

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

/// The `test_child` example, built for this test run (`target/<profile>/examples/test_child`).
///
/// Built with `test_support::cargo_build` once per test process, so that a run that selects
/// test targets (`cargo test --test reporter`, which does not build examples) neither misses it
/// nor runs a stale one; after `cargo test` it is already fresh and the build is a no-op.
pub fn test_child() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            test_support::cargo_build(&["-p", "causal", "--example", "test_child"])
                .join("examples")
                .join("test_child")
        })
        .clone()
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
