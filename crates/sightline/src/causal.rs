//! `sightline collect|import|tasks|show`, dispatched to `causal-collector` and `causal-analysis`.
//!
//! The store is one SQLite file: `--db FILE`, else `$SIGHTLINE_DB`, else `./sightline.db`
//! (schema in `docs/collector-store.md`).

use std::io::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use causal_analysis::{
    Accounting, Comparison, CriticalPath, SkewAdjustment, TaskGraph, fmt_duration, render,
};
use causal_collector::{
    AnyStore, Collector, Config, Store, StoreSpec, TaskFilter, TaskSort, TraceStore,
};
use probe_format::civil::{civil_from_days, days_from_civil};

/// Where the store is.
#[derive(Debug, clap::Args)]
pub struct DbArg {
    /// The store (SQLite file). Default: $SIGHTLINE_DB, else ./sightline.db. `show` takes it
    /// several times to join a task whose parts live in several stores (administrative domains).
    #[arg(long, value_name = "FILE")]
    pub db: Vec<PathBuf>,
    /// The store as a URL: `clickhouse://[USER[:PASSWORD]@]HOST:8123/DATABASE` for a ClickHouse
    /// store (credentials also from $SIGHTLINE_CLICKHOUSE_USER / $SIGHTLINE_CLICKHOUSE_PASSWORD;
    /// `?duplicate_lookup=off` skips the per-batch lookup of stored events, for high-rate
    /// collectors), anything else a SQLite file as --db. Default: $SIGHTLINE_STORE, else --db.
    /// `show` takes it several times, as --db.
    #[arg(long, value_name = "URL", conflicts_with = "db")]
    pub store: Vec<String>,
}

impl DbArg {
    /// The store named by --store, else $SIGHTLINE_STORE (when --db is not given), else the
    /// SQLite file of [`DbArg::path`]. More than one store given is an error here: only `show`
    /// joins several ([`DbArg::specs`]).
    pub(crate) fn spec(&self) -> anyhow::Result<StoreSpec> {
        if self.db.len() > 1 || self.store.len() > 1 {
            bail!(
                "{} stores given: only `sightline show` joins a task from several stores (--db A --db B)",
                self.db.len().max(self.store.len())
            );
        }
        let url = self.store.first().cloned().or_else(|| {
            self.db
                .is_empty()
                .then(|| std::env::var("SIGHTLINE_STORE").ok())
                .flatten()
                .filter(|v| !v.is_empty())
        });
        Ok(match url {
            Some(u) => StoreSpec::parse(&u)?,
            None => StoreSpec::Sqlite(self.path()),
        })
    }

    /// Every store given (`--store` URLs, else `--db` files, in order), else the one of
    /// [`DbArg::spec`].
    pub(crate) fn specs(&self) -> anyhow::Result<Vec<StoreSpec>> {
        if self.store.len() > 1 {
            return self
                .store
                .iter()
                .map(|u| Ok::<_, anyhow::Error>(StoreSpec::parse(u)?))
                .collect();
        }
        if self.db.len() > 1 {
            return Ok(self.db.iter().cloned().map(StoreSpec::Sqlite).collect());
        }
        Ok(vec![self.spec()?])
    }

    pub(crate) fn path(&self) -> PathBuf {
        self.db
            .first()
            .cloned()
            .or_else(|| {
                std::env::var_os("SIGHTLINE_DB")
                    .filter(|v| !v.is_empty())
                    .map(PathBuf::from)
            })
            .unwrap_or_else(|| PathBuf::from("sightline.db"))
    }
}

