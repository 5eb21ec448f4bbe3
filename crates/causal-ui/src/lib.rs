//! Sightline's web UI: a search page, a timeline with swimlanes, a DAG view and a comparison of
//! two tasks, served with their JSON API (`docs/ui-api.md`) and Jaeger's query API by
//! `sightline ui` and `sightline collect --ui`.
//!
//! The main items:
//! - [`router`] (configured by [`UiOptions`]): the axum [`Router`] of the page, its API and
//!   Jaeger's API; [`bind`] and [`serve`] run it;
//! - [`view::TaskView`]: one task laid out for the timeline (items in lanes per host → process →
//!   thread) and its columnar payload;
//! - [`jaeger`]: the same task in Jaeger's JSON shape.
//!
//! Every request reads the store through `causal_collector::query` and the `TraceStore` trait,
//! the query layer of `sightline tasks` and `show` (Jaeger's UI and its query API read the same
//! service too), so the UI serves a SQLite store and a ClickHouse store alike. Each request
//! opens its own connection (SQLite in WAL mode: readers never block the collector's writer;
//! ClickHouse over HTTP). Rebuilt tasks are kept in a small cache ([`CACHED_TASKS`]), with their
//! DAG layout computed once on first use. Only `GET` is served; no CORS header is sent unless
//! [`UiOptions::cors_origin`] is set.
#![deny(missing_docs)]

pub mod jaeger;
pub mod view;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use causal_analysis::{Comparison, CriticalPath, SkewAdjustment, TaskGraph, layout};
use causal_collector::clickhouse::ClickHouseStore;
use causal_collector::query::{self, SearchQuery};
use causal_collector::{Store, StoreError, StoreSpec, TraceStore};
use serde_json::{Value, json};

use crate::view::TaskView;

/// Tasks kept rebuilt in memory (least recently used dropped first).
pub const CACHED_TASKS: usize = 8;

/// Errors of [`bind`] and [`serve`].
#[derive(Debug, thiserror::Error)]
pub enum UiError {
    /// Binding the listening socket failed.
    #[error("binding the web UI on {addr}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The I/O error (e.g. the port is in use).
        #[source]
        source: std::io::Error,
    },
    /// Serving failed.
    #[error("serving the web UI")]
    Serve(#[source] std::io::Error),
}

/// What the UI serves.
#[derive(Debug, Clone)]
pub struct UiOptions {
    /// The store (a SQLite file, which must exist, or a ClickHouse database;
    /// `docs/collector-store.md`).
    pub store: StoreSpec,
    /// Send `Access-Control-Allow-Origin: <this>` on every response (CORS); `None`: no CORS.
    pub cors_origin: Option<String>,
    /// Other administrative domains' stores, each under its collector as reports name it
    /// (`EdgeDestination`): a task view joins a peer's store where the task's view ends at an
    /// edge into that domain (`causal_collector::query::load_graph_with_peers`;
    /// docs/collector-store.md, "Several stores"). Opened per task view.
    pub peers: Vec<(String, StoreSpec)>,
}

/// The page's files, embedded in the binary: (URL path under `/assets/`, content type, bytes).
const ASSETS: &[(&str, &str, &str)] = &[
    (
        "app.js",
        "text/javascript",
        include_str!("../assets/app.js"),
    ),
    (
        "util.js",
        "text/javascript",
        include_str!("../assets/util.js"),
    ),
    (
        "search.js",
        "text/javascript",
        include_str!("../assets/search.js"),
    ),
    (
        "trace.js",
        "text/javascript",
        include_str!("../assets/trace.js"),
    ),
    (
        "dag.js",
        "text/javascript",
        include_str!("../assets/dag.js"),
    ),
    (
        "compare.js",
        "text/javascript",
        include_str!("../assets/compare.js"),
    ),
    ("style.css", "text/css", include_str!("../assets/style.css")),
];
const INDEX: &str = include_str!("../assets/index.html");

/// One task rebuilt for the UI.
#[derive(Debug)]
struct Loaded {
    graph: TaskGraph,
    skew: SkewAdjustment,
    cp: Option<CriticalPath>,
    view: TaskView,
    payload: OnceLock<Body>,
    dag: OnceLock<Body>,
    title: Option<String>,
}

