//! Critical paths of hand-made tasks whose answers follow from the two definitions of
//! `docs/critical-path.md` (span trees: Jaeger's rule; DAGs with joins: happened-before).

use causal_analysis::{CriticalPath, Event, Parent, Problem, Rule, TaskGraph, infer_span_nesting};

/// The two events of an OTLP span as `docs/otlp-mapping.md` maps it (agent = span id, so the time
/// charged per agent is the time charged per span).
fn span(id: &str, parent: Option<&str>, t0: i64, t1: i64) -> Vec<Event> {
    span_linked(id, parent, &[], t0, t1)
}

fn span_linked(id: &str, parent: Option<&str>, links: &[&str], t0: i64, t1: i64) -> Vec<Event> {
    let base = Event {
        task: "T".into(),
        agent: Some(id.into()),
        host: Some("h".into()),
        process: Some(format!("p{id}")),
        ..Event::default()
    };
    let mut start = Event {
        id: format!("{id}:start"),
        timestamp_ns: Some(t0),
        labels: vec![format!("{id} start")],
        ..base.clone()
    };
    if let Some(p) = parent {
        start.parents.push(Parent::causal(format!("{p}:start")));
    }
    for l in links {
        start.parents.push(Parent::link(format!("{l}:end")));
    }
    let end = Event {
        id: format!("{id}:end"),
        timestamp_ns: Some(t1),
        labels: vec![format!("{id} end")],
        parents: vec![Parent::causal(format!("{id}:start"))],
        ..base
    };
    vec![start, end]
}

/// An X-Trace report.
fn report(id: &str, ts: i64, parents: &[&str]) -> Event {
    Event {
        task: "T".into(),
        id: id.into(),
        agent: Some(format!("agent-{id}")),
        host: Some("h".into()),
        process: Some("1".into()),
        timestamp_ns: Some(ts),
        parents: parents.iter().map(|p| Parent::causal(*p)).collect(),
        ..Event::default()
    }
}

/// Builds the task as `sightline show` does (nesting edges, then the graph) and its path.
fn path_of(mut events: Vec<Event>) -> (TaskGraph, CriticalPath) {
    infer_span_nesting(&mut events);
    let g = TaskGraph::build("T", events);
    let cp = CriticalPath::compute(&g).expect("non-empty task");
    (g, cp)
}

fn ids(cp: &CriticalPath) -> Vec<&str> {
    cp.steps.iter().map(|s| s.id.as_str()).collect()
}

fn deltas(cp: &CriticalPath) -> Vec<i64> {
    cp.steps.iter().map(|s| s.delta_ns).collect()
}

fn agent_ns(cp: &CriticalPath, name: &str) -> i64 {
    cp.by_agent
        .iter()
        .find(|s| s.name == name)
        .map_or(0, |s| s.ns)
}

/// Every path: no negative step, the shares of each breakdown add up to the length exactly (so
/// no share exceeds 100%), the offsets never go back.
fn check_invariants(cp: &CriticalPath) {
    assert!(cp.steps.iter().all(|s| s.delta_ns >= 0), "{:?}", cp.steps);
    assert_eq!(cp.total_ns, deltas(cp).iter().sum::<i64>());
    for shares in [&cp.by_agent, &cp.by_host, &cp.by_process] {
        assert_eq!(shares.iter().map(|s| s.ns).sum::<i64>(), cp.total_ns);
    }
    for w in cp.steps.windows(2) {
        assert!(w[1].offset_ns >= w[0].offset_ns, "{:?}", cp.steps);
    }
}

fn cat(parts: Vec<Vec<Event>>) -> Vec<Event> {
    parts.into_iter().flatten().collect()
}

