//! `sightline record` and `sightline replay`, dispatched to the `replay` crate.

use std::process::ExitCode;

/// Options of `sightline record`.
#[derive(Debug, clap::Args)]
pub struct RecordArgs {
    /// The command to record and its arguments.
    #[arg(trailing_var_arg = true, required = true)]
    pub command: Vec<String>,
}

/// Options of `sightline replay`.
#[derive(Debug, clap::Args)]
pub struct ReplayArgs {
    /// The recording directory.
    pub dir: std::path::PathBuf,
}

/// Runs `sightline record`.
pub fn record(_args: RecordArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("record: not built yet")
}

/// Runs `sightline replay`.
pub fn replay(_args: ReplayArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("replay: not built yet")
}