/// A cache key: the task as shown, whether its clock skew is adjusted, and its stored event
/// count (a task that received events since it was cached is rebuilt).
type TaskKey = (String, bool, i64);

#[derive(Debug)]
struct Inner {
    opts: UiOptions,
    /// (task as shown, skew adjusted) → task, most recently used last.
    cache: Mutex<Vec<(TaskKey, Arc<Loaded>)>>,
    /// The ClickHouse store once opened (an HTTP agent with keep-alive connections; opening
    /// checks the schema, so it is done once, not per request).
    clickhouse: Mutex<Option<Arc<ClickHouseStore>>>,
}

type AppState = Arc<Inner>;

/// An API error: status and message (JSON `{"error": "..."}`).
#[derive(Debug)]
struct ApiError(StatusCode, String);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, axum::Json(json!({"error": self.1}))).into_response()
    }
}

/// The error and its sources, joined with ": ".
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        s.push_str(": ");
        s.push_str(&c.to_string());
        src = c.source();
    }
    s
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        let status = match e {
            StoreError::NoSuchTask(_) => StatusCode::NOT_FOUND,
            StoreError::AmbiguousTask { .. } => StatusCode::BAD_REQUEST,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError(status, chain(&e))
    }
}

fn bad(msg: impl Into<String>) -> ApiError {
    ApiError(StatusCode::BAD_REQUEST, msg.into())
}

/// A serialised JSON payload, and its gzip form once a client asked for it.
#[derive(Debug)]
struct Body {
    plain: Arc<[u8]>,
    gzip: OnceLock<Arc<[u8]>>,
}

impl Body {
    fn new(v: &Value) -> Body {
        Body {
            plain: serde_json::to_vec(v).expect("JSON values serialize").into(),
            gzip: OnceLock::new(),
        }
    }
}

/// Whether the request's `Accept-Encoding` lists `gzip` (RFC 9110 §12.5.3; a `q=0` refusal is
/// not looked for: no browser sends one for gzip).
fn accepts_gzip(h: &HeaderMap) -> bool {
    h.get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.split(',').any(|e| e.trim().starts_with("gzip")))
}

/// The payload `pick(l)` of task `l`, built by `make` on first use, gzip-compressed when the
/// client accepts it (the columnar payload of 100,000 X-Trace events is 8.1 MB of JSON, 1.2 MB
/// compressed). Runs on a blocking thread: building and compressing a big task's payload takes
/// tens of ms.
async fn payload(
    l: Arc<Loaded>,
    headers: &HeaderMap,
    pick: fn(&Loaded) -> &OnceLock<Body>,
    make: fn(&Loaded) -> Value,
) -> Result<Response, ApiError> {
    let gzip = accepts_gzip(headers);
    let (bytes, compressed) = tokio::task::spawn_blocking(move || {
        let body = pick(&l).get_or_init(|| Body::new(&make(&l)));
        if !gzip {
            return (body.plain.clone(), false);
        }
        let gz = body.gzip.get_or_init(|| {
            use std::io::Write as _;
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(&body.plain).expect("writing to a Vec");
            e.finish().expect("writing to a Vec").into()
        });
        (gz.clone(), true)
    })
    .await
    .map_err(|e| ApiError(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    let mut res = (
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::VARY, "accept-encoding"),
        ],
        axum::body::Bytes::from_owner(bytes),
    )
        .into_response();
    if compressed {
        res.headers_mut()
            .insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    }
    Ok(res)
}