#[test]
fn sequential_children_are_each_on_the_path() {
    // P [0,100] calls A [10,40] then B [50,90]: the old walk followed only B and charged A's time
    // to P.
    let (_, cp) = path_of(cat(vec![
        span("P", None, 0, 100),
        span("A", Some("P"), 10, 40),
        span("B", Some("P"), 50, 90),
    ]));
    assert_eq!(
        ids(&cp),
        ["P:start", "A:start", "A:end", "B:start", "B:end", "P:end"]
    );
    assert_eq!(deltas(&cp), [0, 10, 30, 10, 40, 10]);
    assert_eq!(cp.rules, [Rule::SpanTree]);
    assert_eq!(cp.total_ns, 100);
    assert_eq!(
        (agent_ns(&cp, "P"), agent_ns(&cp, "A"), agent_ns(&cp, "B")),
        (30, 30, 40)
    );
    assert!(cp.reached_root);
    check_invariants(&cp);
}

#[test]
fn of_overlapping_children_the_one_that_ended_last_blocks() {
    // A [5,15] then, overlapping, B [20,80] and C [30,90]: C ended last; B ended after C started,
    // so it did not block; A ended before C started, so it did.
    let (_, cp) = path_of(cat(vec![
        span("P", None, 0, 100),
        span("A", Some("P"), 5, 15),
        span("B", Some("P"), 20, 80),
        span("C", Some("P"), 30, 90),
    ]));
    assert_eq!(
        ids(&cp),
        ["P:start", "A:start", "A:end", "C:start", "C:end", "P:end"]
    );
    assert_eq!(deltas(&cp), [0, 5, 10, 15, 60, 10]);
    assert_eq!(agent_ns(&cp, "B"), 0);
    assert_eq!(agent_ns(&cp, "P"), 30);
    check_invariants(&cp);
}

#[test]
fn a_child_that_outlives_its_parent_is_clipped_to_the_parents_end() {
    // C [50,150] is fire-and-forget work of P [0,100]: the path ends at P's end, C counts only up
    // to it, and the task's path is never longer than its root span.
    let (_, cp) = path_of(cat(vec![
        span("P", None, 0, 100),
        span("A", Some("P"), 10, 30),
        span("C", Some("P"), 50, 150),
    ]));
    assert_eq!(
        ids(&cp),
        ["P:start", "A:start", "A:end", "C:start", "C:end", "P:end"]
    );
    assert_eq!(deltas(&cp), [0, 10, 20, 20, 50, 0]);
    let c_end = &cp.steps[4];
    assert!(c_end.clipped);
    assert_eq!(c_end.offset_ns, 100, "clipped to P's end, not C's 150");
    assert_eq!(cp.total_ns, 100);
    assert_eq!(
        (agent_ns(&cp, "P"), agent_ns(&cp, "A"), agent_ns(&cp, "C")),
        (30, 20, 50)
    );
    check_invariants(&cp);
}

#[test]
fn a_producer_consumer_link_does_not_block() {
    // The consumer C [40,100] links the producer Pr [5,35]. Had the link blocked, C would wait for
    // Pr's end; by the rule only children block, and X [20,38] ended last before C started.
    let (g, cp) = path_of(cat(vec![
        span("R", None, 0, 100),
        span("Pr", Some("R"), 5, 35),
        span("X", Some("R"), 20, 38),
        span_linked("C", Some("R"), &["Pr"], 40, 100),
    ]));
    assert_eq!(
        ids(&cp),
        ["R:start", "X:start", "X:end", "C:start", "C:end", "R:end"]
    );
    assert_eq!(agent_ns(&cp, "Pr"), 0);
    // The link is still an edge of the graph (C's start joins R's start and Pr's end).
    assert_eq!(g.parents_of(g.index_of("C:start").unwrap()).len(), 2);
    check_invariants(&cp);

    // A consumer that is a root of its own (linked only): the link does not make it part of the
    // producer's path either; the path is the root span that ended last, and the other root is
    // reported.
    let (_, cp) = path_of(cat(vec![
        span("R", None, 0, 100),
        span("Pr", Some("R"), 5, 35),
        span_linked("C", None, &["Pr"], 40, 200),
    ]));
    assert_eq!(ids(&cp), ["C:start", "C:end"]);
    assert_eq!(cp.total_ns, 160);
    assert!(cp.reached_root);
    assert!(
        cp.notes.iter().any(|n| n.contains("2 root spans")),
        "{:?}",
        cp.notes
    );
    check_invariants(&cp);
}

