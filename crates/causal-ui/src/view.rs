//! One task as the UI draws it ([`TaskView`]): *items* (an OTLP span, from its `S:start` to its
//! `S:end` event, or one point event: an X-Trace report or a span event) in *lanes* (one per
//! host → process → thread), with the edges between items, the critical path and the skew
//! adjustment; and its columnar JSON payload ([`TaskView::payload`], `docs/ui-api.md`).

use std::collections::{BTreeMap, HashMap};

use causal_analysis::{CriticalPath, EdgeKind, Event, SkewAdjustment, TaskGraph, render};
use serde_json::{Value, json};

/// One bar (span) or mark (point event) of the timeline.
#[derive(Debug, Clone)]
pub struct Item {
    /// The span id (`S` of `S:start`) or the event id.
    pub id: String,
    /// Indexes of its events in the graph (a span: start, span events, end; a point: one).
    pub events: Vec<usize>,
    /// Start and end, ns since the Unix epoch (equal for a point); `None` without timestamps.
    pub start_ns: Option<i64>,
    /// End, ns since the Unix epoch.
    pub end_ns: Option<i64>,
    /// Its lane in [`TaskView::lanes`].
    pub lane: usize,
    /// Its row within the lane (overlapping items of one lane stack in rows).
    pub row: u32,
    /// The span's name, or the event's label (or its first identifying field).
    pub label: String,
    /// The agent (service), `?` when none.
    pub agent: String,
    /// True for a span (start and end events), false for a point event.
    pub span: bool,
    /// True when one of its events is an error (`status.code` = `error`, `error` = `true`).
    pub error: bool,
}

/// A swimlane: one thread of one process of one host.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Lane {
    /// Host (`?` when not reported).
    pub host: String,
    /// Process as `Event::process_key` names it.
    pub process: String,
    /// Thread: `name tid`, `tid`, or `-` when not reported.
    pub thread: String,
}

/// A task laid out for the UI (module docs).
#[derive(Debug)]
pub struct TaskView {
    /// The task id as shown.
    pub task: String,
    /// The items, in order of start time (then id).
    pub items: Vec<Item>,
    /// The lanes, sorted by host, process, thread.
    pub lanes: Vec<Lane>,
    /// Rows of each lane.
    pub lane_rows: Vec<u32>,
    /// The item of each graph event.
    pub item_of: Vec<usize>,
    /// Edges between distinct items: `(from, to, kind)`, deduplicated.
    pub edges: Vec<(usize, usize, EdgeKind)>,
    /// Items on the critical path, in path order (no repeats).
    pub critical: Vec<usize>,
    /// The parent of each item in the tree that the page collapses and expands: of the items
    /// with a causal edge into it that come before it, the first (an OTLP span's parent span; an
    /// X-Trace event's earliest parent). Always a smaller index, so the tree has no cycle.
    pub parent: Vec<Option<usize>>,
    /// Earliest timestamp of the task, ns since the epoch (0 when none).
    pub t0_ns: i64,
}

fn is_error(e: &Event) -> bool {
    e.fields.iter().any(|(k, v)| {
        (k == "status.code" && v == "error")
            || (k == "error" && (v.eq_ignore_ascii_case("true") || v == "1"))
    })
}

/// What the timeline calls an event: its label, else its identifying field (`render::describe`
/// without the agent).
fn event_label(e: &Event) -> String {
    match e.label() {
        Some(l) => l.to_string(),
        None => {
            let d = render::describe(e);
            match &e.agent {
                Some(a) => d
                    .strip_prefix(a.as_str())
                    .and_then(|r| r.strip_prefix(": "))
                    .map(str::to_string)
                    .unwrap_or(d),
                None => d,
            }
        }
    }
}

fn lane_of(e: &Event) -> Lane {
    Lane {
        host: e.host.clone().unwrap_or_else(|| "?".into()),
        process: e.process_key(),
        thread: match (&e.thread_name, e.tid) {
            (Some(n), Some(t)) => format!("{n} {t}"),
            (Some(n), None) => n.clone(),
            (None, Some(t)) => t.to_string(),
            (None, None) => "-".into(),
        },
    }
}

