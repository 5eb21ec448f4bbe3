//! `sightline`: the single binary. It parses the command line and dispatches to the capability
//! crates; each subcommand's options and glue live in their own module (`probe`, `replay`, `causal`).

mod causal;
mod probe;
mod replay;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Make the execution of Linux programs and distributed systems visible.
#[derive(Debug, Parser)]
#[command(name = "sightline", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// DTrace for Linux: compile a D script to eBPF, attach it and print what it reports.
    Probe(probe::ProbeArgs),
    /// Record an unmodified program (and its children) for deterministic replay. Exit status: the
    /// program's, or 2 when the recording is incomplete (threads are not yet supported).
    Record(replay::RecordArgs),
    /// Replay a recording deterministically.
    Replay(replay::ReplayArgs),
    /// Run the causal-tracing collector (X-Trace TCP/UDP, OTLP/HTTP) into the embedded store.
    Collect(causal::CollectArgs),
    /// Import X-Trace JSON or OTLP JSON files into the store.
    Import(causal::ImportArgs),
    /// List the tasks in the store.
    Tasks(causal::TasksArgs),
    /// Show one task as a causal graph (text, DOT or JSON), optionally with its critical path.
    Show(causal::ShowArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Probe(args) => probe::run(args),
        Command::Record(args) => replay::record(args),
        Command::Replay(args) => replay::replay(args),
        Command::Collect(args) => causal::collect(args),
        Command::Import(args) => causal::import(args),
        Command::Tasks(args) => causal::tasks(args),
        Command::Show(args) => causal::show(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            // A closed stdout (`sightline ... | head`) is not an error (as ripgrep does).
            if err
                .chain()
                .filter_map(|e| e.downcast_ref::<std::io::Error>())
                .any(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
            {
                return ExitCode::SUCCESS;
            }
            eprintln!("sightline: {err:#}");
            ExitCode::from(2)
        }
    }
}