/// Options of `sightline collect`.
#[derive(Debug, clap::Args)]
pub struct CollectArgs {
    /// Address to listen on for every protocol (loopback by default; 0.0.0.0 for all interfaces,
    /// then protect OTLP and Zipkin with --tls-cert/--tls-key and --bearer-token-file).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1")]
    pub listen: IpAddr,
    /// X-Trace report port, TCP and UDP (0: any free port).
    #[arg(long, value_name = "PORT", default_value_t = causal::wire::DEFAULT_PORT)]
    pub xtrace_port: u16,
    /// OTLP/HTTP port (0: any free port).
    #[arg(long, value_name = "PORT", default_value_t = 4318)]
    pub otlp_port: u16,
    /// Do not listen for X-Trace reports over UDP.
    #[arg(long)]
    pub no_udp: bool,
    /// Do not serve OTLP/HTTP.
    #[arg(long)]
    pub no_otlp: bool,
    /// Also serve the web UI (as `sightline ui`), on ADDR:PORT if given.
    #[arg(long, value_name = "ADDR:PORT", num_args = 0..=1, default_missing_value = crate::ui::DEFAULT_LISTEN)]
    pub ui: Option<SocketAddr>,
    /// The collector's peers: another administrative domain's store, joined into the UI's task
    /// views where a task's view ends at an edge into that domain (as `show --peer`; needs
    /// --ui). DEST is its collector as reports name it (`EdgeDestination`), STORE a SQLite file
    /// or a `clickhouse://` URL. Repeatable.
    #[arg(long, value_name = "DEST=STORE", value_parser = parse_peer, requires = "ui")]
    pub peer: Vec<(String, String)>,
    /// OTLP/gRPC port (the traces Export service, gzip accepted; 0: any free port).
    #[arg(long, value_name = "PORT", default_value_t = 4317)]
    pub otlp_grpc_port: u16,
    /// Do not serve OTLP/gRPC.
    #[arg(long)]
    pub no_otlp_grpc: bool,
    /// Zipkin v2 JSON port (`POST /api/v2/spans`; 0: any free port).
    #[arg(long, value_name = "PORT", default_value_t = 9411)]
    pub zipkin_port: u16,
    /// Do not serve Zipkin.
    #[arg(long)]
    pub no_zipkin: bool,
    /// Require `Authorization: Bearer TOKEN` on OTLP/HTTP, OTLP/gRPC and Zipkin requests, TOKEN
    /// being the first line of FILE; requests without it are refused (401, UNAUTHENTICATED) and
    /// counted. X-Trace TCP/UDP reports carry no credentials: keep them on loopback
    /// (--no-udp, or firewall the port) when listening elsewhere.
    #[arg(long, value_name = "FILE")]
    pub bearer_token_file: Option<PathBuf>,
    /// TLS certificate chain (PEM, leaf first) for the OTLP/HTTP, OTLP/gRPC and Zipkin listeners
    /// and the UI of --ui (X-Trace TCP with --xtrace-tls); needs --tls-key. Meant for a --listen address other than loopback.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// TLS private key (PEM: PKCS#8, PKCS#1 or SEC1) of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Serve the X-Trace TCP listener over TLS too, with --tls-cert (length-prefixed reports
    /// inside TLS, no ALPN). Off by default: the `causal` library's reporter sends plain TCP.
    #[arg(long, requires = "tls_cert")]
    pub xtrace_tls: bool,
    /// Most TCP connections open at once over all listeners (default: the descriptor limit less
    /// 128, at most 16384; the soft descriptor limit is first raised to the hard one).
    #[arg(long, value_name = "N")]
    pub max_connections: Option<usize>,
    /// Close a connection whose HTTP request header (or TLS handshake) is not complete within AGE
    /// (e.g. 10s, the default).
    #[arg(long, value_name = "AGE", value_parser = parse_age)]
    pub header_timeout: Option<std::time::Duration>,
    /// Close a connection that sends and reads nothing for AGE while no request of it is being
    /// handled (default 120s; X-Trace TCP connections are exempt).
    #[arg(long, value_name = "AGE", value_parser = parse_age)]
    pub idle_timeout: Option<std::time::Duration>,
    /// Delete tasks first seen longer ago than AGE (e.g. 7d, 12h, 30m), oldest first, a few
    /// hundred at a time between writes, so ingest never stops.
    #[arg(long, value_name = "AGE", value_parser = parse_age)]
    pub retention: Option<std::time::Duration>,
    /// Delete the oldest tasks while the store uses more than SIZE (e.g. 10G, 500M; K, M, G, T
    /// are powers of 1024), in the same steps as --retention.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub max_store_size: Option<u64>,
    #[command(flatten)]
    pub db: DbArg,
}

/// Options of `sightline import`.
#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// Files to import: X-Trace JSON exports, OTLP/JSON or OTLP protobuf trace requests.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    #[command(flatten)]
    pub db: DbArg,
}

/// Options of `sightline tasks`.
#[derive(Debug, clap::Args)]
pub struct TasksArgs {
    /// Only tasks first seen at or after TIME (unix seconds, `YYYY-MM-DD[THH:MM[:SS]]` UTC, or an
    /// age such as 30m, 2h, 7d).
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    /// Only tasks first seen before TIME (same forms as --since).
    #[arg(long, value_name = "TIME")]
    pub until: Option<String>,
    /// Only tasks with this X-Trace Tag value.
    #[arg(long)]
    pub tag: Option<String>,
    /// Only tasks whose title contains this text (ASCII case-insensitive).
    #[arg(long)]
    pub title: Option<String>,
    /// Only tasks with events from this service (X-Trace Agent, OTLP service.name; exact).
    #[arg(long, value_name = "NAME")]
    pub service: Option<String>,
    /// Only tasks with this operation: an OTLP span name or an X-Trace label (exact).
    #[arg(long, value_name = "NAME")]
    pub operation: Option<String>,
    /// Only tasks with an event whose field or attribute KEY has the text VALUE (repeatable: all
    /// must match).
    #[arg(long = "attr", value_name = "KEY=VALUE", value_parser = parse_attr)]
    pub attrs: Vec<(String, String)>,
    /// Only tasks lasting at least DURATION (e.g. 250ms, 1.5s, 2m; units ns, us, ms, s, m, h).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_ns)]
    pub min_duration: Option<i64>,
    /// Only tasks lasting at most DURATION.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_ns)]
    pub max_duration: Option<i64>,
    /// Only tasks with an error (OTLP status error).
    #[arg(long)]
    pub errors: bool,
    /// Order: `start` (oldest first; --limit keeps the most recent) or `duration` (longest
    /// first; --limit keeps the longest).
    #[arg(long, value_enum, default_value = "start")]
    pub sort: SortArg,
    /// At most N tasks (the most recent, or the longest with --sort duration).
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Print JSON (one array of task objects) instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Show times as stored: do not correct the clock skew of tasks spanning several hosts (by
    /// default their first-seen time and DURATION are corrected as `show` corrects them; the
    /// duration filters and --sort/--limit use the stored times).
    #[arg(long)]
    pub no_skew_adjust: bool,
    #[command(flatten)]
    pub db: DbArg,
}

/// `tasks --sort`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SortArg {
    /// By first-seen time.
    Start,
    /// By duration, longest first.
    Duration,
    /// By accounted CPU time (`sightline account` reports), largest first; --limit keeps the
    /// costliest (docs/causal-accounting.md).
    Cost,
}

