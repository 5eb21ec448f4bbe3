//! Critical path of a task, and where its time went.
//!
//! Two definitions, chosen by the shape of the task (both are written out, with a worked example
//! each, in `docs/critical-path.md`):
//!
//! - **Span trees** ([`Rule::SpanTree`]; OTLP spans, whose events are `<SPANID>:start` and
//!   `<SPANID>:end`, see `docs/otlp-mapping.md`) follow Jaeger's definition: the path of a span is
//!   its own time not covered by children plus the paths of the children that determined its end.
//!   They are found by walking back from the span's end: the child that ended last before the
//!   cursor is on the path, the cursor moves to that child's start, and so on until no child is
//!   left; so children that ran one after another are each on it. A child that outlives its
//!   parent is clipped to the parent's end (and one that starts before it to its start); only the
//!   parent edge makes a child: span links (producer → consumer, `follows_from`) do not block.
//! - **DAGs with joins** ([`Rule::HappenedBefore`]; X-Trace reports) follow happened-before: walk
//!   back from the last event and, at every join, follow the parent that finished last (the one
//!   the join waited for). That chain is the longest chain of dependencies ending at the last
//!   event in the sense that matters: shortening any other branch would not have made the task end
//!   earlier. Ties (equal timestamps) are broken by the position in the task's topological order,
//!   which itself breaks ties by event id, never by arrival order.
//!
//! A task that mixes both (X-Trace reports and spans in one task) is walked by the second rule,
//! and every span end the walk reaches is expanded by the first; each [`Step`] says which rule
//! produced it. A task whose roots include spans starts at the end of the root span that ended
//! last, so a child that outlives the root does not lengthen the path.
//!
//! Time along the path is charged step by step: the time from one step to the next is charged
//! to the agent, host and process of the step's *owner*: for the span-tree rule the span whose
//! own time (or whose clipped child) fills the gap, for happened-before the event that ended the
//! step (the work that ended with it being reported). A step whose two events are in different
//! processes is also counted as a hop (network, queue, or IPC time lies in it). No step is
//! negative: time along the path never goes backwards (a step to an earlier timestamp, possible
//! under clock skew, counts 0 and is noted), so the shares add up to the path's length exactly.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::graph::{TaskGraph, fmt_duration};
use crate::model::EdgeKind;

/// Which definition produced a step (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// Jaeger's span-tree rule.
    SpanTree,
    /// The happened-before rule of X-Trace DAGs.
    HappenedBefore,
}

impl Rule {
    /// The name printed in the text view: `span tree` or `happened-before`.
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::SpanTree => "span tree",
            Rule::HappenedBefore => "happened-before",
        }
    }
}

/// One step of the critical path: the time from the previous step's event to this one.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    /// Index of the event in [`TaskGraph::events`].
    #[serde(skip)]
    pub index: usize,
    /// The event id.
    pub id: String,
    /// When the step ends, ns from the task's start (its earliest timestamp); for a clipped step
    /// the clipped time, not the event's own timestamp.
    pub offset_ns: i64,
    /// The step's duration, ns: time from the previous step to this one (0 for the first step;
    /// never negative).
    pub delta_ns: i64,
    /// True when this event is a join (two or more known parents).
    pub join: bool,
    /// The rule that put this step on the path.
    pub rule: Rule,
    /// Index of the event whose agent, host and process the step's time is charged to.
    #[serde(skip)]
    pub owner: usize,
    /// Id of that event (for a span-tree step, the start event of the span that owns the time).
    pub charged_to: String,
    /// True when the step's time was clipped to an enclosing span (a child that started before
    /// or ended after its parent).
    pub clipped: bool,
}

/// Time charged to one agent, host or process along the critical path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Share {
    /// Agent, host or process name (`?` when the events did not say).
    pub name: String,
    /// Time charged, ns.
    pub ns: i64,
    /// Steps charged.
    pub steps: usize,
}

