//! Clock skew between hosts: estimated from the task's own causality, corrected per host.
//!
//! Each host stamps events with its own clock, so a request sent at 10 ms by host `a` can be
//! received at 5 ms by host `b`. Jaeger's and Zipkin's adjusters correct this from RPC pairs: the
//! server's work (receive … send) must lie within the client's (send … receive), and when it falls
//! outside, the server side is shifted so that it is centred within the client side. This module
//! does the same per host, from two kinds of evidence between hosts `A` and `B`:
//!
//! - an edge from an event on `A` to one on `B` (a causal edge of X-Trace or an OTLP parent span;
//!   links are not used: linked work may run at any later time) says `B`'s event happened after
//!   `A`'s: with `d` the correction added to `B`'s clock, `d ≥ t(A) − t(B)`; an edge from `B` to
//!   `A` bounds `d` from above;
//! - a span on `B` whose parent span is on `A` (an RPC: the client span around the server span)
//!   says the child lies within its parent: `d ≥ parent.start − child.start` and
//!   `d ≤ parent.end − child.end`. Producer and consumer spans are asynchronous and give only the
//!   first bound.
//!
//! For each pair of hosts the bounds give an interval `[low, high]` for `d`. When 0 lies in it the
//! clocks agree as far as the task can tell and nothing is changed. Otherwise `d` is the centre of
//! the interval (the server side centred within the client side, as the adjusters do); with only
//! one bound, the smallest shift that restores causality; with contradictory bounds (a child
//! longer than its parent), the lower bound (starts aligned, as Jaeger does). Host corrections then
//! compose along a breadth-first walk from the host of the task's first root (which keeps its
//! clock), visiting hosts in name order, so the result does not depend on arrival order.

use std::collections::{BTreeMap, HashMap, VecDeque};

use serde::Serialize;

use crate::model::{EdgeKind, Event};

/// The correction of one host's clock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostSkew {
    /// The host whose timestamps are corrected.
    pub host: String,
    /// Added to every timestamp of the host, ns (negative: its clock was ahead).
    pub offset_ns: i64,
    /// The host it was measured against (directly: the correction of that host is included).
    pub against: String,
    /// Edges and RPC span pairs between the two hosts that bounded the correction.
    pub evidence: usize,
}

/// The corrections for one task: only hosts whose clock is changed are listed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SkewAdjustment {
    /// The reference host (its clock is kept), if the task has any host.
    pub reference: Option<String>,
    /// Corrected hosts, by name.
    pub hosts: Vec<HostSkew>,
}

/// Bounds on the correction of `b` relative to `a` (`t(b) + d` is on `a`'s clock).
#[derive(Debug, Clone, Copy)]
struct Bounds {
    low: Option<i64>,
    high: Option<i64>,
    evidence: usize,
}

impl Bounds {
    fn new() -> Bounds {
        Bounds {
            low: None,
            high: None,
            evidence: 0,
        }
    }

    fn at_least(&mut self, v: i64) {
        self.low = Some(self.low.map_or(v, |l| l.max(v)));
        self.evidence += 1;
    }

    fn at_most(&mut self, v: i64) {
        self.high = Some(self.high.map_or(v, |h| h.min(v)));
        self.evidence += 1;
    }

    /// The bounds of `a` relative to `b`: negated and swapped.
    fn flipped(self) -> Bounds {
        Bounds {
            low: self.high.map(i64::saturating_neg),
            high: self.low.map(i64::saturating_neg),
            evidence: self.evidence,
        }
    }

    /// The correction chosen by the rules of the module docs.
    fn choose(self) -> i64 {
        match (self.low, self.high) {
            (Some(l), Some(h)) if l <= 0 && 0 <= h => 0,
            // The midpoint without overflow: (l + h) / 2 in 128 bits fits back in 64.
            (Some(l), Some(h)) if l <= h => ((i128::from(l) + i128::from(h)) / 2) as i64,
            (Some(l), Some(_)) => l,
            (Some(l), None) => l.max(0),
            (None, Some(h)) => h.min(0),
            (None, None) => 0,
        }
    }
}