/// Runs `f` with a connection to the store on a blocking thread.
async fn with_store<T: Send + 'static>(
    st: &AppState,
    f: impl FnOnce(&dyn TraceStore) -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    let st = st.clone();
    tokio::task::spawn_blocking(move || match &st.opts.store {
        StoreSpec::Sqlite(db) => {
            if !db.exists() {
                return Err(ApiError(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("no store at {}", db.display()),
                ));
            }
            f(&Store::open(db)?)
        }
        StoreSpec::ClickHouse(url) => {
            let open = st
                .clickhouse
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            let store = match open {
                Some(s) => s,
                None => {
                    // Opened outside the lock; two first requests may both open it.
                    let s = Arc::new(ClickHouseStore::open(url)?);
                    *st.clickhouse.lock().unwrap_or_else(|p| p.into_inner()) = Some(s.clone());
                    s
                }
            };
            f(store.as_ref())
        }
    })
    .await
    .map_err(|e| ApiError(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?
}

/// A peer's store (see [`UiOptions::peers`]), opened for one task view.
fn open_peer(spec: &StoreSpec) -> Result<Box<dyn TraceStore>, ApiError> {
    Ok(match spec {
        StoreSpec::Sqlite(db) => {
            if !db.exists() {
                return Err(ApiError(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("no peer store at {}", db.display()),
                ));
            }
            Box::new(Store::open(db)?)
        }
        StoreSpec::ClickHouse(url) => Box::new(ClickHouseStore::open(url)?),
    })
}

/// Task `task` (id as `tasks` prints it, or a unique prefix) rebuilt, from the cache if there.
async fn load(st: &AppState, task: String, adjust: bool) -> Result<Arc<Loaded>, ApiError> {
    let (shown, events) = with_store(st, move |s| {
        let shown = s.resolve_task(&task)?;
        let events = query::task_summary(s, &shown)?.map_or(0, |h| h.events);
        Ok((shown, events))
    })
    .await?;
    let key = (shown.clone(), adjust, events);
    {
        let mut c = st.cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(pos) = c.iter().position(|(k, _)| *k == key) {
            let hit = c.remove(pos);
            let l = hit.1.clone();
            c.push(hit);
            return Ok(l);
        }
    }
    let home = st.opts.store.to_string();
    let peer_specs = st.opts.peers.clone();
    let loaded = with_store(st, move |s| {
        let (graph, skew) = if peer_specs.is_empty() {
            query::load_graph(s, &shown, adjust)?
        } else {
            let opened = peer_specs
                .iter()
                .map(|(_, spec)| open_peer(spec))
                .collect::<Result<Vec<_>, ApiError>>()?;
            let peers: Vec<query::Peer<'_>> = peer_specs
                .iter()
                .zip(&opened)
                .map(|((dest, spec), store)| query::Peer {
                    destination: dest.clone(),
                    name: spec.to_string(),
                    store: store.as_ref(),
                })
                .collect();
            let (g, skew, _) = query::load_graph_with_peers(&[(home, s)], &peers, &shown, adjust)?;
            (g, skew)
        };
        let title = query::task_summary(s, &shown)?.and_then(|h| h.title);
        let cp = CriticalPath::compute(&graph);
        let view = TaskView::build(&graph, cp.as_ref());
        Ok(Arc::new(Loaded {
            graph,
            skew,
            cp,
            view,
            payload: OnceLock::new(),
            dag: OnceLock::new(),
            title,
        }))
    })
    .await?;
    let mut c = st.cache.lock().unwrap_or_else(|p| p.into_inner());
    c.retain(|(k, _)| (&k.0, k.1) != (&key.0, key.1));
    if c.len() >= CACHED_TASKS {
        c.remove(0);
    }
    c.push((key, loaded.clone()));
    Ok(loaded)
}

/// The router of the UI: the page at `/`, `/search`, `/trace/{task}`, `/compare`; its files
/// under `/assets/`; the JSON API under `/api/ui/`; Jaeger's API under `/api/`
/// (`docs/ui-api.md`). Only `GET` routes exist (other methods get `405`).
pub fn router(opts: UiOptions) -> Router {
    let cors = opts
        .cors_origin
        .as_deref()
        .and_then(|o| HeaderValue::from_str(o).ok());
    let state: AppState = Arc::new(Inner {
        opts,
        cache: Mutex::new(Vec::new()),
        clickhouse: Mutex::new(None),
    });
    let page = || get(|| async { ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], INDEX) });
    let r = Router::new()
        .route("/", page())
        .route("/search", page())
        .route("/compare", page())
        .route("/trace/{task}", page())
        .route("/assets/{file}", get(asset))
        .route("/api/ui/services", get(ui_services))
        .route("/api/ui/operations", get(ui_operations))
        .route("/api/ui/search", get(ui_search))
        .route("/api/ui/task/{task}", get(ui_task))
        .route("/api/ui/task/{task}/item/{item}", get(ui_item))
        .route("/api/ui/task/{task}/dag", get(ui_dag))
        .route("/api/ui/task/{task}/cost", get(ui_cost))
        .route("/api/ui/compare", get(ui_compare))
        .route("/api/services", get(jaeger_services))
        .route("/api/services/{service}/operations", get(jaeger_operations))
        .route("/api/operations", get(jaeger_operation_objects))
        .route("/api/traces", get(jaeger_traces))
        .route("/api/traces/{id}", get(jaeger_trace))
        .with_state(state);
    match cors {
        Some(origin) => r.layer(axum::middleware::map_response(move |mut res: Response| {
            let origin = origin.clone();
            async move {
                res.headers_mut()
                    .insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
                res
            }
        })),
        None => r,
    }
}

