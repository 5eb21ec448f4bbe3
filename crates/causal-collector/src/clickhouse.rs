//! The ClickHouse store: the same writes and reads as the SQLite [`crate::store::Store`], kept in
//! MergeTree tables of a ClickHouse server reached over its HTTP interface (port 8123), so that
//! several collectors can write into one store. Schema and semantics in
//! `docs/collector-store.md`, "ClickHouse".
//!
//! - `events`: one row per stored event (its JSON in `body`, searchable columns beside it), a
//!   `ReplacingMergeTree` keyed by `(task, event_id, content_hash)`: a copy delivered again (a
//!   retried batch, a second collector, a second import) collapses into one row, and every read
//!   collapses the copies (`FINAL`, or a `GROUP BY` of the key over one task's rows), so
//!   duplicates never show in results.
//! - `edges`: one row per incoming edge, the same way de-duplicated.
//! - `task_summaries`: an `AggregatingMergeTree` filled by a materialized view on `events`, with
//!   per-task states whose merge is idempotent (`uniqExact` of content hashes, `min`, `max`,
//!   `groupUniqArray`), so `tasks` reads summaries only and duplicates count once.
//! - `service_operations` and `service_tasks`: the operations and the tasks of each service, by
//!   materialized views, for the UI's operation list and for `tasks --service`.
//!
//! Tested against ClickHouse 18.16 (Debian 12's `clickhouse-server`): the SQL keeps to what that
//! version has (no TTL clauses, no query parameters, no `LowCardinality`).

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::time::Duration;

use causal_analysis::{EdgeKind, Event};

use crate::error::StoreError;
use crate::store::{
    InsertStats, MAX_INDEXED_VALUE, TaskFilter, TaskSort, TaskSummary, display_task_id,
    stored_task_id,
};

/// Schema version of the ClickHouse tables, kept in the `sightline_meta` table. A store written
/// by a newer sightline (a larger number) is refused; older ones are upgraded in place by
/// [`ClickHouseStore::open`] (`docs/collector-store.md`, "ClickHouse", "Versions").
pub const CLICKHOUSE_SCHEMA_VERSION: u32 = 3;

/// Environment variable holding the ClickHouse user when the URL names none.
pub const USER_ENV: &str = "SIGHTLINE_CLICKHOUSE_USER";
/// Environment variable holding the ClickHouse password when the URL holds none.
pub const PASSWORD_ENV: &str = "SIGHTLINE_CLICKHOUSE_PASSWORD";

/// Largest response body read from ClickHouse (one task's events, a task list), bytes.
const MAX_RESPONSE: u64 = 1 << 30;

/// Where a ClickHouse store is: `clickhouse://[USER[:PASSWORD]@]HOST[:PORT]/DATABASE`.
///
/// The credentials come from the URL, else from [`USER_ENV`] and [`PASSWORD_ENV`]; they are
/// never shown: `Debug` and [`fmt::Display`] print `clickhouse://HOST:PORT/DATABASE` only.
#[derive(Clone, PartialEq, Eq)]
pub struct ClickHouseUrl {
    /// Host name or address.
    pub host: String,
    /// HTTP interface port (8123 when the URL gives none).
    pub port: u16,
    /// Database holding the tables (created when absent): letters, digits and `_`.
    pub database: String,
    /// Whether each batch first looks up which of its events are stored already (URL option
    /// `?duplicate_lookup=on|off`, default on): exact duplicate and conflict counts, and a
    /// retried or repeated batch sends nothing twice. Off, a high-rate collector saves that query
    /// per batch; results stay the same (`FINAL` and the summaries' `uniqExact` collapse the
    /// copies), but [`InsertStats`] counts only the duplicates within one batch and none of the
    /// conflicts.
    pub duplicate_lookup: bool,
    user: Option<String>,
    password: Option<String>,
}

impl fmt::Debug for ClickHouseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ClickHouseUrl({self})")
    }
}

impl fmt::Display for ClickHouseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "clickhouse://{}:{}/{}{}",
            self.host,
            self.port,
            self.database,
            if self.duplicate_lookup {
                ""
            } else {
                "?duplicate_lookup=off"
            }
        )
    }
}