/// The critical path of a task with its time per agent, host and process.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CriticalPath {
    /// Steps from the first (a root, unless a cycle stopped the walk) to the last event.
    pub steps: Vec<Step>,
    /// Length of the path, ns: the sum of the steps' durations (0 when events lack timestamps).
    pub total_ns: i64,
    /// True when the walk ended at a root (an event with no known parent other than links);
    /// false when it stopped because every parent had been visited already (a cycle).
    pub reached_root: bool,
    /// The rules used, in the order of [`Rule`]; two when the task mixes spans and other events.
    pub rules: Vec<Rule>,
    /// What the walk had to decide or could not follow (several roots, a cycle, steps back in
    /// time), one line each.
    pub notes: Vec<String>,
    /// Time per agent, largest first.
    pub by_agent: Vec<Share>,
    /// Time per host, largest first.
    pub by_host: Vec<Share>,
    /// Time per process (`host/pid` or the reported process id), largest first.
    pub by_process: Vec<Share>,
    /// Time in steps whose two events are in different processes, ns.
    pub cross_process_ns: i64,
}

/// A span: the start and end events of one OTLP span (`<SPANID>:start`, `<SPANID>:end`).
#[derive(Debug, Clone)]
struct Span {
    start: usize,
    end: usize,
    t0: i64,
    t1: i64,
    /// Children: spans whose start event has a causal edge from this span's start event.
    children: Vec<usize>,
    /// True when the start event has no known parent other than links.
    root: bool,
}

/// The spans of a task, found by event id.
fn spans_of(g: &TaskGraph) -> (Vec<Span>, Vec<Option<usize>>) {
    let n = g.len();
    let mut spans: Vec<Span> = Vec::new();
    let mut span_of_start: Vec<Option<usize>> = vec![None; n];
    let mut span_of_end: Vec<Option<usize>> = vec![None; n];
    for (i, e) in g.events.iter().enumerate() {
        let Some(sid) = e.id.strip_suffix(":start") else {
            continue;
        };
        let Some(end) = g.index_of(&format!("{sid}:end")) else {
            continue;
        };
        let (Some(t0), Some(t1)) = (e.timestamp_ns, g.events[end].timestamp_ns) else {
            continue;
        };
        span_of_start[i] = Some(spans.len());
        span_of_end[end] = Some(spans.len());
        spans.push(Span {
            start: i,
            end,
            t0,
            // A span that ends before it starts (a broken report) lasts 0.
            t1: t1.max(t0),
            children: Vec::new(),
            root: false,
        });
    }
    for s in 0..spans.len() {
        let start = &g.events[spans[s].start];
        let mut has_parent = false;
        for p in &start.parents {
            let Some(pi) = g.index_of(&p.id) else {
                continue;
            };
            if p.kind == EdgeKind::Link {
                continue;
            }
            has_parent = true;
            if let Some(ps) = span_of_start[pi]
                && ps != s
            {
                spans[ps].children.push(s);
            }
        }
        spans[s].root = !has_parent;
    }
    // A start event that names its parent twice would list the child twice.
    for sp in &mut spans {
        sp.children.sort_unstable();
        sp.children.dedup();
    }
    (spans, span_of_end)
}

/// One point of the path being built: an event at a (possibly clipped) time.
#[derive(Debug, Clone, Copy)]
struct Point {
    event: usize,
    t: Option<i64>,
    owner: usize,
    rule: Rule,
    clipped: bool,
}

enum Work {
    Expand { span: usize, lo: i64, hi: i64 },
    Emit(Point),
}

