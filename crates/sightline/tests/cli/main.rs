//! The tests of the `sightline` binary, all in one test binary (ripgrep's layout): Cargo builds the
//! real binary once for it (`CARGO_BIN_EXE_sightline`), and no crate below runs a nested cargo.
//!
//! One module per area: [`probe`] (`probe -c` held commands), [`listing`] (`probe -l`),
//! [`probe_user`] (pid and USDT probes of real programs), [`causal`] (`import`, `collect`, `tasks`,
//! `show`), [`recording_graph`] (`show --recording`), [`causal_views`] (`show` and `import` on hand-made traces with known answers), [`ui`]
//! (`ui`, `collect --ui`); the helpers they share (`run`, `Collecting`, `sigterm`) are here. Two harnesses stand apart: the data-driven probe cases
//! (`tests/probe_cases.rs`, their own harness) and `record`/`replay` (`tests/replay.rs` and
//! `tests/replay_threads.rs`: their in-process replays reap any child, so each needs a process
//! without other tests' children). Tests that need only a library stay in
//! that library's crate.

mod anon;
mod causal;
mod causal_views;
mod clickhouse;
mod cost_views;
mod listing;
mod probe;
mod probe_user;
mod recording_graph;
mod ui;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};

/// The `sightline` binary Cargo built for these tests.
pub fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_sightline"))
}

/// The `usdt-typed` example of sightline-usdt (typed USDT arguments, crates/usdt/examples), which
/// Cargo builds beside this binary when the workspace's binaries are built (`cargo test
/// --workspace`, or `cargo build -p sightline-usdt --bins`); `None`, after saying so, when it
/// has not been, since no crate here runs a nested cargo.
pub fn usdt_typed() -> Option<std::path::PathBuf> {
    let bin = bin().with_file_name("usdt-typed");
    test_support::require_file(
        &bin,
        "the usdt-typed example (cargo build -p sightline-usdt --bins)",
    )
    .then_some(bin)
}

/// A `sightline` command (no arguments yet).
pub fn sightline() -> Command {
    Command::new(bin())
}

/// `sightline ARGS --db DB`, which must succeed: its stdout.
pub fn run(args: &[&str], db: &Path) -> String {
    let out = sightline().args(args).arg("--db").arg(db).output().unwrap();
    assert!(
        out.status.success(),
        "sightline {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `collect` with every listener on an ephemeral loopback port.
pub const COLLECT_ANY_PORTS: &[&str] = &[
    "collect",
    "--xtrace-port",
    "0",
    "--otlp-port",
    "0",
    "--otlp-grpc-port",
    "0",
    "--zipkin-port",
    "0",
];

/// `collect` with X-Trace TCP on an ephemeral loopback port and OTLP/HTTP the only other
/// listener (ephemeral too); the store flag follows.
pub const COLLECT_OTLP_HTTP_ONLY: &[&str] = &[
    "collect",
    "--xtrace-port",
    "0",
    "--otlp-port",
    "0",
    "--no-otlp-grpc",
    "--no-zipkin",
    "--no-udp",
];

/// A started `sightline collect`: the child, its first stdout line (the addresses it bound)
/// and the rest of its stdout.
#[derive(Debug)]
pub struct Collecting {
    pub child: Child,
    pub first: String,
    pub stdout: BufReader<ChildStdout>,
}

impl Collecting {
    /// Spawns `cmd` (a `sightline collect …`, or a wrapper of one) with stdout piped and waits for
    /// its first line.
    pub fn start(cmd: &mut Command) -> Collecting {
        let mut child = cmd.stdout(Stdio::piped()).spawn().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        stdout.read_line(&mut first).unwrap();
        Collecting {
            child,
            first,
            stdout,
        }
    }

    /// The word after `label` in the first line ("sightline collect: X-Trace TCP ADDR UDP ADDR;
    /// OTLP/HTTP URL; OTLP/gRPC ADDR; …"), without its `;`.
    pub fn after(&self, label: &str) -> String {
        let words: Vec<&str> = self.first.split_whitespace().collect();
        let i = words
            .iter()
            .position(|w| *w == label)
            .unwrap_or_else(|| panic!("no {label} in {}", self.first));
        words[i + 1].trim_end_matches(';').to_string()
    }

    /// The OTLP/HTTP listener's `ADDR:PORT`.
    pub fn otlp_http(&self) -> String {
        self.after("OTLP/HTTP")
            .trim_start_matches("http://")
            .trim_end_matches("/v1/traces")
            .to_string()
    }

    /// Sends SIGTERM; the exit status.
    pub fn sigterm(&mut self) -> std::process::ExitStatus {
        sigterm(&mut self.child)
    }
}

/// Sends SIGTERM to `child` and waits for it: its exit status.
pub fn sigterm(child: &mut Child) -> std::process::ExitStatus {
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    child.wait().unwrap()
}
