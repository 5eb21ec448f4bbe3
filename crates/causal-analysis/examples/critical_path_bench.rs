//! Critical path on a generated 100,000-span tree (Jaeger's rule) and a 100,000-event DAG with
//! joins (happened-before), side by side in one run: time to rebuild the graph (with the span
//! nesting edges and the clock-skew estimate that `sightline show` adds) and to compute the path.
//!
//! Usage: `cargo run --release -p causal-analysis --example critical_path_bench [N] [ROUNDS]`
//! (default N = 100,000 spans / events, 5 rounds; the median round is printed). See
//! `bench/critical-path-bench.sh`.

use std::time::Instant;

use causal_analysis::{CriticalPath, Event, Parent, SkewAdjustment, TaskGraph, infer_span_nesting};

/// A small deterministic generator (64-bit LCG, Knuth's MMIX constants), so every run measures
/// the same task.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn event(id: String, ts: i64, host: usize, parents: Vec<Parent>) -> Event {
    Event {
        task: "BENCH".into(),
        id,
        agent: Some(format!("svc{}", host % 16)),
        host: Some(format!("h{}", host % 4)),
        process: Some(format!("{}", 1000 + host % 16)),
        timestamp_ns: Some(ts),
        parents,
        ..Event::default()
    }
}

/// `n` spans: each span gets up to 6 children laid out in its interval, one after another or
/// overlapping; one in twenty outlives its parent; one in fifty links an earlier span.
fn span_tree(n: usize) -> Vec<Event> {
    let mut rng = Lcg(17);
    let mut events = Vec::with_capacity(2 * n);
    // (span index, start, end, host), breadth-first.
    let mut queue = std::collections::VecDeque::from([(0usize, 0i64, 1_000_000_000i64, 0usize)]);
    let mut made = 1;
    let id = |s: usize| format!("{s:016X}");
    events.push(event(format!("{}:start", id(0)), 0, 0, vec![]));
    events.push(event(
        format!("{}:end", id(0)),
        1_000_000_000,
        0,
        vec![Parent::causal(format!("{}:start", id(0)))],
    ));
    while let Some((s, t0, t1, host)) = queue.pop_front() {
        let k = rng.below(7) as usize;
        let mut cursor = t0;
        for _ in 0..k {
            if made >= n {
                break;
            }
            let c = made;
            made += 1;
            let len = (t1 - t0).max(1);
            let start = if rng.below(3) == 0 {
                t0 + rng.below(len as u64) as i64 // overlapping
            } else {
                cursor // sequential
            };
            let mut end = start + rng.below((len / 2).max(1) as u64) as i64;
            if rng.below(20) == 0 {
                end = t1 + rng.below(1_000_000) as i64; // outlives its parent
            }
            cursor = end.min(t1);
            let h = if rng.below(4) == 0 { host + 1 } else { host };
            let mut ps = vec![Parent::causal(format!("{}:start", id(s)))];
            if c > 2 && rng.below(50) == 0 {
                ps.push(Parent::link(format!(
                    "{}:end",
                    id(rng.below(c as u64 - 1) as usize)
                )));
            }
            events.push(event(format!("{}:start", id(c)), start, h, ps));
            events.push(event(
                format!("{}:end", id(c)),
                end,
                h,
                vec![Parent::causal(format!("{}:start", id(c)))],
            ));
            queue.push_back((c, start, end, h));
        }
        if queue.is_empty() && made < n {
            // Every leaf had no children: keep growing under the root.
            queue.push_back((0, 0, 1_000_000_000, 0));
        }
    }
    events
}