impl ClickHouseUrl {
    /// Parses `clickhouse://[USER[:PASSWORD]@]HOST[:PORT]/DATABASE[?duplicate_lookup=on|off]`;
    /// user and password may be percent-encoded. Missing credentials are read from [`USER_ENV`]
    /// and [`PASSWORD_ENV`].
    ///
    /// # Errors
    /// [`StoreError::BadStoreUrl`] naming what is wrong (never the password).
    pub fn parse(url: &str) -> Result<ClickHouseUrl, StoreError> {
        let bad = |why: &str| StoreError::BadStoreUrl(why.to_string());
        let rest = url
            .strip_prefix("clickhouse://")
            .ok_or_else(|| bad("a ClickHouse store URL starts with clickhouse://"))?;
        let (auth, rest) = match rest.rsplit_once('@') {
            Some((a, r)) => (Some(a), r),
            None => (None, rest),
        };
        let (hostport, db) = rest
            .split_once('/')
            .ok_or_else(|| bad("expected clickhouse://HOST:PORT/DATABASE (no database given)"))?;
        let (db, options) = db.split_once('?').unwrap_or((db, ""));
        let mut duplicate_lookup = true;
        for opt in options.split('&').filter(|o| !o.is_empty()) {
            duplicate_lookup = match opt {
                "duplicate_lookup=on" => true,
                "duplicate_lookup=off" => false,
                _ => {
                    return Err(bad(&format!(
                        "unknown option {opt:?} (the one option is duplicate_lookup=on|off)"
                    )));
                }
            };
        }
        let db = db.trim_end_matches('/');
        if db.is_empty()
            || !db.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            || db.as_bytes()[0].is_ascii_digit()
        {
            return Err(bad(
                "the database name must be letters, digits and _ (not starting with a digit)",
            ));
        }
        let (host, port) = match hostport.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(']') || hostport.starts_with('[') => (
                h,
                p.parse::<u16>()
                    .map_err(|_| bad("the port is not a number from 0 to 65535"))?,
            ),
            _ => (hostport, 8123),
        };
        if host.is_empty() {
            return Err(bad("no host given"));
        }
        let (mut user, mut password) = (None, None);
        if let Some(a) = auth {
            let (u, p) = match a.split_once(':') {
                Some((u, p)) => (u, Some(p)),
                None => (a, None),
            };
            user = Some(percent_decode(u).ok_or_else(|| bad("bad %-escape in the user"))?);
            password = p
                .map(|p| percent_decode(p).ok_or_else(|| bad("bad %-escape in the password")))
                .transpose()?;
        }
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        if user.is_none() {
            user = env(USER_ENV);
        }
        if password.is_none() {
            password = env(PASSWORD_ENV);
        }
        Ok(ClickHouseUrl {
            host: host.to_string(),
            port,
            database: db.to_string(),
            duplicate_lookup,
            user,
            password,
        })
    }

    /// The same server with another database (tests and benchmarks use one database each).
    pub fn with_database(&self, database: &str) -> ClickHouseUrl {
        ClickHouseUrl {
            database: database.to_string(),
            ..self.clone()
        }
    }
}

fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let h = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(h, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// A ClickHouse string literal for `s`: quoted, with `\` and `'` escaped.
fn quote(s: &str) -> String {
    let mut q = String::with_capacity(s.len() + 2);
    q.push('\'');
    for c in s.chars() {
        match c {
            '\\' => q.push_str("\\\\"),
            '\'' => q.push_str("\\'"),
            c => q.push(c),
        }
    }
    q.push('\'');
    q
}

/// FNV-1a, 64 bits: the content hash of an event's JSON (stable across processes and builds, so
/// two collectors hash the same event alike).
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The day partition of `ns` since the epoch, as the `day` columns compute it.
const DAY_EXPR: &str = "toDate(toDateTime(intDiv(ts_ns, 1000000000)))";

/// The smallest string greater than every string that starts with `prefix` (its last byte
/// incremented), for a key range; `None` for an empty prefix or one ending in a byte that is not
/// ASCII (a task id never holds one: such a lookup scans).
fn prefix_successor(prefix: &str) -> Option<String> {
    let mut bytes = prefix.as_bytes().to_vec();
    let last = bytes.pop()?;
    if last >= 0x7f {
        return None;
    }
    bytes.push(last + 1);
    String::from_utf8(bytes).ok()
}

/// The tables of schema version 1, `{db}` standing for the database.
fn schema_v1(db: &str) -> Vec<String> {
    [
        "CREATE TABLE IF NOT EXISTS {db}.events (
            task String, event_id String, content_hash UInt64,
            batch UInt64, idx UInt32, keep UInt64,
            received_ns Int64, ts_ns Int64, has_ts UInt8,
            hosts Array(String), services Array(String), operations Array(String),
            tags Array(String), attributes Array(String),
            title String, title_rank UInt8, title_ts Int64, has_title UInt8, is_error UInt8,
            body String,
            day Date MATERIALIZED {day})
         ENGINE = ReplacingMergeTree(keep) PARTITION BY day ORDER BY (task, event_id, content_hash)",
        "CREATE TABLE IF NOT EXISTS {db}.edges (
            task String, child String, parent String, kind String, ts_ns Int64,
            day Date MATERIALIZED {day})
         ENGINE = ReplacingMergeTree() PARTITION BY day ORDER BY (task, child, parent, kind)",
        "CREATE TABLE IF NOT EXISTS {db}.task_summaries (
            task String, day Date,
            received AggregateFunction(min, Int64),
            timed AggregateFunction(max, UInt8),
            first AggregateFunction(minIf, Int64, UInt8),
            last AggregateFunction(maxIf, Int64, UInt8),
            events AggregateFunction(uniqExact, UInt64),
            errors AggregateFunction(uniqExactIf, UInt64, UInt8),
            titled AggregateFunction(max, UInt8),
            title AggregateFunction(argMinIf, String, Tuple(UInt8, Int64), UInt8),
            hosts AggregateFunction(groupUniqArrayArray, Array(String)),
            services AggregateFunction(groupUniqArrayArray, Array(String)),
            operations AggregateFunction(groupUniqArrayArray, Array(String)),
            tags AggregateFunction(groupUniqArrayArray, Array(String)),
            attributes AggregateFunction(groupUniqArrayArray, Array(String)))
         ENGINE = AggregatingMergeTree() PARTITION BY day ORDER BY task",
        "CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.task_summaries_mv TO {db}.task_summaries AS
         SELECT task, day,
            minState(received_ns) AS received, maxState(has_ts) AS timed,
            minIfState(ts_ns, has_ts) AS first, maxIfState(ts_ns, has_ts) AS last,
            uniqExactState(content_hash) AS events, uniqExactIfState(content_hash, is_error) AS errors,
            maxState(has_title) AS titled,
            argMinIfState(title, (title_rank, title_ts), has_title) AS title,
            groupUniqArrayArrayState(hosts) AS hosts, groupUniqArrayArrayState(services) AS services,
            groupUniqArrayArrayState(operations) AS operations, groupUniqArrayArrayState(tags) AS tags,
            groupUniqArrayArrayState(attributes) AS attributes
         FROM {db}.events GROUP BY task, day",
    ]
    .iter()
    .map(|s| s.replace("{db}", db).replace("{day}", DAY_EXPR))
    .collect()
}