/// `--retention AGE`: a whole number of seconds, minutes, hours or days (`30s`, `30m`, `12h`,
/// `7d`).
fn parse_age(s: &str) -> Result<std::time::Duration, String> {
    let t = s.trim();
    let (num, unit) = t.split_at(t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len()));
    let secs: u64 = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => {
            return Err(format!(
                "age {s:?}: expected a number and s, m, h or d (e.g. 7d)"
            ));
        }
    };
    let n: u64 = num
        .parse()
        .map_err(|_| format!("age {s:?}: expected a number and s, m, h or d (e.g. 7d)"))?;
    n.checked_mul(secs)
        .filter(|&v| v > 0)
        .map(std::time::Duration::from_secs)
        .ok_or_else(|| format!("age {s:?}: must be above zero and fit in 64 bits of seconds"))
}

/// `--max-store-size SIZE`: bytes, or a number with K, M, G or T (powers of 1024; a trailing
/// `B` or `iB` is accepted).
fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, unit) = t.split_at(t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len()));
    let shift = match unit.trim_end_matches("iB").trim_end_matches('B') {
        "" => 0,
        "K" | "k" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        _ => {
            return Err(format!(
                "size {s:?}: expected bytes or a number with K, M, G or T"
            ));
        }
    };
    let n: u64 = num
        .parse()
        .map_err(|_| format!("size {s:?}: expected bytes or a number with K, M, G or T"))?;
    n.checked_mul(1u64 << shift)
        .filter(|&v| v > 0)
        .ok_or_else(|| format!("size {s:?}: must be above zero and fit in 64 bits"))
}

/// `--peer DEST=STORE` (split at the first `=`: a collector URI has none, a store URL may).
pub(crate) fn parse_peer(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .filter(|(d, st)| !d.is_empty() && !st.is_empty())
        .map(|(d, st)| (d.to_string(), st.to_string()))
        .ok_or_else(|| format!("expected DEST=STORE (a collector URI = a store), got {s:?}"))
}

/// `--attr KEY=VALUE`.
fn parse_attr(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .filter(|(k, _)| !k.is_empty())
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| format!("expected KEY=VALUE, got {s:?}"))
}

/// A duration such as `250ms`, `1.5s`, `2m` or `100` (ns) as ns.
fn parse_duration_ns(s: &str) -> Result<i64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let scale: f64 = match unit.trim() {
        "" | "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "m" => 60e9,
        "h" => 3600e9,
        u => {
            return Err(format!(
                "duration {s:?}: unknown unit {u:?} (ns, us, ms, s, m, h)"
            ));
        }
    };
    let n: f64 = num
        .parse()
        .map_err(|_| format!("duration {s:?}: expected a number and a unit, e.g. 250ms"))?;
    let ns = n * scale;
    if !(0.0..9.2e18).contains(&ns) {
        return Err(format!("duration {s:?}: out of range"));
    }
    Ok(ns.round() as i64)
}

/// Output format of `sightline show`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ShowFormat {
    /// Indented text that shows forks and joins.
    Text,
    /// Graphviz DOT (`| dot -Tsvg > task.svg`).
    Dot,
    /// JSON: events, edges, problems (and the critical path).
    Json,
}