/// `n` events in the X-Trace shape: threads of work that fork, join (2–3 parents) and hop
/// between hosts.
fn dag(n: usize) -> Vec<Event> {
    let mut rng = Lcg(29);
    let mut events: Vec<Event> = vec![event(format!("{:016X}", 0), 0, 0, vec![])];
    // Frontier: (event index, time, host).
    let mut frontier: Vec<(usize, i64, usize)> = vec![(0, 0, 0)];
    while events.len() < n {
        let i = events.len();
        let pick = rng.below(frontier.len() as u64) as usize;
        let (p, t, h) = frontier[pick];
        let mut parents = vec![Parent::causal(events[p].id.clone())];
        let mut ts = t + 1 + rng.below(10_000) as i64;
        match rng.below(10) {
            // Join: merge another frontier event into this one.
            0 | 1 if frontier.len() > 1 => {
                let other = rng.below(frontier.len() as u64) as usize;
                if other != pick {
                    let (q, tq, _) = frontier[other];
                    parents.push(Parent::causal(events[q].id.clone()));
                    ts = ts.max(tq + 1);
                    frontier.swap_remove(other.max(pick));
                    if other.min(pick) < frontier.len() {
                        frontier.swap_remove(other.min(pick));
                    }
                } else {
                    frontier.swap_remove(pick);
                }
            }
            // Fork: the parent stays on the frontier.
            2 if frontier.len() < 64 => {}
            _ => {
                frontier.swap_remove(pick);
            }
        }
        let host = if rng.below(8) == 0 { h + 1 } else { h };
        events.push(event(format!("{i:016X}"), ts, host, parents));
        frontier.push((i, ts, host));
    }
    events
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// What one task costs: sizes, then median seconds of each stage.
struct Costs {
    events: usize,
    edges: usize,
    steps: usize,
    skew: f64,
    nesting: f64,
    build: f64,
    path: f64,
}

/// Rebuilds and analyses `events` `rounds` times, as `sightline show --critical-path` does.
fn measure(events: &[Event], rounds: usize) -> Costs {
    let mut t_skew = Vec::new();
    let mut t_nest = Vec::new();
    let mut t_build = Vec::new();
    let mut t_path = Vec::new();
    let mut sizes = (0, 0, 0);
    for _ in 0..rounds {
        let mut evs = events.to_vec();
        let t = Instant::now();
        let skew = SkewAdjustment::estimate(&evs);
        skew.apply(&mut evs);
        t_skew.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        infer_span_nesting(&mut evs);
        t_nest.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let g = TaskGraph::build("BENCH", evs);
        t_build.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let cp = CriticalPath::compute(&g).expect("non-empty");
        t_path.push(t.elapsed().as_secs_f64());
        sizes = (g.len(), g.edges.len(), cp.steps.len());
    }
    Costs {
        events: sizes.0,
        edges: sizes.1,
        steps: sizes.2,
        skew: median(t_skew),
        nesting: median(t_nest),
        build: median(t_build),
        path: median(t_path),
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().map_or(100_000, |a| a.parse().expect("N"));
    let rounds: usize = args.next().map_or(5, |a| a.parse().expect("ROUNDS"));
    let tree = span_tree(n);
    let graph = dag(n);
    println!(
        "{:<26} {:>7} {:>7} {:>6} {:>9} {:>9} {:>9} {:>9} {:>10}",
        "task", "events", "edges", "steps", "skew", "nesting", "graph", "path", "path/event"
    );
    let mut per_event = Vec::new();
    for (name, evs) in [
        (format!("span tree ({n} spans)"), &tree),
        (format!("DAG ({n} events)"), &graph),
    ] {
        let c = measure(evs, rounds);
        let ns = c.path * 1e9 / c.events as f64;
        per_event.push(ns);
        let ms = |s: f64| format!("{:.1}ms", s * 1e3);
        println!(
            "{name:<26} {:>7} {:>7} {:>6} {:>9} {:>9} {:>9} {:>9} {ns:>8.0}ns",
            c.events,
            c.edges,
            c.steps,
            ms(c.skew),
            ms(c.nesting),
            ms(c.build),
            ms(c.path)
        );
    }
    println!(
        "critical path cost per event, span tree / DAG: {:.2}x",
        per_event[0] / per_event[1]
    );
}
