//! An expectation-based mock collector for testing code instrumented with `causal`, after
//! `tracing-mock`'s scripted subscriber. It is its own crate, as `tracing-mock` is apart from
//! `tracing`, so that programs linking `causal` do not carry it; tests take it as a
//! dev-dependency.
//!
//! ```no_run
//! use causal_mock::expect;
//! let collector = causal_mock::install(); // in-process: the reporter's sink becomes the mock
//! let ctx = causal::start_task("request", []);
//! causal::report("work", [("n", 3u32.into())]);
//! let reports = collector.wait_for(ctx.task_id(), 2, std::time::Duration::from_secs(5));
//! causal_mock::expect_task()
//!     .event(expect::event().label("request").no_parents())
//!     .event(expect::event().label("work").parents(["request"]).field("n", "3"))
//!     .only()
//!     .check(&reports);
//! ```
//!
//! The main types: [`install`] captures reports in-process through a callback sink
//! ([`MockCollector`]); [`TcpCollector`] listens on a loopback port and reads framed reports
//! exactly as `sightline collect` does, for reports sent by other processes; [`expect_task`] and
//! [`expect::event`] script what one task's reports must be ([`TaskExpectation`]).
#![deny(missing_docs)]

use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use causal::Report;
use causal::metadata::{OpId, TaskId};
use causal::reporter::{self, Config, Sink};

/// Reports received, shared between the receiving side and the test.
#[derive(Debug, Default)]
pub struct Received {
    reports: Mutex<Vec<Report>>,
    cv: Condvar,
}

impl Received {
    fn push(&self, r: Report) {
        self.reports
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(r);
        self.cv.notify_all();
    }

    /// All reports received so far, in arrival order.
    pub fn all(&self) -> Vec<Report> {
        self.reports
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The reports of `task` received so far.
    pub fn of_task(&self, task: TaskId) -> Vec<Report> {
        let g = self.reports.lock().unwrap_or_else(|e| e.into_inner());
        g.iter()
            .filter(|r| r.metadata.task_id() == task)
            .cloned()
            .collect()
    }

    /// Waits until at least `n` reports of `task` arrived or `timeout` passed; returns those
    /// received (fewer on timeout, and the check that follows then fails with a listing).
    pub fn wait_for(&self, task: TaskId, n: usize, timeout: Duration) -> Vec<Report> {
        let deadline = Instant::now() + timeout;
        let mut g = self.reports.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            let have: Vec<Report> = g
                .iter()
                .filter(|r| r.metadata.task_id() == task)
                .cloned()
                .collect();
            let now = Instant::now();
            if have.len() >= n || now >= deadline {
                return have;
            }
            g = self
                .cv
                .wait_timeout(g, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

/// The in-process mock collector (see [`install`]).
#[derive(Debug)]
pub struct MockCollector {
    received: Arc<Received>,
}

impl MockCollector {
    /// Flushes the reporter, then waits for `n` reports of `task` (see [`Received::wait_for`]).
    pub fn wait_for(&self, task: TaskId, n: usize, timeout: Duration) -> Vec<Report> {
        reporter::flush(timeout);
        self.received.wait_for(task, n, timeout)
    }

    /// Flushes the reporter and returns the reports of `task` received so far.
    pub fn reports(&self, task: TaskId) -> Vec<Report> {
        reporter::flush(Duration::from_secs(5));
        self.received.of_task(task)
    }
}

static MOCK: OnceLock<MockCollector> = OnceLock::new();

/// Makes the in-process mock the reporter's sink and returns it; later calls return the same mock.
///
/// # Panics
/// When the reporter already runs with another sink (an event was reported before the first
/// `install` in this process): a test that would otherwise pass vacuously.
pub fn install() -> &'static MockCollector {
    MOCK.get_or_init(|| {
        let received = Arc::new(Received::default());
        let r2 = received.clone();
        let config = Config {
            sink: Sink::Callback(Arc::new(move |r: &Report| r2.push(r.clone()))),
            flush_interval: Duration::from_millis(5),
            ..Config::default()
        };
        reporter::init(config).expect("causal_mock::install must run before the first event");
        MockCollector { received }
    })
}

/// A collector on a loopback TCP port reading length-prefixed reports (either payload format),
/// for reports sent by other processes.
#[derive(Debug)]
pub struct TcpCollector {
    addr: SocketAddr,
    received: Arc<Received>,
    bad_frames: Arc<Mutex<Vec<String>>>,
}

impl TcpCollector {
    /// Listens on `127.0.0.1` on a free port; a thread per connection reads frames.
    ///
    /// # Errors
    /// The bind error.
    pub fn start() -> std::io::Result<TcpCollector> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let received = Arc::new(Received::default());
        let bad_frames = Arc::new(Mutex::new(Vec::new()));
        let (r, b) = (received.clone(), bad_frames.clone());
        std::thread::Builder::new()
            .name("mock-collector".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    let Ok(mut conn) = conn else { continue };
                    let (r, b) = (r.clone(), b.clone());
                    std::thread::spawn(move || {
                        let mut scratch = Vec::new();
                        loop {
                            match causal::wire::read_report(&mut conn, &mut scratch) {
                                Ok(Some(rep)) => r.push(rep),
                                Ok(None) => return,
                                Err(e) => {
                                    b.lock()
                                        .unwrap_or_else(|e| e.into_inner())
                                        .push(e.to_string());
                                    return;
                                }
                            }
                        }
                    });
                }
            })?;
        Ok(TcpCollector {
            addr,
            received,
            bad_frames,
        })
    }

