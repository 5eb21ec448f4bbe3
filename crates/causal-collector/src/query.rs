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
pub(crate) const OPERATION: &str = "CASE WHEN e.event_id LIKE '%:start' AND e.label LIKE '% start' \
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

/// [`operations`] of the SQLite store, read from `service_operations` (schema version 3),
/// not from `events`.
pub(crate) fn sqlite_operations(store: &Store, service: &str) -> Result<Vec<String>, StoreError> {
    let mut st = store
        .conn()
        .prepare_cached(
            "SELECT operation FROM service_operations WHERE service = ?1 ORDER BY operation",
        )
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

/// One store's part of a task joined from several stores ([`load_graph_joined`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DomainPart {
    /// The store, as given (a file path, or a ClickHouse URL without credentials).
    pub store: String,
    /// Events of the task found in this store and not in an earlier one.
    pub events: usize,
}

/// An edge between events held by different stores: where one domain's view of the task hands
/// over to another's.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DomainCrossing {
    /// Index in [`DomainJoin::parts`] of the store holding the parent.
    pub from: usize,
    /// The parent event.
    pub parent: String,
    /// Index in [`DomainJoin::parts`] of the store holding the child.
    pub to: usize,
    /// The child event.
    pub child: String,
}

/// An edge whose parent is in none of the stores given: the joined view ends there (the parent
/// lives in a domain whose store was not given, or was never reported).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ViewEnd {
    /// Index in [`DomainJoin::parts`] of the store holding the child.
    pub store: usize,
    /// The event whose parent is missing.
    pub child: String,
    /// The missing parent's event id.
    pub parent: String,
    /// The collector of the domain that holds the parent, when the child's report names it
    /// (its `EdgeDestination` key: the task's metadata named that collector when it crossed
    /// into the child's domain; X-Trace's Destination option).
    pub domain: Option<String>,
}

/// What joining one task from several stores (administrative domains, X-Trace's design point)
/// found: each store's share, the events held by more than one store, the edges that cross from
/// one store's events to another's, and the edges whose parent no store holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct DomainJoin {
    /// The stores in the order given.
    pub parts: Vec<DomainPart>,
    /// Events found in more than one store: kept once, from the first store holding them
    /// (reports that reached two collectors). A copy with different content is not compared.
    pub repeated: usize,
    /// Edges between events of different stores, in the task's event order.
    pub crossings: Vec<DomainCrossing>,
    /// Edges whose parent is in none of the stores, in the task's event order.
    pub view_ends: Vec<ViewEnd>,
}

/// Most crossings and view ends [`DomainJoin::lines`] lists one by one.
pub const DOMAIN_LINES: usize = 8;

impl DomainJoin {
    /// The lines `show` prints above a joined task: `domains: A 12 events, B 9 events`, one
    /// `domain boundary: A -> B: PARENT -> CHILD` per crossing and one `view ends: CHILD (in B)
    /// follows PARENT, in none of the stores given` per missing parent, at most
    /// [`DOMAIN_LINES`] of each, then a count of the rest; a view end whose child names its
    /// parent's domain says which collector holds it and how to join its store (`--peer`).
    /// Empty for a single store, unless a view end names a domain.
    pub fn lines(&self) -> Vec<String> {
        if !self.names_another_domain() {
            return Vec::new();
        }
        let name = |i: usize| self.parts[i].store.as_str();
        let mut out = vec![format!(
            "domains: {}{}",
            self.parts
                .iter()
                .map(|p| format!("{} {}", p.store, events_text(p.events)))
                .collect::<Vec<_>>()
                .join(", "),
            if self.repeated > 0 {
                format!(
                    " ({} in more than one store, kept once)",
                    events_text(self.repeated)
                )
            } else {
                String::new()
            }
        )];
        for c in self.crossings.iter().take(DOMAIN_LINES) {
            out.push(format!(
                "domain boundary: {} -> {}: {} -> {}",
                name(c.from),
                name(c.to),
                c.parent,
                c.child
            ));
        }
        if self.crossings.len() > DOMAIN_LINES {
            out.push(format!(
                "domain boundary: {} more edges between stores",
                self.crossings.len() - DOMAIN_LINES
            ));
        }
        for v in self.view_ends.iter().take(DOMAIN_LINES) {
            out.push(match &v.domain {
                Some(d) => format!(
                    "view ends: {} (in {}) follows {}, reported to {d}: join its store with --peer {d}=STORE",
                    v.child,
                    name(v.store),
                    v.parent
                ),
                None => format!(
                    "view ends: {} (in {}) follows {}, in none of the stores given",
                    v.child,
                    name(v.store),
                    v.parent
                ),
            });
        }
        if self.view_ends.len() > DOMAIN_LINES {
            out.push(format!(
                "view ends: {} more edges to events in none of the stores",
                self.view_ends.len() - DOMAIN_LINES
            ));
        }
        out
    }
}

