//! The accounting reports read back from a store: each event labelled [`crate::REPORT_LABEL`]
//! is one (task, process, thread, activity) row of resource totals (docs/causal-accounting.md,
//! "Reports"). `sightline show --cost`, `sightline cost` and the web UI's cost panel read them
//! through [`cost_rows`].

use std::collections::BTreeMap;

use causal_analysis::Event;

use crate::Resource;

/// One accounting report: what one thread of one process spent for a task in one activity.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CostRow {
    /// The activity label current on the thread (`""`: none).
    pub activity: String,
    /// The report's host (`""`: not reported).
    pub host: String,
    /// The process id, as reported (`account.pid`).
    pub pid: String,
    /// The thread id, as reported (`account.tid`).
    pub tid: String,
    /// Each resource's total ([`Resource::field`] units: ns, bytes, faults); 0 when absent.
    pub by_resource: BTreeMap<Resource, u64>,
    /// Energy charged, µJ (`energy_uj`; 0 when absent).
    pub energy_uj: u64,
}

impl CostRow {
    /// The total of resource `r` (0 when the report has none).
    pub fn get(&self, r: Resource) -> u64 {
        self.by_resource.get(&r).copied().unwrap_or(0)
    }
}

/// The accounting reports among a task's events, in event order. A field that is missing or
/// not a number counts 0.
pub fn cost_rows(events: &[Event]) -> Vec<CostRow> {
    events
        .iter()
        .filter(|e| e.labels.iter().any(|l| l == crate::REPORT_LABEL))
        .map(|e| {
            let f = |k: &str| {
                e.fields
                    .iter()
                    .find(|(n, _)| n == k)
                    .map(|(_, v)| v.clone())
                    .unwrap_or_default()
            };
            let n = |k: &str| f(k).parse::<u64>().unwrap_or(0);
            CostRow {
                activity: f("activity"),
                host: e.host.clone().unwrap_or_default(),
                pid: f("account.pid"),
                tid: f("account.tid"),
                by_resource: Resource::ALL.iter().map(|&r| (r, n(r.field()))).collect(),
                energy_uj: n("energy_uj"),
            }
        })
        .collect()
}

/// Sorts `rows` as the cost views list them: largest CPU first, then by activity, host, process
/// and thread.
pub fn sort_by_cpu(rows: &mut [CostRow]) {
    rows.sort_by(|a, b| {
        b.get(Resource::Cpu)
            .cmp(&a.get(Resource::Cpu))
            .then_with(|| a.activity.cmp(&b.activity))
            .then_with(|| (&a.host, &a.pid, &a.tid).cmp(&(&b.host, &b.pid, &b.tid)))
    });
}

/// The rows' totals: each resource and the energy summed (activity, host, pid and tid empty).
pub fn totals(rows: &[CostRow]) -> CostRow {
    let mut t = CostRow::default();
    for r in rows {
        for (res, v) in &r.by_resource {
            *t.by_resource.entry(*res).or_default() += v;
        }
        t.energy_uj += r.energy_uj;
    }
    t
}