/// Records that the event at `(hb, tb)` happened after the one at `(ha, ta)`.
fn edge<'e>(
    bounds: &mut BTreeMap<(&'e str, &'e str), Bounds>,
    (ha, ta): (&'e str, i64),
    (hb, tb): (&'e str, i64),
) {
    if ha < hb {
        // The correction d of b relative to a: t(b) + d ≥ t(a).
        bounds
            .entry((ha, hb))
            .or_insert_with(Bounds::new)
            .at_least(ta.saturating_sub(tb));
    } else if hb < ha {
        // The correction d of a relative to b: t(b) ≥ t(a) + d.
        bounds
            .entry((hb, ha))
            .or_insert_with(Bounds::new)
            .at_most(tb.saturating_sub(ta));
    }
}

impl SkewAdjustment {
    /// Estimates the per-host corrections of one task's events (see the module docs). Events
    /// without a host or a timestamp give no evidence and are never corrected.
    pub fn estimate(events: &[Event]) -> SkewAdjustment {
        // The first event with an id wins (as in `TaskGraph::build`).
        let mut index: HashMap<&str, usize> = HashMap::new();
        for (i, e) in events.iter().enumerate() {
            index.entry(e.id.as_str()).or_insert(i);
        }
        let host_ts = |i: usize| -> Option<(&str, i64)> {
            Some((events[i].host.as_deref()?, events[i].timestamp_ns?))
        };
        // Bounds keyed by (a, b) with a < b: the correction of b relative to a.
        let mut bounds: BTreeMap<(&str, &str), Bounds> = BTreeMap::new();
        for (ci, c) in events.iter().enumerate() {
            if index.get(c.id.as_str()) != Some(&ci) {
                continue;
            }
            let Some(child) = host_ts(ci) else { continue };
            for p in &c.parents {
                if p.kind == EdgeKind::Link {
                    continue;
                }
                let Some(&pi) = index.get(p.id.as_str()) else {
                    continue;
                };
                if let Some(parent) = host_ts(pi) {
                    edge(&mut bounds, parent, child);
                }
            }
            // RPC pairs: the child span's end lies before its parent span's end.
            let Some(span) = c.id.strip_suffix(":start") else {
                continue;
            };
            let async_kind =
                |e: &Event| matches!(e.field("span.kind"), Some("producer" | "consumer"));
            if async_kind(c) {
                continue;
            }
            let Some(&child_end) = index.get(format!("{span}:end").as_str()) else {
                continue;
            };
            for p in c.parents.iter().filter(|p| p.kind == EdgeKind::Causal) {
                let Some(parent_span) = p.id.strip_suffix(":start") else {
                    continue;
                };
                let (Some(&ps), Some(&pe)) = (
                    index.get(p.id.as_str()),
                    index.get(format!("{parent_span}:end").as_str()),
                ) else {
                    continue;
                };
                if async_kind(&events[ps]) {
                    continue;
                }
                if let (Some(ce), Some(pe)) = (host_ts(child_end), host_ts(pe)) {
                    // The parent's end happened after the child's end.
                    edge(&mut bounds, ce, pe);
                }
            }
        }

        // The reference: the host of the earliest root (ties by id).
        let reference = events
            .iter()
            .enumerate()
            .filter(|&(i, e)| {
                index.get(e.id.as_str()) == Some(&i)
                    && e.host.is_some()
                    && !e
                        .parents
                        .iter()
                        .any(|p| p.kind != EdgeKind::Link && index.contains_key(p.id.as_str()))
            })
            .min_by_key(|(_, e)| (e.timestamp_ns.unwrap_or(i64::MAX), e.id.as_str()))
            .and_then(|(_, e)| e.host.clone())
            .or_else(|| events.iter().filter_map(|e| e.host.clone()).min());
        let Some(reference) = reference else {
            return SkewAdjustment::default();
        };

        let mut adj: BTreeMap<&str, Vec<(&str, Bounds)>> = BTreeMap::new();
        for (&(a, b), &bd) in &bounds {
            adj.entry(a).or_default().push((b, bd));
            adj.entry(b).or_default().push((a, bd.flipped()));
        }
        let mut offset: BTreeMap<&str, i64> = BTreeMap::new();
        offset.insert(reference.as_str(), 0);
        let mut queue = VecDeque::from([reference.as_str()]);
        let mut hosts = Vec::new();
        while let Some(a) = queue.pop_front() {
            let base = offset[a];
            for &(b, bd) in adj.get(a).map(Vec::as_slice).unwrap_or(&[]) {
                if offset.contains_key(b) {
                    continue;
                }
                let d = base.saturating_add(bd.choose());
                offset.insert(b, d);
                queue.push_back(b);
                if d != 0 {
                    hosts.push(HostSkew {
                        host: b.to_string(),
                        offset_ns: d,
                        against: a.to_string(),
                        evidence: bd.evidence,
                    });
                }
            }
        }
        hosts.sort_by(|x, y| x.host.cmp(&y.host));
        SkewAdjustment {
            reference: Some(reference),
            hosts,
        }
    }

    /// True when no host is corrected.
    pub fn is_empty(&self) -> bool {
        self.hosts.is_empty()
    }

    /// Adds each corrected host's offset to the timestamps of its events (saturating).
    pub fn apply(&self, events: &mut [Event]) {
        if self.hosts.is_empty() {
            return;
        }
        let by_host: HashMap<&str, i64> = self
            .hosts
            .iter()
            .map(|h| (h.host.as_str(), h.offset_ns))
            .collect();
        for e in events {
            if let (Some(h), Some(t)) = (e.host.as_deref(), e.timestamp_ns.as_mut())
                && let Some(&d) = by_host.get(h)
            {
                *t = t.saturating_add(d);
            }
        }
    }

    /// One line per corrected host, as `show` prints them:
    /// `skew adjusted: host b +65.4 ms (against a, 3 bounds)`.
    pub fn lines(&self) -> Vec<String> {
        self.hosts
            .iter()
            .map(|h| {
                format!(
                    "skew adjusted: host {} {:+.1} ms (against {}, {} bounds)",
                    h.host,
                    h.offset_ns as f64 / 1e6,
                    h.against,
                    h.evidence
                )
            })
            .collect()
    }
}