/// Binds the UI's listening socket (`127.0.0.1:16686` is the default of `sightline ui`).
///
/// # Errors
/// [`UiError::Bind`].
pub async fn bind(addr: SocketAddr) -> Result<tokio::net::TcpListener, UiError> {
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| UiError::Bind { addr, source })
}

/// Serves `router` on `listener` until `shutdown` completes, with the connection limit, header
/// and idle timeouts and TLS of `listen` (the collector's listener, issue 22; with
/// [`ListenConfig::tls`](causal_collector::listen::ListenConfig::tls) the UI and its API are
/// served over HTTPS only, offering HTTP/2 and HTTP/1.1 by ALPN).
///
/// # Errors
/// [`UiError::Serve`].
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    listen: causal_collector::listen::ListenConfig,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), UiError> {
    causal_collector::listen::serve_router(listener, "UI", listen, router, shutdown).await;
    Ok(())
}

async fn asset(Path(file): Path<String>) -> Response {
    match ASSETS.iter().find(|(name, _, _)| *name == file) {
        Some((_, ty, body)) => ([(header::CONTENT_TYPE, *ty)], *body).into_response(),
        None => (StatusCode::NOT_FOUND, "no such file").into_response(),
    }
}

type Params = Query<Vec<(String, String)>>;

fn param<'p>(p: &'p [(String, String)], key: &str) -> Option<&'p str> {
    p.iter()
        .find(|(k, v)| k == key && !v.is_empty())
        .map(|(_, v)| v.as_str())
}

fn int_param(p: &[(String, String)], key: &str) -> Result<Option<i64>, ApiError> {
    param(p, key)
        .map(|v| {
            v.parse::<i64>()
                .map_err(|_| bad(format!("parameter {key}: {v:?} is not an integer")))
        })
        .transpose()
}

async fn ui_services(State(st): State<AppState>) -> Result<Response, ApiError> {
    let s = with_store(&st, |s| Ok(query::services(s)?)).await?;
    Ok(axum::Json(json!({"services": s})).into_response())
}

async fn ui_operations(State(st): State<AppState>, Query(p): Params) -> Result<Response, ApiError> {
    let svc = param(&p, "service")
        .ok_or_else(|| bad("parameter service is required"))?
        .to_string();
    let ops = with_store(&st, move |s| Ok(query::operations(s, &svc)?)).await?;
    Ok(axum::Json(json!({"operations": ops})).into_response())
}

/// `GET /api/ui/search` parameters → a search (`docs/ui-api.md`).
fn ui_query(p: &[(String, String)]) -> Result<SearchQuery, ApiError> {
    let mut attributes = Vec::new();
    for (k, v) in p {
        if k == "attr" && !v.is_empty() {
            let (a, b) = v
                .split_once('=')
                .ok_or_else(|| bad(format!("parameter attr: {v:?} is not key=value")))?;
            attributes.push((a.to_string(), b.to_string()));
        }
    }
    Ok(SearchQuery {
        service: param(p, "service").map(str::to_string),
        operation: param(p, "operation").map(str::to_string),
        attributes,
        min_duration_ns: int_param(p, "min_duration_ns")?,
        max_duration_ns: int_param(p, "max_duration_ns")?,
        errors_only: matches!(param(p, "errors"), Some("1" | "true")),
        since_ns: int_param(p, "since_ns")?,
        until_ns: int_param(p, "until_ns")?,
        limit: Some(int_param(p, "limit")?.map_or(20, |l| l.max(0) as usize)),
    })
}