    /// The address to send to (`tcp://` + this, for `SIGHTLINE_CAUSAL_SINK`).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The reports received.
    pub fn received(&self) -> &Received {
        &self.received
    }

    /// Framing or decoding errors seen (each closed its connection).
    pub fn bad_frames(&self) -> Vec<String> {
        self.bad_frames
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// Expected events.
pub mod expect {
    /// Starts an expected event; refine it with the builder methods.
    pub fn event() -> super::ExpectedEvent {
        super::ExpectedEvent::default()
    }
}

/// One expected event: every set property must match.
#[derive(Debug, Clone, Default)]
pub struct ExpectedEvent {
    label: Option<String>,
    agent: Option<String>,
    parents: Option<Vec<String>>,
    fields: Vec<(String, String)>,
    pid: Option<String>,
}

impl ExpectedEvent {
    /// The `Label`.
    pub fn label(mut self, label: &str) -> Self {
        self.label = Some(label.into());
        self
    }

    /// The `Agent`.
    pub fn agent(mut self, agent: &str) -> Self {
        self.agent = Some(agent.into());
        self
    }

    /// The parents, by label, as a multiset (order does not matter; each parent must be a report of
    /// the same task).
    pub fn parents<const N: usize>(mut self, labels: [&str; N]) -> Self {
        self.parents = Some(labels.iter().map(|s| s.to_string()).collect());
        self
    }

    /// No parents (a task's first event).
    pub fn no_parents(mut self) -> Self {
        self.parents = Some(Vec::new());
        self
    }

    /// A key/value among the report's fields.
    pub fn field(mut self, key: &str, value: &str) -> Self {
        self.fields.push((key.into(), value.into()));
        self
    }

    /// The `ProcessID`.
    pub fn process_id(mut self, pid: &str) -> Self {
        self.pid = Some(pid.into());
        self
    }

    fn matches(&self, r: &Report, labels: &HashMap<OpId, String>) -> bool {
        if self.label.is_some() && r.label != self.label {
            return false;
        }
        if self.agent.is_some() && r.agent != self.agent {
            return false;
        }
        if self.pid.is_some() && r.process_id != self.pid {
            return false;
        }
        if !self
            .fields
            .iter()
            .all(|(k, v)| r.fields.iter().any(|(rk, rv)| rk == k && rv == v))
        {
            return false;
        }
        if let Some(want) = &self.parents {
            let mut got = parent_labels(r, labels);
            let mut want = want.clone();
            got.sort();
            want.sort();
            if got != want {
                return false;
            }
        }
        true
    }
}

/// A scripted expectation over one task's reports.
#[derive(Debug, Clone, Default)]
pub struct TaskExpectation {
    events: Vec<ExpectedEvent>,
    only: bool,
}

/// Starts an expectation over one task's reports.
pub fn expect_task() -> TaskExpectation {
    TaskExpectation::default()
}

impl TaskExpectation {
    /// Expects one more event (each expected event must match a distinct report).
    pub fn event(mut self, e: ExpectedEvent) -> Self {
        self.events.push(e);
        self
    }

    /// Also requires that there are no reports besides the expected ones.
    pub fn only(mut self) -> Self {
        self.only = true;
        self
    }

    /// Checks `reports` (one task's); returns a message listing the reports on failure.
    ///
    /// # Errors
    /// A description of the first unmet expectation and the reports received.
    pub fn verify(&self, reports: &[Report]) -> Result<(), String> {
        let labels: HashMap<OpId, String> = reports
            .iter()
            .map(|r| (r.metadata.op_id(), r.label.clone().unwrap_or_default()))
            .collect();
        let mut used = vec![false; reports.len()];
        for (i, e) in self.events.iter().enumerate() {
            let hit = reports
                .iter()
                .enumerate()
                .position(|(j, r)| !used[j] && e.matches(r, &labels));
            match hit {
                Some(j) => used[j] = true,
                None => {
                    return Err(format!(
                        "expected event #{i} {e:?} not found among\n{}",
                        listing(reports, &labels)
                    ));
                }
            }
        }
        if self.only && used.iter().any(|u| !u) {
            return Err(format!(
                "{} unexpected report(s) besides the {} expected; reports:\n{}",
                used.iter().filter(|u| !**u).count(),
                self.events.len(),
                listing(reports, &labels)
            ));
        }
        Ok(())
    }

    /// [`TaskExpectation::verify`], panicking with its message.
    ///
    /// # Panics
    /// When an expectation is not met.
    pub fn check(&self, reports: &[Report]) {
        if let Err(m) = self.verify(reports) {
            panic!("{m}");
        }
    }
}

/// The labels of `r`'s parents (`<unknown OPID>` for a parent not among the task's reports).
fn parent_labels(r: &Report, labels: &HashMap<OpId, String>) -> Vec<String> {
    r.parents()
        .map(|p| {
            labels
                .get(&p)
                .cloned()
                .unwrap_or_else(|| format!("<unknown {p}>"))
        })
        .collect()
}

fn listing(reports: &[Report], labels: &HashMap<OpId, String>) -> String {
    let mut s = String::new();
    for r in reports {
        let parents = parent_labels(r, labels);
        let _ = writeln!(
            s,
            "  {:?} agent={:?} pid={:?} parents={parents:?} fields={:?}",
            r.label.as_deref().unwrap_or(""),
            r.agent.as_deref().unwrap_or(""),
            r.process_id.as_deref().unwrap_or(""),
            r.fields
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use causal::metadata::Metadata;

    fn rep(label: &str, op: u64, parents: &[u64]) -> Report {
        let mut r = Report::new(Metadata::new(TaskId::from_u64(1).unwrap(), OpId::new(op)));
        r.label = Some(label.into());
        r.edges = parents.iter().map(|&p| OpId::new(p)).collect();
        r.fields = vec![("k".into(), "v".into())];
        r
    }

    fn dag() -> Vec<Report> {
        vec![
            rep("root", 1, &[]),
            rep("a", 2, &[1]),
            rep("b", 3, &[1]),
            rep("join", 4, &[2, 3]),
        ]
    }

    #[test]
    fn matching_script_passes() {
        let ok = expect_task()
            .event(expect::event().label("join").parents(["b", "a"]))
            .event(expect::event().label("root").no_parents().field("k", "v"))
            .verify(&dag());
        assert_eq!(ok, Ok(()));
    }

    #[test]
    fn wrong_parents_missing_events_and_extras_fail() {
        let wrong_parents = expect_task()
            .event(expect::event().label("join").parents(["a"]))
            .verify(&dag());
        assert!(wrong_parents.unwrap_err().contains("expected event #0"));
        let missing = expect_task()
            .event(expect::event().label("c"))
            .verify(&dag());
        assert!(missing.is_err());
        let wrong_field = expect_task()
            .event(expect::event().label("a").field("k", "w"))
            .verify(&dag());
        assert!(wrong_field.is_err());
        let extra = expect_task()
            .event(expect::event().label("root"))
            .only()
            .verify(&dag());
        assert!(extra.unwrap_err().starts_with("3 unexpected report(s)"));
        // Each expectation needs its own report: two "a"s cannot both match the one "a".
        let twice = expect_task()
            .event(expect::event().label("a"))
            .event(expect::event().label("a"))
            .verify(&dag());
        assert!(twice.is_err());
    }

    #[test]
    fn unknown_parents_are_named() {
        let r = vec![rep("orphan", 9, &[77])];
        let e = expect_task()
            .event(expect::event().label("orphan").no_parents())
            .verify(&r)
            .unwrap_err();
        assert!(e.contains("<unknown 000000000000004D>"), "{e}");
    }
}
