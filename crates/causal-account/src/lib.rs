//! Per-activity resource and energy accounting: Quanto (Dutta, Fonseca, Culler et al., OSDI
//! 2008) on Linux, joined with the causal library's tasks.
//!
//! The causal library publishes which task and activity each thread works for
//! (`causal::publish`: the USDT probe `causal:context` and a per-thread slot). [`run`] compiles
//! the accounting program ([`program::source`], D, by Sightline's own probe compiler), loads it
//! in this process, and charges on-CPU time, read/write/network bytes, block I/O bytes and page
//! faults to the (task, activity) current on the thread at that moment; threads that published
//! before the program started are charged from their slots ([`snapshot`]). Energy comes from
//! RAPL (powercap), apportioned by CPU share per interval, or from a linear model
//! ([`energy`]). [`Accounting::report`] sends the totals as causal reports (label
//! `sightline account`) on each task, where `sightline show --cost`, `tasks --sort cost` and
//! `sightline cost` read them.
//!
//! Format, fields and limits: docs/causal-accounting.md.
#![deny(missing_docs)]

pub mod energy;
pub mod pivot;
pub mod program;
pub mod reports;
pub mod snapshot;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use causal::publish::ThreadState;
use probe_runtime::compile::{self, CompileOptions};
use probe_runtime::run::{Consumer, RunConfig, Target};
use probe_runtime::session::RuntimeError;

pub use program::Resource;

/// The label of the reports [`Accounting::report`] sends.
pub const REPORT_LABEL: &str = "sightline account";

/// Errors of the accounting.
#[derive(Debug, thiserror::Error)]
pub enum AccountError {
    /// Nothing to account: no executable and no process given, or none found.
    #[error("nothing to account: {0}")]
    NoTarget(String),
    /// A process could not be inspected.
    #[error("process {pid}: {what}")]
    Process {
        /// The process.
        pid: u32,
        /// What failed, with its cause.
        what: String,
    },
    /// The accounting program did not compile (the probe compiler's diagnostics).
    #[error("compiling the accounting program: {0}")]
    Compile(String),
    /// Loading, attaching or running the program failed.
    #[error("running the accounting program")]
    Run(#[from] probe_runtime::run::RunError),
    /// Energy sensor or calibration file.
    #[error("energy: {what}")]
    Energy {
        /// What failed.
        what: String,
    },
}

/// What to account and how.
#[derive(Debug, Clone)]
pub struct Config {
    /// Executables linking the causal library: every process running one is accounted, also
    /// those started later (from their first `causal:context`).
    pub exes: Vec<PathBuf>,
    /// Processes to account (their executables are added to `exes`).
    pub pids: Vec<u32>,
    /// Interval between energy samples (and aggregation prints), ms.
    pub interval_ms: u64,
    /// The powercap root (RAPL); `None`: always the model.
    pub powercap: Option<PathBuf>,
    /// The model used without RAPL.
    pub model: energy::Model,
    /// `/proc/stat` (the machine's busy CPU time for RAPL shares).
    pub proc_stat: PathBuf,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            exes: Vec::new(),
            pids: Vec::new(),
            interval_ms: 1000,
            powercap: Some(PathBuf::from("/sys/class/powercap")),
            model: energy::Model::default(),
            proc_stat: PathBuf::from("/proc/stat"),
        }
    }
}

/// Where a cost is charged: task key, activity key, process and thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Charge {
    /// The TaskId's first 8 bytes, big-endian (0: no task: the thread worked for none).
    pub task: u64,
    /// FNV-1a 64 of the activity label (0: none).
    pub activity_key: u64,
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
}

/// Totals of one [`Charge`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Usage {
    /// Per resource, in its unit (ns, bytes, count).
    pub by_resource: BTreeMap<Resource, u64>,
    /// Energy in µJ (RAPL share or model).
    pub energy_uj: f64,
}

impl Usage {
    /// The total of one resource (0 when none was charged).
    pub fn get(&self, r: Resource) -> u64 {
        self.by_resource.get(&r).copied().unwrap_or(0)
    }
}

/// Where the energy figures come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnergySource {
    /// RAPL package counters, apportioned by CPU share.
    Rapl,
    /// The linear model.
    Model,
}

impl EnergySource {
    /// `rapl` or `model` (the `energy_source` field of reports).
    pub fn as_str(self) -> &'static str {
        match self {
            EnergySource::Rapl => "rapl",
            EnergySource::Model => "model",
        }
    }
}