#[test]
fn nested_fan_out_follows_the_last_branch_down() {
    // R fans out to A [0,60] (A1, A2) and B [0,80] (B1 [10,70], B2 [20,40]). B ended last and
    // started with R, so A does not block; in B, B1 ended last and B2 ended after B1 started.
    let (_, cp) = path_of(cat(vec![
        span("R", None, 0, 100),
        span("A", Some("R"), 0, 60),
        span("A1", Some("A"), 5, 30),
        span("A2", Some("A"), 10, 55),
        span("B", Some("R"), 0, 80),
        span("B1", Some("B"), 10, 70),
        span("B2", Some("B"), 20, 40),
    ]));
    assert_eq!(
        ids(&cp),
        ["R:start", "B:start", "B1:start", "B1:end", "B:end", "R:end"]
    );
    assert_eq!(deltas(&cp), [0, 0, 10, 60, 10, 20]);
    assert_eq!(
        (agent_ns(&cp, "R"), agent_ns(&cp, "B"), agent_ns(&cp, "B1")),
        (20, 20, 60)
    );
    check_invariants(&cp);
}

#[test]
fn a_join_follows_the_parent_that_finished_last() {
    // A forks to B (fast) and C (slow); D joins them; E follows D.
    let (_, cp) = path_of(vec![
        report("A", 0, &[]),
        report("B", 10, &["A"]),
        report("C", 40, &["A"]),
        report("D", 45, &["B", "C"]),
        report("E", 50, &["D"]),
    ]);
    assert_eq!(ids(&cp), ["A", "C", "D", "E"]);
    assert_eq!(deltas(&cp), [0, 40, 5, 5]);
    assert_eq!(cp.rules, [Rule::HappenedBefore]);
    assert!(cp.steps[2].join);
    assert_eq!(agent_ns(&cp, "agent-C"), 40);
    check_invariants(&cp);
}

#[test]
fn equal_timestamps_are_broken_by_id_not_by_arrival_order() {
    // B and C both finish at 10 and D joins them: the answer must not depend on which report
    // came first.
    let evs = vec![
        report("A", 0, &[]),
        report("B", 10, &["A"]),
        report("C", 10, &["A"]),
        report("D", 20, &["B", "C"]),
    ];
    let mut rev = evs.clone();
    rev.reverse();
    let (_, a) = path_of(evs);
    let (_, b) = path_of(rev);
    assert_eq!(ids(&a), ids(&b));
    assert_eq!(ids(&a), ["A", "C", "D"]);

    // Two children of a span with the same end and length: the smaller span id is on the path,
    // whichever arrived first.
    let spans = cat(vec![
        span("P", None, 0, 100),
        span("K2", Some("P"), 20, 80),
        span("K1", Some("P"), 20, 80),
    ]);
    let mut rev = spans.clone();
    rev.reverse();
    let (_, a) = path_of(spans);
    let (_, b) = path_of(rev);
    assert_eq!(ids(&a), ids(&b));
    assert_eq!(ids(&a), ["P:start", "K1:start", "K1:end", "P:end"]);
}

#[test]
fn a_cycle_is_reported_and_never_looped() {
    let (g, cp) = path_of(vec![
        report("X", 1, &["Y"]),
        report("Y", 2, &["X"]),
        report("Z", 3, &["Y"]),
    ]);
    assert_eq!(ids(&cp), ["X", "Y", "Z"]);
    assert!(!cp.reached_root);
    assert!(
        cp.notes.iter().any(|n| n.contains("cycle")),
        "{:?}",
        cp.notes
    );
    assert!(
        g.problems
            .iter()
            .any(|p| matches!(p, Problem::Cycle { .. }))
    );
    check_invariants(&cp);

    // Spans that name each other as parent: no root span, and the walk still ends.
    let (_, cp) = path_of(cat(vec![
        span("S1", Some("S2"), 0, 10),
        span("S2", Some("S1"), 2, 8),
    ]));
    assert!(!cp.reached_root);
    assert!(cp.steps.len() <= 4, "{:?}", cp.steps);
    check_invariants(&cp);
}