async fn ui_search(State(st): State<AppState>, Query(p): Params) -> Result<Response, ApiError> {
    let q = ui_query(&p)?;
    let skew = adjust(&p);
    let hits = with_store(&st, move |s| {
        let mut hits = query::search(s, &q)?;
        if skew {
            // Durations as the task view shows them (`docs/ui-api.md`).
            query::adjust_for_skew(s, &mut hits)?;
        }
        Ok(hits)
    })
    .await?;
    Ok(axum::Json(json!({"tasks": hits})).into_response())
}

fn adjust(p: &[(String, String)]) -> bool {
    !matches!(param(p, "skew"), Some("0" | "false"))
}

async fn ui_task(
    State(st): State<AppState>,
    Path(task): Path<String>,
    Query(p): Params,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let l = load(&st, task, adjust(&p)).await?;
    payload(
        l,
        &headers,
        |l| &l.payload,
        |l| {
            l.view
                .payload(&l.graph, l.cp.as_ref(), &l.skew, l.title.as_deref())
        },
    )
    .await
}

async fn ui_item(
    State(st): State<AppState>,
    Path((task, item)): Path<(String, usize)>,
    Query(p): Params,
) -> Result<Response, ApiError> {
    let l = load(&st, task, adjust(&p)).await?;
    let d = l
        .view
        .detail(&l.graph, item)
        .ok_or_else(|| ApiError(StatusCode::NOT_FOUND, format!("no item {item}")))?;
    Ok(axum::Json(d).into_response())
}

/// The DAG payload: the graph's events with their layer and position (`layout::layered`),
/// labels through a string table, edges as index pairs, the critical path as event indexes.
fn dag_payload(l: &Loaded) -> Value {
    let g = &l.graph;
    let lay = layout::layered(g);
    let mut strings: Vec<String> = Vec::new();
    let mut index: HashMap<String, u32> = HashMap::new();
    let mut intern = |s: String| -> u32 {
        if let Some(&i) = index.get(&s) {
            return i;
        }
        strings.push(s.clone());
        index.insert(s, strings.len() as u32 - 1);
        strings.len() as u32 - 1
    };
    let label: Vec<u32> = g
        .events
        .iter()
        .map(|e| intern(causal_analysis::render::describe(e)))
        .collect();
    let host: Vec<u32> = g
        .events
        .iter()
        .map(|e| intern(e.host.clone().unwrap_or_else(|| "?".into())))
        .collect();
    let edges: Vec<(usize, usize, &str)> = g
        .edges
        .iter()
        .filter_map(|e| Some((e.from_index?, e.to_index, e.kind.as_str())))
        .collect();
    let t0 = l.view.t0_ns;
    json!({
        "task": g.task,
        "events": g.len(),
        "layers": lay.layers,
        "width": lay.width,
        "strings": strings,
        "id": g.events.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(),
        "label": label,
        "host": host,
        "time": g.events.iter().map(|e| e.timestamp_ns.map_or(0, |t| t - t0)).collect::<Vec<_>>(),
        "item": l.view.item_of,
        "layer": lay.layer,
        "position": lay.position,
        "edges": {
            "from": edges.iter().map(|e| e.0).collect::<Vec<_>>(),
            "to": edges.iter().map(|e| e.1).collect::<Vec<_>>(),
            "kind": edges.iter().map(|e| e.2).collect::<Vec<_>>(),
        },
        "joins": g.joins(),
        "critical_path": l.cp.as_ref().map(|cp| cp.steps.iter().map(|s| s.index).collect::<Vec<_>>()),
    })
}