/// The result of one accounting run.
#[derive(Debug, Clone)]
pub struct Accounting {
    /// Totals per charge.
    pub usage: BTreeMap<Charge, Usage>,
    /// Activity labels by key.
    pub labels: BTreeMap<u64, String>,
    /// Where energy figures come from.
    pub energy_source: EnergySource,
    /// RAPL energy of the whole run that no accounted thread used (µJ; 0 with the model).
    pub unattributed_uj: f64,
    /// Intervals seen.
    pub intervals: usize,
}

/// One energy sample at an interval boundary.
#[derive(Debug, Clone)]
struct Sample {
    rapl: Option<Vec<u64>>,
    busy_ns: u64,
}

struct Sensors {
    powercap: Option<energy::Powercap>,
    proc_stat: PathBuf,
}

impl Sensors {
    fn sample(&self) -> Result<Sample, AccountError> {
        Ok(Sample {
            rapl: self.powercap.as_ref().map(|p| p.sample()).transpose()?,
            busy_ns: energy::busy_ns(&self.proc_stat).unwrap_or(0),
        })
    }
}

/// The consumer's output: parsed line by line; an energy sample at each interval marker.
struct Sink<'a> {
    pending: Vec<u8>,
    out: program::Output,
    sensors: &'a Sensors,
    samples: Vec<Sample>,
    error: Option<AccountError>,
}

impl Write for Sink<'_> {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.pending.extend_from_slice(b);
        while let Some(nl) = self.pending.iter().position(|&c| c == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=nl).collect();
            let line = String::from_utf8_lossy(&line);
            if self.out.line(&line) {
                match self.sensors.sample() {
                    Ok(s) => self.samples.push(s),
                    Err(e) => {
                        self.error.get_or_insert(e);
                    }
                }
            }
        }
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Releases nothing; at attach time reads the slots and the first energy sample, then tells
/// the caller; stops when `stop` is set.
struct Attached<'a, F: FnOnce()> {
    pids: &'a [u32],
    sensors: &'a Sensors,
    stop: &'a AtomicBool,
    on_attached: Option<F>,
    snapshot: BTreeMap<(u32, u32), ThreadState>,
    first: Option<Sample>,
    error: Option<AccountError>,
}

impl<F: FnOnce()> Target for Attached<'_, F> {
    fn release(&mut self) -> Result<(), RuntimeError> {
        for &pid in self.pids {
            match snapshot::read(pid) {
                Ok(m) => self
                    .snapshot
                    .extend(m.into_iter().map(|(tid, st)| ((pid, tid), st))),
                // A process that exited since it was found has nothing to charge.
                Err(e) if std::path::Path::new(&format!("/proc/{pid}")).exists() => {
                    self.error.get_or_insert(e);
                }
                Err(_) => {}
            }
        }
        match self.sensors.sample() {
            Ok(s) => self.first = Some(s),
            Err(e) => {
                self.error.get_or_insert(e);
            }
        }
        if let Some(f) = self.on_attached.take() {
            f();
        }
        Ok(())
    }
    fn exited(&mut self) -> Option<i32> {
        self.stop.load(Ordering::Acquire).then_some(0)
    }
}

/// Every process whose executable is one of `exes`.
fn processes_of(exes: &[PathBuf]) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let me = std::process::id();
    let mut out: Vec<u32> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&p| p != me)
        .filter(|p| {
            std::fs::read_link(format!("/proc/{p}/exe"))
                .is_ok_and(|x| exes.iter().any(|e| same_file(e, &x)))
        })
        .collect();
    out.sort_unstable();
    out
}

fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => a == b,
    }
}

