//! `sightline ui` and the UI of `sightline collect --ui`, served by `causal-ui` (`docs/ui-api.md`).

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context as _, bail};

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
    #[command(flatten)]
    pub db: DbArg,
}

/// Binds the UI on `addr` for the store `db` and prints its URL; the returned future serves it.
async fn start(
    addr: SocketAddr,
    db: &Path,
    cors_origin: Option<String>,
) -> anyhow::Result<impl Future<Output = Result<(), causal_ui::UiError>> + use<>> {
    let listener = causal_ui::bind(addr).await?;
    let bound = listener
        .local_addr()
        .context("reading the UI's bound address")?;
    let router = causal_ui::router(causal_ui::UiOptions {
        db: db.to_path_buf(),
        cors_origin,
    });
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "sightline ui: http://{bound}/ (store {})",
        db.display()
    )?;
    out.flush()?;
    Ok(causal_ui::serve(listener, router, std::future::pending()))
}

/// Starts the UI of `sightline collect --ui` on `addr` as a task of the current runtime; the
/// caller aborts it when the collector stops.
pub async fn spawn_for_collector(
    addr: SocketAddr,
    db: &Path,
) -> anyhow::Result<tokio::task::JoinHandle<Result<(), causal_ui::UiError>>> {
    Ok(tokio::spawn(start(addr, db, None).await?))
}

/// Runs `sightline ui`: serves until SIGINT or SIGTERM.
pub fn run(args: UiArgs) -> anyhow::Result<ExitCode> {
    if let causal_collector::StoreSpec::ClickHouse(u) = args.db.spec()? {
        anyhow::bail!(
            "sightline ui: --store {u}: the web UI reads SQLite stores only so far (`tasks` and `show` read ClickHouse)"
        );
    }
    let db = args.db.path();
    if !db.exists() {
        bail!(
            "no store at {}: `sightline collect` or `sightline import` creates one (or give --db / $SIGHTLINE_DB)",
            db.display()
        );
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the Tokio runtime")?;
    rt.block_on(async move {
        let serve = start(args.listen, &db, args.cors_origin).await?;
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
