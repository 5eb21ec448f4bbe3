//! `sightline`: the single binary. It parses the command line and dispatches to the capability
//! crates; each subcommand's options and glue live in their own module (`probe`, `replay`, `causal`).

mod account;
mod anon;
mod causal;
mod probe;
mod progress;
mod recording_graph;
mod replay;
mod ui;

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
    /// program's, or 2 when the recording is incomplete (recording stopped early and the program
    /// ran on unrecorded: a write error, an internal error).
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
    /// Charge CPU, I/O, network, page faults and energy to the causal task and activity each
    /// thread works for (BPF, D programs; docs/causal-accounting.md) and report them per task.
    Account(account::AccountArgs),
    /// Sum the stored accounting reports by activity, host, process or task.
    Cost(account::CostArgs),
    /// Serve the web UI (search, timeline, DAG, compare) and its JSON and Jaeger APIs on the store.
    Ui(ui::UiArgs),
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
        Command::Account(args) => account::run(args),
        Command::Cost(args) => account::cost(args),
        Command::Ui(args) => ui::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            // A closed stdout (`sightline ... | head`) is not an error (as ripgrep does), whether
            // the write failed in our code or inside serde_json's writer (`--format json`).
            let pipe = std::io::ErrorKind::BrokenPipe;
            if err.chain().any(|e| {
                e.downcast_ref::<std::io::Error>()
                    .is_some_and(|e| e.kind() == pipe)
                    || e.downcast_ref::<serde_json::Error>()
                        .is_some_and(|e| e.io_error_kind() == Some(pipe))
            }) {
                return ExitCode::SUCCESS;
            }
            eprintln!("sightline: {}", render_error(&err));
            ExitCode::from(2)
        }
    }
}

/// The error and its causes, joined with ": " as anyhow's `{:#}` does, except that a cause whose text
/// the message so far already ends with is left out: many errors put their source in their own
/// message, and the chain would print it again ("…: Address already in use: Address already in use").
fn render_error(err: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if !out.is_empty() && out.ends_with(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::render_error;

    #[test]
    fn causes_already_in_the_message_are_not_repeated() {
        let io = std::io::Error::from_raw_os_error(98); // EADDRINUSE
        let inner = anyhow::Error::new(io)
            .context("binding X-Trace TCP on 0.0.0.0:7831: Address already in use (os error 98)");
        let e = inner.context("collector");
        assert_eq!(
            render_error(&e),
            "collector: binding X-Trace TCP on 0.0.0.0:7831: Address already in use (os error 98)"
        );
        // A cause that adds something is kept.
        let e = anyhow::anyhow!("no such file").context("reading a.d");
        assert_eq!(render_error(&e), "reading a.d: no such file");
    }
}
