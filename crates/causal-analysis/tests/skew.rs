//! Per-host clock-skew estimation and correction (`causal_analysis::skew`), on hand-made tasks.

use causal_analysis::{
    CriticalPath, Event, HostSkew, Parent, SkewAdjustment, TaskGraph, infer_span_nesting,
};

const MS: i64 = 1_000_000;

fn span(id: &str, parent: Option<&str>, host: &str, kind: &str, t0: i64, t1: i64) -> Vec<Event> {
    let base = Event {
        task: "T".into(),
        agent: Some(format!("svc-{host}")),
        host: Some(host.into()),
        ..Event::default()
    };
    let mut start = Event {
        id: format!("{id}:start"),
        timestamp_ns: Some(t0),
        fields: vec![("span.kind".into(), kind.into())],
        ..base.clone()
    };
    if let Some(p) = parent {
        start.parents.push(Parent::causal(format!("{p}:start")));
    }
    let end = Event {
        id: format!("{id}:end"),
        timestamp_ns: Some(t1),
        parents: vec![Parent::causal(format!("{id}:start"))],
        ..base
    };
    vec![start, end]
}

fn report(id: &str, host: &str, ts: i64, parents: &[&str]) -> Event {
    Event {
        task: "T".into(),
        id: id.into(),
        host: Some(host.into()),
        timestamp_ns: Some(ts),
        parents: parents.iter().map(|p| Parent::causal(*p)).collect(),
        ..Event::default()
    }
}

/// A client span on host a (0–100 ms) around a server span on host b whose clock is 65.4 ms
/// behind: b recorded the server's 20–80 ms as −45.4–14.6 ms.
fn rpc() -> Vec<Event> {
    let mut evs = span("C", None, "a", "client", 0, 100 * MS);
    evs.extend(span("S", Some("C"), "b", "server", -45_400_000, 14_600_000));
    evs
}

#[test]
fn a_server_span_outside_its_client_span_is_centred_within_it() {
    let mut evs = rpc();
    let adj = SkewAdjustment::estimate(&evs);
    assert_eq!(adj.reference.as_deref(), Some("a"));
    assert_eq!(
        adj.hosts,
        [HostSkew {
            host: "b".into(),
            offset_ns: 65_400_000,
            against: "a".into(),
            evidence: 2,
        }]
    );
    assert_eq!(
        adj.lines(),
        ["skew adjusted: host b +65.4 ms (against a, 2 bounds)"]
    );
    adj.apply(&mut evs);
    let ts: Vec<i64> = evs.iter().map(|e| e.timestamp_ns.unwrap()).collect();
    assert_eq!(ts, [0, 100 * MS, 20 * MS, 80 * MS]);

    // The task lasts as long as its root span, and its critical path has no clipped step.
    infer_span_nesting(&mut evs);
    let g = TaskGraph::build("T", evs);
    assert_eq!(g.time_span(), Some((0, 100 * MS)));
    assert!(
        !g.problems
            .iter()
            .any(|p| matches!(p, causal_analysis::Problem::ClockSkew { .. })),
        "{:?}",
        g.problems
    );
    let cp = CriticalPath::compute(&g).unwrap();
    assert_eq!(cp.total_ns, 100 * MS);
    assert!(cp.steps.iter().all(|s| !s.clipped), "{:?}", cp.steps);
    assert_eq!(
        cp.steps.iter().map(|s| s.delta_ns).collect::<Vec<_>>(),
        [0, 20 * MS, 60 * MS, 20 * MS]
    );
}

#[test]
fn without_the_adjustment_the_same_task_shows_the_skew() {
    // What `show --no-skew-adjust` displays: the task looks longer than its root span.
    let mut evs = rpc();
    infer_span_nesting(&mut evs);
    let g = TaskGraph::build("T", evs);
    let (lo, hi) = g.time_span().unwrap();
    assert_eq!(hi - lo, 145_400_000);
    assert!(
        g.problems
            .iter()
            .any(|p| matches!(p, causal_analysis::Problem::ClockSkew { .. }))
    );
}

#[test]
fn spans_that_fit_are_left_alone_and_order_does_not_matter() {
    let mut evs = span("C", None, "a", "client", 0, 100 * MS);
    evs.extend(span("S", Some("C"), "b", "server", 10 * MS, 90 * MS));
    let adj = SkewAdjustment::estimate(&evs);
    assert!(adj.is_empty(), "{adj:?}");

    let mut evs = rpc();
    let a = SkewAdjustment::estimate(&evs);
    evs.reverse();
    assert_eq!(SkewAdjustment::estimate(&evs), a);
}

#[test]
fn xtrace_rpcs_bound_the_skew_from_both_directions() {
    // a sends at 10, b receives at 5 and answers at 8, a receives the answer at 20 (all on the
    // hosts' own clocks): b must move by 5..12; the centre is 8 (integer ns).
    let evs = vec![
        report("a1", "a", 10, &[]),
        report("b1", "b", 5, &["a1"]),
        report("b2", "b", 8, &["b1"]),
        report("a2", "a", 20, &["b2"]),
    ];
    let adj = SkewAdjustment::estimate(&evs);
    assert_eq!(adj.hosts.len(), 1);
    assert_eq!(
        (adj.hosts[0].host.as_str(), adj.hosts[0].offset_ns),
        ("b", 8)
    );
}

#[test]
fn corrections_compose_along_a_chain_of_hosts() {
    // a calls b, whose clock is 30 ms behind a's; b calls c, 15 ms behind b's (45 ms behind a's).
    let mut evs = span("A", None, "a", "client", 0, 100 * MS);
    evs.extend(span("B", Some("A"), "b", "server", -20 * MS, 60 * MS)); // truly 10..90
    evs.extend(span("B2", Some("B"), "b", "client", -10 * MS, 50 * MS)); // truly 20..80
    evs.extend(span("Cs", Some("B2"), "c", "server", -20 * MS, 30 * MS)); // truly 25..75
    let adj = SkewAdjustment::estimate(&evs);
    let offs: Vec<(&str, i64)> = adj
        .hosts
        .iter()
        .map(|h| (h.host.as_str(), h.offset_ns))
        .collect();
    assert_eq!(offs, [("b", 30 * MS), ("c", 45 * MS)]);
    assert_eq!(adj.hosts[1].against, "b");
}

#[test]
fn asynchronous_spans_only_bound_from_below() {
    // A consumer on host b may run long after its producer on a ended: only "starts after the
    // producer started" holds, which it does, so nothing is corrected.
    let mut evs = span("P", None, "a", "producer", 0, 10 * MS);
    evs.extend(span("Q", Some("P"), "b", "consumer", 50 * MS, 200 * MS));
    assert!(SkewAdjustment::estimate(&evs).is_empty());
}

/// Hostile timestamps (the extremes of i64) must not overflow the estimate, the correction or
/// the critical path.
#[test]
fn extreme_timestamps_do_not_overflow() {
    let mut evs = span("C", None, "a", "client", i64::MIN, i64::MAX);
    evs.extend(span("S", Some("C"), "b", "server", i64::MAX, i64::MIN));
    evs.extend(span("S2", Some("C"), "c", "server", i64::MIN, i64::MIN));
    let adj = SkewAdjustment::estimate(&evs);
    adj.apply(&mut evs);
    infer_span_nesting(&mut evs);
    let g = TaskGraph::build("T", evs);
    let cp = CriticalPath::compute(&g).unwrap();
    assert!(cp.steps.iter().all(|s| s.delta_ns >= 0));
    assert!(cp.total_ns >= 0);
    let _ = causal_analysis::render::text(&g, Some(&cp));
}
