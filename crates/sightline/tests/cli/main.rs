//! The tests of the `sightline` binary, all in one test binary (ripgrep's layout): Cargo builds the
//! real binary once for it (`CARGO_BIN_EXE_sightline`), and no crate below runs a nested cargo.
//!
//! One module per area: [`probe`] (`probe -c` held commands), [`listing`] (`probe -l`),
//! [`probe_user`] (pid and USDT probes of real programs), [`causal`] (`import`, `collect`, `tasks`,
//! `show`), [`recording_graph`] (`show --recording`), [`causal_views`] (`show` and `import` on hand-made traces with known answers), [`ui`]
//! (`ui`, `collect --ui`). Two harnesses stand apart: the data-driven probe cases
//! (`tests/probe_cases.rs`, their own harness) and `record`/`replay` (`tests/replay.rs` and
//! `tests/replay_threads.rs`: their in-process replays reap any child, so each needs a process
//! without other tests' children). Tests that need only a library stay in
//! that library's crate.

mod causal;
mod causal_views;
mod listing;
mod probe;
mod probe_user;
mod recording_graph;
mod ui;

use std::path::Path;
use std::process::Command;

/// The `sightline` binary Cargo built for these tests.
pub fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_sightline"))
}

/// A `sightline` command (no arguments yet).
pub fn sightline() -> Command {
    Command::new(bin())
}