impl DomainJoin {
    /// Whether the task spans more than this one store's domain, as far as the join can tell:
    /// several stores were joined, or an edge leaves for a domain its child names.
    pub fn names_another_domain(&self) -> bool {
        self.parts.len() > 1 || self.view_ends.iter().any(|v| v.domain.is_some())
    }
}

/// A peer: another administrative domain's store, joined by [`load_graph_with_peers`] when a
/// task's view ends at an edge into that domain.
pub struct Peer<'a> {
    /// The domain's collector as the reports name it (`EdgeDestination`, e.g.
    /// `tcp://collector.a:7831`).
    pub destination: String,
    /// The store, named as given (a path, a ClickHouse URL without credentials).
    pub name: String,
    /// The store.
    pub store: &'a dyn TraceStore,
}

/// [`load_graph_joined`] over `stores`, then over each peer whose destination a view end
/// names (`EdgeDestination`), until no view end names a peer not yet joined: the task followed
/// across the domains whose stores this side knows (at most one more join per peer).
///
/// # Errors
/// The backends' [`StoreError`].
pub fn load_graph_with_peers(
    stores: &[(String, &dyn TraceStore)],
    peers: &[Peer<'_>],
    task: &str,
    adjust: bool,
) -> Result<(TaskGraph, SkewAdjustment, DomainJoin), StoreError> {
    let mut all = stores.to_vec();
    let mut joined = vec![false; peers.len()];
    loop {
        let (g, skew, join) = load_graph_joined(&all, task, adjust)?;
        let mut more = false;
        if join.view_ends.is_empty() || joined.iter().all(|&j| j) {
            return Ok((g, skew, join));
        }
        let by_id: std::collections::HashMap<&str, &causal_analysis::Event> =
            g.events.iter().map(|e| (e.id.as_str(), e)).collect();
        // Every collector a view end's child names (a join can bring parents from several).
        for v in &join.view_ends {
            let Some(child) = by_id.get(v.child.as_str()) else {
                continue;
            };
            for (_, d) in child.fields.iter().filter(|(k, _)| k == "EdgeDestination") {
                for (i, p) in peers.iter().enumerate() {
                    if !joined[i] && p.destination == *d {
                        joined[i] = true;
                        all.push((p.name.clone(), p.store));
                        more = true;
                    }
                }
            }
        }
        if !more {
            return Ok((g, skew, join));
        }
    }
}

impl std::fmt::Debug for Peer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Peer")
            .field("destination", &self.destination)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// `1 event`, `N events`.
fn events_text(n: usize) -> String {
    if n == 1 {
        "1 event".to_string()
    } else {
        format!("{n} events")
    }
}

/// Resolves `prefix` in every store of `stores` (as [`TraceStore::resolve_task`]): the task id
/// the stores that hold a match agree on.
///
/// # Errors
/// [`StoreError::NoSuchTask`] when no store holds a match; [`StoreError::AmbiguousTask`] when a
/// store finds several, or two stores find different tasks; the backends' errors.
pub fn resolve_joined(stores: &[&dyn TraceStore], prefix: &str) -> Result<String, StoreError> {
    let mut found: Option<String> = None;
    let mut missing = None;
    for s in stores {
        match s.resolve_task(prefix) {
            Ok(id) => match &found {
                Some(f) if *f != id => {
                    return Err(StoreError::AmbiguousTask {
                        prefix: prefix.to_string(),
                        count: 2,
                        examples: format!("{f}, {id}"),
                    });
                }
                _ => found = Some(id),
            },
            Err(e @ StoreError::NoSuchTask(_)) => missing = Some(e),
            Err(e) => return Err(e),
        }
    }
    found.ok_or_else(|| missing.unwrap_or_else(|| StoreError::NoSuchTask(prefix.to_string())))
}

/// Task `task` joined from `stores` (each named as given, in order): every store's events of
/// it, each event once (the first store holding an event id keeps it), then rebuilt as
/// [`load_graph`] does (skew estimated over all of them). The [`DomainJoin`] says which store
/// held what, and marks the edges between stores and the edges whose parent no store holds.
///
/// # Errors
/// The backends' [`StoreError`].
pub fn load_graph_joined(
    stores: &[(String, &dyn TraceStore)],
    task: &str,
    adjust: bool,
) -> Result<(TaskGraph, SkewAdjustment, DomainJoin), StoreError> {
    let mut events = Vec::new();
    let mut home: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut join = DomainJoin::default();
    for (i, (name, store)) in stores.iter().enumerate() {
        let mut n = 0;
        for e in store.load_task(task)? {
            if home.contains_key(&e.id) {
                join.repeated += 1;
                continue;
            }
            home.insert(e.id.clone(), i);
            events.push(e);
            n += 1;
        }
        join.parts.push(DomainPart {
            store: name.clone(),
            events: n,
        });
    }
    for e in &events {
        let to = home[&e.id];
        for p in &e.parents {
            match home.get(&p.id) {
                Some(&from) if from != to => join.crossings.push(DomainCrossing {
                    from,
                    parent: p.id.clone(),
                    to,
                    child: e.id.clone(),
                }),
                Some(_) => {}
                None => join.view_ends.push(ViewEnd {
                    store: to,
                    child: e.id.clone(),
                    parent: p.id.clone(),
                    domain: e
                        .fields
                        .iter()
                        .find(|(k, _)| k == "EdgeDestination")
                        .map(|(_, v)| v.clone()),
                }),
            }
        }
    }
    let skew = if adjust {
        SkewAdjustment::estimate(&events)
    } else {
        SkewAdjustment::default()
    };
    skew.apply(&mut events);
    causal_analysis::infer_span_nesting(&mut events);
    let shown = display_task_id(&stored_task_id(task)).to_string();
    Ok((TaskGraph::build(shown, events), skew, join))
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

    /// Event `id` of task DDDD in `agent`'s domain after `parents`.
    fn dev(id: &str, agent: &str, ts: i64, parents: &[&str]) -> Event {
        let mut e = ev("DDDD", id, agent, &format!("step {id}"), ts, &[]);
        e.parents = parents.iter().map(|p| Parent::causal(*p)).collect();
        e
    }

    #[test]
    fn a_view_end_naming_a_peers_collector_joins_the_peers_store() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = Store::open(&dir.path().join("a.db")).unwrap();
        let mut b = Store::open(&dir.path().join("b.db")).unwrap();
        let mut c = Store::open(&dir.path().join("c.db")).unwrap();
        a.insert(&[dev("01", "a", 10, &[]), dev("02", "a", 20, &["01"])], 1)
            .unwrap();
        // Domain b's first event names a's collector: the task came from there.
        let mut first = dev("03", "b", 30, &["02"]);
        first
            .fields
            .push(("EdgeDestination".into(), "tcp://a:7831".into()));
        b.insert(&[first, dev("04", "b", 40, &["03"])], 1).unwrap();
        c.insert(&[dev("01", "x", 10, &[])], 1).unwrap();
        let home = [("b.db".to_string(), &b as &dyn TraceStore)];
        // Alone, b's view ends at 03 and says which collector holds 02.
        let (g, _, join) = load_graph_with_peers(&home, &[], "DDDD", true).unwrap();
        assert_eq!(g.events.len(), 2);
        assert_eq!(join.view_ends[0].domain.as_deref(), Some("tcp://a:7831"));
        assert!(join.names_another_domain());
        assert_eq!(
            join.lines()[1],
            "view ends: 03 (in b.db) follows 02, reported to tcp://a:7831: join its store with --peer tcp://a:7831=STORE"
        );
        // With a's store as the peer for that collector (and another peer no event names),
        // the task is whole: a's events joined, one boundary, no view end.
        let peers = [
            Peer {
                destination: "tcp://c:7831".into(),
                name: "c.db".into(),
                store: &c,
            },
            Peer {
                destination: "tcp://a:7831".into(),
                name: "a.db".into(),
                store: &a,
            },
        ];
        let (g, _, join) = load_graph_with_peers(&home, &peers, "DDDD", true).unwrap();
        assert_eq!(g.events.len(), 4);
        let stores: Vec<&str> = join.parts.iter().map(|p| p.store.as_str()).collect();
        assert_eq!(
            stores,
            ["b.db", "a.db"],
            "c.db is not joined: no edge names it"
        );
        assert!(join.view_ends.is_empty(), "{:?}", join.view_ends);
        assert_eq!(
            join.crossings,
            [DomainCrossing {
                from: 1,
                parent: "02".into(),
                to: 0,
                child: "03".into()
            }]
        );
    }

    #[test]
    fn a_task_joined_from_two_domains_stores_marks_where_each_view_ends() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = Store::open(&dir.path().join("a.db")).unwrap();
        let mut b = Store::open(&dir.path().join("b.db")).unwrap();
        // Domain a: the root and its child; domain b: the rest, a copy of 02 (the report
        // reached both collectors) and an event whose parent neither store holds.
        a.insert(&[dev("01", "a", 10, &[]), dev("02", "a", 20, &["01"])], 1)
            .unwrap();
        b.insert(
            &[
                dev("02", "a", 20, &["01"]),
                dev("03", "b", 30, &["02"]),
                dev("04", "b", 40, &["03"]),
                dev("05", "b", 50, &["99"]),
                ev("EEEE", "0E", "b", "alone", 5, &[]),
            ],
            1,
        )
        .unwrap();
        let both: [&dyn TraceStore; 2] = [&a, &b];
        assert_eq!(resolve_joined(&both, "dd").unwrap(), "DDDD");
        // A task held by one store only resolves too; one held by none is NoSuchTask.
        assert_eq!(resolve_joined(&both, "EE").unwrap(), "EEEE");
        assert!(matches!(
            resolve_joined(&both, "FFFF"),
            Err(StoreError::NoSuchTask(_))
        ));
        let named = [
            ("a.db".to_string(), &a as &dyn TraceStore),
            ("b.db".to_string(), &b),
        ];
        let (g, _, join) = load_graph_joined(&named, "DDDD", true).unwrap();
        assert_eq!(g.events.len(), 5, "each event once");
        assert_eq!(
            join.parts,
            [
                DomainPart {
                    store: "a.db".into(),
                    events: 2
                },
                DomainPart {
                    store: "b.db".into(),
                    events: 3
                }
            ]
        );
        assert_eq!(join.repeated, 1);
        assert_eq!(
            join.crossings,
            [DomainCrossing {
                from: 0,
                parent: "02".into(),
                to: 1,
                child: "03".into()
            }]
        );
        assert_eq!(
            join.view_ends,
            [ViewEnd {
                store: 1,
                child: "05".into(),
                parent: "99".into(),
                domain: None,
            }]
        );
        let lines = join.lines();
        assert_eq!(
            lines,
            [
                "domains: a.db 2 events, b.db 3 events (1 event in more than one store, kept once)",
                "domain boundary: a.db -> b.db: 02 -> 03",
                "view ends: 05 (in b.db) follows 99, in none of the stores given",
            ]
        );
        // One store alone: the same graph as load_graph, nothing to mark.
        let (one, _, j1) = load_graph_joined(&named[..1], "DDDD", true).unwrap();
        assert_eq!(
            one.events.len(),
            load_graph(&a, "DDDD", true).unwrap().0.events.len()
        );
        assert!(j1.lines().is_empty() && j1.crossings.is_empty());
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
