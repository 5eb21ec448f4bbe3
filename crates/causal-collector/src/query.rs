//! Read-only queries of the web UI and its Jaeger-compatible API, on the same store as
//! `sightline tasks` and `sightline show` (one query layer under every front end), through
//! [`TraceStore`]: the SQLite [`Store`] or a ClickHouse store alike.
//!
//! - [`services`] and [`operations`]: the distinct agents (OTLP `service.name`) and the
//!   operations of one (Jaeger's `/api/services`, `/api/services/{service}/operations`);
//! - [`search`]: tasks by service, operation, attribute, duration, errors and time
//!   ([`SearchQuery`] → [`TaskSummary`], through [`TraceStore::tasks`]);
//! - [`load_graph`]: one task rebuilt for analysis exactly as `sightline show` rebuilds it.
//!
//! An event's *operation* is its label, except that an OTLP span's start event (`S:start`,
//! label `<name> start`, `docs/otlp-mapping.md`) names the operation `<name>`; span end events
//! and span events are no operations. An event is an *error* when it has the field
//! `status.code` = `error` (OTLP) or `error` = `true`/`1` (Jaeger's tag); the stores
//! count them as the events are stored.

use causal_analysis::{SkewAdjustment, TaskGraph};

use crate::backend::TraceStore;
use crate::error::StoreError;
use crate::store::{Store, TaskFilter, TaskSort, TaskSummary, display_task_id, stored_task_id};

/// SQL for the operation of event row `e` (NULL for span end events and span events).
const OPERATION: &str = "CASE WHEN e.event_id LIKE '%:start' AND e.label LIKE '% start' \
     THEN substr(e.label, 1, length(e.label) - 6) \
     WHEN e.event_id LIKE '%:end' OR e.event_id LIKE '%:event%' THEN NULL ELSE e.label END";

fn sql(what: &'static str) -> impl FnOnce(rusqlite::Error) -> StoreError {
    move |source| StoreError::Sql { what, source }
}

/// Distinct agents (services) of all stored events, sorted.
///
/// # Errors
/// The store's [`StoreError`].
pub fn services<S: TraceStore + ?Sized>(store: &S) -> Result<Vec<String>, StoreError> {
    store.services()
}

/// Distinct operations (module docs) of the events of agent `service`, sorted.
///
/// # Errors
/// The store's [`StoreError`].
pub fn operations<S: TraceStore + ?Sized>(
    store: &S,
    service: &str,
) -> Result<Vec<String>, StoreError> {
    store.operations(service)
}

/// [`services`] of the SQLite store.
pub(crate) fn sqlite_services(store: &Store) -> Result<Vec<String>, StoreError> {
    let mut st = store
        .conn()
        .prepare("SELECT DISTINCT agent FROM events WHERE agent IS NOT NULL ORDER BY agent")
        .map_err(sql("preparing the service list"))?;
    st.query_map([], |r| r.get(0))
        .map_err(sql("listing services"))?
        .collect::<Result<_, _>>()
        .map_err(sql("reading services"))
}

/// [`operations`] of the SQLite store.
pub(crate) fn sqlite_operations(store: &Store, service: &str) -> Result<Vec<String>, StoreError> {
    let q = format!(
        "SELECT DISTINCT op FROM (SELECT {OPERATION} AS op FROM events e WHERE e.agent = ?1)
         WHERE op IS NOT NULL ORDER BY op"
    );
    let mut st = store
        .conn()
        .prepare(&q)
        .map_err(sql("preparing the operation list"))?;
    st.query_map([service], |r| r.get(0))
        .map_err(sql("listing operations"))?
        .collect::<Result<_, _>>()
        .map_err(sql("reading operations"))
}

/// A task search; every `None` (or empty list, or `false`) is no filter. All filters must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SearchQuery {
    /// Only tasks with an event of this agent (service).
    pub service: Option<String>,
    /// Only tasks with an event of this operation (module docs); with `service`, an event of
    /// that service.
    pub operation: Option<String>,
    /// Only tasks with, for each pair, an event that has field `key` = `value` (exact).
    pub attributes: Vec<(String, String)>,
    /// Only tasks lasting at least this long (`last_ts_ns - first_ts_ns`), ns.
    pub min_duration_ns: Option<i64>,
    /// Only tasks lasting at most this long, ns.
    pub max_duration_ns: Option<i64>,
    /// Only tasks with an error event (module docs).
    pub errors_only: bool,
    /// Only tasks first seen at or after this time (ns since the Unix epoch; as
    /// [`TaskSummary::first_seen_ns`]).
    pub since_ns: Option<i64>,
    /// Only tasks first seen before this time (ns).
    pub until_ns: Option<i64>,
    /// At most this many tasks, the most recent (`None`: all).
    pub limit: Option<usize>,
}