impl TaskView {
    /// Lays out `g` (module docs) with its critical path `cp`.
    pub fn build(g: &TaskGraph, cp: Option<&CriticalPath>) -> TaskView {
        // Group span boundary events by span id; everything else is its own item.
        let mut key_of: HashMap<&str, usize> = HashMap::new();
        let mut groups: Vec<(String, Vec<usize>, bool)> = Vec::new();
        for (i, e) in g.events.iter().enumerate() {
            let span =
                e.id.strip_suffix(":start")
                    .or_else(|| e.id.strip_suffix(":end"));
            match span {
                Some(s) => match key_of.get(s) {
                    Some(&k) => groups[k].1.push(i),
                    None => {
                        key_of.insert(s, groups.len());
                        groups.push((s.to_string(), vec![i], true));
                    }
                },
                None => groups.push((e.id.clone(), vec![i], false)),
            }
        }
        // Span events (`S:eventN`) are marks in their span's lane.
        let t0_ns = g.time_span().map_or(0, |(lo, _)| lo);
        let mut items: Vec<Item> = groups
            .into_iter()
            .map(|(id, events, spanlike)| {
                let first = &g.events[events[0]];
                let start = events
                    .iter()
                    .map(|&i| &g.events[i])
                    .find(|e| e.id.ends_with(":start"));
                let ts: Vec<i64> = events
                    .iter()
                    .filter_map(|&i| g.events[i].timestamp_ns)
                    .collect();
                let span = spanlike && events.len() >= 2;
                let label = match start {
                    Some(s) => s
                        .field("span.name")
                        .map(str::to_string)
                        .or_else(|| {
                            s.label()
                                .and_then(|l| l.strip_suffix(" start"))
                                .map(str::to_string)
                        })
                        .unwrap_or_else(|| event_label(s)),
                    None => {
                        let l = event_label(first);
                        if spanlike {
                            l.strip_suffix(" end").map(str::to_string).unwrap_or(l)
                        } else {
                            l
                        }
                    }
                };
                let lead = start.unwrap_or(first);
                Item {
                    id,
                    start_ns: ts.iter().min().copied(),
                    end_ns: ts.iter().max().copied(),
                    lane: 0,
                    row: 0,
                    label,
                    agent: lead.agent.clone().unwrap_or_else(|| "?".into()),
                    span,
                    error: events.iter().any(|&i| is_error(&g.events[i])),
                    events,
                }
            })
            .collect();
        items.sort_by(|a, b| {
            (a.start_ns.unwrap_or(i64::MAX), &a.id).cmp(&(b.start_ns.unwrap_or(i64::MAX), &b.id))
        });
        let mut item_of = vec![0usize; g.len()];
        for (k, it) in items.iter().enumerate() {
            for &e in &it.events {
                item_of[e] = k;
            }
        }
        // Lanes.
        let mut lane_ids: BTreeMap<Lane, usize> = BTreeMap::new();
        let item_lanes: Vec<Lane> = items
            .iter()
            .map(|it| {
                let lead = it
                    .events
                    .iter()
                    .map(|&i| &g.events[i])
                    .find(|e| e.id.ends_with(":start"))
                    .unwrap_or(&g.events[it.events[0]]);
                lane_of(lead)
            })
            .collect();
        for l in &item_lanes {
            lane_ids.entry(l.clone()).or_insert(0);
        }
        let lanes: Vec<Lane> = lane_ids.keys().cloned().collect();
        for (k, v) in lane_ids.values_mut().enumerate() {
            *v = k;
        }
        // Rows: each span goes to the first row of its lane that is free at its start (items are
        // in start order), so nested spans stack like a waterfall. Point events are marks on row
        // 0: X-Trace timestamps are often in ms, and marks of one ms would otherwise stack in
        // dozens of rows.
        let mut row_ends: Vec<Vec<i64>> = vec![Vec::new(); lanes.len()];
        for (it, l) in items.iter_mut().zip(&item_lanes) {
            it.lane = lane_ids[l];
            if !it.span {
                continue;
            }
            let (s, e) = (it.start_ns.unwrap_or(t0_ns), it.end_ns.unwrap_or(t0_ns));
            let ends = &mut row_ends[it.lane];
            let row = match ends.iter().position(|&end| end <= s) {
                Some(r) => r,
                None => {
                    ends.push(i64::MIN);
                    ends.len() - 1
                }
            };
            ends[row] = e.max(s);
            it.row = row as u32;
        }
        let lane_rows = row_ends.iter().map(|r| r.len().max(1) as u32).collect();
        let mut edges: Vec<(usize, usize, EdgeKind)> = g
            .edges
            .iter()
            .filter_map(|e| {
                let (a, b) = (item_of[e.from_index?], item_of[e.to_index]);
                (a != b).then_some((a, b, e.kind))
            })
            .collect();
        edges.sort_by_key(|&(a, b, k)| (a, b, k.as_str()));
        edges.dedup();
        let mut parent: Vec<Option<usize>> = vec![None; items.len()];
        for &(a, b, kind) in &edges {
            if kind == EdgeKind::Causal && a < b && parent[b].is_none_or(|p| a < p) {
                parent[b] = Some(a);
            }
        }
        let mut critical: Vec<usize> = Vec::new();
        if let Some(cp) = cp {
            let mut seen = vec![false; items.len()];
            for s in &cp.steps {
                let it = item_of[s.index];
                if !seen[it] {
                    seen[it] = true;
                    critical.push(it);
                }
            }
        }
        TaskView {
            task: g.task.clone(),
            items,
            lanes,
            lane_rows,
            item_of,
            edges,
            critical,
            parent,
            t0_ns,
        }
    }