/// What schema version 2 adds to version 1, `{db}` standing for the database: the operations
/// of each service (`service_operations`, one row per service and operation of every event,
/// by a materialized view, rows of one service and operation merged away), so that listing a
/// service's operations (Jaeger's `/api/services/{service}/operations`, the UI's search form)
/// reads that small table instead of scanning `events`.
fn schema_v2(db: &str) -> Vec<String> {
    [
        "CREATE TABLE IF NOT EXISTS {db}.service_operations (
            service String, operation String, day Date)
         ENGINE = ReplacingMergeTree() PARTITION BY day ORDER BY (service, operation)",
        // Two arrayJoin calls: every service of the event with every operation of it, as
        // `has(services, s)` over `events` pairs them.
        "CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.service_operations_mv TO {db}.service_operations AS
         SELECT arrayJoin(services) AS service, arrayJoin(operations) AS operation, day
         FROM {db}.events",
    ]
    .iter()
    .map(|s| s.replace("{db}", db))
    .collect()
}

/// Fills `service_operations` from the events stored before it existed (the upgrade from schema
/// version 1). Rows the view wrote meanwhile are repeated, which merges and `DISTINCT` remove.
fn backfill_v2(db: &str) -> String {
    format!(
        "INSERT INTO {db}.service_operations (service, operation, day)
         SELECT arrayJoin(services) AS service, arrayJoin(operations) AS operation, day
         FROM {db}.events"
    )
}

/// What schema version 3 adds, `{db}` standing for the database: the tasks of each service
/// (`service_tasks`, one row per service and task of every event, by a materialized view, rows
/// of one service and task of one day merged away), so that a search by service
/// ([`tasks_sql`]) merges the summaries of that service's tasks only.
fn schema_v3(db: &str) -> Vec<String> {
    [
        "CREATE TABLE IF NOT EXISTS {db}.service_tasks (service String, task String, day Date)
         ENGINE = ReplacingMergeTree() PARTITION BY day ORDER BY (service, task)",
        "CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.service_tasks_mv TO {db}.service_tasks AS
         SELECT arrayJoin(services) AS service, task, day FROM {db}.events",
    ]
    .iter()
    .map(|s| s.replace("{db}", db))
    .collect()
}

/// Fills `service_tasks` from the events stored before it existed (the upgrade from schema
/// version 2 or older); rows the view wrote meanwhile are repeats that merge away.
fn backfill_v3(db: &str) -> String {
    format!(
        "INSERT INTO {db}.service_tasks (service, task, day)
         SELECT arrayJoin(services) AS service, task, day FROM {db}.events"
    )
}

/// Latest time (ns since the epoch, exclusive) up to which [`DAY_EXPR`] is monotonic: it
/// converts seconds to a `DateTime` (`UInt32`), which wraps past 2106-02-07.
const DAY_EXPR_END_NS: i64 = (1 << 32) * 1_000_000_000;

/// [`DAY_EXPR`] of the time `ns` (a literal), in SQL.
fn day_of(ns: i64) -> String {
    DAY_EXPR.replace("ts_ns", &ns.to_string())
}