/// Jaeger's rule for span `root` over `[lo, hi]`: the points of its path in time order, the
/// first being its start. Iterative (an explicit stack), so a deep span tree cannot overflow.
fn expand(
    g: &TaskGraph,
    spans: &[Span],
    expanded: &mut [bool],
    root: usize,
    lo: i64,
    hi: i64,
) -> Vec<Point> {
    let s = &spans[root];
    let mut out = vec![Point {
        event: s.start,
        t: Some(lo),
        owner: s.start,
        rule: Rule::SpanTree,
        clipped: lo != s.t0,
    }];
    let mut stack = vec![Work::Expand { span: root, lo, hi }];
    while let Some(w) = stack.pop() {
        let (span, lo, hi) = match w {
            Work::Emit(p) => {
                out.push(p);
                continue;
            }
            Work::Expand { span, lo, hi } => (span, lo, hi),
        };
        expanded[span] = true;
        let s = &spans[span];
        // Children that can block this span within [lo, hi], clipped to it; a child that starts
        // at or after the end does not block it.
        let mut cands: Vec<(usize, i64, i64)> = s
            .children
            .iter()
            .copied()
            .filter(|&c| !expanded[c] && spans[c].t0 < hi)
            .map(|c| {
                let clo = spans[c].t0.max(lo);
                let chi = spans[c].t1.min(hi).max(clo);
                (c, clo, chi)
            })
            .collect();
        // The last element is preferred: latest clipped end, then the longer child, then the
        // smaller span id (id order, not arrival order).
        cands.sort_by(|a, b| {
            a.2.cmp(&b.2)
                .then_with(|| a.2.saturating_sub(a.1).cmp(&b.2.saturating_sub(b.1)))
                .then_with(|| {
                    g.order_key(spans[b.0].start)
                        .1
                        .cmp(&g.order_key(spans[a.0].start).1)
                })
        });
        let mut picks: Vec<(usize, i64, i64)> = Vec::new();
        let mut cursor = hi;
        for &(c, clo, chi) in cands.iter().rev() {
            if chi <= cursor {
                picks.push((c, clo, chi));
                cursor = clo;
            }
        }
        // Pushed in reverse so that they pop in time order.
        stack.push(Work::Emit(Point {
            event: s.end,
            t: Some(hi),
            owner: s.start,
            rule: Rule::SpanTree,
            clipped: hi != s.t1,
        }));
        for &(c, clo, chi) in &picks {
            stack.push(Work::Expand {
                span: c,
                lo: clo,
                hi: chi,
            });
            stack.push(Work::Emit(Point {
                event: spans[c].start,
                t: Some(clo),
                owner: s.start,
                rule: Rule::SpanTree,
                clipped: clo != spans[c].t0,
            }));
        }
    }
    out
}

