//! `sightline ui` and the UI of `sightline collect --ui`, served by `causal-ui` (`docs/ui-api.md`).

use std::io::Write as _;
use std::net::SocketAddr;
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use causal_collector::StoreSpec;

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

/// Binds the UI on `addr` for the store `store` and prints its URL; the returned future serves it.
async fn start(
    addr: SocketAddr,
    store: &StoreSpec,
    cors_origin: Option<String>,
) -> anyhow::Result<impl Future<Output = Result<(), causal_ui::UiError>> + use<>> {
    let listener = causal_ui::bind(addr).await?;
    let bound = listener
        .local_addr()
        .context("reading the UI's bound address")?;
    let router = causal_ui::router(causal_ui::UiOptions {
        store: store.clone(),
        cors_origin,
    });
    let mut out = std::io::stdout().lock();
    // A ClickHouse URL is shown without its credentials.
    writeln!(out, "sightline ui: http://{bound}/ (store {store})")?;
    out.flush()?;
    Ok(causal_ui::serve(listener, router, std::future::pending()))
}

/// Starts the UI of `sightline collect --ui` on `addr` as a task of the current runtime; the
/// caller aborts it when the collector stops.
pub async fn spawn_for_collector(
    addr: SocketAddr,
    store: &StoreSpec,
) -> anyhow::Result<tokio::task::JoinHandle<Result<(), causal_ui::UiError>>> {
    Ok(tokio::spawn(start(addr, store, None).await?))
}

/// Runs `sightline ui`: serves until SIGINT or SIGTERM.
pub fn run(args: UiArgs) -> anyhow::Result<ExitCode> {
    let store = args.db.spec()?;
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
    rt.block_on(async move {
        let serve = start(args.listen, &store, args.cors_origin).await?;
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
