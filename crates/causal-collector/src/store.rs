//! The embedded store: one SQLite file in WAL mode (no server), schema in `docs/collector-store.md`.
//!
//! Writes come in batches ([`Store::insert`]: one transaction per batch, prepared statements),
//! which is what makes sustained ingest fast; reads rebuild a task's events in arrival order
//! ([`Store::load_task`]) and list tasks with their summary ([`Store::tasks`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use causal_analysis::{AttrValue, EdgeKind, Event, Parent};
use rusqlite::{Connection, OptionalExtension, params};

use crate::error::StoreError;

/// Schema version written in `meta.schema_version`. Version 1 stores open and are migrated in
/// place ([`Store::open`]; `docs/collector-store.md`, "Versions").
pub const SCHEMA_VERSION: u32 = 3;

/// Brings a store of schema version `from` (older than [`SCHEMA_VERSION`]) up to date, in one
/// transaction, and records the new version.
///
/// - 1 → 2: the `fields` column may hold `[key, text, typed value]` elements besides
///   `[key, text]` (OTLP attribute types): version 1 rows are valid as they are. The search
///   tables (`task_services`, `task_operations`, `task_attributes`) and `tasks.errors` are
///   filled from the stored events.
/// - 2 → 3: `service_operations` (the distinct operations of each service, what
///   [`crate::query::operations`] lists) is filled from the stored events.
fn migrate(conn: &mut Connection, from: u32) -> Result<(), StoreError> {
    let tx = conn.transaction().map_err(sql("beginning the migration"))?;
    if from < 2 {
        tx.execute_batch(&format!(
            "ALTER TABLE tasks ADD COLUMN errors INTEGER NOT NULL DEFAULT 0;
             INSERT OR IGNORE INTO task_services(service, task)
               SELECT agent, task FROM events WHERE agent IS NOT NULL;
             INSERT OR IGNORE INTO task_operations(operation, task)
               SELECT f.value ->> 1, e.task FROM events e, json_each(e.fields) f
               WHERE f.value ->> 0 = 'span.name';
             INSERT OR IGNORE INTO task_operations(operation, task)
               SELECT label, task FROM events WHERE label IS NOT NULL AND instr(event_id, ':') = 0
                 AND NOT EXISTS (SELECT 1 FROM json_each(events.fields) f WHERE f.value ->> 0 = 'span.name');
             INSERT OR IGNORE INTO task_attributes(key, value, task)
               SELECT f.value ->> 0, f.value ->> 1, e.task FROM events e, json_each(e.fields) f
               WHERE f.value ->> 0 != 'Label' AND length(CAST(f.value ->> 1 AS BLOB)) <= {MAX_INDEXED_VALUE}
                 AND EXISTS (SELECT 1 FROM json_each(e.fields) g WHERE g.value ->> 0 = 'span.name');
             UPDATE tasks SET errors = (SELECT count(*) FROM events e, json_each(e.fields) f
               WHERE e.task = tasks.id AND f.value ->> 0 = 'status.code' AND f.value ->> 1 = 'error');"
        ))
        .map_err(sql("migrating the store to version 2"))?;
    }
    if from < 3 {
        tx.execute_batch(&format!(
            "INSERT OR IGNORE INTO service_operations(service, operation)
               SELECT DISTINCT agent, op FROM (SELECT e.agent AS agent, {op} AS op FROM events e
                 WHERE e.agent IS NOT NULL) WHERE op IS NOT NULL;",
            op = crate::query::OPERATION
        ))
        .map_err(sql("migrating the store to version 3"))?;
    }
    tx.execute(
        "UPDATE meta SET value = ?1 WHERE key = 'schema_version'",
        [SCHEMA_VERSION.to_string()],
    )
    .map_err(sql("writing the schema version"))?;
    tx.commit().map_err(sql("committing the migration"))
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tasks(
    id          INTEGER PRIMARY KEY,
    task_id     TEXT NOT NULL UNIQUE,
    received_ns INTEGER NOT NULL,
    first_ts_ns INTEGER,
    last_ts_ns  INTEGER,
    events      INTEGER NOT NULL,
    title       TEXT,
    title_rank  INTEGER,
    title_ts_ns INTEGER,
    errors      INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS events(
    seq         INTEGER PRIMARY KEY,
    task        INTEGER NOT NULL REFERENCES tasks(id),
    event_id    TEXT NOT NULL,
    ts_ns       INTEGER,
    hrt_ns      INTEGER,
    agent       TEXT,
    label       TEXT,
    host        TEXT,
    process     TEXT,
    pid         INTEGER,
    tid         INTEGER,
    thread_name TEXT,
    parents     TEXT,
    links       TEXT,
    fields      TEXT
);
CREATE INDEX IF NOT EXISTS events_by_task_event ON events(task, event_id);
CREATE TABLE IF NOT EXISTS task_hosts(task INTEGER NOT NULL, host TEXT NOT NULL, PRIMARY KEY(task, host)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS task_tags(task INTEGER NOT NULL, tag TEXT NOT NULL, PRIMARY KEY(task, tag)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS task_services(service TEXT NOT NULL, task INTEGER NOT NULL, PRIMARY KEY(service, task)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS task_operations(operation TEXT NOT NULL, task INTEGER NOT NULL, PRIMARY KEY(operation, task)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS task_attributes(key TEXT NOT NULL, value TEXT NOT NULL, task INTEGER NOT NULL, PRIMARY KEY(key, value, task)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS task_services_by_task ON task_services(task);
CREATE INDEX IF NOT EXISTS task_operations_by_task ON task_operations(task);
CREATE INDEX IF NOT EXISTS task_attributes_by_task ON task_attributes(task);
CREATE TABLE IF NOT EXISTS service_operations(service TEXT NOT NULL, operation TEXT NOT NULL, PRIMARY KEY(service, operation)) WITHOUT ROWID;
";

/// Indexes over `tasks` columns added by version 2: created after a migration has added them.
const TASK_INDEXES: &str = "
CREATE INDEX IF NOT EXISTS tasks_by_first_seen ON tasks(coalesce(first_ts_ns, received_ns));
";

/// Longest attribute value indexed in `task_attributes`, bytes: longer values (bodies, SQL text,
/// stack traces) are stored but not searchable by `--attr`.
pub const MAX_INDEXED_VALUE: usize = 256;

/// The operation an event names for search (`tasks --operation`): its `span.name` (an OTLP
/// span's start event), else the label of an X-Trace report (an event id without `:`). OTLP
/// span ends and span events name none.
fn operation_of(e: &Event) -> Option<&str> {
    e.field("span.name")
        .or_else(|| (!e.id.contains(':')).then(|| e.label()).flatten())
}

/// The operation an event is listed under for its service (`service_operations`,
/// [`crate::query::operations`]; the query module's docs): the label, except that a span's
/// start event (`…:start`, label `<name> start`) names `<name>`, and span end events
/// (`…:end`) and span events (`…:event…`) name none. The same as `query::OPERATION` computes
/// from a stored row (SQL `LIKE` is ASCII case-insensitive, and so is this).
fn listed_operation(e: &Event) -> Option<&str> {
    let label = e.label()?;
    let id = e.id.as_bytes();
    let ends_with = |s: &[u8], suffix: &str| {
        s.len() >= suffix.len()
            && s[s.len() - suffix.len()..].eq_ignore_ascii_case(suffix.as_bytes())
    };
    if ends_with(id, ":start") && ends_with(label.as_bytes(), " start") {
        // The suffix is ASCII, so the cut is at a character boundary.
        return Some(&label[..label.len() - " start".len()]);
    }
    let has_event = id.windows(6).any(|w| w.eq_ignore_ascii_case(b":event"));
    if ends_with(id, ":end") || has_event {
        return None;
    }
    Some(label)
}

/// Whether an event reports an error (`tasks --errors`): OTLP status `error` (`status.code`),
/// or Jaeger's tag `error` = `true`/`1` (any ASCII case).
fn is_error(e: &Event) -> bool {
    e.field("status.code") == Some("error")
        || e.field("error")
            .is_some_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
}

/// The columns that make an event's content ([`Content`]), in its order.
const STORED_COLUMNS: &str =
    "ts_ns, hrt_ns, agent, label, host, process, pid, tid, thread_name, parents, links, fields";

/// The values of [`STORED_COLUMNS`] of one `events` row: two rows with the same task, event id
/// and content are the same event delivered twice.
type Content = (
    Option<i64>,
    Option<i64>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<i64>,
    Option<i64>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
);

fn content_of(r: &rusqlite::Row<'_>, first: usize) -> rusqlite::Result<Content> {
    Ok((
        r.get(first)?,
        r.get(first + 1)?,
        r.get(first + 2)?,
        r.get(first + 3)?,
        r.get(first + 4)?,
        r.get(first + 5)?,
        r.get(first + 6)?,
        r.get(first + 7)?,
        r.get(first + 8)?,
        r.get(first + 9)?,
        r.get(first + 10)?,
        r.get(first + 11)?,
    ))
}

/// Columns of `events` written per row.
const COLUMNS: usize = 14;
/// Rows per multi-row INSERT (14 × 64 = 896 bound parameters; SQLite allows 32,766).
const ROWS_PER_INSERT: usize = 64;

fn multi_insert(rows: usize) -> String {
    let mut q = String::from(
        "INSERT INTO events(task, event_id, ts_ns, hrt_ns, agent, label, host, process, pid, tid, thread_name, parents, links, fields) VALUES ",
    );
    for r in 0..rows {
        if r > 0 {
            q.push(',');
        }
        q.push_str("(?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
    }
    q
}

/// One element of the `fields` column: `[key, text]`, or `[key, text, typed value]` for an OTLP
/// attribute that is not a string (schema version 2; `docs/collector-store.md`).
#[derive(serde::Serialize)]
#[serde(untagged)]
enum StoredField<'a> {
    Text(&'a str, &'a str),
    Typed(&'a str, &'a str, &'a AttrValue),
}

/// [`StoredField`] as read back: `[key, text]` or `[key, text, typed value]`.
enum LoadedField {
    Typed(String, String, AttrValue),
    Text(String, String),
}

/// Read element by element: serde's untagged enums buffer every element into an intermediate
/// value and try each variant in turn (a copy of every field of every loaded event).
impl<'de> serde::Deserialize<'de> for LoadedField {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Elements;
        impl<'de> serde::de::Visitor<'de> for Elements {
            type Value = LoadedField;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("[key, text] or [key, text, typed value]")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut a: A,
            ) -> Result<LoadedField, A::Error> {
                use serde::de::Error;
                let k: String = a
                    .next_element()?
                    .ok_or_else(|| A::Error::invalid_length(0, &self))?;
                let v: String = a
                    .next_element()?
                    .ok_or_else(|| A::Error::invalid_length(1, &self))?;
                let Some(t) = a.next_element::<AttrValue>()? else {
                    return Ok(LoadedField::Text(k, v));
                };
                if a.next_element::<serde::de::IgnoredAny>()?.is_some() {
                    return Err(A::Error::invalid_length(4, &self));
                }
                Ok(LoadedField::Typed(k, v, t))
            }
        }
        d.deserialize_seq(Elements)
    }
}

/// The owned values of one `events` row.
struct Row<'e> {
    task: i64,
    e: &'e Event,
    hrt: Option<i64>,
    tid: Option<i64>,
    parents: Option<String>,
    links: Option<String>,
    fields: Option<String>,
}

impl<'e> Row<'e> {
    fn new(e: &'e Event, task: i64) -> Row<'e> {
        let mut ps: Vec<&str> = Vec::new();
        let mut ls: Vec<&str> = Vec::new();
        for p in &e.parents {
            match p.kind {
                // Nested edges are inferred when a task is rebuilt; stored as causal if a caller
                // passes them in.
                EdgeKind::Causal | EdgeKind::Nested => ps.push(&p.id),
                EdgeKind::Link => ls.push(&p.id),
            }
        }
        let mut fs: Vec<StoredField<'_>> = Vec::with_capacity(e.fields.len() + e.labels.len());
        for l in e.labels.iter().skip(1) {
            fs.push(StoredField::Text("Label", l));
        }
        // `typed` follows `fields` in order (`Event::typed`): each typed value goes with the
        // next field of its key.
        let mut typed = e.typed.iter().peekable();
        for (k, v) in &e.fields {
            match typed.peek() {
                Some((tk, tv)) if tk == k => {
                    fs.push(StoredField::Typed(k, v, tv));
                    typed.next();
                }
                _ => fs.push(StoredField::Text(k, v)),
            }
        }
        let json = |empty: bool, s: &dyn Fn() -> String| (!empty).then(s);
        Row {
            task,
            e,
            hrt: e.hrt_ns.map(|h| i64::try_from(h).unwrap_or(i64::MAX)),
            tid: e.tid.map(|t| i64::try_from(t).unwrap_or(i64::MAX)),
            parents: json(ps.is_empty(), &|| {
                serde_json::to_string(&ps).expect("strings serialize")
            }),
            links: json(ls.is_empty(), &|| {
                serde_json::to_string(&ls).expect("strings serialize")
            }),
            fields: json(fs.is_empty(), &|| {
                serde_json::to_string(&fs).expect("strings serialize")
            }),
        }
    }

    /// The stored content of this row (the columns of [`STORED_COLUMNS`]), to compare with a
    /// row read back.
    fn content(&self) -> Content {
        let e = self.e;
        (
            e.timestamp_ns,
            self.hrt,
            e.agent.clone(),
            e.labels.first().cloned(),
            e.host.clone(),
            e.process.clone(),
            e.pid.map(i64::from),
            self.tid,
            e.thread_name.clone(),
            self.parents.clone(),
            self.links.clone(),
            self.fields.clone(),
        )
    }

    fn push_args<'a>(&'a self, out: &mut Vec<&'a dyn rusqlite::ToSql>) {
        let e = self.e;
        out.extend_from_slice(&[
            &self.task as &dyn rusqlite::ToSql,
            &e.id,
            &e.timestamp_ns,
            &self.hrt,
            &e.agent,
            e.labels
                .first()
                .map_or(&rusqlite::types::Null as &dyn rusqlite::ToSql, |l| {
                    l as &dyn rusqlite::ToSql
                }),
            &e.host,
            &e.process,
            &e.pid,
            &self.tid,
            &e.thread_name,
            &self.parents,
            &self.links,
            &self.fields,
        ]);
    }
}

/// The id a task is shown and named by, for the task id `stored` of the `tasks` table.
///
/// A task made from an OTLP trace is stored under the 20-byte TaskId `trace-id ‖ 00000000`
/// (`causal::w3c::task_from_trace_id`, `docs/otlp-mapping.md`): 40 hex digits where a Jaeger or
/// OpenTelemetry user knows the 32-digit W3C trace id. Such an id is shown as that trace id: a
/// 40-digit id is shown as its first 32 digits exactly when those 32 digits, read as a trace id,
/// map back to it (it ends in 8 zeros and its first 16 digits are not all zero). Every other id
/// (X-Trace TaskIds of 8, 16, 24 or 40 digits) is shown as stored. [`stored_task_id`] is the
/// inverse; `Store`'s read methods accept both forms.
pub fn display_task_id(stored: &str) -> &str {
    if stored.len() == 40 && stored.ends_with("00000000") {
        let trace = &stored[..32];
        if stored_task_id(trace) == stored {
            return trace;
        }
    }
    stored
}

/// The stored task id for an id as a user gives it: trimmed and in uppercase; 32 hex digits (a
/// W3C trace id, either case) become the TaskId that trace id maps to
/// (`causal::w3c::task_from_trace_id`: `trace-id ‖ 00000000`, or the last 16 digits when the
/// first 16 are zero). Inverse of [`display_task_id`]; an all-zero trace id stays as given.
pub fn stored_task_id(id: &str) -> String {
    let u = id.trim().to_ascii_uppercase();
    if u.len() == 32 {
        let mut trace = [0u8; 16];
        let hex = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
        let ok = u
            .as_bytes()
            .chunks_exact(2)
            .zip(trace.iter_mut())
            .all(|(pair, b)| match (hex(pair[0]), hex(pair[1])) {
                (Some(h), Some(l)) => {
                    *b = h << 4 | l;
                    true
                }
                _ => false,
            });
        if ok && let Some(task) = causal::w3c::task_from_trace_id(&trace) {
            return task.to_hex();
        }
    }
    u
}

/// One row of `sightline tasks`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TaskSummary {
    /// Task id (uppercase hex) as shown: [`display_task_id`] of the stored id (the 32-digit
    /// trace id for an OTLP trace).
    pub task_id: String,
    /// When the collector first stored an event of this task, ns since the Unix epoch.
    pub received_ns: i64,
    /// Earliest event timestamp, ns since the Unix epoch.
    pub first_ts_ns: Option<i64>,
    /// Latest event timestamp, ns.
    pub last_ts_ns: Option<i64>,
    /// Events stored: each distinct event once (an identical copy delivered again is not
    /// stored), plus the other versions of conflicting ones.
    pub events: i64,
    /// The `Title` key's value, else the label of the earliest labelled event.
    pub title: Option<String>,
    /// Hosts that reported events, sorted.
    pub hosts: Vec<String>,
    /// Services (agents: X-Trace `Agent`, OTLP `service.name`) that reported events, sorted.
    pub services: Vec<String>,
    /// Events that report an error (OTLP status `error`).
    pub errors: i64,
}

impl TaskSummary {
    /// The task's first-seen time: its earliest event timestamp, else when it was received (ns).
    pub fn first_seen_ns(&self) -> i64 {
        self.first_ts_ns.unwrap_or(self.received_ns)
    }

    /// Duration from the earliest to the latest event, ns.
    pub fn duration_ns(&self) -> Option<i64> {
        Some(self.last_ts_ns? - self.first_ts_ns?)
    }
}

/// Filters of [`Store::tasks`]; `None` means no filter.
#[derive(Debug, Clone, Default)]
pub struct TaskFilter {
    /// Only the task with this exact id, in either form ([`stored_task_id`]; no prefixes).
    pub task_id: Option<String>,
    /// Only tasks first seen at or after this time (ns since the Unix epoch).
    pub since_ns: Option<i64>,
    /// Only tasks first seen before this time (ns).
    pub until_ns: Option<i64>,
    /// Only tasks with this `Tag` value (exact).
    pub tag: Option<String>,
    /// Only tasks whose title contains this text (case-insensitive for ASCII).
    pub title: Option<String>,
    /// Only tasks with an event from this service (agent, exact).
    pub service: Option<String>,
    /// Only tasks with this operation (exact): an OTLP span name or an X-Trace label.
    pub operation: Option<String>,
    /// Only tasks with an event having every one of these fields (key, value), each exact (OTLP
    /// attributes as their text; values longer than [`MAX_INDEXED_VALUE`] are not indexed).
    pub attributes: Vec<(String, String)>,
    /// Only tasks lasting at least this long (ns, earliest to latest event).
    pub min_duration_ns: Option<i64>,
    /// Only tasks lasting at most this long (ns).
    pub max_duration_ns: Option<i64>,
    /// Only tasks with at least one error event.
    pub errors: bool,
    /// Which tasks `limit` keeps and how they are ordered.
    pub sort: TaskSort,
    /// At most this many tasks: the most recent ones ([`TaskSort::Start`]) or the longest
    /// ([`TaskSort::Duration`]).
    pub limit: Option<usize>,
}

/// The order of [`Store::tasks`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TaskSort {
    /// By first-seen time, oldest first (the limit keeps the most recent).
    #[default]
    Start,
    /// By duration, longest first (the limit keeps the longest); tasks without a duration last.
    Duration,
}

/// The background checkpointer of [`Store::start_checkpointer`]; stops when dropped.
#[derive(Debug)]
pub struct Checkpointer {
    stop: std::sync::Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        let (lock, cv) = &*self.stop;
        *lock.lock().unwrap_or_else(|p| p.into_inner()) = true;
        cv.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// What one [`Store::insert`] wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InsertStats {
    /// Events written (new events, and new versions of conflicting ones).
    pub events: usize,
    /// Distinct tasks among the events written.
    pub tasks: usize,
    /// Events identical to one already stored (or earlier in the batch): not written.
    pub duplicates: usize,
    /// Events whose id was already stored (or earlier in the batch) with different content:
    /// written as another version, so both are kept.
    pub conflicts: usize,
}

/// The store: an open SQLite connection.
#[derive(Debug)]
pub struct Store {
    conn: Connection,
    path: PathBuf,
}

fn sql(what: &'static str) -> impl FnOnce(rusqlite::Error) -> StoreError {
    move |source| StoreError::Sql { what, source }
}

/// Rows of a search table written at once by one multi-row statement of [`insert_rows`].
const SEARCH_ROWS_PER_INSERT: usize = 64;

/// Writes `rows` (each `N` values, in the columns `head` names: `INSERT … INTO t(a, b)`) with
/// [`SEARCH_ROWS_PER_INSERT`] rows per statement; `what` names the step in errors.
fn insert_rows<const N: usize>(
    tx: &rusqlite::Transaction<'_>,
    head: &str,
    rows: &[[&dyn rusqlite::ToSql; N]],
    what: &'static str,
) -> Result<(), StoreError> {
    let values = |n: usize| {
        (0..n)
            .map(|r| {
                let cols: Vec<String> = (1..=N).map(|c| format!("?{}", r * N + c)).collect();
                format!("({})", cols.join(", "))
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut chunks = rows.chunks_exact(SEARCH_ROWS_PER_INSERT);
    if rows.len() >= SEARCH_ROWS_PER_INSERT {
        let mut many = tx
            .prepare_cached(&format!("{head} VALUES {}", values(SEARCH_ROWS_PER_INSERT)))
            .map_err(sql(what))?;
        let mut args: Vec<&dyn rusqlite::ToSql> = Vec::with_capacity(SEARCH_ROWS_PER_INSERT * N);
        for chunk in &mut chunks {
            args.clear();
            for r in chunk {
                args.extend_from_slice(r);
            }
            many.execute(args.as_slice()).map_err(sql(what))?;
        }
    }
    if !chunks.remainder().is_empty() {
        let mut one = tx
            .prepare_cached(&format!("{head} VALUES {}", values(1)))
            .map_err(sql(what))?;
        for r in chunks.remainder() {
            one.execute(&r[..]).map_err(sql(what))?;
        }
    }
    Ok(())
}

/// FNV-1a (Fowler, Noll, Vo; 64-bit offset basis and prime) as a [`std::hash::Hasher`]: the
/// writer's per-batch maps are keyed by short ids it produced or received, where SipHash's
/// flooding resistance buys nothing and cost ~2% of the writer's time.
#[derive(Clone, Copy)]
struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Fnv1a {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }
}

impl std::hash::Hasher for Fnv1a {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

/// A map of the writer's per-batch bookkeeping, hashed with [`Fnv1a`].
type FastMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<Fnv1a>>;

/// `items` mapped by `row` to (text, task) rows, deduplicated and sorted by text, then task.
/// Each distinct text is compared only while sorting the distinct texts; the rows are then
/// sorted by the text's rank, an integer.
fn sorted_by_text<'a, T>(items: &[T], row: impl Fn(&T) -> (&'a str, i64)) -> Vec<(&'a str, i64)> {
    let mut key: FastMap<&'a str, usize> = FastMap::default();
    let mut texts: Vec<&'a str> = Vec::new();
    let mut pairs: Vec<(usize, i64)> = items
        .iter()
        .map(|it| {
            let (t, id) = row(it);
            let k = *key.entry(t).or_insert_with(|| {
                texts.push(t);
                texts.len() - 1
            });
            (k, id)
        })
        .collect();
    let mut order: Vec<usize> = (0..texts.len()).collect();
    order.sort_unstable_by_key(|&k| texts[k]);
    let mut rank = vec![0; texts.len()];
    for (r, &k) in order.iter().enumerate() {
        rank[k] = r;
    }
    for p in &mut pairs {
        p.0 = rank[p.0];
    }
    pairs.sort_unstable();
    pairs.dedup();
    pairs
        .into_iter()
        .map(|(r, id)| (texts[order[r]], id))
        .collect()
}

/// Per-task aggregate of one batch.
#[derive(Default)]
struct Agg<'a> {
    first: Option<i64>,
    last: Option<i64>,
    events: i64,
    title: Option<(i64, i64, &'a str)>, // (rank, ts, text)
    hosts: Vec<&'a str>,
    tags: Vec<&'a str>,
    errors: i64,
    services: Vec<&'a str>,
}

/// Which of `events` to write: `(keep, duplicates, conflicts)`. An event is a duplicate when an
/// identical one (every stored column equal) is already stored in its task or comes earlier in
/// the batch; a conflict when only events with its id and different content are.
///
/// Stored events are looked up once per task already in the store, with one query for all of
/// the batch's ids of that task (a new task needs no lookup at all).
fn dedupe(
    tx: &rusqlite::Transaction<'_>,
    events: &[Event],
) -> Result<(Vec<bool>, usize, usize), StoreError> {
    let mut keep = vec![true; events.len()];
    // For each kept event, the previous kept event of its task with the same id.
    let mut next: Vec<Option<usize>> = vec![None; events.len()];
    let (mut duplicates, mut conflicts) = (0, 0);
    // The batch's events per task, in order of first appearance.
    let mut by_task: FastMap<&str, Vec<usize>> = FastMap::default();
    for (i, e) in events.iter().enumerate() {
        by_task.entry(e.task.as_str()).or_default().push(i);
    }
    let mut task_q = tx
        .prepare_cached("SELECT id FROM tasks WHERE task_id = ?1")
        .map_err(sql("preparing the task lookup"))?;
    let mut event_q = tx
        .prepare_cached(&format!(
            "SELECT event_id, {STORED_COLUMNS} FROM events
             WHERE task = ?1 AND event_id IN (SELECT value FROM json_each(?2))"
        ))
        .map_err(sql("preparing the event lookup"))?;
    for (task, idx) in by_task {
        // What is stored already under these ids: event id → contents.
        let mut stored: HashMap<String, Vec<Content>> = HashMap::new();
        let task_row: Option<i64> = task_q
            .query_row([task], |r| r.get(0))
            .optional()
            .map_err(sql("looking up a task"))?;
        if let Some(t) = task_row {
            let ids: Vec<&str> = idx.iter().map(|&i| events[i].id.as_str()).collect();
            let ids = serde_json::to_string(&ids).expect("strings serialize");
            let mut rows = event_q
                .query(params![t, ids])
                .map_err(sql("looking up stored events"))?;
            while let Some(r) = rows.next().map_err(sql("reading stored events"))? {
                let id: String = r.get(0).map_err(sql("reading stored events"))?;
                let c = content_of(r, 1).map_err(sql("reading stored events"))?;
                stored.entry(id).or_default().push(c);
            }
        }
        // Kept events of this batch by id (compared as events: no row content is built for a
        // new task's events): the first kept event of each id, and the later ones chained
        // through `next` (no allocation per event: a `Vec` per id was ~5% of the writer's time).
        let mut seen: FastMap<&str, usize> = FastMap::default();
        seen.reserve(idx.len());
        for i in idx {
            let e = &events[i];
            let mut same_id = false;
            if let Some(&first) = seen.get(e.id.as_str()) {
                same_id = true;
                let mut j = Some(first);
                let mut found = false;
                while let Some(k) = j {
                    if events[k] == *e {
                        found = true;
                        break;
                    }
                    j = next[k];
                }
                if found {
                    keep[i] = false;
                    duplicates += 1;
                    continue;
                }
            }
            if let Some(versions) = stored.get(&e.id) {
                same_id = true;
                if versions.contains(&Row::new(e, 0).content()) {
                    keep[i] = false;
                    duplicates += 1;
                    continue;
                }
            }
            if same_id {
                conflicts += 1;
            }
            match seen.entry(e.id.as_str()) {
                std::collections::hash_map::Entry::Occupied(mut o) => {
                    // Chained in front: the chain is searched whole, so order does not matter.
                    next[i] = Some(*o.get());
                    o.insert(i);
                }
                std::collections::hash_map::Entry::Vacant(v) => {
                    v.insert(i);
                }
            }
        }
    }
    Ok((keep, duplicates, conflicts))
}

impl Store {
    /// Opens (creating when absent) the store at `path`: WAL journal, `synchronous=NORMAL` (a
    /// committed batch survives a crash of the collector; see the doc for power loss), a 5 s busy
    /// timeout so `import` and `collect` can share a file.
    ///
    /// # Errors
    /// [`StoreError::Open`], [`StoreError::SchemaVersion`], [`StoreError::Sql`].
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let open_err = |source| StoreError::Open {
            path: path.to_path_buf(),
            source,
        };
        let mut conn = Connection::open(path).map_err(open_err)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(open_err)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(open_err)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(open_err)?;
        // 64 MiB of page cache (a negative size is in KiB) and checkpoints every 4,096 pages
        // (16 MiB of WAL) instead of 1,000: fewer, larger checkpoints under sustained ingest.
        conn.pragma_update(None, "cache_size", -65_536)
            .map_err(open_err)?;
        conn.pragma_update(None, "wal_autocheckpoint", 4096)
            .map_err(open_err)?;
        conn.execute_batch(SCHEMA).map_err(open_err)?;
        let found: Option<String> = conn
            .query_row(
                "SELECT value FROM meta WHERE key = 'schema_version'",
                [],
                |r| r.get(0),
            )
            .optional()
            .map_err(sql("reading the schema version"))?;
        match found {
            None => {
                conn.execute(
                    "INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', ?1)",
                    [SCHEMA_VERSION.to_string()],
                )
                .map_err(sql("writing the schema version"))?;
                conn.execute_batch(TASK_INDEXES).map_err(open_err)?;
            }
            Some(v) if v == SCHEMA_VERSION.to_string() => {
                conn.execute_batch(TASK_INDEXES).map_err(open_err)?;
            }
            Some(v)
                if v.parse::<u32>()
                    .is_ok_and(|n| (1..SCHEMA_VERSION).contains(&n)) =>
            {
                migrate(&mut conn, v.parse().expect("checked"))?;
                conn.execute_batch(TASK_INDEXES).map_err(open_err)?;
            }
            Some(found) => {
                return Err(StoreError::SchemaVersion {
                    path: path.to_path_buf(),
                    found,
                    expected: SCHEMA_VERSION,
                });
            }
        }
        Ok(Store {
            conn,
            path: path.to_path_buf(),
        })
    }

    /// Moves WAL checkpoints off this connection: turns automatic checkpoints off here and starts
    /// a thread that runs `PRAGMA wal_checkpoint(PASSIVE)` on its own connection every 200 ms, so
    /// the copying of WAL frames into the database and its `fsync` do not stall this connection's
    /// writes (a passive checkpoint never blocks a writer). The WAL is truncated to 64 MiB when it
    /// restarts. Stops (after a last checkpoint) when the returned value is dropped.
    ///
    /// # Errors
    /// [`StoreError::Open`] when the second connection cannot be opened, [`StoreError::Sql`],
    /// [`StoreError::Thread`].
    pub fn start_checkpointer(&self) -> Result<Checkpointer, StoreError> {
        let open_err = |source| StoreError::Open {
            path: self.path.clone(),
            source,
        };
        let conn = Connection::open(&self.path).map_err(open_err)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(open_err)?;
        self.conn
            .pragma_update(None, "wal_autocheckpoint", 0)
            .map_err(sql("turning automatic checkpoints off"))?;
        self.conn
            .pragma_update(None, "journal_size_limit", 64 << 20)
            .map_err(sql("limiting the WAL size"))?;
        let stop = std::sync::Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("sightline-ckpt".into())
            .spawn(move || {
                let (lock, cv) = &*stop2;
                let mut stopped = lock.lock().unwrap_or_else(|p| p.into_inner());
                loop {
                    let (g, _) = cv
                        .wait_timeout(stopped, std::time::Duration::from_millis(200))
                        .unwrap_or_else(|p| p.into_inner());
                    stopped = g;
                    // A checkpoint that fails (busy) is retried at the next tick.
                    let _ = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
                    if *stopped {
                        break;
                    }
                }
            })
            .map_err(|e| StoreError::Thread(e.to_string()))?;
        Ok(Checkpointer {
            stop,
            thread: Some(thread),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `events` in one transaction; `received_ns` is the arrival time (ns since the Unix
    /// epoch) recorded for tasks seen for the first time. Either every event is stored or none.
    ///
    /// Idempotent: an event identical to one already stored in its task (or earlier in
    /// `events`) is not written again and is counted in [`InsertStats::duplicates`], so a retried
    /// export or a second import changes no count, edge or view. An event whose id is stored with
    /// different content is written as another version ([`InsertStats::conflicts`]); both are
    /// kept, and `TaskGraph::build` uses the first and reports the conflict.
    ///
    /// # Errors
    /// [`StoreError::Sql`] (e.g. the disk is full); the transaction is rolled back.
    pub fn insert(
        &mut self,
        events: &[Event],
        received_ns: i64,
    ) -> Result<InsertStats, StoreError> {
        if events.is_empty() {
            return Ok(InsertStats::default());
        }
        let tx = self
            .conn
            .transaction()
            .map_err(sql("beginning a transaction"))?;
        // Idempotence: an event identical to one already stored (an exporter's retry, a file
        // imported twice) is not written again; one with the same id and different content is
        // written as another version (both kept; `TaskGraph::build` reports it).
        let (keep, duplicates, conflicts) = dedupe(&tx, events)?;
        let events: Vec<&Event> = events
            .iter()
            .zip(&keep)
            .filter(|(_, k)| **k)
            .map(|(e, _)| e)
            .collect();
        if events.is_empty() {
            tx.commit().map_err(sql("committing a batch"))?;
            return Ok(InsertStats {
                duplicates,
                conflicts,
                ..InsertStats::default()
            });
        }
        // Per-task aggregates in order of first appearance; `slot[i]` indexes event i's task.
        // Events of one task usually come in runs, so the previous event's task is tried before
        // the map (hashing every event's task id twice was ~4% of the writer's time).
        let mut aggs: Vec<(&str, Agg<'_>)> = Vec::new();
        let mut index: FastMap<&str, usize> = FastMap::default();
        let mut slot: Vec<usize> = Vec::with_capacity(events.len());
        let mut last: Option<(&str, usize)> = None;
        // The batch's search rows (operation or attribute, task slot), sorted and deduplicated
        // once the tasks have their row ids.
        let mut ops: Vec<(&str, usize)> = Vec::new();
        // The batch's (service, operation) pairs (`service_operations`), deduplicated once.
        let mut service_ops: Vec<(&str, &str)> = Vec::new();
        let mut attrs: Vec<(&str, &str, usize)> = Vec::new();
        for &e in &events {
            let task = e.task.as_str();
            let i = match last {
                Some((t, i)) if t == task => i,
                _ => {
                    let i = *index.entry(task).or_insert_with(|| {
                        aggs.push((task, Agg::default()));
                        aggs.len() - 1
                    });
                    last = Some((task, i));
                    i
                }
            };
            slot.push(i);
            let a = &mut aggs[i].1;
            a.events += 1;
            if let Some(t) = e.timestamp_ns {
                a.first = Some(a.first.map_or(t, |f| f.min(t)));
                a.last = Some(a.last.map_or(t, |l| l.max(t)));
            }
            let ts = e.timestamp_ns.unwrap_or(i64::MAX);
            let cand = e
                .field("Title")
                .map(|t| (0, ts, t))
                .or_else(|| e.label().map(|l| (1, ts, l)));
            if let Some(c) = cand
                && a.title.is_none_or(|cur| (c.0, c.1) < (cur.0, cur.1))
            {
                a.title = Some(c);
            }
            if let Some(h) = e.host.as_deref()
                && !a.hosts.contains(&h)
            {
                a.hosts.push(h);
            }
            // Attributes are indexed for OTLP spans only (their start events carry the span's,
            // scope's and resource's attributes, which repeat across a trace's spans): X-Trace
            // fields are mostly per-event data (byte counts, offsets), and indexing them cost
            // the store writer ~7x its time per event (605k -> 87k events per CPU-second).
            let indexed = e.field("span.name").is_some();
            for (k, v) in &e.fields {
                if k == "Tag" && !a.tags.contains(&v.as_str()) {
                    a.tags.push(v);
                }
                if indexed && v.len() <= MAX_INDEXED_VALUE {
                    attrs.push((k, v, i));
                }
            }
            if let Some(s) = e.agent.as_deref()
                && !a.services.contains(&s)
            {
                a.services.push(s);
            }
            if let Some(o) = operation_of(e) {
                ops.push((o, i));
            }
            if let (Some(s), Some(o)) = (e.agent.as_deref(), listed_operation(e))
                && service_ops.last() != Some(&(s, o))
            {
                service_ops.push((s, o));
            }
            if is_error(e) {
                a.errors += 1;
            }
        }

        let mut ids: Vec<i64> = Vec::with_capacity(aggs.len());
        {
            let mut up = tx
                .prepare_cached(
                    "INSERT INTO tasks(task_id, received_ns, first_ts_ns, last_ts_ns, events, title, title_rank, title_ts_ns, errors)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
                     ON CONFLICT(task_id) DO UPDATE SET
                       errors = tasks.errors + excluded.errors,
                       first_ts_ns = min(coalesce(tasks.first_ts_ns, excluded.first_ts_ns), coalesce(excluded.first_ts_ns, tasks.first_ts_ns)),
                       last_ts_ns = max(coalesce(tasks.last_ts_ns, excluded.last_ts_ns), coalesce(excluded.last_ts_ns, tasks.last_ts_ns)),
                       events = tasks.events + excluded.events,
                       title = CASE WHEN excluded.title IS NOT NULL AND (tasks.title IS NULL
                           OR excluded.title_rank < tasks.title_rank
                           OR (excluded.title_rank = tasks.title_rank AND excluded.title_ts_ns < tasks.title_ts_ns))
                         THEN excluded.title ELSE tasks.title END,
                       title_ts_ns = CASE WHEN excluded.title IS NOT NULL AND (tasks.title IS NULL
                           OR excluded.title_rank < tasks.title_rank
                           OR (excluded.title_rank = tasks.title_rank AND excluded.title_ts_ns < tasks.title_ts_ns))
                         THEN excluded.title_ts_ns ELSE tasks.title_ts_ns END,
                       title_rank = CASE WHEN excluded.title IS NOT NULL AND (tasks.title IS NULL
                           OR excluded.title_rank < tasks.title_rank
                           OR (excluded.title_rank = tasks.title_rank AND excluded.title_ts_ns < tasks.title_ts_ns))
                         THEN excluded.title_rank ELSE tasks.title_rank END
                     RETURNING id",
                )
                .map_err(sql("preparing the task upsert"))?;
            let mut host = tx
                .prepare_cached("INSERT OR IGNORE INTO task_hosts(task, host) VALUES (?1, ?2)")
                .map_err(sql("preparing the host insert"))?;
            let mut tag = tx
                .prepare_cached("INSERT OR IGNORE INTO task_tags(task, tag) VALUES (?1, ?2)")
                .map_err(sql("preparing the tag insert"))?;
            let mut service = tx
                .prepare_cached(
                    "INSERT OR IGNORE INTO task_services(service, task) VALUES (?1, ?2)",
                )
                .map_err(sql("preparing the service insert"))?;
            for (task, a) in &aggs {
                let (rank, tts, title) = match a.title {
                    Some((r, t, s)) => (Some(r), Some(t), Some(s)),
                    None => (None, None, None),
                };
                let id: i64 = up
                    .query_row(
                        params![
                            task,
                            received_ns,
                            a.first,
                            a.last,
                            a.events,
                            title,
                            rank,
                            tts,
                            a.errors
                        ],
                        |r| r.get(0),
                    )
                    .map_err(sql("upserting a task"))?;
                for h in &a.hosts {
                    host.execute(params![id, h])
                        .map_err(sql("inserting a task host"))?;
                }
                for t in &a.tags {
                    tag.execute(params![id, t])
                        .map_err(sql("inserting a task tag"))?;
                }
                for s in &a.services {
                    service
                        .execute(params![s, id])
                        .map_err(sql("inserting a task service"))?;
                }
                ids.push(id);
            }
            // The search rows of the whole batch, sorted by their key and written many per
            // statement: each task's rows land all over the index (keyed by what is searched),
            // and in key order consecutive rows share pages. Inserted one by one in hash order
            // (and gathered in hash sets) they cost the writer 3x its time per event (605k -> 184k events per CPU-second
            // with 1,000 distinct X-Trace labels per task; bench/collector-bench.sh).
            // Sorted by (operation, task) without comparing the operation text for every row:
            // each distinct operation gets a number in text order, and the rows are sorted as
            // (number, task) pairs (sorting 16k rows by their text was ~4% of the writer's time).
            let ops = sorted_by_text(&ops, |&(o, i)| (o, ids[i]));
            let rows: Vec<[&dyn rusqlite::ToSql; 2]> =
                ops.iter().map(|(o, id)| [o as _, id as _]).collect();
            insert_rows(
                &tx,
                "INSERT OR IGNORE INTO task_operations(operation, task)",
                &rows,
                "inserting task operations",
            )?;
            let mut attrs: Vec<(&str, &str, i64)> =
                attrs.iter().map(|&(k, v, i)| (k, v, ids[i])).collect();
            attrs.sort_unstable();
            attrs.dedup();
            let rows: Vec<[&dyn rusqlite::ToSql; 3]> = attrs
                .iter()
                .map(|(k, v, id)| [k as _, v as _, id as _])
                .collect();
            insert_rows(
                &tx,
                "INSERT OR IGNORE INTO task_attributes(key, value, task)",
                &rows,
                "inserting task attributes",
            )?;
            // Mostly repeats of a few pairs: deduplicated by hashing, then the few sorted.
            let mut distinct: FastMap<(&str, &str), ()> = FastMap::default();
            service_ops.retain(|&p| distinct.insert(p, ()).is_none());
            service_ops.sort_unstable();
            let rows: Vec<[&dyn rusqlite::ToSql; 2]> =
                service_ops.iter().map(|(s, o)| [s as _, o as _]).collect();
            insert_rows(
                &tx,
                "INSERT OR IGNORE INTO service_operations(service, operation)",
                &rows,
                "inserting service operations",
            )?;
            // Rows are inserted ROWS_PER_INSERT at a time with one multi-row INSERT: a
            // statement step costs about as much as binding a row, so this roughly halves the
            // per-event cost of the store.
            let mut many = tx
                .prepare_cached(&multi_insert(ROWS_PER_INSERT))
                .map_err(sql("preparing the event insert"))?;
            let mut one = tx
                .prepare_cached(&multi_insert(1))
                .map_err(sql("preparing the event insert"))?;
            let rows: Vec<Row<'_>> = events
                .iter()
                .zip(&slot)
                .map(|(&e, &i)| Row::new(e, ids[i]))
                .collect();
            let mut chunks = rows.chunks_exact(ROWS_PER_INSERT);
            let mut args: Vec<&dyn rusqlite::ToSql> = Vec::with_capacity(ROWS_PER_INSERT * COLUMNS);
            for chunk in &mut chunks {
                args.clear();
                for r in chunk {
                    r.push_args(&mut args);
                }
                many.execute(args.as_slice())
                    .map_err(sql("inserting events"))?;
            }
            for r in chunks.remainder() {
                args.clear();
                r.push_args(&mut args);
                one.execute(args.as_slice())
                    .map_err(sql("inserting an event"))?;
            }
        }
        tx.commit().map_err(sql("committing a batch"))?;
        Ok(InsertStats {
            events: events.len(),
            tasks: aggs.len(),
            duplicates,
            conflicts,
        })
    }

    /// Resolves a task id or a unique prefix of one (hex, either case) to the full id as shown
    /// ([`display_task_id`]). A whole id may be given in either form of an OTLP trace's task: the
    /// 32-digit trace id or the stored 40 digits ([`stored_task_id`]); a prefix matches the
    /// stored id, so a prefix of either form works.
    ///
    /// # Errors
    /// [`StoreError::NoSuchTask`], [`StoreError::AmbiguousTask`], [`StoreError::Sql`].
    pub fn resolve_task(&self, prefix: &str) -> Result<String, StoreError> {
        let p = prefix.trim().to_ascii_uppercase();
        let exact: Option<String> = self
            .conn
            .query_row(
                "SELECT task_id FROM tasks WHERE task_id = ?1",
                [stored_task_id(&p)],
                |r| r.get(0),
            )
            .optional()
            .map_err(sql("looking up a task"))?;
        if let Some(t) = exact {
            return Ok(display_task_id(&t).to_string());
        }
        let escaped = p
            .replace('\\', "\\\\")
            .replace('%', "\\%")
            .replace('_', "\\_");
        let mut st = self
            .conn
            .prepare("SELECT task_id FROM tasks WHERE task_id LIKE ?1 || '%' ESCAPE '\\' ORDER BY task_id LIMIT 6")
            .map_err(sql("preparing the task lookup"))?;
        let found: Vec<String> = st
            .query_map([&escaped], |r| r.get(0))
            .map_err(sql("looking up a task prefix"))?
            .collect::<Result<_, _>>()
            .map_err(sql("reading task ids"))?;
        match found.len() {
            0 => Err(StoreError::NoSuchTask(prefix.to_string())),
            1 => Ok(display_task_id(&found[0]).to_string()),
            _ => Err(StoreError::AmbiguousTask {
                // The lookup above stops at 6; the message says how many really match.
                count: self
                    .conn
                    .query_row(
                        "SELECT count(*) FROM tasks WHERE task_id LIKE ?1 || '%' ESCAPE '\\'",
                        [&escaped],
                        |r| r.get::<_, i64>(0),
                    )
                    .map_err(sql("counting tasks with a prefix"))? as usize,
                prefix: prefix.to_string(),
                examples: found
                    .iter()
                    .take(3)
                    .map(|t| display_task_id(t))
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
        }
    }

    /// All stored events of task `task_id` (exact id, either form: [`stored_task_id`]), in
    /// arrival order. Their `task` is the id as shown ([`display_task_id`]).
    ///
    /// # Errors
    /// [`StoreError::Sql`].
    pub fn load_task(&self, task_id: &str) -> Result<Vec<Event>, StoreError> {
        let stored = stored_task_id(task_id);
        let shown = display_task_id(&stored);
        let mut st = self
            .conn
            .prepare(
                "SELECT e.event_id, e.ts_ns, e.hrt_ns, e.agent, e.label, e.host, e.process, e.pid, e.tid, e.thread_name,
                        e.parents, e.links, e.fields
                 FROM events e JOIN tasks t ON e.task = t.id WHERE t.task_id = ?1 ORDER BY e.seq",
            )
            .map_err(sql("preparing the event query"))?;
        let rows = st
            .query_map([&stored], |r| {
                let parents: Option<String> = r.get(10)?;
                let links: Option<String> = r.get(11)?;
                let fields: Option<String> = r.get(12)?;
                let label: Option<String> = r.get(4)?;
                let hrt: Option<i64> = r.get(2)?;
                let tid: Option<i64> = r.get(8)?;
                let mut ev = Event {
                    task: shown.to_string(),
                    id: r.get(0)?,
                    timestamp_ns: r.get(1)?,
                    hrt_ns: hrt.map(|h| h as u64),
                    agent: r.get(3)?,
                    labels: label.into_iter().collect(),
                    host: r.get(5)?,
                    process: r.get(6)?,
                    pid: r.get(7)?,
                    tid: tid.map(|t| t as u64),
                    thread_name: r.get(9)?,
                    ..Event::default()
                };
                let list = |s: Option<String>| -> Vec<String> {
                    s.and_then(|s| serde_json::from_str(&s).ok())
                        .unwrap_or_default()
                };
                ev.parents
                    .extend(list(parents).into_iter().map(Parent::causal));
                ev.parents.extend(list(links).into_iter().map(Parent::link));
                let pairs: Vec<LoadedField> = fields
                    .and_then(|s| serde_json::from_str(&s).ok())
                    .unwrap_or_default();
                for f in pairs {
                    match f {
                        LoadedField::Text(k, v) => {
                            if k == "Label" && !ev.labels.is_empty() && ev.fields.is_empty() {
                                ev.labels.push(v);
                            } else {
                                ev.fields.push((k, v));
                            }
                        }
                        LoadedField::Typed(k, v, t) => {
                            ev.typed.push((k.clone(), t));
                            ev.fields.push((k, v));
                        }
                    }
                }
                Ok(ev)
            })
            .map_err(sql("querying events"))?;
        rows.collect::<Result<_, _>>()
            .map_err(sql("reading events"))
    }

    /// Tasks matching `filter`, ordered by first-seen time (oldest first) or by duration (longest
    /// first), as [`TaskFilter::sort`] says.
    ///
    /// # Errors
    /// [`StoreError::Sql`].
    pub fn tasks(&self, filter: &TaskFilter) -> Result<Vec<TaskSummary>, StoreError> {
        let mut q = String::from(
            "SELECT t.task_id, t.received_ns, t.first_ts_ns, t.last_ts_ns, t.events, t.title,
                    (SELECT group_concat(host, char(10)) FROM (SELECT host FROM task_hosts h WHERE h.task = t.id ORDER BY host)),
                    (SELECT group_concat(service, char(10)) FROM (SELECT service FROM task_services s WHERE s.task = t.id ORDER BY service)),
                    t.errors
             FROM tasks t WHERE 1=1",
        );
        // Each filter binds its values as the next `?N` and appends its condition.
        let mut args: Vec<rusqlite::types::Value> = Vec::new();
        let mut bind = |v: rusqlite::types::Value| {
            args.push(v);
            format!("?{}", args.len())
        };
        let mut cond = |c: String| {
            q.push_str(" AND ");
            q.push_str(&c);
        };
        if let Some(t) = &filter.task_id {
            cond(format!("t.task_id = {}", bind(stored_task_id(t).into())));
        }
        if let Some(s) = filter.since_ns {
            cond(format!(
                "coalesce(t.first_ts_ns, t.received_ns) >= {}",
                bind(s.into())
            ));
        }
        if let Some(u) = filter.until_ns {
            cond(format!(
                "coalesce(t.first_ts_ns, t.received_ns) < {}",
                bind(u.into())
            ));
        }
        if let Some(tag) = &filter.tag {
            cond(format!(
                "EXISTS (SELECT 1 FROM task_tags g WHERE g.task = t.id AND g.tag = {})",
                bind(tag.clone().into())
            ));
        }
        if let Some(title) = &filter.title {
            cond(format!(
                "instr(lower(t.title), lower({})) > 0",
                bind(title.clone().into())
            ));
        }
        // Each search is one index lookup (`task_services`, `task_operations` and
        // `task_attributes` are keyed by what is searched), so a service and a time range
        // walk `tasks_by_first_seen` backwards and stop at the limit.
        if let Some(svc) = &filter.service {
            cond(format!(
                "t.id IN (SELECT task FROM task_services WHERE service = {})",
                bind(svc.clone().into())
            ));
        }
        if let Some(op) = &filter.operation {
            cond(format!(
                "t.id IN (SELECT task FROM task_operations WHERE operation = {})",
                bind(op.clone().into())
            ));
        }
        for (k, v) in &filter.attributes {
            let (k, v) = (bind(k.clone().into()), bind(v.clone().into()));
            cond(format!(
                "t.id IN (SELECT task FROM task_attributes WHERE key = {k} AND value = {v})"
            ));
        }
        if let Some(d) = filter.min_duration_ns {
            cond(format!(
                "t.last_ts_ns - t.first_ts_ns >= {}",
                bind(d.into())
            ));
        }
        if let Some(d) = filter.max_duration_ns {
            cond(format!(
                "t.last_ts_ns - t.first_ts_ns <= {}",
                bind(d.into())
            ));
        }
        if filter.errors {
            cond("t.errors > 0".to_string());
        }
        q.push_str(match filter.sort {
            TaskSort::Start => " ORDER BY coalesce(t.first_ts_ns, t.received_ns) DESC, t.task_id",
            TaskSort::Duration => {
                " ORDER BY (t.last_ts_ns - t.first_ts_ns) IS NULL, (t.last_ts_ns - t.first_ts_ns) DESC, t.task_id"
            }
        });
        if let Some(l) = filter.limit {
            // SQLite's LIMIT is a 64-bit signed integer; a larger value is no limit.
            q.push_str(&format!(" LIMIT {}", l.min(i64::MAX as usize)));
        }
        let mut st = self
            .conn
            .prepare(&q)
            .map_err(sql("preparing the task list"))?;
        let rows = st
            .query_map(rusqlite::params_from_iter(args), |r| {
                let hosts: Option<String> = r.get(6)?;
                let services: Option<String> = r.get(7)?;
                let lines = |s: Option<String>| -> Vec<String> {
                    s.map(|h| h.split('\n').map(str::to_string).collect())
                        .unwrap_or_default()
                };
                let stored: String = r.get(0)?;
                Ok(TaskSummary {
                    task_id: display_task_id(&stored).to_string(),
                    received_ns: r.get(1)?,
                    first_ts_ns: r.get(2)?,
                    last_ts_ns: r.get(3)?,
                    events: r.get(4)?,
                    title: r.get(5)?,
                    hosts: lines(hosts),
                    services: lines(services),
                    errors: r.get(8)?,
                })
            })
            .map_err(sql("listing tasks"))?;
        let mut v: Vec<TaskSummary> = rows
            .collect::<Result<_, _>>()
            .map_err(sql("reading tasks"))?;
        if filter.sort == TaskSort::Start {
            v.reverse();
        }
        Ok(v)
    }

    /// The open connection, for the read-only queries of [`crate::query`].
    pub(crate) fn conn(&self) -> &Connection {
        &self.conn
    }

    /// Deletes up to `max_tasks` of the oldest tasks (by first-seen time, as [`Store::tasks`]
    /// orders them) with every row that belongs to them, in one transaction: only those first
    /// seen before `before_ns` (ns since the Unix epoch) when it is given, else the oldest ones
    /// regardless of age. Returns how many were deleted (fewer than `max_tasks`: none older is
    /// left). Retention calls it in small steps between the writer's batches, so ingest never
    /// waits for a long delete (`docs/collector-store.md`, "Retention").
    ///
    /// # Errors
    /// [`StoreError::Sql`]; the transaction is rolled back.
    pub fn delete_oldest_tasks(
        &mut self,
        before_ns: Option<i64>,
        max_tasks: usize,
    ) -> Result<usize, StoreError> {
        let tx = self
            .conn
            .transaction()
            .map_err(sql("beginning a retention step"))?;
        tx.execute_batch("CREATE TEMP TABLE IF NOT EXISTS doomed(id INTEGER PRIMARY KEY); DELETE FROM temp.doomed;")
            .map_err(sql("preparing a retention step"))?;
        let n = tx
            .execute(
                "INSERT INTO temp.doomed(id) SELECT id FROM tasks
                 WHERE ?1 IS NULL OR coalesce(first_ts_ns, received_ns) < ?1
                 ORDER BY coalesce(first_ts_ns, received_ns) LIMIT ?2",
                params![before_ns, max_tasks.min(i64::MAX as usize) as i64],
            )
            .map_err(sql("choosing the tasks to delete"))?;
        if n > 0 {
            // The (service, operation) pairs of the doomed events: each is removed from
            // `service_operations` below unless an event of another task still has it.
            tx.execute_batch(&format!(
                "CREATE TEMP TABLE IF NOT EXISTS doomed_ops(service TEXT, operation TEXT, PRIMARY KEY(service, operation));
                 DELETE FROM temp.doomed_ops;
                 INSERT OR IGNORE INTO temp.doomed_ops(service, operation)
                   SELECT agent, op FROM (SELECT e.agent AS agent, {op} AS op FROM events e
                     WHERE e.task IN (SELECT id FROM temp.doomed) AND e.agent IS NOT NULL)
                   WHERE op IS NOT NULL;",
                op = crate::query::OPERATION
            ))
            .map_err(sql("listing the operations of old tasks"))?;
            tx.execute_batch(
                "DELETE FROM events WHERE task IN (SELECT id FROM temp.doomed);
                 DELETE FROM task_hosts WHERE task IN (SELECT id FROM temp.doomed);
                 DELETE FROM task_tags WHERE task IN (SELECT id FROM temp.doomed);
                 DELETE FROM task_services WHERE task IN (SELECT id FROM temp.doomed);
                 DELETE FROM task_operations WHERE task IN (SELECT id FROM temp.doomed);
                 DELETE FROM task_attributes WHERE task IN (SELECT id FROM temp.doomed);
                 DELETE FROM tasks WHERE id IN (SELECT id FROM temp.doomed);",
            )
            .map_err(sql("deleting old tasks"))?;
            // A pair stays while an event of a task of the service still names the operation
            // (the tasks of a service through `task_services`, their events by task).
            tx.execute_batch(&format!(
                "DELETE FROM service_operations WHERE (service, operation) IN
                   (SELECT service, operation FROM temp.doomed_ops)
                 AND NOT EXISTS (SELECT 1 FROM task_services ts JOIN events e ON e.task = ts.task
                   WHERE ts.service = service_operations.service AND e.agent = ts.service
                     AND {op} = service_operations.operation);
                 DELETE FROM temp.doomed_ops;",
                op = crate::query::OPERATION
            ))
            .map_err(sql("deleting the operations of old tasks"))?;
        }
        tx.execute_batch("DELETE FROM temp.doomed;")
            .map_err(sql("finishing a retention step"))?;
        tx.commit().map_err(sql("committing a retention step"))?;
        Ok(n)
    }

    /// The bytes of the database file in use: `(page_count - freelist_count) × page_size`.
    /// Pages freed by deletes are reused by later writes (the file itself does not shrink
    /// without `VACUUM`), so this is what `--max-store-size` bounds. The WAL is not counted.
    ///
    /// # Errors
    /// [`StoreError::Sql`].
    pub fn used_bytes(&self) -> Result<u64, StoreError> {
        let q = |p: &str| -> Result<i64, StoreError> {
            self.conn
                .query_row(&format!("PRAGMA {p}"), [], |r| r.get(0))
                .map_err(sql("reading the store size"))
        };
        let pages = q("page_count")? - q("freelist_count")?;
        Ok(u64::try_from(pages.max(0)).unwrap_or(0) * u64::try_from(q("page_size")?).unwrap_or(0))
    }

    /// Total events stored.
    ///
    /// # Errors
    /// [`StoreError::Sql`].
    pub fn event_count(&self) -> Result<i64, StoreError> {
        self.conn
            .query_row("SELECT count(*) FROM events", [], |r| r.get(0))
            .map_err(sql("counting events"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The schema version a store's `meta` table holds.
    fn schema_version(s: &Store) -> String {
        s.conn
            .query_row(
                "SELECT value FROM meta WHERE key = 'schema_version'",
                [],
                |r| r.get(0),
            )
            .unwrap()
    }

    fn ev(task: &str, id: &str, ts: i64, label: &str, parents: &[Parent]) -> Event {
        Event {
            task: task.into(),
            id: id.into(),
            timestamp_ns: Some(ts),
            labels: vec![label.into()],
            host: Some(format!("host-{}", id.len())),
            hrt_ns: Some(77),
            tid: Some(5),
            fields: vec![("k".into(), "v".into()), ("Tag".into(), "GC".into())],
            parents: parents.to_vec(),
            ..Event::default()
        }
    }

    #[test]
    fn events_round_trip_and_tasks_summarize() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(&dir.path().join("s.db")).unwrap();
        let a = ev("AAAA", "01", 100, "second label", &[]);
        let mut b = ev(
            "AAAA",
            "02",
            50,
            "first",
            &[Parent::causal("01"), Parent::link("09")],
        );
        b.labels.push("extra".into());
        let c = ev("BBBB", "03", 7, "other", &[]);
        assert_eq!(
            s.insert(&[a.clone(), b.clone(), c], 1).unwrap(),
            InsertStats {
                events: 3,
                tasks: 2,
                duplicates: 0,
                conflicts: 0
            }
        );
        let mut t = ev("AAAA", "04", 500, "late", &[Parent::causal("02")]);
        t.fields.push(("Title".into(), "The title".into()));
        s.insert(std::slice::from_ref(&t), 2).unwrap();
        assert_eq!(s.load_task("AAAA").unwrap(), vec![a, b, t]);
        let all = s.tasks(&TaskFilter::default()).unwrap();
        assert_eq!(all.len(), 2);
        let aaaa = &all[1];
        assert_eq!(aaaa.task_id, "AAAA");
        assert_eq!(
            (aaaa.first_ts_ns, aaaa.last_ts_ns, aaaa.events),
            (Some(50), Some(500), 3)
        );
        assert_eq!(aaaa.title.as_deref(), Some("The title"));
        assert_eq!(aaaa.hosts, vec!["host-2".to_string()]);
        assert_eq!(aaaa.received_ns, 1);
        assert_eq!(all[0].title.as_deref(), Some("other"));
        let f = |tf: TaskFilter| {
            s.tasks(&tf)
                .unwrap()
                .into_iter()
                .map(|t| t.task_id)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            f(TaskFilter {
                since_ns: Some(10),
                ..Default::default()
            }),
            ["AAAA"]
        );
        assert_eq!(
            f(TaskFilter {
                until_ns: Some(10),
                ..Default::default()
            }),
            ["BBBB"]
        );
        assert_eq!(
            f(TaskFilter {
                title: Some("THE T".into()),
                ..Default::default()
            }),
            ["AAAA"]
        );
        assert_eq!(
            f(TaskFilter {
                tag: Some("GC".into()),
                ..Default::default()
            })
            .len(),
            2
        );
        assert!(
            f(TaskFilter {
                tag: Some("nope".into()),
                ..Default::default()
            })
            .is_empty()
        );
        // Regression: `--limit 18446744073709551615` failed with "datatype mismatch".
        assert_eq!(
            f(TaskFilter {
                limit: Some(usize::MAX),
                ..Default::default()
            })
            .len(),
            2
        );
        assert_eq!(
            f(TaskFilter {
                limit: Some(1),
                ..Default::default()
            }),
            ["AAAA"]
        );
        assert_eq!(s.resolve_task("aa").unwrap(), "AAAA");
        assert!(matches!(
            s.resolve_task("C"),
            Err(StoreError::NoSuchTask(_))
        ));
        s.insert(&[ev("AAAB", "05", 1, "x", &[])], 3).unwrap();
        assert!(matches!(
            s.resolve_task("AAA"),
            Err(StoreError::AmbiguousTask { count: 2, .. })
        ));
        assert_eq!(s.event_count().unwrap(), 5);
    }

    #[test]
    fn otlp_task_ids_show_as_the_32_digit_trace_id() {
        let trace = "8591D7138ADDD9177ACBFCEBE886FE31";
        let stored = format!("{trace}00000000");
        assert_eq!(stored_task_id(&trace.to_ascii_lowercase()), stored);
        assert_eq!(stored_task_id(&stored), stored);
        assert_eq!(display_task_id(&stored), trace);
        // A trace id whose first half is zero maps to an 8-byte TaskId, shown as it is.
        assert_eq!(
            stored_task_id("0000000000000000438ae15464ed9bc3"),
            "438AE15464ED9BC3"
        );
        assert_eq!(display_task_id("438AE15464ED9BC3"), "438AE15464ED9BC3");
        // 40 digits that are no trace id's image stay 40 digits: a non-zero tail, or a zero
        // first half (whose 32 digits map to an 8-byte TaskId instead).
        for other in [
            "8591D7138ADDD9177ACBFCEBE886FE3100000001",
            "0000000000000000438AE15464ED9BC300000000",
        ] {
            assert_eq!(display_task_id(other), other);
        }
        // Not hex, or the invalid all-zero trace id: unchanged (uppercased).
        assert_eq!(
            stored_task_id("zz91d7138addd9177acbfcebe886fe31"),
            "ZZ91D7138ADDD9177ACBFCEBE886FE31"
        );
        assert_eq!(stored_task_id(&"0".repeat(32)), "0".repeat(32));

        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(&dir.path().join("s.db")).unwrap();
        s.insert(
            &[
                ev(&stored, "01", 1, "span start", &[]),
                ev("AB", "01", 2, "x", &[]),
            ],
            1,
        )
        .unwrap();
        let ids: Vec<String> = s
            .tasks(&TaskFilter::default())
            .unwrap()
            .into_iter()
            .map(|t| t.task_id)
            .collect();
        assert_eq!(ids, [trace, "AB"]);
        for given in [
            trace.to_string(),
            trace.to_ascii_lowercase(),
            stored.clone(),
            stored[..20].to_string(),
        ] {
            assert_eq!(s.resolve_task(&given).unwrap(), trace, "{given}");
        }
        for given in [trace, &stored] {
            let evs = s.load_task(given).unwrap();
            assert_eq!(evs.len(), 1, "{given}");
            assert_eq!(evs[0].task, trace);
        }
    }

    /// Regression: `sightline show ""` on a store of 13 tasks said "matches 6 tasks": the count
    /// came from a lookup that stops at 6.
    #[test]
    fn ambiguous_prefix_reports_the_true_number_of_matches() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(&dir.path().join("s.db")).unwrap();
        let evs: Vec<Event> = (0..20)
            .map(|i| ev(&format!("AB{i:02X}"), "01", 1, "x", &[]))
            .collect();
        s.insert(&evs, 1).unwrap();
        assert!(matches!(
            s.resolve_task("ab"),
            Err(StoreError::AmbiguousTask { count: 20, .. })
        ));
        assert!(matches!(
            s.resolve_task(""),
            Err(StoreError::AmbiguousTask { count: 20, .. })
        ));
        assert!(matches!(
            s.resolve_task("AB0"),
            Err(StoreError::AmbiguousTask { count: 16, .. })
        ));
        assert!(matches!(
            s.resolve_task("AB1"),
            Err(StoreError::AmbiguousTask { count: 4, .. })
        ));
        assert_eq!(s.resolve_task("ab13").unwrap(), "AB13");
    }

    #[test]
    fn typed_fields_round_trip_through_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(&dir.path().join("t.db")).unwrap();
        let mut e = ev("AAAA", "01", 1, "x", &[]);
        e.fields.push(("ids".into(), "[1,2]".into()));
        e.fields.push(("note".into(), "n".into()));
        e.fields.push(("ids".into(), "[3]".into()));
        e.typed = vec![
            (
                "ids".into(),
                AttrValue::Array(vec![AttrValue::Int(1), AttrValue::Int(2)]),
            ),
            ("ids".into(), AttrValue::Array(vec![AttrValue::Int(3)])),
        ];
        s.insert(std::slice::from_ref(&e), 1).unwrap();
        assert_eq!(s.load_task("AAAA").unwrap(), vec![e.clone()]);
        // The same event again is a duplicate (typed values are part of its content).
        assert_eq!(s.insert(std::slice::from_ref(&e), 2).unwrap().duplicates, 1);
        e.typed[1].1 = AttrValue::Array(vec![AttrValue::Int(4)]);
        assert_eq!(s.insert(std::slice::from_ref(&e), 3).unwrap().conflicts, 1);
    }

    /// A store written by schema version 1 opens, is migrated, and keeps its events.
    #[test]
    fn version_1_store_opens_and_migrates() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v1.db");
        {
            let c = Connection::open(&path).unwrap();
            // Version 1's tables: today's without `tasks.errors` and the search tables.
            let v1 = SCHEMA
                .replace(",\n    errors      INTEGER NOT NULL DEFAULT 0", "")
                .lines()
                .filter(|l| {
                    !l.contains("task_services")
                        && !l.contains("task_operations")
                        && !l.contains("task_attributes")
                        && !l.contains("service_operations")
                })
                .collect::<Vec<_>>()
                .join("\n");
            assert!(!v1.contains("errors"));
            c.execute_batch(&v1).unwrap();
            c.execute_batch(
                "INSERT INTO meta VALUES ('schema_version', '1');
                 INSERT INTO tasks(id, task_id, received_ns, first_ts_ns, last_ts_ns, events, title)
                   VALUES (1, 'AB', 5, 7, 7, 1, 'old');
                 INSERT INTO events(task, event_id, ts_ns, label, fields)
                   VALUES (1, '01', 7, 'old', '[[\"k\",\"v\"]]');
                 INSERT INTO events(task, event_id, ts_ns, agent, label, fields)
                   VALUES (1, 'AA:start', 7, 'svc', 'get start', '[[\"span.name\",\"get\"]]'),
                          (1, 'AA:end', 7, 'svc', 'get end', '[[\"status.code\",\"error\"]]');",
            )
            .unwrap();
        }
        let s = Store::open(&path).unwrap();
        let version = schema_version(&s);
        assert_eq!(version, SCHEMA_VERSION.to_string());
        let evs = s.load_task("AB").unwrap();
        assert_eq!(evs.len(), 3);
        assert_eq!(evs[0].fields, vec![("k".to_string(), "v".to_string())]);
        let t = &s.tasks(&TaskFilter::default()).unwrap()[0];
        assert_eq!(t.title.as_deref(), Some("old"));
        // The search tables were filled from the stored events.
        assert_eq!(
            (t.errors, t.services.as_slice()),
            (1, ["svc".to_string()].as_slice())
        );
        let found = |f: TaskFilter| s.tasks(&f).unwrap().len();
        for op in ["get", "old"] {
            assert_eq!(
                found(TaskFilter {
                    operation: Some(op.into()),
                    ..Default::default()
                }),
                1,
                "{op}"
            );
        }
        assert_eq!(
            found(TaskFilter {
                operation: Some("get start".into()),
                ..Default::default()
            }),
            0
        );
        // The operations of the service were filled too (by the step to version 3).
        assert_eq!(crate::query::operations(&s, "svc").unwrap(), ["get"]);
        // X-Trace fields are not attribute-indexed; OTLP span attributes are.
        assert_eq!(
            found(TaskFilter {
                attributes: vec![("k".into(), "v".into())],
                ..Default::default()
            }),
            0
        );
        assert_eq!(
            found(TaskFilter {
                attributes: vec![("span.name".into(), "get".into())],
                ..Default::default()
            }),
            1
        );
        assert_eq!(
            found(TaskFilter {
                service: Some("svc".into()),
                errors: true,
                ..Default::default()
            }),
            1
        );
        drop(s);
        // A newer version than this build knows is refused.
        Connection::open(&path)
            .unwrap()
            .execute(
                "UPDATE meta SET value = '99' WHERE key = 'schema_version'",
                [],
            )
            .unwrap();
        assert!(matches!(
            Store::open(&path),
            Err(StoreError::SchemaVersion { .. })
        ));
    }

    #[test]
    fn stored_fields_read_back_as_pairs_or_typed_triples() {
        let read = |s: &str| serde_json::from_str::<Vec<LoadedField>>(s);
        let v = read(r#"[["k", "v"], ["n", "7", {"int": 7}]]"#);
        let v = v.unwrap();
        assert!(matches!(&v[0], LoadedField::Text(k, t) if k == "k" && t == "v"));
        assert!(
            matches!(&v[1], LoadedField::Typed(k, t, AttrValue::Int(7)) if k == "n" && t == "7")
        );
        assert!(read(r#"[["k"]]"#).is_err());
        assert!(read(r#"[["n", "7", {"int": 7}, 1]]"#).is_err());
    }

    #[test]
    fn operations_of_a_batch_written_many_per_statement_are_all_found() {
        // More distinct labels than one multi-row statement takes, in two tasks of one batch,
        // with a repeated label: each (label, task) pair is found, and no other.
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(&dir.path().join("o.db")).unwrap();
        let n = SEARCH_ROWS_PER_INSERT * 2 + 7;
        let mut events = Vec::new();
        for (task, labels) in [("AAAA", n), ("BBBB", n / 2)] {
            for i in 0..labels {
                events.push(Event {
                    task: task.into(),
                    id: format!("{:04X}", events.len()),
                    labels: vec![format!("step {i}")],
                    ..Event::default()
                });
            }
        }
        events.push(Event {
            task: "AAAA".into(),
            id: "FFFF".into(),
            labels: vec!["step 3".into()],
            ..Event::default()
        });
        s.insert(&events, 1).unwrap();
        let found = |op: String| -> Vec<String> {
            let mut ids: Vec<String> = s
                .tasks(&TaskFilter {
                    operation: Some(op),
                    ..TaskFilter::default()
                })
                .unwrap()
                .into_iter()
                .map(|t| t.task_id)
                .collect();
            ids.sort();
            ids
        };
        assert_eq!(found("step 3".into()), ["AAAA", "BBBB"]);
        assert_eq!(found(format!("step {}", n / 2)), ["AAAA"]);
        assert_eq!(found(format!("step {}", n - 1)), ["AAAA"]);
        assert!(found(format!("step {n}")).is_empty());
        let rows: i64 = s
            .conn
            .query_row("SELECT count(*) FROM task_operations", [], |r| r.get(0))
            .unwrap();
        assert_eq!(rows, (n + n / 2) as i64);
    }

    #[test]
    fn tasks_are_found_by_service_operation_attribute_duration_and_errors() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(&dir.path().join("q.db")).unwrap();
        let span =
            |task: &str, span: &str, svc: &str, name: &str, t0: i64, t1: i64, error: bool| {
                let code = if error { 500 } else { 200 };
                let mut start = Event {
                    task: task.into(),
                    id: format!("{span}:start"),
                    agent: Some(svc.into()),
                    timestamp_ns: Some(t0),
                    labels: vec![format!("{name} start")],
                    fields: vec![
                        ("span.name".into(), name.into()),
                        ("http.status_code".into(), code.to_string()),
                    ],
                    typed: vec![("http.status_code".into(), AttrValue::Int(code))],
                    ..Event::default()
                };
                start
                    .fields
                    .push(("big".into(), "x".repeat(MAX_INDEXED_VALUE + 1)));
                let mut end = Event {
                    task: task.into(),
                    id: format!("{span}:end"),
                    agent: Some(svc.into()),
                    timestamp_ns: Some(t1),
                    labels: vec![format!("{name} end")],
                    parents: vec![Parent::causal(format!("{span}:start"))],
                    ..Event::default()
                };
                if error {
                    end.fields.push(("status.code".into(), "error".into()));
                }
                [start, end]
            };
        let mut evs = Vec::new();
        evs.extend(span("AA", "01", "front", "GET /a", 100, 400, false));
        evs.extend(span("AA", "02", "db", "query", 150, 300, false));
        evs.extend(span("BB", "03", "front", "GET /b", 200, 1200, true));
        evs.extend(span("CC", "04", "batch", "run", 300, 350, false));
        // An X-Trace report: its label is its operation.
        evs.push(Event {
            task: "DD".into(),
            id: "0A".into(),
            agent: Some("hdfs".into()),
            timestamp_ns: Some(50),
            labels: vec!["DFSClient open".into()],
            ..Event::default()
        });
        s.insert(&evs, 1).unwrap();
        let ids = |f: TaskFilter| {
            s.tasks(&f)
                .unwrap()
                .into_iter()
                .map(|t| t.task_id)
                .collect::<Vec<_>>()
        };
        let f = TaskFilter::default;
        assert_eq!(
            ids(TaskFilter {
                service: Some("front".into()),
                ..f()
            }),
            ["AA", "BB"]
        );
        assert_eq!(
            ids(TaskFilter {
                service: Some("db".into()),
                ..f()
            }),
            ["AA"]
        );
        assert_eq!(
            ids(TaskFilter {
                operation: Some("query".into()),
                ..f()
            }),
            ["AA"]
        );
        assert_eq!(
            ids(TaskFilter {
                operation: Some("DFSClient open".into()),
                ..f()
            }),
            ["DD"]
        );
        assert!(
            ids(TaskFilter {
                operation: Some("query end".into()),
                ..f()
            })
            .is_empty()
        );
        assert_eq!(
            ids(TaskFilter {
                attributes: vec![("http.status_code".into(), "500".into())],
                ..f()
            }),
            ["BB"]
        );
        assert_eq!(
            ids(TaskFilter {
                attributes: vec![
                    ("http.status_code".into(), "200".into()),
                    ("span.name".into(), "run".into())
                ],
                ..f()
            }),
            ["CC"]
        );
        // Values longer than MAX_INDEXED_VALUE are stored, not indexed.
        let big = vec![("big".to_string(), "x".repeat(MAX_INDEXED_VALUE + 1))];
        assert!(
            ids(TaskFilter {
                attributes: big,
                ..f()
            })
            .is_empty()
        );
        assert_eq!(
            ids(TaskFilter {
                min_duration_ns: Some(300),
                ..f()
            }),
            ["AA", "BB"]
        );
        assert_eq!(
            ids(TaskFilter {
                max_duration_ns: Some(300),
                ..f()
            }),
            ["DD", "AA", "CC"]
        );
        assert_eq!(
            ids(TaskFilter {
                errors: true,
                ..f()
            }),
            ["BB"]
        );
        assert_eq!(
            ids(TaskFilter {
                service: Some("front".into()),
                since_ns: Some(150),
                ..f()
            }),
            ["BB"]
        );
        assert_eq!(
            ids(TaskFilter {
                service: Some("front".into()),
                until_ns: Some(150),
                ..f()
            }),
            ["AA"]
        );
        assert_eq!(
            ids(TaskFilter {
                sort: TaskSort::Duration,
                ..f()
            }),
            ["BB", "AA", "CC", "DD"]
        );
        assert_eq!(
            ids(TaskFilter {
                sort: TaskSort::Duration,
                limit: Some(2),
                ..f()
            }),
            ["BB", "AA"]
        );
        assert_eq!(
            ids(TaskFilter {
                limit: Some(2),
                ..f()
            }),
            ["BB", "CC"]
        );
        let bb = &s
            .tasks(&TaskFilter {
                errors: true,
                ..f()
            })
            .unwrap()[0];
        assert_eq!(
            (bb.errors, bb.services.as_slice()),
            (1, ["front".to_string()].as_slice())
        );
        let aa = &s
            .tasks(&TaskFilter {
                service: Some("db".into()),
                ..f()
            })
            .unwrap()[0];
        assert_eq!(aa.services, ["db", "front"]);
        // A service + time query is an index search, not a scan of every task.
        let plan: Vec<String> = s
            .conn
            .prepare(
                "EXPLAIN QUERY PLAN SELECT id FROM tasks t WHERE coalesce(t.first_ts_ns, t.received_ns) >= 1
                 AND t.id IN (SELECT task FROM task_services WHERE service = 'front')
                 ORDER BY coalesce(t.first_ts_ns, t.received_ns) DESC LIMIT 20",
            )
            .unwrap()
            .query_map([], |r| r.get::<_, String>(3))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert!(!plan.iter().any(|p| p == "SCAN t"), "{plan:?}");
        // A second delivery adds no error count.
        s.insert(&evs, 2).unwrap();
        assert_eq!(
            s.tasks(&TaskFilter {
                errors: true,
                ..f()
            })
            .unwrap()[0]
                .errors,
            1
        );
    }

    #[test]
    fn oldest_tasks_are_deleted_with_everything_of_theirs() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(&dir.path().join("r.db")).unwrap();
        let mut evs = Vec::new();
        for t in 0..600i64 {
            let mut e = ev(&format!("{:04X}", t + 1), "01", 1000 + t, "op", &[]);
            e.agent = Some(format!("svc{}", t % 3));
            e.fields.push(("user".into(), format!("u{t}")));
            // A span's start: its fields are attribute-indexed.
            e.fields.push(("span.name".into(), "op".into()));
            evs.push(e);
        }
        s.insert(&evs, 1).unwrap();
        let before = s.used_bytes().unwrap();
        assert!(before > 0);
        // By age: the tasks first seen before 1100 (the first 100), in steps of 64.
        assert_eq!(s.delete_oldest_tasks(Some(1100), 64).unwrap(), 64);
        assert_eq!(s.delete_oldest_tasks(Some(1100), 64).unwrap(), 36);
        assert_eq!(s.delete_oldest_tasks(Some(1100), 64).unwrap(), 0);
        let left = s.tasks(&TaskFilter::default()).unwrap();
        assert_eq!(left.len(), 500);
        assert_eq!(left[0].first_ts_ns, Some(1100));
        assert_eq!(s.event_count().unwrap(), 500);
        // Oldest regardless of age.
        assert_eq!(s.delete_oldest_tasks(None, 400).unwrap(), 400);
        let left = s.tasks(&TaskFilter::default()).unwrap();
        assert_eq!((left.len(), left[0].first_ts_ns), (100, Some(1500)));
        // Nothing of a deleted task is left in the search tables.
        let rows = |table: &str| -> i64 {
            s.conn
                .query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
                .unwrap()
        };
        for table in [
            "task_services",
            "task_operations",
            "task_hosts",
            "task_tags",
        ] {
            assert_eq!(rows(table), 100, "{table}");
        }
        // `k`, `Tag`, `user` and `span.name` per task.
        assert_eq!(rows("task_attributes"), 400);
        let found = s
            .tasks(&TaskFilter {
                attributes: vec![("user".into(), "u5".into())],
                ..Default::default()
            })
            .unwrap();
        assert!(found.is_empty());
        assert!(
            s.used_bytes().unwrap() < before,
            "{} !< {before}",
            s.used_bytes().unwrap()
        );
    }

    /// The operations of `service` as schema version 2 listed them: from the stored events.
    fn operations_from_events(s: &Store, service: &str) -> Vec<String> {
        let q = format!(
            "SELECT DISTINCT op FROM (SELECT {} AS op FROM events e WHERE e.agent = ?1)
             WHERE op IS NOT NULL ORDER BY op",
            crate::query::OPERATION
        );
        let mut st = s.conn.prepare(&q).unwrap();
        st.query_map([service], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    /// Events of two services whose ids and labels take every branch of the operation rule
    /// (span starts in either case, starts without ` start`, ends, span events, X-Trace
    /// reports, no label, no agent).
    fn operation_events() -> Vec<Event> {
        let cases: [(&str, &str, Option<&str>); 10] = [
            ("S1:start", "S1", Some("get start")),
            ("S2:START", "S2", Some("Put START")),
            ("S3:start", "S3", Some("begin")),
            ("S3:end", "S3", Some("get end")),
            ("S4:event0", "S4", Some("retry")),
            ("S5:Event2:x", "S5", Some("cache")),
            ("R1", "R1", Some("read")),
            ("R2:x", "R2", Some("write")),
            ("R3", "R3", None),
            ("S6:start", "S6", Some(" start")),
        ];
        let mut evs = Vec::new();
        for (n, (id, _, label)) in cases.iter().enumerate() {
            for (t, svc) in [("AB01", Some("a")), ("AB02", Some("b")), ("AB03", None)] {
                let mut e = ev(t, id, 10 + n as i64, label.unwrap_or(""), &[]);
                if label.is_none() {
                    e.labels.clear();
                }
                e.agent = svc.map(str::to_string);
                evs.push(e);
            }
        }
        evs
    }

    /// `service_operations`, written as events are stored, lists what the events give.
    #[test]
    fn service_operations_are_the_operations_of_the_stored_events() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(&dir.path().join("o.db")).unwrap();
        let evs = operation_events();
        // In two batches, the second repeating part of the first.
        s.insert(&evs[..17], 1).unwrap();
        s.insert(&evs[10..], 2).unwrap();
        for svc in ["a", "b", "none"] {
            let listed = crate::query::operations(&s, svc).unwrap();
            assert_eq!(listed, operations_from_events(&s, svc), "{svc}");
        }
        assert_eq!(
            crate::query::operations(&s, "a").unwrap(),
            ["", "Put", "begin", "get", "read", "write"]
        );
    }

    /// A version 2 store gets `service_operations` filled from its events when it opens.
    #[test]
    fn version_2_store_gets_its_service_operations() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v2.db");
        {
            let mut s = Store::open(&path).unwrap();
            s.insert(&operation_events(), 1).unwrap();
            s.conn
                .execute_batch(
                    "DROP TABLE service_operations;
                     UPDATE meta SET value = '2' WHERE key = 'schema_version';",
                )
                .unwrap();
        }
        let s = Store::open(&path).unwrap();
        let version = schema_version(&s);
        assert_eq!(version, "3");
        for svc in ["a", "b"] {
            let listed = crate::query::operations(&s, svc).unwrap();
            assert_eq!(listed.len(), 6, "{svc}: {listed:?}");
            assert_eq!(listed, operations_from_events(&s, svc), "{svc}");
        }
    }

    /// Deleting tasks removes the operations no remaining event of the service names, and only
    /// those.
    #[test]
    fn deleted_tasks_take_their_own_operations_along() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(&dir.path().join("d.db")).unwrap();
        let mut evs = Vec::new();
        // Task t (first seen at 100 + t) of service svc: operation "shared", and "only{t}".
        for t in 0..4i64 {
            for (i, op) in ["shared".to_string(), format!("only{t}")]
                .iter()
                .enumerate()
            {
                let mut e = ev(&format!("C{t}"), &format!("0{i}"), 100 + t, op, &[]);
                e.agent = Some("svc".into());
                evs.push(e);
            }
        }
        // Another service naming "only0" keeps its own pair when task C0 goes.
        let mut e = ev("D9", "01", 900, "only0", &[]);
        e.agent = Some("other".into());
        evs.push(e);
        s.insert(&evs, 1).unwrap();
        assert_eq!(
            crate::query::operations(&s, "svc").unwrap(),
            ["only0", "only1", "only2", "only3", "shared"]
        );
        assert_eq!(s.delete_oldest_tasks(None, 2).unwrap(), 2);
        assert_eq!(
            crate::query::operations(&s, "svc").unwrap(),
            ["only2", "only3", "shared"]
        );
        assert_eq!(crate::query::operations(&s, "other").unwrap(), ["only0"]);
        assert_eq!(s.delete_oldest_tasks(None, 2).unwrap(), 2);
        assert!(crate::query::operations(&s, "svc").unwrap().is_empty());
        assert_eq!(crate::query::operations(&s, "other").unwrap(), ["only0"]);
    }

    #[test]
    fn versions_of_one_id_in_a_batch_are_each_kept_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(&dir.path().join("s.db")).unwrap();
        // Three versions of event A in one batch, each repeated, and B twice.
        let batch = vec![
            ev("T1", "A", 1, "one", &[]),
            ev("T1", "A", 2, "two", &[]),
            ev("T1", "B", 5, "b", &[]),
            ev("T1", "A", 1, "one", &[]),
            ev("T1", "A", 3, "three", &[]),
            ev("T1", "A", 2, "two", &[]),
            ev("T1", "A", 3, "three", &[]),
            ev("T1", "B", 5, "b", &[]),
        ];
        let st = s.insert(&batch, 0).unwrap();
        assert_eq!((st.events, st.duplicates, st.conflicts), (4, 4, 2));
        // The same batch again: every event is stored already.
        let st = s.insert(&batch, 0).unwrap();
        assert_eq!((st.events, st.duplicates, st.conflicts), (0, 8, 0));
        let ts: Vec<Option<i64>> = s
            .load_task("T1")
            .unwrap()
            .iter()
            .map(|e| e.timestamp_ns)
            .collect();
        assert_eq!(ts, [Some(1), Some(2), Some(5), Some(3)]);
    }

    #[test]
    fn rows_sorted_by_text_rank_match_a_plain_sort() {
        let items = [
            ("step 10", 3),
            ("step 2", 1),
            ("a", 9),
            ("step 10", 1),
            ("step 2", 1),
            ("", 4),
        ];
        let got = sorted_by_text(&items, |&(t, i)| (t, i));
        let mut want: Vec<(&str, i64)> = items.to_vec();
        want.sort_unstable();
        want.dedup();
        assert_eq!(got, want);
        assert_eq!(got.len(), 5);
    }
}
