//! `sightline probe`: options in DTrace's style (dtrace(1M)), dispatched to `probe-runtime`.

use std::process::ExitCode;

/// Options of `sightline probe`.
#[derive(Debug, clap::Args)]
pub struct ProbeArgs {
    /// A probe clause, as in `dtrace -n`.
    #[arg(short = 'n')]
    pub clauses: Vec<String>,
}

/// Runs `sightline probe`.
pub fn run(_args: ProbeArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("probe: not built yet")
}