/// Corrects the times of `tasks` for clock skew as [`load_graph`] corrects a task's events
/// (`docs/critical-path.md`, "Clock skew"): each task whose events come from more than one host
/// is loaded, its skew estimated and applied, and its `first_ts_ns` and `last_ts_ns` set to the
/// corrected earliest and latest timestamps, so its [`TaskSummary::duration_ns`] is the one
/// `sightline show` prints. Tasks of one host (skew is between hosts) are left as stored, without
/// a load. Filters on duration and time (the indexes) see the stored times.
///
/// # Errors
/// The store's [`StoreError`].
pub fn adjust_for_skew<S: TraceStore + ?Sized>(
    store: &S,
    tasks: &mut [TaskSummary],
) -> Result<(), StoreError> {
    for t in tasks
        .iter_mut()
        .filter(|t| t.hosts.len() > 1 && t.first_ts_ns.is_some())
    {
        let mut events = store.load_task(&t.task_id)?;
        let skew = SkewAdjustment::estimate(&events);
        if skew.is_empty() {
            continue;
        }
        skew.apply(&mut events);
        let ts = || events.iter().filter_map(|e| e.timestamp_ns);
        if let (Some(first), Some(last)) = (ts().min(), ts().max()) {
            t.first_ts_ns = Some(first);
            t.last_ts_ns = Some(last);
        }
    }
    Ok(())
}

/// Tasks matching `q`, most recent first (by [`TaskSummary::first_seen_ns`], then task id):
/// [`TraceStore::tasks`] with the same filters (a service and an operation are matched
/// independently, as `sightline tasks --service S --operation O` matches them).
///
/// # Errors
/// The store's [`StoreError`].
pub fn search<S: TraceStore + ?Sized>(
    store: &S,
    q: &SearchQuery,
) -> Result<Vec<TaskSummary>, StoreError> {
    let mut found = store.tasks(&filter(q, None))?;
    // `TraceStore::tasks` keeps the most recent `limit` tasks, oldest first.
    found.reverse();
    Ok(found)
}

/// The [`TaskFilter`] of search `q`, for task `task_id` only when given.
fn filter(q: &SearchQuery, task_id: Option<&str>) -> TaskFilter {
    TaskFilter {
        task_id: task_id.map(str::to_string),
        since_ns: q.since_ns,
        until_ns: q.until_ns,
        service: q.service.clone(),
        operation: q.operation.clone(),
        attributes: q.attributes.clone(),
        min_duration_ns: q.min_duration_ns,
        max_duration_ns: q.max_duration_ns,
        errors: q.errors_only,
        sort: TaskSort::Start,
        limit: q.limit,
        ..TaskFilter::default()
    }
}

/// The summary of task `task_id` (exact id, either form: [`stored_task_id`]), if stored.
///
/// # Errors
/// The store's [`StoreError`].
pub fn task_summary<S: TraceStore + ?Sized>(
    store: &S,
    task_id: &str,
) -> Result<Option<TaskSummary>, StoreError> {
    Ok(store
        .tasks(&filter(&SearchQuery::default(), Some(task_id)))?
        .pop())
}

/// Whether task `task_id` (exact id, either form: [`stored_task_id`]) is stored.
///
/// # Errors
/// The store's [`StoreError`].
pub fn task_exists<S: TraceStore + ?Sized>(store: &S, task_id: &str) -> Result<bool, StoreError> {
    Ok(task_summary(store, task_id)?.is_some())
}

/// Loads task `task` (exact id, either form) for analysis as `sightline show` does: its stored
/// events with the clock-skew correction applied (unless `adjust` is false;
/// `docs/critical-path.md`, "Clock skew"), then the nesting edges of its spans
/// (`docs/otlp-mapping.md`), rebuilt as a graph named by the id as shown.
///
/// # Errors
/// The store's [`StoreError`].
pub fn load_graph<S: TraceStore + ?Sized>(
    store: &S,
    task: &str,
    adjust: bool,
) -> Result<(TaskGraph, SkewAdjustment), StoreError> {
    let mut events = store.load_task(task)?;
    let skew = if adjust {
        SkewAdjustment::estimate(&events)
    } else {
        SkewAdjustment::default()
    };
    skew.apply(&mut events);
    // Nesting edges compare end times: after the skew correction.
    causal_analysis::infer_span_nesting(&mut events);
    let shown = display_task_id(&stored_task_id(task)).to_string();
    Ok((TaskGraph::build(shown, events), skew))
}