#[test]
fn several_roots_are_reported_and_the_path_ends_at_the_last_event() {
    let (g, cp) = path_of(vec![
        report("R1", 0, &[]),
        report("A", 10, &["R1"]),
        report("R2", 5, &[]),
        report("B", 30, &["R2"]),
    ]);
    assert_eq!(ids(&cp), ["R2", "B"]);
    assert!(cp.reached_root);
    assert!(
        cp.notes.iter().any(|n| n.starts_with("2 roots")),
        "{:?}",
        cp.notes
    );
    assert!(
        g.problems
            .iter()
            .any(|p| matches!(p, Problem::SeveralRoots { roots } if roots.len() == 2))
    );
    check_invariants(&cp);
}

#[test]
fn a_mixed_task_says_which_rule_applied_where() {
    // An X-Trace report starts a span (a traceparent carried into an OTLP service), whose end is
    // followed by another report.
    let mut evs = vec![report("X0", 0, &[])];
    evs.extend(span("S", None, 10, 100));
    evs[1].parents.push(Parent::causal("X0"));
    evs.extend(span("K", Some("S"), 20, 60));
    evs.push(report("X1", 120, &["S:end"]));
    let (_, cp) = path_of(evs);
    assert_eq!(
        ids(&cp),
        ["X0", "S:start", "K:start", "K:end", "S:end", "X1"]
    );
    let rules: Vec<Rule> = cp.steps.iter().map(|s| s.rule).collect();
    use Rule::{HappenedBefore as H, SpanTree as S};
    assert_eq!(rules, [H, S, S, S, S, H]);
    assert_eq!(cp.rules, [S, H]);
    assert_eq!(deltas(&cp), [0, 10, 10, 40, 40, 20]);
    check_invariants(&cp);
}

#[test]
fn steps_back_in_time_count_zero_and_shares_stay_within_the_total() {
    // B's clock is behind: A(100) -> B(50) -> C(120). The old path had steps -50 and +70 and
    // shares of 140%; now the step to B counts 0, the path is 20 long, and it is noted.
    let (_, cp) = path_of(vec![
        report("A", 100, &[]),
        report("B", 50, &["A"]),
        report("C", 120, &["B"]),
    ]);
    assert_eq!(deltas(&cp), [0, 0, 20]);
    assert_eq!(cp.total_ns, 20);
    assert!(
        cp.notes
            .iter()
            .any(|n| n.contains("1 steps go back in time")),
        "{:?}",
        cp.notes
    );
    check_invariants(&cp);
}

/// The span-tree example of docs/critical-path.md, in ms.
#[test]
fn the_documented_span_tree_example() {
    let ms = 1_000_000;
    let (_, cp) = path_of(cat(vec![
        span("R", None, 0, 100 * ms),
        span("auth", Some("R"), 5 * ms, 15 * ms),
        span("stock", Some("R"), 20 * ms, 80 * ms),
        span("price", Some("R"), 30 * ms, 90 * ms),
        span("log", Some("R"), 95 * ms, 130 * ms),
    ]));
    assert_eq!(
        ids(&cp),
        [
            "R:start",
            "auth:start",
            "auth:end",
            "price:start",
            "price:end",
            "log:start",
            "log:end",
            "R:end"
        ]
    );
    assert_eq!(
        deltas(&cp),
        [0, 5 * ms, 10 * ms, 15 * ms, 60 * ms, 5 * ms, 5 * ms, 0]
    );
    let charged: Vec<&str> = cp.steps.iter().map(|s| s.charged_to.as_str()).collect();
    assert_eq!(
        charged,
        [
            "R:start",
            "R:start",
            "auth:start",
            "R:start",
            "price:start",
            "R:start",
            "log:start",
            "R:start"
        ]
    );
    assert!(cp.steps[6].clipped);
    assert_eq!(
        (agent_ns(&cp, "R"), agent_ns(&cp, "price")),
        (25 * ms, 60 * ms)
    );
    check_invariants(&cp);
}