impl CriticalPath {
    /// Computes the critical path of `g` by the rules of the module docs. Returns `None` for an
    /// empty task.
    pub fn compute(g: &TaskGraph) -> Option<CriticalPath> {
        if g.is_empty() {
            return None;
        }
        let n = g.len();
        let (spans, span_of_end) = spans_of(g);
        let mut expanded = vec![false; spans.len()];
        let mut visited = vec![false; n];
        let mut notes = Vec::new();
        let mut rev: Vec<Point> = Vec::new();

        // Where the walk starts: the end of the root span that ended last, else the last event.
        let mut roots: Vec<usize> = (0..spans.len()).filter(|&s| spans[s].root).collect();
        roots.sort_by_key(|&s| {
            (
                spans[s].t1,
                spans[s].t1.saturating_sub(spans[s].t0),
                std::cmp::Reverse(g.order_key(spans[s].start).1),
            )
        });
        let graph_roots = g.roots().len();
        let mut cur = match roots.last() {
            Some(&r) => {
                if roots.len() > 1 {
                    notes.push(format!(
                        "{} root spans; the path follows {}, which ended last",
                        roots.len(),
                        g.events[spans[r].start].id
                    ));
                }
                spans[r].end
            }
            None => {
                let with_ts = (0..n).filter(|&i| g.events[i].timestamp_ns.is_some());
                let last = g
                    .latest_of(with_ts)
                    .or_else(|| g.topological_order().last().copied())?;
                if graph_roots > 1 {
                    notes.push(format!(
                        "{graph_roots} roots; the path ends at the last event, {}",
                        g.events[last].id
                    ));
                }
                last
            }
        };
        let mut reached_root = true;
        loop {
            if let Some(s) = span_of_end[cur]
                && !expanded[s]
            {
                let pts = expand(g, &spans, &mut expanded, s, spans[s].t0, spans[s].t1);
                for p in &pts {
                    visited[p.event] = true;
                }
                rev.extend(pts.into_iter().rev());
                cur = spans[s].start;
            } else {
                visited[cur] = true;
                rev.push(Point {
                    event: cur,
                    t: g.events[cur].timestamp_ns,
                    owner: cur,
                    rule: Rule::HappenedBefore,
                    clipped: false,
                });
            }
            // The parents that can block: every known parent except those reached by a link.
            let e = &g.events[cur];
            let blocking: Vec<usize> = if e.parents.iter().any(|q| q.kind == EdgeKind::Link) {
                let causal: std::collections::HashSet<&str> = e
                    .parents
                    .iter()
                    .filter(|q| q.kind != EdgeKind::Link)
                    .map(|q| q.id.as_str())
                    .collect();
                g.parents_of(cur)
                    .iter()
                    .copied()
                    .filter(|&p| causal.contains(g.events[p].id.as_str()))
                    .collect()
            } else {
                g.parents_of(cur).to_vec()
            };
            if blocking.is_empty() {
                break;
            }
            match g.latest_of(blocking.into_iter().filter(|&p| !visited[p])) {
                Some(p) => cur = p,
                None => {
                    reached_root = false;
                    notes.push(format!(
                        "the walk stopped at {}: every parent is already on the path (a cycle)",
                        g.events[cur].id
                    ));
                    break;
                }
            }
        }
        rev.reverse();
        Some(Self::from_points(g, &rev, reached_root, notes))
    }

    fn from_points(
        g: &TaskGraph,
        pts: &[Point],
        reached_root: bool,
        mut notes: Vec<String>,
    ) -> CriticalPath {
        let ev = |i: usize| &g.events[i];
        let t0 = g.time_span().map(|(a, _)| a).unwrap_or(0);
        let mut steps = Vec::with_capacity(pts.len());
        let mut agent: BTreeMap<String, (i64, usize)> = BTreeMap::new();
        let mut host: BTreeMap<String, (i64, usize)> = BTreeMap::new();
        let mut process: BTreeMap<String, (i64, usize)> = BTreeMap::new();
        let mut cross = 0i64;
        let mut total = 0i64;
        let mut now: Option<i64> = None;
        let (mut back, mut back_max) = (0usize, 0i64);
        let mut rules: Vec<Rule> = Vec::new();
        for (k, p) in pts.iter().enumerate() {
            let delta = match (now, p.t) {
                (Some(a), Some(b)) if b >= a => b.saturating_sub(a),
                (Some(a), Some(b)) => {
                    back += 1;
                    back_max = back_max.max(a.saturating_sub(b));
                    0
                }
                _ => 0,
            };
            if let Some(t) = p.t {
                now = Some(now.map_or(t, |a| a.max(t)));
            }
            total = total.saturating_add(delta);
            let owner = ev(p.owner);
            if k > 0 {
                let add = |m: &mut BTreeMap<String, (i64, usize)>, name: String| {
                    let s = m.entry(name).or_insert((0, 0));
                    s.0 = s.0.saturating_add(delta);
                    s.1 += 1;
                };
                add(
                    &mut agent,
                    owner.agent.clone().unwrap_or_else(|| "?".into()),
                );
                add(&mut host, owner.host.clone().unwrap_or_else(|| "?".into()));
                add(&mut process, owner.process_key());
                if ev(pts[k - 1].event).process_key() != ev(p.event).process_key() {
                    cross = cross.saturating_add(delta);
                }
            }
            if !rules.contains(&p.rule) {
                rules.push(p.rule);
            }
            steps.push(Step {
                index: p.event,
                id: ev(p.event).id.clone(),
                offset_ns: now.map_or(0, |t| t.saturating_sub(t0)),
                delta_ns: delta,
                join: g.parents_of(p.event).len() >= 2,
                rule: p.rule,
                owner: p.owner,
                charged_to: owner.id.clone(),
                clipped: p.clipped,
            });
        }
        if back > 0 {
            notes.push(format!(
                "{back} steps go back in time (by up to {}); each counts 0",
                fmt_duration(back_max)
            ));
        }
        rules.sort();
        CriticalPath {
            steps,
            total_ns: total,
            reached_root,
            rules,
            notes,
            by_agent: shares(agent),
            by_host: shares(host),
            by_process: shares(process),
            cross_process_ns: cross,
        }
    }