#[cfg(test)]
mod tests {
    use super::*;
    use causal_analysis::{Event, Parent};

    fn ev(
        task: &str,
        id: &str,
        agent: &str,
        label: &str,
        ts: i64,
        fields: &[(&str, &str)],
    ) -> Event {
        Event {
            task: task.into(),
            id: id.into(),
            agent: Some(agent.into()),
            host: Some("h1".into()),
            timestamp_ns: Some(ts),
            labels: vec![label.into()],
            fields: fields
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Event::default()
        }
    }

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(&dir.path().join("s.db")).unwrap();
        let mut end = ev(
            "AAAA",
            "S1:end",
            "web",
            "GET / end",
            500,
            &[("status.code", "error")],
        );
        end.parents.push(Parent::causal("S1:start"));
        s.insert(
            &[
                ev(
                    "AAAA",
                    "S1:start",
                    "web",
                    "GET / start",
                    100,
                    // As the OTLP mapping stores a span's start (`docs/otlp-mapping.md`).
                    &[("span.name", "GET /"), ("http.method", "GET")],
                ),
                end,
                ev("BBBB", "01", "db", "query", 1_000, &[("Tag", "x")]),
                ev("BBBB", "02", "web", "render", 1_050, &[]),
                ev("CCCC", "03", "db", "query", 5_000, &[("error", "true")]),
            ],
            1,
        )
        .unwrap();
        (dir, s)
    }

    fn ids(hits: Vec<TaskSummary>) -> Vec<String> {
        hits.into_iter().map(|h| h.task_id).collect()
    }

    #[test]
    fn services_and_operations_of_spans_and_reports() {
        let (_d, s) = store();
        assert_eq!(services(&s).unwrap(), ["db", "web"]);
        // The span's start names the operation; its end is no operation.
        assert_eq!(operations(&s, "web").unwrap(), ["GET /", "render"]);
        assert_eq!(operations(&s, "db").unwrap(), ["query"]);
        assert!(operations(&s, "nope").unwrap().is_empty());
    }

    #[test]
    fn search_filters_combine() {
        let (_d, s) = store();
        let all = search(&s, &SearchQuery::default()).unwrap();
        assert_eq!(ids(all.clone()), ["CCCC", "BBBB", "AAAA"]);
        assert_eq!(all[1].services, ["db", "web"]);
        assert_eq!((all[0].errors, all[1].errors, all[2].errors), (1, 0, 1));
        let q = |f: &dyn Fn(&mut SearchQuery)| {
            let mut q = SearchQuery::default();
            f(&mut q);
            ids(search(&s, &q).unwrap())
        };
        assert_eq!(q(&|q| q.service = Some("web".into())), ["BBBB", "AAAA"]);
        assert_eq!(
            q(&|q| {
                q.service = Some("web".into());
                q.operation = Some("GET /".into());
            }),
            ["AAAA"]
        );
        assert_eq!(q(&|q| q.operation = Some("query".into())), ["CCCC", "BBBB"]);
        assert_eq!(
            q(&|q| q.attributes = vec![("http.method".into(), "GET".into())]),
            ["AAAA"]
        );
        assert_eq!(q(&|q| q.errors_only = true), ["CCCC", "AAAA"]);
        assert_eq!(q(&|q| q.min_duration_ns = Some(100)), ["AAAA"]);
        assert_eq!(q(&|q| q.max_duration_ns = Some(50)), ["CCCC", "BBBB"]);
        assert_eq!(
            q(&|q| {
                q.since_ns = Some(1_000);
                q.until_ns = Some(5_000);
            }),
            ["BBBB"]
        );
        assert_eq!(q(&|q| q.limit = Some(1)), ["CCCC"]);
        assert!(task_exists(&s, "aaaa").unwrap());
        let one = task_summary(&s, "bbbb").unwrap().unwrap();
        assert_eq!((one.task_id.as_str(), one.events), ("BBBB", 2));
        assert!(task_summary(&s, "BBB").unwrap().is_none());
        assert!(!task_exists(&s, "AAA").unwrap());
        let (g, skew) = load_graph(&s, "AAAA", true).unwrap();
        assert_eq!((g.task.as_str(), g.len(), g.edges.len()), ("AAAA", 2, 1));
        assert!(skew.is_empty());
    }
}