async fn ui_dag(
    State(st): State<AppState>,
    Path(task): Path<String>,
    Query(p): Params,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let l = load(&st, task, adjust(&p)).await?;
    payload(l, &headers, |l| &l.dag, dag_payload).await
}

/// The task's accounting reports (docs/ui-api.md, "Cost"): one row per reporting thread and
/// activity, largest CPU first, with the task's totals; empty rows when nothing accounted it.
async fn ui_cost(
    State(st): State<AppState>,
    Path(task): Path<String>,
    Query(p): Params,
) -> Result<Response, ApiError> {
    let l = load(&st, task, adjust(&p)).await?;
    Ok(axum::Json(cost_payload(&l.graph.events)).into_response())
}

/// `{"resources": [names], "total": {...}, "rows": [{activity, host, pid, tid, cpu_ns, ...,
/// energy_uj}]}` of [`causal_account::reports::cost_rows`].
fn cost_payload(events: &[causal_analysis::Event]) -> Value {
    use causal_account::Resource;
    use causal_account::reports;
    let mut rows = reports::cost_rows(events);
    reports::sort_by_cpu(&mut rows);
    let totals = reports::totals(&rows);
    let mut total = serde_json::Map::new();
    for r in Resource::ALL {
        total.insert(r.field().into(), totals.get(r).into());
    }
    total.insert("energy_uj".into(), totals.energy_uj.into());
    let rows: Vec<Value> = rows
        .iter()
        .map(|x| {
            let mut o = serde_json::Map::new();
            o.insert("activity".into(), x.activity.clone().into());
            o.insert("host".into(), x.host.clone().into());
            o.insert("pid".into(), x.pid.clone().into());
            o.insert("tid".into(), x.tid.clone().into());
            for r in Resource::ALL {
                o.insert(r.field().into(), x.get(r).into());
            }
            o.insert("energy_uj".into(), x.energy_uj.into());
            Value::Object(o)
        })
        .collect();
    serde_json::json!({
        "resources": Resource::ALL.iter().map(|r| r.field()).collect::<Vec<_>>(),
        "total": total,
        "rows": rows,
    })
}

async fn ui_compare(State(st): State<AppState>, Query(p): Params) -> Result<Response, ApiError> {
    let a = param(&p, "a").ok_or_else(|| bad("parameter a is required"))?;
    let b = param(&p, "b").ok_or_else(|| bad("parameter b is required"))?;
    let adj = adjust(&p);
    let la = load(&st, a.to_string(), adj).await?;
    let lb = load(&st, b.to_string(), adj).await?;
    let c = Comparison::compute(&la.graph, &lb.graph);
    Ok(axum::Json(json!({"comparison": c})).into_response())
}

/// A Jaeger-shaped error response.
fn jaeger_err(status: StatusCode, msg: &str) -> Response {
    (status, axum::Json(jaeger::error(status.as_u16(), msg))).into_response()
}

fn jaeger_result(r: Result<Value, ApiError>) -> Response {
    match r {
        Ok(v) => axum::Json(v).into_response(),
        Err(ApiError(s, m)) => jaeger_err(s, &m),
    }
}

async fn jaeger_services(State(st): State<AppState>) -> Response {
    jaeger_result(
        with_store(&st, |s| {
            let v = query::services(s)?;
            let n = v.len();
            Ok(jaeger::response(json!(v), n))
        })
        .await,
    )
}

async fn jaeger_operations(State(st): State<AppState>, Path(service): Path<String>) -> Response {
    jaeger_result(
        with_store(&st, move |s| {
            let v = query::operations(s, &service)?;
            let n = v.len();
            Ok(jaeger::response(json!(v), n))
        })
        .await,
    )
}

/// `GET /api/operations?service=S` (Jaeger's newer form): `{name, spanKind}` objects.
async fn jaeger_operation_objects(State(st): State<AppState>, Query(p): Params) -> Response {
    let Some(service) = param(&p, "service").map(str::to_string) else {
        return jaeger_err(StatusCode::BAD_REQUEST, "parameter 'service' is required");
    };
    jaeger_result(
        with_store(&st, move |s| {
            let v: Vec<Value> = query::operations(s, &service)?
                .into_iter()
                .map(|o| json!({"name": o, "spanKind": ""}))
                .collect();
            let n = v.len();
            Ok(jaeger::response(json!(v), n))
        })
        .await,
    )
}