/// The SQL of [`ClickHouseStore::tasks`] for `filter` on database `db`, in two steps so that
/// only the tasks that can match have their whole summary merged:
///
/// 1. *Light*: the tasks whose first-seen time, duration and id match, merging only the small
///    states (`received`, `timed`, `first`, `last`). With both ends of a time range (within
///    [`DAY_EXPR_END_NS`]), only tasks with a summary row in the days of the range, or in the
///    day of untimed events (ts 0), are merged at all: a task first seen in the range has its
///    earliest timed event there, and a task without timed events has all its rows in day 0
///    (their day partitions are pruned by the `day` key, and other days are read for these
///    tasks' rows only, through the sorting key `task`). With a service, only the tasks that
///    `service_tasks` lists for it are merged. Without a filter on the other states,
///    the order and limit are applied here too, so the next step merges `limit` tasks.
/// 2. *Whole*: every state of the tasks of step 1, all conditions (again) in `HAVING`, ordered
///    and limited.
///
/// Both steps merge all of a task's rows (never a part of its days), so `ReplacingMergeTree`
/// and `AggregatingMergeTree` semantics and the answers are those of one `GROUP BY task`.
fn tasks_sql(db: &str, filter: &TaskFilter) -> String {
    let seen = "if(timed = 1, first, received)";
    // Conditions on the light states, and on the others.
    let mut light: Vec<String> = vec!["1".into()];
    let mut whole: Vec<String> = Vec::new();
    let mut wher: Vec<String> = Vec::new();
    if let Some(t) = &filter.task_id {
        // On the sorting key, before the merge.
        wher.push(format!("task = {}", quote(&stored_task_id(t))));
    }
    if let Some(s) = filter.since_ns {
        light.push(format!("{seen} >= {s}"));
    }
    if let Some(u) = filter.until_ns {
        light.push(format!("{seen} < {u}"));
    }
    if let (Some(s), Some(u)) = (filter.since_ns, filter.until_ns)
        && s >= 0
        && u <= DAY_EXPR_END_NS
    {
        let last = u.saturating_sub(1).max(s);
        wher.push(format!(
            "task IN (SELECT task FROM {db}.task_summaries
                      WHERE (day >= {} AND day <= {}) OR day = {})",
            day_of(s),
            day_of(last),
            day_of(0)
        ));
    }
    if let Some(d) = filter.min_duration_ns {
        light.push(format!("timed = 1 AND last - first >= {d}"));
    }
    if let Some(d) = filter.max_duration_ns {
        light.push(format!("timed = 1 AND last - first <= {d}"));
    }
    if let Some(t) = &filter.tag {
        whole.push(format!("has(tags, {})", quote(t)));
    }
    if let Some(t) = &filter.title {
        whole.push(format!(
            "titled = 1 AND positionCaseInsensitive(title, {}) > 0",
            quote(t)
        ));
    }
    if let Some(s) = &filter.service {
        // Exact before the merge: a task has the service in its summary when one of its events
        // has it, which is when `service_tasks` has a row of the two (schema version 3).
        wher.push(format!(
            "task IN (SELECT task FROM {db}.service_tasks WHERE service = {})",
            quote(s)
        ));
    }
    if let Some(o) = &filter.operation {
        whole.push(format!("has(operations, {})", quote(o)));
    }
    for (k, v) in &filter.attributes {
        whole.push(format!(
            "has(attributes, {})",
            quote(&format!("{k}{ATTR_SEP}{v}"))
        ));
    }
    if filter.errors {
        whole.push("errors > 0".into());
    }
    let order = match filter.sort {
        TaskSort::Start => format!("{seen} DESC, task"),
        TaskSort::Duration => "timed = 0, last - first DESC, task".to_string(),
    };
    let limit = filter
        .limit
        .map(|l| format!(" LIMIT {}", l.min(i64::MAX as usize)))
        .unwrap_or_default();
    let light_tail = if whole.is_empty() {
        format!(" ORDER BY {order}{limit}")
    } else {
        String::new()
    };
    // `PREWHERE`: the `task` column is read and filtered first, and the states only of the
    // rows that pass (without it, every state of every granule holding a listed task is read:
    // with task ids in random order, nearly the whole table; 0.44 s -> 0.2 s at 2 M events).
    let prewhere = if wher.is_empty() {
        String::new()
    } else {
        format!(" PREWHERE {}", wher.join(" AND "))
    };
    let light_sql = format!(
        "SELECT task FROM (SELECT task, minMerge(received) AS received, maxMerge(timed) AS timed,
                minIfMerge(first) AS first, maxIfMerge(last) AS last
             FROM {db}.task_summaries{prewhere} GROUP BY task
             HAVING {}{light_tail})",
        light.join(" AND ")
    );
    let having: Vec<String> = light.into_iter().chain(whole).collect();
    format!(
        "SELECT task, minMerge(received) AS received, maxMerge(timed) AS timed,
                minIfMerge(first) AS first, maxIfMerge(last) AS last,
                toInt64(uniqExactMerge(events)) AS events, toInt64(uniqExactIfMerge(errors)) AS errors,
                maxMerge(titled) AS titled, argMinIfMerge(title) AS title,
                arraySort(groupUniqArrayArrayMerge(hosts)) AS hosts,
                arraySort(groupUniqArrayArrayMerge(services)) AS services,
                groupUniqArrayArrayMerge(tags) AS tags,
                groupUniqArrayArrayMerge(operations) AS operations,
                groupUniqArrayArrayMerge(attributes) AS attributes
         FROM {db}.task_summaries PREWHERE task IN ({light_sql}) GROUP BY task
         HAVING {} ORDER BY {order}{limit}",
        having.join(" AND ")
    )
}

/// A ClickHouse store (see the module doc): one HTTP agent, keep-alive connections.
pub struct ClickHouseStore {
    url: ClickHouseUrl,
    agent: ureq::Agent,
    /// The last batch number used: ns since the epoch, strictly increasing in this process.
    last_batch: u64,
}

impl fmt::Debug for ClickHouseStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClickHouseStore")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

/// One row of `events` as written (JSONEachRow).
#[derive(serde::Serialize)]
struct EventRow<'a> {
    task: &'a str,
    event_id: &'a str,
    content_hash: u64,
    batch: u64,
    idx: u32,
    keep: u64,
    received_ns: i64,
    ts_ns: i64,
    has_ts: u8,
    hosts: Vec<&'a str>,
    services: Vec<&'a str>,
    operations: Vec<&'a str>,
    tags: Vec<&'a str>,
    attributes: Vec<String>,
    title: &'a str,
    title_rank: u8,
    title_ts: i64,
    has_title: u8,
    is_error: u8,
    body: &'a str,
}

/// One row of `edges` as written.
#[derive(serde::Serialize)]
struct EdgeRow<'a> {
    task: &'a str,
    child: &'a str,
    parent: &'a str,
    kind: &'static str,
    ts_ns: i64,
}

/// Events whose ids one duplicate-lookup query lists at most: with their task ids (at most 40
/// hex digits each) and event ids quoted, a query stays well under ClickHouse's default
/// `max_query_size` of 256 KiB for ids up to about 60 bytes.
const LOOKUP_EVENTS: usize = 2_000;

/// The separator of an indexed attribute's key and value in `attributes` (unit separator).
const ATTR_SEP: char = '\u{1f}';