/// Options of `sightline show`.
#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    /// The task id, or a unique prefix of it (hex, either case). A task from an OTLP trace is
    /// named by its 32-digit trace id; its stored 40-digit TaskId is accepted too. Not with
    /// `--recording`.
    #[arg(required_unless_present = "recording", conflicts_with = "recording")]
    pub task: Option<String>,
    /// Show a replay recording (`sightline record -o DIR`) instead of a stored task: threads as
    /// lanes, system calls as events, rendezvous points, forks and thread switches as edges
    /// (times are recorded-event ordinals, 1 µs each; docs/recording-graph.md).
    #[arg(long, value_name = "DIR", conflicts_with = "compare")]
    pub recording: Option<std::path::PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: ShowFormat,
    /// List the critical path first (docs/critical-path.md), with its time per agent, host and
    /// process, and mark its events in the graph.
    #[arg(long)]
    pub critical_path: bool,
    /// Print each span's attributes under it (text format).
    #[arg(short, long)]
    pub verbose: bool,
    /// Print only the critical path (and the task's header), not the graph.
    #[arg(long)]
    pub critical_path_only: bool,
    /// Keep every host's timestamps as reported: do not correct the clock skew estimated from
    /// RPC pairs and edges between hosts.
    #[arg(long)]
    pub no_skew_adjust: bool,
    /// Add the resource accounting: events, thread time and reported counters (Cycles, Bytes, …)
    /// per process and per agent.
    #[arg(long)]
    pub resources: bool,
    /// Add the task's accounted cost (`sightline account` reports): CPU, I/O, network, energy
    /// per activity, host, process and thread, with each one's share (text format).
    #[arg(long)]
    pub cost: bool,
    /// Compare with another task (id or prefix): per agent events and critical-path time, and the
    /// event kinds whose counts differ. Prints the comparison instead of the graph.
    #[arg(long, value_name = "TASK")]
    pub compare: Option<String>,
    /// Another administrative domain's store, joined when the task's view ends at an edge into
    /// that domain: DEST is its collector as the reports name it (`EdgeDestination`, X-Trace's
    /// Destination option, e.g. `tcp://collector.a:7831`), STORE a SQLite file or a
    /// `clickhouse://` URL. Repeatable.
    #[arg(long, value_name = "DEST=STORE", value_parser = parse_peer, conflicts_with = "compare")]
    pub peer: Vec<(String, String)>,
    #[command(flatten)]
    pub db: DbArg,
}

fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

/// Runs `sightline collect`: serves until SIGINT or SIGTERM, then drains and commits.
pub fn collect(args: CollectArgs) -> anyhow::Result<ExitCode> {
    let spec = args.db.spec()?;
    let shown_store = spec.to_string();
    let ui_store = spec.clone();
    let ui_peers = crate::ui::peer_specs(&args.peer)?;
    let clickhouse = match spec {
        StoreSpec::ClickHouse(u) => {
            if args.max_store_size.is_some() {
                bail!(
                    "sightline collect: --max-store-size applies to SQLite stores; use --retention with ClickHouse"
                );
            }
            Some(u)
        }
        StoreSpec::Sqlite(_) => None,
    };
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        // Colour only for a terminal: a log file or pipe gets plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("SIGHTLINE_LOG")
                .unwrap_or_else(|_| "info".into()),
        )
        .try_init();
    let db = args.db.path();
    let bearer_token = match &args.bearer_token_file {
        None => None,
        Some(f) => {
            let text = std::fs::read_to_string(f)
                .with_context(|| format!("reading the bearer token file {}", f.display()))?;
            let token = text.lines().next().unwrap_or("").trim().to_string();
            if token.is_empty() {
                bail!("the bearer token file {} is empty", f.display());
            }
            Some(token)
        }
    };
    let xtrace = SocketAddr::new(args.listen, args.xtrace_port);
    causal_collector::listen::raise_descriptor_limit();
    let mut listen = causal_collector::listen::ListenConfig::default();
    if let Some(n) = args.max_connections {
        listen.max_connections = n;
    }
    if let Some(t) = args.header_timeout {
        listen.header_timeout = t;
    }
    if let Some(t) = args.idle_timeout {
        listen.idle_timeout = t;
    }
    if let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) {
        listen.tls = Some(causal_collector::listen::TlsFiles::load(cert, key)?);
    }
    if !args.listen.is_loopback() && listen.tls.is_none() {
        eprintln!(
            "sightline collect: warning: listening on {} without TLS: reports and any bearer token travel in clear (--tls-cert, --tls-key)",
            args.listen
        );
    }
    // The UI of --ui: the same TLS and timeouts as the report listeners, its own slots.
    let ui_listen = listen.clone();
    let config = Config {
        listen,
        xtrace_tcp: Some(xtrace),
        xtrace_tls: args.xtrace_tls,
        xtrace_udp: (!args.no_udp).then_some(xtrace),
        otlp_http: (!args.no_otlp).then(|| SocketAddr::new(args.listen, args.otlp_port)),
        otlp_grpc: (!args.no_otlp_grpc).then(|| SocketAddr::new(args.listen, args.otlp_grpc_port)),
        zipkin: (!args.no_zipkin).then(|| SocketAddr::new(args.listen, args.zipkin_port)),
        retention: args.retention,
        max_store_bytes: args.max_store_size,
        bearer_token,
        clickhouse,
        ..Config::loopback(&db)
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the Tokio runtime")?;
    rt.block_on(async move {
        let scheme = if config.listen.tls.is_some() { "https" } else { "http" };
        let collector = Collector::start(config).await?;
        let a = collector.addrs();
        let mut out = std::io::stdout().lock();
        let show = |s: Option<SocketAddr>| s.map(|s| s.to_string()).unwrap_or_else(|| "off".into());
        writeln!(
            out,
            "sightline collect: X-Trace TCP {} UDP {}; OTLP/HTTP {}; OTLP/gRPC {}; Zipkin {}; store {}",
            show(a.xtrace_tcp),
            show(a.xtrace_udp),
            a.otlp_http.map(|s| format!("{scheme}://{s}/v1/traces")).unwrap_or_else(|| "off".into()),
            show(a.otlp_grpc),
            a.zipkin.map(|s| format!("{scheme}://{s}/api/v2/spans")).unwrap_or_else(|| "off".into()),
            shown_store
        )?;
        out.flush()?;
        drop(out);
        let ui = match args.ui {
            Some(addr) => Some(
                crate::ui::spawn_for_collector(addr, &ui_store, ui_peers, ui_listen).await?,
            ),
            None => None,
        };
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .context("installing the SIGTERM handler")?;
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        if let Some(ui) = ui {
            ui.abort();
        }
        let s = collector.shutdown().await?;
        let mut repeated = String::new();
        if s.events_duplicate > 0 {
            repeated.push_str(&format!("; {} already stored (not stored again)", s.events_duplicate));
        }
        if s.events_conflicting > 0 {
            repeated.push_str(&format!(
                "; {} stored as another version of an event already stored with different content",
                s.events_conflicting
            ));
        }
        println!(
            "sightline collect: stopped; {} events stored in {} transactions{repeated}; X-Trace reports {} (malformed {}, UDP dropped {} with the store queue full, {} by the kernel); OTLP requests {} HTTP (bad {}) and {} gRPC, Zipkin requests {} (bad {}), spans {} (rejected {}); lost on write errors {}; refused without the bearer token {}; connections refused at the limit {} (accept errors {}, header timeouts {}, idle closed {}, TLS failed {}); over the decode budget {}; tasks deleted by retention {}; store writer CPU {:.3}s",
            s.events_stored,
            s.transactions,
            s.xtrace_reports,
            s.xtrace_malformed,
            s.udp_dropped_events,
            s.udp_kernel_dropped,
            s.otlp_requests,
            s.otlp_bad_requests,
            s.otlp_grpc_requests,
            s.zipkin_requests,
            s.zipkin_bad_requests,
            s.otlp_spans,
            s.otlp_rejected_spans,
            s.events_lost,
            s.unauthenticated_requests,
            s.connections_refused,
            s.accept_errors,
            s.header_timeouts,
            s.idle_closed,
            s.tls_failed,
            s.decode_budget_refused,
            s.retention_deleted_tasks,
            s.writer_cpu_ns as f64 / 1e9
        );
        Ok(if s.events_lost > 0 { ExitCode::from(1) } else { ExitCode::SUCCESS })
    })
}