/// The happened-before example of docs/critical-path.md, in ms.
#[test]
fn the_documented_join_example() {
    let ms = 1_000_000;
    let r = |id: &str, t: i64, agent: &str, ps: &[&str]| Event {
        agent: Some(agent.into()),
        ..report(id, t * ms, ps)
    };
    let (_, cp) = path_of(vec![
        r("send", 0, "C", &[]),
        r("r1-read", 3, "replica-1", &["send"]),
        r("r1-answer", 12, "replica-1", &["r1-read"]),
        r("r2-read", 4, "replica-2", &["send"]),
        r("r2-answer", 31, "replica-2", &["r2-read"]),
        r("join", 33, "C", &["r1-answer", "r2-answer"]),
        r("done", 35, "C", &["join"]),
    ]);
    assert_eq!(ids(&cp), ["send", "r2-read", "r2-answer", "join", "done"]);
    assert_eq!(deltas(&cp), [0, 4 * ms, 27 * ms, 2 * ms, 2 * ms]);
    assert_eq!(
        (agent_ns(&cp, "replica-2"), agent_ns(&cp, "C")),
        (31 * ms, 4 * ms)
    );
    check_invariants(&cp);
}

#[test]
fn a_deep_span_tree_is_walked_without_recursion() {
    // 20,000 spans, each the only child of the previous one: a recursive walk would need 20,000
    // stack frames. Each span starts 1 after its parent and ends 1 before it.
    let n = 20_000i64;
    let mut evs = Vec::new();
    for i in 0..n {
        let parent = (i > 0).then(|| format!("S{}", i - 1));
        evs.extend(span(&format!("S{i}"), parent.as_deref(), i, 2 * n - i));
    }
    let (_, cp) = path_of(evs);
    assert_eq!(cp.steps.len(), 2 * n as usize);
    assert_eq!(cp.total_ns, 2 * n);
    assert_eq!(cp.steps[n as usize - 1].id, format!("S{}:start", n - 1));
    assert_eq!(cp.steps[n as usize].id, format!("S{}:end", n - 1));
    check_invariants(&cp);
}

#[test]
fn xtrace_span_reports_give_the_span_tree_answer_by_happened_before() {
    // The shape `causal::layer` reports (docs/critical-path.md): P enters, A runs, then B and C
    // overlap, and each child's exit is joined into P's next event.
    let (_, cp) = path_of(vec![
        report("P-enter", 0, &[]),
        report("A-enter", 10, &["P-enter"]),
        report("A-exit", 40, &["A-enter"]),
        report("B-enter", 50, &["A-exit"]),
        report("C-enter", 55, &["A-exit"]),
        report("B-exit", 80, &["B-enter"]),
        report("C-exit", 90, &["C-enter"]),
        report("P-exit", 100, &["B-exit", "C-exit"]),
    ]);
    // As Jaeger's rule on the same spans: A, then C (B ended before C, but after C started).
    assert_eq!(
        ids(&cp),
        [
            "P-enter", "A-enter", "A-exit", "C-enter", "C-exit", "P-exit"
        ]
    );
    assert_eq!(cp.rules, [Rule::HappenedBefore]);
    check_invariants(&cp);
}

/// Regression (issue 17): a store written before ingest was idempotent holds every span twice;
/// the nesting edges went to the second copies, which the graph drops, so "7 edges, 1 join"
/// became "5 edges, 0 joins", with one warning line per event.
#[test]
fn duplicated_reports_leave_edges_joins_and_path_as_they_were() {
    let once = cat(vec![
        span("P", None, 0, 100),
        span("A", Some("P"), 10, 40),
        span("B", Some("P"), 50, 90),
    ]);
    let twice: Vec<Event> = once.iter().chain(&once).cloned().collect();
    let (g1, cp1) = path_of(once);
    let (g2, cp2) = path_of(twice);
    assert_eq!((g1.edges.len(), g1.joins().len()), (7, 1));
    assert_eq!((g2.edges.len(), g2.joins().len()), (7, 1));
    assert_eq!(ids(&cp1), ids(&cp2));
    assert_eq!(
        g2.problems,
        [Problem::DuplicateEvents {
            identical: 6,
            conflicting: vec![]
        }]
    );
    let text = causal_analysis::render::text(&g2, None);
    assert_eq!(text.matches("problem:").count(), 1, "{text}");
    assert!(
        text.contains("problem: 6 identical duplicate reports ignored\n"),
        "{text}"
    );
}