impl ClickHouseStore {
    /// Connects to the server, creates the database and the tables when absent (schema version
    /// [`CLICKHOUSE_SCHEMA_VERSION`]), upgrades an older schema in place, and refuses a newer
    /// one. Several collectors may open the same store at once: every statement is idempotent.
    ///
    /// # Errors
    /// [`StoreError::ClickHouse`] (server unreachable, refused credentials, a failed statement),
    /// [`StoreError::ClickHouseSchema`] when the store was written by a newer sightline.
    pub fn open(url: &ClickHouseUrl) -> Result<ClickHouseStore, StoreError> {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(120)))
            .build()
            .into();
        let mut s = ClickHouseStore {
            url: url.clone(),
            agent,
            last_batch: 0,
        };
        let db = &s.url.database.clone();
        s.exec(
            "creating the database",
            &format!("CREATE DATABASE IF NOT EXISTS {db}"),
        )?;
        s.exec(
            "creating the meta table",
            &format!(
                "CREATE TABLE IF NOT EXISTS {db}.sightline_meta (key String, value String, written UInt64)
                 ENGINE = ReplacingMergeTree(written) ORDER BY key"
            ),
        )?;
        let found = s.schema_version()?;
        match found {
            Some(v) if v > CLICKHOUSE_SCHEMA_VERSION => {
                return Err(StoreError::ClickHouseSchema {
                    store: url.to_string(),
                    found: v,
                    expected: CLICKHOUSE_SCHEMA_VERSION,
                });
            }
            _ => {
                // Version 1 is the first: creating its tables is also the upgrade from none.
                // Each later version adds its steps, idempotent (`IF NOT EXISTS`), then the
                // new version is recorded.
                for stmt in schema_v1(db) {
                    s.exec("creating the tables", &stmt)?;
                }
                for stmt in schema_v2(db) {
                    s.exec("creating the schema version 2 tables", &stmt)?;
                }
                for stmt in schema_v3(db) {
                    s.exec("creating the schema version 3 tables", &stmt)?;
                }
                if found == Some(1) {
                    s.exec("upgrading to schema version 2", &backfill_v2(db))?;
                }
                if found.is_some_and(|v| v < 3) {
                    s.exec("upgrading to schema version 3", &backfill_v3(db))?;
                }
                if found != Some(CLICKHOUSE_SCHEMA_VERSION) {
                    s.set_schema_version(CLICKHOUSE_SCHEMA_VERSION)?;
                }
            }
        }
        Ok(s)
    }

    /// The store's location (without credentials).
    pub fn url(&self) -> &ClickHouseUrl {
        &self.url
    }

    /// The schema version recorded in `sightline_meta`, `None` for a new store.
    ///
    /// # Errors
    /// [`StoreError::ClickHouse`].
    pub fn schema_version(&self) -> Result<Option<u32>, StoreError> {
        let db = &self.url.database;
        let v = self.query(
            "reading the schema version",
            &format!(
                "SELECT argMax(value, written) AS v FROM {db}.sightline_meta WHERE key = 'schema_version' GROUP BY key FORMAT TSV"
            ),
        )?;
        let v = v.trim();
        if v.is_empty() {
            return Ok(None);
        }
        v.parse().map(Some).map_err(|_| StoreError::ClickHouse {
            what: "reading the schema version",
            detail: format!("schema_version is {v:?}, not a number"),
        })
    }

    /// Records `version` as the schema version (tests use it to make a store "from the future").
    ///
    /// # Errors
    /// [`StoreError::ClickHouse`].
    pub fn set_schema_version(&mut self, version: u32) -> Result<(), StoreError> {
        let written = self.next_batch();
        let db = &self.url.database;
        self.exec(
            "writing the schema version",
            &format!(
                "INSERT INTO {db}.sightline_meta (key, value, written) VALUES ('schema_version', '{version}', {written})"
            ),
        )
    }

    fn next_batch(&mut self) -> u64 {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        self.last_batch = now.max(self.last_batch + 1);
        self.last_batch
    }

    /// Sends `sql` with `body` appended (an INSERT's rows); returns the response text.
    fn post(&self, what: &'static str, sql: &str, body: &[u8]) -> Result<String, StoreError> {
        let url = format!("http://{}:{}/", self.url.host, self.url.port);
        let mut req = self
            .agent
            .post(&url)
            .query("output_format_json_quote_64bit_integers", "0")
            .query("query", sql);
        if let Some(u) = &self.url.user {
            let pair = format!("{u}:{}", self.url.password.as_deref().unwrap_or(""));
            use base64::Engine as _;
            let token = base64::engine::general_purpose::STANDARD.encode(pair);
            req = req.header("Authorization", &format!("Basic {token}"));
        }
        let mut resp = req.send(body).map_err(|e| StoreError::ClickHouse {
            what,
            detail: format!("{} unreachable: {e}", self.url),
        })?;
        let status = resp.status();
        let text = resp
            .body_mut()
            .with_config()
            .limit(MAX_RESPONSE)
            .read_to_string()
            .map_err(|e| StoreError::ClickHouse {
                what,
                detail: format!("reading the response: {e}"),
            })?;
        if !status.is_success() {
            let first = text.lines().next().unwrap_or("").trim();
            return Err(StoreError::ClickHouse {
                what,
                detail: format!("{} answered {status}: {first}", self.url),
            });
        }
        Ok(text)
    }

    fn exec(&self, what: &'static str, sql: &str) -> Result<(), StoreError> {
        self.post(what, sql, b"").map(|_| ())
    }

    fn query(&self, what: &'static str, sql: &str) -> Result<String, StoreError> {
        self.post(what, "", sql.as_bytes())
    }

    /// Rows of a `FORMAT JSONEachRow` query, each parsed as `T`.
    fn rows<T: serde::de::DeserializeOwned>(
        &self,
        what: &'static str,
        sql: &str,
    ) -> Result<Vec<T>, StoreError> {
        let text = self.query(what, &format!("{sql} FORMAT JSONEachRow"))?;
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                serde_json::from_str(l).map_err(|e| StoreError::ClickHouse {
                    what,
                    detail: format!("unexpected row {l:.200}: {e}"),
                })
            })
            .collect()
    }

    /// Writes `events` as one batch; `received_ns` is the arrival time recorded for them.
    ///
    /// At-least-once and idempotent: an event identical to one already stored (or earlier in
    /// `events`; with [`ClickHouseUrl::duplicate_lookup`] off, only the latter) is counted in
    /// [`InsertStats::duplicates`] and adds nothing to any result even if
    /// it is written again (a retried batch whose first attempt reached the server, or two
    /// collectors racing, write a second copy that `FINAL` and the summary's `uniqExact`
    /// collapse). An event whose id is stored with other content is another version
    /// ([`InsertStats::conflicts`]), kept as the SQLite store keeps it.
    ///
    /// # Errors
    /// [`StoreError::ClickHouse`]; the batch may then be partly written, and writing it again
    /// is safe.
    pub fn insert(
        &mut self,
        events: &[Event],
        received_ns: i64,
    ) -> Result<InsertStats, StoreError> {
        if events.is_empty() {
            return Ok(InsertStats::default());
        }
        let bodies: Vec<String> = events
            .iter()
            .map(|e| {
                let mut e = e.clone();
                e.task = stored_task_id(&e.task);
                serde_json::to_string(&e).expect("an event serializes")
            })
            .collect();
        let stored_tasks: Vec<String> = events.iter().map(|e| stored_task_id(&e.task)).collect();
        let hashes: Vec<u64> = bodies.iter().map(|b| fnv1a(b.as_bytes())).collect();
        // What is already stored, for the statistics (and to skip re-sending it); without the
        // lookup, only this batch's own duplicates are found (module doc, `duplicate_lookup`).
        let mut seen: HashMap<(&str, &str), HashSet<u64>> = if self.url.duplicate_lookup {
            self.known_events(&stored_tasks, events)?
        } else {
            HashMap::new()
        };
        let (mut duplicates, mut conflicts) = (0, 0);
        let mut keep = Vec::with_capacity(events.len());
        for (i, e) in events.iter().enumerate() {
            let versions = seen.entry((&stored_tasks[i], &e.id)).or_default();
            if versions.contains(&hashes[i]) {
                duplicates += 1;
                keep.push(false);
                continue;
            }
            if !versions.is_empty() {
                conflicts += 1;
            }
            versions.insert(hashes[i]);
            keep.push(true);
        }
        let batch = self.next_batch();
        let mut rows = String::new();
        let mut edges = String::new();
        let mut tasks = HashSet::new();
        let mut written = 0;
        for (i, e) in events.iter().enumerate() {
            if !keep[i] {
                continue;
            }
            written += 1;
            tasks.insert(stored_tasks[i].as_str());
            let ts = e.timestamp_ns.unwrap_or(i64::MAX);
            let title = e
                .field("Title")
                .map(|t| (0u8, t))
                .or_else(|| e.label().map(|l| (1u8, l)));
            let indexed = e.field("span.name").is_some();
            let row = EventRow {
                task: &stored_tasks[i],
                event_id: &e.id,
                content_hash: hashes[i],
                batch,
                idx: i as u32,
                keep: u64::MAX - batch,
                received_ns,
                ts_ns: e.timestamp_ns.unwrap_or(0),
                has_ts: u8::from(e.timestamp_ns.is_some()),
                hosts: e.host.as_deref().into_iter().collect(),
                services: e.agent.as_deref().into_iter().collect(),
                operations: e
                    .field("span.name")
                    .or_else(|| (!e.id.contains(':')).then(|| e.label()).flatten())
                    .into_iter()
                    .collect(),
                tags: e
                    .fields
                    .iter()
                    .filter(|(k, _)| k == "Tag")
                    .map(|(_, v)| v.as_str())
                    .collect(),
                attributes: if indexed {
                    e.fields
                        .iter()
                        .filter(|(_, v)| v.len() <= MAX_INDEXED_VALUE)
                        .map(|(k, v)| format!("{k}{ATTR_SEP}{v}"))
                        .collect()
                } else {
                    Vec::new()
                },
                title: title.map_or("", |t| t.1),
                title_rank: title.map_or(0, |t| t.0),
                title_ts: ts,
                has_title: u8::from(title.is_some()),
                is_error: u8::from(e.field("status.code") == Some("error")),
                body: &bodies[i],
            };
            rows.push_str(&serde_json::to_string(&row).expect("a row serializes"));
            rows.push('\n');
            for p in &e.parents {
                let edge = EdgeRow {
                    task: &stored_tasks[i],
                    child: &e.id,
                    parent: &p.id,
                    kind: match p.kind {
                        EdgeKind::Causal => "causal",
                        EdgeKind::Link => "link",
                        _ => "nesting",
                    },
                    ts_ns: e.timestamp_ns.unwrap_or(0),
                };
                edges.push_str(&serde_json::to_string(&edge).expect("an edge serializes"));
                edges.push('\n');
            }
        }
        let db = &self.url.database;
        if !rows.is_empty() {
            // Edges first: a batch whose events are visible has its edges too.
            if !edges.is_empty() {
                self.post(
                    "inserting edges",
                    &format!("INSERT INTO {db}.edges FORMAT JSONEachRow"),
                    edges.as_bytes(),
                )?;
            }
            self.post(
                "inserting events",
                &format!("INSERT INTO {db}.events FORMAT JSONEachRow"),
                rows.as_bytes(),
            )?;
        }
        Ok(InsertStats {
            events: written,
            tasks: tasks.len(),
            duplicates,
            conflicts,
        })
    }

    /// The content hashes already stored for the (task, event id) pairs of `events`.
    fn known_events<'a>(
        &self,
        stored_tasks: &'a [String],
        events: &'a [Event],
    ) -> Result<HashMap<(&'a str, &'a str), HashSet<u64>>, StoreError> {
        #[derive(serde::Deserialize)]
        struct Known {
            task: String,
            event_id: String,
            content_hash: u64,
        }
        let mut out: HashMap<(&str, &str), HashSet<u64>> = HashMap::new();
        let list = |s: &HashSet<&str>| s.iter().map(|t| quote(t)).collect::<Vec<_>>().join(",");
        let db = &self.url.database;
        let mut found: Vec<Known> = Vec::new();
        // In pieces: the server refuses a query longer than its `max_query_size` (256 KiB by
        // default), which the id lists of a 16k-event batch exceed.
        for (tasks, evs) in stored_tasks
            .chunks(LOOKUP_EVENTS)
            .zip(events.chunks(LOOKUP_EVENTS))
        {
            let task_set: HashSet<&str> = tasks.iter().map(String::as_str).collect();
            let id_set: HashSet<&str> = evs.iter().map(|e| e.id.as_str()).collect();
            found.extend(self.rows::<Known>(
                "looking up stored events",
                &format!(
                    "SELECT DISTINCT task, event_id, content_hash FROM {db}.events
                     WHERE task IN ({}) AND event_id IN ({})",
                    list(&task_set),
                    list(&id_set)
                ),
            )?);
        }
        let index: HashMap<(&str, &str), (&str, &str)> = stored_tasks
            .iter()
            .zip(events)
            .map(|(t, e)| ((t.as_str(), e.id.as_str()), (t.as_str(), e.id.as_str())))
            .collect();
        for k in found {
            if let Some(&key) = index.get(&(k.task.as_str(), k.event_id.as_str())) {
                out.entry(key).or_default().insert(k.content_hash);
            }
        }
        Ok(out)
    }

    /// Resolves a task id or a unique prefix of one, as [`crate::store::Store::resolve_task`].
    ///
    /// # Errors
    /// [`StoreError::NoSuchTask`], [`StoreError::AmbiguousTask`], [`StoreError::ClickHouse`].
    pub fn resolve_task(&self, prefix: &str) -> Result<String, StoreError> {
        #[derive(serde::Deserialize)]
        struct T {
            task: String,
        }
        let p = prefix.trim().to_ascii_uppercase();
        let db = &self.url.database;
        let exact: Vec<T> = self.rows(
            "looking up a task",
            &format!(
                "SELECT task FROM {db}.task_summaries WHERE task = {} LIMIT 1",
                quote(&stored_task_id(&p))
            ),
        )?;
        if let Some(t) = exact.first() {
            return Ok(display_task_id(&t.task).to_string());
        }
        let mut cond = format!("substring(task, 1, {}) = {}", p.len(), quote(&p));
        // The same prefix as a key range, so that the lookup reads the granules of
        // `task_summaries` (ordered by task) that can hold it, not the whole task column.
        if let Some(next) = prefix_successor(&p) {
            cond = format!(
                "task >= {} AND task < {} AND {cond}",
                quote(&p),
                quote(&next)
            );
        }
        let found: Vec<T> = self.rows(
            "looking up a task prefix",
            &format!(
                "SELECT DISTINCT task FROM {db}.task_summaries WHERE {cond} ORDER BY task LIMIT 6"
            ),
        )?;
        match found.len() {
            0 => Err(StoreError::NoSuchTask(prefix.to_string())),
            1 => Ok(display_task_id(&found[0].task).to_string()),
            _ => {
                let n = self.query(
                    "counting tasks with a prefix",
                    &format!(
                        "SELECT uniqExact(task) FROM {db}.task_summaries WHERE {cond} FORMAT TSV"
                    ),
                )?;
                Err(StoreError::AmbiguousTask {
                    count: n.trim().parse().unwrap_or(found.len()),
                    prefix: prefix.to_string(),
                    examples: found
                        .iter()
                        .take(3)
                        .map(|t| display_task_id(&t.task))
                        .collect::<Vec<_>>()
                        .join(", "),
                })
            }
        }
    }

    /// All stored events of task `task_id` (exact id, either form), in arrival order (batch,
    /// then position in it), each once; their `task` is the id as shown.
    ///
    /// # Errors
    /// [`StoreError::ClickHouse`].
    pub fn load_task(&self, task_id: &str) -> Result<Vec<Event>, StoreError> {
        #[derive(serde::Deserialize)]
        struct B {
            body: String,
        }
        let stored = stored_task_id(task_id);
        let shown = display_task_id(&stored).to_string();
        let db = &self.url.database;
        // Each copy of an event collapsed by its key, as `FINAL` would (the copy of the
        // largest `keep`, the earliest batch), but on the task's rows only: `FINAL` in 18.16
        // merges the whole table's parts for one task (1.78 s at 10 M events).
        let rows: Vec<B> = self.rows(
            "loading a task",
            &format!(
                "SELECT argMax(body, keep) AS body, max(keep) AS k, argMax(idx, keep) AS i
                 FROM {db}.events WHERE task = {} GROUP BY event_id, content_hash
                 ORDER BY k DESC, i",
                quote(&stored)
            ),
        )?;
        rows.into_iter()
            .map(|r| {
                let mut e: Event =
                    serde_json::from_str(&r.body).map_err(|e| StoreError::ClickHouse {
                        what: "decoding a stored event",
                        detail: e.to_string(),
                    })?;
                e.task = shown.clone();
                Ok(e)
            })
            .collect()
    }

    /// Tasks matching `filter`, as [`crate::store::Store::tasks`] orders and limits them, read
    /// from `task_summaries` only (never from `events`).
    ///
    /// # Errors
    /// [`StoreError::ClickHouse`].
    pub fn tasks(&self, filter: &TaskFilter) -> Result<Vec<TaskSummary>, StoreError> {
        #[derive(serde::Deserialize)]
        struct Row {
            task: String,
            received: i64,
            timed: u8,
            first: i64,
            last: i64,
            events: i64,
            errors: i64,
            titled: u8,
            title: String,
            hosts: Vec<String>,
            services: Vec<String>,
        }
        let db = &self.url.database;
        let sql = tasks_sql(db, filter);
        let rows: Vec<Row> = self.rows("listing tasks", &sql)?;
        let mut v: Vec<TaskSummary> = rows
            .into_iter()
            .map(|r| TaskSummary {
                task_id: display_task_id(&r.task).to_string(),
                received_ns: r.received,
                first_ts_ns: (r.timed == 1).then_some(r.first),
                last_ts_ns: (r.timed == 1).then_some(r.last),
                events: r.events,
                title: (r.titled == 1).then_some(r.title),
                hosts: r.hosts,
                services: r.services,
                errors: r.errors,
            })
            .collect();
        if filter.sort == TaskSort::Start {
            v.reverse();
        }
        Ok(v)
    }

    /// Distinct services (agents) of all stored events, sorted (as [`crate::query::services`]),
    /// read from the first key column of `service_tasks` (schema version 3), not by merging the
    /// services of every task summary.
    ///
    /// # Errors
    /// [`StoreError::ClickHouse`].
    pub fn services(&self) -> Result<Vec<String>, StoreError> {
        #[derive(serde::Deserialize)]
        struct S {
            s: String,
        }
        let db = &self.url.database;
        let rows: Vec<S> = self.rows(
            "listing services",
            &format!("SELECT DISTINCT service AS s FROM {db}.service_tasks ORDER BY s"),
        )?;
        Ok(rows.into_iter().map(|r| r.s).collect())
    }

    /// Distinct operations of the events of service `service`, sorted (as
    /// [`crate::query::operations`]: a span's name, an X-Trace report's label), read from
    /// `service_operations` (schema version 2), not from `events`.
    ///
    /// # Errors
    /// [`StoreError::ClickHouse`].
    pub fn operations(&self, service: &str) -> Result<Vec<String>, StoreError> {
        #[derive(serde::Deserialize)]
        struct O {
            op: String,
        }
        let db = &self.url.database;
        let rows: Vec<O> = self.rows(
            "listing operations",
            &format!(
                "SELECT DISTINCT operation AS op FROM {db}.service_operations
                 WHERE service = {} ORDER BY op",
                quote(service)
            ),
        )?;
        Ok(rows.into_iter().map(|r| r.op).collect())
    }

    /// Events stored, each once (`FINAL`).
    ///
    /// # Errors
    /// [`StoreError::ClickHouse`].
    pub fn event_count(&self) -> Result<i64, StoreError> {
        let db = &self.url.database;
        let n = self.query(
            "counting events",
            &format!("SELECT count() FROM {db}.events FINAL FORMAT TSV"),
        )?;
        n.trim().parse().map_err(|_| StoreError::ClickHouse {
            what: "counting events",
            detail: format!("unexpected answer {n:.100}"),
        })
    }

    /// Drops the day partitions of events, edges and summaries whose events are older than
    /// `before_ns` (ns since the epoch; events without a timestamp sit in 1970-01-01's
    /// partition). ClickHouse 18.16 has no TTL clause: retention is partition drops, one day at
    /// a time. Returns how many partitions were dropped.
    ///
    /// # Errors
    /// [`StoreError::ClickHouse`].
    pub fn drop_days_before(&self, before_ns: i64) -> Result<usize, StoreError> {
        let db = &self.url.database;
        let cutoff = before_ns.div_euclid(1_000_000_000);
        let parts = self.query(
            "listing partitions",
            &format!(
                "SELECT DISTINCT table, partition FROM system.parts WHERE database = {} AND active
                 AND table IN ('events', 'edges', 'task_summaries', 'service_operations', 'service_tasks')
                 AND toDate(partition) < toDate(toDateTime({cutoff})) FORMAT TSV",
                quote(db)
            ),
        )?;
        let mut n = 0;
        for line in parts.lines() {
            let Some((table, part)) = line.split_once('\t') else {
                continue;
            };
            self.exec(
                "dropping a partition",
                &format!("ALTER TABLE {db}.{table} DROP PARTITION {}", quote(part)),
            )?;
            n += 1;
        }
        Ok(n)
    }

    /// Drops the database and everything in it (tests and benchmarks).
    ///
    /// # Errors
    /// [`StoreError::ClickHouse`].
    pub fn drop_database(self) -> Result<(), StoreError> {
        self.exec(
            "dropping the database",
            &format!("DROP DATABASE IF EXISTS {}", self.url.database),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_successor_bounds_exactly_the_strings_with_the_prefix() {
        assert_eq!(prefix_successor("AB").as_deref(), Some("AC"));
        assert_eq!(prefix_successor("A9").as_deref(), Some("A:"));
        assert_eq!(prefix_successor(""), None);
        assert_eq!(prefix_successor("A\u{7f}"), None);
        let next = prefix_successor("3F").unwrap();
        for id in ["3F", "3F00", "3FFFFFFF"] {
            assert!(id >= "3F" && id < next.as_str(), "{id}");
        }
        for id in ["3E", "3EFF", "40", "3G"] {
            assert!(!(id >= "3F" && id < next.as_str()), "{id}");
        }
    }
}