/// Runs the accounting until `stop` is set (or SIGINT when the caller installed the probe
/// runtime's interrupt handler); `on_attached` runs once every probe is attached and the slots
/// are read (start the measured work then).
///
/// # Errors
/// [`AccountError::NoTarget`] without executables or processes, [`AccountError::Compile`] /
/// [`AccountError::Run`] when the program does not compile or load (BPF needs root or
/// CAP_BPF+CAP_PERFMON), [`AccountError::Process`] when a running process cannot be read,
/// [`AccountError::Energy`] for an unreadable sensor.
pub fn run(
    cfg: &Config,
    stop: &AtomicBool,
    on_attached: impl FnOnce(),
) -> Result<Accounting, AccountError> {
    let mut exes: Vec<PathBuf> = Vec::new();
    let mut push_exe = |p: PathBuf| {
        let p = std::fs::canonicalize(&p).unwrap_or(p);
        if !exes.contains(&p) {
            exes.push(p);
        }
    };
    for e in &cfg.exes {
        push_exe(e.clone());
    }
    for &pid in &cfg.pids {
        let exe =
            std::fs::read_link(format!("/proc/{pid}/exe")).map_err(|e| AccountError::Process {
                pid,
                what: format!("reading its executable: {e}"),
            })?;
        push_exe(exe);
    }
    if exes.is_empty() {
        return Err(AccountError::NoTarget(
            "give executables (--exe) or processes (-p)".into(),
        ));
    }
    let mut pids = processes_of(&exes);
    for &p in &cfg.pids {
        if !pids.contains(&p) {
            pids.push(p);
        }
    }
    let tids: Vec<u32> = pids
        .iter()
        .flat_map(|p| {
            std::fs::read_dir(format!("/proc/{p}/task"))
                .into_iter()
                .flatten()
                .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        })
        .collect();
    let text = program::source(&exes, &pids, &tids, cfg.interval_ms.max(10));
    let compiled = compile_text(&text)?;
    let sensors = Sensors {
        powercap: match &cfg.powercap {
            Some(root) => energy::Powercap::open(root)?,
            None => None,
        },
        proc_stat: cfg.proc_stat.clone(),
    };
    let mut sink = Sink {
        pending: Vec::new(),
        out: program::Output::default(),
        sensors: &sensors,
        samples: Vec::new(),
        error: None,
    };
    let mut err = Vec::new();
    let mut target = Attached {
        pids: &pids,
        sensors: &sensors,
        stop,
        on_attached: Some(on_attached),
        snapshot: BTreeMap::new(),
        first: None,
        error: None,
    };
    {
        let rc = RunConfig {
            quiet: true,
            ..RunConfig::default()
        };
        let mut consumer =
            Consumer::new(&compiled.checked, compiled.layout, rc, &mut sink, &mut err)?;
        consumer.run(Some(&mut target))?;
    }
    if let Some(e) = target.error.take().or(sink.error.take()) {
        return Err(e);
    }
    let mut samples = Vec::with_capacity(sink.samples.len() + 1);
    samples.extend(target.first.take());
    samples.append(&mut sink.samples);
    Ok(tally(
        &sink.out,
        &target.snapshot,
        &samples,
        &sensors,
        &cfg.model,
    ))
}

/// Parses and compiles a D program against the system catalog.
fn compile_text(text: &str) -> Result<compile::Compiled, AccountError> {
    let mut map = probe_syntax::SourceMap::new();
    map.add("accounting.d".to_string(), text.to_string());
    let render = |e: compile::CompileError| match &e {
        compile::CompileError::Syntax(d) | compile::CompileError::Sema(d) => {
            AccountError::Compile(probe_syntax::render_all(d, &map))
        }
        _ => AccountError::Compile(format!("{e}")),
    };
    let prog = compile::parse(&map).map_err(render)?;
    let catalog = probe_runtime::catalog::system(probe_user::provider::UserSites::new());
    compile::compile(&prog, &catalog, &CompileOptions::default()).map_err(render)
}

/// Stops a [`run_d`] program when `stop` is set; tells the caller once attached.
struct Until<'a, F: FnOnce()> {
    stop: &'a AtomicBool,
    on_attached: Option<F>,
}

impl<F: FnOnce()> Target for Until<'_, F> {
    fn release(&mut self) -> Result<(), RuntimeError> {
        if let Some(f) = self.on_attached.take() {
            f();
        }
        Ok(())
    }
    fn exited(&mut self) -> Option<i32> {
        self.stop.load(Ordering::Acquire).then_some(0)
    }
}

