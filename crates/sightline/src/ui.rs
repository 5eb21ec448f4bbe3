//! `sightline ui` and the UI of `sightline collect --ui`, served by `causal-ui` (`docs/ui-api.md`).

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use causal_collector::StoreSpec;
use causal_collector::listen::{ListenConfig, TlsFiles};

use crate::causal::DbArg;

/// Jaeger's UI port, so habits carry over.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:16686";

/// Options of `sightline ui`.
#[derive(Debug, clap::Args)]
pub struct UiArgs {
    /// Address and port to serve on. Loopback by default: the UI and its API have no
    /// authentication.
    #[arg(long, value_name = "ADDR:PORT", default_value = DEFAULT_LISTEN)]
    pub listen: SocketAddr,
    /// Send `Access-Control-Allow-Origin: ORIGIN` with every answer (CORS is off by default).
    #[arg(long, value_name = "ORIGIN")]
    pub cors_origin: Option<String>,
    /// TLS certificate chain (PEM, leaf first): serve the UI and its API over HTTPS only;
    /// needs --tls-key. Meant for a --listen address other than loopback.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// TLS private key (PEM: PKCS#8, PKCS#1 or SEC1) of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Show a replay recording (`sightline record -o DIR`) instead of a store: its graph (as
    /// `show --recording` draws it: threads as lanes, system calls as events, rendezvous points
    /// as edges; docs/recording-graph.md) is put in a temporary store, removed at exit, and the
    /// URL of its task view is printed.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["db", "store"])]
    pub recording: Option<PathBuf>,
    /// Another administrative domain's store, joined into a task view where the task's view
    /// ends at an edge into that domain (as `show --peer`): DEST is its collector as the reports
    /// name it (`EdgeDestination`), STORE a SQLite file or a `clickhouse://` URL. Repeatable.
    #[arg(long, value_name = "DEST=STORE", value_parser = crate::causal::parse_peer)]
    pub peer: Vec<(String, String)>,
    #[command(flatten)]
    pub db: DbArg,
}

/// The task id a recording is shown under: FNV-1a 64 of its directory as given, 16 hex digits
/// (a store task id, stable for one directory).
fn recording_task_id(dir: &std::path::Path) -> String {
    use ::replay::syscalls::{HASH_SEED, hash};
    format!(
        "{:016X}",
        hash(HASH_SEED, dir.as_os_str().as_encoded_bytes())
    )
}

/// A temporary SQLite store holding the graph of the recording `dir`, and its task id.
fn recording_store(dir: &std::path::Path) -> anyhow::Result<(tempfile::TempDir, PathBuf, String)> {
    let rec = ::replay::format::Recording::open(dir)
        .with_context(|| format!("cannot open the recording {}", dir.display()))?;
    let g = crate::recording_graph::recording_graph(&rec, &dir.display().to_string());
    let task = recording_task_id(dir);
    let mut events = g.events;
    for e in &mut events {
        e.task = task.clone();
    }
    let tmp = tempfile::Builder::new()
        .prefix("sightline-ui-recording")
        .tempdir()
        .context("creating a temporary store for the recording")?;
    let db = tmp.path().join("recording.db");
    let mut store = causal_collector::Store::open(&db)?;
    store.insert(&events, 0)?;
    Ok((tmp, db, task))
}

/// Binds the UI on `addr` for the store `store` and prints its URL (`https://` with TLS in
/// `listen`); the returned future serves it with the limits and TLS of `listen`, returned with
/// that URL.
async fn start(
    addr: SocketAddr,
    store: &StoreSpec,
    peers: Vec<(String, StoreSpec)>,
    cors_origin: Option<String>,
    listen: ListenConfig,
) -> anyhow::Result<(
    impl Future<Output = Result<(), causal_ui::UiError>> + use<>,
    String,
)> {
    let listener = causal_ui::bind(addr).await?;
    let bound = listener
        .local_addr()
        .context("reading the UI's bound address")?;
    let router = causal_ui::router(causal_ui::UiOptions {
        store: store.clone(),
        cors_origin,
        peers,
    });
    let scheme = if listen.tls.is_some() {
        "https"
    } else {
        "http"
    };
    let mut out = std::io::stdout().lock();
    // A ClickHouse URL is shown without its credentials.
    let base = format!("{scheme}://{bound}/");
    writeln!(out, "sightline ui: {base} (store {store})")?;
    out.flush()?;
    Ok((
        causal_ui::serve(listener, router, listen, std::future::pending()),
        base,
    ))
}

/// Starts the UI of `sightline collect --ui` on `addr` as a task of the current runtime, with
/// the collector's TLS and timeouts (`listen`; its own connection slots); the caller aborts it
/// when the collector stops.
pub async fn spawn_for_collector(
    addr: SocketAddr,
    store: &StoreSpec,
    peers: Vec<(String, StoreSpec)>,
    listen: ListenConfig,
) -> anyhow::Result<tokio::task::JoinHandle<Result<(), causal_ui::UiError>>> {
    Ok(tokio::spawn(
        start(addr, store, peers, None, listen).await?.0,
    ))
}

/// The `--peer DEST=STORE` values with their stores parsed.
///
/// # Errors
/// A STORE that is not a store URL or path (`StoreSpec::parse`).
pub(crate) fn peer_specs(peers: &[(String, String)]) -> anyhow::Result<Vec<(String, StoreSpec)>> {
    peers
        .iter()
        .map(|(dest, store)| Ok((dest.clone(), StoreSpec::parse(store)?)))
        .collect()
}

/// Runs `sightline ui`: serves until SIGINT or SIGTERM.
pub fn run(args: UiArgs) -> anyhow::Result<ExitCode> {
    // Kept until the UI stops: the temporary store of `--recording`, removed when dropped.
    let recording = args.recording.as_deref().map(recording_store).transpose()?;
    let store = match &recording {
        Some((_, db, _)) => StoreSpec::Sqlite(db.clone()),
        None => args.db.spec()?,
    };
    let recording_task = recording.as_ref().map(|(_, _, task)| task.clone());
    if let StoreSpec::Sqlite(db) = &store
        && !db.exists()
    {
        bail!(
            "no store at {}: `sightline collect` or `sightline import` creates one (or give --db / $SIGHTLINE_DB)",
            db.display()
        );
    }
    if let StoreSpec::ClickHouse(u) = &store {
        // Unreachable or too new: said now, not on the first request.
        causal_collector::clickhouse::ClickHouseStore::open(u)?;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the Tokio runtime")?;
    let mut listen = ListenConfig::default();
    if let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) {
        listen.tls = Some(TlsFiles::load(cert, key)?);
    }
    if !args.listen.ip().is_loopback() && listen.tls.is_none() {
        eprintln!(
            "sightline ui: warning: serving on {} without TLS (--tls-cert, --tls-key); the UI and its API have no authentication",
            args.listen
        );
    }
    let peers = peer_specs(&args.peer)?;
    rt.block_on(async move {
        let (serve, base) = start(args.listen, &store, peers, args.cors_origin, listen).await?;
        if let (Some(task), Some(dir)) = (&recording_task, &args.recording) {
            println!("recording {}: {base}trace/{task}", dir.display());
        }
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .context("installing the SIGTERM handler")?;
        tokio::select! {
            r = serve => r?,
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        Ok(ExitCode::SUCCESS)
    })
}