    /// True when event `i` is on the path.
    pub fn contains(&self, i: usize) -> bool {
        self.steps.iter().any(|s| s.index == i)
    }

    /// A membership mask over the task's events (faster than [`CriticalPath::contains`] in loops).
    pub fn mask(&self, events: usize) -> Vec<bool> {
        let mut m = vec![false; events];
        for s in &self.steps {
            m[s.index] = true;
        }
        m
    }
}

fn shares(m: BTreeMap<String, (i64, usize)>) -> Vec<Share> {
    let mut v: Vec<Share> = m
        .into_iter()
        .map(|(name, (ns, steps))| Share { name, ns, steps })
        .collect();
    v.sort_by(|a, b| b.ns.cmp(&a.ns).then_with(|| a.name.cmp(&b.name)));
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Event, Parent};

    fn ev(id: &str, ts: i64, agent: &str, proc_: &str, parents: &[&str]) -> Event {
        Event {
            task: "T".into(),
            id: id.into(),
            agent: Some(agent.into()),
            host: Some("h".into()),
            process: Some(proc_.into()),
            timestamp_ns: Some(ts),
            parents: parents.iter().map(|p| Parent::causal(*p)).collect(),
            ..Event::default()
        }
    }

    /// Regression: a chain whose timestamps jump between 1e14 ns and i64::MAX (hostile or
    /// broken reports) made `sightline show --critical-path` panic with "attempt to add with
    /// overflow" while charging time; sums saturate, and steps back in time count 0.
    #[test]
    fn extreme_timestamps_saturate_instead_of_overflowing() {
        let (lo, hi) = (100_000_000_000_000i64, i64::MAX);
        let mut evs = vec![ev("E0", lo, "a", "1", &[])];
        for i in 1..6 {
            evs.push(ev(
                &format!("E{i}"),
                if i % 2 == 1 { hi } else { lo },
                "a",
                if i % 2 == 1 { "2" } else { "1" },
                &[&format!("E{}", i - 1)],
            ));
        }
        evs.push(ev("N", i64::MIN, "b", "3", &["E0"]));
        let g = TaskGraph::build("T", evs);
        let cp = CriticalPath::compute(&g).unwrap();
        assert_eq!(cp.steps.len(), 6);
        assert_eq!(
            cp.by_agent[0],
            Share {
                name: "a".into(),
                ns: hi - lo,
                steps: 5
            }
        );
        assert_eq!(cp.total_ns, hi - lo);
        assert_eq!(cp.cross_process_ns, hi - lo);
        assert!(cp.steps.iter().all(|s| s.delta_ns >= 0));
        let text = crate::render::text(&g, Some(&cp));
        assert!(text.contains("critical path: 6 events"), "{text}");
        let acc = crate::Accounting::compute(&g);
        assert!(acc.text().contains('a'));
        let cmp = crate::Comparison::compute(&g, &g);
        assert!(cmp.text(5).contains("a"));
    }
}