/// Runs any D program (e.g. [`pivot::prelude`] followed by clauses using `causal_task`) in this
/// process until `stop` is set; returns everything it printed (the aggregations at exit
/// included). `on_attached` runs once every probe is attached.
///
/// # Errors
/// As [`run`]: [`AccountError::Compile`], [`AccountError::Run`].
pub fn run_d(
    source: &str,
    stop: &AtomicBool,
    on_attached: impl FnOnce(),
) -> Result<String, AccountError> {
    let compiled = compile_text(source)?;
    let mut out = Vec::new();
    let mut err = Vec::new();
    let rc = RunConfig {
        quiet: true,
        ..RunConfig::default()
    };
    {
        let mut consumer =
            Consumer::new(&compiled.checked, compiled.layout, rc, &mut out, &mut err)?;
        consumer.run(Some(&mut Until {
            stop,
            on_attached: Some(on_attached),
        }))?;
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// Charges the rows (snapshot for threads not yet seen by `causal:context`), then the energy.
fn tally(
    out: &program::Output,
    snap: &BTreeMap<(u32, u32), ThreadState>,
    samples: &[Sample],
    sensors: &Sensors,
    model: &energy::Model,
) -> Accounting {
    let mut labels = out.labels.clone();
    let mut usage: BTreeMap<Charge, Usage> = BTreeMap::new();
    let mut cpu_per_interval: Vec<BTreeMap<Charge, u64>> = vec![BTreeMap::new(); out.intervals];
    for r in out.deltas().iter().flatten() {
        let (task, activity_key) = if r.known {
            (r.task, r.activity_key)
        } else {
            match snap.get(&(r.pid, r.tid)) {
                Some(st) => {
                    if st.activity_key != 0 {
                        labels
                            .entry(st.activity_key)
                            .or_insert_with(|| st.activity.clone());
                    }
                    (st.task, st.activity_key)
                }
                None => (0, 0),
            }
        };
        let c = Charge {
            task,
            activity_key,
            pid: r.pid,
            tid: r.tid,
        };
        *usage
            .entry(c)
            .or_default()
            .by_resource
            .entry(r.resource)
            .or_default() += r.value;
        if r.resource == Resource::Cpu
            && let Some(m) = cpu_per_interval.get_mut(r.interval)
        {
            *m.entry(c).or_default() += r.value;
        }
    }
    let mut unattributed_uj = 0.0;
    let energy_source = match &sensors.powercap {
        Some(pc) if samples.len() == out.intervals + 1 => {
            for (i, cpu) in cpu_per_interval.iter().enumerate() {
                let (a, b) = (&samples[i], &samples[i + 1]);
                let (Some(ra), Some(rb)) = (&a.rapl, &b.rapl) else {
                    continue;
                };
                let uj = pc.delta_uj(ra, rb) as f64;
                let busy = b.busy_ns.saturating_sub(a.busy_ns);
                let (shares, rest) = energy::apportion(uj, busy, cpu);
                for (c, e) in shares {
                    usage.entry(c).or_default().energy_uj += e;
                }
                unattributed_uj += rest;
            }
            EnergySource::Rapl
        }
        _ => {
            for u in usage.values_mut() {
                u.energy_uj = model.energy_uj(
                    u.get(Resource::Cpu),
                    u.get(Resource::BlockBytes),
                    u.get(Resource::NetTxBytes) + u.get(Resource::NetRxBytes),
                );
            }
            EnergySource::Model
        }
    };
    Accounting {
        usage,
        labels,
        energy_source,
        unattributed_uj,
        intervals: out.intervals,
    }
}

impl Accounting {
    /// Totals per (task, activity key), summed over processes and threads.
    pub fn per_task(&self) -> BTreeMap<(u64, u64), Usage> {
        let mut m: BTreeMap<(u64, u64), Usage> = BTreeMap::new();
        for (c, u) in &self.usage {
            let t = m.entry((c.task, c.activity_key)).or_default();
            for (r, v) in &u.by_resource {
                *t.by_resource.entry(*r).or_default() += v;
            }
            t.energy_uj += u.energy_uj;
        }
        m
    }

    /// The label of an activity key (empty for 0 or unknown).
    pub fn label(&self, key: u64) -> &str {
        self.labels.get(&key).map_or("", String::as_str)
    }

    /// Sends one causal report per (task, activity, process, thread) charged to a task, label
    /// [`REPORT_LABEL`], agent `agent`, with the fields of docs/causal-accounting.md, through the
    /// causal reporter (initialise it with the collector's sink first). Returns the number of
    /// reports. Tasks whose id is not an 8-byte TaskId are named by their first 8 bytes only.
    pub fn report(&self, agent: &'static str) -> usize {
        let mut n = 0;
        for (c, u) in &self.usage {
            let Ok(task) = causal::TaskId::from_u64(c.task) else {
                continue;
            };
            let mut ctx = causal::Context::with_task(task, true);
            let mut ev = ctx
                .event(REPORT_LABEL)
                .agent(agent)
                .kv("account.pid", c.pid)
                .kv("account.tid", c.tid)
                .kv("activity", self.label(c.activity_key).to_string());
            for r in Resource::ALL {
                ev = ev.kv(r.field(), u.get(r));
            }
            ev.kv("energy_uj", u.energy_uj.round() as u64)
                .kv("energy_source", self.energy_source.as_str())
                .report();
            n += 1;
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tally_charges_snapshot_threads_and_apportions_rapl() {
        // A fake powercap tree: one package whose counter wraps at 1,000,000 µJ.
        let dir = tempfile::tempdir().unwrap();
        let z = dir.path().join("intel-rapl:0");
        std::fs::create_dir(&z).unwrap();
        std::fs::create_dir(dir.path().join("intel-rapl:0:0")).unwrap();
        std::fs::write(z.join("max_energy_range_uj"), "1000000\n").unwrap();
        std::fs::write(z.join("energy_uj"), "0\n").unwrap();
        let pc = energy::Powercap::open(dir.path())
            .unwrap()
            .expect("one zone");
        let sensors = Sensors {
            powercap: Some(pc),
            proc_stat: dir.path().join("no-stat"),
        };
        // Counter 999,000 -> 1,000 (wrapped: 2,000 µJ) -> 5,000 (4,000 µJ); busy 100 then 80 ns.
        let samples = [(999_000, 0), (1_000, 100), (5_000, 180)]
            .map(|(e, b)| Sample {
                rapl: Some(vec![e]),
                busy_ns: b,
            })
            .to_vec();
        let mut out = program::Output::default();
        for l in [
            "A 5 backend a",
            "I",
            "C 1 10 77 5 1 50",
            "C 1 11 0 0 0 25", // a snapshot thread
            "R 1 11 0 0 0 4096",
            "I",
            "C 1 10 77 5 1 90", // running totals: 40 in this interval
            "C 1 11 0 0 0 25",
            "R 1 11 0 0 0 4096",
            "C 1 12 0 0 0 40", // not in the snapshot: no task
        ] {
            out.line(l);
        }
        let snap = BTreeMap::from([(
            (1, 11),
            ThreadState {
                tid: 11,
                task: 88,
                activity_key: 9,
                activity: "restored".into(),
                baggage: String::new(),
            },
        )]);
        let a = tally(&out, &snap, &samples, &sensors, &energy::Model::default());
        assert_eq!(a.energy_source, EnergySource::Rapl);
        let t = a.per_task();
        let t77 = &t[&(77, 5)];
        let t88 = &t[&(88, 9)];
        assert_eq!(t77.get(Resource::Cpu), 90);
        assert_eq!(t88.get(Resource::Cpu), 25);
        assert_eq!(t88.get(Resource::ReadBytes), 4096);
        assert_eq!(a.label(9), "restored");
        assert_eq!(a.label(5), "backend a");
        // Interval 0: 2,000 µJ over busy 100 ns: 77 gets 50% = 1,000, 88 gets 25% = 500.
        // Interval 1: 4,000 µJ over busy 80 ns: 77 gets 50% = 2,000, the no-task thread 2,000.
        assert_eq!(t77.energy_uj, 3000.0);
        assert_eq!(t88.energy_uj, 500.0);
        assert_eq!(t[&(0, 0)].energy_uj, 2000.0);
        assert_eq!(a.unattributed_uj, 500.0);
    }

    #[test]
    fn tally_uses_the_model_without_rapl() {
        let sensors = Sensors {
            powercap: None,
            proc_stat: PathBuf::from("/nonexistent"),
        };
        let mut out = program::Output::default();
        out.line("I");
        out.line("C 1 10 77 0 1 2000000000");
        out.line("T 1 10 77 0 1 1000");
        let m = energy::Model {
            watts_per_core: 5.0,
            joules_per_disk_byte: 0.0,
            joules_per_net_byte: 1e-6,
        };
        let a = tally(&out, &BTreeMap::new(), &[], &sensors, &m);
        assert_eq!(a.energy_source, EnergySource::Model);
        // 2 s x 5 W = 10 J, 1000 B x 1 µJ = 1 mJ: 10,001,000 µJ.
        assert!((a.per_task()[&(77, 0)].energy_uj - 10_001_000.0).abs() < 1e-6);
    }
}