/// Runs `sightline import`.
pub fn import(args: ImportArgs) -> anyhow::Result<ExitCode> {
    let spec = args.db.spec()?;
    let mut failed = 0;
    // Unreadable files fail before the store is opened, so a typo does not leave an empty store.
    let files: Vec<_> = args
        .files
        .iter()
        .filter(|f| match std::fs::File::open(f) {
            Ok(_) => true,
            Err(e) => {
                failed += 1;
                eprintln!("sightline import: {}: {e}", f.display());
                false
            }
        })
        .collect();
    if files.is_empty() {
        return Ok(ExitCode::from(1));
    }
    let mut store = AnyStore::open(&spec)?;
    for f in files {
        match causal_collector::import::import_file(&mut store, f, now_ns()) {
            Ok(s) => {
                print!(
                    "{}: {} events in {} tasks ({:?})",
                    f.display(),
                    s.events,
                    s.tasks,
                    s.format
                );
                if s.duplicates > 0 {
                    print!("; {} already stored (not stored again)", s.duplicates);
                }
                if s.conflicts > 0 {
                    print!(
                        "; {} stored as another version of an event already stored with different content",
                        s.conflicts
                    );
                }
                if s.skipped > 0 {
                    print!(
                        "; {} skipped, first: {}",
                        s.skipped,
                        s.first_problem.unwrap_or_default()
                    );
                }
                println!();
            }
            Err(e) => {
                failed += 1;
                // The cause is the error's source (e.g. the I/O or JSON error): print the chain.
                eprintln!("sightline import: {:#}", anyhow::Error::new(e));
            }
        }
    }
    Ok(if failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// ns since the epoch → `YYYY-MM-DD HH:MM:SS.mmm` UTC.
fn fmt_time(ns: i64) -> String {
    let secs = ns.div_euclid(1_000_000_000);
    let ms = ns.rem_euclid(1_000_000_000) / 1_000_000;
    let (y, mo, d) = civil_from_days(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{mo:02}-{d:02} {:02}:{:02}:{:02}.{ms:03}",
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

/// Parses a --since/--until TIME into ns since the epoch. Times outside what i64 ns can hold
/// (years before 1678 or after 2262, ages over 292 years) are an error, not an overflow.
fn parse_time(s: &str, now_ns: i64) -> anyhow::Result<i64> {
    let s = s.trim();
    let range = || {
        anyhow::anyhow!(
            "time {s:?}: out of range (ns since 1970 must fit in 64 bits: years 1678 to 2262)"
        )
    };
    let unit = |c: char| match c {
        's' => Some(1i64),
        'm' => Some(60),
        'h' => Some(3600),
        'd' => Some(86_400),
        _ => None,
    };
    if let Some(last) = s.chars().last()
        && let Some(mult) = unit(last)
        && let Ok(n) = s[..s.len() - 1].parse::<i64>()
    {
        return n
            .checked_mul(mult * 1_000_000_000)
            .and_then(|age| now_ns.checked_sub(age))
            .ok_or_else(range);
    }
    if let Ok(secs) = s.parse::<i64>() {
        return secs.checked_mul(1_000_000_000).ok_or_else(range);
    }
    let (date, time) = s
        .trim_end_matches('Z')
        .split_once(['T', ' '])
        .unwrap_or((s, ""));
    let mut dp = date.splitn(3, '-').map(str::parse::<u32>);
    let (Some(Ok(y)), Some(Ok(mo)), Some(Ok(d))) = (dp.next(), dp.next(), dp.next()) else {
        bail!(
            "time {s:?}: expected unix seconds, YYYY-MM-DD[THH:MM[:SS]] (UTC) or an age like 30m, 2h, 7d"
        );
    };
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) {
        bail!("time {s:?}: no such date");
    }
    let mut secs = days_from_civil(i64::from(y), mo, d) * 86_400;
    if !time.is_empty() {
        let mut tp = time.splitn(3, ':').map(|p| p.parse::<i64>());
        let h = tp.next().transpose().ok().flatten().unwrap_or(-1);
        let mi = tp.next().transpose().ok().flatten().unwrap_or(0);
        let se = tp.next().transpose().ok().flatten().unwrap_or(0);
        if !(0..24).contains(&h) || !(0..60).contains(&mi) || !(0..61).contains(&se) {
            bail!("time {s:?}: bad time of day");
        }
        secs += h * 3600 + mi * 60 + se;
    }
    secs.checked_mul(1_000_000_000).ok_or_else(range)
}

/// Opens the store for a reading command (`tasks`, `show`). A path that does not exist is an
/// error instead of a new empty store (a mistyped `--db` used to leave an empty file behind and
/// answer "no task matches").
pub(crate) fn open_existing(spec: &StoreSpec) -> anyhow::Result<AnyStore> {
    let db = match spec {
        StoreSpec::Sqlite(p) => p,
        // A ClickHouse store is made on first use; an empty one lists no task.
        StoreSpec::ClickHouse(_) => return Ok(AnyStore::open(spec)?),
    };
    if !db.exists() {
        bail!(
            "no store at {}: `sightline collect` or `sightline import` creates one (or give --db / $SIGHTLINE_DB)",
            db.display()
        );
    }
    Ok(AnyStore::Sqlite(Store::open(db)?))
}

/// Runs `sightline tasks`.
pub fn tasks(args: TasksArgs) -> anyhow::Result<ExitCode> {
    let now = now_ns();
    let filter = TaskFilter {
        task_id: None,
        since_ns: args
            .since
            .as_deref()
            .map(|s| parse_time(s, now))
            .transpose()?,
        until_ns: args
            .until
            .as_deref()
            .map(|s| parse_time(s, now))
            .transpose()?,
        tag: args.tag,
        title: args.title,
        service: args.service,
        operation: args.operation,
        attributes: args.attrs,
        min_duration_ns: args.min_duration,
        max_duration_ns: args.max_duration,
        errors: args.errors,
        sort: match args.sort {
            SortArg::Start | SortArg::Cost => TaskSort::Start,
            SortArg::Duration => TaskSort::Duration,
        },
        limit: args.limit.filter(|_| args.sort != SortArg::Cost),
    };
    let store = open_existing(&args.db.spec()?)?;
    let mut list = store.tasks(&filter)?;
    if args.sort == SortArg::Cost {
        let mut costed = Vec::with_capacity(list.len());
        for t in list {
            let cpu = crate::account::task_cpu_ns(&store.load_task(&t.task_id)?);
            costed.push((cpu, t));
        }
        // Costliest first (stable: ties keep the store's order).
        costed.sort_by_key(|(cpu, _)| std::cmp::Reverse(*cpu));
        list = costed.into_iter().map(|(_, t)| t).collect();
        if let Some(n) = args.limit {
            list.truncate(n);
        }
    }
    if !args.no_skew_adjust {
        causal_collector::query::adjust_for_skew(&store, &mut list)?;
        if filter.sort == TaskSort::Duration {
            // Longest first by the corrected durations (stable: ties keep the store's order).
            list.sort_by_key(|t| std::cmp::Reverse(t.duration_ns()));
        }
    }
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &list)?;
        writeln!(out)?;
        return Ok(ExitCode::SUCCESS);
    }
    // Ids are 16 digits (X-Trace), 32 (an OTLP trace id) or up to 40: the column fits the longest.
    let w = list
        .iter()
        .map(|t| t.task_id.len())
        .max()
        .unwrap_or(0)
        .max(16);
    writeln!(
        out,
        "{:<w$} {:<23} {:>7} {:>11}  {:<20} TITLE",
        "TASK", "FIRST SEEN (UTC)", "EVENTS", "DURATION", "HOSTS"
    )?;
    for t in &list {
        let hosts = t.hosts.join(",");
        writeln!(
            out,
            "{:<w$} {:<23} {:>7} {:>11}  {:<20} {}",
            t.task_id,
            fmt_time(t.first_seen_ns()),
            t.events,
            t.duration_ns()
                .map(fmt_duration)
                .unwrap_or_else(|| "?".into()),
            if hosts.is_empty() {
                "-".to_string()
            } else {
                hosts
            },
            t.title.as_deref().unwrap_or("-")
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The document of `show --format json` (`docs/collector-store.md`): `causal_analysis::render::json`'s
/// fields (`task`, `events`, `edges`, `problems`, `critical_path`), then `skew_adjustment` and,
/// with `--resources`, `resources`; serialized field by field, in this order.
#[derive(serde::Serialize)]
struct ShowJson<'a> {
    task: &'a str,
    events: &'a [causal_analysis::Event],
    edges: &'a [causal_analysis::Edge],
    problems: &'a [causal_analysis::Problem],
    critical_path: Option<&'a CriticalPath>,
    skew_adjustment: &'a SkewAdjustment,
    #[serde(skip_serializing_if = "Option::is_none")]
    resources: Option<&'a Accounting>,
    /// A task joined from several stores: what each held and where their views meet or end.
    #[serde(skip_serializing_if = "Option::is_none")]
    domains: Option<&'a causal_collector::query::DomainJoin>,
}

/// Runs `sightline show`.
pub fn show(args: ShowArgs) -> anyhow::Result<ExitCode> {
    if let Some(dir) = &args.recording {
        let rec = ::replay::format::Recording::open(dir)
            .with_context(|| format!("cannot open the recording {}", dir.display()))?;
        let g = crate::recording_graph::recording_graph(&rec, &dir.display().to_string());
        return render_graph(&args, &g, &SkewAdjustment::default());
    }
    let specs = args.db.specs()?;
    if specs.len() > 1 || args.compare.is_none() {
        return show_joined(&args, &specs);
    }
    let store = open_existing(&specs[0])?;
    let task = store.resolve_task(args.task.as_deref().unwrap_or_default())?;
    let adjust = !args.no_skew_adjust;
    let (g, skew) = causal_collector::query::load_graph(&store, &task, adjust)?;
    if let Some(other) = &args.compare {
        let mut out = std::io::stdout().lock();
        let other = store.resolve_task(other)?;
        let (b, _) = causal_collector::query::load_graph(&store, &other, adjust)?;
        let c = Comparison::compute(&g, &b);
        match args.format {
            ShowFormat::Json => {
                serde_json::to_writer_pretty(&mut out, &c)?;
                writeln!(out)?;
            }
            _ => out.write_all(c.text(40).as_bytes())?,
        }
        return Ok(ExitCode::SUCCESS);
    }
    render_graph(&args, &g, &skew)
}

/// `sightline show --db A --db B …`: the task joined from every store (administrative
/// domains), each event once, with the stores' shares, the edges between stores and the edges
/// whose parent no store holds (`domain boundary:`, `view ends:` lines in text, `domains` in
/// JSON); then from each `--peer` store whose collector a view end names. One store and no
/// peer is the plain view, with `view ends:` lines only where an edge leaves for another
/// domain's collector.
fn show_joined(args: &ShowArgs, specs: &[StoreSpec]) -> anyhow::Result<ExitCode> {
    if args.compare.is_some() {
        bail!("--compare reads one store; give one --db or --store");
    }
    let stores = specs
        .iter()
        .map(open_existing)
        .collect::<anyhow::Result<Vec<AnyStore>>>()?;
    let dyns: Vec<&dyn TraceStore> = stores.iter().map(|s| s as &dyn TraceStore).collect();
    let task =
        causal_collector::query::resolve_joined(&dyns, args.task.as_deref().unwrap_or_default())?;
    let named: Vec<(String, &dyn TraceStore)> = specs
        .iter()
        .map(ToString::to_string)
        .zip(dyns.iter().copied())
        .collect();
    let peer_specs = args
        .peer
        .iter()
        .map(|(dest, store)| Ok((dest.clone(), StoreSpec::parse(store)?)))
        .collect::<anyhow::Result<Vec<(String, StoreSpec)>>>()?;
    let peer_stores = peer_specs
        .iter()
        .map(|(_, spec)| open_existing(spec))
        .collect::<anyhow::Result<Vec<AnyStore>>>()?;
    let peers: Vec<causal_collector::query::Peer<'_>> = peer_specs
        .iter()
        .zip(&peer_stores)
        .map(|((dest, spec), store)| causal_collector::query::Peer {
            destination: dest.clone(),
            name: spec.to_string(),
            store: store as &dyn TraceStore,
        })
        .collect();
    let (g, skew, join) = causal_collector::query::load_graph_with_peers(
        &named,
        &peers,
        &task,
        !args.no_skew_adjust,
    )?;
    let domains = join.names_another_domain().then_some(&join);
    render_graph_with(args, &g, &skew, domains)
}

/// Prints `g` in `args.format`, with the critical path and accounting `args` asks for.
fn render_graph(args: &ShowArgs, g: &TaskGraph, skew: &SkewAdjustment) -> anyhow::Result<ExitCode> {
    render_graph_with(args, g, skew, None)
}

/// [`render_graph`], with the [`DomainJoin`](causal_collector::query::DomainJoin) of a task
/// joined from several stores.
fn render_graph_with(
    args: &ShowArgs,
    g: &TaskGraph,
    skew: &SkewAdjustment,
    domains: Option<&causal_collector::query::DomainJoin>,
) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    let cp = if args.critical_path || args.critical_path_only {
        CriticalPath::compute(g)
    } else {
        None
    };
    let acct = args.resources.then(|| Accounting::compute(g));
    match args.format {
        ShowFormat::Text => {
            let mut notes = domains.map(|d| d.lines()).unwrap_or_default();
            notes.extend(skew.lines());
            let view = render::TextOptions {
                critical_path: cp.as_ref(),
                critical_path_only: args.critical_path_only,
                notes: &notes,
                verbose: args.verbose,
            };
            out.write_all(render::text_view(g, &view).as_bytes())?;
            if let Some(a) = &acct {
                writeln!(out)?;
                out.write_all(a.text().as_bytes())?;
            }
            if args.cost {
                writeln!(out)?;
                out.write_all(crate::account::render_task_cost(&g.events).as_bytes())?;
            }
        }
        ShowFormat::Dot => out.write_all(render::dot(g, cp.as_ref()).as_bytes())?,
        ShowFormat::Json => {
            // Streamed: serde writes the task straight from the graph into a buffered stdout,
            // with no JSON value of the whole document in between (a 100,000-event task took
            // 6.4 s and 577 MB as a `serde_json::Value`).
            let doc = ShowJson {
                task: &g.task,
                events: &g.events,
                edges: &g.edges,
                problems: &g.problems,
                critical_path: cp.as_ref(),
                skew_adjustment: skew,
                resources: acct.as_ref(),
                domains,
            };
            let mut w = std::io::BufWriter::with_capacity(1 << 16, &mut out);
            serde_json::to_writer_pretty(&mut w, &doc)?;
            writeln!(w)?;
            w.flush()?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_parse_and_format() {
        assert_eq!(
            fmt_time(1_384_989_788_371_000_000),
            "2013-11-20 23:23:08.371"
        );
        assert_eq!(
            parse_time("2013-11-20T23:23:08Z", 0).unwrap(),
            1_384_989_788_000_000_000
        );
        assert_eq!(
            parse_time("2013-11-20", 0).unwrap(),
            1_384_905_600_000_000_000
        );
        assert_eq!(
            parse_time("1384989788", 0).unwrap(),
            1_384_989_788_000_000_000
        );
        assert_eq!(
            parse_time("2h", 10_000_000_000_000).unwrap(),
            10_000_000_000_000 - 7_200_000_000_000
        );
        assert!(parse_time("2013-13-01", 0).is_err());
        assert_eq!(parse_duration_ns("250ms"), Ok(250_000_000));
        assert_eq!(parse_duration_ns("1.5s"), Ok(1_500_000_000));
        assert_eq!(parse_duration_ns("2m"), Ok(120_000_000_000));
        assert_eq!(parse_duration_ns("7"), Ok(7));
        assert_eq!(parse_duration_ns("3us"), Ok(3_000));
        assert!(parse_duration_ns("5 parsecs").is_err());
        assert!(parse_duration_ns("ms").is_err());
        assert_eq!(
            parse_attr("http.status_code=500"),
            Ok(("http.status_code".into(), "500".into()))
        );
        assert_eq!(parse_attr("k=a=b"), Ok(("k".into(), "a=b".into())));
        assert!(parse_attr("=x").is_err());
        assert!(parse_attr("novalue").is_err());
        assert_eq!(
            parse_age("7d"),
            Ok(std::time::Duration::from_secs(7 * 86_400))
        );
        assert_eq!(parse_age("30m"), Ok(std::time::Duration::from_secs(1800)));
        assert!(parse_age("0d").is_err());
        assert!(parse_age("7").is_err());
        assert!(parse_age("1w").is_err());
        assert_eq!(parse_size("10G"), Ok(10 << 30));
        assert_eq!(parse_size("500MiB"), Ok(500 << 20));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("10X").is_err());
        assert!(parse_size("99999999999T").is_err());
        assert!(parse_time("yesterday", 0).is_err());
    }

    /// Regression: `sightline tasks --since 9999999999999d` (or huge unix seconds, or year
    /// 4000000000) panicked with an arithmetic overflow instead of reporting a bad time.
    #[test]
    fn out_of_range_times_are_errors_not_overflows() {
        for t in [
            "9999999999999d",
            "-9999999999999d",
            "99999999999999",
            "-99999999999999",
            "4000000000-01-01",
            "2263-01-01",
        ] {
            let e = parse_time(t, 1_700_000_000_000_000_000).expect_err(t);
            assert!(e.to_string().contains("out of range"), "{t}: {e}");
        }
        assert_eq!(
            parse_time("2262-01-01", 0).unwrap(),
            9_214_646_400_000_000_000
        );
    }
}
