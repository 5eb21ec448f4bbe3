//! `sightline collect|import|tasks|show`, dispatched to `causal-collector` and `causal-analysis`.

use std::process::ExitCode;

/// Options of `sightline collect`.
#[derive(Debug, clap::Args)]
pub struct CollectArgs {}

/// Options of `sightline import`.
#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// Files to import.
    pub files: Vec<std::path::PathBuf>,
}

/// Options of `sightline tasks`.
#[derive(Debug, clap::Args)]
pub struct TasksArgs {}

/// Options of `sightline show`.
#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    /// The task id.
    pub task: String,
}

/// Runs `sightline collect`.
pub fn collect(_args: CollectArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("collect: not built yet")
}

/// Runs `sightline import`.
pub fn import(_args: ImportArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("import: not built yet")
}

/// Runs `sightline tasks`.
pub fn tasks(_args: TasksArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("tasks: not built yet")
}

/// Runs `sightline show`.
pub fn show(_args: ShowArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("show: not built yet")
}