    /// The columnar payload of `GET /api/ui/task/{task}` (`docs/ui-api.md`).
    pub fn payload(
        &self,
        g: &TaskGraph,
        cp: Option<&CriticalPath>,
        skew: &SkewAdjustment,
        title: Option<&str>,
    ) -> Value {
        let mut strings: Vec<String> = Vec::new();
        let mut index: HashMap<String, u32> = HashMap::new();
        let mut intern = |s: &str| -> u32 {
            if let Some(&i) = index.get(s) {
                return i;
            }
            let i = strings.len() as u32;
            strings.push(s.to_string());
            index.insert(s.to_string(), i);
            i
        };
        let off = |t: Option<i64>| t.map(|t| t - self.t0_ns).unwrap_or(0);
        let it = &self.items;
        let label: Vec<u32> = it.iter().map(|i| intern(&i.label)).collect();
        let agent: Vec<u32> = it.iter().map(|i| intern(&i.agent)).collect();
        let lanes = json!({
            "host": self.lanes.iter().map(|l| intern(&l.host)).collect::<Vec<_>>(),
            "process": self.lanes.iter().map(|l| intern(&l.process)).collect::<Vec<_>>(),
            "thread": self.lanes.iter().map(|l| intern(&l.thread)).collect::<Vec<_>>(),
            "rows": self.lane_rows,
        });
        let duration = g.time_span().map_or(0, |(lo, hi)| hi - lo);
        json!({
            "task": self.task,
            "title": title,
            "t0_ns": self.t0_ns,
            "duration_ns": duration,
            "events": g.len(),
            "strings": strings,
            "lanes": lanes,
            "items": {
                "id": it.iter().map(|i| i.id.as_str()).collect::<Vec<_>>(),
                "lane": it.iter().map(|i| i.lane).collect::<Vec<_>>(),
                "row": it.iter().map(|i| i.row).collect::<Vec<_>>(),
                "start": it.iter().map(|i| off(i.start_ns)).collect::<Vec<_>>(),
                "end": it.iter().map(|i| off(i.end_ns)).collect::<Vec<_>>(),
                "label": label,
                "agent": agent,
                "span": it.iter().map(|i| u8::from(i.span)).collect::<Vec<_>>(),
                "error": it.iter().map(|i| u8::from(i.error)).collect::<Vec<_>>(),
                "events": it.iter().map(|i| i.events.len()).collect::<Vec<_>>(),
                "parent": self.parent.iter().map(|p| p.map_or(-1, |p| p as i64)).collect::<Vec<_>>(),
            },
            "edges": {
                "from": self.edges.iter().map(|e| e.0).collect::<Vec<_>>(),
                "to": self.edges.iter().map(|e| e.1).collect::<Vec<_>>(),
                "kind": self.edges.iter().map(|e| e.2.as_str()).collect::<Vec<_>>(),
            },
            "joins": g.joins().len(),
            "critical_path": cp.map(|cp| json!({
                "items": self.critical,
                "total_ns": cp.total_ns,
                "rules": cp.rules,
                "reached_root": cp.reached_root,
                "notes": cp.notes,
                "by_agent": cp.by_agent,
                "by_host": cp.by_host,
                "by_process": cp.by_process,
            })),
            "skew_adjustment": skew,
            "problems": g.problems.iter().map(|p| p.to_string()).collect::<Vec<_>>(),
        })
    }

    /// The detail of item `k` (`GET /api/ui/task/{task}/item/{k}`): its attributes (every field
    /// of its events, in event order) and its events as stored (the raw reports).
    pub fn detail(&self, g: &TaskGraph, k: usize) -> Option<Value> {
        let it = self.items.get(k)?;
        let evs: Vec<&Event> = it.events.iter().map(|&i| &g.events[i]).collect();
        let attributes: Vec<(&str, &str)> = evs
            .iter()
            .flat_map(|e| e.fields.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .collect();
        let lane = &self.lanes[it.lane];
        Some(json!({
            "index": k,
            "id": it.id,
            "label": it.label,
            "agent": it.agent,
            "host": lane.host,
            "process": lane.process,
            "thread": lane.thread,
            "span": it.span,
            "error": it.error,
            "start_ns": it.start_ns,
            "end_ns": it.end_ns,
            "duration_ns": it.start_ns.zip(it.end_ns).map(|(s, e)| e - s),
            "critical": self.critical.contains(&k),
            "attributes": attributes,
            "parents": self.edges.iter().filter(|e| e.1 == k).map(|e| json!({"item": e.0, "label": self.items[e.0].label, "kind": e.2.as_str()})).collect::<Vec<_>>(),
            "children": self.edges.iter().filter(|e| e.0 == k).map(|e| json!({"item": e.1, "label": self.items[e.1].label, "kind": e.2.as_str()})).collect::<Vec<_>>(),
            "reports": evs,
        }))
    }
}