/// Jaeger's `/api/traces` parameters → a search.
fn jaeger_query(p: &[(String, String)]) -> Result<SearchQuery, String> {
    let service = param(p, "service").ok_or("parameter 'service' is required")?;
    let mut attributes = Vec::new();
    if let Some(tags) = param(p, "tags") {
        let m: serde_json::Map<String, Value> = serde_json::from_str(tags)
            .map_err(|e| format!("malformed 'tags' parameter (a JSON object): {e}"))?;
        for (k, v) in m {
            let v = match v {
                Value::String(s) => s,
                other => other.to_string(),
            };
            attributes.push((k, v));
        }
    }
    for (k, v) in p {
        if k == "tag" {
            let (a, b) = v
                .split_once(':')
                .ok_or_else(|| format!("malformed 'tag' parameter {v:?} (key:value)"))?;
            attributes.push((a.to_string(), b.to_string()));
        }
    }
    let dur = |key: &str| -> Result<Option<i64>, String> {
        param(p, key)
            .map(|v| {
                jaeger::parse_duration(v)
                    .ok_or_else(|| format!("cannot parse '{key}' {v:?} (a duration such as 1.5s)"))
            })
            .transpose()
    };
    let micros = |key: &str| -> Result<Option<i64>, String> {
        param(p, key)
            .map(|v| {
                v.parse::<i64>()
                    .map(|us| us.saturating_mul(1000))
                    .map_err(|_| format!("cannot parse '{key}' {v:?} (µs since the epoch)"))
            })
            .transpose()
    };
    let limit = param(p, "limit")
        .map(|v| {
            v.parse::<usize>()
                .map_err(|_| format!("cannot parse 'limit' {v:?}"))
        })
        .transpose()?;
    let operation = param(p, "operation")
        .filter(|o| *o != "all")
        .map(str::to_string);
    Ok(SearchQuery {
        service: Some(service.to_string()),
        operation,
        attributes,
        min_duration_ns: dur("minDuration")?,
        max_duration_ns: dur("maxDuration")?,
        errors_only: false,
        since_ns: micros("start")?,
        // Jaeger's `end` is inclusive.
        until_ns: micros("end")?.map(|e| e.saturating_add(1000)),
        limit: Some(limit.filter(|&l| l > 0).unwrap_or(100)),
    })
}

async fn jaeger_traces(State(st): State<AppState>, Query(p): Params) -> Response {
    let q = match jaeger_query(&p) {
        Ok(q) => q,
        Err(m) => return jaeger_err(StatusCode::BAD_REQUEST, &m),
    };
    let hits = match with_store(&st, move |s| Ok(query::search(s, &q)?)).await {
        Ok(h) => h,
        Err(ApiError(s, m)) => return jaeger_err(s, &m),
    };
    let mut traces = Vec::with_capacity(hits.len());
    for h in hits {
        match load(&st, h.task_id, true).await {
            Ok(l) => traces.push(jaeger::trace(&l.view, &l.graph)),
            Err(ApiError(s, m)) => return jaeger_err(s, &m),
        }
    }
    let n = traces.len();
    axum::Json(jaeger::response(json!(traces), n)).into_response()
}

async fn jaeger_trace(State(st): State<AppState>, Path(id): Path<String>) -> Response {
    // Jaeger looks a trace up by its exact id; so does this (no prefixes).
    let exact = id.clone();
    match with_store(&st, move |s| Ok(query::task_exists(s, &exact)?)).await {
        Ok(true) => {}
        Ok(false) => return jaeger_err(StatusCode::NOT_FOUND, "trace not found"),
        Err(ApiError(s, m)) => return jaeger_err(s, &m),
    }
    match load(&st, id, true).await {
        Ok(l) => axum::Json(jaeger::response(
            json!([jaeger::trace(&l.view, &l.graph)]),
            1,
        ))
        .into_response(),
        Err(ApiError(s, m)) => jaeger_err(s, &m),
    }
}
